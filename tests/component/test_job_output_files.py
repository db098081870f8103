"""The files a job writes, against FakeVLLM: an output folder that is not there yet is made (API and CLI,
``embed_file``, ``ocr_dir``, ``transcribe_dir``); a symlink planted at the lock is refused and at an output
replaced, its target never written; a full disk mid-run is an ``InsufficientDiskSpace`` (CLI exit 4, for
``embed_file`` and the folder jobs) and the job resumes once there is room; a folder that cannot be
written is a ``JobError`` naming it (exit 3)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest

import vllm_tasks as vt
from vllm_tasks import cli
from vllm_tasks.testing import FakeVLLM

from ..fakes import FakeFixture

DATA = Path(__file__).parents[2]
PAGE, FOX = DATA / "examples/data/page.png", DATA / "tests/data/audio/fox.wav"
ROWS = 12


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "in.txt"
    path.write_text("".join(f"row {i}\n" for i in range(ROWS)))
    return path


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_text("precious")
    return path


@pytest.mark.parametrize("name", ["out.npy", "out.parquet"])
def test_embed_file_makes_the_output_folder(
    tmp_path: Path, source: Path, fake_embed: FakeFixture, name: str
) -> None:
    out = tmp_path / "new" / "deeper" / name
    report = vt.embed_file(fake_embed.fake.url, source, out, chunk_rows=5)
    assert report.out == out and out.is_file() and report.texts == ROWS


def test_the_cli_makes_the_output_folder(tmp_path: Path, source: Path, fake_embed: FakeFixture) -> None:
    out = tmp_path / "newdir" / "out.npy"
    assert (
        cli.main(["embed-file", str(source), "--out", str(out), "--url", fake_embed.fake.url]) == cli.EXIT_OK
    )
    assert np.load(out).shape == (ROWS, 384)


def test_folder_jobs_make_their_output_folder(tmp_path: Path, ocr_fake: FakeVLLM, stt_fake: FakeVLLM) -> None:
    (tmp_path / "scans").mkdir()
    (tmp_path / "scans" / "page.png").write_bytes(PAGE.read_bytes())
    (tmp_path / "calls").mkdir()
    (tmp_path / "calls" / "fox.wav").write_bytes(FOX.read_bytes())
    md, srt = tmp_path / "new" / "md", tmp_path / "new2" / "deeper" / "srt"
    assert not vt.ocr_dir(ocr_fake.url, tmp_path / "scans", md).failed
    assert (md / "page.md").is_file()
    argv = ["transcribe-dir", str(tmp_path / "calls"), "--out", str(srt), "--url", stt_fake.url]
    assert cli.main(argv) == cli.EXIT_OK
    assert (srt / "fox.srt").is_file()


def test_a_symlinked_lock_is_refused_and_its_target_untouched(
    tmp_path: Path, source: Path, fake_embed: FakeFixture, victim: Path
) -> None:
    out = tmp_path / "out.npy"
    (tmp_path / "out.npy.lock").symlink_to(victim)
    with pytest.raises(vt.jobs.JobError, match=r"out\.npy\.lock: is a symbolic link"):
        vt.embed_file(fake_embed.fake.url, source, out)
    argv = ["embed-file", str(source), "--out", str(out), "--url", fake_embed.fake.url]
    assert cli.main(argv) == cli.EXIT_JOB_REFUSED
    assert victim.read_text() == "precious" and not out.exists()


@pytest.mark.parametrize(
    "planted", ["out.npy", "out.npy.manifest.json", "out.npy.ids.jsonl", "out.npy.errors.jsonl"]
)
def test_a_symlink_at_an_output_is_replaced_and_its_target_untouched(
    tmp_path: Path, fake_embed: FakeFixture, victim: Path, planted: str
) -> None:
    source = tmp_path / "in.jsonl"
    texts = [f"row {i}" for i in range(ROWS)] + ["too long " * 200]  # the last is refused: an errors file
    source.write_text("".join(f'{{"id": "d{i}", "text": "{text}"}}\n' for i, text in enumerate(texts)))
    (tmp_path / planted).symlink_to(victim)
    report = vt.embed_file(fake_embed.fake.url, source, tmp_path / "out.npy", id_field="id")
    assert victim.read_text() == "precious"
    assert not (tmp_path / planted).is_symlink() and (report.texts, report.failed_rows) == (ROWS + 1, 1)


def full_disk_after(monkeypatch: pytest.MonkeyPatch, fsyncs: int) -> None:
    """Every ``fsync`` after the first ``fsyncs`` fails with ENOSPC."""
    real, calls = os.fsync, [0]

    def fsync(handle: int) -> None:
        calls[0] += 1
        if calls[0] > fsyncs:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(handle)

    monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.parametrize("name", ["out.npy", "out.parquet"])
def test_a_disk_that_fills_up_mid_run_is_insufficient_disk_space_and_the_job_resumes(
    tmp_path: Path, source: Path, fake_embed: FakeFixture, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    out = tmp_path / name
    full_disk_after(monkeypatch, 6)  # the checkpoint and the first chunk(s), then full
    with pytest.raises(vt.jobs.InsufficientDiskSpace) as info:
        vt.embed_file(fake_embed.fake.url, source, out, chunk_rows=2, concurrency=1)
    assert str(tmp_path) in info.value.path and not out.exists()
    argv = ["embed-file", str(source), "--out", str(out), "--url", fake_embed.fake.url, "--chunk-rows", "2"]
    assert cli.main(argv) == cli.EXIT_DISK_FULL
    monkeypatch.undo()
    report = vt.embed_file(fake_embed.fake.url, source, out, chunk_rows=2)
    assert report.chunks_resumed > 0 and report.texts == ROWS


@pytest.mark.parametrize("code", [errno.EACCES, errno.EROFS])
def test_an_output_folder_that_cannot_be_written_is_a_job_error_naming_it(
    tmp_path: Path, source: Path, fake_embed: FakeFixture, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    folder = tmp_path / "read-only"
    folder.mkdir()
    real = os.open

    def refused(path: str | os.PathLike[str], flags: int, *args: int, **kwargs: int) -> int:
        if str(path).startswith(str(folder)) and flags & (os.O_WRONLY | os.O_RDWR):
            raise OSError(code, os.strerror(code), str(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refused)
    with pytest.raises(vt.jobs.JobError, match=rf"^{folder}: cannot be written \({os.strerror(code)}\)"):
        vt.embed_file(fake_embed.fake.url, source, folder / "out.npy")
    argv = ["embed-file", str(source), "--out", str(folder / "out.npy"), "--url", fake_embed.fake.url]
    assert cli.main(argv) == cli.EXIT_JOB_REFUSED


def test_a_folder_job_on_a_full_disk_is_insufficient_disk_space(
    tmp_path: Path, ocr_fake: FakeVLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "scans").mkdir()
    for index in range(3):
        (tmp_path / "scans" / f"p{index}.png").write_bytes(PAGE.read_bytes())
    full_disk_after(monkeypatch, 3)
    with pytest.raises(vt.jobs.InsufficientDiskSpace, match=str(tmp_path / "md")):
        vt.ocr_dir(ocr_fake.url, tmp_path / "scans", tmp_path / "md")
    argv = ["ocr-dir", str(tmp_path / "scans"), "--out", str(tmp_path / "md"), "--url", ocr_fake.url]
    assert cli.main(argv) == cli.EXIT_DISK_FULL
    monkeypatch.undo()
    assert cli.main(argv) == cli.EXIT_OK
