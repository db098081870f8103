"""olmOCR-2 and Nanonets-OCR2 (both Qwen2.5-VL fine-tunes) on real vLLM against transformers on the same
weights: one server, each preset named by the call.

Fixture: `qwen2-5-vl` (a tiny seeded Qwen2_5_VLForConditionalGeneration, server-fixtures/build_qwen2_5_vl.py,
on vLLM's own class with the pure torchvision). The reference is server-fixtures/references.py's
``qwen2_5_vl``: the processor's chat template and greedy ``generate``. The tokens are noise (random weights).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fixture_table import OCR_REFERENCE_MAX_NEW_TOKENS

import vllm_tasks as vt
from tests.contract.ocr_chat_reference import PAGES, ocr_equals_transformers

pytestmark = [
    pytest.mark.contract,
    pytest.mark.vllm_min("0.32.0", "the Qwen2.5-VL fixture is built and checked on today's vLLM only"),
]


@pytest.fixture(scope="module")
def client(vllm_qwen2_5_vl: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_qwen2_5_vl.base_url, model=vllm_qwen2_5_vl.model, timeout=120) as client:
        yield client


def test_olmocr_and_nanonets_equal_transformers_on_one_server(client: vt.Client) -> None:
    olmocr = ocr_equals_transformers(
        client, "olmocr", "qwen2_5_vl", "qwen2-5-vl", OCR_REFERENCE_MAX_NEW_TOKENS
    )
    nanonets = ocr_equals_transformers(
        client, "nanonets-ocr2", "qwen2_5_vl", "qwen2-5-vl", OCR_REFERENCE_MAX_NEW_TOKENS
    )
    assert olmocr[0] != nanonets[0]  # each preset's own prompt (olmOCR's before the page)


def test_a_served_name_no_preset_knows_is_refused_naming_them(client: vt.Client) -> None:
    with pytest.raises(vt.InvalidInputError, match="no OCR preset recognises") as caught:
        client.ocr(PAGES[0])
    assert "'olmocr'" in str(caught.value) and "'nanonets-ocr2'" in str(caught.value)
