"""Several servers behind one job: least-in-flight dispatch, failing replicas set aside and retried.

Each batch goes to the available replica with the fewest requests in flight (at most ``concurrency``
each). A replica whose request fails after the client's own retries (connection errors, timeouts, 5xx)
is set aside for ``retry_after`` seconds, doubling with each failure in a row, and its batch goes to
another. When every replica is set aside and none has answered for ``give_up_after`` seconds, the job
stops with the last error (its checkpoint is kept).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from .._async.client import AsyncClient
from .._sync.client import Client
from ..errors import APIConnectionError, InternalServerError, InvalidInputError, RateLimitError
from ..threaded import ThreadedClient

logger = logging.getLogger("vllm_tasks.jobs")

REPLICA_ERRORS = (APIConnectionError, InternalServerError, RateLimitError)
"""Failures of a server, not of the rows sent to it: the batch goes to another replica."""
MAX_SET_ASIDE = 300.0
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


class ReplicaPool:
    """Hands out replicas for batches (see the module doc).

    Args:
        replicas: the job's servers.
        concurrency: requests in flight per replica.
        retry_after: seconds a failing replica is first set aside.
        give_up_after: seconds without any answer, every replica set aside, before the job stops.
    """

    def __init__(
        self, replicas: list[Replica], concurrency: int, retry_after: float, give_up_after: float
    ) -> None:
        self.replicas = replicas
        self.concurrency = concurrency
        self._retry_after = retry_after
        self._give_up_after = give_up_after
        self._changed = asyncio.Event()  # set when a slot is given back (one event loop: no lock)
        self._last_answer = time.monotonic()
        self._last_error: BaseException | None = None

    async def acquire(self) -> Replica:
        """Wait for a slot on the available replica with the fewest requests in flight.

        Raises:
            APIError: the last replica failure, once every replica has been set aside for
                ``give_up_after`` seconds without an answer.
        """
        while True:
            now = time.monotonic()
            up = [replica for replica in self.replicas if replica.set_aside_until <= now]
            ready = [replica for replica in up if replica.in_flight < self.concurrency]
            if ready:
                chosen = min(ready, key=lambda replica: replica.in_flight)
                chosen.in_flight += 1
                return chosen
            wait: float | None = None
            if not up:
                if self._last_error is not None and now - self._last_answer >= self._give_up_after:
                    raise self._last_error
                wake = min(replica.set_aside_until for replica in self.replicas)
                wait = max(0.0, min(wake, self._last_answer + self._give_up_after) - now)
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._changed.wait()

    def release(self, replica: Replica, *, rows: int = 0, tokens: int = 0, seconds: float = 0.0) -> None:
        """Give back a slot after an answer (an error answer about the rows counts as one)."""
        replica.in_flight -= 1
        replica.strikes = 0
        replica.rows += rows
        replica.tokens += tokens
        replica.batches += 1 if rows else 0
        replica.busy += seconds
        self._last_answer = time.monotonic()
        self._changed.set()

    def set_aside(self, replica: Replica, error: BaseException) -> None:
        """Give back a slot after a server failure: the replica gets no batch for a while."""
        replica.in_flight -= 1
        replica.failures += 1
        replica.strikes += 1
        pause = min(self._retry_after * 2 ** (replica.strikes - 1), MAX_SET_ASIDE)
        replica.set_aside_until = time.monotonic() + pause
        self._last_error = error
        logger.warning("%s failed (%s); set aside for %.1f s", replica.url, error, pause)
        self._changed.set()

    def cancelled(self, replica: Replica) -> None:
        """Give back a slot whose request was cancelled (Ctrl-C, or another batch's fatal error)."""
        replica.in_flight -= 1
        self._changed.set()

    async def send(self, call: Callable[[JobClient], Awaitable[T]], *, rows: int = 1) -> T:
        """Run ``call`` on the next free replica; on a server failure set that one aside and run it on
        another, until one answers (or every replica has been down for ``give_up_after``).

        Any other error (about what was sent) frees the slot and is raised.

        Raises:
            APIError: the error ``call`` raised that is not a server failure, or the last server failure
                once every replica is down.
        """
        while True:
            replica = await self.acquire()
            sent = time.monotonic()
            try:
                result = await call(replica.client)
            except REPLICA_ERRORS as error:
                self.set_aside(replica, error)
                continue
            except asyncio.CancelledError:
                self.cancelled(replica)
                raise
            except Exception:
                self.release(replica, seconds=time.monotonic() - sent)
                raise
            self.release(replica, rows=rows, seconds=time.monotonic() - sent)
            return result


def make_replicas(servers: Servers) -> tuple[list[Replica], list[AsyncClient]]:
    """A replica per server, and the clients the job made for them (it closes them when it ends).

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
    made: list[AsyncClient] = []
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
            made.append(client)
        replicas.append(Replica(client, client.base_url))
    urls = [replica.url for replica in replicas]
    if len(set(urls)) < len(urls):
        raise InvalidInputError("client", urls, "names a server twice", "Give each server once.")
    return replicas, made


def _on_event_loop(client: Client) -> JobClient:
    """A sync client for the job's event loop: an ``AsyncClient`` with its settings, or, when it has its
    own ``http_client`` (which an ``AsyncClient`` cannot use), the client itself, called in worker
    threads, so that every request goes through it."""
    if client.http_client is None:
        return AsyncClient.from_settings(client.settings)
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
