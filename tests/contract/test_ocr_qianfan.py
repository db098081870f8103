"""Qianfan-OCR on real vLLM against transformers on the same weights.

Fixture: `qianfan-ocr` (a tiny seeded QianfanOCRForConditionalGeneration,
server-fixtures/build_qianfan_ocr.py, on vLLM's own class: InternVLChatModel with vLLM's InternVL
processor). The reference is references.py's ``qianfan_ocr`` (transformers' GotOcr2 image processor, one
tile).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fixture_table import OCR_REFERENCE_MAX_NEW_TOKENS

import vllm_tasks as vt
from tests.contract.ocr_chat_reference import ocr_equals_transformers

pytestmark = [
    pytest.mark.contract,
    pytest.mark.vllm_min("0.32.0", "the Qianfan-OCR fixture is built and checked on today's vLLM only"),
]


@pytest.fixture(scope="module")
def client(vllm_qianfan_ocr: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_qianfan_ocr.base_url, model=vllm_qianfan_ocr.model, timeout=120) as client:
        yield client


def test_qianfan_ocr_is_recognised_and_equals_transformers(client: vt.Client) -> None:
    ocr_equals_transformers(
        client, "qianfan-ocr", "qianfan_ocr", "qianfan-ocr", OCR_REFERENCE_MAX_NEW_TOKENS, by_name=False
    )
