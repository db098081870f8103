"""The paddleocr-vl, glm-ocr and lighton-ocr presets: the served models they recognise (the releases' ids
and the CPU fixtures' names) and what they put on the wire (vllm_tasks/ocr/presets.py). The real servers'
proof is tests/contract/test_ocr_paddleocr_vl.py, test_ocr_glm_ocr.py and test_ocr_lighton_ocr.py."""

from __future__ import annotations

from typing import Any

import pytest
from fixture_table import FIXTURES
from pytest_httpx import HTTPXMock

from vllm_tasks import ocr as ocr_ops
from vllm_tasks.ocr.presets import GLM_OCR, LIGHTON_OCR, PADDLEOCR_VL, OCRPreset, recognised

from .test_ocr_presets import CHAT, answer, info_of, png, sent, sent_size, serve


@pytest.mark.parametrize(
    ("model_id", "root", "name"),
    [
        ("PaddlePaddle/PaddleOCR-VL", None, "paddleocr-vl"),
        ("PaddleOCR-VL-0.9B", None, "paddleocr-vl"),  # the name PaddleOCR's own client asks for
        ("served", "PaddlePaddle/PaddleOCR-VL-1.5", "paddleocr-vl"),
        ("zai-org/GLM-OCR", None, "glm-ocr"),
        ("ocr", "/models/glm_ocr", "glm-ocr"),
        ("lightonai/LightOnOCR-2-1B", None, "lighton-ocr"),
        ("served", "lightonai/LightOnOCR-1B-1025", "lighton-ocr"),
        (FIXTURES["paddleocr-vl"].served_model_name, FIXTURES["paddleocr-vl"].model_dir, "paddleocr-vl"),
        (FIXTURES["glm-ocr"].served_model_name, FIXTURES["glm-ocr"].model_dir, "glm-ocr"),
        (FIXTURES["lighton-ocr"].served_model_name, FIXTURES["lighton-ocr"].model_dir, "lighton-ocr"),
    ],
)
def test_the_releases_and_the_fixtures_are_recognised(model_id: str, root: str | None, name: str) -> None:
    found = recognised(info_of(model_id, root), None)
    assert found is not None and found.name == name


@pytest.mark.parametrize(
    "root", ["zai-org/GLM-4.1V-9B-Thinking", "PaddlePaddle/PP-DocLayoutV2", "lightonai/GTE-ModernColBERT-v1"]
)
def test_their_relatives_are_not(root: str) -> None:
    assert recognised(info_of("served", root), None) is None


@pytest.mark.parametrize(
    ("preset", "task", "prompt"),
    [
        (PADDLEOCR_VL, None, "OCR:"),
        (PADDLEOCR_VL, "table", "Table Recognition:"),
        (PADDLEOCR_VL, "formula", "Formula Recognition:"),
        (PADDLEOCR_VL, "chart", "Chart Recognition:"),
        (PADDLEOCR_VL, "spotting", "Spotting:"),
        (PADDLEOCR_VL, "seal", "Seal Recognition:"),
        (GLM_OCR, None, "Text Recognition:"),
        (GLM_OCR, "table", "Table Recognition:"),
        (GLM_OCR, "formula", "Formula Recognition:"),
    ],
)
def test_the_image_then_the_task_prompt_greedy(preset: OCRPreset, task: str | None, prompt: str) -> None:
    plan = ocr_ops.plan_request(preset, ocr_ops.OCRParams(task=task))
    parts = ocr_ops.message_content("data:image/png;base64,x", plan)
    assert [(p["type"], p.get("text")) for p in parts] == [("image_url", None), ("text", prompt)]
    expected: dict[str, object] = {"temperature": 0.0, "max_tokens": 4096}
    if task == "spotting":  # its location tokens are special tokens
        expected["skip_special_tokens"] = False
    assert plan.fields == expected


def test_lighton_sends_the_image_alone_sampled_at_most_1540_px_long(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    serve(httpx_mock, "lightonai/LightOnOCR-2-1B")
    httpx_mock.add_response(url=CHAT, json=answer("# Title"), is_reusable=True)
    result = make_client().ocr(png((3080, 1000)))
    (body,) = sent(httpx_mock)
    assert [p["type"] for p in body["messages"][0]["content"]] == ["image_url"]
    assert body["temperature"] == 0.2 and body["top_p"] == 0.9
    assert sent_size(body) == result.sent_size == (1540, 500)
    assert result.preset == LIGHTON_OCR.name and result.prompt == "" and result.markdown == "# Title"
