"""Reading a user-given media file (an image, an audio file, a PDF) by its path, safely.

Only a regular file is ever opened: a FIFO, a device (``/dev/zero``), a socket or a folder is refused
before it is opened, and the file opened is checked again (``fstat``), so a read never blocks and never
runs without end; a file over the caller's cap is refused without reading it. Anything wrong with the
path itself (a NUL byte, a name over ``NAME_MAX``, a missing file, no permission) is an
:class:`~vllm_tasks.errors.InvalidInputError` naming the path.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from typing import IO, Any

from .errors import InvalidInputError

OverCap = Callable[[str, object, int, str], InvalidInputError]
"""``(field, value, max_bytes, size)`` -> the error for an input over the cap (``size`` as words)."""

Refusal = Callable[[str, str, str, str], InvalidInputError]
"""``(field, path, problem, fix)`` -> the error for a path that cannot be read or names no regular file."""

_READ_CHUNK = 1 << 20
_OPEN_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
)
"""``O_NONBLOCK``: a FIFO put in the place of the file checked does not hold the open waiting for a writer."""


def over_cap(field: str, value: object, max_bytes: int, size: str) -> InvalidInputError:
    """The default :data:`OverCap`: ``kind="argument"``."""
    return InvalidInputError(
        field, value, f"is larger ({size}) than the cap of {max_bytes:,} bytes", "Pass a smaller file."
    )


def refusal(field: str, path: str, problem: str, fix: str) -> InvalidInputError:
    """The default :data:`Refusal`: ``kind="argument"``."""
    return InvalidInputError(field, path, problem, fix)


def check_regular_file(
    path: str | os.PathLike[str],
    field: str,
    *,
    max_bytes: int | None,
    too_large: OverCap = over_cap,
    refused: Refusal = refusal,
) -> int:
    """The size of the regular file at ``path`` (a symlink is followed), checked without opening it: for
    a path handed to a library that opens it itself (soundfile, PyAV, pdfium).

    Args:
        path: the file's path.
        field: the argument name used in error messages.
        max_bytes: the largest file accepted (``None``: no cap).
        too_large: makes the error for a file over ``max_bytes``.
        refused: makes the error for a path that cannot be read or names no regular file.

    Returns:
        The file's size in bytes.

    Raises:
        InvalidInputError: naming ``path``: ``refused``'s error (``kind="argument"`` by default) for a
            path that does not exist, cannot be read, names no regular file, or cannot be a path (a NUL
            byte, an unencodable name, a name over ``NAME_MAX``); ``too_large``'s error for a file over
            ``max_bytes``.

    Examples:
        >>> try:
        ...     check_regular_file("/dev/zero", "audio", max_bytes=None)
        ... except InvalidInputError as error:
        ...     print(error)
        audio='/dev/zero': is a device, not a regular file. Pass the path of a file.
    """
    with _typed(field, str(path), refused):
        info = os.stat(path)
    return _check_regular(info, field, str(path), max_bytes=max_bytes, too_large=too_large, refused=refused)


@contextlib.contextmanager
def open_regular_file(
    path: str | os.PathLike[str],
    field: str,
    *,
    max_bytes: int | None,
    too_large: OverCap = over_cap,
    refused: Refusal = refusal,
) -> Iterator[IO[bytes]]:
    """The regular file at ``path``, open for reading: checked before it is opened
    (:func:`check_regular_file`) and again once open, so a FIFO put in its place never blocks a read.

    Args and Raises: as :func:`check_regular_file`; an error while reading is an ``InvalidInputError`` too.
    """
    shown = str(path)
    check_regular_file(path, field, max_bytes=max_bytes, too_large=too_large, refused=refused)
    with _typed(field, shown, refused):
        descriptor = os.open(path, _OPEN_FLAGS)
    with open(descriptor, "rb") as handle:
        _check_regular(
            os.fstat(descriptor), field, shown, max_bytes=max_bytes, too_large=too_large, refused=refused
        )
        with _typed(field, shown, refused):
            yield handle


def read_regular_file(
    path: str | os.PathLike[str],
    field: str,
    *,
    max_bytes: int,
    too_large: OverCap = over_cap,
    refused: Refusal = refusal,
) -> bytes:
    """The bytes of the regular file at ``path``, read within ``max_bytes`` (see :func:`open_regular_file`).

    Args:
        path: the file's path.
        field: the argument name used in error messages.
        max_bytes: the largest file read.
        too_large: makes the error for a file over ``max_bytes``.
        refused: makes the error for a path that cannot be read or names no regular file.

    Returns:
        The file's bytes.

    Raises:
        InvalidInputError: as :func:`check_regular_file`.

    Examples:
        >>> try:
        ...     read_regular_file("a\\0b.wav", "audio", max_bytes=1 << 20)
        ... except InvalidInputError as error:
        ...     print(error.field, error.kind)
        audio argument
    """
    with open_regular_file(path, field, max_bytes=max_bytes, too_large=too_large, refused=refused) as handle:
        return read_capped(handle.read, field, str(path), max_bytes, too_large)


def read_capped(read: Any, field: str, value: object, max_bytes: int, too_large: OverCap = over_cap) -> bytes:
    """Everything ``read(n)`` gives until it is empty, refused past ``max_bytes`` (a file object that
    never ends, or a file that grows while it is read, stops at the cap).

    Raises:
        InvalidInputError: ``too_large``'s error past ``max_bytes``; ``kind="argument"`` when ``read``
            gives text.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = read(_READ_CHUNK)
        if isinstance(chunk, str):
            raise InvalidInputError(field, value, "is a text-mode file object", "Open it with mode 'rb'.")
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > max_bytes:
            raise too_large(field, value, max_bytes, f"over {max_bytes:,} bytes read")
        chunks.append(chunk)


@contextlib.contextmanager
def _typed(field: str, shown: str, refused: Refusal) -> Iterator[None]:
    """An ``OSError`` or ``ValueError`` (a NUL byte, an unencodable name) raised inside, as an
    ``InvalidInputError`` naming the path."""
    try:
        yield
    except InvalidInputError:
        raise
    except (OSError, ValueError) as error:
        problem = f"cannot be read ({getattr(error, 'strerror', None) or error})"
        raise refused(field, shown, problem, "Pass the path of an existing file.") from None


def _check_regular(
    info: os.stat_result,
    field: str,
    shown: str,
    *,
    max_bytes: int | None,
    too_large: OverCap,
    refused: Refusal,
) -> int:
    mode = info.st_mode
    if not stat.S_ISREG(mode):
        what = (
            "a folder"
            if stat.S_ISDIR(mode)
            else "a FIFO (named pipe)"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "not a file"
        )
        raise refused(field, shown, f"is {what}, not a regular file", "Pass the path of a file.")
    if max_bytes is not None and info.st_size > max_bytes:
        raise too_large(field, shown, max_bytes, f"{info.st_size:,} bytes")
    return info.st_size
