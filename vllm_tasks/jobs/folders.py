"""Folder jobs: every matching file under a folder, one unit of work at a time (a PDF page, an audio
file), resumably, over one or several servers (``ocr_dir``, ``transcribe_dir``).

Each finished unit is saved at once as its own record, ``OUT/.vllm-tasks/records/<file>/<unit>.json``
(written to a temporary file, ``fsync``ed, renamed), holding the SHA-256 of the file it came from. A run
skips every unit whose record is there for the file's current content, so nothing finished is redone
after ``kill -9`` or Ctrl-C, and an edited file is redone. A file's outputs are written (atomically)
once all its units are done. A unit that fails (a refused request, an unreadable file) is recorded in
``OUT/errors.jsonl`` and tried again by the next run; the job goes on with the others.
The work folder is the job's checkpoint store (:class:`~vllm_tasks.jobs.state.Progress`, as every job's):
``OUT/.vllm-tasks/state.json`` holds the job's fingerprint (the served model and the options that change
the output): a run with another one refuses to resume.

Nothing the job did not write is overwritten: every file it writes under ``OUT`` is listed, with the
SHA-256 of its bytes, in ``OUT/.vllm-tasks/written.jsonl`` before it is renamed into place. A run first
checks every path it may write (each file's outputs, ``manifest.json``, ``errors.jsonl``, the job's own
summary files): one that exists and is not, byte for byte, a file the job wrote (a user's ``notes.md``,
an output edited by hand, a folder) is refused with :class:`InvalidInputError` before any request; so is
an input whose output would be one of the job's own files (``manifest.wav`` -> ``manifest.json``), and an
``out`` that is the input folder or not a folder.

One run per output folder at a time: a run holds ``OUT/.vllm-tasks/lock`` (see
:func:`~vllm_tasks.jobs.state.job_lock`) from
before it reads the folder to its end; a second one is refused with :class:`JobError` naming the first
one's pid, before it changes anything. A file the job cannot take fails alone, listed in ``errors.jsonl``
like a refused page, before any request for it: a path that is not UTF-8 (the job's JSON files cannot
name it), an output name longer than the file system allows (``NAME_MAX`` bytes), an output that would
be the folder of another file's outputs, a file that cannot be read (at the start, or deleted or made
unreadable during the run).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import orjson

from ..errors import (
    APIStatusError,
    InvalidInputError,
)
from ..types.server import ServerInfo
from .engine import Engine
from .files import append_no_follow, make_folder, read_no_follow, write_atomically, write_in_thread
from .locations import source_folder
from .progress import JobProgress
from .replicas import JobClient, Replica, ReplicaPool, Servers
from .scaffold import JobSettings, ReplicaReport, job_servers, replica_reports, served_section
from .state import Finished, Progress, job_lock

logger = logging.getLogger("vllm_tasks.jobs")

WORK = ".vllm-tasks"
"""The work folder inside the output folder: the job's state and its units' records."""
WRITTEN = "written.jsonl"
"""In the work folder: every file the job wrote under the output folder, with its bytes' SHA-256."""
LOCK = "lock"
"""In the work folder: the lock of the run writing the output folder (no output is ever in there: hidden
folders are not read)."""
JOB_FILES = ("manifest.json", "errors.jsonl")
"""The files every folder job writes at the top of the output folder (a job may add its own)."""
Unit = int | None
"""A page number (1-based), or ``None`` for a whole file."""


@dataclass(frozen=True)
class Document:
    """One input file of a folder job.

    Attributes:
        path: the file.
        relative: its path under the input folder (POSIX), its outputs' path under the output folder.
        sha256: its content's SHA-256.
    """

    path: Path
    relative: str
    sha256: str


@dataclass(frozen=True)
class FolderJobReport:
    """What :func:`ocr_dir` or :func:`transcribe_dir` did.

    Attributes:
        out: the output folder.
        documents: input files found.
        documents_done: files whose outputs are complete.
        unit: what a unit is: ``page`` (``ocr_dir``) or ``file`` (``transcribe_dir``).
        units: units in the job.
        units_sent: units processed by this run.
        units_resumed: units found done by earlier runs.
        failed: ``(file, page, message)`` of each unit that failed in this run (tried again next run);
            ``page`` is ``None`` for a whole file (one that does not open, cannot be read, or whose name
            the job cannot write: see the module doc). A file name that is not UTF-8 is as
            ``os.fsdecode`` gives it (``errors.jsonl`` writes its bytes as ``\\xNN``).
        errors_file: ``OUT/errors.jsonl`` listing them, or ``None`` when there are none.
        manifest: ``OUT/manifest.json``.
        seconds: this run's wall time.
        replicas: per server, what it did in this run.
    """

    out: Path
    documents: int
    documents_done: int
    unit: str
    units: int
    units_sent: int
    units_resumed: int
    failed: tuple[tuple[str, int | None, str], ...]
    errors_file: Path | None
    manifest: Path
    seconds: float
    replicas: tuple[ReplicaReport, ...]

    @property
    def complete(self) -> bool:
        """Every unit of every file is done."""
        return not self.failed and self.documents_done == self.documents

    def summary(self) -> str:
        """One line for a terminal, e.g. ``"scans: 12/12 file(s) done, 230 page(s), 200 resumed"``."""
        parts = [
            f"{self.out}: {self.documents_done}/{self.documents} file(s) done, {self.units} {self.unit}(s)"
        ]
        if not self.units_sent and self.complete:
            parts.append("already complete; nothing to do")
        elif self.units_resumed:
            parts.append(f"{self.units_resumed} resumed")
        if self.failed:
            parts.append(f"{len(self.failed)} failed (see {self.errors_file}; run again to retry them)")
        return ", ".join(parts)


class FolderJob(ABC):
    """What a kind of folder job does; :func:`run_folder_job` does the rest.

    Attributes:
        kind: the job's name (``ocr``, ``transcribe``).
        suffixes: the file suffixes it takes (lower case, with the dot).
        unit: what one unit is, for progress (``page``, ``file``).
        fingerprint: the options that change the output.
    """

    kind: str
    suffixes: frozenset[str]
    unit: str
    own_files: tuple[str, ...] = JOB_FILES
    """The files the job writes at the top of the output folder (no input's output may be one)."""

    @property
    @abstractmethod
    def output_suffixes(self) -> tuple[str, ...]:
        """The suffixes of a file's outputs (``.md``; ``.srt``, ``.json``, ...), next to its relative path."""

    @property
    @abstractmethod
    def fingerprint(self) -> dict[str, Any]:
        """The options that change the output (not concurrency, progress or formats rendered later)."""

    @abstractmethod
    def units(self, document: Document) -> list[Unit]:
        """A file's units (called in a worker thread).

        Raises:
            InvalidInputError: the file cannot be read: the whole file is recorded as failed.
        """

    @abstractmethod
    def process(self, client: JobClient, document: Document, unit: Unit) -> Awaitable[dict[str, Any]]:
        """Process one unit on one server; its record (JSON-friendly)."""

    @abstractmethod
    def render(self, document: Document, records: list[dict[str, Any]]) -> dict[str, bytes]:
        """A finished file's outputs, by suffix (one per :attr:`output_suffixes`), from its units'
        records in order."""

    @abstractmethod
    def finish(self, out: OutputFolder, done: Iterator[tuple[Document, list[dict[str, Any]]]]) -> None:
        """After a run: write whatever covers every finished file (``done``: each with its records, read
        one file at a time) through ``out``."""

    def done(self, record: dict[str, Any]) -> bool:
        """Whether a saved unit is finished (else the next run does it again, the record still rendered
        meanwhile): every unit by default."""
        return True

    def rejected(self, document: Document, records: list[dict[str, Any]]) -> str | None:
        """Why a file whose units are all saved must not be written (listed as failed instead), else
        ``None``: never by default."""
        return None

    def outputs(self, document: Document) -> list[str]:
        """A file's outputs' paths relative to the output folder (POSIX)."""
        return [output_name(document, suffix) for suffix in self.output_suffixes]

    def max_bytes(self, document: Document) -> int | None:
        """The largest file the job takes as ``document`` (``None``: no limit); a larger one is refused
        before it is read or hashed."""
        return None


def output_name(document: Document, suffix: str) -> str:
    """A file's output with ``suffix``, relative to the output folder: its relative path, suffix replaced.

    Examples:
        >>> output_name(Document(Path("calls/day2/a.wav"), "day2/a.wav", ""), ".srt")
        'day2/a.srt'
    """
    return Path(document.relative).with_suffix(suffix).as_posix()


def check_folders(source: Path, out: Path) -> None:
    """Refuse an output folder that is the input folder, or that exists and is not a folder.

    Raises:
        InvalidInputError: ``out`` is ``source`` (its outputs would be mixed with the inputs), or
            names a file (or anything but a folder); either cannot be a path (a NUL byte, a name over
            ``NAME_MAX``).
    """
    if _resolved("out", out) == _resolved("source", source):
        raise InvalidInputError(
            "out",
            str(out),
            f"is the input folder {source}",
            "Pass another folder for the outputs (a subfolder of the input is fine: it is not read).",
        )
    if (out.exists() or out.is_symlink()) and not out.is_dir():
        raise InvalidInputError(
            "out",
            str(out),
            "exists and is not a folder",
            "Pass a folder (made if missing), or move that file away.",
        )


def _resolved(field: str, path: Path) -> Path:
    """``path.resolve()``; a path that cannot be one (a NUL byte, a name over ``NAME_MAX``) refused."""
    try:
        return path.resolve()
    except (OSError, ValueError) as error:
        problem = f"cannot be a path ({getattr(error, 'strerror', None) or error})"
        raise InvalidInputError(field, str(path), problem, "Pass the path of a folder.") from None


def find_inputs(source: Path, out: Path, suffixes: frozenset[str]) -> list[Path]:
    """Every file under ``source`` (recursive, sorted) with one of ``suffixes``; ``out`` and hidden
    folders skipped.

    Raises:
        InvalidInputError: ``source`` is not a folder, holds no such file, or two files would write the
            same outputs (``a.pdf`` and ``a.png`` in one folder).
    """
    if not source.is_dir():
        raise InvalidInputError("source", str(source), "is not a folder", "Pass a folder of input files.")
    skip = out.resolve()
    paths = sorted(
        path
        for path in source.rglob("*")
        if path.suffix.lower() in suffixes
        and path.is_file()
        and not path.resolve().is_relative_to(skip)
        and not any(part.startswith(".") for part in path.relative_to(source).parts)
    )
    if not paths:
        raise InvalidInputError(
            "source",
            str(source),
            f"holds no file ending in {', '.join(sorted(suffixes))}",
            "Pass a folder that holds such files (subfolders are searched too).",
        )
    stems: dict[str, Path] = {}
    for path in paths:
        stem = path.relative_to(source).with_suffix("").as_posix()
        if stem in stems:
            raise InvalidInputError(
                "source",
                f"{stems[stem]} and {path}",
                "would write the same output files (same name, other suffix)",
                "Rename one of them, or put it in another folder.",
            )
        stems[stem] = path
    return paths


def take_documents(
    job: FolderJob, source: Path, paths: Sequence[Path], name_max: int
) -> tuple[list[Document], dict[str, InvalidInputError]]:
    """Each file as a :class:`Document`, hashed, and the error of each one the job cannot take (see
    :func:`unnameable`, :func:`unreadable`) by relative path: that one's ``sha256`` is empty, and it is
    recorded as failed while the others are done.
    """
    documents = [Document(path, path.relative_to(source).as_posix(), "") for path in paths]
    folders: dict[str, str] = {}
    for document in documents:
        for name in job.outputs(document):
            for parent in PurePosixPath(name).parents:
                folders.setdefault(parent.as_posix(), document.relative)
    found: list[Document] = []
    refused: dict[str, InvalidInputError] = {}
    for document in documents:
        error = unnameable(job, document, folders, name_max)
        if error is None:
            try:
                error = oversized(document, job.max_bytes(document))
                if error is None:
                    found.append(dataclasses.replace(document, sha256=_sha256(document.path)))
                    continue
            except OSError as problem:
                error = unreadable(document, problem)
        refused[document.relative] = error
        found.append(document)
    return found, refused


def unnameable(
    job: FolderJob, document: Document, folders: dict[str, str], name_max: int
) -> InvalidInputError | None:
    """Why the job cannot name ``document``'s outputs, else ``None``: its path is not UTF-8 (the job's
    JSON files could not hold it), an output's name is over ``name_max`` bytes (the file system's
    limit), or an output would be a folder of another file's outputs (``folders``: each folder, with
    the first file whose outputs are in it).
    """
    try:
        document.relative.encode()
    except UnicodeEncodeError:
        return InvalidInputError(
            "source",
            os.fsencode(document.relative),
            "has a name that is not valid UTF-8 (the job's outputs and JSON files could not name it)",
            "Rename it (or its folder) to a UTF-8 name, e.g. with convmv -f latin1 -t utf8, and run again.",
        )
    for name in job.outputs(document):
        size = len(PurePosixPath(name).name.encode())
        if size > name_max:
            allowed = len(document.path.name.encode()) - (size - name_max)
            return InvalidInputError(
                "source",
                document.relative,
                f"its {PurePosixPath(name).suffix} output's name would be {size} bytes long, over the "
                f"{name_max} a file name may have on the output's file system",
                f"Rename it to a shorter name (at most {allowed} bytes)"
                + (", or leave out that output format." if len(job.output_suffixes) > 1 else "."),
            )
        if name in folders:
            return InvalidInputError(
                "source",
                document.relative,
                f"would write {name}, the folder of {folders[name]}'s outputs",
                "Rename one of them, or move it into another folder.",
            )
    return None


def oversized(document: Document, max_bytes: int | None) -> InvalidInputError | None:
    """The failure of a file over ``max_bytes`` (read from its size alone), else ``None``.

    Raises:
        OSError: its size cannot be read.
    """
    size = document.path.stat().st_size
    if max_bytes is None or size <= max_bytes:
        return None
    return InvalidInputError(
        "source",
        document.relative,
        f"is {size:,} bytes, over the {max_bytes:,} this job takes",
        "Shrink or split it, or take it out of the folder (the rest of the job is done).",
    )


def unreadable(document: Document, error: OSError) -> InvalidInputError:
    """The failure of a file that cannot be read (unreadable from the start; deleted, moved or made
    unreadable during the run).

    Raises:
        OSError: ``error`` itself when it is not about the file (a full disk, too many open files).
    """
    if error.filename != os.fspath(document.path):
        raise error
    return InvalidInputError(
        "source",
        document.relative,
        f"cannot be read ({error.strerror or error})",
        "Put it back or make it readable, and run again (the rest of the job is kept); or take it out of "
        "the folder.",
    )


def units_of(job: FolderJob, document: Document) -> list[Unit]:
    """``job.units(document)``, a file that cannot be read raised as :func:`unreadable`'s error.

    Raises:
        InvalidInputError: the file cannot be read or decoded.
    """
    try:
        return job.units(document)
    except OSError as error:
        raise unreadable(document, error) from error


def shown(text: str) -> str:
    """``text`` as valid UTF-8, for a JSON file or a log: the bytes of a name that is not UTF-8 (the
    surrogates of ``os.fsdecode``) as ``\\xNN``.

    Examples:
        >>> shown(os.fsdecode(b"caf\\xe9/scan.png"))
        'caf\\\\xe9/scan.png'
    """
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate os.fsdecode does not make (from a server's JSON)
        return text.encode("utf-8", "backslashreplace").decode()


def name_max(folder: Path) -> int:
    """The longest file name (in bytes) ``folder``'s file system takes; 255 when it does not say."""
    with contextlib.suppress(OSError, ValueError):
        limit = os.pathconf(folder, "PC_NAME_MAX")
        if limit > 0:
            return limit
    return 255


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def check_job_files(job: FolderJob, documents: Sequence[Document]) -> None:
    """Refuse an input whose output would be one of the job's own files (``manifest.wav`` ->
    ``manifest.json``), compared ignoring case (as macOS and Windows name files).

    Raises:
        InvalidInputError: naming the input, the output and the job's file.
    """
    own = {name.casefold(): name for name in job.own_files}
    for document in documents:
        for name in job.outputs(document):
            if name.casefold() in own:
                raise InvalidInputError(
                    "source",
                    document.relative,
                    f"would write {name}, the job's own {own[name.casefold()]} (one would overwrite "
                    "the other)",
                    f"Rename {document.path}, or move it into a subfolder"
                    + (", or leave out that output format." if len(job.output_suffixes) > 1 else "."),
                )


class OutputFolder:
    """The output folder: files written atomically, each listed with its SHA-256 in
    ``.vllm-tasks/written.jsonl`` before it is renamed into place, and nothing overwritten that is not
    a file the job wrote (:meth:`check`, at the start of a run).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._ledger = root / WORK / WRITTEN
        self._lock = threading.Lock()

    def _written(self) -> dict[str, set[str]]:
        """The ledger: each relative path with every SHA-256 the job wrote there (a torn last line,
        from a kill, is skipped)."""
        written: dict[str, set[str]] = {}
        try:
            lines = read_no_follow(self._ledger).splitlines()
        except FileNotFoundError:
            return written
        for line in lines:
            try:
                entry = orjson.loads(line)
                written.setdefault(entry["path"], set()).add(entry["sha256"])
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue
        return written

    def check(self, names: Iterable[str], legacy: Iterable[str] = ()) -> None:
        """Refuse to start when any of ``names`` (relative paths the run may write) exists and is not a
        file the job wrote, byte for byte; then keep one ledger line per output now in place.

        ``legacy``: names taken as the job's own when the work folder predates the ledger (an earlier
        version's: its state is there, its ledger not).

        Raises:
            InvalidInputError: naming the file and the fix.
        """
        written = self._written()
        adopt = not self._ledger.exists() and Progress.held_in(self.root / WORK)
        adopted = set(legacy) if adopt else set()
        kept: dict[str, str] = {}
        for name in dict.fromkeys(names):
            path = self.root / name
            if not (path.exists() or path.is_symlink()):
                continue
            digest = _sha256(path) if path.is_file() and not path.is_symlink() else None
            if digest is not None and (digest in written.get(name, ()) or name in adopted):
                kept[name] = digest
                continue
            raise InvalidInputError(
                "out",
                str(self.root),
                f"holds {name}, which was not written by this job"
                + (" (changed since it was)" if name in written else "")
                + ", and the run would overwrite it",
                f"Move {path} out of the output folder, or choose another out folder.",
            )
        for name, digests in written.items():  # outputs not asked for now (another format) stay ours
            path = self.root / name
            if name not in kept and path.is_file() and not path.is_symlink():
                digest = _sha256(path)
                if digest in digests:
                    kept[name] = digest
        if kept or self._ledger.exists():
            make_folder(self._ledger.parent)
            lines = [orjson.dumps({"path": name, "sha256": digest}) + b"\n" for name, digest in kept.items()]
            write_atomically(self._ledger, b"".join(lines))

    def _record(self, name: str, digest: str) -> None:
        line = orjson.dumps({"path": name, "sha256": digest}) + b"\n"
        with self._lock:
            make_folder(self._ledger.parent)
            append_no_follow(self._ledger, line)

    def write(self, name: str, data: bytes) -> Path:
        """Write ``data`` to ``name`` (relative) atomically, listed in the ledger before the rename."""
        return self.write_chunks(name, [data])

    def write_chunks(self, name: str, chunks: Iterable[bytes]) -> Path:
        """Write ``chunks`` (streamed) to ``name`` (relative) atomically, listed before the rename.

        The temporary file is made in the work folder (``.vllm-tasks/tmp/``, a unique name), not next
        to the output, where it could be a user's ``report.md.tmp``.
        """
        path = self.root / name
        temporaries = self.root / WORK / "tmp"
        make_folder(path.parent)
        make_folder(temporaries)
        digest = hashlib.sha256()

        def hashed() -> Iterator[bytes]:
            for chunk in chunks:
                digest.update(chunk)
                yield chunk

        write_atomically(
            path,
            hashed(),
            temporaries=temporaries,
            before_rename=lambda: self._record(name, digest.hexdigest()),
        )
        return path


async def run_folder_job(
    job: FolderJob,
    servers: Servers,
    source: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    resume: bool,
    settings: JobSettings,
) -> FolderJobReport:
    """Run a folder job to the end (see the module doc).

    Raises:
        InvalidInputError: no such folder, no matching file, two files with the same outputs.
        JobError: another run is writing ``out`` (naming its pid).
        JobMismatch: an earlier run in ``out`` served another model or had other options.
        ReplicaMismatch: the servers serve different models.
        APIError: a fatal answer (401, 404, ...), or every server down for ``give_up_after`` seconds.
    """
    started = time.monotonic()
    folder, target = await asyncio.to_thread(source_folder, source, job.suffixes), Path(out)
    await asyncio.to_thread(check_folders, folder, target)
    with job_lock(target / WORK / LOCK, str(target)):
        documents, refused, written = await asyncio.to_thread(_prepare, job, folder, target)
        # not hedged: a unit's request may take many times the job's median (a dense page, a long file)
        async with job_servers(servers, settings, _describe, out=str(target), hedge=False) as running:
            fingerprint = {"model": running.served, "options": job.fingerprint}
            # all but the list of the files written (they are still there), the lock
            progress = Progress.open(
                target / WORK, fingerprint, out=str(target), resume=resume, keep=(WRITTEN, LOCK)
            )
            return await _FolderRun(
                job,
                out=written,
                documents=documents,
                refused=refused,
                pool=running.pool,
                progress=progress,
            ).run(
                show_progress=settings.show_progress,
                progress_interval=settings.progress_interval,
                started=started,
            )


def _prepare(
    job: FolderJob, source: Path, out: Path
) -> tuple[list[Document], dict[str, InvalidInputError], OutputFolder]:
    """Holding the lock: the documents (and the error of each one the job cannot take), checked
    against the job's own files and against what ``out`` holds.

    Raises:
        InvalidInputError: see :func:`find_inputs`, :func:`check_job_files`, :meth:`OutputFolder.check`.
    """
    paths = find_inputs(source, out, job.suffixes)
    documents, refused = take_documents(job, source, paths, name_max(out))
    taken = [document for document in documents if document.relative not in refused]
    check_job_files(job, taken)
    written = OutputFolder(out)
    names = [*job.own_files, *(name for document in taken for name in job.outputs(document))]
    legacy = [
        *job.own_files,
        *(
            name
            for document in taken
            if Progress.records_of(out / WORK, document.relative)
            for name in job.outputs(document)
        ),
    ]
    written.check(names, legacy)
    return documents, refused, written


async def _describe(replica: Replica, info: ServerInfo) -> dict[str, Any]:
    """What a folder job records of a server's model: its name and weights."""
    name = replica.client.model or info.default_model
    return {"model": name, "root": next((card.root for card in info.models if card.id == name), None)}


@dataclass
class _UnitWork:
    """A unit being processed: its record once answered (``None``: refused)."""

    document: Document
    unit: Unit
    record: dict[str, Any] | None = None


class _FolderRun:
    """One run of a folder job on the :class:`~vllm_tasks.jobs.engine.Engine` (its
    :class:`~vllm_tasks.jobs.engine.JobKind`): each unit left one group of one row, one request, its
    record saved in the checkpoint as it is answered (named ``FILE/PAGE``, with the file's SHA-256), a
    file's outputs (the sink) once all its units are saved."""

    def __init__(
        self,
        job: FolderJob,
        *,
        out: OutputFolder,
        documents: list[Document],
        refused: dict[str, InvalidInputError],
        pool: ReplicaPool,
        progress: Progress,
    ) -> None:
        self._job, self._out, self._documents, self._refused = job, out, documents, refused
        self._pool, self._store, self._fingerprint = pool, progress, progress.state.fingerprint
        self._units: dict[str, list[Unit]] = {}
        self._left: dict[str, int] = {}
        self._failed: list[tuple[str, int | None, str]] = []
        self._finished: set[str] = set()
        self._sent = 0
        self._progress: JobProgress | None = None  # made once the units are counted

    async def run(self, *, show_progress: bool, progress_interval: float, started: float) -> FolderJobReport:
        todo: list[tuple[Document, Unit]] = []
        for document in self._documents:
            refusal = self._refused.get(document.relative)
            if refusal is None:
                try:
                    units = await asyncio.to_thread(units_of, self._job, document)
                except InvalidInputError as error:
                    refusal = error
            if refusal is not None:
                self._fail(document, None, refusal)
                continue
            self._units[document.relative] = units
            left = [unit for unit in units if not self._done(document, unit)]
            self._left[document.relative] = len(left)
            todo.extend((document, unit) for unit in left)
            if not left:  # every unit done earlier; outputs rewritten if a kill came before them
                await write_in_thread(self._write_outputs, document)
        total = sum(len(units) for units in self._units.values())
        progress = JobProgress(
            total,
            total - len(todo),
            self._pool.replicas,
            enabled=show_progress,
            interval=progress_interval,
            description=f"{self._job.kind}-dir",
            unit=self._job.unit,
        )
        self._progress = progress
        window = len(self._pool.replicas) * self._pool.most_in_flight  # every replica's slots busy
        try:
            await Engine(self, self._pool, window=window, progress=self._store).run(iter(todo))
        finally:
            progress.close()
        return await asyncio.to_thread(self._finish, total, total - len(todo), time.monotonic() - started)

    def start(self, group: tuple[Document, Unit]) -> _UnitWork:
        """A unit's work: no record yet."""
        return _UnitWork(*group)

    def batches(self, work: _UnitWork) -> list[list[int]]:
        """One request per unit."""
        return [[0]]

    async def request(self, client: JobClient, work: _UnitWork, rows: Sequence[int]) -> dict[str, Any]:
        """The unit's record from one request.

        Raises:
            InvalidInputError: the file was deleted, moved or made unreadable since it was found.
        """
        try:
            return await self._job.process(client, work.document, work.unit)
        except OSError as error:
            raise unreadable(work.document, error) from error

    def tokens(self, answer: dict[str, Any]) -> int:
        """The tokens a unit's record says its request used."""
        return int((answer.get("usage") or {}).get("total_tokens") or 0)

    def answered(
        self, work: _UnitWork, rows: Sequence[int], answer: dict[str, Any], replica: Replica
    ) -> None:
        """Keep the unit's record (saved when it is committed)."""
        work.record = answer
        self._advance(1, self.tokens(answer))

    def refused(self, work: _UnitWork, row: int, error: Exception) -> None:
        """A refused page, a file that does not decode: recorded as failed, and tried again by the next
        run."""
        self._fail(work.document, work.unit, error)
        self._advance(0, 0)

    def _advance(self, units: int, tokens: int) -> None:
        assert self._progress is not None  # made before any unit is sent
        self._progress.advance(units, tokens)

    async def check(self, work: _UnitWork, engine: Engine[tuple[Document, Unit], _UnitWork]) -> None:
        """Nothing to check: a record is kept as answered."""

    def write(self, work: _UnitWork) -> Finished:
        """An answered unit's record, for the checkpoint (a refused one: nothing)."""
        if work.record is None:
            return Finished()
        return Finished(record=(_name(work.document, work.unit), work.document.sha256, work.record))

    def committed(self, work: _UnitWork) -> None:
        """Write a file's outputs once all its units are saved."""
        document, unit, record = work.document, work.unit, work.record
        if record is None:
            return
        if not self._job.done(record):  # saved for the file's outputs, and done again by the next run
            self._fail(document, unit, f"failed every try: {record.get('failure') or 'truncated'}")
        self._sent += 1
        self._left[document.relative] -= 1
        if self._left[document.relative] == 0:
            self._write_outputs(document)

    def _fail(self, document: Document, unit: Unit, error: Exception | str) -> None:
        message = error.message if isinstance(error, APIStatusError) else str(error)
        where = shown(document.relative) + ("" if unit is None else f" page {unit}")
        logger.warning("%s failed: %s", where, shown(message))
        self._failed.append((document.relative, unit, message))

    def _done(self, document: Document, unit: Unit) -> bool:
        record = self._store.record(_name(document, unit), document.sha256)
        return record is not None and self._job.done(record)

    def _loaded(self, document: Document) -> list[dict[str, Any]] | None:
        units = self._units[document.relative]
        records = [self._store.record(_name(document, unit), document.sha256) for unit in units]
        return None if any(record is None for record in records) else [r for r in records if r is not None]

    def _write_outputs(self, document: Document) -> None:
        records = self._loaded(document)
        if records is not None and (rejected := self._job.rejected(document, records)) is not None:
            self._fail(document, None, rejected)
        elif records is not None:
            rendered = self._job.render(document, records)
            for suffix in self._job.output_suffixes:
                self._out.write(output_name(document, suffix), rendered[suffix])
            self._finished.add(document.relative)

    def _finish(self, total: int, resumed: int, seconds: float) -> FolderJobReport:
        """Write the errors file, what covers every finished file, and the manifest."""
        finished = [document for document in self._documents if document.relative in self._finished]
        self._job.finish(self._out, ((document, self._loaded(document) or []) for document in finished))
        errors = self._out.root / "errors.jsonl"
        failed = sorted(self._failed, key=lambda item: (item[0], item[1] or 0))
        if failed:
            lines = [
                orjson.dumps({"document": shown(d), "page": p, "error": shown(m)}) + b"\n"
                for d, p, m in failed
            ]
            self._out.write("errors.jsonl", b"".join(lines))
        else:  # checked at the start: absent, or the job's own
            errors.unlink(missing_ok=True)
        reports = replica_reports(self._pool, seconds)
        manifest = self._out.write(
            "manifest.json",
            json.dumps(
                {
                    "kind": f"{self._job.kind}-dir",
                    "complete": len(finished) == len(self._documents),
                    "documents": len(self._documents),
                    "documents_done": len(finished),
                    self._job.unit + "s": total,
                    "failed": len(failed),
                    **served_section(self._fingerprint, self._pool.replicas, reports),
                    "finished": datetime.now(UTC).isoformat(timespec="seconds"),
                    "seconds": round(seconds, 3),
                },
                indent=1,
            ).encode(),
        )
        return FolderJobReport(
            out=self._out.root,
            documents=len(self._documents),
            documents_done=len(finished),
            unit=self._job.unit,
            units=total,
            units_sent=self._sent,
            units_resumed=resumed,
            failed=tuple(failed),
            errors_file=errors if failed else None,
            manifest=manifest,
            seconds=seconds,
            replicas=reports,
        )


def _name(document: Document, unit: Unit) -> str:
    """A unit's name in the checkpoint: ``FILE/PAGE`` (``000003``), or ``FILE/file`` for a whole file.

    Examples:
        >>> _name(Document(Path("scans/a.pdf"), "a.pdf", ""), 3)
        'a.pdf/000003'
        >>> _name(Document(Path("b.wav"), "b.wav", ""), None)
        'b.wav/file'
    """
    return f"{document.relative}/{'file' if unit is None else f'{unit:06d}'}"


def validate_formats(formats: Sequence[str], allowed: Sequence[str]) -> tuple[str, ...]:
    """The output formats asked for, checked (duplicates dropped, order kept).

    Raises:
        InvalidInputError: none, or one not in ``allowed``.

    Examples:
        >>> validate_formats(["srt", "txt"], ["srt", "vtt", "json", "txt"])
        ('srt', 'txt')
    """
    chosen = tuple(dict.fromkeys(formats))
    bad = [fmt for fmt in chosen if fmt not in allowed]
    if bad or not chosen:
        raise InvalidInputError(
            "formats",
            list(formats),
            "names no known format" if not bad else f"has {bad[0]!r}",
            f"Pass one or more of {', '.join(allowed)}.",
        )
    return chosen
