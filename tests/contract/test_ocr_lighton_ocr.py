"""LightOnOCR-2 on real vLLM against transformers on the same weights: ``ocr()`` with the `lighton-ocr`
preset (the image alone), recognised from the served model's name.

Fixture: `lighton-ocr` (a tiny seeded LightOnOCR checkpoint, server-fixtures/build_lighton_ocr.py: the
release's Mistral-3 config and PixtralProcessor files) served by vLLM's own
``LightOnOCRForConditionalGeneration`` with PyPI's torchvision without its compiled parts on the path (the
log's "Resolved architecture"; without torchvision vLLM falls back to its Transformers backend). The
reference is server-fixtures/references.py's ``ocr-chat`` with transformers' ``LightOnOcrProcessor`` and
``LightOnOcrForConditionalGeneration`` on the same files: the image alone through the chat template, greedy
``generate``. The preset samples at temperature 0.2 as the model card says; the comparison asks for 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import vllm_tasks as vt
from tests.contract.ocr_reference_checks import (
    assert_follows_the_image,
    assert_same_tokens,
    ocr_with_ids,
    pages,
    references,
)

pytestmark = [
    pytest.mark.contract,
    pytest.mark.vllm_min("0.32.0", "LightOnOCR as vLLM 0.32 serves it"),
]

#: transformers' classes for the release's files (their config says ``mistral3``).
LIGHTON = {
    "torchvision": True,
    "processor_class": "LightOnOcrProcessor",
    "model_class": "LightOnOcrForConditionalGeneration",
}


@pytest.fixture(scope="module")
def page() -> dict[str, Path]:
    return pages()


@pytest.fixture(scope="module")
def expected(page: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """transformers' answer per page (one reference process)."""
    return references("lighton-ocr", {name: {"image": str(path), **LIGHTON} for name, path in page.items()})


@pytest.fixture(scope="module")
def client(vllm_lighton_ocr: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_lighton_ocr.base_url, model=vllm_lighton_ocr.model, timeout=120) as client:
        yield client


def test_ocr_equals_transformers_on_two_pages(
    client: vt.Client, page: dict[str, Path], expected: dict[str, dict[str, Any]]
) -> None:
    assert_follows_the_image(expected)
    for name in ("noise", "rows"):
        result = ocr_with_ids(client, page[name], temperature=0.0)
        assert result.preset == "lighton-ocr"
        assert result.prompt == ""
        assert_same_tokens(result, expected[name])
