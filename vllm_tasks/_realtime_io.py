"""The WebSocket under ``transcribe_realtime``: one class for asyncio, one for threads (as ``_backends.py``).

``vllm_tasks/_async/realtime.py`` uses :class:`AsyncWebSocket` and :func:`async_pieces_of`;
``scripts/unasync.py`` turns them into :class:`SyncWebSocket` and :func:`sync_pieces_of` in the generated
``_sync/realtime.py``. Both classes wrap the ``websockets`` library (the ``realtime`` extra, imported when a
socket is opened) and raise nothing but the SDK's errors: a refused handshake as the HTTP routes' errors
(:func:`~vllm_tasks.realtime.handshake_error`), an unreachable server or a connection that breaks as
:class:`~vllm_tasks.errors.APIConnectionError` (:class:`~vllm_tasks.errors.APITimeoutError` when time ran
out). Nothing else in the package touches ``websockets``.

Environment proxies (``HTTPS_PROXY``, ``NO_PROXY``, ...) apply as they do to httpx; a redirect of the
handshake is followed only as ``websockets`` follows it, which never sends the ``Authorization`` header to
another origin.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .dependencies import require
from .errors import APIConnectionError, APIError, APITimeoutError, InvalidInputError, UnexpectedResponse
from .offload import async_offload
from .realtime import handshake_error

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The largest message accepted from the server (vLLM's events are small; uvicorn's own limit)."""

PURPOSE = "transcribe_realtime (the /v1/realtime WebSocket)"


@dataclass(frozen=True)
class Closed:
    """The server closed the session cleanly (a close frame): ``code`` and ``reason`` as it sent them."""

    code: int | None
    reason: str


Message = str | bytes | Closed | None
"""What ``receive`` gives: a message, :class:`Closed`, or ``None`` when none came in time."""


def _websockets() -> Any:
    return require("websockets", "realtime", PURPOSE)


def _open_error(error: BaseException, url: str) -> APIError:
    """The SDK error for a failed handshake."""
    exceptions = _websockets().exceptions
    http_url = url.replace("ws", "http", 1)
    if isinstance(error, exceptions.InvalidStatus):
        response = error.response
        return handshake_error(
            response.status_code, dict(response.headers.raw_items()), response.body or b"", url
        )
    if isinstance(error, TimeoutError):
        return APITimeoutError(f"opening the WebSocket timed out: {error}", method="GET", url=http_url)
    if isinstance(error, OSError | EOFError | exceptions.InvalidMessage | exceptions.ProxyError):
        return APIConnectionError(f"cannot open the WebSocket: {error}", method="GET", url=http_url)
    if isinstance(error, exceptions.ConnectionClosed):
        return APIConnectionError(f"the connection closed during the handshake: {error}", method="GET",
                                  url=http_url)  # fmt: skip
    return UnexpectedResponse(f"the WebSocket handshake failed: {error}", method="GET", url=http_url)


def _closed(error: BaseException, url: str) -> Closed | APIConnectionError:
    """A clean close as :class:`Closed`; anything else (a reset, no close frame, an error code) as an
    :class:`~vllm_tasks.errors.APIConnectionError`."""
    exceptions = _websockets().exceptions
    if isinstance(error, exceptions.ConnectionClosedOK):
        frame = error.rcvd
        return Closed(frame.code if frame else None, frame.reason if frame else "")
    return APIConnectionError(f"the WebSocket broke: {error}", method="GET", url=url.replace("ws", "http", 1))


def _closed_while_sending(closed: Closed, url: str) -> APIConnectionError:
    return APIConnectionError(
        f"the server closed the WebSocket (code {closed.code}) while audio was being sent",
        method="GET",
        url=url.replace("ws", "http", 1),
    )


class AsyncWebSocket:
    """An open WebSocket (asyncio). Make one with :meth:`open`."""

    def __init__(self, connection: Any, url: str) -> None:
        self.connection = connection
        self.url = url

    @classmethod
    async def open(
        cls, url: str, headers: Mapping[str, str], *, open_timeout: float | None, close_timeout: float | None
    ) -> AsyncWebSocket:
        """Connect and complete the handshake.

        Raises:
            MissingDependency: ``websockets`` is not installed (the ``realtime`` extra).
            APIError: the mapped failure (see the module's docstring).
        """
        client = require("websockets.asyncio.client", "realtime", PURPOSE)
        try:
            connection = await client.connect(
                url,
                additional_headers=dict(headers),
                user_agent_header=None,  # headers carry the SDK's User-Agent
                open_timeout=open_timeout,
                close_timeout=close_timeout,
                max_size=MAX_MESSAGE_BYTES,
                compression=None,
            )
        except Exception as error:  # websockets raises its own, OSError and TimeoutError
            failure = _open_error(error, url)
        else:
            return cls(connection, url)
        raise failure  # outside the except block: no __context__ holding the request's headers

    async def send(self, message: str) -> None:
        """Send a text message; waits while the library's write buffer is full (flow control).

        Raises:
            APIConnectionError: the connection is closed or broke.
        """
        try:
            await self.connection.send(message)
        except Exception as error:
            closed = _closed(error, self.url)
            failure = closed if isinstance(closed, APIError) else _closed_while_sending(closed, self.url)
        else:
            return
        raise failure

    async def receive(self, timeout: float | None) -> Message:
        """The next message; ``None`` when none came within ``timeout`` seconds (0: only one already
        received), :class:`Closed` after a clean close.

        Raises:
            APIConnectionError: the connection broke.
        """
        try:
            async with asyncio.timeout(timeout):
                message: str | bytes = await self.connection.recv()
        except TimeoutError:
            return None
        except Exception as error:
            closed = _closed(error, self.url)
            if isinstance(closed, Closed):
                return closed
            failure = closed
        else:
            return message
        raise failure

    async def close(self) -> None:
        """Close (the closing handshake within ``close_timeout``); safe to call twice, never raises."""
        with contextlib.suppress(Exception):
            await self.connection.close()


class SyncWebSocket:
    """An open WebSocket (threads: ``websockets.sync``). Make one with :meth:`open`."""

    def __init__(self, connection: Any, url: str) -> None:
        self.connection = connection
        self.url = url

    @classmethod
    def open(
        cls, url: str, headers: Mapping[str, str], *, open_timeout: float | None, close_timeout: float | None
    ) -> SyncWebSocket:
        """Connect and complete the handshake (see :meth:`AsyncWebSocket.open`)."""
        client = require("websockets.sync.client", "realtime", PURPOSE)
        try:
            connection = client.connect(
                url,
                additional_headers=dict(headers),
                user_agent_header=None,
                open_timeout=open_timeout,
                close_timeout=close_timeout,
                max_size=MAX_MESSAGE_BYTES,
                compression=None,
            )
            connection.__enter__()  # used as a context manager, as websockets >= 17.1 asks
        except Exception as error:
            failure = _open_error(error, url)
        else:
            return cls(connection, url)
        raise failure

    def send(self, message: str) -> None:
        """Send a text message (see :meth:`AsyncWebSocket.send`)."""
        try:
            self.connection.send(message)
        except Exception as error:
            closed = _closed(error, self.url)
            failure = closed if isinstance(closed, APIError) else _closed_while_sending(closed, self.url)
        else:
            return
        raise failure

    def receive(self, timeout: float | None) -> Message:
        """The next message (see :meth:`AsyncWebSocket.receive`)."""
        try:
            message: str | bytes = self.connection.recv(timeout)
        except TimeoutError:
            return None
        except Exception as error:
            closed = _closed(error, self.url)
            if isinstance(closed, Closed):
                return closed
            failure = closed
        else:
            return message
        raise failure

    def close(self) -> None:
        """Close (see :meth:`AsyncWebSocket.close`)."""
        with contextlib.suppress(Exception):
            self.connection.close()


async def async_pieces_of(pieces: Iterator[bytes] | AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The PCM pieces to send: an async source's as they come, a sync one's read in a worker thread (a
    file is decoded, a user's iterator may block on a microphone: the event loop keeps serving)."""
    if isinstance(pieces, AsyncIterator):
        async for piece in pieces:
            yield piece
        return
    while (read := await async_offload(_next_piece, pieces)) is not None:
        yield read


def _next_piece(pieces: Iterator[bytes]) -> bytes | None:
    return next(pieces, None)


def sync_pieces_of(pieces: Iterator[bytes] | AsyncIterator[bytes]) -> Iterator[bytes]:
    """The PCM pieces to send (the sync twin of :func:`async_pieces_of`).

    Raises:
        InvalidInputError: an async iterable of chunks (use ``AsyncClient``).
    """
    if isinstance(pieces, AsyncIterator):
        raise InvalidInputError(
            "source",
            "<async iterable>",
            "is an async iterable of chunks, which the sync Client cannot read",
            "Pass a plain iterable, or use vllm_tasks.AsyncClient.",
        )
    return pieces
