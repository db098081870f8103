"""Where a job's vectors go: a preallocated ``.npy`` matrix, or Parquet for vector databases (dense or
sparse columns, see :mod:`~vllm_tasks.jobs.vectors`).

Both write into the job's work folder and move the result to its final name only when every row is
there. The ``.npy`` file gets all its blocks at creation (``posix_fallocate``) and is written with
``pwrite``, never through a memory map: a full disk is an :class:`InsufficientDiskSpace` before the
first row, never a ``SIGBUS`` in the middle.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import numpy as np
import numpy.typing as npt

from ..dependencies import require
from ..errors import InsufficientDiskSpace, JobError
from .files import (
    DISK_FULL,
    disk_errors,
    free_bytes,
    fsync_folder,
    open_no_follow,
    typed_error,
    write_atomically,
)
from .inputs import Chunk
from .vectors import DenseRows, Rows, Vectors


class Sink(Protocol):
    """What the engine writes finished chunks to."""

    def write(self, chunk: Chunk, rows: Rows, failed: npt.NDArray[np.bool_]) -> None:
        """Store a finished chunk's rows (``failed`` ones were refused)."""

    def sync(self) -> None:
        """Make everything written so far durable (before the checkpoint says it is done)."""

    def finish(self, final: Path, rows: int) -> None:
        """Move the complete result, ``rows`` rows, to ``final``."""

    def close(self) -> None:
        """Release open files; the work folder stays for a resume."""


def check_space(path: Path, needed: int) -> None:
    """Raise :class:`InsufficientDiskSpace` when ``needed`` bytes do not fit next to ``path``."""
    free = free_bytes(path.parent)
    if needed > free:
        raise InsufficientDiskSpace(str(path), needed, free)


def npy_header(path: Path) -> tuple[tuple[int, ...], np.dtype[Any], int]:
    """A ``.npy`` file's shape, dtype and data offset, read from its header (a symlink is refused).

    Raises:
        JobError: ``path`` is a symlink.
    """
    with os.fdopen(open_no_follow(path, os.O_RDONLY), "rb") as handle:
        major, _ = np.lib.format.read_magic(handle)
        read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(handle)
        return tuple(shape), dtype, handle.tell()


class NpySink:
    """A float32 ``.npy`` matrix of ``rows x width``, all blocks allocated at creation.

    Args:
        path: the work file (created, or reopened when ``resume`` and it exists with this shape).
        rows, width: the matrix's shape.
        resume: keep an existing file of the same shape.

    Raises:
        InsufficientDiskSpace: the matrix does not fit on the disk.
    """

    def __init__(self, path: Path, rows: int, width: int, *, resume: bool) -> None:
        self.path = path
        data_bytes = rows * width * 4
        if not (resume and path.exists() and npy_header(path)[:2] == ((rows, width), np.dtype(np.float32))):
            check_space(path, data_bytes + 128)
            header = {"descr": "<f4", "fortran_order": False, "shape": (rows, width)}
            with os.fdopen(open_no_follow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as handle:
                np.lib.format.write_array_header_1_0(handle, header)
        self._offset = npy_header(path)[2]
        self._width = width
        self._fd = open_no_follow(path, os.O_RDWR)
        try:
            os.ftruncate(self._fd, self._offset + data_bytes)
            os.posix_fallocate(self._fd, self._offset, max(data_bytes, 1))
        except OSError as error:
            if error.errno in (errno.EOPNOTSUPP, errno.EINVAL):
                return  # no fallocate here: checked above, written as we go
            os.close(self._fd)
            if error.errno in DISK_FULL:
                raise InsufficientDiskSpace(str(path), data_bytes, free_bytes(path.parent)) from error
            raise typed_error(error, path) from error

    def write(self, chunk: Chunk, rows: Rows, failed: npt.NDArray[np.bool_]) -> None:
        """Write the chunk's rows at their place (``failed`` rows are NaN)."""
        assert isinstance(rows, DenseRows)  # a sparse job writes Parquet (aembed_file refuses .npy)
        data = np.ascontiguousarray(rows.matrix, dtype="<f4").tobytes()
        os.pwrite(self._fd, data, self._offset + chunk.start * self._width * 4)

    def sync(self) -> None:
        """``fdatasync`` the matrix."""
        os.fdatasync(self._fd)

    def finish(self, final: Path, rows: int) -> None:
        """Close and rename the matrix (of ``rows`` rows by construction) to ``final``."""
        self.close()
        with disk_errors(final):
            os.replace(self.path, final)
            fsync_folder(final.parent)

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class ParquetSink:
    """A Parquet file with the id, the kept columns and the vectors' columns (``vectors.fields``: a
    ``fixed_size_list<float32>[width]`` ``embedding``, or ``sparse_indices`` and ``sparse_values``; null
    for failed rows): one part file per chunk in ``folder``, joined in order (one row group per chunk)
    when the job is complete.

    A part holds a ``fixed_size_list`` column as a variable ``list`` (a null row empty), cast back when
    the parts are joined: pyarrow before 26 cannot read a null ``fixed_size_list`` row from Parquet
    (apache/arrow#35692), so a job with a refused row would fail at its end on pyarrow 16-25; the joined
    file is read with pyarrow >= 26 (or another Parquet reader).

    Args:
        folder: where the part files go.
        width: the embedding width.
        types: the Arrow type of the id and each kept column, by name.
        id_name: the id column's name in the output.
        total_bytes: the expected size of the output, for the free-space check.
        vectors: dense or sparse.

    Raises:
        MissingDependency: pyarrow is not installed.
        InsufficientDiskSpace: the parts and the joined file do not fit on the disk.
    """

    def __init__(
        self,
        folder: Path,
        width: int,
        types: dict[str, Any],
        id_name: str,
        total_bytes: int,
        *,
        vectors: Vectors,
    ) -> None:
        self._pa = require("pyarrow", "parquet", "writing Parquet outputs")
        self._pq = require("pyarrow.parquet", "parquet", "writing Parquet outputs")
        folder.mkdir(parents=True, exist_ok=True)
        written = sum(part.stat().st_size for part in folder.glob("*.parquet"))
        check_space(folder / "part", max(0, 2 * total_bytes - written))  # the parts, then the joined file
        self._folder = folder
        self._id_name = id_name
        pa = self._pa
        fields = [pa.field(name, kind) for name, kind in types.items()]
        if id_name not in types:
            fields.insert(0, pa.field(id_name, pa.int64()))
        self._schema = pa.schema([*fields, *vectors.fields(pa, width)])
        self._part_schema = pa.schema(
            [
                pa.field(f.name, pa.list_(f.type.value_type)) if pa.types.is_fixed_size_list(f.type) else f
                for f in self._schema
            ]
        )

    def _part(self, index: int) -> Path:
        return self._folder / f"part-{index:08d}.parquet"

    def write(self, chunk: Chunk, rows: Rows, failed: npt.NDArray[np.bool_]) -> None:
        """Write the chunk as its own part file (atomically: a temporary name, then a rename)."""
        pa = self._pa
        columns = {self._id_name: chunk.ids, **chunk.kept}
        arrays = [
            pa.array(columns[field.name], field.type) for field in self._schema if field.name in columns
        ]
        table = pa.Table.from_arrays([*arrays, *rows.arrow(pa, failed)], schema=self._part_schema)
        write_atomically(self._part(chunk.index), lambda handle: self._pq.write_table(table, handle))

    def sync(self) -> None:
        """Nothing to do: a part file is durable (its folder ``fsync``-ed) once written."""

    def finish(self, final: Path, rows: int) -> None:
        """Join the parts in chunk order into ``final`` (through a temporary name). The parts stay until
        the job's manifest is written (the work folder goes then), so a run stopped in between joins them
        again; a join of other than ``rows`` rows replaces nothing.

        Raises:
            JobError: the parts hold another number of rows than the job counted.
        """
        parts = sorted(self._folder.glob("part-*.parquet"))

        def join(handle: BinaryIO) -> None:
            joined = 0
            with self._pq.ParquetWriter(handle, self._schema) as writer:
                for part in parts:
                    table = self._pq.read_table(part).cast(self._schema)
                    joined += table.num_rows
                    writer.write_table(table)
            if joined != rows:
                raise JobError(
                    f"{final}: the finished parts hold {joined} rows where the input has {rows}; nothing "
                    "was replaced. Run the job again with resume=False (vllm-tasks: --restart)."
                )

        write_atomically(final, join)

    def close(self) -> None:
        """Nothing stays open between chunks."""
