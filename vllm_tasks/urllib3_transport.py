"""``Urllib3Transport``: an ``httpx`` transport over urllib3 v2's connection pool.

httpx's default transport parses HTTP in pure Python (httpcore over h11, which checks every header value
with a regular expression), and its pool costs threads more the more of them share it. urllib3 reads
answers through the standard library's ``http.client`` and is the most widely installed HTTP library
there is (``requests`` and ``botocore`` stand on it). Over it the sync client embeds more vectors per
second at less CPU per vector than over httpx's transport, most at concurrency 4 and 16; one request at a
time it costs about as much CPU as httpx's (benchmarks/embed_throughput.py). Everything above the
transport (auth, headers, cookies, redirects, event hooks, decompression) is still httpx's.

``Client``'s default where urllib3 is installed (``transport="auto"``, see
:class:`~vllm_tasks.ClientSettings`). HTTP/1.1 only; no proxies (the client keeps httpx's transport where
the environment names one).
"""

from __future__ import annotations

import ssl
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx

from .dependencies import require

if TYPE_CHECKING:
    import urllib3

READ_SIZE = 1 << 20
"""The most bytes one read of a response body asks for."""

MAX_HOSTS = 32
"""Hosts whose connections are kept (the vLLM server, the hosts of fetched media URLs): the least recently
used one's are closed past it."""

MAX_CONNECTIONS = 100
"""Connections per host at most, as httpx's default ``Limits``; a request waits (its ``pool`` timeout)
for one to come free."""


class Urllib3Transport(httpx.BaseTransport):
    """An httpx transport that sends with urllib3's connection pool.

    Args:
        verify: for ``https://``: ``True`` (httpx's default certificates: ``SSL_CERT_FILE`` /
            ``SSL_CERT_DIR`` when set, else certifi's), ``False`` (no check), or your ``ssl.SSLContext``
            (client certificates, a private CA).
        max_connections: connections per host at most (kept open for reuse while idle).

    Raises:
        MissingDependency: urllib3 is not installed (``pip install 'vllm-tasks[fast]'``).

    Examples:
        >>> import httpx, vllm_tasks as vt
        >>> http = httpx.Client(transport=vt.Urllib3Transport(verify=my_ssl_context), timeout=600)
        >>> client = vt.Client("https://vllm.internal", http_client=http)
    """

    def __init__(
        self, *, verify: bool | ssl.SSLContext = True, max_connections: int = MAX_CONNECTIONS
    ) -> None:
        lib = require("urllib3", "fast", "Urllib3Transport")
        self._lib, self._exceptions, self._timeout_type = lib, lib.exceptions, lib.Timeout
        self._ssl = verify if isinstance(verify, ssl.SSLContext) else httpx.create_ssl_context(verify=verify)
        self._max_connections = max_connections
        self._pools: OrderedDict[tuple[str, str, int, str | None], urllib3.HTTPConnectionPool] = OrderedDict()
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` and return its response, the body still to read (``httpx.Client`` reads it)."""
        timeouts = request.extensions.get("timeout", {})
        pool = self._pool(request)
        url = request.url
        target = url.raw_path.decode("ascii")
        headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in request.headers.raw]
        try:
            response = pool.urlopen(
                request.method,
                target,
                body=request.read(),
                headers=_Headers(headers),
                retries=False,
                redirect=False,
                assert_same_host=False,
                timeout=self._timeout_type(connect=timeouts.get("connect"), read=timeouts.get("read")),
                pool_timeout=timeouts.get("pool"),
                preload_content=False,
                decode_content=False,
            )
        except Exception as error:
            raise _mapped(self._exceptions, error, sending=True) from error
        return httpx.Response(
            status_code=response.status,
            headers=[
                (name.encode("latin-1"), value.encode("latin-1")) for name, value in response.headers.items()
            ],
            stream=_Body(self._exceptions, response),
            extensions={
                "http_version": b"HTTP/1.1",
                "reason_phrase": (response.reason or "").encode("latin-1"),
            },
        )

    def close(self) -> None:
        """Close every connection (httpx.Client.close() calls it)."""
        with self._lock:
            pools = list(self._pools.values())
            self._pools.clear()
        for pool in pools:
            pool.close()

    def _pool(self, request: httpx.Request) -> urllib3.HTTPConnectionPool:
        """The pool of the request's host (made on first use; the least recently used one past
        :data:`MAX_HOSTS` is closed)."""
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"Urllib3Transport sends http:// and https://, not {url}")
        # A request sent to a checked address of a host (a third-party fetch) names the host for TLS.
        sni = request.extensions.get("sni_hostname")
        key = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80), sni)
        evicted = None
        with self._lock:
            pool = self._pools.get(key)
            if pool is None:
                pool = self._pools[key] = self._new_pool(*key)
                if len(self._pools) > MAX_HOSTS:
                    evicted = self._pools.popitem(last=False)[1]
            else:
                self._pools.move_to_end(key)
        if evicted is not None:
            evicted.close()  # its connections in use are closed as they come back
        return pool

    def _new_pool(self, scheme: str, host: str, port: int, sni: str | None) -> urllib3.HTTPConnectionPool:
        options: dict[str, Any] = {"maxsize": self._max_connections, "block": True, "retries": False}
        if scheme == "http":
            return self._lib.HTTPConnectionPool(host, port, **options)  # type: ignore[no-any-return]
        if sni:
            options.update(server_hostname=sni, assert_hostname=sni)
        return self._lib.HTTPSConnectionPool(host, port, ssl_context=self._ssl, **options)  # type: ignore[no-any-return]


def _mapped(exceptions: Any, error: Exception, *, sending: bool) -> Exception:
    """The httpx error for a urllib3 one (anything else, a bug, unchanged)."""
    detail = f"{type(error).__name__}: {error}"
    # urllib3's NewConnectionError (refused, no such host) is a ConnectTimeoutError too, for history's sake.
    if isinstance(error, exceptions.NewConnectionError | exceptions.SSLError | exceptions.LocationValueError):
        return httpx.ConnectError(detail)
    if isinstance(error, exceptions.ConnectTimeoutError):
        return httpx.ConnectTimeout(detail)
    if isinstance(error, exceptions.EmptyPoolError):
        return httpx.PoolTimeout(detail)
    if isinstance(error, exceptions.ReadTimeoutError | TimeoutError):
        return httpx.ReadTimeout(detail)
    if sending and isinstance(error, ValueError):  # http.client refuses a line break in a header value
        return httpx.LocalProtocolError(detail)
    if isinstance(error, exceptions.ProtocolError | exceptions.HTTPError | OSError):
        cause = (
            error.args[1] if isinstance(error, exceptions.ProtocolError) and len(error.args) > 1 else error
        )
        if sending and isinstance(cause, BrokenPipeError):
            return httpx.WriteError(detail)
        if isinstance(cause, OSError) and not isinstance(cause, exceptions.HTTPError):
            return httpx.ReadError(detail)
        return httpx.RemoteProtocolError(detail)
    return error


class _Headers(dict[str, str]):
    """Request headers in httpx's order, repeated names kept (urllib3 sends ``items()`` as they come)."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        super().__init__(pairs)
        self._pairs = pairs

    def items(self) -> Any:
        return self._pairs


class _Body(httpx.SyncByteStream):
    """A response body read as it arrives; the connection goes back to the pool once it was read to its
    end (closed first when the body is left unread or breaks)."""

    def __init__(self, exceptions: Any, response: urllib3.BaseHTTPResponse) -> None:
        self._exceptions, self._response = exceptions, response

    def __iter__(self) -> Iterator[bytes]:
        response = self._response
        try:
            while chunk := response.read1(READ_SIZE, decode_content=False):
                yield chunk
        except Exception as error:
            self.close()
            raise _mapped(self._exceptions, error, sending=False) from error
        response.release_conn()

    def close(self) -> None:
        response = self._response
        if response.connection is not None:
            response.close()
            response.release_conn()
