"""``ThreadedClient``: a sync ``Client`` awaited from async code, each call in a worker thread.

Async code (a job's event loop, an adapter's async methods) given a ``Client`` that has its own
``http_client`` (a proxy, mTLS, auth hooks) cannot build an ``AsyncClient`` over it (an ``httpx.Client``
does not run on an event loop) and must not drop it: it awaits that very client's methods, each run in a
worker thread, so every request goes through the injected ``http_client``.

Each call has a daemon thread to itself while it runs (a :class:`~vllm_tasks._backends.WorkerGroup`,
kept between calls), not the loop's default executor (``asyncio.to_thread``): a call given up on (a hedged
request that lost, a request past the job's deadline, Ctrl-C) cannot be stopped in its thread, and
``asyncio.run`` waits for the default executor's threads before it returns, so a job that had cut off a
hung server would still wait for that server's timeout (600 s) to return. A thread whose call is done is
kept for the next one: starting a thread per request costs the client more CPU than the request itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from ._backends import WorkerGroup
from ._sync.client import Client

P = ParamSpec("P")
T = TypeVar("T")
_workers = WorkerGroup()
"""The threads every ``ThreadedClient`` call runs in, kept between calls."""


def _in_thread(
    method: Callable[Concatenate[Client, P], T],
) -> Callable[Concatenate[ThreadedClient, P], Coroutine[Any, Any, T]]:
    """``method`` of the wrapped ``Client``, awaited: the call runs in a worker thread."""

    async def call(self: ThreadedClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[T] = loop.create_future()

        def run() -> None:
            try:
                outcome: tuple[T | None, BaseException | None] = (method(self.client, *args, **kwargs), None)
            except BaseException as error:  # handed to the awaiting task
                outcome = (None, error)
            _hand_over(loop, answer, *outcome)

        _workers.run(run, f"vllm-tasks-{method.__name__}")
        return await answer

    call.__name__ = call.__qualname__ = method.__name__
    call.__doc__ = f"``Client.{method.__name__}`` of the wrapped client, run in a worker thread."
    return call


def _hand_over(
    loop: asyncio.AbstractEventLoop, answer: asyncio.Future[T], result: T | None, error: BaseException | None
) -> None:
    """Settle ``answer`` on its loop with ``result`` or ``error``, unless it was given up on (cancelled,
    or its loop has closed)."""

    def settle() -> None:
        if answer.done():
            return
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(cast(T, result))

    with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits for this answer
        loop.call_soon_threadsafe(settle)


class ThreadedClient:
    """The ``AsyncClient`` methods jobs and adapters call, served by a sync ``Client`` in worker threads.

    Args:
        client: the client every call goes to (its ``http_client``, settings, server info and usage).
    """

    def __init__(self, client: Client) -> None:
        self.client = client

    @property
    def base_url(self) -> str:
        """The wrapped client's URL, without credentials."""
        return self.client.base_url

    @property
    def model(self) -> str | None:
        """The wrapped client's model (``None``: the server's default)."""
        return self.client.model

    server_info = _in_thread(Client.server_info)
    embed = _in_thread(Client.embed)
    _embed_request = _in_thread(Client._embed_request)
    embed_sparse = _in_thread(Client.embed_sparse)
    _embed_sparse_request = _in_thread(Client._embed_sparse_request)
    pool = _in_thread(Client.pool)
    _pool_request = _in_thread(Client._pool_request)
    rerank = _in_thread(Client.rerank)
    score = _in_thread(Client.score)
    transcribe = _in_thread(Client.transcribe)
    translate = _in_thread(Client.translate)
    ocr = _in_thread(Client.ocr)
    ocr_pdf = _in_thread(Client.ocr_pdf)
    _ocr_page = _in_thread(Client._ocr_page)
    _engine_load = _in_thread(Client._engine_load)
