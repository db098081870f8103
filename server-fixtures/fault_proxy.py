"""A small HTTP/1.1 fault proxy for the faults a reverse proxy like nginx cannot produce.

    proxy = FaultProxy("127.0.0.1", upstream_port).start()   # listens on a free port (proxy.port)
    proxy.plan("/v1/embeddings", "reset", "pass")            # next two matching requests: reset, then pass
    ...                                                      # requests to proxy.base_url
    proxy.seen                                               # [(method, path, mode), ...]
    proxy.stop(); proxy.start()                              # the "upstream stopped / back" case
    proxy.close()

Each request is read whole (head + ``Content-Length`` body), sent to the upstream on a fresh connection
with ``Connection: close``, and the upstream's answer is read to EOF; then the answer goes to the client
as the request's *mode* says. Requests whose path starts with a planned prefix take the next planned mode;
all others (and a prefix's requests once its plan is used up) get ``default`` (``"pass"``). Every answer
carries ``Connection: close``, so a client never reuses a connection the proxy is about to break.

Modes:
    pass              the upstream's answer unchanged (except ``Connection: close``)
    delay:S           wait S seconds before contacting the upstream, then pass (a slow upstream)
    reset             head + half the body, then a TCP RST (SO_LINGER 0)
    close             the client's connection is closed before any answer (FIN, no bytes)
    trickle:N:S       head, then the body N bytes at a time, S seconds apart
    stall:S           head + half the body, then S seconds of silence, then a clean close
    chunked_truncated the body re-framed as chunked; half of it is sent, then a clean close without the
                      terminating zero-size chunk
    short_body        a well-framed answer whose body is the first half of the upstream's
                      (``Content-Length`` set to match): a truncated body that looks complete

Standard library only; the proxy runs an asyncio loop on a daemon thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections import deque
from typing import Any

MODES = ("pass", "delay", "reset", "close", "trickle", "stall", "chunked_truncated", "short_body")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class Answer:
    """An upstream HTTP answer split into status line, headers and the de-framed body."""

    def __init__(self, raw: bytes) -> None:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        self.status_line = lines[0]
        self.headers = [tuple(line.split(b":", 1)) for line in lines[1:] if b":" in line]
        chunked = any(
            k.strip().lower() == b"transfer-encoding" and b"chunked" in v.lower() for k, v in self.headers
        )
        self.body = _dechunk(rest) if chunked else rest

    def head(self, *, chunked: bool = False, length: int | None = None) -> bytes:
        """The status line and headers, re-framed: ``Content-Length`` (default: the body's) or chunked."""
        drop = {b"content-length", b"transfer-encoding", b"connection"}
        out = [self.status_line]
        out += [k + b":" + v for k, v in self.headers if k.strip().lower() not in drop]
        if chunked:
            out.append(b"Transfer-Encoding: chunked")
        else:
            out.append(b"Content-Length: %d" % (len(self.body) if length is None else length))
        out.append(b"Connection: close")
        return b"\r\n".join(out) + b"\r\n\r\n"


def _dechunk(data: bytes) -> bytes:
    body = bytearray()
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            break
        body += data[:size]
        data = data[size + 2 :]
    return bytes(body)


class FaultProxy:
    """An HTTP/1.1 proxy in front of ``upstream`` that breaks planned answers (see the module doc)."""

    def __init__(
        self, upstream_host: str, upstream_port: int, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host = host
        self.port = port or free_port(host)
        self.default = "pass"
        self.seen: list[tuple[str, str, str]] = []
        self._plans: dict[str, deque[str]] = {}
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def base_url(self) -> str:
        """``http://host:port`` of the proxy."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> FaultProxy:
        """Listen (again) on ``self.port``; returns self."""
        if self._server is None:
            self._server = self._call(
                asyncio.start_server(self._handle, self.host, self.port, reuse_address=True)
            )
        return self

    def stop(self) -> None:
        """Stop listening and drop open connections: the port refuses connections until ``start()``."""
        server, self._server = self._server, None
        with contextlib.suppress(Exception):
            self._call(self._drop_connections(server))

    def close(self) -> None:
        """Stop and end the proxy's thread and its event loop."""
        self.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()

    def plan(self, prefix: str, *modes: str) -> None:
        """Queue ``modes`` for the next requests whose path starts with ``prefix`` (replacing its plan)."""
        for mode in modes:
            if mode.split(":")[0] not in MODES:
                raise ValueError(f"unknown fault mode {mode!r}; one of {MODES}")
        with self._lock:
            self._plans[prefix] = deque(modes)

    def reset(self) -> None:
        """Forget plans and the request log; default mode back to ``pass``."""
        with self._lock:
            self._plans.clear()
            self.seen.clear()
            self.default = "pass"

    def count(self, path: str) -> int:
        """How many requests for ``path`` the proxy has received."""
        return sum(1 for _, p, _ in self.seen if p == path)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals (on the proxy's loop) --

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    def _mode_for(self, method: str, path: str) -> str:
        with self._lock:
            mode = self.default
            for prefix, queue in self._plans.items():
                if path.startswith(prefix) and queue:
                    mode = queue.popleft()
                    break
            self.seen.append((method, path, mode))
        return mode

    async def _drop_connections(self, server: asyncio.base_events.Server | None) -> None:
        # Server.close() is not thread-safe: called from the test's thread it raced the loop's own
        # bookkeeping (TypeError in asyncio's Server._wakeup), so it runs here, on the loop.
        if server is not None:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if server is not None:
            await server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        try:
            request = await _read_request(reader)
            if request is None:
                return
            method, path, raw = request
            await self._answer(self._mode_for(method, path), raw, writer)
        except (ConnectionError, asyncio.IncompleteReadError, OSError, asyncio.CancelledError):
            pass  # the client went away, or stop() dropped the connection
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _answer(self, mode: str, raw: bytes, writer: asyncio.StreamWriter) -> None:
        name, *args = mode.split(":")
        if name == "close":
            return
        if name == "delay":
            await asyncio.sleep(float(args[0]))
        answer = Answer(await self._forward(raw))
        body = answer.body
        half = len(body) // 2
        if name in ("pass", "delay"):
            writer.write(answer.head() + body)
        elif name == "short_body":
            writer.write(answer.head(length=half) + body[:half])
        elif name == "chunked_truncated":
            writer.write(answer.head(chunked=True))
            for start in range(0, half, 512):
                piece = body[start : min(start + 512, half)]
                writer.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
        elif name == "reset":
            writer.write(answer.head() + body[:half])
            await writer.drain()
            await asyncio.sleep(0.2)  # let the client read the head and part of the body first
            _abort(writer)
            return
        elif name == "stall":
            writer.write(answer.head() + body[:half])
            await writer.drain()
            await asyncio.sleep(float(args[0]))
        elif name == "trickle":
            size, gap = int(args[0]), float(args[1])
            writer.write(answer.head())
            for start in range(0, len(body), size):
                await writer.drain()
                await asyncio.sleep(gap)
                writer.write(body[start : start + size])
        await writer.drain()

    async def _forward(self, raw: bytes) -> bytes:
        reader, writer = await asyncio.open_connection(*self.upstream)
        try:
            writer.write(raw)
            await writer.drain()
            return await reader.read(-1)
        finally:
            writer.close()


def _abort(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes] | None:
    """One request: method, path and the bytes to send upstream (with ``Connection: close``)."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head[:-4].split(b"\r\n")
    method, path = lines[0].decode("latin-1").split(" ")[:2]
    headers = [line for line in lines[1:] if not line.lower().startswith((b"connection:", b"keep-alive:"))]
    length = 0
    for line in headers:
        key, _, value = line.partition(b":")
        if key.strip().lower() == b"content-length":
            length = int(value.strip())
    body = await reader.readexactly(length) if length else b""
    raw = b"\r\n".join([lines[0], *headers, b"Connection: close"]) + b"\r\n\r\n" + body
    return method, path, raw
