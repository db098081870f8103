"""How the transport waits: one backend for asyncio, one for threads (as httpcore's ``_backends/``).

``vllm_tasks/_async/transport.py`` and ``_async/fetching.py`` call an ``AsyncBackend``; ``scripts/unasync.py``
turns that into a ``SyncBackend`` in the generated ``_sync/`` twins. Both offer the same things: ``sleep``,
a bounded worker group (``map_bounded``), a deadline scope (``run_within``), name resolution (``resolve``,
bounded by the scope it runs in) and ``close`` (the client's). Tests that must not wait patch ``sleep`` on
these classes.

A ``SyncBackend``'s threads are a ``WorkerGroup`` kept for the client's life: started as the first calls
need them, reused by every later call (a call starts no thread once the group has as many as it runs at
once), ended by the client's ``close()`` (``close`` here), by the group's garbage collection, or after
``WORKER_IDLE_SECONDS`` without work.

Cancellation differs by nature. An asyncio task is cancelled where it awaits. A thread cannot be stopped:
work a ``SyncBackend`` gives up on (the rest of a failed group, a download past its deadline) runs on in its
worker thread with ``cancelled()`` then true, so that it starts nothing new, and its ``sleep`` ends at
once; the caller does not wait for it, but the client's ``close()`` does, briefly.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
import logging
import queue
import socket
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar, cast

T = TypeVar("T")

AddressInfo = list[tuple[Any, ...]]
"""What ``socket.getaddrinfo`` answers: one ``(family, type, proto, canonname, sockaddr)`` per address."""


class Slots(Protocol):
    """Slots shared by concurrent work (a ``concurrency="auto"`` route's requests in flight)."""

    def take(self, wake: Callable[[], None]) -> bool:
        """Take a slot; or keep ``wake``, to be called once when one may have come free, and say False."""
        ...


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

WORKER_IDLE_SECONDS = 30.0
"""How long a worker thread of a sync client waits for its next job before it ends."""

CEILING_WAIT = 64
"""The most worker threads a ``concurrency="auto"`` call waits for to be idle again before it returns."""

IDLE_THREAD_NAME = "vllm-tasks-idle"
"""The name of a worker thread between jobs (while running one it has the job's name)."""

logger = logging.getLogger("vllm_tasks")


class AsyncBackend:
    """asyncio: tasks for concurrency, ``asyncio.timeout`` for deadlines, the loop's resolver."""

    async def close(self, seconds: float) -> None:
        """Nothing to wait for or end: a task given up on was cancelled, and awaited, before its group
        returned, and the tasks of a group are made per call (a task costs no thread)."""

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a retry's backoff, a poll's interval)."""
        await asyncio.sleep(seconds)

    def cancelled(self) -> bool:
        """Whether the work running here was given up on: never, for a task (it is cancelled instead)."""
        return False

    def check_cancelled(self) -> None:
        """Nothing to do: a cancelled task stops at its next ``await``."""

    async def take_slot(self, slots: Slots) -> None:
        """Wait until ``slots`` gives this task a slot (woken, from any thread, as slots come free)."""
        loop = asyncio.get_running_loop()
        while True:
            woken: asyncio.Future[None] = loop.create_future()
            if slots.take(functools.partial(_wake, loop, woken)):
                return
            await woken

    async def map_bounded(
        self,
        count: int,
        concurrency: int | Callable[[], int],
        job: Callable[[int], Awaitable[T]],
        on_result: Callable[[int, T], None] | None = None,
    ) -> list[T]:
        """``[await job(0), ..., await job(count - 1)]``, at most ``concurrency`` running at once.

        ``concurrency`` may be a function (``concurrency="auto"``'s limit): asked again as each job ends,
        more jobs start while fewer than its answer run (and none while more do).
        ``on_result(index, result)`` is called as each job ends. The first failure (or the caller's
        cancellation) cancels the jobs still running, and is raised.
        """
        if callable(concurrency):
            return await _map_adaptive(count, concurrency, job, on_result)
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


def _wake(loop: asyncio.AbstractEventLoop, woken: asyncio.Future[None]) -> None:
    """Settle ``woken`` on its loop, unless it was given up on (cancelled, or its loop has closed)."""

    def settle() -> None:
        if not woken.done():
            woken.set_result(None)

    with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits for it
        loop.call_soon_threadsafe(settle)


async def _map_adaptive(
    count: int,
    allowed: Callable[[], int],
    job: Callable[[int], Awaitable[T]],
    on_result: Callable[[int, T], None] | None,
) -> list[T]:
    """``AsyncBackend.map_bounded`` under a limit that changes: a task per job, started while fewer than
    ``allowed()`` run."""
    results: list[T | None] = [None] * count
    running: dict[asyncio.Future[T], int] = {}
    started = 0
    try:
        while started < count or running:
            while started < count and len(running) < max(1, allowed()):
                running[asyncio.ensure_future(job(started))] = started
                started += 1
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                index = running.pop(task)
                results[index] = result = task.result()
                if on_result is not None:
                    on_result(index, result)
    except BaseException:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        raise
    return cast(list[T], results)


class SyncBackend:
    """Threads: a ``WorkerGroup`` for concurrency and deadlines, ``socket.getaddrinfo``."""

    def __init__(self) -> None:
        self.workers = WorkerGroup()

    def close(self, seconds: float) -> None:
        """Wait up to ``seconds`` for the jobs running on this backend's worker threads to end (those a
        failed group or a passed deadline left running among them), then end its threads.

        The client's ``close()`` calls it before closing the connection pool: a request such a thread
        was starting could otherwise open its connection after the pool closed, and leave that socket
        open (CI, stop 28: a failing ``/v1/models`` ended discovery while ``/openapi.json`` was in flight).
        A job still running after ``seconds`` is left to end in its thread; closing the pool ends its
        request. A later call starts new threads.
        """
        self.workers.wait_quiet(seconds)
        self.workers.close()

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

    def take_slot(self, slots: Slots) -> None:
        """Wait until ``slots`` gives this thread a slot (woken as slots come free); work given up on
        stops waiting (:class:`Cancelled`)."""
        woken = threading.Event()
        while not slots.take(woken.set):
            while not woken.wait(0.1):  # in steps: work given up on must not wait for a slot forever
                self.check_cancelled()
            woken.clear()

    def map_bounded(
        self,
        count: int,
        concurrency: int | Callable[[], int],
        job: Callable[[int], T],
        on_result: Callable[[int, T], None] | None = None,
    ) -> list[T]:
        """``[job(0), ..., job(count - 1)]``, at most ``concurrency`` running at once (in threads).

        ``concurrency`` may be a function (``concurrency="auto"``'s limit): asked again as each job ends,
        more jobs start while fewer than its answer run (and none while more do).
        ``on_result(index, result)`` is called in the caller's thread as each job ends. The first failure,
        or anything raised while waiting (Ctrl-C's ``KeyboardInterrupt``, an exception from ``on_result``),
        returns at once: jobs not yet started never start, and those running see ``cancelled()``.
        """
        if callable(concurrency):
            return self._map_adaptive(count, concurrency, job, on_result)
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
            workers = [self.workers.run(worker, "vllm-tasks-send") for _ in range(min(concurrency, count))]
            for _ in range(count):
                index, result, error = _next_answer(answers)
                if error is not None:
                    raise error
                collected[index] = result
                if on_result is not None:
                    on_result(index, cast(T, result))
            # Every job has ended: their threads are about to be idle. Waiting for it (a few bytecodes)
            # lets the next call find them idle instead of starting threads of its own.
            for idle_again in workers:
                _wait_for(idle_again)
        finally:
            cancel.set()
        return cast(list[T], collected)

    def _map_adaptive(
        self,
        count: int,
        allowed: Callable[[], int],
        job: Callable[[int], T],
        on_result: Callable[[int, T], None] | None,
    ) -> list[T]:
        """``map_bounded`` under a limit that changes: the caller's thread hands each job to an idle
        worker thread while fewer than ``allowed()`` run."""
        cancel = threading.Event()
        answers: queue.SimpleQueue[tuple[int, T | None, BaseException | None]] = queue.SimpleQueue()

        def one(index: int) -> None:
            _cancel_event.set(cancel)
            try:
                answers.put((index, None if cancel.is_set() else job(index), None))
            except BaseException as error:  # raised in the caller's thread
                answers.put((index, None, error))

        collected: list[T | None] = [None] * count
        started = running = 0
        last: collections.deque[threading.Event] = collections.deque(maxlen=CEILING_WAIT)
        try:
            for _ in range(count):
                while started < count and running < max(1, allowed()):
                    last.append(self.workers.run(functools.partial(one, started), "vllm-tasks-send"))
                    started, running = started + 1, running + 1
                index, result, error = _next_answer(answers)
                running -= 1
                if error is not None:
                    raise error
                collected[index] = result
                if on_result is not None:
                    on_result(index, cast(T, result))
            for idle_again in last:  # as map_bounded: the next call finds the threads idle
                _wait_for(idle_again)
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
            self.workers.run(run, "vllm-tasks-deadline")
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


class WorkerGroup:
    """Daemon threads kept between calls, each running one job at a time (a sync client's workers).

    A job given to :meth:`run` goes to an idle thread; a thread starts only when none is idle, so the
    group grows to the most jobs it ever ran at once (a call's ``concurrency``, or the sum over the
    threads that share a client) and no further, and a call starts no thread once the group is that
    large. Each job runs in a copy of its caller's context (OpenTelemetry's current span among it, so
    that its requests join the caller's trace). A thread ends after ``idle_seconds`` without a job; all
    of them end at :meth:`close` (one running a job once the job ends) or when the group is garbage
    collected. Thread-safe.
    """

    def __init__(self, idle_seconds: float = WORKER_IDLE_SECONDS) -> None:
        self._idle_seconds = idle_seconds
        self._lock = threading.Lock()
        # The current generation, in a list the finalizer shares (it must not hold the group itself).
        self._current = [_WorkerThreads(idle_seconds)]
        weakref.finalize(self, _close_current, self._current)

    def run(self, job: Callable[[], None], name: str) -> threading.Event:
        """Run ``job()`` on a worker thread named ``name`` while it runs; returns at once. ``job`` must
        handle its own errors (one it raises is logged).

        Returns:
            An event set once the job has ended and its thread is idle again (ready for the next
            :meth:`run`, which then starts no thread).
        """
        with self._lock:  # not beside a close(): its end-of-work markers would go to an idle thread
            return self._current[0].run(job, name)

    def threads(self) -> list[threading.Thread]:
        """The group's live threads, idle or running a job."""
        return self._current[0].alive()

    def wait_quiet(self, seconds: float) -> bool:
        """Wait up to ``seconds`` until no job runs (the calling thread's own job aside); whether none
        does."""
        return self._current[0].wait_quiet(seconds)

    def close(self) -> None:
        """End the threads: the idle ones at once, one running a job after the job. A later :meth:`run`
        starts new ones."""
        with self._lock:
            threads, self._current[0] = self._current[0], _WorkerThreads(self._idle_seconds)
            threads.close()


def _close_current(current: list[_WorkerThreads]) -> None:
    current[0].close()


Job = tuple[contextvars.Context, Callable[[], None], str, threading.Event]
"""A queued job: its caller's context, the job, its thread's name while it runs, its end-of-job event."""


class _WorkerThreads:
    """One generation of a ``WorkerGroup``'s threads and their job queue; its threads hold this, not the
    group, so that the group can be garbage collected (which closes it)."""

    def __init__(self, idle_seconds: float) -> None:
        self.idle_seconds = idle_seconds
        self.jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.quiet = threading.Condition(self.lock)  # notified when the last running job ends
        self.members: set[threading.Thread] = set()
        self.idle = 0  # threads waiting for a job that no queued job is meant for yet
        self.busy = 0  # jobs queued or running
        self.closed = False

    def run(self, job: Callable[[], None], name: str) -> threading.Event:
        context, idle_again = contextvars.copy_context(), threading.Event()
        with self.lock:
            self.busy += 1
            if self.idle > 0:
                self.idle -= 1  # an idle thread takes the job from the queue
            else:
                thread = threading.Thread(target=self.work, name=IDLE_THREAD_NAME, daemon=True)
                self.members.add(thread)
                thread.start()
        self.jobs.put((context, job, name, idle_again))
        return idle_again

    def work(self) -> None:
        thread = threading.current_thread()
        while True:
            try:
                item = self.jobs.get(timeout=self.idle_seconds)
            except queue.Empty:
                with self.lock:
                    if self.idle == 0:
                        continue  # every waiting thread has a job on its way: this one takes one
                    self.idle -= 1
                    self.members.discard(thread)
                    return
            if item is None:
                with self.lock:
                    self.members.discard(thread)
                return
            context, job, name, idle_again = item
            thread.name = name
            try:
                context.run(job)
            except BaseException:  # a job handles its own errors; one that escapes must not end the thread
                logger.exception("a vllm_tasks worker thread's job raised")
            finally:
                thread.name = IDLE_THREAD_NAME
                with self.lock:
                    self.busy -= 1
                    self.idle += 1
                    if self.busy == 0:
                        self.quiet.notify_all()
                idle_again.set()
                # Held while waiting, the last job (its closure, its caller's context) would keep the
                # client alive, and with it this group, which its garbage collection would close.
                del item, context, job, idle_again

    def alive(self) -> list[threading.Thread]:
        with self.lock:
            return [thread for thread in self.members if thread.is_alive()]

    def wait_quiet(self, seconds: float) -> bool:
        own = 1 if threading.current_thread() in self.members else 0
        with self.quiet:
            return self.quiet.wait_for(lambda: self.busy <= own, timeout=seconds)

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            count = len(self.members)
        for _ in range(count):
            self.jobs.put(None)


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


def _wait_for(event: threading.Event) -> None:
    """Wait until ``event`` is set, in short steps (Ctrl-C ends the wait: see ``_next_answer``)."""
    while not event.wait(0.1):
        pass


def start_daemon_thread(target: Callable[[], None], name: str) -> threading.Thread:
    """A started daemon thread running ``target`` in a copy of this thread's context (OpenTelemetry's
    current span among it, so that its requests join the caller's trace)."""
    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(target,), name=name, daemon=True)
    thread.start()
    return thread
