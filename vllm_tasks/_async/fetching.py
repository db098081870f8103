"""Downloading user-given inputs (image and audio URLs) client-side, through the transport's ``fetch``."""

from __future__ import annotations

from .. import defaults
from ..calls import TimeoutLike
from ..errors import APIConnectionError, InputFetchError
from ..transport import AsyncTransport


async def fetch_input(
    transport: AsyncTransport,
    url: str,
    *,
    field: str,
    error: type[InputFetchError] = InputFetchError,
    timeout: TimeoutLike = None,
) -> bytes:
    """GET a user-given URL without the client's API key or headers; the body's bytes.

    Args:
        transport: the client's transport.
        url: an absolute ``http(s)`` URL.
        field: the argument it came from, for the error message.
        error: the ``InputFetchError`` subclass to raise (``ImageFetchError``, ``AudioFetchError``).
        timeout: seconds per read; a call's numeric timeout applies, anything else gives
            ``defaults.FETCH_TIMEOUT``. The whole download is bounded by the client's ``fetch_limits``
            (:class:`~vllm_tasks.transport.FetchLimits`: size cap, overall deadline, private addresses).

    Raises:
        InputFetchError: (the ``error`` class) the host cannot be reached, answers other than 200, or
            a fetch limit was passed (the reason names it).
    """
    seconds = timeout if isinstance(timeout, int | float) else defaults.FETCH_TIMEOUT
    try:
        response = await transport.fetch(url, timeout=float(seconds))
    except InputFetchError as failure:
        raise error(field, url, failure.reason) from None
    except APIConnectionError as failure:
        raise error(field, url, failure.message) from failure
    if response.status_code != 200:
        raise error(field, url, f"the host answered HTTP {response.status_code}")
    return response.content
