"""Checks shared by the contract tests of dots.ocr, Unlimited-OCR and DeepSeek-OCR-2 through ``client.ocr``.

The images are two small pages (sides multiples of 28, under every preset's ``max_side``), so the SDK sends
them as they are and vLLM and the reference see the same pixels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fixture_table import OCR_REFERENCE_MAX_NEW_TOKENS

import vllm_tasks as vt
from tests.zoo import reference as zoo_reference
from vllm_tasks.ocr import OCRTruncatedWarning
from vllm_tasks.types import OCRResult

DATA = Path(__file__).resolve().parent.parent / "data" / "ocr"
#: Two different pages: 112 x 84 and 140 x 112 pixels, black text on white.
IMAGES = (DATA / "small-hello-112x84.png", DATA / "small-invoice-140x112.png")


def ocr_with_ids(client: vt.Client, image: Path, **kwargs: Any) -> OCRResult:
    """``client.ocr`` on ``image`` with the served token ids returned, capped at the fixtures' token cap
    (the random model never stops: the page is truncated, and says so); the preset is the one the SDK
    picks from the served model."""
    with pytest.warns(OCRTruncatedWarning):
        result = client.ocr(
            image,
            max_tokens=OCR_REFERENCE_MAX_NEW_TOKENS,
            extra_body={"return_token_ids": True},
            **kwargs,
        )
    assert result.truncated
    return result


def equals_reference(
    client: vt.Client, *, family: str, fixture: str, picked: str, prompt: str, **kwargs: Any
) -> list[OCRResult]:
    """Both pages through the SDK (``client.ocr(page, **kwargs)``) equal the reference (``references.py
    FAMILY`` on ``prompt``, greedy, same weights): prompt ids and generated ids; the two pages give two
    different answers on both sides; each result names the preset ``picked``."""
    requests = [
        {"image": str(image), "prompt": prompt, "max_new_tokens": OCR_REFERENCE_MAX_NEW_TOKENS}
        for image in IMAGES
    ]
    expected = zoo_reference(family, fixture, requests)
    assert expected[0]["ids"] != expected[1]["ids"]  # the answer follows the image
    assert all(len(answer["ids"]) == OCR_REFERENCE_MAX_NEW_TOKENS for answer in expected)
    results = [ocr_with_ids(client, image, **kwargs) for image in IMAGES]
    for result, answer in zip(results, expected, strict=True):
        assert result.preset == picked
        assert result.prompt_token_ids == answer["prompt_ids"]
        assert result.token_ids == answer["ids"]
    return results


def text_ids(base_url: str, model: str, text: str) -> list[int]:
    """The served tokenizer's ids of ``text`` (vLLM's ``/tokenize``, no special tokens added)."""
    answer = httpx.post(
        f"{base_url}/tokenize", json={"model": model, "prompt": text, "add_special_tokens": False}, timeout=60
    )
    answer.raise_for_status()
    tokens: list[int] = answer.json()["tokens"]
    return tokens
