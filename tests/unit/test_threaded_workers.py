"""``ThreadedClient``'s worker threads (``vllm_tasks.threaded._Workers``): a thread whose call is done
takes the next one, a blocked call holds only its own thread, each call runs in its caller's context, an
idle thread ends; the sync dataframe callables send through their own ``Client`` in those threads."""

from __future__ import annotations

import contextvars
import threading

import pytest

import vllm_tasks as vt
from vllm_tasks import threaded
from vllm_tasks.integrations.ray import Embedder
from vllm_tasks.threaded import ThreadedClient

WAIT = 10.0
caller: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="none")


def run_one(workers: threaded._Workers) -> tuple[threading.Thread, str]:
    done = threading.Event()
    seen: list[tuple[threading.Thread, str]] = []

    def call() -> None:
        seen.append((threading.current_thread(), caller.get()))
        done.set()

    workers.submit(call, "test-worker")
    assert done.wait(WAIT)
    return seen[0]


def wait_idle(workers: threaded._Workers, idle: int) -> None:
    finished = threading.Event()
    while not finished.wait(0.001):  # the thread counts itself idle once its call has returned
        with workers._lock:
            if workers._idle == idle:
                finished.set()


def test_a_thread_whose_call_is_done_takes_the_next_one_in_its_callers_context() -> None:
    workers = threaded._Workers()
    caller.set("first")
    thread, seen = run_one(workers)
    assert seen == "first"
    wait_idle(workers, 1)
    caller.set("second")
    assert run_one(workers) == (thread, "second")


def test_a_blocked_call_holds_only_its_own_thread() -> None:
    workers = threaded._Workers()
    release = threading.Event()
    workers.submit(lambda: release.wait(WAIT) and None, "test-blocked")
    other, _ = run_one(workers)  # answered while the first call is still blocked
    assert not release.is_set() and other.name == "test-worker"
    release.set()


def test_an_idle_thread_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threaded, "IDLE", 0.01)
    workers = threaded._Workers()
    thread, _ = run_one(workers)
    thread.join(WAIT)
    assert not thread.is_alive() and workers._idle == 0


def test_a_sync_callable_sends_through_its_own_client_in_worker_threads() -> None:
    embedder = Embedder(settings=vt.ClientSettings("http://127.0.0.1:9"))
    try:
        (replica,) = embedder._replicas()
        assert isinstance(replica.client, ThreadedClient) and replica.client.client is embedder._client
    finally:
        embedder.close()
