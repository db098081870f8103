"""Where a job's input and output live: a local path, or an fsspec URL (``s3://``, ``gs://``, ``hf://``,
``memory://``, ...; the ``fsspec`` extra, plus the protocol's own package: s3fs, gcsfs, huggingface_hub).

A ``file://`` URL is its local path (no fsspec): a local file keeps every guard of
:mod:`~vllm_tasks.jobs.files`. A remote input is read as a stream (:meth:`RemoteFile.open`); its identity
in the job's fingerprint is the SHA-256 of its bytes, as a local file's, so a resumed job (or the same
file copied elsewhere) is recognised by content; the digest is kept for the run under the file's fsspec
``ukey`` (its ETag, generation or size and mtime), so the end-of-run check that the input did not change
reads ``info()`` instead of the whole file again.

A remote output is written as a local job in a work folder (``work_dir``, default a cache folder keyed
by the output URL: checkpoint, parts and lock need POSIX files an object store does not have), then
uploaded once when it is complete (:meth:`Target.publish`): the output, its errors and ids files, and
its manifest last, so a reader who finds the manifest finds the rest.

A folder job's remote source is copied to a local cache folder keyed by its URL (:func:`source_folder`:
the files with the job's suffixes, a file downloaded again only when its listing entry changed), which
the job then reads as a local folder.

A URL is shown without its credentials (``user:password@``, query values) in every message, log line
and manifest (:func:`vllm_tasks.redaction.redact_url`); the filesystem's own error texts are shown with
the URL and its path replaced by the shown URL.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Literal
from urllib.parse import unquote, urlsplit

from ..dependencies import require
from ..errors import InvalidInputError, JobError
from ..redaction import redact_text, redact_url
from .files import make_folder, read_no_follow, write_atomically
from .state import job_lock, write_json

_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*(::[A-Za-z][A-Za-z0-9+.\-]*)*://")
_READ_BLOCK = 1 << 20
MANIFEST, SIDECARS = ".manifest.json", (".errors.jsonl", ".ids.jsonl")
"""The suffixes of the files next to an output: its manifest (uploaded last) and the others."""


def is_url(value: object) -> bool:
    """Whether ``value`` is a URL string (``scheme://...``, fsspec chains such as ``simplecache::s3://``
    too); a path object never is.

    Examples:
        >>> is_url("s3://bucket/corpus.parquet"), is_url("corpus.parquet"), is_url(Path("s3://x"))
        (True, False, False)
    """
    return isinstance(value, str) and _URL_RE.match(value) is not None


def location(value: str | os.PathLike[str], name: str) -> Path | RemoteFile:
    """The local path (``file://`` URLs too) or the remote file that ``value`` names.

    Args:
        value: a path, or a URL string.
        name: the argument's name, for errors.

    Raises:
        InvalidInputError: a ``file://`` URL of another host, an unknown protocol, or a protocol whose
            package is missing (naming it); nothing is sent.
        MissingDependency: a URL other than ``file://`` without the ``fsspec`` extra.

    Examples:
        >>> location("file:///data/corpus.txt", "source")
        PosixPath('/data/corpus.txt')
    """
    if not is_url(value):
        return Path(value)
    url = str(value)
    parts = urlsplit(url)
    if parts.scheme.lower() == "file":
        if parts.netloc not in ("", "localhost"):
            raise InvalidInputError(
                name, redact_url(url), "is a file:// URL of another host", "Name a local file."
            )
        return Path(unquote(parts.path))
    return RemoteFile.of(url, name)


def protocol_package(protocol: str) -> str:
    """The package that implements an fsspec protocol (``s3`` -> ``s3fs``, ``hf`` -> ``huggingface_hub``;
    the protocol itself when fsspec does not know it).

    Examples:
        >>> protocol_package("s3"), protocol_package("gs"), protocol_package("hf")
        ('s3fs', 'gcsfs', 'huggingface_hub')
    """
    fsspec_registry = require("fsspec.registry", "fsspec", "reading and writing fsspec URLs")
    known = fsspec_registry.known_implementations.get(protocol, {})
    return str(known.get("class", protocol)).split(".", maxsplit=1)[0]


def _protocols(url: str) -> list[str]:
    """The protocols of a (chained) URL: ``simplecache::s3://b/x`` -> ``["simplecache", "s3"]``."""
    return [part.split("://", maxsplit=1)[0].lower() for part in url.split("::")]


@dataclass(frozen=True)
class RemoteFile:
    """A file behind an fsspec URL.

    Attributes:
        shown: the URL without its credentials (what ``str()`` gives, and every message).
        url: the URL as given (never shown).
        fs: its fsspec filesystem.
        path: its path on ``fs``.
    """

    shown: str
    url: str = field(repr=False)
    fs: Any = field(repr=False, compare=False)
    path: str = field(repr=False)
    _digests: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, url: str, name: str) -> RemoteFile:
        """Check the URL's protocols (their packages installed), then make its filesystem; nothing is sent.

        Raises:
            InvalidInputError: an unknown protocol, or one whose package is missing (naming it).
            MissingDependency: fsspec is not installed.
        """
        fsspec = require("fsspec", "fsspec", "reading and writing fsspec URLs")
        shown = redact_url(url)
        for protocol in _protocols(url):
            try:
                fsspec.get_filesystem_class(protocol)
            except ImportError:
                package = protocol_package(protocol)
                raise InvalidInputError(
                    name,
                    shown,
                    f"needs the {package} package to reach {protocol}:// URLs",
                    f"pip install {package}",
                ) from None
            except ValueError:
                raise InvalidInputError(
                    name,
                    shown,
                    f"names a protocol fsspec does not know ({protocol}://)",
                    "Use s3://, gs://, hf://, another fsspec protocol, or a local path.",
                ) from None
        with _scrubbed(url, "", shown, InvalidInputError, name):
            fs, path = fsspec.core.url_to_fs(url)
        return cls(shown, url, fs, path)

    def __str__(self) -> str:
        return self.shown

    @property
    def name(self) -> str:
        """The file's name (the URL path's last part)."""
        return PurePosixPath(urlsplit(self.shown).path).name

    @property
    def suffix(self) -> str:
        """The file name's suffix (``.parquet``)."""
        return PurePosixPath(self.name).suffix

    def sibling(self, suffix: str) -> RemoteFile:
        """The file named as this one plus ``suffix`` (``corpus.parquet.manifest.json``), on the same
        filesystem."""
        head, query = self.url.split("?", maxsplit=1) if "?" in self.url else (self.url, None)
        return RemoteFile.of(head + suffix + (f"?{query}" if query is not None else ""), "out")

    @contextlib.contextmanager
    def errors(self, doing: str) -> Iterator[None]:
        """Raise the block's filesystem errors as a :class:`JobError` naming the shown URL (not the one
        with credentials) and what was being done.

        Raises:
            JobError: the filesystem failed (network, permission, missing file).
        """
        with _scrubbed(self.url, self.path, self.shown, JobError, doing):
            yield

    def check_file(self, name: str) -> None:
        """Refuse a URL that is not an existing file.

        Raises:
            InvalidInputError: it does not exist, is a folder, or cannot be looked up.
        """
        try:
            with self.errors("looking it up"):
                exists = self.fs.exists(self.path)
                kind = self.fs.info(self.path).get("type") if exists else None
        except JobError as error:
            raise InvalidInputError(
                name, self.shown, str(error), "Check the URL and its credentials."
            ) from None
        if kind != "file":
            raise InvalidInputError(
                name,
                self.shown,
                "does not exist" if kind is None else f"is not a file (a {kind})",
                "Name an existing file.",
            )

    def open(self, mode: Literal["rb"] = "rb") -> io.BufferedReader[_GuardedReader]:
        """The file opened for reading, as a buffered binary stream whose filesystem errors are raised as
        :class:`JobError` (see :meth:`errors`).

        Raises:
            JobError: it cannot be opened.
        """
        with self.errors("opening it"):
            handle = self.fs.open(self.path, "rb")
        return io.BufferedReader(_GuardedReader(handle, self), buffer_size=_READ_BLOCK)

    def identity(self) -> str:
        """What tells a version of the file from another without reading it: fsspec's ``ukey`` (an ETag,
        a generation, or a hash of ``info()``: size and mtime).

        Raises:
            JobError: it cannot be looked up.
        """
        with self.errors("looking it up"):
            return str(self.fs.ukey(self.path))

    def digest(self) -> str:
        """The SHA-256 hex digest of the file's bytes, streamed; kept while :meth:`identity` stays the same
        (read again once the file changed).

        Raises:
            JobError: it cannot be read.
        """
        key = self.identity()
        if key not in self._digests:
            digest = hashlib.sha256()
            with self.open("rb") as handle:
                while block := handle.read(_READ_BLOCK):
                    digest.update(block)
            self._digests[key] = digest.hexdigest()
        return self._digests[key]

    def remember(self, identity: str, digest: str) -> None:
        """Keep ``digest`` as the content digest of the file's version ``identity`` (read while reading its
        rows: :meth:`digest` then reads nothing while the file stays that version)."""
        self._digests[identity] = digest

    def exists(self) -> bool:
        """Whether the file exists.

        Raises:
            JobError: it cannot be looked up.
        """
        with self.errors("looking it up"):
            return bool(self.fs.exists(self.path))

    def read_bytes(self) -> bytes:
        """The file's bytes (for small files: a manifest).

        Raises:
            JobError: it cannot be read.
        """
        with self.errors("reading it"):
            return bytes(self.fs.cat_file(self.path))

    def upload(self, local: Path) -> None:
        """Upload ``local`` to this URL (one ``put``: on object stores the object appears whole when it is
        complete).

        Raises:
            JobError: the upload failed.
        """
        with self.errors(f"uploading {local}"):
            self.fs.put_file(str(local), self.path)

    def remove(self) -> None:
        """Remove the file when it exists.

        Raises:
            JobError: it cannot be removed.
        """
        with self.errors("removing it"):
            if self.fs.exists(self.path):
                self.fs.rm_file(self.path)

    def same_file(self, other: Path | RemoteFile) -> bool:
        """Whether ``other`` is this file (the same filesystem and path)."""
        return isinstance(other, RemoteFile) and other.fs is self.fs and other.path == self.path


class _GuardedReader(io.RawIOBase):
    """A remote file as a raw stream whose filesystem errors are :class:`JobError` naming the shown URL
    (a dropped connection mid-job stops the job with its progress kept, never an untyped error)."""

    def __init__(self, handle: Any, remote: RemoteFile) -> None:
        super().__init__()
        self._handle = handle
        self._remote = remote

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        with self._remote.errors("reading it"):
            data = self._handle.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        with self._remote.errors("reading it"):
            return int(self._handle.seek(offset, whence))

    def tell(self) -> int:
        return int(self._handle.tell())

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(Exception):  # closing a read-only remote file loses nothing
                self._handle.close()
        super().close()


@contextlib.contextmanager
def _scrubbed(url: str, path: str, shown: str, kind: type[Exception], doing: str) -> Iterator[None]:
    """Raise the block's errors (anything a filesystem package raises: OSError, its HTTP errors) as
    ``kind``, their text with ``url`` and ``path`` replaced by ``shown`` and any other URL's credentials
    removed."""
    try:
        yield
    except (InvalidInputError, JobError):
        raise
    except Exception as error:
        text = str(error) or type(error).__name__
        for secret in sorted({url, path} - {""}, key=len, reverse=True):
            text = text.replace(secret, shown)
        text = redact_text(text)
        if kind is InvalidInputError:
            raise InvalidInputError(
                doing, shown, f"cannot be reached ({text})", "Check the URL and its credentials."
            ) from None
        raise JobError(
            f"{shown}: failed while {doing} ({type(error).__name__}: {text}). The job keeps its progress: "
            "run it again to resume."
        ) from None


def default_work_dir(shown_without_user: str) -> Path:
    """The work folder of a job writing a remote output: a cache folder keyed by the output URL (its
    ``user:password@`` left out: other credentials, same job).

    Examples:
        >>> path = default_work_dir("s3://bucket/corpus.parquet")
        >>> path.parent.parts[-2:], len(path.name)
        (('vllm-tasks', 'jobs'), 16)
    """
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = hashlib.sha256(shown_without_user.encode()).hexdigest()[:16]
    return cache / "vllm-tasks" / "jobs" / key


@dataclass(frozen=True)
class Target:
    """Where a job writes its output: ``local`` (the output itself, or the staged copy of a remote one
    in the work folder) and, for a remote output, ``remote``.

    Attributes:
        local: the path the job writes (and its manifest, errors, ids and lock next to it).
        remote: the URL the finished output is uploaded to; ``None`` for a local output.
    """

    local: Path
    remote: RemoteFile | None = None

    @classmethod
    def of(cls, out: str | os.PathLike[str], work_dir: str | os.PathLike[str] | None) -> Target:
        """The target of ``out``; a remote one staged in ``work_dir`` (default :func:`default_work_dir`).

        Raises:
            InvalidInputError: ``work_dir`` with a local output, a remote output without a file name,
                or what :func:`location` raises.
        """
        where = location(out, "out")
        if isinstance(where, Path):
            if work_dir is not None:
                raise InvalidInputError(
                    "work_dir",
                    str(work_dir),
                    "is for an fsspec URL output (a local output is worked on next to itself)",
                    "Drop work_dir, or write to a URL.",
                )
            return cls(where)
        if not where.name:
            raise InvalidInputError("out", where.shown, "names no file", "End the URL with a file name.")
        folder = (
            Path(work_dir) if work_dir is not None else default_work_dir(redact_url(where.url, query=False))
        )
        return cls(folder / where.name, where)

    @property
    def shown(self) -> str:
        """The output as messages name it: its URL without credentials, or its path."""
        return self.remote.shown if self.remote is not None else str(self.local)

    def check_apart_from(self, source: Path | RemoteFile) -> None:
        """Refuse a remote output that is the input.

        Raises:
            InvalidInputError: naming ``out``.
        """
        if self.remote is not None and self.remote.same_file(source):
            raise InvalidInputError(
                "out", self.remote.shown, f"would overwrite the input {source}", "Write the output elsewhere."
            )

    def publish(self) -> str | None:
        """Upload a finished local job's output to the remote URL (nothing for a local output): the
        earlier manifest removed first, then the output, its errors and ids files (a stale one removed),
        then the manifest, whose ``output`` names the URL. Nothing is sent when the remote manifest
        already equals this one and the output is there in full (a re-run of a finished job).

        Returns:
            The shown URL, or ``None`` for a local output.

        Raises:
            JobError: an upload failed (the staged output stays in the work folder: run again).
        """
        if self.remote is None:
            return None
        local_manifest = self.local.with_name(self.local.name + MANIFEST)
        manifest = json.loads(read_no_follow(local_manifest))
        if manifest.get("output") != self.remote.shown:
            manifest["output"] = self.remote.shown
            write_json(local_manifest, manifest)
        remote_manifest = self.remote.sibling(MANIFEST)
        content = read_no_follow(local_manifest)
        if remote_manifest.exists() and remote_manifest.read_bytes() == content and self._uploaded():
            return self.remote.shown
        remote_manifest.remove()
        self.remote.upload(self.local)
        for suffix in SIDECARS:
            local = self.local.with_name(self.local.name + suffix)
            if local.exists():
                self.remote.sibling(suffix).upload(local)
            else:
                self.remote.sibling(suffix).remove()
        remote_manifest.upload(local_manifest)
        return self.remote.shown

    def _uploaded(self) -> bool:
        """Whether the remote output is there with the staged output's size."""
        assert self.remote is not None
        with self.remote.errors("looking it up"):
            if not self.remote.fs.exists(self.remote.path):
                return False
            return int(self.remote.fs.size(self.remote.path)) == self.local.stat().st_size


def source_folder(source: str | os.PathLike[str], suffixes: frozenset[str]) -> Path:
    """The local folder a folder job reads: ``source`` itself, or the local copy of an fsspec folder URL
    (under :func:`default_work_dir` of the URL): every file below it with one of ``suffixes`` (lower
    case, with the dot) and no hidden part in its name, downloaded when new or changed in the listing
    (size, ETag, mtime), the copies of files gone from it removed.

    Raises:
        InvalidInputError: the URL is not a folder (or what :func:`location` raises).
        JobError: listing or downloading failed, or another run is copying the same URL.
    """
    where = location(source, "source")
    if isinstance(where, Path):
        return where
    home = default_work_dir(redact_url(where.url, query=False))
    make_folder(home)
    with job_lock(home / "lock", where.shown):
        _mirror(where, home / "source", home / "source.json", suffixes)
    return home / "source"


def _mirror(remote: RemoteFile, folder: Path, index_path: Path, suffixes: frozenset[str]) -> None:
    """Make ``folder`` hold ``remote``'s wanted files (see :func:`source_folder`); ``index_path`` keeps
    each copy's listing entry."""
    with remote.errors("listing it"):
        if not remote.fs.isdir(remote.path):
            raise InvalidInputError("source", remote.shown, "is not a folder", "Name a folder URL.")
        listing = remote.fs.find(remote.path, detail=True)
    root = remote.path.rstrip("/") + "/"
    wanted: dict[str, tuple[str, str]] = {}
    for name, info in listing.items():
        relative = PurePosixPath(name.removeprefix(root))
        hidden = any(part.startswith(".") for part in relative.parts)  # "..": never outside the folder
        if name.startswith(root) and not hidden and relative.suffix.lower() in suffixes:
            entry = json.dumps(info, sort_keys=True, default=str)
            wanted[relative.as_posix()] = (name, hashlib.sha256(entry.encode()).hexdigest())
    try:
        index = json.loads(read_no_follow(index_path))
    except (OSError, ValueError, JobError):
        index = {}
    for path in sorted(folder.rglob("*"), reverse=True) if folder.exists() else ():
        if (path.is_file() and path.relative_to(folder).as_posix() not in wanted) or path.is_symlink():
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    for key, (name, entry) in sorted(wanted.items()):
        local = folder / key
        if index.get(key) == entry and local.is_file():
            continue
        make_folder(local.parent)
        with remote.errors(f"downloading {key}"):
            write_atomically(local, functools.partial(_download, remote.fs, name))
        index[key] = entry
    write_json(index_path, {key: value for key, value in index.items() if key in wanted})


def _download(fs: Any, name: str, handle: BinaryIO) -> None:
    """Copy the file ``name`` of ``fs`` into ``handle``, a block at a time."""
    with fs.open(name, "rb") as remote:
        shutil.copyfileobj(remote, handle, _READ_BLOCK)
