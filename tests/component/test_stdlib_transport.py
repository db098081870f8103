"""``StdlibHTTPTransport`` (issue 25): the SDK over ``http.client`` against FakeVLLM on real sockets gives
the same answers as over httpx's default transport, streams, keeps its connections, and maps every
failure to the httpx error the transport layer maps in turn (connection, timeout, protocol).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

import vllm_tasks as vt
from vllm_tasks.testing import FakeVLLM

from ..fakes import fake_like

FOX = Path(__file__).resolve().parents[1] / "data" / "audio" / "fox.wav"


@pytest.fixture
def stdlib_http() -> Iterator[httpx.Client]:
    with httpx.Client(transport=vt.StdlibHTTPTransport(), timeout=30) as http:
        yield http


@pytest.mark.parametrize("encoding_format", ["bytes", "base64", "float"])
def test_embeddings_are_the_same_as_over_httpx_transport(
    fake_vllm: FakeVLLM, stdlib_http: httpx.Client, encoding_format: str
) -> None:
    texts = [f"text number {i}" for i in range(150)]
    with vt.Client(fake_vllm.url, http_client=stdlib_http) as fast, vt.Client(fake_vllm.url) as usual:
        got = fast.embed(texts, batch_size=16, concurrency=4, encoding_format=encoding_format)  # type: ignore[arg-type]
        want = usual.embed(texts, batch_size=16, concurrency=4, encoding_format=encoding_format)  # type: ignore[arg-type]
    np.testing.assert_array_equal(got.vectors, want.vectors)
    assert got.usage == want.usage and got.model == want.model


def test_a_streamed_transcription_arrives_in_pieces(stdlib_http: httpx.Client) -> None:
    """FakeVLLM streams server-sent events with chunked transfer encoding."""
    with (
        fake_like("stt") as server,
        vt.Client(server.base_url, http_client=stdlib_http) as client,
        vt.Client(server.base_url) as usual_client,
    ):
        stream = client.transcribe_stream(FOX)
        deltas = [delta.text for delta in stream]
        usual = usual_client.transcribe(FOX)
    assert len(deltas) > 2 and "".join(deltas[:-1]) == deltas[-1] == usual.text  # the deltas, then the result


def test_error_answers_are_read_and_mapped(fake_vllm: FakeVLLM, stdlib_http: httpx.Client) -> None:
    with vt.Client(fake_vllm.url, http_client=stdlib_http) as client:
        with pytest.raises(vt.NotFoundError):
            client.embed(["a"], model="no-such-model")
        assert client.embed(["a"]).vectors.shape[0] == 1  # the connection still serves


def test_sequential_requests_use_one_connection(fake_vllm: FakeVLLM) -> None:
    transport = vt.StdlibHTTPTransport()
    with httpx.Client(transport=transport) as http:
        sockets = set()
        for _ in range(5):
            assert http.get(f"{fake_vllm.url}/health").status_code == 200
            [kept] = [sock for idle in transport._idle.values() for sock in idle]
            sockets.add(kept.fileno())
        assert len(sockets) == 1


def one_answer_per_connection(answer: bytes) -> tuple[str, Callable[[], None]]:
    """A server that answers one request per connection with ``answer``, then closes the connection
    (without saying so): a kept connection is stale by the next request."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()

    def close() -> None:
        stop.set()
        listener.close()

    return f"http://127.0.0.1:{listener.getsockname()[1]}", close


def test_a_connection_the_server_closed_is_not_reused() -> None:
    url, close = one_answer_per_connection(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
    try:
        with httpx.Client(transport=vt.StdlibHTTPTransport(), timeout=10) as http:
            assert [http.post(url, content=b"x").text for _ in range(3)] == ["ok"] * 3
    finally:
        close()


def test_a_refused_connection_is_a_connection_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        port = sock.getsockname()[1]
    with httpx.Client(transport=vt.StdlibHTTPTransport()) as http:
        client = vt.Client(f"http://127.0.0.1:{port}", http_client=http, max_retries=0)
        with pytest.raises(vt.APIConnectionError):
            client.server_info()


def test_a_silent_server_is_a_timeout() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with httpx.Client(transport=vt.StdlibHTTPTransport()) as http:
            client = vt.Client(url, http_client=http, max_retries=0, timeout=0.2)
            with pytest.raises(vt.APITimeoutError):
                client.server_info()


@pytest.mark.parametrize(
    "answer",
    [b"NOT HTTP AT ALL\r\n\r\n", b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort"],
    ids=["bad status line", "body cut short"],
)
def test_a_broken_answer_is_a_protocol_error(answer: bytes) -> None:
    url, close = one_answer_per_connection(answer)
    try:
        with (
            httpx.Client(transport=vt.StdlibHTTPTransport(), timeout=10) as http,
            pytest.raises(httpx.TransportError),
        ):
            http.post(url, content=b"x")
    finally:
        close()


def test_a_line_break_in_a_header_is_refused_before_sending() -> None:
    with httpx.Client(transport=vt.StdlibHTTPTransport()) as http, pytest.raises(httpx.LocalProtocolError):
        http.get("http://127.0.0.1:9/", headers={"x-a": "b\r\nx-injected: 1"})


@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_max_idle_connections_is_checked(value: object) -> None:
    with pytest.raises(vt.InvalidInputError, match="max_idle_connections"):
        vt.StdlibHTTPTransport(max_idle_connections=value)  # type: ignore[arg-type]
