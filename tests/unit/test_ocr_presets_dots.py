"""The dots.ocr presets: which model ids pick ``dots-ocr``, what it and ``dots-ocr-text`` put on the wire.
Their real-vLLM check against the reference: tests/contract/test_ocr_dots.py."""

from __future__ import annotations

from typing import Any

import pytest
from pytest_httpx import HTTPXMock

from vllm_tasks.ocr.presets import DOTS_IMAGE_PLACEHOLDER, DOTS_OCR, ocr_preset

from .test_ocr_presets import CHAT, answer, info_of, png, sent, sent_size, serve


@pytest.mark.parametrize(
    ("model_id", "root"),
    [("rednote-hilab/dots.ocr", None), ("ocr", "rednote-hilab/dots.ocr"), ("dots-ocr-tiny", None)],
)
def test_a_dots_ocr_model_picks_the_layout_preset(model_id: str, root: str | None) -> None:
    assert ocr_preset(info_of(model_id, root), None) is DOTS_OCR


def test_the_layout_prompt_follows_the_image_placeholder(make_client: Any, httpx_mock: HTTPXMock) -> None:
    """dots' client: the image, then its placeholder and the prompt in one text part; its parser's
    sampling; no n-gram guard (and no processor check); sides rounded to multiples of 28."""
    serve(httpx_mock, "rednote-hilab/dots.ocr")
    httpx_mock.add_response(url=CHAT, json=answer("[]"))
    result = make_client().ocr(png((100, 90)))
    (body,) = sent(httpx_mock)
    content = body["messages"][0]["content"]
    assert [part["type"] for part in content] == ["image_url", "text"]
    assert content[1]["text"] == DOTS_OCR.tasks["layout"]
    assert content[1]["text"].startswith(DOTS_IMAGE_PLACEHOLDER + "Please output the layout information")
    assert body["temperature"] == 0.1 and body["top_p"] == 1.0
    assert "vllm_xargs" not in body and "skip_special_tokens" not in body
    assert sent_size(body) == (112, 84)
    assert result.preset == "dots-ocr"


def test_the_text_preset_is_named(make_client: Any, httpx_mock: HTTPXMock) -> None:
    serve(httpx_mock, "rednote-hilab/dots.ocr")
    httpx_mock.add_response(url=CHAT, json=answer("Hello"))
    result = make_client().ocr(png((56, 56)), preset="dots-ocr-text")
    (body,) = sent(httpx_mock)
    assert body["messages"][0]["content"][1]["text"] == (
        DOTS_IMAGE_PLACEHOLDER + "Extract the text content from this image."
    )
    assert result.preset == "dots-ocr-text"
