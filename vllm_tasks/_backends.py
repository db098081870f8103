"""How the transport waits: one backend for asyncio, one for threads (as httpcore's ``_backends/``).

``vllm_tasks/_async/transport.py`` and ``_async/fetching.py`` call an ``AsyncBackend``; ``scripts/unasync.py``
turns that into a ``SyncBackend`` in the generated ``_sync/`` twins. Both offer the same four things:
``sleep``, a bounded worker group (``map_bounded``), a deadline scope (``run_within``) and name resolution
(``resolve``, bounded by the scope it runs in). Tests that must not wait patch ``sleep`` on these classes.

Cancellation differs by nature. An asyncio task is cancelled where it awaits. A thread cannot be stopped:
work a ``SyncBackend`` gives up on (the rest of a failed group, a download past its deadline) runs on in a
daemon thread whose ``cancelled()`` is then true, so that it starts nothing new, and its ``sleep`` ends at
once; the caller does not wait for it, but the client's ``close()`` does, briefly (``settle``).
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")

AddressInfo = list[tuple[Any, ...]]
"""What ``socket.getaddrinfo`` answers: one ``(family, type, proto, canonname, sockaddr)`` per address."""


class DeadlinePassed(Exception):
    """``run_within``'s time ran out (the work was cancelled, or left to end in its thread)."""


class Cancelled(Exception):
    """Raised in a thread whose work was given up on (``SyncBackend.check_cancelled``)."""


# The cancellation event of the work running in this thread (None: nobody gives up on it).
_cancel_event: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "vllm_tasks_cancel_event", default=None
)


SETTLE_SECONDS = 1.0
"""How long a client's ``close()`` waits for work it gave up on to end before it closes the pool."""


class AsyncBackend:
    """asyncio: tasks for concurrency, ``asyncio.timeout`` for deadlines, the loop's resolver."""

    async def settle(self, seconds: float) -> None:
        """Nothing to wait for: a task given up on was cancelled, and awaited, before its group returned."""

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a retry's backoff, a poll's interval)."""
        await asyncio.sleep(seconds)

    def cancelled(self) -> bool:
        """Whether the work running here was given up on: never, for a task (it is cancelled instead)."""
        return False

    def check_cancelled(self) -> None:
        """Nothing to do: a cancelled task stops at its next ``await``."""

    async def map_bounded(
        self,
        count: int,
        concurrency: int,
        job: Callable[[int], Awaitable[T]],
        on_result: Callable[[int, T], None] | None = None,
    ) -> list[T]:
        """``[await job(0), ..., await job(count - 1)]``, at most ``concurrency`` running at once.

        ``on_result(index, result)`` is called as each job ends. The first failure (or the caller's
        cancellation) cancels the jobs still running, and is raised.
        """
        # A few workers pull the next index from one shared iterator: no task (and no semaphore waiter)
        # per job, so 1,000 jobs do not mean 1,000 callbacks in one loop iteration.
        results: list[T | None] = [None] * count
        pending = iter(range(count))

        async def worker() -> None:
            for index in pending:
                results[index] = result = await job(index)
                if on_result is not None:
                    on_result(index, result)
                await asyncio.sleep(0)  # let the loop run others even when the answer came without I/O

        workers = [asyncio.ensure_future(worker()) for _ in range(min(max(1, concurrency), count))]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        return cast(list[T], results)

    async def run_within(self, seconds: float, work: Callable[[], Awaitable[T]]) -> T:
        """``await work()``, cancelled once ``seconds`` have passed.

        Raises:
            DeadlinePassed: the time ran out (a ``TimeoutError`` raised by ``work`` itself passes as is).
        """
        scope = asyncio.timeout(seconds)
        try:
            async with scope:
                return await work()
        except TimeoutError:
            if scope.expired():
                raise DeadlinePassed from None
            raise

    async def resolve(self, host: str, port: int) -> AddressInfo:
        """The addresses of ``host`` (TCP), from the loop's resolver; bounded by the ``run_within`` scope
        it runs in (a lookup has no timeout of its own).

        Raises:
            OSError: the name does not resolve.
        """
        loop = asyncio.get_running_loop()
        return list(await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM))


class SyncBackend:
    """Threads: daemon worker threads for concurrency and deadlines, ``socket.getaddrinfo``."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self._threads_lock = threading.Lock()

    def settle(self, seconds: float) -> None:
        """Wait up to ``seconds`` for this backend's worker threads to end (those a failed group or a
        passed deadline left running among them).

        The client's ``close()`` calls it before closing the connection pool: a request such a thread
        was starting could otherwise open its connection after the pool closed, and leave that socket
        open (CI, stop 28: a failing ``/v1/models`` ended discovery while ``/openapi.json`` was in flight).
        A thread still running after ``seconds`` is left; closing the pool ends its request.
        """
        deadline = time.monotonic() + seconds
        with self._threads_lock:
            threads, self._threads = self._threads, []
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def _start(self, target: Callable[[], None], name: str) -> None:
        thread = start_daemon_thread(target, name)
        with self._threads_lock:
            self._threads = [running for running in self._threads if running.is_alive()]
            self._threads.append(thread)

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a retry's backoff, a poll's interval); ends at once when the work running in
        this thread is given up on."""
        event = _cancel_event.get()
        if event is None:
            time.sleep(seconds)
        else:
            event.wait(seconds)

    def cancelled(self) -> bool:
        """Whether the work running in this thread was given up on (its group failed, its deadline
        passed): it should start nothing new."""
        event = _cancel_event.get()
        return event is not None and event.is_set()

    def check_cancelled(self) -> None:
        """Raise :class:`Cancelled` when the work running in this thread was given up on."""
        if self.cancelled():
            raise Cancelled

    def map_bounded(
        self,
        count: int,
        concurrency: int,
        job: Callable[[int], T],
        on_result: Callable[[int, T], None] | None = None,
    ) -> list[T]:
        """``[job(0), ..., job(count - 1)]``, at most ``concurrency`` running at once (in threads).

        ``on_result(index, result)`` is called in the caller's thread as each job ends. The first failure,
        or anything raised while waiting (Ctrl-C's ``KeyboardInterrupt``, an exception from ``on_result``),
        returns at once: jobs not yet started never start, and those running see ``cancelled()``.
        """
        if concurrency <= 1 or count <= 1:
            results = []
            for index in range(count):
                results.append(job(index))
                if on_result is not None:
                    on_result(index, results[-1])
            return results
        cancel = threading.Event()
        answers: queue.SimpleQueue[tuple[int, T | None, BaseException | None]] = queue.SimpleQueue()
        order = iter(range(count))
        order_lock = threading.Lock()

        def worker() -> None:
            _cancel_event.set(cancel)
            while not cancel.is_set():
                with order_lock:
                    index = next(order, None)
                if index is None:
                    return
                try:
                    answers.put((index, job(index), None))
                except BaseException as error:  # raised in the caller's thread
                    answers.put((index, None, error))
                    return

        collected: list[T | None] = [None] * count
        try:
            for _ in range(min(concurrency, count)):
                self._start(worker, "vllm-tasks-send")
            for _ in range(count):
                index, result, error = _next_answer(answers)
                if error is not None:
                    raise error
                collected[index] = result
                if on_result is not None:
                    on_result(index, cast(T, result))
        finally:
            cancel.set()
        return cast(list[T], collected)

    def run_within(self, seconds: float, work: Callable[[], T]) -> T:
        """``work()`` in a worker thread, waited for at most ``seconds``.

        A blocking call cannot be interrupted (a read, a DNS lookup): past the deadline the caller gets
        control back at once and the thread, now ``cancelled()``, ends on its own.

        Raises:
            DeadlinePassed: the time ran out.
        """
        cancel = threading.Event()
        outcome: queue.SimpleQueue[tuple[T | None, BaseException | None]] = queue.SimpleQueue()

        def run() -> None:
            _cancel_event.set(cancel)
            try:
                outcome.put((work(), None))
            except BaseException as error:  # raised in the caller's thread
                outcome.put((None, error))

        try:
            self._start(run, "vllm-tasks-deadline")
            result, error = outcome.get(timeout=seconds)
        except queue.Empty:
            raise DeadlinePassed from None
        finally:
            cancel.set()
        if error is not None:
            raise error
        return cast(T, result)

    def resolve(self, host: str, port: int) -> AddressInfo:
        """The addresses of ``host`` (TCP); bounded by the ``run_within`` scope it runs in (a lookup has
        no timeout of its own).

        Raises:
            OSError: the name does not resolve.
        """
        return list(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))


def _next_answer(answers: queue.SimpleQueue[T]) -> T:
    """The next item of ``answers``, waited for in short steps: between them Python runs its signal
    handlers, so that Ctrl-C (``KeyboardInterrupt``) ends the wait within a step. A wait without a
    timeout is not interrupted on Windows, nor, under load, reliably elsewhere (CI: a SIGINT was handled
    only 30 s later, when the next answer arrived)."""
    while True:
        try:
            return answers.get(timeout=0.1)
        except queue.Empty:
            continue


def start_daemon_thread(target: Callable[[], None], name: str) -> threading.Thread:
    """A started daemon thread running ``target`` in a copy of this thread's context (OpenTelemetry's
    current span among it, so that its requests join the caller's trace)."""
    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(target,), name=name, daemon=True)
    thread.start()
    return thread
