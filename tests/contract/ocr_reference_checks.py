"""What the OCR reference tests share (test_ocr_paddleocr_vl.py, test_ocr_glm_ocr.py,
test_ocr_lighton_ocr.py): two small page images that both sides read as they are, transformers' answer on each
(``server-fixtures/references.py ocr-chat``), and the check that the SDK's ``ocr()`` through vLLM carries
the same prompt and output token ids.

The pages are smaller than every preset's longest side, so the SDK sends their pixels unchanged; the server's
processor and transformers' then resize them the same way. The tokens are noise (random weights); the two
pages give two different answers, so an equal answer shows the image reached the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fixture_pins import cache_dir
from PIL import Image

import vllm_tasks as vt
from tests.zoo import reference
from vllm_tasks.ocr import OCRTruncatedWarning

#: The reference's token cap: the fixtures' ``max_new_tokens`` (fixture_table.OCR_REFERENCE_MAX_NEW_TOKENS).
MAX_NEW_TOKENS = 16


def pages() -> dict[str, Path]:
    """Two 112x84 pages at fixed paths with the same pixels every run (so tests/zoo.py keeps the reference):
    ``noise`` (seeded random pixels, landscape) and ``rows`` (dark and light bands, portrait)."""
    folder = cache_dir() / "test-images"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(5)
    bands = np.where(np.arange(112) % 8 < 3, 250, 20).astype(np.uint8)
    pictures = {
        "noise": Image.fromarray(rng.integers(0, 256, (84, 112, 3), dtype=np.uint8)),
        "rows": Image.fromarray(np.broadcast_to(bands[:, None, None], (112, 84, 3)).copy()),
    }
    paths = {}
    for name, picture in pictures.items():
        paths[name] = folder / f"ocr-{name}.png"
        picture.save(paths[name])
    return paths


def references(fixture: str, requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """transformers' answer (``prompt_ids``, ``ids``, ``text``) to each named ``ocr-chat`` request on the
    model directory ``fixture`` serves, all in one process; every request gets ``MAX_NEW_TOKENS``."""
    sent = [{"max_new_tokens": MAX_NEW_TOKENS, **request} for request in requests.values()]
    answers = reference("ocr-chat", fixture, sent)
    return dict(zip(requests, answers, strict=True))


def ocr_with_ids(client: vt.Client, image: Path, **kwargs: Any) -> vt.types.OCRResult:
    """``client.ocr(image, **kwargs)`` asking vLLM for the prompt and output token ids, ``MAX_NEW_TOKENS``
    of them (the fixtures' context is smaller than ``ocr``'s default ``max_tokens``): the random weights
    never end a page, so the SDK warns that it is truncated."""
    with pytest.warns(OCRTruncatedWarning):
        return client.ocr(image, max_tokens=MAX_NEW_TOKENS, extra_body={"return_token_ids": True}, **kwargs)


def assert_same_tokens(result: vt.types.OCRResult, expected: dict[str, Any]) -> None:
    """The SDK's ``OCRResult`` (asked with ``return_token_ids``) carries transformers' prompt and output
    ids."""
    assert result.prompt_token_ids == expected["prompt_ids"]
    assert result.token_ids == expected["ids"]
    assert len(result.token_ids) == MAX_NEW_TOKENS


def assert_follows_the_image(answers: dict[str, dict[str, Any]]) -> None:
    """The two pages give two different outputs, each more than one repeated token."""
    noise, rows = answers["noise"]["ids"], answers["rows"]["ids"]
    assert noise != rows
    assert len(set(noise)) > 1 and len(set(rows)) > 1
