"""Callable classes for Ray Data's ``Dataset.map_batches``: embed, score, transcribe and OCR the rows of
a dataset on a cluster, through the SDK's client. See ``docs/integrations.md`` and ``docs/scaling.md``.

- :class:`Embedder` -- a text column -> a float32 vector column (``/v1/embeddings``).
- :class:`Scorer` -- a query and a document column -> a float64 score column (``/score``, pairs zipped).
- :class:`Transcriber` -- an audio column (bytes, paths, URLs) -> a transcript column.
- :class:`OCR` -- an image or PDF column (bytes, paths, URLs, image arrays) -> a markdown column.

Ray pickles the class and its constructor arguments and builds one instance per actor, on the worker:
``__init__`` builds the instance's ``vllm_tasks.Client`` there. An instance pickles too (its settings
travel, the copy builds its own client). A batch is a dict of numpy arrays (Ray's default
``batch_format="numpy"``) or a pandas DataFrame (``batch_format="pandas"``); the result is always a dict
of numpy arrays: every input column, plus the output column (and the ``error`` column, below).

A batch is one group of rows on the SDK's job engine (``vllm_tasks.jobs.engine``, as ``embed_file``'s
chunks and ``ocr_dir``'s pages): planned into requests (:class:`Embedder`: ``batch_size`` texts and the
engine's token budget; :class:`Transcriber` and :class:`OCR`: a row each), ``concurrency`` in flight (or
``"auto"``: tuned from the server's ``/metrics``, else the answers' latencies), each retried by the client
on connection errors, timeouts, 408/409/429/5xx with backoff (``max_retries``). With ``on_error="column"``
a row the server (or the client's own checks) refuses -- an over-long text, an undecodable audio file or
image, a null -- gets its message in the ``error`` column and an empty output (NaN vector or score, ``""``
text) instead of failing the Ray task: a request refused for a row's sake is split in halves down to that
row, and every other row gets its result. Errors that are not about a row (server down after the retries,
a wrong API key, a model that does not serve the task) fail the task either way.

The sync classes run each batch's requests on an event loop in a thread of the instance's own, kept
between batches (ended by ``close()`` or with the instance). :class:`AsyncEmbedder`, :class:`AsyncScorer`,
:class:`AsyncTranscriber` and :class:`AsyncOCR` take the same arguments with ``async def __call__`` on a
``vllm_tasks.AsyncClient``: Ray Data (2.60) awaits an actor's async batches side by side on its own event
loop (up to 4 by default: ``RAY_DATA_DEFAULT_ASYNC_BATCH_UDF_MAX_CONCURRENCY``), ``concurrency`` requests
in flight across them.

A killed pipeline resumes without sending its finished rows again with Ray's row-id checkpoints
(``ray.data.checkpoint.CheckpointConfig``, tested with Ray 2.60): the source is a ``ray.data.read_*``
with a column of unique ids (Ray's ``read_parquet(..., include_row_hash=True)`` adds ``row_hash``,
stable per file and position), the sink a ``write_*``, and the callables get ``id_column=`` that column:
they keep every input column, refuse a batch without the ids, and keep their outputs off its name. Ray
records the ids of each block it writes; a run with the same ``checkpoint_path`` skips them (a block
that was not written is sent again). A row that failed with ``on_error="column"`` is written, so it
counts as done: filter the output on its error column to send such rows again.

The classes import nothing from Ray: ``pip install "vllm-tasks[ray]"`` installs ``ray[data]`` for your
pipeline.

Examples:
    >>> import ray
    >>> from vllm_tasks.integrations.ray import Embedder
    >>> ds = ray.data.read_parquet("corpus/")                      # a "text" column
    >>> ds = ds.map_batches(
    ...     Embedder,
    ...     fn_constructor_kwargs={"settings": vt.ClientSettings("http://vllm-lb:8000", model="BAAI/bge-m3")},
    ...     batch_size=256,
    ...     compute=ray.data.ActorPoolStrategy(size=4),
    ... )
    >>> ds.write_parquet("embedded/")                              # + an "embedding" column
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import json
import sys
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from .. import defaults
from .._async.client import AsyncClient
from .._sync.client import Client
from ..adaptive import AdaptiveLimit, Concurrency
from ..batching import plan_batches
from ..calls import CallOptions
from ..config import ClientSettings
from ..embeddings import EmbedParams
from ..errors import InvalidInputError
from ..jobs.engine import Engine, Plan, estimated_tokens
from ..jobs.replicas import JobClient, Replica, ReplicaPool, make_replicas
from ..jobs.vectors import DENSE
from ..ocr import OCRParams, merge_pages
from ..ocr.ladder import DEFAULT_QUALITY, PageQuality, check_document, quality_of
from ..ocr.presets import OCRPreset
from ..scoring import RerankParams
from ..threaded import ThreadedClient
from ..transcription import TranscribeParams, segment_keywords
from ..types.embeddings import EmbeddingResult
from ..types.ocr import OCRDocument, OCRResult
from ..validation import concurrency_setting, positive_int
from ._common import (
    is_pdf,
    ocr_document_pages,
    ocr_page_records,
    transcript_records,
)

__all__ = [
    "OCR",
    "AsyncEmbedder",
    "AsyncOCR",
    "AsyncScorer",
    "AsyncTranscriber",
    "Embedder",
    "Scorer",
    "Transcriber",
]

OnError = Literal["raise", "column"]
T = TypeVar("T")
RETRY_AFTER = 1.0
"""Seconds the instance's one replica is set aside after a failure (a batch that failed for it is
raised; the next batch finds it available again)."""
CLOSE_WAIT = 5.0
"""Seconds ``close()`` waits for the batches' thread to end."""
_UNPICKLED = frozenset({"_client", "_own", "_pool", "_loop", "_close"})
"""An instance's clients, pool and thread: a pickled copy builds its own."""


def _describe(error: BaseException) -> str:
    """What the ``error`` column says: the SDK's exception type and its message."""
    return f"{type(error).__name__}: {error}"


# --------------------------------------------------------------------------------------------------
# Batches: columns in, columns out
# --------------------------------------------------------------------------------------------------


def _batch_columns(batch: Any) -> dict[str, Any]:
    """A batch as a dict of columns: a mapping as it is, a pandas DataFrame as numpy arrays.

    Raises:
        InvalidInputError: any other batch type (e.g. ``batch_format="pyarrow"``).
    """
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(batch, pandas.DataFrame):
        return {str(name): batch[name].to_numpy() for name in batch.columns}
    if isinstance(batch, Mapping):
        return dict(batch)
    raise InvalidInputError(
        "batch",
        type(batch).__name__,
        "is not a dict of columns or a pandas DataFrame",
        'Call map_batches with batch_format="numpy" (the default) or "pandas".',
    )


def _column(columns: Mapping[str, Any], name: str, field: str, holds: str) -> npt.NDArray[Any]:
    """The column ``name`` as a numpy array, or a typed error naming it and what the batch has."""
    if name not in columns:
        present = ", ".join(repr(key) for key in columns) or "none"
        raise InvalidInputError(
            field,
            name,
            f"is not a column of the batch (its columns: {present})",
            f"Pass {field}= the name of the column that holds {holds}.",
        )
    values = columns[name]
    return values if isinstance(values, np.ndarray) else _objects(list(values))


def _wrong_dtype(field: str, name: str, array: npt.NDArray[Any], holds: str) -> InvalidInputError:
    return InvalidInputError(
        field,
        name,
        f"holds {array.dtype} values of shape {array.shape}, not {holds}",
        f"Pass {field}= a column of {holds}, or convert this one first (e.g. with ds.map_batches).",
    )


def _cells(
    columns: Mapping[str, Any],
    name: str,
    field: str,
    holds: str,
    accepted: tuple[type, ...],
) -> list[Any]:
    """One value per row of a column of strings or objects; refuses numeric and nested columns."""
    array = _column(columns, name, field, holds)
    if array.ndim != 1 or array.dtype.kind not in "OU":
        raise _wrong_dtype(field, name, array, holds)
    cells: list[Any] = array.tolist()
    present = [cell for cell in cells if cell is not None]
    if present and not any(isinstance(cell, accepted) for cell in present):
        kinds = sorted({type(cell).__name__ for cell in present})
        raise InvalidInputError(
            field,
            name,
            f"holds {', '.join(kinds)} values, not {holds}",
            f"Pass {field}= a column of {holds}.",
        )
    return cells


def _cell_errors(
    cells: list[Any],
    name: str,
    holds: str,
    accepted: tuple[type, ...],
    *,
    on_error: OnError,
    errors: list[str | None] | None = None,
) -> list[str | None]:
    """The ``error`` column's text for each cell that cannot be sent (``None`` for the others, and the
    rows ``errors`` already has); with ``on_error="raise"``, the first such cell raises instead."""
    errors = list(errors) if errors is not None else [None] * len(cells)
    for row, cell in enumerate(cells):
        if errors[row] is not None or isinstance(cell, accepted):
            continue
        error = InvalidInputError(
            f"{name}[{row}]",
            cell,
            f"is a {type(cell).__name__}, not {holds}",
            "Drop or fill such rows first."
            + (' Or pass on_error="column" to get a per-row error.' if on_error == "raise" else ""),
        )
        if on_error == "raise":
            raise error
        errors[row] = _describe(error)
    return errors


def _check_names(**names: str | None) -> None:
    """Column names are non-empty strings and all different."""
    seen: dict[str, str] = {}
    for field, name in names.items():
        if name is None:
            continue
        if not isinstance(name, str) or not name:
            raise InvalidInputError(field, name, "must be a non-empty column name", f'e.g. {field}="text".')
        if name in seen:
            raise InvalidInputError(
                field, name, f"is also {seen[name]}", "Give each input and output column its own name."
            )
        seen[name] = field


Request = Callable[[JobClient, list[Any]], Awaitable[Iterable[Any]]]
"""One request for some rows' cells on a client of the pool: their results, in order."""
Planner = Callable[[list[Any]], Iterable[Sequence[int]]]
"""Cells (of the rows to send) planned into batches: their positions, one request each."""


@dataclasses.dataclass
class _Rows:
    """A dataframe batch on the job engine: each row's cell, error (``None`` while it has none) and
    result (``None`` until answered)."""

    cells: Sequence[Any]
    errors: list[str | None]
    results: list[Any]


class _BatchKind:
    """A dataframe batch as the :class:`~vllm_tasks.jobs.engine.Engine`'s group (its
    :class:`~vllm_tasks.jobs.engine.GroupKind`): the rows without an error yet, planned by ``plan`` (else
    one request per row), each batch one ``request``; a refused row's message goes to its error slot, or
    is raised with ``raising``."""

    def __init__(self, request: Request, plan: Planner | None, *, raising: bool) -> None:
        self._request, self._plan, self._raising = request, plan, raising

    def start(self, group: _Rows) -> _Rows:
        return group

    def batches(self, work: _Rows) -> list[list[int]]:
        rows = [row for row, error in enumerate(work.errors) if error is None]
        if self._plan is None:
            return [[row] for row in rows]
        return [[rows[at] for at in batch] for batch in self._plan([work.cells[row] for row in rows])]

    async def request(self, client: JobClient, work: _Rows, rows: Sequence[int]) -> Iterable[Any]:
        return await self._request(client, [work.cells[row] for row in rows])

    def tokens(self, answer: Iterable[Any]) -> int:
        return 0

    def answered(self, work: _Rows, rows: Sequence[int], answer: Iterable[Any], replica: Replica) -> None:
        for row, result in zip(rows, answer, strict=True):
            work.results[row] = result

    def refused(self, work: _Rows, row: int, error: Exception) -> None:
        if self._raising:
            raise error
        work.errors[row] = _describe(error)

    async def check(self, work: _Rows, engine: Engine[_Rows, _Rows]) -> None:
        return None


@dataclasses.dataclass(kw_only=True, eq=False)
class _Callable(abc.ABC):
    """What every class shares: the client settings, the error column, and its batches' rows sent on the
    job engine (:meth:`_send`) over a pool of one replica, its client, kept between batches.

    A keyword-only dataclass: each class adds its own fields, and ``__post_init__`` checks them and builds
    the client (on the Ray worker, where Ray constructs the instance). :class:`_BatchCallable` is the sync
    side (a ``Client``, its batches run on an event loop of its own), :class:`_AsyncCallable` the async
    one (an ``AsyncClient``, on the caller's loop).
    """

    settings: ClientSettings | None = None
    client: Client | AsyncClient | None = dataclasses.field(default=None, repr=False)
    concurrency: Concurrency = defaults.CONCURRENCY
    on_error: OnError = "raise"
    error_column: str = "error"
    id_column: str | None = None
    _limit: AdaptiveLimit | None = dataclasses.field(default=None, init=False, repr=False)
    _client_type: ClassVar[type[Client | AsyncClient]] = Client

    def __post_init__(self) -> None:
        if self.on_error not in ("raise", "column"):
            raise InvalidInputError(
                "on_error",
                self.on_error,
                "must be 'raise' or 'column'",
                "'column' writes a per-row error column.",
            )
        concurrency_setting("concurrency", self.concurrency)
        if self.client is not None:
            if not isinstance(self.client, self._client_type):
                raise InvalidInputError(
                    "client",
                    type(self.client).__name__,
                    f"must be a vllm_tasks.{self._client_type.__name__}",
                    "Pass settings=vllm_tasks.ClientSettings(...) for each worker to build its own.",
                )
            if self.settings is not None:
                raise InvalidInputError(
                    "settings", self.settings, "is given with client= (whose settings are used)", "Pass one."
                )
            self.settings = self.client.settings
        elif self.settings is None:
            self.settings = ClientSettings()  # from the environment of the process that builds it
        elif not isinstance(self.settings, ClientSettings):
            raise InvalidInputError(
                "settings",
                type(self.settings).__name__,
                "must be a vllm_tasks.ClientSettings",
                "e.g. ClientSettings('http://vllm:8000', model='BAAI/bge-m3').",
            )
        self._build_client()

    def _build_client(self) -> None:
        """Build the instance's client and what runs its batches (here, or in the copy Ray unpickles)."""
        self._pool: ReplicaPool | None = None

    @abc.abstractmethod
    def _replicas(self) -> list[Replica]:
        """The pool's one replica: the instance's client, as the job engine calls it."""

    def __getstate__(self) -> dict[str, Any]:
        if isinstance(self.client, Client | AsyncClient) and self.client.http_client is not None:
            raise InvalidInputError(
                "client",
                self.client,
                "has its own http_client, which cannot be copied into another process (a Ray worker)",
                "Pass settings= instead (each copy makes its own connections from them), or use this "
                "instance in this process only.",
            )
        # clients, pools and threads do not pickle: the copy builds its own (the auto limit travels)
        state = {key: value for key, value in self.__dict__.items() if key not in _UNPICKLED}
        state["client"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._build_client()

    @property
    def concurrency_limit(self) -> int | None:
        """With ``concurrency="auto"``, where this instance's limit settled (read-only): requests in flight
        (for :class:`Transcriber` and :class:`OCR`, rows), the limit kept for the instance's life (and
        carried by a pickled copy). ``None`` with a fixed concurrency, or before the first batch.

        Examples:
            >>> ocr = OCR(settings=vt.ClientSettings("http://ocr:8000"), concurrency="auto")
            >>> out = ocr({"image": np.array(["scan1.png", "scan2.png"], dtype=object)})
            >>> ocr.concurrency_limit
            3
        """
        return None if self._limit is None else self._limit.settled

    async def _send(
        self, cells: Sequence[Any], errors: list[str | None], request: Request, plan: Planner | None = None
    ) -> list[Any]:
        """The result of every cell without an error yet (``None`` for the others), on the job engine:
        the rows planned by ``plan`` (else one request per row), each batch one ``request`` over the
        instance's pool, ``concurrency`` requests in flight (``"auto"``: tuned from the server's
        ``/metrics``, else the answers' latencies, backed off on each 429 or 503 answer); a batch refused
        for a row's sake split in halves until the row is alone, whose message goes to ``errors`` (with
        ``on_error="column"``; raised with ``"raise"``).

        Raises:
            APIError: an error not about a row (server down after the client's retries, a wrong key, a
                model that does not serve the task): the first request's, rows not started never sent.
        """
        if self._pool is None:
            self._pool = ReplicaPool(
                self._replicas(), self.concurrency, RETRY_AFTER, give_up_after=0.0, hedge=False
            )
            if self.concurrency == "auto":
                replica = self._pool.replicas[0]
                replica.limit = self._limit = self._limit or replica.limit
        self._pool.restore()
        rows = _Rows(cells, errors, [None] * len(cells))
        kind = _BatchKind(request, plan, raising=self.on_error == "raise")
        return (await Engine(kind, self._pool).answer(rows)).results

    def _columns(self, batch: Any) -> dict[str, Any]:
        """The batch's columns; with ``id_column``, refused without it (the checkpoint needs every row's id
        in the output, where Ray would find it missing only when writing)."""
        columns = _batch_columns(batch)
        if self.id_column is not None:
            _column(columns, self.id_column, "id_column", "the rows' ids")
        return columns

    def _finish(
        self, columns: dict[str, Any], outputs: Mapping[str, npt.NDArray[Any]], errors: list[str | None]
    ) -> dict[str, Any]:
        """The batch with the output columns (and, with ``on_error="column"``, the error column) added."""
        result = {**columns, **outputs}
        if self.on_error == "column":
            result[self.error_column] = _strings(errors)
        return result


class _Loop:
    """An event loop in a daemon thread of its own, started by the first batch and kept (with the
    connections and the pool on it) until :meth:`close`: where a sync callable's batches run."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """``work`` run on the loop; its result (or error) once done. Interrupted (Ctrl-C), it is
        cancelled."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=self._loop.run_forever, name="vllm-tasks-batches", daemon=True
            )
            self._thread.start()
        future = asyncio.run_coroutine_threadsafe(work, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def close(self, client: Client | None) -> None:
        """End the loop's thread, then close ``client`` (the instance's own, else ``None``)."""
        loop, thread, self._loop = self._loop, self._thread, None
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            if threading.current_thread() is not thread:
                thread.join(CLOSE_WAIT)
                loop.close()
        if client is not None:
            client.close()


@dataclasses.dataclass(kw_only=True, eq=False)
class _BatchCallable(_Callable):
    """The sync side: a ``vllm_tasks.Client`` (built from the settings, or the one given), its batches
    run on an event loop in a thread of the instance's own (:class:`_Loop`), kept between batches."""

    def _build_client(self) -> None:
        super()._build_client()
        self._loop = _Loop()
        own = None
        if isinstance(self.client, Client):
            self._client = self.client  # the caller's, left open
        else:
            assert self.settings is not None
            self._client = own = Client.from_settings(self.settings)
        # Nothing calls close() (Ray ends the actor; a pipeline drops the instance): the connections close
        # with the instance, not when the collector reaches the sockets and warns.
        self._close: weakref.finalize[[Client | None], _BatchCallable] = weakref.finalize(
            self, self._loop.close, own
        )

    def _replicas(self) -> list[Replica]:
        # the client itself, each request in a worker thread: its own (urllib3) transport costs the
        # client less CPU per request than an AsyncClient's on this loop, and its usage is the caller's
        client = ThreadedClient(self._client)
        return [Replica(client, client.base_url)]

    def _on_loop(self, work: Coroutine[Any, Any, T]) -> T:
        """``work`` (the instance's requests) run on the instance's event loop."""
        return self._loop.run(work)

    def close(self) -> None:
        """Close the connections of the client built here and end the thread its batches ran on (done for
        you when the instance is garbage-collected, or Ray ends the actor's process); a ``client=`` given
        is left open."""
        self._close()


@dataclasses.dataclass(kw_only=True, eq=False)
class _Batches(_BatchCallable):
    """A sync callable's ``__call__``: one batch in, its columns and outputs out."""

    @abc.abstractmethod
    async def _answer(self, batch: Any) -> dict[str, Any]:
        """One batch's columns with the task's outputs added."""

    def __call__(self, batch: Any) -> dict[str, Any]:
        """Work one batch (a dict of numpy arrays, or a pandas DataFrame): every input column, the output
        columns, and with ``on_error="column"`` the error column (see the class).

        Raises:
            InvalidInputError: a missing input column or one of other values (see the class).
        """
        return self._on_loop(self._answer(batch))


@dataclasses.dataclass(kw_only=True, eq=False)
class _AsyncCallable(_Callable):
    """The async side: a ``vllm_tasks.AsyncClient`` (built from the settings, or the one given),
    ``async def __call__``, its requests on the caller's event loop (Ray Data's actor loop)."""

    _client_type: ClassVar[type[Client | AsyncClient]] = AsyncClient

    def _build_client(self) -> None:
        super()._build_client()
        if isinstance(self.client, AsyncClient):
            self._client, self._own = self.client, False  # the caller's, left open
        else:
            assert self.settings is not None
            self._client, self._own = AsyncClient.from_settings(self.settings), True

    def _replicas(self) -> list[Replica]:
        return make_replicas(self._client)[0]

    @abc.abstractmethod
    async def _answer(self, batch: Any) -> dict[str, Any]:
        """One batch's columns with the task's outputs added."""

    async def __call__(self, batch: Any) -> dict[str, Any]:
        """Work one batch (a dict of numpy arrays, or a pandas DataFrame): every input column, the output
        columns, and with ``on_error="column"`` the error column (see the class).

        Raises:
            InvalidInputError: a missing input column or one of other values (see the class).
        """
        return await self._answer(batch)

    async def aclose(self) -> None:
        """Close the connections of the client built here (Ray ends the actor's process without it); a
        ``client=`` given is left open."""
        if self._own:
            await self._client.close()


def _objects(values: Sequence[Any]) -> npt.NDArray[np.object_]:
    """A 1-D object array of ``values`` (strings, bytes, arrays or ``None``), never a string array or a
    deeper one (numpy would stack equal-shaped arrays)."""
    array = np.empty(len(values), dtype=object)
    for index, value in enumerate(values):
        array[index] = value
    return array


def _strings(values: Sequence[str | None]) -> npt.NDArray[np.object_]:
    """A text output column: ``""`` where a row has no value. Never ``None``: a batch whose values are all
    ``None`` would become an Arrow ``null`` column, and Ray's blocks would then disagree on the type
    (``write_parquet`` writes files that cannot be read back as one table)."""
    return _objects(["" if value is None else value for value in values])


def _text_cells(
    columns: Mapping[str, Any], name: str, field: str, errors: list[str | None] | None, on_error: OnError
) -> tuple[list[Any], list[str | None]]:
    """A text column's cells and the error slots (a cell that is not a string already has its error)."""
    cells = _cells(columns, name, field, "text", (str,))
    return cells, _cell_errors(cells, name, "text", (str,), on_error=on_error, errors=errors)


@dataclasses.dataclass(kw_only=True, eq=False)
class _Embed(_Callable):
    """:class:`Embedder`'s and :class:`AsyncEmbedder`'s fields and batches."""

    text_column: str = "text"
    output_column: str = "embedding"
    params: EmbedParams | Mapping[str, Any] | None = None
    batch_size: int = defaults.EMBED_BATCH_SIZE
    extra_body: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        _check_names(
            text_column=self.text_column,
            output_column=self.output_column,
            error_column=self.error_column,
            id_column=self.id_column,
        )
        self._plan = Plan(
            batch_size=positive_int("batch_size", self.batch_size),
            max_batch_tokens=defaults.JOB_MAX_BATCH_TOKENS,
            params=EmbedParams.of(self.params),
            call=CallOptions(extra_body=self.extra_body),
            fail_fast=self.on_error == "raise",
            vectors=DENSE,
        )
        self.width: int | None = None  # learned from the first answer: the NaN rows' width
        super().__post_init__()

    async def _vectors(self, client: JobClient, texts: list[str]) -> Iterable[Any]:
        result = await self._plan.embed(client, texts)
        assert isinstance(result, EmbeddingResult)  # the plan's vectors are dense
        vectors = result.vectors
        self.width = int(vectors.shape[1])
        return vectors

    async def _answer(self, batch: Any) -> dict[str, Any]:
        columns = self._columns(batch)
        texts, errors = _text_cells(columns, self.text_column, "text_column", None, self.on_error)
        results = await self._send(texts, errors, self._vectors, self._plan.batches)
        if self.width is None:  # every row failed before any answer: learn the width for the NaNs
            await self._send(["width"], [None], self._vectors)
        assert self.width is not None
        vectors = np.full((len(texts), self.width), np.nan, dtype=np.float32)
        for row, vector in enumerate(results):
            if vector is not None:
                vectors[row] = vector
        return self._finish(columns, {self.output_column: vectors}, errors)


@dataclasses.dataclass(kw_only=True, eq=False)
class Embedder(_Embed, _Batches):
    """Embed a text column with ``/v1/embeddings``: one float32 vector per row, in row order.

    Args:
        settings: the client settings (``vllm_tasks.ClientSettings``: the server or the load balancer in
            front of replicas, model, API key, timeouts, retries, headers, fetch limits); they pickle with
            the key. Default: ``ClientSettings()``, read from the environment (``VLLM_TASKS_BASE_URL``,
            ``VLLM_API_KEY``) where the instance is built: on the worker, for a class given to
            ``map_batches``.
        client: a ``vllm_tasks.Client`` to call through instead (``settings`` are then its settings): used
            as it is in this process; a pickled copy builds its own from the settings, and an instance
            given a client with its own ``http_client`` refuses to be pickled (``InvalidInputError``).
        text_column: the column of texts (strings).
        output_column: the column the vectors go to: a 2-D float32 array (Ray: a tensor column).
        params: the vector options (``vllm_tasks.EmbedParams(dimensions=256, truncate_prompt_tokens=-1)``,
            or a dict of its fields), checked at construction.
        batch_size: texts per request (the Ray batch is split into requests of this size).
        concurrency: requests in flight per actor, or ``"auto"`` (tuned from the server's ``/metrics``,
            else the answers' latencies; kept between batches: :attr:`concurrency_limit`).
        extra_body: extra JSON fields for every request.
        on_error: ``"raise"`` (a refused row fails the Ray task) or ``"column"`` (its message goes to
            ``error_column``, its vector is NaN; the rest of the batch is embedded).
        error_column: the error column's name: the SDK's exception type and message, ``""`` where the
            row succeeded (never null: Ray's blocks must agree on the column's type).
        id_column: the column of the rows' ids (unique across the dataset), for Ray's row-id
            checkpoints (``CheckpointConfig(id_column=...)``, see the module's docstring): a batch without
            it is refused (``InvalidInputError``, before any request) and no output column may take its
            name. Every input column passes through unchanged, ids included; ``None`` (default): not checked.

    Raises:
        InvalidInputError: bad settings at construction; on a batch, a missing column or one that does not
            hold text (naming the column and what the batch has), or, with ``on_error="raise"``, a
            cell that is not a string.
        APIError: the SDK's errors, as ``Client.embed`` raises them (``ContextLengthExceeded`` with
            ``on_error="raise"``, ``APIConnectionError`` after the retries, ...).

    Examples:
        >>> embedder = Embedder(settings=vt.ClientSettings("http://localhost:8000", model="minilm"))
        >>> out = embedder({"text": np.array(["first text", "second text"])})
        >>> out["embedding"].shape, out["embedding"].dtype
        ((2, 384), dtype('float32'))
    """


@dataclasses.dataclass(kw_only=True, eq=False)
class AsyncEmbedder(_Embed, _AsyncCallable):
    """:class:`Embedder` with ``async def __call__`` on an ``AsyncClient``: Ray Data runs an actor's
    batches side by side on its event loop (``map_batches(AsyncEmbedder, ...)``; its arguments and outputs
    are :class:`Embedder`'s; ``client=`` takes a ``vllm_tasks.AsyncClient``).

    Examples:
        >>> ds = ds.map_batches(
        ...     AsyncEmbedder,
        ...     fn_constructor_kwargs={"settings": vt.ClientSettings("http://vllm:8000")},
        ...     batch_size=256,
        ...     compute=ray.data.ActorPoolStrategy(size=2),
        ... )
        >>> out = await AsyncEmbedder(settings=settings)({"text": np.array(["a text"])})  # called directly
    """


@dataclasses.dataclass(kw_only=True, eq=False)
class _Score(_Callable):
    """:class:`Scorer`'s and :class:`AsyncScorer`'s fields and batches."""

    query_column: str = "query"
    document_column: str = "document"
    output_column: str = "score"
    params: RerankParams | Mapping[str, Any] | None = None
    batch_size: int = defaults.SCORE_BATCH_SIZE
    extra_body: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        _check_names(
            query_column=self.query_column,
            document_column=self.document_column,
            output_column=self.output_column,
            error_column=self.error_column,
            id_column=self.id_column,
        )
        positive_int("batch_size", self.batch_size)
        self.options = {
            **RerankParams.of(self.params).keywords(),
            "extra_body": CallOptions(extra_body=self.extra_body).extra_body,
        }
        super().__post_init__()

    def _batches(self, pairs: list[tuple[str, str]]) -> list[range]:
        """Pairs in requests of at most ``batch_size``, and of the job engine's estimated tokens."""
        sizes = [estimated_tokens(query) + estimated_tokens(document) for query, document in pairs]
        return plan_batches(sizes, self.batch_size, defaults.JOB_MAX_BATCH_TOKENS)

    async def _scores(self, client: JobClient, pairs: list[tuple[str, str]]) -> Iterable[Any]:
        queries, documents = [query for query, _ in pairs], [document for _, document in pairs]
        count = len(pairs)
        result = await client.score(queries, documents, batch_size=count, concurrency=1, **self.options)
        scores: npt.NDArray[np.float64] = result.scores
        return scores

    async def _answer(self, batch: Any) -> dict[str, Any]:
        columns = self._columns(batch)
        queries, errors = _text_cells(columns, self.query_column, "query_column", None, self.on_error)
        documents, errors = _text_cells(
            columns, self.document_column, "document_column", errors, self.on_error
        )
        pairs = list(zip(queries, documents, strict=True))
        results = await self._send(pairs, errors, self._scores, self._batches)
        scores = np.array([np.nan if score is None else score for score in results], dtype=np.float64)
        return self._finish(columns, {self.output_column: scores}, errors)


@dataclasses.dataclass(kw_only=True, eq=False)
class Scorer(_Score, _Batches):
    """Score a query column against a document column with ``/score``: one float64 score per row.

    The pairs are zipped (row ``i``'s query with row ``i``'s document). The score's scale is the served
    model's: 0..1 for a cross-encoder, a cosine for an embedding model (``docs/scoring.md``).

    Args:
        settings: the client settings, as for :class:`Embedder`.
        client: a client to call through, as for :class:`Embedder`.
        query_column: the column of queries.
        document_column: the column of documents, paired row by row with the queries.
        output_column: the column the scores go to.
        params: the scoring options (``vllm_tasks.RerankParams(truncate_prompt_tokens=-1,
            instruction=...)``, or a dict of its fields), checked at construction.
        batch_size: pairs per request; concurrency: requests in flight per actor, or
            ``"auto"``.
        extra_body: extra JSON fields for every request.
        on_error: as for :class:`Embedder` (a failing row's score is NaN).
        error_column: as for :class:`Embedder`.
        id_column: as for :class:`Embedder`.

    Raises:
        InvalidInputError: bad settings; a missing or non-text column (naming it and the batch's columns).
        APIError: the SDK's errors, as ``Client.score`` raises them (``EndpointNotServed`` for a model
            that does not score).

    Examples:
        >>> scorer = Scorer(settings=vt.ClientSettings("http://localhost:8001"))
        >>> scorer({"query": np.array(["capital of France?"] * 2), "document": np.array(["Paris", "Cats"])})[
        ...     "score"
        ... ]
        array([0.97, 0.01])
    """


@dataclasses.dataclass(kw_only=True, eq=False)
class AsyncScorer(_Score, _AsyncCallable):
    """:class:`Scorer` with ``async def __call__`` on an ``AsyncClient`` (``map_batches(AsyncScorer,
    ...)``: its arguments and outputs are :class:`Scorer`'s; ``client=`` takes a
    ``vllm_tasks.AsyncClient``)."""


#: What an audio cell may be: the file's bytes, or a path / URL.
_AUDIO_CELLS: tuple[type, ...] = (bytes, str)
#: What an image cell may be: bytes (an image or a PDF), a path / URL, or a decoded image array.
_IMAGE_CELLS: tuple[type, ...] = (bytes, str, np.ndarray)


@dataclasses.dataclass(kw_only=True, eq=False)
class _Transcribe(_Callable):
    """:class:`Transcriber`'s and :class:`AsyncTranscriber`'s fields and batches."""

    audio_column: str = "audio"
    output_column: str = "transcript"
    segments_column: str | None = None
    params: TranscribeParams | Mapping[str, Any] | None = None
    extra_body: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        _check_names(
            audio_column=self.audio_column,
            output_column=self.output_column,
            segments_column=self.segments_column,
            error_column=self.error_column,
            id_column=self.id_column,
        )
        params = TranscribeParams.of(self.params)
        # The segments come only with verbose_json.
        keywords = params.keywords() if self.segments_column is None else segment_keywords(params)
        self.options = {**keywords, "extra_body": CallOptions(extra_body=self.extra_body).extra_body}
        super().__post_init__()

    async def _transcribe(self, client: JobClient, cells: list[Any]) -> Iterable[Any]:
        return [await client.transcribe(cell, **self.options) for cell in cells]

    async def _answer(self, batch: Any) -> dict[str, Any]:
        columns = self._columns(batch)
        cells = _cells(columns, self.audio_column, "audio_column", "audio bytes, paths or URLs", _AUDIO_CELLS)
        errors = _cell_errors(
            cells, self.audio_column, "audio bytes, a path or a URL", _AUDIO_CELLS, on_error=self.on_error
        )
        results = await self._send(cells, errors, self._transcribe)
        outputs = {self.output_column: _strings([None if r is None else r.text for r in results])}
        if self.segments_column is not None:
            outputs[self.segments_column] = _strings(
                [
                    None if r is None else json.dumps(transcript_records("", r, "single")[0][1]["segments"])
                    for r in results
                ]
            )
        return self._finish(columns, outputs, errors)


@dataclasses.dataclass(kw_only=True, eq=False)
class Transcriber(_Transcribe, _Batches):
    """Transcribe an audio column with ``/v1/audio/transcriptions``: one transcript per row.

    Each row is one request (long audio is chunked client-side, as ``Client.transcribe`` does), with
    ``concurrency`` rows in flight per actor (``"auto"``: tuned, see :attr:`concurrency_limit`).

    Args:
        settings: the client settings, as for :class:`Embedder`.
        client: a client to call through, as for :class:`Embedder`.
        audio_column: the column of audio: the files' bytes (``ray.data.read_binary_files``' ``bytes``),
            or paths / ``http(s)`` URLs the worker can read.
        output_column: the column the transcripts go to (strings).
        segments_column: also write the timed segments, as JSON text
            (``[{"start": 0.0, "end": 2.1, "text": "..."}]``); ``None`` (default): not written.
        concurrency: rows in flight per actor, or ``"auto"`` (a limit tuned from the rows' latencies,
            x0.7 on each 429 or 503 answer, retried ones included; kept for the actor's life, so that the
            next batch starts where this one settled: :attr:`concurrency_limit`).
        params: the speech options: the language (ISO-639-1; default: detected per file), a prompt, ...
            (``vllm_tasks.TranscribeParams(language="de", prompt=...)``, or a dict of its fields), checked
            at construction; with ``segments_column`` its ``response_format`` is
            the class's.
        extra_body: extra form fields for every request.
        on_error: as for :class:`Embedder` (a failing row's transcript is ``""``).
        error_column: as for :class:`Embedder`.
        id_column: as for :class:`Embedder`.

    Raises:
        InvalidInputError: bad settings (``concurrency`` neither a whole number >= 1 nor ``"auto"``); a
            missing column, or one that holds neither bytes nor strings.
        InvalidInputError: (``kind="audio_decode"``) with ``on_error="raise"``, a row that does not decode
            (before any upload).

    Examples:
        >>> ds = ray.data.read_binary_files("calls/", include_paths=True)
        >>> ds = ds.map_batches(
        ...     Transcriber,
        ...     fn_constructor_kwargs={
        ...         "settings": vt.ClientSettings("http://stt:8000"),
        ...         "audio_column": "bytes",
        ...     },
        ...     batch_size=8,
        ...     compute=ray.data.ActorPoolStrategy(size=2),
        ... )
    """


@dataclasses.dataclass(kw_only=True, eq=False)
class AsyncTranscriber(_Transcribe, _AsyncCallable):
    """:class:`Transcriber` with ``async def __call__`` on an ``AsyncClient`` (``map_batches(AsyncTranscriber,
    ...)``: its arguments and outputs are :class:`Transcriber`'s; ``client=`` takes a
    ``vllm_tasks.AsyncClient``)."""


@dataclasses.dataclass(kw_only=True, eq=False)
class _OCR(_Callable):
    """:class:`OCR`'s and :class:`AsyncOCR`'s fields and batches."""

    image_column: str = "image"
    output_column: str = "markdown"
    blocks_column: str | None = None
    params: OCRParams | Mapping[str, Any] | None = None
    preset: str | OCRPreset | None = None
    quality: PageQuality | Mapping[str, Any] | None = DEFAULT_QUALITY
    pdf_concurrency: int = defaults.OCR_PDF_CONCURRENCY
    extra_body: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        _check_names(
            image_column=self.image_column,
            output_column=self.output_column,
            blocks_column=self.blocks_column,
            error_column=self.error_column,
            id_column=self.id_column,
        )
        positive_int("pdf_concurrency", self.pdf_concurrency)
        self._params, self._quality = OCRParams.of(self.params).using(self.preset), quality_of(self.quality)
        self._call = CallOptions(extra_body=self.extra_body)
        self.options = {**self._params.keywords(), "extra_body": self._call.extra_body}
        super().__post_init__()

    async def _ocr(self, client: JobClient, cells: list[Any]) -> Iterable[Any]:
        return [await self._document(client, cell) for cell in cells]

    async def _document(self, client: JobClient, cell: Any) -> OCRDocument | OCRResult:
        pdf = cell.startswith(b"%PDF-") if isinstance(cell, bytes) else isinstance(cell, str) and is_pdf(cell)
        if not pdf:
            page = await client._ocr_page(cell, self._params, self._call, self._quality)
            check_document(self._quality, merge_pages([page]))
            return page.result
        return await client.ocr_pdf(
            cell, concurrency=self.pdf_concurrency, quality=self._quality, **self.options
        )

    async def _answer(self, batch: Any) -> dict[str, Any]:
        columns = self._columns(batch)
        array = _column(columns, self.image_column, "image_column", "images")
        if array.ndim >= 3 and array.dtype.kind in "uif":  # a batch of same-sized images: one per row
            cells: list[Any] = list(array)
            errors: list[str | None] = [None] * len(cells)
        else:
            cells = _cells(columns, self.image_column, "image_column", "images", _IMAGE_CELLS)
            errors = _cell_errors(cells, self.image_column, "an image", _IMAGE_CELLS, on_error=self.on_error)
        results = await self._send(cells, errors, self._ocr)
        records = [
            None if r is None else ocr_page_records("", ocr_document_pages(r), "single")[0] for r in results
        ]
        outputs = {self.output_column: _strings([None if r is None else r[0] for r in records])}
        if self.blocks_column is not None:
            outputs[self.blocks_column] = _strings(
                [None if r is None else json.dumps(r[1]["blocks"]) for r in records]
            )
        return self._finish(columns, outputs, errors)


@dataclasses.dataclass(kw_only=True, eq=False)
class OCR(_OCR, _Batches):
    """OCR an image or PDF column with an OCR model (``/v1/chat/completions``): one markdown text per row.

    An image row is one request; a PDF row (bytes starting with ``%PDF-``, or a path to one) is rendered
    and OCR'd page by page (``Client.ocr_pdf``), its pages' markdown joined by ``---``. ``concurrency``
    rows are in flight per actor (and up to ``pdf_concurrency`` pages of each PDF); ``"auto"``: tuned,
    see :attr:`concurrency_limit`.

    Args:
        settings: the client settings, as for :class:`Embedder`.
        client: a client to call through, as for :class:`Embedder`.
        image_column: the column of images: bytes (``ray.data.read_binary_files``' ``bytes``), paths or
            ``http(s)`` URLs, or decoded arrays (``ray.data.read_images``' ``image`` column).
        output_column: the column the markdown goes to (strings).
        blocks_column: also write the layout blocks, as JSON text (``[{"label", "text", "boxes",
            "boxes_normalized", "complete", "page"}]``, ``page`` 0-based); ``None`` (default): not written.
        concurrency: rows in flight per actor, or ``"auto"`` (as for :class:`Transcriber`; a PDF row is
            one row, and its seconds are all its pages': among images, PDFs may look like a queue and
            hold the limit back, where a fixed number does better).
        pdf_concurrency: pages in flight per PDF row.
        quality: the page-quality ladder of every image and PDF page (``vllm_tasks.ocr.PageQuality``, a dict
            of its fields, or ``None`` for one try per page; default: olmOCR's; see
            :meth:`~vllm_tasks.Client.ocr_pdf`): a row whose failed pages are over its
            ``max_page_error_rate`` (an image: its one page failed) fails as ``OCRDocumentFailed``.
        params: the OCR options: the prompt (``"markdown"``, ``"ocr"``, ``"free"``, ...; see
            ``docs/ocr.md``), the output limit per page, ... (``vllm_tasks.OCRParams(prompt="free",
            max_tokens=2048)``, or a dict of its fields), checked at construction; they apply to PDF pages
            too.
        preset: the OCR model preset (``"deepseek-ocr"``, ``"generic"``, ... or an ``OCRPreset``), as
            ``params``' ``preset``; default: recognised from the served model.
        extra_body: extra JSON fields for every request.
        on_error: as for :class:`Embedder` (a failing row's markdown is ``""``).
        error_column: as for :class:`Embedder`.
        id_column: as for :class:`Embedder`.

    Raises:
        InvalidInputError: bad settings (``concurrency`` neither a whole number >= 1 nor ``"auto"``); a
            missing column or one of other values.
        InvalidInputError: (``kind="image_decode"``) with ``on_error="raise"``, a row that does not decode
            (before any upload).

    Examples:
        >>> ds = ray.data.read_parquet("scans.parquet")  # a "url" column
        >>> ds = ds.map_batches(
        ...     OCR,
        ...     fn_constructor_kwargs={
        ...         # a column of untrusted URLs: refuse the ones that resolve to private addresses
        ...         "settings": vt.ClientSettings(
        ...             "http://ocr:8000", fetch_limits=vt.FetchLimits(refuse_private=True)
        ...         ),
        ...         "image_column": "url",
        ...     },
        ...     batch_size=4,
        ...     compute=ray.data.ActorPoolStrategy(size=2),
        ... )
    """


@dataclasses.dataclass(kw_only=True, eq=False)
class AsyncOCR(_OCR, _AsyncCallable):
    """:class:`OCR` with ``async def __call__`` on an ``AsyncClient`` (``map_batches(AsyncOCR,
    ...)``: its arguments and outputs are :class:`OCR`'s; ``client=`` takes a
    ``vllm_tasks.AsyncClient``)."""
