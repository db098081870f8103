"""``AiohttpTransport``: an ``httpx`` async transport over aiohttp's client session, measured by
benchmarks/embed_throughput.py as the candidate for ``AsyncClient``'s default (not shipped in the SDK).

httpx's default async transport parses HTTP in pure Python (httpcore over h11); aiohttp parses it in C
(its llhttp-based parser) and is the most used asyncio HTTP client. Everything above the transport (auth,
headers, cookies, redirects, event hooks, decompression) stays httpx's: aiohttp sends the headers httpx
built, adds none, follows no redirect, keeps no cookie and decodes no body.

Why it is not the default: one difference from httpx's transport. When a connection breaks in the middle
of a body, the bytes that arrived just before the break may be dropped (aiohttp's ``StreamReader`` raises
its stored error before it hands out what it holds), so a ``transcribe_stream`` that breaks can lose its
last events before the error (tests/component/test_stream_retries.py
``test_a_stream_that_breaks_after_the_first_delta_is_not_retried`` fails over it). HTTP/1.1 only; no
proxies. Its session belongs to the event loop of its first request.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import httpx

from vllm_tasks.dependencies import require

if TYPE_CHECKING:
    import aiohttp

MAX_CONNECTIONS = 100
"""Connections per host at most, as httpx's default ``Limits``; a request waits (its ``pool`` timeout)
for one to come free."""

KEEPALIVE_SECONDS = 5.0
"""How long an idle connection is kept, as httpx's default ``keepalive_expiry``."""

READ_SIZE = 1 << 20
"""The most bytes one read of a response body returns."""


class AiohttpTransport(httpx.AsyncBaseTransport):
    """An httpx async transport that sends with an ``aiohttp.ClientSession``.

    Args:
        verify: for ``https://``: ``True`` (httpx's default certificates: ``SSL_CERT_FILE`` /
            ``SSL_CERT_DIR`` when set, else certifi's), ``False`` (no check), or your ``ssl.SSLContext``
            (client certificates, a private CA).
        max_connections: connections per host at most (kept open for reuse while idle).

    Raises:
        MissingDependency: aiohttp is not installed.

    Examples:
        >>> http = httpx.AsyncClient(transport=AiohttpTransport(), timeout=600)
        >>> client = vt.AsyncClient("http://localhost:8000", http_client=http)
    """

    def __init__(
        self, *, verify: bool | ssl.SSLContext = True, max_connections: int = MAX_CONNECTIONS
    ) -> None:
        self._aiohttp = require("aiohttp", "bench", "AiohttpTransport")
        self._ssl = verify if isinstance(verify, ssl.SSLContext) else httpx.create_ssl_context(verify=verify)
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._timeouts: dict[tuple[float | None, ...], aiohttp.ClientTimeout] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` and return its response, the body still to read (``httpx.AsyncClient``
        reads it)."""
        aiohttp = self._aiohttp
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"AiohttpTransport sends http:// and https://, not {url}")
        body = await request.aread()
        try:
            response = await self._session_now().request(
                request.method,
                aiohttp.client.URL(str(url), encoded=True),
                data=body or None,
                headers=[
                    (name.decode("latin-1"), value.decode("latin-1")) for name, value in request.headers.raw
                ],
                allow_redirects=False,
                timeout=self._timeout(request.extensions.get("timeout", {})),
                server_hostname=request.extensions.get("sni_hostname"),
            )
        except Exception as error:
            raise self._mapped(error) from error
        return httpx.Response(
            status_code=response.status,
            headers=list(response.raw_headers),
            stream=_Body(self, response),
            extensions={
                "http_version": b"HTTP/1.1",
                "reason_phrase": (response.reason or "").encode("latin-1"),
            },
        )

    async def aclose(self) -> None:
        """Close every connection (httpx.AsyncClient.aclose() calls it)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _session_now(self) -> aiohttp.ClientSession:
        # Made at the first request: an aiohttp session belongs to the loop running when it is made.
        if self._session is None:
            aiohttp = self._aiohttp
            connector = aiohttp.TCPConnector(
                limit=0,
                limit_per_host=self._max_connections,
                ssl=self._ssl,
                keepalive_timeout=KEEPALIVE_SECONDS,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=False,
                trust_env=False,
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
                timeout=aiohttp.ClientTimeout(total=None),
            )
        return self._session

    def _timeout(self, timeouts: dict[str, float | None]) -> aiohttp.ClientTimeout:
        key = (timeouts.get("pool"), timeouts.get("connect"), timeouts.get("read"))
        timeout = self._timeouts.get(key)
        if timeout is None:
            pool, connect, read = key
            timeout = self._timeouts[key] = self._aiohttp.ClientTimeout(
                total=None, connect=pool, sock_connect=connect, sock_read=read
            )
        return timeout

    def _mapped(self, error: Exception) -> Exception:
        """The httpx error for an aiohttp one (anything else, a bug, unchanged)."""
        aiohttp, detail = self._aiohttp, f"{type(error).__name__}: {error}"
        if isinstance(error, aiohttp.ConnectionTimeoutError):
            return httpx.ConnectTimeout(detail)
        if isinstance(error, TimeoutError):  # SocketTimeoutError and asyncio's
            return httpx.ReadTimeout(detail)
        if isinstance(error, aiohttp.ClientConnectorError):
            return httpx.ConnectError(detail)
        if isinstance(error, aiohttp.InvalidURL):
            return httpx.UnsupportedProtocol(detail)
        if isinstance(error, aiohttp.ClientOSError):
            return httpx.ReadError(detail)
        if isinstance(error, aiohttp.ClientError):  # a broken answer or body, a server that hung up
            return httpx.RemoteProtocolError(detail)
        return error


class _Body(httpx.AsyncByteStream):
    """A response body read as it arrives; the connection goes back to the pool once it was read to its
    end (closed when the body is left unread or breaks)."""

    def __init__(self, transport: AiohttpTransport, response: aiohttp.ClientResponse) -> None:
        self._transport, self._response = transport, response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_chunked(READ_SIZE):
                yield chunk
        except Exception as error:
            self._response.close()
            raise self._transport._mapped(error) from error
        self._response.release()

    async def aclose(self) -> None:
        self._response.release()  # closes the connection unless the body was read to its end
