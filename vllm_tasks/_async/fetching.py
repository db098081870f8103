"""Downloading user-given inputs (image and audio URLs) client-side, within the client's ``FetchLimits``.

Redirects are followed hop by hop (each target checked), the body is read within the size cap, and the
whole download, name resolution included, ends at the deadline (the backend's ``run_within``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any, TypeVar, cast

import httpx

from .. import defaults
from .._backends import DeadlinePassed
from ..calls import TimeoutLike
from ..errors import APIConnectionError, FetchKind, InputFetchError
from ..fetching import (
    REOPENS,
    CappedBody,
    checked_for_another_name,
    host_and_port,
    next_hop,
    past_deadline,
    public_addresses,
    remote_media,
    undecodable,
    unresolvable,
    with_media_urls,
)
from ..images import image_to_data_url
from ..offload import async_offload
from ..transport import connection_error, headerless
from .transport import AsyncTransport

T = TypeVar("T")


async def fetch_input(
    transport: AsyncTransport,
    url: str,
    *,
    field: str,
    kind: FetchKind = "url_fetch",
    timeout: TimeoutLike = None,
) -> bytes:
    """GET a user-given URL without the client's API key or headers; the body's bytes.

    Args:
        transport: the client's transport.
        url: an absolute ``http(s)`` URL.
        field: the argument it came from, for the error message.
        kind: the ``kind`` of the :class:`~vllm_tasks.InputFetchError` raised (``"image_fetch"``,
            ``"audio_fetch"``).
        timeout: seconds per read; a call's numeric timeout applies, anything else gives
            ``defaults.FETCH_TIMEOUT``. The whole download is bounded by the client's ``fetch_limits``
            (:class:`~vllm_tasks.config.FetchLimits`: size cap, overall deadline, private addresses).

    Raises:
        InputFetchError: (of ``kind``) the host cannot be reached, answers other than 200, or
            a fetch limit was passed (the reason names it).
    """
    seconds = timeout if isinstance(timeout, int | float) else defaults.FETCH_TIMEOUT
    try:
        response = await fetch_url(transport, url, timeout=float(seconds))
    except InputFetchError as failure:
        raise InputFetchError(field, url, failure.reason, kind=kind) from None
    except APIConnectionError as failure:
        raise InputFetchError(field, url, failure.message, kind=kind) from failure
    if response.status_code != 200:
        raise InputFetchError(field, url, f"the host answered HTTP {response.status_code}", kind=kind)
    return response.content


async def media_inputs(transport: AsyncTransport, field: str, convert: Callable[..., T], *args: Any) -> T:
    """``convert(*args)``: the caller's inputs as the server takes them, run in a worker thread (it reads
    image files), then :func:`fetched_media` (``field``: the argument they came from, for messages)."""
    return await fetched_media(transport, await async_offload(convert, *args), field)


async def fetched_media(transport: AsyncTransport, value: T, field: str) -> T:
    """``value`` (prompts or scoring inputs as the server takes them) with the ``http(s)`` URL of each of
    its image parts fetched by the client, within ``FetchLimits``, and put in as a ``data:`` URL, when
    ``FetchLimits.refuse_private`` is on: the server would fetch them unchecked. Else ``value`` itself.

    Raises:
        InputFetchError: ``kind="image_fetch"``: an image URL refused or not fetched (:func:`fetch_input`);
            ``kind="url_fetch"``: an audio or video URL, which only the server fetches.
        InvalidInputError: ``kind="image_decode"``: a fetched body that is not an image.
    """
    if not transport.settings.fetch_limits.refuse_private:
        return value
    found = remote_media(value, field)
    urls: dict[str, str] = {}
    for url, (where, part) in found.items():
        if part != "image_url":
            reason = (
                f"an {part} part is fetched by the server, which FetchLimits(refuse_private=True) cannot "
                "check; the client fetches image URLs only"
            )
            raise InputFetchError(where, url, reason)
        data = await fetch_input(transport, url, field=where, kind="image_fetch")
        urls[url] = await async_offload(image_to_data_url, data, field=where)
    return cast("T", with_media_urls(value, urls)) if urls else value


async def fetch_url(transport: AsyncTransport, url: str, *, timeout: float) -> httpx.Response:
    """GET a user-given absolute URL (an image or audio file), following redirects, one attempt.

    None of the client's headers, API key, auth or cookies are sent (to the first host or any it
    redirects to). ``timeout`` bounds each read; :class:`~vllm_tasks.config.FetchLimits` bound the whole
    download (size, deadline) and, opted in, refuse private addresses. An error status is returned as is
    (its body read within the same limits).

    Raises:
        InputFetchError: (``field="url"``) a limit was passed or an address refused.
        APIConnectionError: the host cannot be reached or the connection broke.
    """
    seconds = transport.settings.fetch_limits.deadline
    deadline = time.monotonic() + seconds
    try:
        return await transport.backend.run_within(
            seconds, lambda: _follow_redirects(transport, url, timeout, deadline)
        )
    except DeadlinePassed:
        raise past_deadline(url, seconds) from None


async def _follow_redirects(
    transport: AsyncTransport, url: str, timeout: float, deadline: float
) -> httpx.Response:
    limits = transport.settings.fetch_limits
    target = url
    for hops in range(limits.max_redirects + 1):
        addresses = await _checked_addresses(transport, url, target) if limits.refuse_private else [None]
        response = await _get_once(transport, url, target, addresses, timeout=timeout, deadline=deadline)
        if not response.has_redirect_location:
            return response
        target = next_hop(url, target, response, hops, limits.max_redirects)
    raise AssertionError("unreachable")  # pragma: no cover (next_hop raises past the limit)


async def _checked_addresses(transport: AsyncTransport, url: str, target: str) -> list[str]:
    """The addresses of ``target``'s host, looked up once and each checked (``FetchLimits.refuse_private``):
    the GET connects to one of them, never to what a second lookup would answer (DNS rebinding)."""
    host, port = host_and_port(url, target)
    try:
        infos = await transport.backend.resolve(host, port)
    except OSError as error:
        raise unresolvable(url, host, error) from None
    return public_addresses(url, host, infos)


async def _get_once(
    transport: AsyncTransport,
    url: str,
    target: str,
    addresses: Sequence[str | None],
    *,
    timeout: float,
    deadline: float,
) -> httpx.Response:
    """One GET, streamed: a redirect is returned unread; any other body is read within the limits."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise past_deadline(url, transport.settings.fetch_limits.deadline)
    # Each read waits at most the time left: work given up on at the deadline ends soon after it.
    response = await _open(transport, target, addresses, min(timeout, remaining))
    try:
        if response.has_redirect_location:
            return response
        body = CappedBody(url, transport.settings.fetch_limits.max_bytes, response)
        chunks = cast("AsyncGenerator[bytes, None]", response.aiter_bytes())  # closed on any exit
        async with contextlib.aclosing(chunks):
            async for chunk in chunks:
                transport.backend.check_cancelled()
                body.add(chunk)
        return body.response()
    except httpx.TransportError as error:
        raise connection_error("GET", target, error) from headerless(error)
    except httpx.DecodingError as error:
        raise undecodable(url, error) from None
    finally:
        await response.aclose()


async def _open(
    transport: AsyncTransport, target: str, addresses: Sequence[str | None], timeout: float
) -> httpx.Response:
    """Start the GET on the first of ``addresses`` that takes the connection, as a client resolving the
    name itself would (an IPv6 address first that does not route, say). ``None``: httpx looks the host up.
    """
    for address in addresses[:-1]:
        try:
            return await _open_checked(transport, target, address, timeout)
        except APIConnectionError as failure:
            if not isinstance(failure.__cause__, httpx.ConnectError | httpx.ConnectTimeout):
                raise
    return await _open_checked(transport, target, addresses[-1], timeout)


async def _open_checked(
    transport: AsyncTransport, target: str, address: str | None, timeout: float
) -> httpx.Response:
    """Start the GET on a connection whose certificate was checked for ``target``'s host: one the pool
    kept for another name at the same address is dropped (closed unread, httpcore closes it) and the GET
    sent again, on another connection."""
    for _ in range(REOPENS):
        response = await transport.open_third_party(target, timeout, address)
        if not checked_for_another_name(response):
            return response
        await response.aclose()
    raise InputFetchError(
        "url", target, f"no connection to {address} checked for its host name in {REOPENS} tries"
    )
