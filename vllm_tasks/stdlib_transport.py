"""``StdlibHTTPTransport``: an ``httpx`` transport over the standard library's ``http.client``.

httpx's default transport parses HTTP in pure Python (httpcore over h11, which checks every header value
with a regular expression): about 0.8 ms of CPU per ``/v1/embeddings`` answer of 64 rows, most of a
client's cost when the server answers in milliseconds. ``http.client`` reads the same answer in about
0.2 ms (benchmarks/embed_throughput.py, docs/embeddings.md "Throughput"). Plug it into the ``httpx.Client``
you pass as ``http_client``; everything above the transport (auth, headers, cookies, redirects, event
hooks, decompression) is still httpx's.

HTTP/1.1 only, one request per connection at a time, idle connections kept per host for reuse. What it
does not do: proxies (from the environment or otherwise: use httpx's transport there), HTTP/2, and
headers over ``http.client``'s limits (a line over 64 KiB, more than 100 headers: a ``bytes`` answer of
more than about 550 rows), which raise ``httpx.RemoteProtocolError``.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
from collections.abc import Iterator

import httpx

from .errors import InvalidInputError

READ_SIZE = 1 << 20
"""The most bytes one read of a response body asks for."""


class StdlibHTTPTransport(httpx.BaseTransport):
    """An httpx transport that sends with ``http.client`` (C-accelerated buffered reads, no per-header
    regular expressions): several times less CPU per request than httpx's default transport.

    Args:
        verify: for ``https://``: ``True`` (the system's certificates), ``False`` (no check), or your
            ``ssl.SSLContext`` (client certificates, a private CA).
        max_idle_connections: idle connections kept per host (more are closed when they come back).

    Raises:
        InvalidInputError: ``max_idle_connections`` is not a positive integer.

    Examples:
        >>> import httpx, vllm_tasks as vt
        >>> http = httpx.Client(transport=vt.StdlibHTTPTransport(), timeout=600)
        >>> client = vt.Client("http://localhost:8000", http_client=http)
    """

    def __init__(self, *, verify: bool | ssl.SSLContext = True, max_idle_connections: int = 64) -> None:
        if isinstance(max_idle_connections, bool) or not isinstance(max_idle_connections, int):
            raise InvalidInputError(
                "max_idle_connections", max_idle_connections, "must be an integer", "For example 64."
            )
        if max_idle_connections < 1:
            raise InvalidInputError(
                "max_idle_connections", max_idle_connections, "must be at least 1", "For example 64."
            )
        if isinstance(verify, ssl.SSLContext):
            self._ssl = verify
        else:
            self._ssl = ssl.create_default_context()
            if not verify:
                self._ssl.check_hostname = False
                self._ssl.verify_mode = ssl.CERT_NONE
        self._max_idle = max_idle_connections
        self._idle: dict[tuple[str, str, int], list[socket.socket]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` and return its response, the body still to read (``httpx.Client`` reads it)."""
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"StdlibHTTPTransport sends http:// and https://, not {url}")
        key = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        timeouts = request.extensions.get("timeout", {})
        message = _request_head(request) + request.read()  # one write: no second packet to wait for
        reused = self._take_idle(key)
        sock = reused or self._connect(key, timeouts.get("connect"))
        try:
            response = _exchange(sock, request.method, message, timeouts)
        except _Failed as failed:
            sock.close()
            if reused is None or not isinstance(failed.error, _STALE):
                raise failed.mapped() from failed.error
            # A kept connection the server had closed meanwhile: once more on a new one (as httpcore).
            sock = self._connect(key, timeouts.get("connect"))
            try:
                response = _exchange(sock, request.method, message, timeouts)
            except _Failed as again:
                sock.close()
                raise again.mapped() from again.error
        # Header bytes as received (http.client decoded them as latin-1): httpx would encode str as ASCII.
        headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in response.msg.items()]
        return httpx.Response(
            status_code=response.status,
            headers=headers,
            stream=_Body(self, key, sock, response),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": response.reason.encode("latin-1")},
        )

    def close(self) -> None:
        """Close the idle connections (httpx.Client.close() calls it)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, {}
        for connections in idle.values():
            for sock in connections:
                sock.close()

    def _connect(self, key: tuple[str, str, int], timeout: float | None) -> socket.socket:
        scheme, host, port = key
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                sock = self._ssl.wrap_socket(sock, server_hostname=host)
        except TimeoutError as error:
            raise httpx.ConnectTimeout(str(error) or "timed out connecting") from error
        except OSError as error:
            raise httpx.ConnectError(f"{type(error).__name__}: {error}") from error
        return sock

    def _take_idle(self, key: tuple[str, str, int]) -> socket.socket | None:
        while True:
            with self._lock:
                idle = self._idle.get(key)
                sock = idle.pop() if idle else None
            if sock is None or _usable(sock):
                return sock
            sock.close()

    def _give_back(self, key: tuple[str, str, int], sock: socket.socket) -> None:
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if not self._closed and len(idle) < self._max_idle:
                idle.append(sock)
                return
        sock.close()


# A reused connection failing this way never reached the server's application: safe to send again.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


def _request_head(request: httpx.Request) -> bytes:
    """The request line and headers (httpx set ``Host`` and the body's length or chunking).

    Raises:
        httpx.LocalProtocolError: a header or the target holds a line break (a header injection).
    """
    method, target, raw = request.method.encode("ascii"), request.url.raw_path, request.headers.raw
    parts = b"".join([method, target, *(b"".join(pair) for pair in raw)])
    if b"\r" in parts or b"\n" in parts:
        raise httpx.LocalProtocolError("a line break inside a request header or target")
    lines = [b"%s %s HTTP/1.1" % (method, target), *(b"%s: %s" % pair for pair in raw)]
    return b"\r\n".join(lines) + b"\r\n\r\n"


class _Failed(Exception):
    """An exchange failed: the error, and whether it was writing or reading."""

    def __init__(self, error: Exception, phase: str) -> None:
        super().__init__(error, phase)
        self.error, self.phase = error, phase

    def mapped(self) -> httpx.TransportError:
        return _mapped(self.error, self.phase)


def _exchange(
    sock: socket.socket, method: str, message: bytes, timeouts: dict[str, float | None]
) -> http.client.HTTPResponse:
    """Write ``message`` (a whole request) and read the status line and headers of its response.

    Raises:
        _Failed: with the error and the phase it happened in.
    """
    phase = "write"
    try:
        sock.settimeout(timeouts.get("write"))
        sock.sendall(message)
        phase = "read"
        sock.settimeout(timeouts.get("read"))
        response = http.client.HTTPResponse(sock, method=method)
        response.begin()
    except Exception as error:
        raise _Failed(error, phase) from error
    return response


def _mapped(error: BaseException, phase: str) -> httpx.TransportError:
    if isinstance(error, TimeoutError):
        return (httpx.WriteTimeout if phase == "write" else httpx.ReadTimeout)(str(error) or "timed out")
    if isinstance(error, http.client.HTTPException):  # RemoteDisconnected, a bad status line, LineTooLong
        return httpx.RemoteProtocolError(f"{type(error).__name__}: {error}")
    if isinstance(error, OSError):
        return (httpx.WriteError if phase == "write" else httpx.ReadError)(f"{type(error).__name__}: {error}")
    return httpx.RemoteProtocolError(f"{type(error).__name__}: {error}")


def _usable(sock: socket.socket) -> bool:
    """Whether a kept connection can carry a request: nothing (an end of file, a stray byte) waiting to
    be read on it."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


class _Body(httpx.SyncByteStream):
    """A response body read as it arrives; the connection goes back to its transport once the body was
    read to its end (closed instead when the server closes it or the body is left unread)."""

    def __init__(
        self,
        transport: StdlibHTTPTransport,
        key: tuple[str, str, int],
        sock: socket.socket,
        response: http.client.HTTPResponse,
    ) -> None:
        self._pool, self._key, self._sock, self._response = transport, key, sock, response
        self._done = False

    def __iter__(self) -> Iterator[bytes]:
        response = self._response
        try:
            while chunk := response.read1(READ_SIZE):
                yield chunk
            if response.length:  # read1 ends quietly where the connection closed before the length
                raise http.client.IncompleteRead(b"", response.length)
        except Exception as error:
            self._finish(reuse=False)
            raise _mapped(error, "read") from error
        self._finish(reuse=not response.will_close)

    def close(self) -> None:
        self._finish(reuse=False)

    def _finish(self, *, reuse: bool) -> None:
        if self._done:
            return
        self._done = True
        self._response.close()  # its buffered reader only: the socket is closed or kept below
        if reuse:
            self._pool._give_back(self._key, self._sock)
        else:
            self._sock.close()
