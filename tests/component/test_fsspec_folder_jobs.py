"""``ocr_dir`` / ``transcribe_dir`` with an fsspec folder URL as the source, against FakeVLLM and fsspec's
``memory://``: the outputs equal the local folder's, byte for byte; a re-run downloads nothing and sends
nothing, an edited file is the only one downloaded and sent again, a file gone from the listing is gone
from the copy; a key naming a path outside the folder (``../``) never lands outside it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest

import vllm_tasks as vt
from vllm_tasks.jobs import locations
from vllm_tasks.testing import FakeVLLM

DATA = Path(__file__).parents[2]
PAGE, REPORT, FOX = (
    DATA / "examples/data/page.png",
    DATA / "examples/data/report.pdf",
    DATA / "tests/data/audio/fox.wav",
)
CHAT = "/v1/chat/completions"
pytestmark = pytest.mark.filterwarnings("ignore::vllm_tasks.ocr.OCRTruncatedWarning")


@pytest.fixture
def bucket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    fs = fsspec.filesystem("memory")
    name = f"folders-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    yield name
    if fs.exists(f"/{name}"):
        fs.rm(f"/{name}", recursive=True)


def outputs(folder: Path) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and ".vllm-tasks" not in path.parts and path.name != "manifest.json"
    }


def pages_sent(fake: FakeVLLM) -> int:
    return sum("image_url" in json.dumps(r.json) for r in fake.received(CHAT))


def test_an_ocr_folder_url_equals_the_local_folder(
    tmp_path: Path, bucket: str, ocr_fake: FakeVLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs = fsspec.filesystem("memory")
    local = tmp_path / "scans"
    (local / "sub").mkdir(parents=True)
    files = {"page.png": PAGE.read_bytes(), "sub/report.pdf": REPORT.read_bytes(), "notes.txt": b"skipped"}
    for name, data in files.items():
        (local / name).write_bytes(data)
        fs.pipe(f"/{bucket}/scans/{name}", data)
    fs.pipe(f"/{bucket}/scans/../escape.png", PAGE.read_bytes())  # a key no local path may follow
    fs.pipe(f"/{bucket}/scans/.hidden/x.png", PAGE.read_bytes())
    params = vt.OCRParams(max_tokens=64)
    expected = vt.ocr_dir(ocr_fake.url, local, tmp_path / "md", params=params, quality=None)
    url = f"memory://{bucket}/scans/"
    report = vt.ocr_dir(ocr_fake.url, url, tmp_path / "md2", params=params, quality=None)
    assert (report.documents, report.units) == (expected.documents, expected.units) == (2, 3)
    assert outputs(tmp_path / "md2") == outputs(tmp_path / "md") and "page.md" in outputs(tmp_path / "md2")
    copies = sorted(p.relative_to(tmp_path / "cache").as_posix() for p in (tmp_path / "cache").rglob("*.p*"))
    assert [c.split("/", 4)[-1] for c in copies] == ["page.png", "sub/report.pdf"]  # nothing outside
    assert not (tmp_path / "escape.png").exists() and not list(tmp_path.rglob("escape.png"))

    downloads: list[str] = []
    real = locations._download

    def counted(fs: Any, name: str, handle: Any) -> None:
        downloads.append(name.rsplit("/", 1)[-1])
        real(fs, name, handle)

    monkeypatch.setattr(locations, "_download", counted)
    ocr_fake.clear_requests()
    again = vt.ocr_dir(ocr_fake.url, url, tmp_path / "md2", params=params, quality=None)
    assert (downloads, pages_sent(ocr_fake), again.units_sent) == ([], 0, 0)

    fs.pipe(f"/{bucket}/scans/page.png", PAGE.read_bytes() + b"\0")  # edited: another listing entry
    fs.rm_file(f"/{bucket}/scans/sub/report.pdf")
    ocr_fake.clear_requests()
    edited = vt.ocr_dir(ocr_fake.url, url, tmp_path / "md3", params=params, quality=None)
    assert downloads == ["page.png"] and edited.documents == 1 and pages_sent(ocr_fake) == 1


def test_a_transcribe_folder_url_equals_the_local_folder(
    tmp_path: Path, bucket: str, stt_fake: FakeVLLM
) -> None:
    (tmp_path / "calls").mkdir()
    (tmp_path / "calls" / "fox.wav").write_bytes(FOX.read_bytes())
    fsspec.filesystem("memory").pipe(f"/{bucket}/calls/fox.wav", FOX.read_bytes())
    vt.transcribe_dir(stt_fake.url, tmp_path / "calls", tmp_path / "srt")
    vt.transcribe_dir(stt_fake.url, f"memory://{bucket}/calls", tmp_path / "srt2")
    assert outputs(tmp_path / "srt2") == outputs(tmp_path / "srt") and outputs(tmp_path / "srt")


def test_a_file_url_as_a_folder_source_is_refused_when_not_a_folder(
    tmp_path: Path, bucket: str, ocr_fake: FakeVLLM
) -> None:
    fsspec.filesystem("memory").pipe(f"/{bucket}/page.png", PAGE.read_bytes())
    with pytest.raises(vt.InvalidInputError, match="is not a folder"):
        vt.ocr_dir(ocr_fake.url, f"memory://{bucket}/page.png", tmp_path / "md")
