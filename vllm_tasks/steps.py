"""The steps an operation asks its client to perform.

Operations (``vllm_tasks.operations``) are generators: they build requests, ``yield`` steps, receive the
results and return a typed result. They hold all of the logic and do no I/O, so the sync ``Client`` and
the ``AsyncClient`` run exactly the same code and differ only in how they perform a step.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from .tasks import TaskName

T = TypeVar("T")

TimeoutLike = float | httpx.Timeout | None


class _ClientDefault:
    def __repr__(self) -> str:
        return "CLIENT_DEFAULT"


CLIENT_DEFAULT: Any = _ClientDefault()
"""Marks a per-call argument (e.g. ``timeout``) that falls back to the client's setting."""


@dataclass(frozen=True)
class Request:
    """One HTTP request; performing it returns the ``httpx.Response`` (body read).

    An error status raises the mapped :class:`~vllm_tasks.errors.APIStatusError` into the operation,
    unless ``raise_for_status`` is False. ``retry=False`` makes a single attempt.
    """

    method: str
    path: str
    json: Any = None
    data: Mapping[str, Any] | None = None
    files: Any = None
    params: Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = None
    timeout: TimeoutLike = CLIENT_DEFAULT
    task: TaskName | None = None
    raise_for_status: bool = True
    retry: bool = True


@dataclass(frozen=True)
class Parallel:
    """Several requests sent with at most ``concurrency`` in flight; returns the responses in order.

    ``on_response(index, response)`` is called as each one completes (progress bars).
    """

    requests: Sequence[Request]
    concurrency: int
    on_response: Callable[[int, httpx.Response], None] | None = None


@dataclass(frozen=True)
class Stream:
    """Send ``request`` and read its body as it arrives (server-sent events).

    Performing it returns a line iterator (an async one on ``AsyncClient``) over the body, which the
    caller must exhaust or close; the operation returns it to the client method that iterates it. An
    error status is read in full and raised (mapped) into the operation like a ``Request``'s. Sent once,
    without retries: a retry after output began would repeat it.
    """

    request: Request


@dataclass(frozen=True)
class Sleep:
    """Wait ``seconds`` (``time.sleep`` or ``asyncio.sleep``)."""

    seconds: float


@dataclass(frozen=True)
class GetServerInfo:
    """Returns the client's cached :class:`~vllm_tasks.types.ServerInfo` (fetched on first use)."""

    refresh: bool = False


@dataclass(frozen=True)
class Fetch:
    """GET an absolute URL on a third-party host (e.g. an image to upload); returns the ``httpx.Response``.

    Sent without the client's headers and API key, following redirects, with a single attempt; a
    connection failure raises :class:`~vllm_tasks.errors.APIConnectionError` into the operation, an error
    status is returned as is (the operation decides).
    """

    url: str
    timeout: float = 30.0


Step = Request | Parallel | Sleep | GetServerInfo | Fetch | Stream
Operation = Generator[Step, Any, T]
