"""``is_pdf`` (the LangChain OCR loader's and the Ray OCR callable's sniff of a local path) refuses a path
that names no readable regular file with a typed error, and never blocks on a FIFO."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vllm_tasks.errors import InvalidInputError
from vllm_tasks.integrations._common import is_pdf


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda tmp: tmp / ("n" * 300 + ".png"), id="over-name-max"),
        pytest.param(lambda tmp: str(tmp / "a\x00b.png"), id="nul-byte"),
        pytest.param(lambda tmp: tmp, id="folder"),
        pytest.param(lambda tmp: tmp / "missing.pdf", id="missing"),
        pytest.param(lambda tmp: (os.mkfifo(tmp / "pipe.pdf"), tmp / "pipe.pdf")[1], id="fifo"),
    ],
)
def test_a_path_that_is_no_regular_file_is_refused_typed(make: object, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError) as refused:
        is_pdf(make(tmp_path))  # type: ignore[operator]
    assert refused.value.field == "file_path"


def test_a_pdf_and_an_image_are_told_apart(tmp_path: Path) -> None:
    (tmp_path / "a.pdf").write_bytes(b"%PDF-1.7\n")
    (tmp_path / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    assert is_pdf(tmp_path / "a.pdf") and not is_pdf(tmp_path / "a.png")
    assert not is_pdf("https://example.com/a.pdf")
