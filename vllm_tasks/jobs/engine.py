"""The job engine: read chunks, plan batches, send them over the replicas, write, checkpoint.

Several chunks are in flight at once (enough to keep every replica's slots busy); each finished chunk is
written to the sink, made durable, and only then recorded in the checkpoint, so a crash (``kill -9``,
Ctrl-C, a full disk) at any point leaves a state the next run resumes from. A batch the server refuses
with a 4xx is split in halves until the refused rows are alone; those go to the errors file (or stop
the job with ``fail_fast``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from .. import defaults
from .._async.isolation import isolate_rows
from ..batching import plan_batches
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
from .files import append_no_follow, disk_errors, open_no_follow, read_no_follow, write_in_thread
from .inputs import Chunk, InputSpec, read_chunks
from .outputs import Sink
from .progress import JobProgress
from .replicas import JobClient, Replica, ReplicaPool
from .state import PROBE_IMAGE, PROBE_MIN_COSINE, PROBE_TEXT, Checkpoint, cosine
from .vectors import Result, Rows, Vectors

logger = logging.getLogger("vllm_tasks.jobs")


ONE_REQUEST_TOKENS = defaults.EMBED_MAX_BATCH_CHARS // 3
"""The most estimated tokens per batch whatever ``max_batch_tokens`` says: a batch under it has fewer than
``EMBED_MAX_BATCH_CHARS`` characters (each text's estimate is over a third of its length), so the public
``embed`` sends it as the one request it is instead of planning it again."""


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
        call: keyword arguments of every ``AsyncClient.embed`` (or ``embed_sparse``) call (model and
            vector options).
        fail_fast: stop at the first refused row instead of recording it.
        vectors: dense (``embed``), sparse (``embed_sparse``) or per-token (``pool``) rows.
        images: the folder that relative image paths are read from when each row names an image (a
            path, or an ``http(s)``/``data:`` URL) rather than holding a text; ``None`` for texts.
    """

    batch_size: int
    max_batch_tokens: int
    call: Mapping[str, Any]
    fail_fast: bool
    vectors: Vectors
    images: Path | None = None

    async def embed(self, client: JobClient, rows: Sequence[str], **batching: Any) -> Result:
        """The vectors of a batch of rows (texts, or the images they name) from ``client``, with the job's
        options."""
        if self.images is None:
            return await self.vectors.embed(client, rows, **batching, **self.call)
        images = [self._image(row) for row in rows]
        return await self.vectors.embed(client, None, images=images, **batching, **self.call)

    async def probe(self, client: JobClient) -> Result:
        """The vectors of the job's probe (:data:`PROBE_TEXT`, or :data:`PROBE_IMAGE` for an image job):
        the same model answers the same vectors."""
        if self.images is None:
            return await self.vectors.embed(client, PROBE_TEXT, **self.call)
        return await self.vectors.embed(client, None, images=[PROBE_IMAGE], **self.call)

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


class Engine:
    """Runs one job to the end (or to its first fatal error), saving progress after every chunk.

    Args:
        spec: the input.
        sink: where finished chunks go.
        checkpoint: the job's saved state (updated and saved as chunks finish).
        work: the work folder (``state.json``, ``errors.jsonl``).
        pool: the replicas.
        plan: batching and call options.
        progress: the progress display.
    """

    def __init__(
        self,
        spec: InputSpec,
        *,
        sink: Sink,
        checkpoint: Checkpoint,
        work: Path,
        pool: ReplicaPool,
        plan: Plan,
        progress: JobProgress,
        out: str,
    ) -> None:
        self._spec, self._sink, self._checkpoint = spec, sink, checkpoint
        self._state_path, self._errors_path = work / "state.json", work / "errors.jsonl"
        self._pool, self._plan, self._progress = pool, plan, progress
        self._out = out
        self.outcome = Outcome()
        capacity = len(pool.replicas) * pool.most_in_flight * plan.batch_size
        self._window = 2 + -(-capacity // checkpoint.chunk_rows)

    async def run(self) -> Outcome:
        """Embed every chunk not done yet; returns what this run did.

        Raises:
            RowFailed: a refused row, with ``fail_fast``.
            JobMismatch: a replica's model changed during the run (see :meth:`_check_models`).
            APIError: a fatal answer (401, 404, ...), or every replica down for ``give_up_after``.
            InvalidInputError: an unreadable input row.
            InsufficientDiskSpace: the disk filled up while writing.
        """
        self._trim_errors()
        started = time.monotonic()
        chunks = read_chunks(self._spec, self._checkpoint.chunk_rows, self._checkpoint.done)
        active: set[asyncio.Task[ChunkWork]] = set()
        exhausted = False
        try:
            while True:
                while not exhausted and len(active) < self._window:
                    chunk = await asyncio.to_thread(next, chunks, None)
                    if chunk is None:
                        exhausted = True
                    else:
                        active.add(asyncio.create_task(self._embed_chunk(chunk)))
                if not active:
                    break
                finished, active = await asyncio.wait(active, return_when=asyncio.FIRST_COMPLETED)
                for task in finished:
                    await write_in_thread(self._commit, _result(task))
        finally:
            for task in active:
                task.cancel()
            await asyncio.gather(*active, return_exceptions=True)
            self._checkpoint.seconds += time.monotonic() - started
            self._checkpoint.save(self._state_path)
        return self.outcome

    def _trim_errors(self) -> None:
        """Cut the errors file back to what the checkpoint covers (rows of unfinished chunks go)."""
        if self._errors_path.exists():
            handle = open_no_follow(self._errors_path, os.O_WRONLY)
            try:
                os.ftruncate(handle, self._checkpoint.errors_bytes)
            finally:
                os.close(handle)

    async def _embed_chunk(self, chunk: Chunk) -> ChunkWork:
        count = len(chunk.texts)
        work = ChunkWork(
            chunk, self._plan.vectors.rows(count, self._checkpoint.width), np.zeros(count, np.bool_)
        )
        sizes = [estimated_tokens(text) for text in chunk.texts]
        budget = min(self._plan.max_batch_tokens, ONE_REQUEST_TOKENS)
        async with asyncio.TaskGroup() as group:
            for batch in plan_batches(sizes, self._plan.batch_size, budget):
                # A task per batch once it has a slot: one waiter per chunk, not one per batch.
                group.create_task(self._embed_rows(work, batch, await self._pool.acquire()))
        await self._check_models(work)
        return work

    async def _check_models(self, work: ChunkWork) -> None:
        """Embed the job's probe again on every replica that embedded rows of the chunk, after them: a
        replica restarted on other weights under the same name and width (a rolling deploy) answers
        another probe vector, and the chunk is not kept.

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
                # down since: its rows go to the others, checked in turn
                self._pool.set_aside(replica, error, held=False)
                replica.rows -= sum(len(rows) for rows in batches)  # not kept from it
                async with asyncio.TaskGroup() as group:
                    for rows in batches:
                        group.create_task(self._embed_rows(work, rows))
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

    async def _embed_rows(self, work: ChunkWork, rows: range, replica: Replica | None = None) -> None:
        """Embed ``rows`` of a chunk, the first request on ``replica`` (else the next free one); a batch
        refused for a row's sake is split until the row is alone (:func:`isolate_rows`)."""

        async def send(part: Sequence[int]) -> None:
            await self._send_rows(work, part, replica if part is rows else None)  # split halves: any

        await isolate_rows(send, rows, functools.partial(self._refused, work))

    async def _send_rows(self, work: ChunkWork, rows: Sequence[int], replica: Replica | None) -> None:
        """Embed ``rows`` (consecutive) of a chunk in one request on ``replica`` (else the next free
        one), hedged (:meth:`ReplicaPool.race`).

        Raises:
            VLLMTasksError: the answer's error (a row's, the options', the job's).
        """
        start, stop = rows[0], rows[-1] + 1
        texts = work.chunk.texts[start:stop]

        async def call(client: JobClient) -> Result:
            # One request: the batch fits the public embed's own plan (see ONE_REQUEST_TOKENS).
            result = await self._plan.embed(client, texts, batch_size=len(texts), concurrency=1)
            self._check_batch(work, start, stop, result)
            return result

        first = replica or await self._pool.acquire()
        replica, seconds, answer = await self._pool.race(call, first)
        try:
            result = answer.result()
        except BaseException as error:
            # An answer about the rows or the options was an answer: the replica is fine
            if is_about(error, "row") or is_about(error, "options"):
                self._pool.release(replica, seconds=seconds)
            else:
                self._pool.cancelled(replica)
            raise
        tokens = result.usage.prompt_tokens
        self._pool.release(replica, rows=len(texts), tokens=tokens, seconds=seconds)
        work.served_by.setdefault(id(replica), (replica, []))[1].append(range(start, stop))
        work.rows.put(start, result)
        self._progress.advance(len(texts), tokens)
        await self._pool.sample(replica)

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

    def _refused(self, work: ChunkWork, index: int, error: Exception) -> None:
        """Record a refused row of a chunk in the errors file (or stop the job with ``fail_fast``).

        Raises:
            RowFailed: with ``fail_fast``.
        """
        row, row_id = work.chunk.start + index, work.chunk.ids[index]
        message = error.message if isinstance(error, APIError) else str(error)
        if self._plan.fail_fast:
            raise RowFailed(row, row_id, message) from error
        logger.warning("row %d (id %r) refused: %s", row, row_id, message)
        work.failed[index] = True
        status = getattr(error, "status_code", None)
        work.errors.append({"row": row, "id": row_id, "status": status, "error": message})
        self._progress.advance(1, 0)

    def _commit(self, work: ChunkWork) -> None:
        """Write a finished chunk, make it durable, then record it (in that order).

        Raises:
            InsufficientDiskSpace: the disk filled up (the chunk is not recorded: redone on resume).
            JobError: the work folder cannot be written any more.
        """
        with disk_errors(self._state_path.parent, work.rows.nbytes):
            self._write(work)

    def _write(self, work: ChunkWork) -> None:
        self._sink.write(work.chunk, work.rows, work.failed)
        if work.errors:
            lines = b"".join(orjson.dumps(error) + b"\n" for error in work.errors)
            self._checkpoint.errors_bytes = append_no_follow(self._errors_path, lines)
        self._sink.sync()
        self._checkpoint.failed_rows += len(work.errors)
        self._checkpoint.mark_done(work.chunk.index)
        self._checkpoint.save(self._state_path)
        self.outcome.chunks_sent += 1
        self.outcome.failed_rows += len(work.errors)


def _result(task: asyncio.Task[ChunkWork]) -> ChunkWork:
    """A chunk task's result; a failed batch's own error instead of the task group's wrapper."""
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


def error_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of an errors file, in row order."""
    if not path.exists():
        return []
    rows = [orjson.loads(line) for line in read_no_follow(path).splitlines() if line.strip()]
    return sorted(rows, key=lambda row: int(row["row"]))
