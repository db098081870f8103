"""Unit-test helpers: run every client test against both ``Client`` and ``AsyncClient``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from vllm_tasks import transport

from ..clients import client_factory

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
    yield from client_factory(request.param, BASE)
