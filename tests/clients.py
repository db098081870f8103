"""Test helpers shared by the unit and integration tests: every client test runs on both clients."""

from __future__ import annotations

import asyncio
import inspect
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
