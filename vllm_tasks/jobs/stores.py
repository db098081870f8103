"""Vector stores as ``embed_file`` outputs: a LanceDB table (``lancedb://PATH#TABLE``) or a Qdrant collection,
in local mode (``qdrant://PATH#COLLECTION``, ``QdrantClient(path=...)``) or on a server
(``qdrant+http://HOST:PORT#COLLECTION``, ``qdrant+https://...``).

Each input row is one row (one point) of the store, keyed by its row number: a ``row`` column (payload
field), the id and kept columns as a Parquet output has them, and the vectors. A refused row is stored
without vectors (a null vector column; a point with no vectors) and listed in the job's errors file, as
a Parquet output has it. Rows are written as chunks finish, so the table fills up during the run; a
resumed run never stores a row twice: LanceDB's rows of chunks the checkpoint does not count are
deleted when the run starts again, and a Qdrant point's id is its row number (an upsert replaces it). A
run that starts over (``resume=False``, or no checkpoint) replaces the table or collection.

The job's own files (checkpoint, lock, manifest, errors) go next to the store: ``PATH/TABLE.partial/``,
``PATH/TABLE.manifest.json``, ... (for a Qdrant server, in the current folder, as
``qdrant-HOST-PORT-COLLECTION.*``).

LanceDB has no sparse vectors: a sparse job into it is refused before anything is sent (Qdrant holds them
as ``SparseVector``). In Qdrant the vectors are one named vector of the collection: ``embedding`` (dense,
cosine), ``sparse``, or ``token_embeddings`` (multi-vector, ``MAX_SIM``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import orjson

from ..dependencies import require
from ..errors import InvalidInputError, JobError, VLLMTasksError
from .files import disk_errors
from .inputs import Chunk, InputSpec, parquet_types
from .vectors import SPARSE, DenseRows, MatrixRows, Rows, SparseRows, Vectors

StoreKind = Literal["lancedb", "qdrant"]
STORE_KINDS: tuple[StoreKind, ...] = ("lancedb", "qdrant")
_SCHEMES: dict[str, StoreKind] = {
    "lancedb": "lancedb",
    "qdrant": "qdrant",
    "qdrant+http": "qdrant",
    "qdrant+https": "qdrant",
}
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
QDRANT_PORT = 6333
KEY = "row"
"""The column (payload field) holding each row's number: the key a resumed run writes by."""
QDRANT_VECTORS = {"dense": "embedding", "sparse": "sparse", "multi-vector": "token_embeddings"}
"""The Qdrant named vector of each kind of rows."""
QDRANT_BATCH = 256
"""Points per Qdrant upsert (a server's request size limit is 32 MiB by default)."""
_LABELS: dict[StoreKind, str] = {"lancedb": "LanceDB", "qdrant": "Qdrant"}


@dataclass(frozen=True)
class StoreTarget:
    """Where a job's rows go when its ``out`` is a store URL.

    Attributes:
        kind: ``lancedb`` or ``qdrant``.
        url: the URL as given.
        name: the table (collection).
        folder: the database folder (LanceDB, Qdrant's local mode); ``None`` for a Qdrant server.
        server: the Qdrant server's URL (``http(s)://HOST:PORT``); ``None`` in local mode.
    """

    kind: StoreKind
    url: str
    name: str
    folder: Path | None = None
    server: str | None = None

    @property
    def label(self) -> str:
        """``LanceDB`` or ``Qdrant``, for messages."""
        return _LABELS[self.kind]

    @property
    def job_path(self) -> Path:
        """The name the job's own files are made from (``.partial``, ``.manifest.json``, ``.lock``, ...)."""
        if self.folder is not None:
            return self.folder / self.name
        parts = urllib.parse.urlsplit(str(self.server))
        return Path(f"qdrant-{parts.hostname}-{parts.port}-{self.name}")

    def check(self, spec: InputSpec, vectors: Vectors) -> None:
        """Refuse what this store cannot hold, before anything is read or sent: sparse vectors in LanceDB,
        and two columns (payload fields) of one name.

        Raises:
            InvalidInputError: naming ``sparse`` (and Qdrant, which holds them), or the column.
        """
        if self.kind == "lancedb" and vectors is SPARSE:
            raise InvalidInputError(
                "sparse",
                True,
                f"cannot go to {self.url}: LanceDB has no sparse vectors",
                "Write them to Qdrant (out='qdrant://PATH#COLLECTION', local mode) or to Parquet.",
            )
        seen = {KEY, *vectors.columns}
        for field, name in [("id_field", spec.id_field), *(("keep_columns", n) for n in spec.keep_columns)]:
            if name is None:
                continue
            if name in seen:
                raise InvalidInputError(
                    field,
                    name,
                    f"would be a second column of that name in {self.url} (its {KEY!r} key, the id or the "
                    "vectors)",
                    "Drop it, or rename the column in the input.",
                )
            seen.add(name)

    def sink(
        self, spec: InputSpec, vectors: Vectors, width: int, done: frozenset[int], chunk_rows: int
    ) -> LanceDBSink | QdrantSink:
        """The sink writing a job's chunks here; ``done`` (the chunks its checkpoint counts) empty starts
        the table over.

        Raises:
            MissingDependency: the store's client library is not installed.
            JobError: the store cannot be opened or written (its message).
        """
        if self.kind == "lancedb":
            return LanceDBSink(self, spec, vectors, width, done=done, chunk_rows=chunk_rows)
        return QdrantSink(self, spec, vectors, width, fresh=not done)


def store_target(out: object) -> StoreTarget | None:
    """The store that an ``out`` string names, or ``None`` for a file path.

    Raises:
        InvalidInputError: a store URL without its ``#TABLE``, with a bad table name, or without a
            folder (a host for a Qdrant server).

    Examples:
        >>> target = store_target("lancedb://./db#docs")
        >>> target.kind, target.folder, target.name
        ('lancedb', PosixPath('db'), 'docs')
        >>> store_target("qdrant+http://localhost#docs").server
        'http://localhost:6333'
        >>> store_target("docs.parquet") is None
        True
    """
    if not isinstance(out, str):
        return None
    scheme, separator, rest = out.partition("://")
    kind = _SCHEMES.get(scheme.lower()) if separator else None
    if kind is None:
        return None
    label = _LABELS[kind]
    location, hashed, name = rest.rpartition("#")
    if not hashed:
        raise InvalidInputError(
            "out", out, f"names no {label} table", f"Add it after a #, e.g. {scheme}://./db#docs."
        )
    if not _NAME.fullmatch(name):
        raise InvalidInputError(
            "out",
            out,
            f"{name!r} is not a table name (letters, digits, _ . - only, at most 128)",
            "Name the table after the #, e.g. #docs.",
        )
    if scheme.lower() in ("qdrant+http", "qdrant+https"):
        return StoreTarget(
            kind, out, name, server=_server(out, scheme.lower().removeprefix("qdrant+"), location)
        )
    if not location or "\x00" in location:
        raise InvalidInputError(
            "out", out, f"names no {label} folder", f"Name it before the #, e.g. {scheme}://./db#{name}."
        )
    return StoreTarget(kind, out, name, folder=Path(location).expanduser())


def _server(out: str, scheme: str, location: str) -> str:
    """``scheme://host:port`` (port 6333 unless given) of a Qdrant server URL.

    Raises:
        InvalidInputError: no host, a bad port, or a path, query or credentials in the URL.
    """
    try:
        parts = urllib.parse.urlsplit(f"{scheme}://{location}")
        port = parts.port or QDRANT_PORT
    except ValueError as error:
        raise InvalidInputError(
            "out", out, f"is not a server URL ({error})", "e.g. qdrant+http://host:6333#docs."
        ) from None
    if not parts.hostname or parts.path.strip("/") or parts.query or parts.username or parts.password:
        raise InvalidInputError(
            "out",
            out,
            "is not HOST[:PORT] of a Qdrant server",
            "e.g. qdrant+http://localhost:6333#docs (the API key goes in QDRANT_API_KEY).",
        )
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{scheme}://{host}:{port}"


@contextlib.contextmanager
def store_errors(target: StoreTarget) -> Iterator[None]:
    """The store library's own errors as a :class:`JobError` naming the store (the SDK's pass through)."""
    try:
        yield
    except VLLMTasksError:
        raise
    except Exception as error:
        raise JobError(f"{target.url}: {target.label} refused it: {type(error).__name__}: {error}") from error


def _plain(value: Any) -> Any:
    """A kept column's value as JSON data (a Qdrant payload): dates and the like become strings."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return orjson.loads(orjson.dumps(value, default=str, option=orjson.OPT_SERIALIZE_NUMPY))


class LanceDBSink:
    """A LanceDB table: ``row: int64``, the id and kept columns (their Parquet types), and the vectors'
    columns as :class:`~vllm_tasks.jobs.outputs.ParquetSink` has them (``embedding:
    fixed_size_list<float32>[width]``, or ``token_embeddings: list<fixed_size_list<float32>[width]>``;
    null for a refused row). One ``add`` (one table version) per chunk.

    Raises:
        MissingDependency: lancedb is not installed.
        JobError: the table cannot be made or opened, or its columns are not the job's.
    """

    def __init__(
        self,
        target: StoreTarget,
        spec: InputSpec,
        vectors: Vectors,
        width: int,
        *,
        done: frozenset[int],
        chunk_rows: int,
    ) -> None:
        self._pa = pa = require("pyarrow", "lancedb", "writing LanceDB outputs")
        lancedb = require("lancedb", "lancedb", "writing LanceDB outputs")
        self._target, self._id_field = target, spec.id_field
        types = parquet_types(spec)
        self._schema = pa.schema(
            [
                pa.field(KEY, pa.int64()),
                *(pa.field(name, kind) for name, kind in types.items()),
                *vectors.fields(pa, width),
            ]
        )
        with store_errors(target):
            db = lancedb.connect(str(target.folder))
            if not done:
                self._table = db.create_table(target.name, schema=self._schema, mode="overwrite")
                return
            self._table = db.open_table(target.name)
            found = [(f.name, f.type) for f in self._table.schema]
            if found != [(f.name, f.type) for f in self._schema]:
                raise JobError(
                    f"{target.url}: the table's columns {found} are not this job's; it was changed since "
                    "the job's last run. Start over with resume=False (vllm-tasks: --restart)."
                )
            self._table.delete(_not_done(done, chunk_rows))

    def write(self, chunk: Chunk, rows: Rows, failed: npt.NDArray[np.bool_]) -> None:
        """Add the chunk's rows to the table (one commit: all of them or none)."""
        pa = self._pa
        columns = {KEY: range(chunk.start, chunk.start + len(chunk.ids)), **chunk.kept}
        if self._id_field is not None:
            columns[self._id_field] = chunk.ids
        arrays = [pa.array(columns[f.name], f.type) for f in self._schema if f.name in columns]
        table = pa.Table.from_arrays([*arrays, *rows.arrow(pa, failed)], names=self._schema.names)
        with store_errors(self._target):
            self._table.add(table.cast(self._schema))

    def sync(self) -> None:
        """Nothing to do: each ``add`` is a committed table version."""

    def finish(self, final: Path, rows: int) -> None:
        """Check that the table holds the job's ``rows`` rows (it is in place already).

        Raises:
            JobError: it holds another number (the table was written by something else meanwhile).
        """
        with store_errors(self._target):
            held = self._table.count_rows()
        if held != rows:
            raise JobError(
                f"{self._target.url}: the table holds {held} rows where the input has {rows}; something else "
                "wrote to it during the job. Run it again with resume=False (vllm-tasks: --restart)."
            )

    def close(self) -> None:
        """Nothing stays open."""


def _not_done(done: frozenset[int], chunk_rows: int) -> str:
    """A LanceDB filter of the rows outside the chunks in ``done`` (runs of consecutive chunks as ranges).

    Examples:
        >>> _not_done(frozenset({0, 1, 3}), 10)
        'NOT ((row >= 0 AND row < 20) OR (row >= 30 AND row < 40))'
    """
    runs: list[list[int]] = []
    for index in sorted(done):
        if runs and runs[-1][1] == index:
            runs[-1][1] = index + 1
        else:
            runs.append([index, index + 1])
    ranges = " OR ".join(f"({KEY} >= {a * chunk_rows} AND {KEY} < {b * chunk_rows})" for a, b in runs)
    return f"NOT ({ranges})"


def _check_not_held(target: StoreTarget) -> None:
    """Refuse a local Qdrant folder that another client holds (qdrant-client would raise and leave its own
    lock file open); the lock is ``flock`` on ``FOLDER/.lock``, as qdrant-client takes it.

    Raises:
        JobError: naming the folder and the fix.
    """
    assert target.folder is not None
    lock = target.folder / ".lock"
    if not lock.is_file():
        return
    with disk_errors(lock), open(lock, "rb") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise JobError(
                f"{target.url}: {target.folder} is open in another Qdrant client (QdrantClient(path=...) in "
                "another process or notebook); local mode allows one. Close it, or write to a Qdrant server."
            ) from None
        fcntl.flock(handle, fcntl.LOCK_UN)


class QdrantSink:
    """A Qdrant collection (local mode or a server) with one named vector (:data:`QDRANT_VECTORS`): a
    point per row, its id the row number, its payload ``row``, the id and the kept columns; a refused row
    is a point without vectors. Points are upserted, so a chunk written twice is stored once.

    Raises:
        MissingDependency: qdrant-client is not installed.
        JobError: the collection cannot be made or opened (a local folder another client holds, a server
            that does not answer), or its vector is not the job's.
    """

    def __init__(self, target: StoreTarget, spec: InputSpec, vectors: Vectors, width: int, *, fresh: bool):
        qdrant_client = require("qdrant_client", "qdrant", "writing Qdrant outputs")
        self._models = models = qdrant_client.models
        self._target, self._id_field, self._vector = target, spec.id_field, QDRANT_VECTORS[vectors.name]
        dense: dict[str, Any] = {}
        sparse: dict[str, Any] = {}
        if vectors is SPARSE:
            sparse[self._vector] = models.SparseVectorParams()
        else:
            multi = (
                models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM)
                if vectors.name == "multi-vector"
                else None
            )
            dense[self._vector] = models.VectorParams(
                size=width, distance=models.Distance.COSINE, multivector_config=multi
            )
        self._qdrant = qdrant_client
        self._client: Any = None
        with store_errors(target):
            client = self._connect()
            try:
                exists = client.collection_exists(target.name)
                if exists and fresh:
                    client.delete_collection(target.name)
                if fresh or not exists:
                    client.create_collection(
                        target.name, vectors_config=dense, sparse_vectors_config=sparse or None
                    )
                else:
                    self._check_collection(dense, sparse)
            except BaseException:
                self.close()
                raise

    def _connect(self) -> Any:
        """The open client, opened when the sink is closed."""
        if self._client is None:
            if self._target.folder is not None:
                _check_not_held(self._target)
                # one thread at a time: the job's writes run in a worker thread, in turn
                self._client = self._qdrant.QdrantClient(
                    path=str(self._target.folder), force_disable_check_same_thread=True
                )
            else:
                self._client = self._qdrant.QdrantClient(
                    url=self._target.server, api_key=os.environ.get("QDRANT_API_KEY")
                )
        return self._client

    def _check_collection(self, dense: dict[str, Any], sparse: dict[str, Any]) -> None:
        params = self._connect().get_collection(self._target.name).config.params
        have_dense = params.vectors if isinstance(params.vectors, dict) else {}
        have_sparse = params.sparse_vectors or {}
        wanted = {k: (v.size, v.multivector_config is not None) for k, v in dense.items()}
        found = {k: (v.size, v.multivector_config is not None) for k, v in have_dense.items()}
        if wanted != found or set(sparse) != set(have_sparse):
            raise JobError(
                f"{self._target.url}: the collection's vectors are not this job's; it was changed since the "
                "job's last run. Start over with resume=False (vllm-tasks: --restart)."
            )

    def write(self, chunk: Chunk, rows: Rows, failed: npt.NDArray[np.bool_]) -> None:
        """Upsert the chunk's points (waiting until they are stored)."""
        models = self._models
        points = []
        for index, row_id in enumerate(chunk.ids):
            payload = {KEY: chunk.start + index}
            if self._id_field is not None:
                payload[self._id_field] = _plain(row_id)
            payload.update({name: _plain(values[index]) for name, values in chunk.kept.items()})
            vector = {} if failed[index] else {self._vector: self._vector_of(rows, index)}
            points.append(models.PointStruct(id=chunk.start + index, vector=vector, payload=payload))
        with store_errors(self._target):
            for start in range(0, len(points), QDRANT_BATCH):
                self._connect().upsert(self._target.name, points[start : start + QDRANT_BATCH], wait=True)

    def _vector_of(self, rows: Rows, index: int) -> Any:
        if isinstance(rows, DenseRows):
            return rows.matrix[index].tolist()
        if isinstance(rows, SparseRows):
            vector = rows.vectors[index]
            assert vector is not None
            return self._models.SparseVector(indices=vector.indices.tolist(), values=vector.values.tolist())
        assert isinstance(rows, MatrixRows)
        matrix = rows.matrices[index]
        assert matrix is not None
        return matrix.tolist()

    def sync(self) -> None:
        """Nothing to do: each upsert waited until its points were stored."""

    def finish(self, final: Path, rows: int) -> None:
        """Check that the collection holds the job's ``rows`` points; close the client.

        Raises:
            JobError: it holds another number (something else wrote to it during the job).
        """
        with store_errors(self._target):
            held = self._connect().count(self._target.name, exact=True).count
        self.close()
        if held != rows:
            raise JobError(
                f"{self._target.url}: the collection holds {held} points where the input has {rows}; "
                "something else wrote to it during the job. Run it again with resume=False (vllm-tasks: "
                "--restart)."
            )

    def close(self) -> None:
        """Close the client (a local folder's lock is released); the next write or check opens it again."""
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()
