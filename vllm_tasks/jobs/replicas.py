"""Several servers behind one job: least-in-flight dispatch, failing replicas set aside and retried,
stuck requests hedged.

Each batch goes to the available replica with the fewest requests in flight (at most ``concurrency``
each). A replica whose request fails after the client's own retries (connection errors, timeouts, 5xx)
is set aside for ``retry_after`` seconds, doubling with each failure in a row, and its batch goes to
another. When every replica is set aside and none has answered for ``give_up_after`` seconds, the job
stops with the last error (its checkpoint is kept).

A request still unanswered after :meth:`ReplicaPool.hedge_after` seconds (:data:`HEDGE_FACTOR` times the
median of the job's recent answered requests, at least :data:`HEDGE_FLOOR`) is sent again to another
replica with a free slot (:meth:`ReplicaPool.race`): the first answer wins and the other request is
cancelled; a replica overtaken that way is set aside like a failing one. A request unanswered after
:meth:`ReplicaPool.deadline` seconds is cancelled and its replica set aside even when no other replica
could take a copy.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import statistics
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from .._async.client import AsyncClient
from .._sync.client import Client
from ..adaptive import CEILING, OVERLOAD_STATUSES, AdaptiveLimit, Concurrency
from ..engine_metrics import EngineSampler
from ..errors import (
    APITimeoutError,
    InvalidInputError,
    is_about,
)
from ..threaded import ThreadedClient
from ..transport import overload_listener

logger = logging.getLogger("vllm_tasks.jobs")

MAX_SET_ASIDE = 300.0
HEDGE_FLOOR = 5.0
"""Seconds a request waits for its answer, at least, before a copy of it goes to another replica."""
HEDGE_FACTOR = 4.0
"""... or this many times the median time of the job's recent answered requests, when that is longer."""
DEADLINE_FLOOR = 60.0
"""Seconds, at least, after which an unanswered request is cancelled and its replica set aside."""
DEADLINE_FACTOR = 20.0
"""... or this many times the median time of the job's recent answered requests, when that is longer."""
LATENCY_SAMPLES = 64
"""Answered requests whose times make the median (the latest)."""
MIN_LATENCY_SAMPLES = 3
"""Answered requests needed before any request is hedged or cut off (until then: the client's timeout)."""
RECHECK = 1.0
"""Seconds between looks at a request in flight, for a free replica to hedge to or a new median."""
P = ParamSpec("P")
T = TypeVar("T")
Servers = AsyncClient | Client | str | Sequence[AsyncClient | Client | str]
"""One server or several: clients (their settings are reused) or root URLs."""
JobClient = AsyncClient | ThreadedClient
"""What a job calls: an ``AsyncClient``, or a ``Client`` with its own ``http_client`` in worker threads."""


@dataclass
class Replica:
    """One server of a job and what it did.

    Attributes:
        client: its client.
        url: its URL (without credentials).
        version: its vLLM version.
        in_flight: requests in flight now.
        set_aside_until: ``time.monotonic()`` before which it gets no batch.
        strikes: failures in a row.
        rows, tokens, batches, failures: totals of this run.
        busy: seconds of its answered requests, summed.
        checked: its model was checked since it was last set aside (see ``ReplicaPool``'s ``admit``).
        limit: with ``concurrency="auto"``, its requests-in-flight limit (tuned from its ``/metrics``
            where it serves them, else from its answers' latencies).
        engine: when its ``/metrics`` are sampled, and whether it serves them.
    """

    client: JobClient
    url: str
    version: str | None = None
    in_flight: int = 0
    set_aside_until: float = 0.0
    strikes: int = 0
    rows: int = 0
    tokens: int = 0
    batches: int = 0
    failures: int = 0
    busy: float = 0.0
    checked: bool = True
    limit: AdaptiveLimit | None = None
    engine: EngineSampler = field(default_factory=EngineSampler)


class ReplicaPool:
    """Hands out replicas for batches (see the module doc).

    Args:
        replicas: the job's servers.
        concurrency: requests in flight per replica, or ``"auto"``: each replica's own limit, tuned for
            throughput from its ``/metrics`` (:meth:`sample`), else from its answers' latencies
            (:class:`~vllm_tasks.adaptive.AdaptiveLimit`).
        retry_after: seconds a failing replica is first set aside.
        give_up_after: seconds without any answer, every replica set aside, before the job stops.
        admit: awaited before a replica that was set aside gets its next request (it checks the model
            the replica serves); ``None``: no check.
        hedge: hedge and cut off requests (:meth:`hedge_after`, :meth:`deadline`); False for work whose
            requests differ too much in size for one job's median to tell a stuck one (whole audio files).
    """

    def __init__(
        self,
        replicas: list[Replica],
        concurrency: Concurrency,
        retry_after: float,
        give_up_after: float,
        *,
        admit: Callable[[Replica], Awaitable[None]] | None = None,
        hedge: bool = True,
    ) -> None:
        self.replicas = replicas
        self._admit = admit
        self._hedge = hedge
        self.most_in_flight = CEILING if concurrency == "auto" else concurrency
        """The most requests in flight per replica (``auto``: the ceiling of its limit)."""
        for replica in replicas:
            replica.limit = AdaptiveLimit(goal="throughput") if concurrency == "auto" else None
        self._retry_after = retry_after
        self._give_up_after = give_up_after
        self._changed = asyncio.Event()  # set when a slot is given back (one event loop: no lock)
        self._last_answer = time.monotonic()
        self._last_error: BaseException | None = None
        self._latencies: deque[float] = deque(maxlen=LATENCY_SAMPLES)

    async def acquire(self) -> Replica:
        """Wait for a slot on the available replica with the fewest requests in flight.

        Raises:
            APIError: the last replica failure, once every replica has been set aside for
                ``give_up_after`` seconds without an answer.
        """
        while True:
            chosen = self.try_acquire()
            if chosen is not None:
                return chosen
            now = time.monotonic()
            wait: float | None = None
            if all(replica.set_aside_until > now for replica in self.replicas):
                if self._last_error is not None and now - self._last_answer >= self._give_up_after:
                    raise self._last_error
                wake = min(replica.set_aside_until for replica in self.replicas)
                wait = max(0.0, min(wake, self._last_answer + self._give_up_after) - now)
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._changed.wait()

    def try_acquire(self, avoid: Replica | None = None) -> Replica | None:
        """A slot on the available replica (other than ``avoid``) with the fewest requests in flight, or
        ``None`` when none has one free now."""
        now = time.monotonic()
        ready = [
            replica
            for replica in self.replicas
            if replica is not avoid
            and replica.set_aside_until <= now
            and replica.in_flight < self.allowed(replica)
        ]
        if not ready:
            return None
        chosen = min(ready, key=lambda replica: replica.in_flight)
        chosen.in_flight += 1
        return chosen

    def allowed(self, replica: Replica) -> int:
        """The requests ``replica`` may have in flight now."""
        return self.most_in_flight if replica.limit is None else replica.limit.allowed

    def release(self, replica: Replica, *, rows: int = 0, tokens: int = 0, seconds: float = 0.0) -> None:
        """Give back a slot after an answer (an error answer about the rows counts as one)."""
        replica.in_flight -= 1
        replica.strikes = 0
        replica.rows += rows
        replica.tokens += tokens
        replica.batches += 1 if rows else 0
        replica.busy += seconds
        if rows:
            self._latencies.append(seconds)
            if replica.limit is not None:
                replica.limit.answered(seconds)
        self._last_answer = time.monotonic()
        self._changed.set()

    async def sample(self, replica: Replica) -> None:
        """Feed ``replica``'s ``auto`` limit a sample of its ``/metrics`` when one is due (at most every
        :data:`~vllm_tasks.engine_metrics.SAMPLE_INTERVAL`, in the batch's own task, after its answer);
        one that cannot be read leaves the limit to the latencies, and the replica is not asked again."""
        limit = replica.limit
        if limit is None or not replica.engine.due(time.monotonic()):
            return
        load = await replica.client._engine_load()
        replica.engine.read(load)
        if load is None:
            limit.engine = False
        else:
            limit.sampled(load, time.monotonic())

    def set_aside(self, replica: Replica, error: BaseException, *, held: bool = True) -> None:
        """Give back a slot after a server failure (``held=False``: the failed request had none, such as
        the model check): the replica gets no batch for a while."""
        replica.in_flight -= 1 if held else 0
        replica.failures += 1
        replica.strikes += 1
        replica.checked = False
        if (
            not held
            and replica.limit is not None
            and getattr(error, "status_code", None) in OVERLOAD_STATUSES
        ):
            replica.limit.overloaded()  # a model check's answer: not sent under _checked's listener
        pause = min(self._retry_after * 2 ** (replica.strikes - 1), MAX_SET_ASIDE)
        replica.set_aside_until = time.monotonic() + pause
        self._last_error = error
        logger.warning("%s failed (%s); set aside for %.1f s", replica.url, error, pause)
        self._changed.set()

    def restore(self) -> None:
        """Every replica available again at once, its failures forgotten: a dataframe's next batch (a
        batch whose replicas failed has failed its task, which the dataframe engine retries)."""
        for replica in self.replicas:
            replica.set_aside_until, replica.strikes = 0.0, 0
        self._last_answer = time.monotonic()

    def cancelled(self, replica: Replica) -> None:
        """Give back a slot whose request was cancelled (Ctrl-C, another batch's fatal error, a copy sent
        elsewhere answered first)."""
        replica.in_flight -= 1
        self._changed.set()

    def hedge_after(self) -> float | None:
        """Seconds after which a request without an answer is sent to another replica too
        (:data:`HEDGE_FACTOR` times the median of recent answered requests, at least
        :data:`HEDGE_FLOOR`); ``None`` until :data:`MIN_LATENCY_SAMPLES` requests were answered, or for a
        pool that does not hedge."""
        return self._over_median(HEDGE_FLOOR, HEDGE_FACTOR)

    def deadline(self) -> float | None:
        """Seconds after which a request without an answer is cancelled and its replica set aside
        (:data:`DEADLINE_FACTOR` times the median, at least :data:`DEADLINE_FLOOR`); ``None`` until
        :data:`MIN_LATENCY_SAMPLES` requests were answered, or for a pool that does not hedge."""
        return self._over_median(DEADLINE_FLOOR, DEADLINE_FACTOR)

    def _over_median(self, floor: float, factor: float) -> float | None:
        if not self._hedge or len(self._latencies) < MIN_LATENCY_SAMPLES:
            return None
        return max(floor, factor * statistics.median(self._latencies))

    async def race(
        self,
        call: Callable[[JobClient], Coroutine[Any, Any, T]],
        first: Replica,
    ) -> tuple[Replica, float, asyncio.Task[T]]:
        """Run ``call`` on ``first`` (its slot already taken), hedged (see the module doc), to an answer.

        An error about the replica (``error.scope == "replica"``) sets it aside; when no request is left
        in flight, ``call`` goes to the next free replica. Anything else (a result, or an error about what
        was sent) is the answer:
        the requests still in flight are cancelled, and a replica whose request was sent before the
        answering one is set aside (it was overtaken).

        Returns:
            The replica that answered (its slot still taken: the caller gives it back), the seconds its
            request took, and its finished task (``.result()`` returns or raises the answer).

        Raises:
            APIError: the last server failure, once every replica is down (see :meth:`acquire`).
        """
        attempts: dict[asyncio.Task[T], tuple[Replica, float]] = {}

        def start(replica: Replica) -> None:
            attempts[asyncio.create_task(self._checked(replica, call))] = (replica, time.monotonic())

        start(first)
        try:
            while True:
                done, _ = await asyncio.wait(
                    attempts, timeout=self._next_look(attempts), return_when=asyncio.FIRST_COMPLETED
                )
                for task in sorted(done, key=lambda task: attempts[task][1]):  # the earliest sent first
                    replica, sent = attempts.pop(task)
                    error = task.exception()
                    if error is not None and is_about(error, "replica"):
                        self.set_aside(replica, error)
                        continue
                    await self._drop(attempts, replica, sent)
                    return replica, time.monotonic() - sent, task
                await self._cut_off(attempts)
                if not attempts:
                    start(await self.acquire())
                elif len(attempts) == 1:
                    other = self._hedge_to(*next(iter(attempts.values())))
                    if other is not None:
                        start(other)
        finally:
            await self._drop(attempts)  # cancelled from outside (Ctrl-C, another batch's fatal error)

    async def _checked(self, replica: Replica, call: Callable[[JobClient], Awaitable[T]]) -> T:
        """``call`` on ``replica``, after ``admit`` when it was set aside since its last check."""
        if not replica.checked and self._admit is not None:
            await self._admit(replica)
            replica.checked = True
        # every 429/503 answer backs its limit off, those the client's retries absorb too (heard in a
        # ThreadedClient's threads as well: the limit is only changed in the loop's thread)
        limit, loop = replica.limit, asyncio.get_running_loop()

        def overloaded() -> None:
            if limit is not None:
                loop.call_soon_threadsafe(limit.overloaded)

        token = overload_listener.set(overloaded if limit is not None else None)
        try:
            return await call(replica.client)
        finally:
            overload_listener.reset(token)

    def _next_look(self, attempts: dict[asyncio.Task[T], tuple[Replica, float]]) -> float:
        """Seconds until a request in flight is due to be hedged or cut off (at most :data:`RECHECK`)."""
        now = time.monotonic()
        hedge, deadline = self.hedge_after(), self.deadline()
        looks = [RECHECK] + [sent + deadline - now for _, sent in attempts.values() if deadline is not None]
        if hedge is not None and len(attempts) == 1:
            ((_, sent),) = attempts.values()
            if sent + hedge > now:  # once due, looked at every RECHECK for a free replica
                looks.append(sent + hedge - now)
        return max(0.0, min(looks))

    def _hedge_to(self, replica: Replica, sent: float) -> Replica | None:
        """A slot on another replica for a copy of the request sent to ``replica`` at ``sent``, once it
        is due (:meth:`hedge_after`) and one is free."""
        hedge, waited = self.hedge_after(), time.monotonic() - sent
        other = self.try_acquire(avoid=replica) if hedge is not None and waited >= hedge else None
        if other is not None:
            logger.info(
                "%s: no answer in %.1f s; the same request goes to %s too", replica.url, waited, other.url
            )
        return other

    async def _cut_off(self, attempts: dict[asyncio.Task[T], tuple[Replica, float]]) -> None:
        """Cancel the requests in flight past :meth:`deadline` and set their replicas aside."""
        deadline, now = self.deadline(), time.monotonic()
        late = [
            task
            for task, (_, sent) in attempts.items()
            if deadline is not None and now - sent >= deadline and not task.done()
        ]
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
        for task in late:
            replica, sent = attempts.pop(task)
            self.set_aside(replica, APITimeoutError(f"no answer in {now - sent:.1f} s (the job's deadline)"))

    async def _drop(
        self,
        attempts: dict[asyncio.Task[T], tuple[Replica, float]],
        winner: Replica | None = None,
        answered_sent: float = 0.0,
    ) -> None:
        """Cancel the requests still in flight and give back their slots; a replica whose request was
        sent before ``winner``'s, which answered, is set aside (overtaken)."""
        now = time.monotonic()
        overtaken = {task for task, (_, sent) in attempts.items() if sent < answered_sent and not task.done()}
        for task in attempts:
            task.cancel()
        await asyncio.gather(*attempts, return_exceptions=True)
        for task, (replica, sent) in attempts.items():
            if winner is not None and task in overtaken:
                detail = f"no answer in {now - sent:.1f} s; {winner.url} answered the same request first"
                self.set_aside(replica, APITimeoutError(detail))
            else:
                self.cancelled(replica)
        attempts.clear()


def make_replicas(servers: Servers) -> tuple[list[Replica], list[tuple[AsyncClient, Client | None]]]:
    """A replica per server, and the clients the job made for them, each with the caller's ``Client`` it
    stands for (``None`` for a URL): the job hands that one what its own learned, then closes it
    (:func:`close_made`).

    Raises:
        InvalidInputError: no server, something that is not a client or a URL, a server named twice.

    Examples:
        >>> replicas, made = make_replicas(["http://gpu1:8000", "http://gpu2:8000"])
        >>> len(made)
        2
    """
    items = [servers] if isinstance(servers, str | AsyncClient | Client) else list(servers)
    if not items:
        raise InvalidInputError(
            "client", servers, "names no server", "Pass a client, a URL or a list of them."
        )
    replicas: list[Replica] = []
    made: list[tuple[AsyncClient, Client | None]] = []
    for item in items:
        client: JobClient
        if isinstance(item, AsyncClient):
            client = item
        elif isinstance(item, Client):
            client = _on_event_loop(item)
        elif isinstance(item, str):
            client = AsyncClient(item)
        else:
            raise InvalidInputError(
                "client", item, "is not a client or a URL", "Pass a Client, an AsyncClient or a root URL."
            )
        if client is not item and isinstance(client, AsyncClient):
            made.append((client, item if isinstance(item, Client) else None))
        replicas.append(Replica(client, client.base_url))
    urls = [replica.url for replica in replicas]
    if len(set(urls)) < len(urls):
        raise InvalidInputError("client", urls, "names a server twice", "Give each server once.")
    return replicas, made


async def close_made(made: list[tuple[AsyncClient, Client | None]]) -> None:
    """Close the clients a job made (:func:`make_replicas`), each first handing the caller's ``Client`` it
    stood for what it learned of the server."""
    for client, origin in made:
        if origin is not None:
            client._hand_back(origin)
        await client.close()


def _on_event_loop(client: Client) -> JobClient:
    """A sync client for the job's event loop: an ``AsyncClient`` beside it (its settings, counting into
    its ``usage``, sharing what it knows of the server), or, when it has its own ``http_client`` (which an
    ``AsyncClient`` cannot use), the client itself, called in worker threads, so that every request goes
    through it."""
    if client.http_client is None:
        return AsyncClient._beside(client)
    return ThreadedClient(client)


def run_in_own_loop(job: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """The sync twin of an async job: the same signature, run with ``asyncio.run``.

    Where this thread already runs an event loop (a Jupyter cell, sync code called from async code),
    ``asyncio.run`` refuses; the job then runs on its own loop in a worker thread while this one waits.
    """

    @functools.wraps(job)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(job(*args, **kwargs))
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="vllm-tasks-job") as worker:
            return worker.submit(asyncio.run, job(*args, **kwargs)).result()

    return run
