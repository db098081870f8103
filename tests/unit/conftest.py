"""Unit-test helpers: run every client test against both ``Client`` and ``AsyncClient``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import vllm_tasks as vt
from vllm_tasks import transport

from ..clients import AsyncAsSync

BASE = "http://vllm.test:8000"


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record retry/poll sleeps instead of sleeping."""
    slept: list[float] = []

    async def fake_async_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(transport, "sync_sleep", slept.append)
    monkeypatch.setattr(transport, "async_sleep", fake_async_sleep)
    return slept


@pytest.fixture(params=["sync", "async"])
def make_client(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Factory for a client of each kind; the async one is wrapped to be called synchronously."""
    made: list[Any] = []

    def factory(base_url: str = BASE, **kwargs: Any) -> Any:
        kwargs.setdefault("max_retries", 0)
        if request.param == "sync":
            client: Any = vt.Client(base_url, **kwargs)
        else:
            client = AsyncAsSync(vt.AsyncClient(base_url, **kwargs))
        made.append(client)
        return client

    yield factory
    for client in made:
        client.close()
