"""Test helpers shared by the unit and integration tests: every client test runs on both clients."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import os
import random
import signal
import subprocess
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import vllm_tasks as vt


class AsyncAsSync:
    """Wraps an AsyncClient so a test can call it like a Client (each call runs on a private loop)."""

    def __init__(self, client: vt.AsyncClient) -> None:
        self.inner = client
        self._loop = asyncio.new_event_loop()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *args, **kwargs: self._loop.run_until_complete(attr(*args, **kwargs))
        return attr

    def close(self) -> None:
        self._loop.run_until_complete(self.inner.close())
        self._loop.close()


def stream_result(client: Any, stream: Any) -> Any:
    """``stream.until_done()`` of a transcription stream from either client (an async one runs on the
    wrapper's loop)."""
    if hasattr(stream, "__aiter__"):
        return client._loop.run_until_complete(stream.until_done())
    return stream.until_done()


def client_factory(kind: str, default_url: str | None = None) -> Iterator[Callable[..., Any]]:
    """The body of a ``make_client`` fixture: yields a factory of ``Client`` (``kind="sync"``) or wrapped
    ``AsyncClient`` objects (``max_retries`` 0 unless given), and closes them afterwards."""
    made: list[Any] = []

    def factory(base_url: str | None = default_url, **kwargs: Any) -> Any:
        kwargs.setdefault("max_retries", 0)
        client: Any = (
            vt.Client(base_url, **kwargs)
            if kind == "sync"
            else AsyncAsSync(vt.AsyncClient(base_url, **kwargs))
        )
        made.append(client)
        return client

    yield factory
    for client in made:
        client.close()


def scorer_kind_on(vllm_version: str, kind: vt.types.ScorerKind) -> vt.types.ScorerKind:
    """The scorer kind the SDK reports for a ``kind`` model on ``vllm_version``: ``UNKNOWN`` on 0.11, whose
    /pooling answers hidden states for every model and task (docs/compatibility.md)."""
    return (
        kind if vt.types.ServerVersion.parse(vllm_version).at_least("0.12.0") else vt.types.ScorerKind.UNKNOWN
    )


def start_cli_for_ctrl_c(args: list[str]) -> subprocess.Popen[str]:
    """Start ``vllm-tasks ARGS`` (this checkout's) as a child that SIGINT interrupts, stderr piped.

    A shell's background job (``cmd &``, ``nohup``) starts with SIGINT ignored, and its children inherit
    that; Python then installs no ``KeyboardInterrupt`` handler, and the test's SIGINT would be ignored
    (the job ran to the end and exited 0). So the child puts Python's handler back before the CLI starts.
    """
    launcher = (
        "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "runpy.run_module('vllm_tasks.cli', run_name='__main__', alter_sys=True)"
    )
    return subprocess.Popen(
        [sys.executable, "-c", launcher, *args], env=cli_env(), stderr=subprocess.PIPE, text=True
    )


def cli_env() -> dict[str, str]:
    """The environment for a child process that runs this checkout's ``vllm_tasks``."""
    return {**os.environ, "PYTHONPATH": str(Path(vt.__file__).parents[1])}


def kill_at_random_progress(
    argv: list[str], progress: Callable[[], int], total: int, rng: random.Random, kills: int
) -> Iterator[None]:
    """Start the job ``argv`` and SIGKILL it up to ``kills`` times, each once ``progress()`` (units saved)
    has reached a random target, at least one more than before and fewer than ``total``, plus a random
    fraction of a second; yields after each kill, for the caller to look at what was saved.

    Kill points are drawn in units of progress, not seconds after the start: a slow machine spent the
    whole of "0.5-4 s after the start" in start-up, and every kill landed before the first unit.
    """
    for _ in range(kills):
        before = progress()
        if before >= total - 1:
            return
        target = rng.randint(before + 1, total - 1)
        child = subprocess.Popen(argv, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 600
        while progress() < target:
            assert child.poll() is None and time.monotonic() < deadline, "the job ended before the kill"
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 0.5))
        child.send_signal(signal.SIGKILL)  # a no-op if the job finished in the meantime
        child.wait()
        yield


class Ticker:
    """An asyncio task that sleeps ``interval`` seconds in a loop and records the longest gap between
    its wake-ups (``longest``, seconds): how long the event loop was kept from running it.

    Examples:
        >>> async with Ticker() as ticker:
        ...     await client.transcribe(...)
        >>> ticker.longest
    """

    def __init__(self, interval: float = 0.001) -> None:
        self.interval = interval
        self.longest = 0.0
        self.ticks = 0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(self.interval)
            now = time.perf_counter()
            self.longest = max(self.longest, now - last)
            self.ticks += 1
            last = now

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0)  # the ticker takes its first timestamp before the work starts
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._task is not None
        ticks = self.ticks
        while self.ticks == ticks and not self._task.done():
            # One more tick measures the gap that holds the work's last step: without it, a long step
            # right before the exit would end in cancelling the ticker, unmeasured.
            await asyncio.sleep(self.interval)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def left_open_at_collection() -> list[str]:
    """Runs the garbage collector and returns what it found left open (sockets, transports, files): the
    ``ResourceWarning`` each one gives, sorted, with where it was made when tracemalloc traces
    (``PYTHONTRACEMALLOC=20``).

    Event loops are left out. pytest-asyncio calls ``asyncio.get_event_loop()`` around each async test,
    which on Python 3.11 makes and sets a loop that nobody closes; the next ``asyncio.run`` unsets it, and
    the collector finds it in whichever module that was (CI, at stop 19). The SDK makes loops only through
    ``asyncio.run``, which closes them.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        gc.collect()
    left_open = [warning for warning in caught if warning.category is ResourceWarning]
    return sorted({_where_made(w) for w in left_open if not isinstance(w.source, asyncio.AbstractEventLoop)})


def _where_made(warning: warnings.WarningMessage) -> str:
    made = tracemalloc.get_object_traceback(warning.source) if warning.source is not None else None
    if made is None:
        return str(warning.message)
    return f"{warning.message}, made at:\n" + "\n".join(made.format())
