"""PaddleOCR-VL on real vLLM against transformers on the same weights: ``ocr()`` with the `paddleocr-vl`
preset, recognised from the served model's name.

Fixture: `paddleocr-vl` (a tiny seeded PaddleOCRVLForConditionalGeneration,
server-fixtures/build_paddleocr_vl.py, vLLM's own class, no torchvision). The reference is
server-fixtures/references.py's ``ocr-chat``: the image then the task prompt through the model's processor
and chat template, greedy ``generate``. Its vision tower resamples the learned position grid with
``align_corners=False`` as vLLM 0.32 and the release's code (Keye's ``SiglipVisionEmbeddings``) do;
transformers 5.19 sets True, which gives other tokens (the last test pins that, so a change on either side is
noticed).
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
    pytest.mark.vllm_min("0.32.0", "PaddleOCR-VL as vLLM 0.32 serves it"),
]


@pytest.fixture(scope="module")
def page() -> dict[str, Path]:
    return pages()


@pytest.fixture(scope="module")
def expected(page: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """transformers' answer per case (one reference process)."""
    release = {"align_corners": False}
    return references(
        "paddleocr-vl",
        {
            "noise": {"image": str(page["noise"]), "text": "OCR:", **release},
            "rows": {"image": str(page["rows"]), "text": "OCR:", **release},
            "table": {"image": str(page["noise"]), "text": "Table Recognition:", **release},
            "transformers-grid": {"image": str(page["noise"]), "text": "OCR:"},
        },
    )


@pytest.fixture(scope="module")
def client(vllm_paddleocr_vl: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_paddleocr_vl.base_url, model=vllm_paddleocr_vl.model, timeout=120) as client:
        yield client


def test_ocr_equals_transformers_on_two_pages(
    client: vt.Client, page: dict[str, Path], expected: dict[str, dict[str, Any]]
) -> None:
    assert_follows_the_image(expected)
    for name in ("noise", "rows"):
        result = ocr_with_ids(client, page[name])
        assert result.preset == "paddleocr-vl"
        assert_same_tokens(result, expected[name])


def test_a_task_sends_its_prompt(
    client: vt.Client, page: dict[str, Path], expected: dict[str, dict[str, Any]]
) -> None:
    assert expected["table"]["prompt_ids"] != expected["noise"]["prompt_ids"]
    assert_same_tokens(ocr_with_ids(client, page["noise"], task="table"), expected["table"])


def test_transformers_own_position_grid_gives_other_tokens(expected: dict[str, dict[str, Any]]) -> None:
    assert expected["transformers-grid"]["prompt_ids"] == expected["noise"]["prompt_ids"]
    assert expected["transformers-grid"]["ids"] != expected["noise"]["ids"]
