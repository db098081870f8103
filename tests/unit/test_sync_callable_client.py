"""The sync dataframe callables (``Embedder``, ``Scorer``, ``Transcriber``, ``OCR``) send through their
own ``Client`` (its urllib3 transport, usage and server info), each request in one of the worker threads
``ThreadedClient`` keeps between calls."""

from __future__ import annotations

import asyncio
import threading

import vllm_tasks as vt
from vllm_tasks import threaded
from vllm_tasks._backends import WorkerGroup
from vllm_tasks.integrations.ray import Embedder
from vllm_tasks.threaded import ThreadedClient


def test_a_sync_callable_sends_through_its_own_client_in_worker_threads() -> None:
    embedder = Embedder(settings=vt.ClientSettings("http://127.0.0.1:9"))
    try:
        (replica,) = embedder._replicas()
        assert isinstance(replica.client, ThreadedClient) and replica.client.client is embedder._client
    finally:
        embedder.close()


def test_threaded_calls_run_in_threads_kept_between_calls() -> None:
    assert isinstance(threaded._workers, WorkerGroup)
    names: list[str] = []
    client = ThreadedClient(vt.Client("http://127.0.0.1:9"))
    try:
        with_name = threaded._in_thread(lambda _client: names.append(threading.current_thread().name))
        asyncio.run(with_name(client))  # type: ignore[arg-type]
        assert names == ["vllm-tasks-<lambda>"]
        assert any(thread in threaded._workers.threads() for thread in threading.enumerate())
    finally:
        client.client.close()
