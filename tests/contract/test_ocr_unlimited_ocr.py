"""Unlimited-OCR through vLLM with its preset: the request path, not the numbers.

Fixture: `unlimited-ocr` (server-fixtures/build_unlimited_ocr.py: UnlimitedOCRForCausalLM with the `ocr`
fixture's tiny language model, dummy weights, the recipe's flags plus the CPU's vision attention backend,
16-token cap). Its vision towers are DeepSeek-OCR's, real-sized in vLLM's code: the server takes 1-3
minutes and 5.5 GB, one page 40-50 s on 2 cores, and every page gets the same two-token cycle: no answer is
compared here (no transformers class reads Unlimited-OCR). What is checked: the served model picks the
``unlimited-ocr`` preset, the n-gram processor of vLLM's Unlimited-OCR module is found
(``require_ngram_processor``), and the prompt vLLM built is the preset's: BOS, the 273 image tokens of a
page under 640 px (DeepSeek-OCR's global view), then the text after the literal ``<image>`` with nothing
added between them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import vllm_tasks as vt
from tests.contract.ocr_prompt_reference import IMAGES, ocr_with_ids, text_ids

pytestmark = [
    pytest.mark.contract,
    pytest.mark.vllm_min("0.32.0", "the Unlimited-OCR fixture is built and checked on today's vLLM only"),
]

BOS, IMAGE = 0, 128815
GLOBAL_VIEW_TOKENS = 16 * 17 + 1


@pytest.fixture(scope="module")
def client(vllm_unlimited_ocr: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_unlimited_ocr.base_url, timeout=600, max_retries=0) as c:
        yield c


def test_a_page_is_sent_as_unlimited_ocr_reads_it(client: vt.Client, vllm_unlimited_ocr: Any) -> None:
    result = ocr_with_ids(client, IMAGES[0], require_ngram_processor=True)
    assert result.preset == "unlimited-ocr"
    assert result.prompt == "<image>document parsing."
    text = text_ids(vllm_unlimited_ocr.base_url, result.model, result.prompt.removeprefix("<image>"))
    assert result.prompt_token_ids == [BOS, *[IMAGE] * GLOBAL_VIEW_TOKENS, *text]
    assert result.token_ids is not None and len(result.token_ids) == result.usage.completion_tokens == 16
