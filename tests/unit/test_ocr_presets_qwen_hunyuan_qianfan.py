"""The olmocr, nanonets-ocr2, hunyuan-ocr and qianfan-ocr presets: which served models they recognise (the
ids and roots operators serve them as), and the message each sends."""

from __future__ import annotations

import pytest

from vllm_tasks.ocr import OCRParams, build_body, plan_request
from vllm_tasks.ocr.presets import PRESETS, ocr_preset
from vllm_tasks.types.server import ModelCard, ServerInfo


def info_of(model_id: str, root: str | None = None) -> ServerInfo:
    return ServerInfo(
        base_url="http://h", version="0.32.0", models=(ModelCard(id=model_id, root=root),), routes=None
    )


@pytest.mark.parametrize(
    ("model_id", "root", "preset"),
    [
        ("allenai/olmOCR-2-7B-1025", None, "olmocr"),
        ("allenai/olmOCR-2-7B-1025-FP8", None, "olmocr"),
        ("olmocr", "/models/olmOCR-2-7B-1025", "olmocr"),  # olmOCR's pipeline serves it as `olmocr`
        ("nanonets/Nanonets-OCR2-3B", None, "nanonets-ocr2"),
        ("ocr", "nanonets/Nanonets-OCR-s", "nanonets-ocr2"),
        ("tencent/HunyuanOCR", None, "hunyuan-ocr"),
        ("ocr", "/root/.cache/models/hunyuan-ocr-tiny", "hunyuan-ocr"),
        ("baidu/Qianfan-OCR", None, "qianfan-ocr"),
        ("qianfan-ocr-tiny", "/models/qianfan-ocr-tiny", "qianfan-ocr"),
    ],
)
def test_each_model_is_recognised_by_its_id_or_root(model_id: str, root: str | None, preset: str) -> None:
    assert ocr_preset(info_of(model_id, root), None).name == preset


@pytest.mark.parametrize(
    ("preset", "system", "shape", "fields"),
    [
        ("olmocr", None, ["text", "image_url"], {"temperature": 0.1, "max_tokens": 8000}),
        (
            "nanonets-ocr2",
            "You are a helpful assistant.",
            ["image_url", "text"],
            {"temperature": 0.0, "max_tokens": 4096},
        ),
        (
            "hunyuan-ocr",
            "",
            ["image_url", "text"],
            {"temperature": 0.0, "top_k": 1, "repetition_penalty": 1.0, "max_tokens": 4096},
        ),
        ("qianfan-ocr", None, ["image_url", "text"], {"temperature": 0.0, "max_tokens": 4096}),
    ],
)
def test_each_preset_sends_its_recipes_messages_and_sampling(
    preset: str, system: str | None, shape: list[str], fields: dict[str, float]
) -> None:
    request = plan_request(PRESETS[preset], OCRParams())
    *before, user = build_body("data:", request, None, None)["messages"]
    assert before == ([] if system is None else [{"role": "system", "content": system}])
    assert [part["type"] for part in user["content"]] == shape
    assert user["content"][shape.index("text")]["text"] == PRESETS[preset].tasks["markdown"]
    assert {k: v for k, v in request.fields.items() if k != "messages"} == fields
