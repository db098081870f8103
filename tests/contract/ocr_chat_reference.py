"""Checks the Qwen2.5-VL, HunyuanOCR and Qianfan-OCR contract modules share: ``client.ocr`` through a real
vLLM server returns the prompt and output token ids transformers' greedy ``generate`` gives on the same
weights (server-fixtures/references.py), for two pages that give two different answers.

The reference is sent the messages the SDK builds for the preset (``plan_request`` and ``build_body``),
with the page's file in place of its data URL. The pages are 224x224 PNGs: no preset resizes them, so both
sides process the same pixels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import vllm_tasks as vt
from tests.zoo import reference as zoo_reference
from vllm_tasks.ocr import OCRParams, build_body, plan_request
from vllm_tasks.ocr.presets import PRESETS

PAGES = (
    Path(__file__).resolve().parent.parent / "data" / "ocr" / "invoice.png",
    Path(__file__).resolve().parent.parent / "data" / "ocr" / "list.png",
)


def reference_request(preset: str, page: Path, max_new_tokens: int) -> dict[str, Any]:
    """The references.py request of one page: the SDK's messages for ``preset`` (its default task), the
    image part naming the page's file."""
    messages = build_body("", plan_request(PRESETS[preset], OCRParams()), None, None)["messages"]
    for message in messages:
        if isinstance(message["content"], list):
            message["content"] = [
                {"type": "image", "path": str(page)} if p["type"] == "image_url" else p
                for p in message["content"]
            ]
    return {"messages": messages, "max_new_tokens": max_new_tokens}


def ocr_equals_transformers(
    client: vt.Client, preset: str, family: str, fixture: str, max_new_tokens: int, *, by_name: bool = True
) -> list[list[int]]:
    """Each of PAGES through ``client.ocr`` (the preset named, or recognised from the served model with
    ``by_name=False``; greedy, ``max_tokens`` within the fixture's small context) against references.py
    ``family`` on the weights ``fixture`` serves: the same prompt ids and ``max_new_tokens`` output ids (the
    fixture's cap: every answer is cut short), and two different answers. Returns the prompt ids of each
    page."""
    requests = [reference_request(preset, page, max_new_tokens) for page in PAGES]
    expected = zoo_reference(family, fixture, requests)
    answers, prompts = [], []
    for page, answer in zip(PAGES, expected, strict=True):
        with pytest.warns(vt.ocr.OCRTruncatedWarning, match="max_tokens"):
            result = client.ocr(
                page,
                preset=preset if by_name else None,
                temperature=0.0,
                max_tokens=max_new_tokens,
                extra_body={"return_token_ids": True},
            )
        assert result.preset == preset
        assert result.prompt_token_ids == answer["prompt_ids"]
        assert result.token_ids == answer["ids"]
        assert len(answer["ids"]) == max_new_tokens and result.truncated
        answers.append(answer["ids"])
        prompts.append(answer["prompt_ids"])
    assert answers[0] != answers[1]  # the answer follows the page
    return prompts
