"""GLM-OCR on real vLLM against transformers on the same weights: ``ocr()`` with the `glm-ocr` preset,
recognised from the served model's name.

Fixture: `glm-ocr` (a tiny seeded GlmOcrForConditionalGeneration, server-fixtures/build_glm_ocr.py, served by
vLLM's own class with PyPI's torchvision without its compiled parts on the path: its processor,
Glm46VProcessor, is a torchvision one). The reference is server-fixtures/references.py's ``ocr-chat`` on the
same torchvision: the image then the task prompt through the model's processor and chat template, greedy
``generate``.
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
    pytest.mark.vllm_min("0.32.0", "GLM-OCR as vLLM 0.32 serves it"),
]


@pytest.fixture(scope="module")
def page() -> dict[str, Path]:
    return pages()


@pytest.fixture(scope="module")
def expected(page: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """transformers' answer per case (one reference process)."""
    torchvision = {"torchvision": True}
    return references(
        "glm-ocr",
        {
            "noise": {"image": str(page["noise"]), "text": "Text Recognition:", **torchvision},
            "rows": {"image": str(page["rows"]), "text": "Text Recognition:", **torchvision},
            "formula": {"image": str(page["rows"]), "text": "Formula Recognition:", **torchvision},
        },
    )


@pytest.fixture(scope="module")
def client(vllm_glm_ocr: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_glm_ocr.base_url, model=vllm_glm_ocr.model, timeout=120) as client:
        yield client


def test_ocr_equals_transformers_on_two_pages(
    client: vt.Client, page: dict[str, Path], expected: dict[str, dict[str, Any]]
) -> None:
    assert_follows_the_image(expected)
    for name in ("noise", "rows"):
        result = ocr_with_ids(client, page[name])
        assert result.preset == "glm-ocr"
        assert_same_tokens(result, expected[name])


def test_a_task_sends_its_prompt(
    client: vt.Client, page: dict[str, Path], expected: dict[str, dict[str, Any]]
) -> None:
    assert expected["formula"]["prompt_ids"] != expected["rows"]["prompt_ids"]
    assert_same_tokens(ocr_with_ids(client, page["rows"], task="formula"), expected["formula"])
