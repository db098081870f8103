"""A folder job refuses a file over what it takes (an image over ``defaults.IMAGE_MAX_BYTES``, a recording
over ``defaults.AUDIO_MAX_FILE_BYTES``) from its size alone, before hashing or reading it: the other files
are done, and a 4 GiB file costs no time."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import vllm_tasks as vt
from vllm_tasks import defaults
from vllm_tasks.jobs import folders
from vllm_tasks.testing import FakeVLLM

DATA = Path(__file__).parents[2]
PAGE, FOX = DATA / "examples/data/page.png", DATA / "tests/data/audio/fox.wav"


def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files the job hashes, from now on."""
    names: list[str] = []
    real = folders._sha256

    def recording(path: Path) -> str:
        names.append(path.name)
        return real(path)

    monkeypatch.setattr(folders, "_sha256", recording)
    return names


def sparse_copy(source: Path, path: Path, size: int) -> None:
    """``source``'s bytes, then holes up to ``size`` bytes (no disk used)."""
    shutil.copy(source, path)
    os.truncate(path, size)


@pytest.mark.parametrize(
    ("job", "fake", "good", "suffix", "cap"),
    [
        (vt.ocr_dir, "ocr_fake", PAGE, ".png", defaults.IMAGE_MAX_BYTES),
        (vt.transcribe_dir, "stt_fake", FOX, ".wav", defaults.AUDIO_MAX_FILE_BYTES),
    ],
    ids=["ocr_dir", "transcribe_dir"],
)
def test_a_file_over_the_cap_is_refused_unread_and_the_rest_done(
    job: Any, fake: str, good: Path, suffix: str, cap: int, tmp_path: Path, request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    server: FakeVLLM = request.getfixturevalue(fake)
    source = tmp_path / "in"
    source.mkdir()
    shutil.copy(good, source / f"ok{suffix}")
    sparse_copy(good, source / f"huge{suffix}", cap + 1)
    names = hashed(monkeypatch)
    report = job(server.url, source, tmp_path / "out")
    assert (report.documents, report.documents_done) == (2, 1)
    ((document, page, message),) = report.failed
    assert (document, page) == (f"huge{suffix}", None)
    assert f"over the {cap:,} this job takes" in message
    assert names == [f"ok{suffix}"]
