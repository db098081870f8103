"""The DeepSeek-family OCR presets beside DeepSeek-OCR: DeepSeek-OCR-2 and Unlimited-OCR (which model ids
pick them, what each puts on the wire). Their real-vLLM checks: tests/contract/test_ocr_deepseek_ocr2.py,
test_ocr_unlimited_ocr.py."""

from __future__ import annotations

from typing import Any

import pytest
from pytest_httpx import HTTPXMock

from vllm_tasks.ocr.presets import ocr_preset

from .test_ocr_presets import CHAT, answer, info_of, png, sent, serve


@pytest.mark.parametrize(
    ("model_id", "root", "name"),
    [
        ("deepseek-ai/DeepSeek-OCR-2", None, "deepseek-ocr2"),
        ("ocr", "deepseek-ai/DeepSeek-OCR-2", "deepseek-ocr2"),
        ("deepseek-ocr2-tiny", None, "deepseek-ocr2"),
        ("ocr", "deepseek-ai/DeepSeek-OCR", "deepseek-ocr"),
        ("baidu/Unlimited-OCR", None, "unlimited-ocr"),
        ("served", "/models/unlimited_ocr", "unlimited-ocr"),
        ("unlimited-ocr-tiny", None, "unlimited-ocr"),
    ],
)
def test_the_served_model_picks_its_preset(model_id: str, root: str | None, name: str) -> None:
    assert ocr_preset(info_of(model_id, root), None).name == name


def test_deepseek_ocr2_is_sent_as_deepseek_ocr(make_client: Any, httpx_mock: HTTPXMock) -> None:
    serve(httpx_mock, "ocr", "deepseek-ai/DeepSeek-OCR-2")
    httpx_mock.add_response(url=CHAT, json=answer("<|ref|>title<|/ref|><|det|>[[1, 2, 3, 4]]<|/det|>\n# T"))
    result = make_client().ocr(png((64, 48)), ngram_size=None)
    (body,) = sent(httpx_mock)
    content = body["messages"][0]["content"]
    assert [part["type"] for part in content] == ["image_url", "text"]
    assert content[1]["text"] == "<|grounding|>Convert the document to markdown."
    assert body["temperature"] == 0.0 and body["skip_special_tokens"] is False
    assert result.preset == "deepseek-ocr2" and [b.label for b in result.blocks] == ["title"]


def test_unlimited_ocr_sends_its_tag_prompt_and_its_guard(make_client: Any, httpx_mock: HTTPXMock) -> None:
    serve(httpx_mock, "baidu/Unlimited-OCR")
    # the n-gram processor check: a loaded processor refuses ngram_size 0
    httpx_mock.add_response(
        url=CHAT,
        match_json={
            "messages": [{"role": "user", "content": "."}],
            "max_tokens": 1,
            "vllm_xargs": {"ngram_size": 0},
            "model": "baidu/Unlimited-OCR",
        },
        status_code=400,
        json={"error": {"message": "`ngram_size` has to be a strictly positive integer"}},
    )
    httpx_mock.add_response(url=CHAT, json=answer("text"))
    result = make_client().ocr(png((64, 48)), require_ngram_processor=True)
    body = sent(httpx_mock)[-1]
    content = body["messages"][0]["content"]
    assert [(part["type"], part.get("text")) for part in content] == [
        ("image_url", None),
        ("text", "<image>document parsing."),
    ]
    assert body["vllm_xargs"] == {"ngram_size": 35, "window_size": 128}
    assert body["temperature"] == 0.0 and body["skip_special_tokens"] is False
    assert result.preset == "unlimited-ocr" and result.prompt == "<image>document parsing."
