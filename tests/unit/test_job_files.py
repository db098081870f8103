"""vllm_tasks.jobs.files, how a job touches its own files: a symlink where a job file goes is refused (or
replaced by a rename), never written through; an atomic write leaves the old content or the new one and
no temporary file; a full disk is an ``InsufficientDiskSpace`` and a folder that cannot be written a
``JobError`` naming the folder."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from vllm_tasks.errors import InsufficientDiskSpace, JobError
from vllm_tasks.jobs import files
from vllm_tasks.jobs.state import Checkpoint, job_lock, write_json


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_text("precious")
    return path


def test_a_symlinked_lock_is_refused_and_its_target_untouched(tmp_path: Path, victim: Path) -> None:
    lock = tmp_path / "out.npy.lock"
    lock.symlink_to(victim)
    with pytest.raises(JobError, match=r"out\.npy\.lock: is a symbolic link"), job_lock(lock, "out.npy"):
        pytest.fail("the lock was taken")
    assert victim.read_text() == "precious" and lock.is_symlink()


def test_an_atomic_write_replaces_a_symlink_and_not_its_target(tmp_path: Path, victim: Path) -> None:
    out = tmp_path / "out.npy.manifest.json"
    out.symlink_to(victim)
    write_json(out, {"rows": 3})
    assert victim.read_text() == "precious"
    assert not out.is_symlink() and out.read_text() == '{\n "rows": 3\n}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.npy.manifest.json", "victim.txt"]


def test_a_failed_atomic_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    out = tmp_path / "part.parquet"
    out.write_bytes(b"old")

    def broken(handle: object) -> None:
        raise ValueError("the writer failed")

    with pytest.raises(ValueError, match="the writer failed"):
        files.write_atomically(out, broken)
    assert out.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["part.parquet"]


def test_an_atomic_write_streams_chunks_and_records_before_the_rename(tmp_path: Path) -> None:
    out = tmp_path / "ids.jsonl"
    seen: list[bool] = []
    files.write_atomically(out, iter([b"1\n", b"2\n"]), before_rename=lambda: seen.append(out.exists()))
    assert out.read_bytes() == b"1\n2\n" and seen == [False]


def test_a_symlinked_checkpoint_is_not_read(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    write_json(elsewhere, {"fingerprint": {}, "rows": 1, "width": 1, "chunk_rows": 1})
    assert Checkpoint.load(elsewhere) is not None
    (tmp_path / "state.json").symlink_to(elsewhere)
    assert Checkpoint.load(tmp_path / "state.json") is None


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_full_disk_while_writing_is_insufficient_disk_space(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    def full(handle: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(InsufficientDiskSpace) as info:
        files.write_atomically(tmp_path / "state.json", b"x" * 100)
    assert info.value.path == str(tmp_path / "state.json") and info.value.needed == 100
    assert list(tmp_path.iterdir()) == []  # the temporary file is gone


@pytest.mark.parametrize("code", [errno.EACCES, errno.EPERM, errno.EROFS])
def test_a_folder_that_cannot_be_written_is_a_job_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    def refused(path: object, *args: object) -> int:
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(files.os, "open", refused)
    with pytest.raises(JobError, match=rf"^{tmp_path}: cannot be written \({os.strerror(code)}\)") as info:
        files.write_atomically(tmp_path / "out.npy.manifest.json", b"{}")
    assert not isinstance(info.value, OSError)


def test_a_read_only_folder_refuses_the_lock(tmp_path: Path) -> None:
    folder = tmp_path / "read-only"
    folder.mkdir(mode=0o555)
    if os.access(folder, os.W_OK):
        pytest.skip("running as root: mode bits do not stop root (the monkeypatched variants run)")
    with pytest.raises(JobError, match="read-only: cannot be written"), job_lock(folder / "x.lock", "x"):
        pytest.fail("the lock was taken")


def test_a_folder_that_cannot_be_made_is_a_job_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(JobError):
        files.make_folder(tmp_path / "file" / "out")


def test_other_os_errors_are_left_as_they_are() -> None:
    error = FileNotFoundError(errno.ENOENT, "No such file")
    assert files.typed_error(error, Path("/x/y")) is error
