"""DeepSeek-OCR-2 through vLLM with its preset: the request path, not the numbers.

Fixture: `deepseek-ocr2` (server-fixtures/build_deepseek_ocr2.py: DeepseekOCR2ForCausalLM with the `ocr`
fixture's tiny language model, dummy weights, DeepSeek-OCR's recipe flags, 16-token cap). vLLM fixes both
vision towers at their real size, so the server takes 1-2 minutes and 5.3 GB, and one page 15-35 s on 2
cores; with dummy weights every page gets the same two-token cycle, so no answer is compared here.
What is checked: the served model picks the ``deepseek-ocr2`` preset, the n-gram processor is found
(``require_ngram_processor``), and the prompt vLLM built is DeepSeek-OCR-2's: BOS, the 257 image tokens of
a page under 768 px (a 16 x 16 global view and its separator), then the preset's text after vLLM's newline.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import vllm_tasks as vt
from tests.contract.ocr_prompt_reference import IMAGES, ocr_with_ids, text_ids

pytestmark = [
    pytest.mark.contract,
    pytest.mark.vllm_min("0.32.0", "the DeepSeek-OCR-2 fixture is built and checked on today's vLLM only"),
]

BOS, IMAGE = 0, 128815
GLOBAL_VIEW_TOKENS = 16 * 16 + 1


@pytest.fixture(scope="module")
def client(vllm_deepseek_ocr2: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_deepseek_ocr2.base_url, timeout=600, max_retries=0) as c:
        yield c


def test_a_page_is_sent_as_deepseek_ocr2_reads_it(client: vt.Client, vllm_deepseek_ocr2: Any) -> None:
    result = ocr_with_ids(client, IMAGES[0], require_ngram_processor=True)
    assert result.preset == "deepseek-ocr2"
    text = text_ids(vllm_deepseek_ocr2.base_url, result.model, "\n" + result.prompt)
    assert result.prompt_token_ids == [BOS, *[IMAGE] * GLOBAL_VIEW_TOKENS, *text]
    assert result.token_ids is not None and len(result.token_ids) == result.usage.completion_tokens == 16
