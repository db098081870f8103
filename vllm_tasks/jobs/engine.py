"""The job engine: every job kind (``embed_file``, ``ocr_dir``, ``transcribe_dir``) runs on
:class:`Engine`, and so does each batch of the dataframe fronts (the Ray, Daft and Spark callables of
:mod:`vllm_tasks.integrations`), one group worked in memory by :meth:`Engine.answer`, with no checkpoint.

A job is groups of rows read by its reader (a chunk of texts, a page, an audio file) and a
:class:`JobKind` that says what to do with them. The engine keeps a window of groups in flight
(:func:`drain`: each read in a worker thread, committed in a worker thread as it finishes, the first fatal
error cancelling the rest and raised as itself), plans each group into batches (the kind's planner), and
sends each batch as exactly one request over the replicas (:func:`send_request`: least in flight, hedged,
a failing replica set aside: :class:`~vllm_tasks.jobs.replicas.ReplicaPool`). A batch refused for a row's
sake is split in halves until the refused rows are alone
(:func:`~vllm_tasks._async.isolation.isolate_rows`); the kind records them (or stops the job). A
finished group is checked (the kind's check: ``embed_file`` probes each server that embedded it) and then
committed: written to its sink by the kind, made durable, and only then recorded by the engine in the
job's one checkpoint store (:class:`~vllm_tasks.jobs.state.Progress`), so a crash (``kill -9``, Ctrl-C, a
full disk) at any point leaves a state the next run resumes from.

:class:`EmbedRun` is ``embed_file``'s kind; the folder jobs' is in :mod:`vllm_tasks.jobs.folders`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from .._async.isolation import isolate_rows
from ..batching import plan_batches
from ..calls import CallOptions
from ..embeddings import EmbedParams
from ..errors import (
    APIError,
    APITimeoutError,
    InvalidInputError,
    JobMismatch,
    RowFailed,
    UnexpectedResponse,
    VLLMTasksError,
    is_about,
)
from ..pooling import PoolParams
from ..sparse import SparseEmbedParams
from .files import disk_errors, write_in_thread
from .inputs import Chunk, InputSpec, read_chunks
from .outputs import Sink
from .progress import JobProgress
from .replicas import JobClient, Replica, ReplicaPool
from .state import PROBE_IMAGE, PROBE_MIN_COSINE, PROBE_TEXT, Finished, Progress, cosine
from .vectors import Result, Rows, Vectors

logger = logging.getLogger("vllm_tasks.jobs")
G = TypeVar("G")
Done = TypeVar("Done")
W = TypeVar("W")
T = TypeVar("T")


def estimated_tokens(text: str) -> int:
    """A cheap upper-ish estimate of a text's tokens, for batch budgets (no tokenizer call).

    Examples:
        >>> estimated_tokens("hello world")
        5
    """
    return len(text) // 3 + 2


@dataclass
class Plan:
    """How a job sends: batch caps, the embed call and its options, and what happens to refused rows.

    Attributes:
        batch_size: the most rows per request.
        max_batch_tokens: the most estimated tokens per request.
        params: the vector options of every request (``EmbedParams``, ``SparseEmbedParams`` or
            ``PoolParams``, as :attr:`vectors`).
        call: the model, extra body and headers, and timeout of every request.
        fail_fast: stop at the first refused row instead of recording it.
        vectors: dense (``embed``), sparse (``embed_sparse``) or per-token (``pool``) rows.
        images: the folder that relative image paths are read from when each row names an image (a
            path, or an ``http(s)``/``data:`` URL) rather than holding a text; ``None`` for texts.
    """

    batch_size: int
    max_batch_tokens: int
    params: EmbedParams | SparseEmbedParams | PoolParams
    call: CallOptions
    fail_fast: bool
    vectors: Vectors
    images: Path | None = None

    def batches(self, texts: Sequence[str]) -> list[range]:
        """``texts`` (positions) in batches of at most :attr:`batch_size` rows and
        :attr:`max_batch_tokens` estimated tokens, in order."""
        return plan_batches(
            [estimated_tokens(text) for text in texts], self.batch_size, self.max_batch_tokens
        )

    async def embed(self, client: JobClient, rows: Sequence[str]) -> Result:
        """The vectors of a batch of rows (texts, or the images they name) from ``client`` in one request,
        with the job's options."""
        if self.images is None:
            return await self.vectors.embed(client, rows, None, self.params, self.call)
        images = [self._image(row) for row in rows]
        return await self.vectors.embed(client, None, images, self.params, self.call)

    async def probe(self, client: JobClient) -> Result:
        """The vectors of the job's probe (:data:`PROBE_TEXT`, or :data:`PROBE_IMAGE` for an image job):
        the same model answers the same vectors."""
        if self.images is None:
            return await self.vectors.embed(client, [PROBE_TEXT], None, self.params, self.call)
        return await self.vectors.embed(client, None, [PROBE_IMAGE], self.params, self.call)

    def _image(self, row: str) -> str | Path:
        """A row's image: its URL as it is, else its path (relative to :attr:`images`)."""
        named = row.strip()
        if named.startswith(("http://", "https://", "data:")):
            return named
        assert self.images is not None
        try:
            return self.images / Path(named).expanduser()
        except (RuntimeError, ValueError) as error:  # ~user unknown, or a NUL byte in a ~user name
            raise InvalidInputError(
                "image", named, f"is not a path ({str(error).rstrip('.')})", "Name an image file."
            ) from None


@dataclass
class ChunkWork:
    """A chunk being embedded: its vectors so far, its refused rows."""

    chunk: Chunk
    rows: Rows
    failed: npt.NDArray[np.bool_]
    errors: list[dict[str, Any]] = field(default_factory=list)
    served_by: dict[int, tuple[Replica, list[range]]] = field(default_factory=dict)
    """The replicas that embedded its rows (by ``id``) and which rows: each is checked before the chunk
    is kept."""


@dataclass
class Outcome:
    """What a run did: chunks sent, rows refused in this run."""

    chunks_sent: int = 0
    failed_rows: int = 0


class GroupKind(Protocol[G, W]):
    """What the :class:`Engine` needs to work a group of rows (a chunk of texts, a page, an audio file, a
    dataframe's batch): how it is held while it is worked on, planned into batches, sent, answered,
    refused and checked. :meth:`Engine.answer` works one group with no more than this."""

    def start(self, group: G) -> W:
        """The work of a group: where its answers go until it is committed."""

    def batches(self, work: W) -> Iterable[Sequence[int]]:
        """The group's rows planned into batches, one request each."""

    async def request(self, client: JobClient, work: W, rows: Sequence[int]) -> Any:
        """One request for ``rows`` of the group on ``client``; its answer.

        Raises:
            VLLMTasksError: the server's error; one about a row (``scope="row"``) splits the batch.
        """

    def tokens(self, answer: Any) -> int:
        """The tokens an answer says its request used."""

    def answered(self, work: W, rows: Sequence[int], answer: Any, replica: Replica) -> None:
        """Keep an answer for ``rows`` (given by ``replica``)."""

    def refused(self, work: W, row: int, error: Exception) -> None:
        """A row the server refused for its own sake (it may raise, to stop the job)."""

    async def check(self, work: W, engine: Engine[G, W]) -> None:
        """Check a group's answers before it is committed (``engine.send`` sends rows again)."""


@runtime_checkable
class JobKind(GroupKind[G, W], Protocol[G, W]):
    """What a kind of job gives the :class:`Engine` beyond a :class:`GroupKind`: a finished group written
    to its sink and, once recorded in the checkpoint by the engine, followed up."""

    def write(self, work: W) -> Finished:
        """Write a finished group to its sink, durably (in a worker thread); what the checkpoint records
        of it."""

    def committed(self, work: W) -> None:
        """After a group is recorded in the checkpoint (in a worker thread)."""


class Engine(Generic[G, W]):
    """Runs every kind of job: groups read from a reader, each planned into batches sent one request
    each over the replicas (hedged, a failing replica set aside, refused rows isolated), checked, and
    committed as it finishes (see the module doc).

    Args:
        kind: what the job does with its groups: a :class:`JobKind` for :meth:`run`; a
            :class:`GroupKind` is enough for :meth:`answer`.
        pool: the replicas.
        window: groups in flight at once (:meth:`run`).
        progress: the job's checkpoint store, where each group is recorded once written (:meth:`run`);
            ``None`` for groups worked in memory with :meth:`answer` (a dataframe's batches).
    """

    def __init__(
        self, kind: GroupKind[G, W], pool: ReplicaPool, *, window: int = 1, progress: Progress | None = None
    ) -> None:
        self._kind, self._pool, self._window, self._progress = kind, pool, window, progress

    async def run(self, groups: Iterator[G]) -> None:
        """Work and commit every group of ``groups``.

        Raises:
            Exception: the first fatal error (of a request, a check, a commit or the reader).
        """
        await drain(groups, self.answer, self._commit, window=self._window)

    def _commit(self, work: W) -> None:
        """Write a finished group, then record it in the checkpoint, then the kind's follow-up.

        Raises:
            InsufficientDiskSpace: the disk filled up (the group is not recorded: redone on resume).
            JobError: the work folder cannot be written any more.
        """
        kind, progress = self._kind, self._progress
        assert isinstance(kind, JobKind) and progress is not None, "a job's engine commits its groups"
        finished = kind.write(work)
        with disk_errors(progress.work):
            progress.commit(finished)
        kind.committed(work)

    async def answer(self, group: G) -> W:
        """Work one group to its end, in memory: planned into batches, each sent as one request over the
        replicas (refused rows isolated and handed to the kind), then checked; nothing is committed.

        Returns:
            The group's work, every answer and refusal in it.

        Raises:
            Exception: the first fatal error of its requests or its check (its own type).
        """
        try:
            return await self._group(group)
        except BaseExceptionGroup as errors:
            raise first_error(errors) from None

    async def _group(self, group: G) -> W:
        work = self._kind.start(group)
        async with asyncio.TaskGroup() as tasks:
            for batch in self._kind.batches(work):
                # A task per batch once it has a slot: one waiter per group, not one per batch.
                tasks.create_task(self.send(work, batch, await self._pool.acquire()))
        await self._kind.check(work, self)
        return work

    async def send(self, work: W, rows: Sequence[int], replica: Replica | None = None) -> None:
        """Send ``rows`` of a group, the first request on ``replica`` (its slot taken; else the next free
        one); a batch refused for a row's sake is split until the row is alone (:func:`isolate_rows`)."""

        async def send(part: Sequence[int]) -> None:
            await self._send_rows(work, part, replica if part is rows else None)  # split halves: any

        await isolate_rows(send, rows, functools.partial(self._kind.refused, work))

    async def _send_rows(self, work: W, rows: Sequence[int], replica: Replica | None) -> None:
        async def call(client: JobClient) -> Any:
            return await self._kind.request(client, work, rows)

        replica, answer = await send_request(
            self._pool, call, rows=len(rows), tokens=self._kind.tokens, first=replica
        )
        self._kind.answered(work, rows, answer, replica)


class EmbedRun:
    """An ``embed_file`` job on the :class:`Engine` (its :class:`JobKind`): chunks of rows read from the
    input, batches planned by ``batch_size`` and ``max_batch_tokens``, every server that embedded a chunk
    checked before the chunk is written to the sink, made durable, and recorded in the checkpoint.

    Args:
        spec: the input.
        sink: where finished chunks go.
        progress: the job's checkpoint store (updated and saved as chunks finish).
        pool: the replicas.
        plan: batching and call options.
        bar: the progress display.
        out: the output, named in errors.
    """

    def __init__(
        self,
        spec: InputSpec,
        *,
        sink: Sink,
        progress: Progress,
        pool: ReplicaPool,
        plan: Plan,
        bar: JobProgress,
        out: str,
    ) -> None:
        self._spec, self._sink, self._store, self._checkpoint = spec, sink, progress, progress.state
        self._pool, self._plan, self._progress = pool, plan, bar
        self._out = out
        self.outcome = Outcome()
        capacity = len(pool.replicas) * pool.most_in_flight * plan.batch_size
        self._window = 2 + -(-capacity // progress.state.chunk_rows)

    async def run(self) -> Outcome:
        """Embed every chunk not done yet; returns what this run did.

        Raises:
            RowFailed: a refused row, with ``fail_fast``.
            JobMismatch: a replica's model changed during the run (see :meth:`check`).
            APIError: a fatal answer (401, 404, ...), or every replica down for ``give_up_after``.
            InvalidInputError: an unreadable input row.
            InsufficientDiskSpace: the disk filled up while writing.
        """
        self._store.trim_errors()
        started = time.monotonic()
        chunks = read_chunks(self._spec, self._checkpoint.chunk_rows, self._checkpoint.done)
        try:
            await Engine(self, self._pool, window=self._window, progress=self._store).run(chunks)
        finally:
            self._checkpoint.seconds += time.monotonic() - started
            self._store.save()
        return self.outcome

    def start(self, group: Chunk) -> ChunkWork:
        """A chunk's work: NaN (or empty) rows, none refused."""
        count = len(group.texts)
        rows = self._plan.vectors.rows(count, self._checkpoint.width)
        return ChunkWork(group, rows, np.zeros(count, np.bool_))

    def batches(self, work: ChunkWork) -> list[range]:
        """The chunk's rows in batches of at most ``batch_size`` rows and ``max_batch_tokens`` estimated
        tokens."""
        return self._plan.batches(work.chunk.texts)

    async def request(self, client: JobClient, work: ChunkWork, rows: Sequence[int]) -> Result:
        """The vectors of ``rows`` (consecutive) in one request, checked against the job's shape."""
        start, stop = rows[0], rows[-1] + 1
        result = await self._plan.embed(client, work.chunk.texts[start:stop])
        self._check_batch(work, start, stop, result)
        return result

    def tokens(self, answer: Result) -> int:
        """The prompt tokens of a batch."""
        return answer.usage.prompt_tokens

    def answered(self, work: ChunkWork, rows: Sequence[int], answer: Result, replica: Replica) -> None:
        """Keep a batch's vectors, and which replica embedded them (checked before the chunk is kept)."""
        start, stop = rows[0], rows[-1] + 1
        work.served_by.setdefault(id(replica), (replica, []))[1].append(range(start, stop))
        work.rows.put(start, answer)
        self._progress.advance(stop - start, answer.usage.prompt_tokens)

    async def check(self, work: ChunkWork, engine: Engine[Chunk, ChunkWork]) -> None:
        """Embed the job's probe again on every replica that embedded rows of the chunk, after them: a
        replica restarted on other weights under the same name and width (a rolling deploy) answers
        another probe vector, and the chunk is not kept. A replica down since: its rows go to the
        others, checked in turn.

        Raises:
            JobMismatch: a replica's model changed since the job started; the chunk's rows are redone
                when the job is run again (its checkpoint does not count them).
        """
        expected = self._checkpoint.fingerprint["model"]["probe"]
        while work.served_by:
            _, (replica, batches) = work.served_by.popitem()
            try:
                probe = await self._probe(replica)
            except VLLMTasksError as error:
                if not is_about(error, "replica"):
                    raise
                self._pool.set_aside(replica, error, held=False)
                replica.rows -= sum(len(rows) for rows in batches)  # not kept from it
                async with asyncio.TaskGroup() as group:
                    for rows in batches:
                        group.create_task(engine.send(work, rows))
                continue
            similarity = cosine(self._plan.vectors.probe(probe), expected)
            if similarity < PROBE_MIN_COSINE:
                first, last = work.chunk.start, work.chunk.start + len(work.chunk.texts) - 1
                raise JobMismatch(
                    self._out,
                    [
                        f"the model served by {replica.url} changed during the run (cosine {similarity:.3f} "
                        f"with the job's probe vector): rows {first}..{last} were not kept"
                    ],
                )

    async def _probe(self, replica: Replica) -> Result:
        """The probe's vector from ``replica``, within :meth:`ReplicaPool.hedge_after` seconds (a
        replica that stopped answering holds no chunk back).

        Raises:
            APITimeoutError: no answer in that time.
        """
        limit = self._pool.hedge_after()
        try:
            async with asyncio.timeout(limit) as scope:
                return await self._plan.probe(replica.client)
        except TimeoutError:
            if not scope.expired():
                raise
            raise APITimeoutError(f"no answer to the model check in {limit:.1f} s") from None

    def _check_batch(self, work: ChunkWork, start: int, stop: int, result: Result) -> None:
        """Refuse a batch's answer of another shape than the job's (its width as the model check found
        it at the start, one row per row sent): an error about the server, which is set aside (see
        :meth:`ReplicaPool.race`; a server that changed model is then refused by the model check), and
        the batch goes to the next free one; nothing of it is written.

        Raises:
            UnexpectedResponse: (``kind="decode"``) naming the rows, the width expected and what came.
        """
        problem = self._plan.vectors.mismatch(result, stop - start, self._checkpoint.width)
        if problem is not None:
            first, last = work.chunk.start + start, work.chunk.start + stop - 1
            raise UnexpectedResponse(
                f"{self._out}: the answer for rows {first}..{last} holds {problem} (the job's "
                f"{self._plan.vectors.name} width is {self._checkpoint.width}); nothing of it was written",
                kind="decode",
            )

    def refused(self, work: ChunkWork, row: int, error: Exception) -> None:
        """Record a refused row of a chunk in the errors file (or stop the job with ``fail_fast``).

        Raises:
            RowFailed: with ``fail_fast``.
        """
        index, row_id = work.chunk.start + row, work.chunk.ids[row]
        message = error.message if isinstance(error, APIError) else str(error)
        if self._plan.fail_fast:
            raise RowFailed(index, row_id, message) from error
        logger.warning("row %d (id %r) refused: %s", index, row_id, message)
        work.failed[row] = True
        status = getattr(error, "status_code", None)
        work.errors.append({"row": index, "id": row_id, "status": status, "error": message})
        self._progress.advance(1, 0)

    def write(self, work: ChunkWork) -> Finished:
        """Write a finished chunk to the sink and make it durable; the checkpoint records its index and
        its refused rows.

        Raises:
            InsufficientDiskSpace: the disk filled up (the chunk is not recorded: redone on resume).
            JobError: the work folder cannot be written any more.
        """
        with disk_errors(self._store.work, work.rows.nbytes):
            self._sink.write(work.chunk, work.rows, work.failed)
            self._sink.sync()
        return Finished(index=work.chunk.index, refused=work.errors)

    def committed(self, work: ChunkWork) -> None:
        """Count the chunk as this run's."""
        self.outcome.chunks_sent += 1
        self.outcome.failed_rows += len(work.errors)


async def drain(
    groups: Iterator[G],
    start: Callable[[G], Coroutine[Any, Any, Done]],
    commit: Callable[[Done], object],
    *,
    window: int,
) -> None:
    """Run a job's work: a task per group (``start``), at most ``window`` in flight, the next group read
    from ``groups`` in a worker thread (a reader may read files); each finished group's result goes to
    ``commit`` in a worker thread (:func:`write_in_thread`), one at a time, as it finishes.

    Raises:
        Exception: the first error of a group (its own type, not a task group's wrapper), or of
            ``commit``, or of the reader; the groups still in flight are cancelled first.
    """
    active: set[asyncio.Task[Done]] = set()
    finished: set[asyncio.Task[Done]] = set()
    exhausted = False
    try:
        while True:
            while not exhausted and len(active) < window:
                group = await asyncio.to_thread(next, groups, None)
                if group is None:
                    exhausted = True
                else:
                    active.add(asyncio.create_task(start(group)))
            if not active:
                break
            finished, active = await asyncio.wait(active, return_when=asyncio.FIRST_COMPLETED)
            while finished:
                await write_in_thread(commit, _result(finished.pop()))
    finally:
        for task in active:
            task.cancel()
        await asyncio.gather(*active, return_exceptions=True)
        for task in finished:  # finished beside the first error, never committed: their errors are seen
            if not task.cancelled():
                task.exception()


async def send_request(
    pool: ReplicaPool,
    call: Callable[[JobClient], Coroutine[Any, Any, T]],
    *,
    rows: int,
    tokens: Callable[[T], int] = lambda _: 0,
    first: Replica | None = None,
) -> tuple[Replica, T]:
    """One request of a job (``call``): on ``first`` (its slot taken), else the next free replica,
    hedged and moved on from failing replicas (:meth:`ReplicaPool.race`); the slot given back with the
    ``rows`` and ``tokens`` it did, then the replica's ``/metrics`` sampled when due (``auto``).

    Returns:
        The replica that answered, and its answer.

    Raises:
        VLLMTasksError: the answer's error (about the rows, the options, the job), or the last server
            failure once every replica is down.
    """
    replica, seconds, answer = await pool.race(call, first or await pool.acquire())
    try:
        result = answer.result()
    except BaseException as error:
        # An answer about the rows or the options was an answer: the replica is fine
        if is_about(error, "row") or is_about(error, "options"):
            pool.release(replica, seconds=seconds)
        else:
            pool.cancelled(replica)
        raise
    pool.release(replica, rows=rows, tokens=tokens(result), seconds=seconds)
    await pool.sample(replica)
    return replica, result


def _result(task: asyncio.Task[Done]) -> Done:
    """A group task's result; a failed batch's own error instead of the task group's wrapper."""
    try:
        return task.result()
    except BaseExceptionGroup as group:
        raise first_error(group) from None


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first error a task group collected (its own type, for ``except APIError`` and exit codes).

    Examples:
        >>> first_error(BaseExceptionGroup("", [ExceptionGroup("", [KeyError("a")])]))
        KeyError('a')
    """
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error
