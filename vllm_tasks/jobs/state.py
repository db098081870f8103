"""A job's identity (its fingerprint), its lock, and its checkpoint store (:class:`Progress`), saved
atomically: every job kind keeps its state here.

The fingerprint holds what decides the output's bytes: the input's content (a SHA-256 of its bytes, not
its mtime), how rows are read from it, the served model (name, weights path, width, and its vector for a
fixed probe text, which tells a swapped model apart even under the same name), and the options that
change vectors (and whether they are dense or sparse). ``batch_size``, ``concurrency`` and the servers'
URLs are not in it: changing them resumes the same job.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Collection, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ..errors import JobError, JobMismatch
from ..images import png_from_scanlines
from .files import (
    append_no_follow,
    disk_errors,
    make_folder,
    open_no_follow,
    read_no_follow,
    write_atomically,
)

PROBE_TEXT = "vllm-tasks probe: the quick brown fox jumps over the lazy dog."
"""Embedded on every server at the start of a job: same model, same vector."""


def _gradient_png(side: int) -> bytes:
    """A ``side`` x ``side`` RGB PNG of a colour gradient."""
    rows = b"".join(
        b"\x00" + bytes(v for x in range(side) for v in (x * 255 // side, y * 255 // side, 128))
        for y in range(side)
    )
    return png_from_scanlines(side, side, rows)


PROBE_IMAGE = _gradient_png(32)
"""What an image job embeds on every server at its start, as :data:`PROBE_TEXT` for a text job."""
PROBE_MIN_COSINE = 0.999
"""Two servers (or two runs) whose probe vectors are less alike than this serve different models."""


Probe = list[float] | dict[str, float]
"""A probe vector as a fingerprint records it: dense (a list of floats) or sparse (``{token id: weight}``,
the ids as strings)."""


def cosine(first: Probe, second: Probe) -> float:
    """The cosine similarity of two vectors, both dense or both sparse (0 for different widths or kinds,
    or a zero vector).

    Examples:
        >>> cosine([1.0, 0.0], [1.0, 1.0])
        0.7071067811865475
        >>> round(cosine({"7": 1.0, "9": 1.0}, {"9": 2.0}), 4), cosine({"7": 1.0}, [1.0])
        (0.7071, 0.0)
    """
    if isinstance(first, dict) or isinstance(second, dict):
        if not (isinstance(first, dict) and isinstance(second, dict)):
            return 0.0
        ids = sorted(first.keys() | second.keys())
        first, second = [first.get(i, 0.0) for i in ids], [second.get(i, 0.0) for i in ids]
    a, b = np.asarray(first, np.float64), np.asarray(second, np.float64)
    if a.shape != b.shape or not a.any() or not b.any():
        return 0.0
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two fingerprints, one readable line per difference.

    Examples:
        >>> changes({"options": {"dimensions": None}}, {"options": {"dimensions": 128}})
        ['option dimensions: None -> 128']
    """
    lines: list[str] = []
    for section in sorted(old.keys() | new.keys()):
        before, after = old.get(section) or {}, new.get(section) or {}
        for key in sorted(before.keys() | after.keys()):
            first, second = before.get(key), after.get(key)
            if key == "probe":
                if isinstance(first, dict) != isinstance(second, dict):
                    continue  # dense vs sparse: the output section says so
                similarity = cosine(first or [], second or [])
                if similarity < PROBE_MIN_COSINE:
                    lines.append(
                        f"the server's vector for a probe text changed (cosine {similarity:.3f} with the "
                        "earlier run): the served model was swapped"
                    )
            elif first != second:
                label = {
                    "sha256": "input content",
                    "model": "served model",
                    "root": "served model weights",
                    "sparse": "sparse vectors",
                    "multi_vector": "per-token vectors",
                }
                name = label.get(key, f"{'option' if section == 'options' else section} {key}")
                shown = [str(v)[:12] + "..." if key == "sha256" and v else repr(v) for v in (first, second)]
                lines.append(f"{name}: {shown[0]} -> {shown[1]}")
    return lines


def check_same_job(out: str, earlier: dict[str, Any], fingerprint: dict[str, Any]) -> None:
    """Refuse to resume (or reuse) an earlier run's work made with another fingerprint.

    Raises:
        JobMismatch: naming each difference (input, model, option).
    """
    differences = changes(earlier, fingerprint)
    if differences:
        raise JobMismatch(out, differences)


@dataclass
class Checkpoint:
    """A job's ``state.json``: its fingerprint and its numbered groups (chunks) done, saved as they
    finish (a job of named groups, a folder job, keeps their records beside it: see :class:`Progress`).

    Attributes:
        fingerprint: the job's identity (see the module doc).
        rows, width, chunk_rows: the output's shape and how the input is cut (numbered groups only).
        done_below: every chunk below this one is done.
        done_above: chunks at or above ``done_below`` that are done too (they finish out of order).
        errors_bytes: the valid length of the work folder's errors file (a longer one is cut back).
        failed_rows: rows refused by the server so far.
        seconds: time spent over all runs.
        runs: how many runs worked on the job.
    """

    fingerprint: dict[str, Any]
    rows: int = 0
    width: int = 0
    chunk_rows: int = 1
    done_below: int = 0
    done_above: list[int] = field(default_factory=list)
    errors_bytes: int = 0
    failed_rows: int = 0
    seconds: float = 0.0
    runs: int = 0

    @property
    def chunks(self) -> int:
        """The number of chunks in the job."""
        return -(-self.rows // self.chunk_rows)

    @property
    def done(self) -> frozenset[int]:
        """Every finished chunk."""
        return frozenset(range(self.done_below)) | frozenset(self.done_above)

    def done_rows(self) -> int:
        """How many rows the finished chunks hold."""
        return sum(min(self.chunk_rows, self.rows - index * self.chunk_rows) for index in self.done)

    def mark_done(self, index: int) -> None:
        """Record chunk ``index`` as finished."""
        above = set(self.done_above) | {index}
        while self.done_below in above:
            above.discard(self.done_below)
            self.done_below += 1
        self.done_above = sorted(above)

    def save(self, path: Path) -> None:
        """Write atomically: a crash leaves the old or the new checkpoint, never half of one."""
        write_json(path, asdict(self))

    @classmethod
    def load(cls, path: Path) -> Checkpoint | None:
        """The saved checkpoint, or ``None`` when there is none (or it is from another version)."""
        try:
            return cls(**json.loads(read_no_follow(path)))
        except (OSError, ValueError, TypeError, JobError):
            return None


@dataclass(frozen=True)
class Finished:
    """What the checkpoint records of a committed group (see :meth:`Progress.commit`).

    Attributes:
        index: a numbered group (a chunk) now done, else ``None``.
        record: a named group's record, ``(name, digest of the content it came from, record)``: done for
            that content (a page of a file: redone once the file changes).
        refused: the group's refused rows (JSON objects), kept in the errors file.
    """

    index: int | None = None
    record: tuple[str, str, dict[str, Any]] | None = None
    refused: Sequence[dict[str, Any]] = ()


class Progress:
    """A job's checkpoint store, its work folder: ``state.json`` (its :class:`Checkpoint`: fingerprint,
    numbered groups done), ``records/NAME.json`` (a named group's record with the SHA-256 of the content
    it came from), ``errors.jsonl`` (the refused rows of committed groups). Every job kind resumes from it;
    only the engine commits to it.

    Attributes:
        work: the work folder.
        state: the job's checkpoint.
        resumed: it was an earlier run's (else the work folder was started afresh).
    """

    STATE = "state.json"
    RECORDS = "records"
    ERRORS = "errors.jsonl"

    def __init__(self, work: Path, state: Checkpoint, *, resumed: bool) -> None:
        self.work, self.state, self.resumed = work, state, resumed

    @classmethod
    def open(
        cls,
        work: Path,
        fingerprint: dict[str, Any],
        *,
        out: str,
        resume: bool,
        keep: Collection[str] = (),
        rows: int = 0,
        width: int = 0,
        chunk_rows: int = 1,
    ) -> Progress:
        """The earlier run's store in ``work`` when ``resume`` and its fingerprint is this one's; else a
        fresh one (everything in ``work`` removed but ``keep``, names of its entries).

        Raises:
            JobMismatch: the earlier run was of another job (input, model, options).
        """
        saved = Checkpoint.load(work / cls.STATE) if resume else None
        if saved is not None:
            check_same_job(out, saved.fingerprint, fingerprint)
            return cls(work, saved, resumed=True)
        make_folder(work)
        for entry in work.iterdir():
            if entry.name not in keep:
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
        progress = cls(work, Checkpoint(fingerprint, rows, width, chunk_rows), resumed=False)
        progress.save()
        return progress

    @classmethod
    def held_in(cls, work: Path) -> bool:
        """Whether ``work`` holds a job's state."""
        return (work / cls.STATE).is_file()

    @classmethod
    def records_of(cls, work: Path, prefix: str) -> bool:
        """Whether ``work`` holds records named under ``prefix`` (a file's pages)."""
        return (work / cls.RECORDS / prefix).is_dir()

    def save(self) -> None:
        """Save the checkpoint (atomically)."""
        self.state.save(self.work / self.STATE)

    def _record_path(self, name: str) -> Path:
        return self.work / self.RECORDS / f"{name}.json"

    def record(self, name: str, digest: str) -> dict[str, Any] | None:
        """The record of named group ``name`` made from content ``digest``, else ``None``."""
        try:
            saved = orjson.loads(read_no_follow(self._record_path(name)))
        except (OSError, orjson.JSONDecodeError, JobError):
            return None
        record: dict[str, Any] | None = saved.get("record") if saved.get("sha256") == digest else None
        return record

    def commit(self, finished: Finished) -> None:
        """Record a committed group (its outputs already durable): its record, its refused rows, its
        index, each saved atomically.

        Raises:
            InsufficientDiskSpace, JobError: the work folder cannot be written.
        """
        if finished.record is not None:
            name, digest, record = finished.record
            path = self._record_path(name)
            make_folder(path.parent)
            write_atomically(path, orjson.dumps({"sha256": digest, "record": record}))
        if finished.refused:
            lines = b"".join(orjson.dumps(row) + b"\n" for row in finished.refused)
            self.state.errors_bytes = append_no_follow(self.work / self.ERRORS, lines)
            self.state.failed_rows += len(finished.refused)
        if finished.index is not None:
            self.state.mark_done(finished.index)
        if finished.index is not None or finished.refused:
            self.save()

    def trim_errors(self) -> None:
        """Cut the errors file back to what the checkpoint covers (rows of unfinished groups go)."""
        path = self.work / self.ERRORS
        if path.exists():
            handle = open_no_follow(path, os.O_WRONLY)
            try:
                os.ftruncate(handle, self.state.errors_bytes)
            finally:
                os.close(handle)

    def refused_rows(self) -> list[dict[str, Any]]:
        """The refused rows of committed groups, in row order."""
        path = self.work / self.ERRORS
        if not path.exists():
            return []
        rows = [orjson.loads(line) for line in read_no_follow(path).splitlines() if line.strip()]
        return sorted(rows, key=lambda row: int(row["row"]))


def write_json(path: Path, payload: Any) -> None:
    """Write JSON to ``path`` atomically (:func:`~vllm_tasks.jobs.files.write_atomically`).

    Raises:
        InsufficientDiskSpace, JobError: see :func:`~vllm_tasks.jobs.files.write_atomically`.

    Examples:
        >>> write_json(Path("out.npy.manifest.json"), {"rows": 3})
    """
    write_atomically(path, json.dumps(payload, indent=1).encode())


@contextlib.contextmanager
def job_lock(path: Path, out: str) -> Iterator[None]:
    """Hold ``path`` as the exclusive lock of the job writing ``out`` (an ``flock`` with this process's
    pid in it) while the block runs, the one lock of every job; the file is removed when the block ends,
    and the folders made for it too when nothing else was put in them (a refused run leaves no trace).

    Raises:
        JobError: another run of the job holds it (naming its pid): two runs would write the same
            checkpoint, and one's ``resume=False`` would remove the other's work; or ``path`` is a
            symlink (never followed), or its folder cannot be written.
        InsufficientDiskSpace: the disk is full.
    """
    made = [folder for folder in (path.parent, *path.parent.parents) if not folder.exists()]
    make_folder(path.parent)
    try:
        with _flocked(path, out):
            yield
    finally:
        for folder in made:
            with contextlib.suppress(OSError):  # not empty: the run wrote there
                folder.rmdir()


@contextlib.contextmanager
def _flocked(path: Path, out: str) -> Iterator[None]:
    while True:
        handle = open_no_follow(path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(handle, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(handle)
            raise JobError(
                f"{out}: another run of this job is writing it (pid {holder}, lock {path}). Wait for it to "
                "end, or stop it first; then run again to resume."
            ) from None
        try:
            same = os.fstat(handle).st_ino == os.lstat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(handle)  # its holder removed it as we opened it: lock the new one
    try:
        with disk_errors(path):
            os.ftruncate(handle, 0)
            os.pwrite(handle, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        path.unlink(missing_ok=True)  # before unlocking: a waiter then retries on a fresh file
        os.close(handle)
