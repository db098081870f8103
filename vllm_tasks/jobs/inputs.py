"""Reading a job's input as a stream of fixed-size chunks: plain text, JSONL, CSV and Parquet.

Nothing is loaded whole. Chunk ``k`` always holds rows ``[k * chunk_rows, (k + 1) * chunk_rows)``, so a
resumed job cuts the input exactly where the first run did. Plain text is split on ``\\n`` only (a
trailing ``\\r`` of a CRLF line is dropped, a lone ``\\r`` inside a line is kept), so rows match
``wc -l``; empty lines are rows too.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import hashlib
import io
import itertools
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal, cast, get_args

import orjson

from .. import media_files
from ..dependencies import require
from ..errors import InvalidInputError
from .locations import RemoteFile, location

InputFormat = Literal["text", "jsonl", "csv", "parquet"]
SUFFIXES: dict[str, InputFormat] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_HASH_BLOCK = 1 << 20
_CSV_FIELD_LIMIT = 2**31 - 1


def text_lines(handle: BinaryIO, name: str) -> Iterator[str]:
    """The lines of a UTF-8 byte stream, split on ``\\n`` only (the one rule of every text input).

    A trailing ``\\r`` (CRLF files) is dropped; a ``\\r`` anywhere else stays in its line. A last line
    without ``\\n`` is a line; an empty stream has none. A UTF-8 byte order mark opening the stream (as
    Windows editors write) is not part of the first line.

    Args:
        handle: a binary file (or ``sys.stdin.buffer``).
        name: the file's name, for errors.

    Returns:
        An iterator of lines without their line ends.

    Raises:
        InvalidInputError: a line is not UTF-8 (names the line number).

    Examples:
        >>> list(text_lines(io.BytesIO(b"a\\rb\\r\\nc"), "x.txt"))
        ['a\\rb', 'c']
    """
    for number, raw in enumerate(handle, start=1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if number == 1:
            line = line.removeprefix(codecs.BOM_UTF8)
        if line.endswith(b"\r"):
            line = line[:-1]
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InvalidInputError(
                "source",
                name,
                f"line {number} is not UTF-8 ({error.reason} at byte {error.start})",
                "Convert the file to UTF-8 first, e.g. `iconv -f latin1 -t utf-8`.",
            ) from None


@dataclass(frozen=True)
class InputSpec:
    """Where a job's texts come from.

    Attributes:
        path: the input file: a local path, or a remote file (an fsspec URL, see
            :mod:`~vllm_tasks.jobs.locations`).
        format: ``text`` (one text per line), ``jsonl``, ``csv`` or ``parquet``.
        text_field: the column (or JSON key) holding the text (not for ``text``).
        id_field: the column holding each row's id; ``None``: the row number.
        keep_columns: other columns copied to a Parquet output.
    """

    path: Path | RemoteFile
    format: InputFormat
    text_field: str = "text"
    id_field: str | None = None
    keep_columns: tuple[str, ...] = ()

    @classmethod
    def create(
        cls,
        source: str | os.PathLike[str],
        *,
        format: str | None = None,
        text_field: str | None = None,
        id_field: str | None = None,
        keep_columns: Iterable[str] = (),
    ) -> InputSpec:
        """Check the arguments; the format defaults to the file's suffix (``text`` for any other).

        Raises:
            InvalidInputError: an unknown format, or column names given for plain text; a URL whose
                protocol is unknown or whose package is missing (:func:`~vllm_tasks.jobs.locations.location`).
            MissingDependency: a URL without the ``fsspec`` extra.
        """
        path = location(source, "source")
        chosen = format if format is not None else SUFFIXES.get(path.suffix.lower(), "text")
        if chosen not in get_args(InputFormat):
            raise InvalidInputError(
                "input_format", format, "is not a known input format", f"Use one of {get_args(InputFormat)}."
            )
        kept = tuple(keep_columns)
        if chosen == "text" and (text_field is not None or id_field is not None or kept):
            raise InvalidInputError(
                "text_field" if text_field is not None else "id_field" if id_field is not None else "keep",
                text_field or id_field or kept,
                "applies to JSONL, CSV and Parquet inputs, not to plain text (one text per line)",
                "Drop it, or pass input_format= when the file's suffix does not say its format.",
            )
        return cls(path, cast(InputFormat, chosen), text_field or "text", id_field, kept)

    @property
    def columns(self) -> list[str]:
        """The columns a row needs: text, id, kept columns."""
        return [self.text_field, *([self.id_field] if self.id_field else []), *self.keep_columns]


@dataclass
class Chunk:
    """Consecutive rows of the input.

    Attributes:
        index: the chunk number (rows ``[index * chunk_rows, ...)``).
        start: the first row's number.
        texts: the rows' texts.
        ids: the rows' ids (the row numbers when the input has no ``id_field``).
        kept: the kept columns' values, per column.
    """

    index: int
    start: int
    texts: list[str]
    ids: list[Any]
    kept: dict[str, list[Any]] = field(default_factory=dict)


def scan(spec: InputSpec) -> tuple[int, str]:
    """Count the rows and hash the content of an input, streaming; every row is read and checked, by the
    same reader the job reads with, so a bad row is found before any request and the count is the
    rows the job will read.

    A text, JSONL or CSV input is read once, hashed as its rows are read (a remote one downloaded once);
    a Parquet input is hashed, then its needed columns read.

    Returns:
        ``(rows, sha256 hex digest of the file's bytes)``.

    Raises:
        InvalidInputError: the input is not a regular file or cannot be read (a corrupt Parquet file, a
            line that is not UTF-8), a row lacks its text (naming the row), or a Parquet file lacks a
            needed column.
    """
    check_regular(spec.path)
    try:
        if spec.format == "parquet":
            return sum(1 for _ in _rows(spec)), file_digest(spec.path)
        return _count_hashing(spec)
    except InvalidInputError:
        raise
    except (OSError, UnicodeDecodeError, csv.Error, ValueError) as error:  # pyarrow's ArrowInvalid is one
        raise InvalidInputError(
            "source",
            str(spec.path),
            f"cannot be read ({error})",
            f"Check that it is a valid {spec.format} file.",
        ) from error


class _Hashing(io.RawIOBase):
    """A binary stream that hashes every byte read through it (read in order, never seeked)."""

    def __init__(self, raw: BinaryIO, digest: Any) -> None:
        super().__init__()
        self._raw = raw
        self.digest = digest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._raw.read(len(buffer))
        buffer[: len(data)] = data
        self.digest.update(data)
        return len(data)


def _count_hashing(spec: InputSpec) -> tuple[int, str]:
    """The rows of a text, JSONL or CSV input and its SHA-256, from one read (a remote file's digest is
    remembered under the identity it had before the read: see
    :meth:`~vllm_tasks.jobs.locations.RemoteFile.remember`)."""
    identity = spec.path.identity() if isinstance(spec.path, RemoteFile) else None
    with spec.path.open("rb") as raw:
        hashing = _Hashing(raw, hashlib.sha256())
        stream = io.BufferedReader(hashing, buffer_size=_HASH_BLOCK)
        rows = sum(1 for _ in _rows(spec, stream=stream))
        while stream.read(_HASH_BLOCK):  # the readers read to the end; a last line without rows too
            pass
    digest = str(hashing.digest.hexdigest())
    if isinstance(spec.path, RemoteFile) and identity is not None:
        spec.path.remember(identity, digest)
    return rows, digest


def file_digest(path: Path | RemoteFile) -> str:
    """The SHA-256 hex digest of a file's bytes, streaming (a remote file's: see
    :meth:`~vllm_tasks.jobs.locations.RemoteFile.digest`)."""
    if isinstance(path, RemoteFile):
        return path.digest()
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def check_regular(path: Path | RemoteFile) -> None:
    """Refuse what is not a regular file (a FIFO or ``/dev/zero`` would never end), or cannot be a path
    (:func:`vllm_tasks.media_files.check_regular_file`); a remote file that is not there.

    Raises:
        InvalidInputError: naming the path and what it is.
    """
    if isinstance(path, RemoteFile):
        path.check_file("source")
        return
    media_files.check_regular_file(path, "source", max_bytes=None)


def read_chunks(spec: InputSpec, chunk_rows: int, skip: frozenset[int] = frozenset()) -> Iterator[Chunk]:
    """The input's rows in chunks of ``chunk_rows``, leaving out the chunks in ``skip`` (done by an
    earlier run; a Parquet input does not even read their row groups).

    Raises:
        InvalidInputError: a row without the text field, or a text that is not a string.
    """
    rows = _rows(spec)
    index = 0
    while True:
        if index in skip:
            while index in skip:
                index += 1
                if spec.format != "parquet":
                    next(itertools.islice(rows, chunk_rows - 1, None), None)  # read past the chunk
            if spec.format == "parquet":
                rows = _rows(spec, index * chunk_rows)
        batch = list(itertools.islice(rows, chunk_rows))
        if not batch:
            return
        start = index * chunk_rows
        ids = [row[1] for row in batch] if spec.id_field else list(range(start, start + len(batch)))
        kept = {name: [row[2][k] for row in batch] for k, name in enumerate(spec.keep_columns)}
        yield Chunk(index, start, [row[0] for row in batch], ids, kept)
        if len(batch) < chunk_rows:
            return
        index += 1


def _rows(
    spec: InputSpec, start: int = 0, stream: BinaryIO | None = None
) -> Iterator[tuple[str, Any, tuple[Any, ...]]]:
    """``(text, id, kept values)`` per row, from row ``start`` (only Parquet starts late: by row group);
    a text, JSONL or CSV input read from ``stream`` when given, else opened."""
    raw: Iterator[tuple[Any, ...]]
    if spec.format == "text":
        with _opened(spec, stream) as handle:
            for line in text_lines(handle, str(spec.path)):
                yield line, None, ()
        return
    if spec.format == "jsonl":
        raw = (_fields(spec, record, f"line {number}") for number, record in _json_lines(spec, stream))
    elif spec.format == "csv":
        raw = _csv_rows(spec, stream)
    else:
        raw = _parquet_rows(spec, start)
    has_id = spec.id_field is not None
    for row in raw:
        yield row[0], row[1] if has_id else None, row[1 + has_id :]


def _fields(spec: InputSpec, record: Any, where: str) -> tuple[Any, ...]:
    if not isinstance(record, dict):
        raise InvalidInputError(
            "source", str(spec.path), f"{where} is not a JSON object", "Write one object per line."
        )
    text = record.get(spec.text_field)
    if not isinstance(text, str):
        raise InvalidInputError(
            "text_field",
            spec.text_field,
            f"{where} of {spec.path} has no string under this key (found {type(text).__name__})",
            "Name the key that holds the text with text_field= (vllm-tasks: --text-field).",
        )
    values = [record.get(name) for name in spec.columns[1:]]
    return (text, *(_as_text(value) for value in values))


def _as_text(value: Any) -> str | None:
    """JSONL ids and kept columns become strings (a column's type may differ between rows)."""
    if value is None or isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


@contextlib.contextmanager
def _opened(spec: InputSpec, stream: BinaryIO | None) -> Iterator[BinaryIO]:
    """``stream`` (left open), or the input opened (and closed after)."""
    if stream is not None:
        yield stream
        return
    with spec.path.open("rb") as handle:
        yield cast(BinaryIO, handle)


def _json_lines(spec: InputSpec, stream: BinaryIO | None) -> Iterator[tuple[int, Any]]:
    with _opened(spec, stream) as handle:
        for number, raw in enumerate(handle, start=1):
            line = raw.removeprefix(codecs.BOM_UTF8) if number == 1 else raw
            if not line.strip():
                continue
            try:
                yield number, orjson.loads(line)
            except orjson.JSONDecodeError as error:
                raise InvalidInputError(
                    "source", str(spec.path), f"line {number} is not JSON ({error})", "Fix or drop that line."
                ) from None


def _csv_rows(spec: InputSpec, stream: BinaryIO | None) -> Iterator[tuple[Any, ...]]:
    """CSV rows as ``DictReader`` reads them (blank lines are not rows); a UTF-8 BOM (Excel) is dropped."""
    # One long cell must not refuse the whole file (the default cap is 128 KiB); the cap is process-wide.
    csv.field_size_limit(max(csv.field_size_limit(), _CSV_FIELD_LIMIT))
    with _opened(spec, stream) as binary:
        handle = io.TextIOWrapper(binary, encoding="utf-8-sig", newline="")
        reader = csv.DictReader(handle)
        _check_columns(spec, list(reader.fieldnames or []))
        for record in reader:
            text = record[spec.text_field]
            if text is None:
                raise InvalidInputError(
                    "source",
                    str(spec.path),
                    f"line {reader.line_num} has no {spec.text_field!r} cell (too few fields)",
                    "Fix or drop that line.",
                )
            yield tuple(record[name] for name in spec.columns)
        handle.detach()  # the binary stream is closed by its owner


@contextlib.contextmanager
def _parquet_file(spec: InputSpec) -> Iterator[Any]:
    """The input opened by pyarrow (a remote one through its stream, closed after), columns checked."""
    parquet = require("pyarrow.parquet", "parquet", "reading Parquet inputs")
    with contextlib.ExitStack() as stack:
        path = spec.path
        source = stack.enter_context(path.open("rb")) if isinstance(path, RemoteFile) else path
        handle = parquet.ParquetFile(source)
        _check_columns(spec, handle.schema_arrow.names)
        yield handle


def _check_columns(spec: InputSpec, names: list[str]) -> None:
    missing = [name for name in spec.columns if name not in names]
    if missing:
        field = {spec.text_field: "text_field", spec.id_field: "id_field"}.get(missing[0], "keep_columns")
        raise InvalidInputError(
            field,
            missing[0],
            f"is not a column of {spec.path} (columns: {names})",
            "Name an existing column (vllm-tasks: --text-field, --id-field, --keep-column).",
        )


def _parquet_rows(spec: InputSpec, start: int) -> Iterator[tuple[Any, ...]]:
    """Rows from ``start``, read one row group at a time (row groups before ``start`` are not read)."""
    with _parquet_file(spec) as handle:
        first = 0
        for group in range(handle.metadata.num_row_groups):
            size = handle.metadata.row_group(group).num_rows
            if first + size <= start:
                first += size
                continue
            table = handle.read_row_group(group, columns=spec.columns)
            columns = [table.column(name).to_pylist() for name in spec.columns]
            skip = max(0, start - first)
            first += size
            for position, row in enumerate(zip(*columns, strict=True)):
                if position < skip:
                    continue
                if not isinstance(row[0], str):
                    raise InvalidInputError(
                        "text_field",
                        spec.text_field,
                        f"row {first - size + position} of {spec.path} is {type(row[0]).__name__}, "
                        "not a string",
                        "Name the column that holds the text with text_field= (vllm-tasks: --text-field).",
                    )
                yield row


def parquet_types(spec: InputSpec) -> dict[str, Any]:
    """The Arrow types of the id and kept columns in a Parquet output (strings unless the input is
    Parquet, whose own types are kept).

    Examples:
        >>> parquet_types(InputSpec.create("docs.csv", id_field="doc_id"))
        {'doc_id': DataType(string)}
    """
    pa = require("pyarrow", "parquet", "writing Parquet outputs")
    names = spec.columns[1:]
    if spec.format == "parquet":
        with _parquet_file(spec) as handle:
            schema = handle.schema_arrow
        return {name: schema.field(name).type for name in names}
    return {name: pa.string() for name in names}
