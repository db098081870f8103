"""Test helpers shared by the unit and integration tests: every client test runs on both clients."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from typing import Any

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


def scorer_kind_on(vllm_version: str, kind: vt.ScorerKind) -> vt.ScorerKind:
    """The scorer kind the SDK reports for a ``kind`` model on ``vllm_version``: ``UNKNOWN`` on 0.11, whose
    /pooling answers hidden states for every model and task (docs/compatibility.md)."""
    return kind if vt.ServerVersion.parse(vllm_version).at_least("0.12.0") else vt.ScorerKind.UNKNOWN
