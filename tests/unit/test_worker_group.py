"""The sync client's worker threads (``_backends.WorkerGroup``, issue 25): kept between calls, ended by
``close()``, errors and order as before, nothing left running after a failure or Ctrl-C.

Requests are answered by ``httpx.MockTransport`` callbacks; waits are on events, never on durations.
"""

from __future__ import annotations

import gc
import json
import signal
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import vllm_tasks as vt
from vllm_tasks._backends import IDLE_THREAD_NAME, WorkerGroup
from vllm_tasks._sync.transport import SyncTransport
from vllm_tasks.config import ClientSettings
from vllm_tasks.transport import Request

from .conftest import BASE
from .test_transport import _blocking_transport, _BlockingServer, sigint_raises  # noqa: F401 (a fixture)

Handler = Callable[[httpx.Request], httpx.Response]


def transport_for(handler: Handler) -> SyncTransport:
    settings = ClientSettings(BASE, timeout=30.0, max_retries=0)
    return SyncTransport(httpx.Client(transport=httpx.MockTransport(handler)), settings)


def echo(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json=json.loads(request.content))


def requests_for(count: int) -> list[Request]:
    return [Request("POST", "/v1/embeddings", json={"i": i}) for i in range(count)]


def ended(threads: list[threading.Thread]) -> bool:
    for thread in threads:
        thread.join(10)
    return not any(thread.is_alive() for thread in threads)


def transport_needing(width: int) -> tuple[SyncTransport, list[Request]]:
    """A transport, and ``width`` requests that wait for one another at the server: sending them at
    ``concurrency=width`` needs ``width`` threads at once (the others are answered at once)."""
    all_at_once = threading.Barrier(width)

    def handler(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content)["i"] >= 100:
            all_at_once.wait(30)
        return echo(request)

    return transport_for(handler), [Request("POST", "/", json={"i": 100 + i}) for i in range(width)]


def test_calls_reuse_the_same_threads() -> None:
    transport, wide = transport_needing(4)
    try:
        transport.send_all(wide, concurrency=4)
        first = set(transport.backend.workers.threads())
        assert len(first) == 4
        before = threading.active_count()
        for _ in range(5):
            answers = transport.send_all(requests_for(16), concurrency=4)
            assert [a.json()["i"] for a in answers] == list(range(16))
        assert set(transport.backend.workers.threads()) == first
        assert threading.active_count() == before
        assert all(thread.name == IDLE_THREAD_NAME for thread in first)
        transport.send_all(requests_for(16), concurrency=2)  # fewer: no thread more
        assert set(transport.backend.workers.threads()) == first
    finally:
        transport.backend.close(1.0)
        transport.http.close()


def test_a_larger_concurrency_adds_only_the_threads_missing() -> None:
    transport, wide = transport_needing(6)
    try:
        transport.send_all(requests_for(8), concurrency=2)
        two = set(transport.backend.workers.threads())
        transport.send_all(wide, concurrency=6)
        six = set(transport.backend.workers.threads())
        assert len(two) == 2 and two < six and len(six) == 6
    finally:
        transport.backend.close(1.0)
        transport.http.close()


def test_the_order_of_the_answers_is_the_order_of_the_requests() -> None:
    """Request 0 is answered last (it waits until every other one was answered)."""
    others_done = threading.Event()
    answered: list[int] = []
    lock = threading.Lock()

    def handler(request: httpx.Request) -> httpx.Response:
        index = json.loads(request.content)["i"]
        if index == 0:
            assert others_done.wait(30)
        with lock:
            answered.append(index)
            if len(answered) == 7:
                others_done.set()
        return echo(request)

    transport = transport_for(handler)
    try:
        answers = transport.send_all(requests_for(8), concurrency=4)
        assert answered[-1] == 0
        assert [a.json()["i"] for a in answers] == list(range(8))
    finally:
        transport.backend.close(1.0)
        transport.http.close()


def test_an_error_is_raised_in_the_caller_and_the_threads_serve_the_next_call() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content)["i"] == 5:
            return httpx.Response(400, json={"error": {"message": "bad input 5", "type": "BadRequestError"}})
        return echo(request)

    transport = transport_for(handler)
    try:
        with pytest.raises(vt.BadRequestError, match="bad input 5"):
            transport.send_all(requests_for(12), concurrency=4)
        assert transport.backend.workers.wait_quiet(30)
        threads = set(transport.backend.workers.threads())
        answers = transport.send_all(requests_for(4), concurrency=4)
        assert [a.json()["i"] for a in answers] == [0, 1, 2, 3]
        after = set(transport.backend.workers.threads())
        assert threads <= after and len(after) <= 4  # the failed call's threads, none beyond 4
    finally:
        transport.backend.close(1.0)
        transport.http.close()


def embed_on_threads(client: vt.Client) -> list[threading.Thread]:
    """Embed 64 texts at concurrency 4; the client's worker threads after it."""
    client.embed([f"text {i}" for i in range(64)], batch_size=4, concurrency=4, encoding_format="float")
    return client._transport.backend.workers.threads()


def test_closing_the_client_ends_its_threads(embed_replies: Handler) -> None:
    http = httpx.Client(transport=httpx.MockTransport(embed_replies))
    client = vt.Client(BASE, http_client=http)
    threads = embed_on_threads(client)
    assert 0 < len(threads) <= 4
    client.close()
    assert ended(threads)
    # a call after close() (the pool was the caller's) starts new threads, and close() ends them again
    again = embed_on_threads(client)
    assert again and not set(again) & set(threads)
    client.close()
    assert ended(again)
    http.close()


def test_a_client_garbage_collected_without_close_ends_its_threads(embed_replies: Handler) -> None:
    http = httpx.Client(transport=httpx.MockTransport(embed_replies))
    threads = embed_on_threads(vt.Client(BASE, http_client=http))
    gc.collect()
    assert ended(threads)
    http.close()


def test_one_client_shared_by_threads_gets_each_its_own_answers(embed_replies: Handler) -> None:
    http = httpx.Client(transport=httpx.MockTransport(embed_replies))
    client = vt.Client(BASE, http_client=http)
    texts = {name: [f"{name} {i}" for i in range(40)] for name in ("a", "b", "c")}
    results: dict[str, Any] = {}
    start = threading.Barrier(3)

    def call(name: str) -> None:
        start.wait(30)
        result = client.embed(texts[name], batch_size=4, concurrency=4, encoding_format="float")
        results[name] = result.vectors

    callers = [threading.Thread(target=call, args=(name,)) for name in texts]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(60)
    try:
        for name, vectors in results.items():
            assert vectors[:, 0].tolist() == [float(hash_text(text)) for text in texts[name]]
        assert len(results) == 3
        assert len(client._transport.backend.workers.threads()) <= 12
    finally:
        client.close()
        http.close()


@pytest.mark.usefixtures("sigint_raises")
def test_ctrl_c_leaves_no_thread_running_a_request_once_the_answers_are_in() -> None:
    server = _BlockingServer()
    transport = _blocking_transport(server)

    def press_ctrl_c() -> None:
        server.four_in_flight.wait(30)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            transport.send_all(requests_for(12), concurrency=4)
        server.release.set()  # the 4 in flight get their 503: not retried, the threads go idle
        assert transport.backend.workers.wait_quiet(30)
        threads = transport.backend.workers.threads()
        assert len(threads) == 4 and all(thread.name == IDLE_THREAD_NAME for thread in threads)
        transport.backend.close(1.0)
        assert ended(threads)
    finally:
        server.release.set()
        transport.http.close()


def test_an_idle_thread_ends_after_its_idle_time_and_a_new_job_starts_another() -> None:
    group = WorkerGroup(idle_seconds=0.01)
    ran_on: list[threading.Thread] = []
    for _ in range(2):
        done = threading.Event()
        job = lambda done=done: (ran_on.append(threading.current_thread()), done.set())  # noqa: E731
        group.run(job, "vllm-tasks-test")
        assert done.wait(30)
        assert ended(ran_on[-1:])
    assert ran_on[0] is not ran_on[1] and group.threads() == []
    group.close()


def test_a_job_that_raises_does_not_end_its_thread(caplog: pytest.LogCaptureFixture) -> None:
    group = WorkerGroup()
    try:

        def fail() -> None:
            raise RuntimeError("job failed")

        group.run(fail, "vllm-tasks-test")
        assert group.wait_quiet(30)
        [thread] = group.threads()
        done = threading.Event()
        group.run(done.set, "vllm-tasks-test")
        assert done.wait(30)
        assert group.threads() == [thread]
        assert "job failed" in caplog.text
    finally:
        group.close()


def test_jobs_run_in_their_callers_context() -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    group = WorkerGroup()
    seen: list[str] = []
    try:
        for value in ("first", "second"):
            var.set(value)
            done = threading.Event()
            group.run(lambda done=done: (seen.append(var.get()), done.set()), "vllm-tasks-test")
            assert done.wait(30)
        assert seen == ["first", "second"]
    finally:
        group.close()


def hash_text(text: str) -> int:
    return sum(text.encode()) % 997


@pytest.fixture
def embed_replies() -> Handler:
    """A vLLM 0.32-like server whose embedding of a text starts with ``hash_text(text)``."""

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/version":
            return httpx.Response(200, json={"version": "0.32.0"})
        if path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m", "max_model_len": 512}]})
        if path == "/openapi.json":
            return httpx.Response(404, json={"detail": "Not Found"})
        body = json.loads(request.content)
        data = [
            {"index": i, "object": "embedding", "embedding": [float(hash_text(text)), 1.0]}
            for i, text in enumerate(body["input"])
        ]
        return httpx.Response(200, json={"model": "m", "data": data, "usage": {"prompt_tokens": 1}})

    return handler
