"""dots.ocr through vLLM against its reference on the same weights, with the dots-ocr presets.

Fixture: `dots-ocr` (server-fixtures/build_dots_ocr.py: DotsOCRForCausalLM, tiny, seeded, served with the
recipe's ``--trust-remote-code``, 16-token cap). transformers 5.19 has no dots.ocr; the reference
(server-fixtures/references.py's ``dots_ocr``) is transformers' ``Qwen2ForCausalLM`` fed dots' vision tower
(as dots' ``modeling_dots_vision.py`` writes it), greedy, on the prompt dots' own client sends: the image
placeholder, then the prompt, in the user turn of dots' chat template. Each page's prompt ids and 16
generated ids are equal on both sides, and the two pages give two different answers. The words are noise
(random weights); the dots formats' reading of real answers is tested on published outputs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import vllm_tasks as vt
from tests.contract.ocr_prompt_reference import equals_reference
from vllm_tasks.ocr.presets import DOTS_IMAGE_PLACEHOLDER, DOTS_OCR, DOTS_OCR_TEXT

pytestmark = [
    pytest.mark.contract,
    pytest.mark.vllm_min("0.32.0", "the dots.ocr fixture is built and checked on today's vLLM only"),
]


@pytest.fixture(scope="module")
def client(vllm_dots_ocr: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_dots_ocr.base_url, timeout=120, max_retries=0) as c:
        yield c


def test_layout_prompt_equals_the_reference(client: vt.Client) -> None:
    """The preset the served model picks (``dots-ocr``), its default task (the layout prompt), greedy."""
    prompt = DOTS_OCR.tasks[DOTS_OCR.default_task].removeprefix(DOTS_IMAGE_PLACEHOLDER)
    equals_reference(
        client, family="dots-ocr", fixture="dots-ocr", picked="dots-ocr", prompt=prompt, temperature=0.0
    )


def test_text_prompt_equals_the_reference(client: vt.Client) -> None:
    prompt = DOTS_OCR_TEXT.tasks["ocr"].removeprefix(DOTS_IMAGE_PLACEHOLDER)
    equals_reference(
        client,
        family="dots-ocr",
        fixture="dots-ocr",
        picked="dots-ocr-text",
        prompt=prompt,
        preset="dots-ocr-text",
        temperature=0.0,
    )
