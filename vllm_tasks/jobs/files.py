"""How every job touches its own files: opened without following a symlink, written atomically, and a
disk error typed.

A job's lock, checkpoint, work files and outputs are opened with ``O_NOFOLLOW``: a symlink planted at
one of those names (``OUT.lock -> ~/.bashrc``) is refused with a :class:`JobError` naming it, never
followed and overwritten. A whole file is written by :func:`write_atomically` (a temporary file in the
same folder, ``fsync``, rename over the name -- which replaces a symlink there rather than writing
through it -- and ``fsync`` of the folder), so a crash leaves the old file or the new one. A full disk
(``ENOSPC``, ``EDQUOT``) is an :class:`InsufficientDiskSpace`, a folder that cannot be written
(``EACCES``, ``EPERM``, ``EROFS``) a :class:`JobError` naming the folder (:func:`disk_errors`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, ParamSpec, TypeVar

from ..errors import InsufficientDiskSpace, JobError

P = ParamSpec("P")
T = TypeVar("T")

DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
NOT_WRITABLE = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})

Content = bytes | Iterable[bytes] | Callable[[BinaryIO], object]
"""What :func:`write_atomically` writes: bytes, chunks of bytes (streamed), or a function that writes to
the open file (a Parquet writer)."""


def free_bytes(folder: Path) -> int:
    """Bytes an unprivileged writer may still use on ``folder``'s filesystem (0 when it cannot be read)."""
    try:
        stats = os.statvfs(folder)
    except OSError:
        return 0
    return stats.f_bavail * stats.f_frsize


def typed_error(error: OSError, path: Path, needed: int = 0) -> OSError | JobError:
    """``error`` as the job reports it: :class:`InsufficientDiskSpace` for a full disk, a
    :class:`JobError` naming the folder for one that cannot be written or a symlink where a job file
    goes, else ``error`` itself.

    Examples:
        >>> typed_error(OSError(errno.EROFS, "Read-only file system"), Path("/mnt/out.npy")).args[0][:47]
        '/mnt: cannot be written (Read-only file system)'
    """
    if isinstance(error, JobError):
        return error
    if error.errno in DISK_FULL:
        return InsufficientDiskSpace(str(path), max(needed, 1), free_bytes(path.parent))
    if error.errno in NOT_WRITABLE:
        return JobError(
            f"{path.parent}: cannot be written ({error.strerror}) while writing {path.name}. Make the folder "
            "writable, or write the output elsewhere; the job resumes where it stopped."
        )
    if error.errno == errno.ELOOP:
        return JobError(
            f"{path}: is a symbolic link; a job does not write through one. Remove it (or write the output "
            "elsewhere) and run again."
        )
    return error


@contextlib.contextmanager
def disk_errors(path: Path, needed: int = 0) -> Iterator[None]:
    """Raise the block's ``OSError`` about writing ``path`` as :func:`typed_error` types it.

    Raises:
        InsufficientDiskSpace: the disk is full.
        JobError: the folder cannot be written, or ``path`` is a symlink.
    """
    try:
        yield
    except OSError as error:
        typed = typed_error(error, path, needed)
        if typed is error:
            raise
        raise typed from error


def open_no_follow(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open(path, flags)`` that refuses a symlink as ``path``'s last component.

    Raises:
        JobError: ``path`` is a symlink, or its folder cannot be written.
        InsufficientDiskSpace: the disk is full.
    """
    with disk_errors(path):
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def read_no_follow(path: Path) -> bytes:
    """``path``'s bytes, refusing a symlink (see :func:`open_no_follow`).

    Raises:
        JobError: ``path`` is a symlink.
        OSError: it cannot be read (``FileNotFoundError`` when it is not there).
    """
    with os.fdopen(open_no_follow(path, os.O_RDONLY), "rb") as handle:
        return handle.read()


def append_no_follow(path: Path, data: bytes) -> int:
    """Append ``data`` to ``path`` (made when missing), ``fsync`` it; returns the file's new size.

    Raises:
        JobError, InsufficientDiskSpace: see :func:`open_no_follow`.
    """
    with (
        disk_errors(path, len(data)),
        os.fdopen(open_no_follow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab") as handle,
    ):
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
        return os.fstat(handle.fileno()).st_size


def fsync_folder(folder: Path) -> None:
    """``fsync`` a folder, so that the renames in it last."""
    handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def make_folder(folder: Path) -> None:
    """Make ``folder`` and its parents when missing.

    Raises:
        JobError: it cannot be made (a read-only parent, or a file where it or a parent goes).
        InsufficientDiskSpace: the disk is full.
    """
    try:
        with disk_errors(folder / "."):
            folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as error:
        raise JobError(
            f"{folder}: cannot be made, a file is in the way ({error.filename}). Move it, or write the "
            "output elsewhere."
        ) from error


def write_atomically(
    path: Path,
    content: Content,
    *,
    temporaries: Path | None = None,
    before_rename: Callable[[], object] | None = None,
) -> None:
    """Write ``content`` to ``path``: to a new temporary file (in ``path``'s folder, or in
    ``temporaries`` on the same disk), ``fsync``, renamed over ``path`` (a symlink there is replaced, its
    target untouched), and the folder ``fsync``-ed. A crash leaves the old file or the new one.
    ``before_rename`` runs once the content is durable, before the rename (to record it first).

    Raises:
        InsufficientDiskSpace: the disk is full (the temporary file is removed).
        JobError: the folder cannot be written.

    Examples:
        >>> write_atomically(Path("out.npy.manifest.json"), b'{"rows": 3}')
        >>> write_atomically(Path("out.ids.jsonl"), (line for line in [b"1\\n", b"2\\n"]))
    """
    temporary = (temporaries or path.parent) / f".vllm-tasks-{uuid.uuid4().hex}.tmp"  # any name length
    try:
        with disk_errors(path, len(content) if isinstance(content, bytes) else 0):
            with os.fdopen(open_no_follow(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "wb") as handle:
                if callable(content):
                    content(handle)
                else:
                    for chunk in [content] if isinstance(content, bytes) else content:
                        handle.write(chunk)
                handle.flush()
                os.fsync(handle.fileno())
            if before_rename is not None:
                before_rename()
            os.replace(temporary, path)
            fsync_folder(path.parent)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


async def write_in_thread(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``asyncio.to_thread`` for a job's writes, except that a cancelled caller waits for the thread to
    finish before the cancellation goes on: no file is still being written once the job (and its lock on
    the output folder) has ended, where the next run would find it half-listed.

    Raises:
        asyncio.CancelledError: the caller was cancelled (after the thread finished).
    """
    task = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        raise
