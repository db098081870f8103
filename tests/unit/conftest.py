"""Unit-test helpers: run every client test against both ``Client`` and ``AsyncClient``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from vllm_tasks._backends import AsyncBackend, SyncBackend

from ..clients import client_factory

BASE = "http://vllm.test:8000"


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record retry/poll sleeps instead of sleeping."""
    slept: list[float] = []

    def fake_sleep(_backend: SyncBackend, seconds: float) -> None:
        slept.append(seconds)

    async def fake_async_sleep(_backend: AsyncBackend, seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(SyncBackend, "sleep", fake_sleep)
    monkeypatch.setattr(AsyncBackend, "sleep", fake_async_sleep)
    return slept


@pytest.fixture(params=["sync", "async"])
def make_client(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Factory for a client of each kind; the async one is wrapped to be called synchronously."""
    yield from client_factory(request.param, BASE)
