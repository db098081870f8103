"""Every transport the sync ``Client`` can send with (httpx's own, ``Urllib3Transport``: the default) behaves
the same over real sockets: the same answers, streaming, kept connections, redirects not followed, TLS
checked against the CAs httpx reads (``SSL_CERT_FILE``), and the fault matrix (refused, silent, reset,
closed, truncated, trickled and stalled answers) mapped to the same typed errors.
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from fault_proxy import FaultProxy

import vllm_tasks as vt
from vllm_tasks.testing import FakeVLLM

from ..fakes import fake_like

FOX = Path(__file__).resolve().parents[1] / "data" / "audio" / "fox.wav"
TRANSPORTS: dict[str, Callable[[], httpx.BaseTransport]] = {
    "httpx": httpx.HTTPTransport,
    "urllib3": vt.Urllib3Transport,
}
TEXTS = [f"text number {i}" for i in range(40)]


@pytest.fixture(params=sorted(TRANSPORTS))
def transport(request: pytest.FixtureRequest) -> Callable[[], httpx.BaseTransport]:
    return TRANSPORTS[request.param]


@pytest.fixture
def http(transport: Callable[[], httpx.BaseTransport]) -> Iterator[httpx.Client]:
    with httpx.Client(transport=transport(), timeout=30) as client:
        yield client


def test_the_default_client_sends_with_urllib3(fake_vllm: FakeVLLM) -> None:
    with vt.Client(fake_vllm.url) as client, vt.Client(fake_vllm.url, transport="httpx") as plain:
        assert isinstance(client._http._transport, vt.Urllib3Transport)
        assert isinstance(plain._http._transport, httpx.HTTPTransport)
        np.testing.assert_array_equal(client.embed(TEXTS).vectors, plain.embed(TEXTS).vectors)


@pytest.mark.parametrize("encoding_format", ["bytes", "base64", "float"])
def test_embeddings_are_the_same_over_every_transport(
    fake_vllm: FakeVLLM, http: httpx.Client, encoding_format: str
) -> None:
    texts = [f"text number {i}" for i in range(150)]
    with (
        vt.Client(fake_vllm.url, http_client=http) as fast,
        vt.Client(fake_vllm.url, transport="httpx") as usual,
    ):
        got = fast.embed(texts, batch_size=16, concurrency=4, encoding_format=encoding_format)  # type: ignore[arg-type]
        want = usual.embed(texts, batch_size=16, concurrency=4, encoding_format=encoding_format)  # type: ignore[arg-type]
    np.testing.assert_array_equal(got.vectors, want.vectors)
    assert got.usage == want.usage and got.model == want.model


def test_a_bytes_batch_over_the_header_limits_is_sent_in_parts(
    fake_vllm: FakeVLLM, http: httpx.Client
) -> None:
    """1,200 metadata entries (~130 kB in one header line) are over http.client's line limit and h11's
    header limit: the batch goes as several requests, and the vectors are the same as in batches of 64."""
    texts = [f"text number {i}" for i in range(1200)]
    with vt.Client(fake_vllm.url, http_client=http) as client:
        whole = client.embed(texts, batch_size=1200, encoding_format="bytes", concurrency=1)
        parts = client.embed(texts, batch_size=64, encoding_format="bytes")
    np.testing.assert_array_equal(whole.vectors, parts.vectors)
    assert max(len(r.json["input"]) for r in fake_vllm.received("/v1/embeddings")) == 512
    with vt.Client(fake_vllm.url, http_client=http) as client:
        pooled = client.pool(texts, batch_size=1200, encoding_format="bytes", concurrency=1)
    assert len(pooled.data) == 1200
    assert max(len(r.json["input"]) for r in fake_vllm.received("/pooling")) == 512


def test_a_streamed_transcription_arrives_in_pieces(http: httpx.Client) -> None:
    """FakeVLLM streams server-sent events with chunked transfer encoding."""
    with fake_like("stt") as server, vt.Client(server.base_url, http_client=http) as client:
        deltas = [delta.text for delta in client.transcribe_stream(FOX)]
        whole = client.transcribe(FOX).text
    assert len(deltas) > 2 and "".join(deltas[:-1]) == deltas[-1] == whole  # the deltas, then the result


def test_error_answers_are_read_and_mapped(fake_vllm: FakeVLLM, http: httpx.Client) -> None:
    with vt.Client(fake_vllm.url, http_client=http) as client:
        with pytest.raises(vt.NotFoundError):
            client.embed(["a"], model="no-such-model")
        assert client.embed(["a"]).vectors.shape[0] == 1  # the connection still serves


class RawServer:
    """A local HTTP server that reads each request's head and body and writes ``answer`` for it; it
    counts the connections it accepted. ``keep``: the connection serves further requests (else it is
    closed, without saying so, after one answer: a kept connection is stale by the next request)."""

    def __init__(self, answer: bytes, *, keep: bool = True, tls: ssl.SSLContext | None = None) -> None:
        self.answer, self.keep, self.tls = answer, keep, tls
        self.connections = 0
        self.requests = 0
        self.hung_up = threading.Semaphore(0)  # released as each connection is closed
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._stop = threading.Event()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            with conn, conn.makefile("rb") as reader:
                while head := _read_head(reader):
                    length = next((int(v) for k, v in head if k == b"content-length"), 0)
                    reader.read(length)
                    self.requests += 1
                    conn.sendall(self.answer)
                    if not self.keep:
                        return
        except (OSError, ssl.SSLError):
            return
        finally:
            self.hung_up.release()

    def close(self) -> None:
        self._stop.set()
        self._listener.close()


def _read_head(reader: object) -> list[tuple[bytes, bytes]]:
    lines = []
    while (line := reader.readline()) not in (b"\r\n", b""):  # type: ignore[attr-defined]
        lines.append(line)
    return [(k.strip().lower(), v.strip()) for k, _, v in (line.partition(b":") for line in lines[1:])]


@pytest.fixture
def raw_server() -> Iterator[Callable[..., RawServer]]:
    made: list[RawServer] = []

    def make(answer: bytes, **options: object) -> RawServer:
        made.append(RawServer(answer, **options))  # type: ignore[arg-type]
        return made[-1]

    yield make
    for server in made:
        server.close()


OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"


def test_sequential_requests_use_one_connection(
    http: httpx.Client, raw_server: Callable[..., RawServer]
) -> None:
    server = raw_server(OK)
    assert [http.post(server.url, content=b"x").text for _ in range(5)] == ["ok"] * 5
    assert (server.requests, server.connections) == (5, 1)


def test_a_connection_the_server_closed_is_not_reused(
    http: httpx.Client, raw_server: Callable[..., RawServer]
) -> None:
    server = raw_server(OK, keep=False)
    for _ in range(3):
        assert http.post(server.url, content=b"x").text == "ok"
        assert server.hung_up.acquire(timeout=10)  # the kept connection is stale before the next request
    assert server.connections == 3


def test_a_redirect_is_not_followed(http: httpx.Client, raw_server: Callable[..., RawServer]) -> None:
    redirect = b"HTTP/1.1 307 Temporary Redirect"
    server = raw_server(redirect + b"\r\nlocation: /elsewhere\r\ncontent-length: 0\r\n\r\n")
    assert http.post(server.url, content=b"x").status_code == 307
    assert server.requests == 1
    with (
        vt.Client(server.url, http_client=http, max_retries=0) as client,
        pytest.raises(vt.UnexpectedResponse, match="redirect to /elsewhere"),
    ):
        client.server_info()


def test_a_refused_connection_is_a_connection_error(http: httpx.Client) -> None:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        port = sock.getsockname()[1]
    client = vt.Client(f"http://127.0.0.1:{port}", http_client=http, max_retries=0)
    with pytest.raises(vt.APIConnectionError, match="could not connect") as caught:
        client.server_info()
    assert not isinstance(caught.value, vt.APITimeoutError)


def test_a_silent_server_is_a_timeout(http: httpx.Client) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        client = vt.Client(url, http_client=http, max_retries=0, timeout=0.2)
        with pytest.raises(vt.APITimeoutError, match="waiting for the answer"):
            client.server_info()


@pytest.mark.parametrize(
    "answer",
    [b"NOT HTTP AT ALL\r\n\r\n", b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort"],
    ids=["bad status line", "body cut short"],
)
def test_a_broken_answer_is_a_transport_error(
    http: httpx.Client, raw_server: Callable[..., RawServer], answer: bytes
) -> None:
    server = raw_server(answer, keep=False)
    with pytest.raises(httpx.TransportError):
        http.post(server.url, content=b"x")


def test_a_line_break_in_a_header_is_refused_before_sending(
    http: httpx.Client, raw_server: Callable[..., RawServer]
) -> None:
    server = raw_server(OK)
    with pytest.raises(httpx.LocalProtocolError):
        http.get(server.url, headers={"x-a": "b\r\nx-injected: 1"})
    assert server.requests == 0


# --------------------------------------------------------------------------- the fault matrix


@pytest.fixture
def faults(fake_vllm: FakeVLLM) -> Iterator[FaultProxy]:
    upstream = httpx.URL(fake_vllm.url)
    with FaultProxy(upstream.host, upstream.port).start() as proxy:
        yield proxy


@pytest.mark.parametrize("mode", ["reset", "close", "chunked_truncated"])
def test_a_broken_answer_is_a_typed_connection_error(
    http: httpx.Client, faults: FaultProxy, mode: str
) -> None:
    with vt.Client(faults.base_url, http_client=http, max_retries=0) as client:
        client.server_info()
        faults.plan("/v1/embeddings", mode)
        with pytest.raises(vt.APIConnectionError) as caught:
            client.embed(TEXTS)
    assert not isinstance(caught.value, vt.APITimeoutError)
    if mode != "close":  # the answer had begun: the request may have been processed
        assert "could not connect" not in str(caught.value)


def test_a_trickled_answer_gives_the_same_vectors(
    http: httpx.Client, faults: FaultProxy, fake_vllm: FakeVLLM
) -> None:
    with vt.Client(faults.base_url, http_client=http) as client, vt.Client(fake_vllm.url) as direct:
        faults.plan("/v1/embeddings", "trickle:2048:0.001")
        np.testing.assert_array_equal(client.embed(TEXTS).vectors, direct.embed(TEXTS).vectors)


def test_a_stalled_answer_times_out_and_the_retry_succeeds(
    http: httpx.Client, faults: FaultProxy, fake_vllm: FakeVLLM
) -> None:
    with vt.Client(faults.base_url, http_client=http, max_retries=1, timeout=0.3) as client:
        client.server_info()
        faults.plan("/v1/embeddings", "stall:1", "stall:1", "stall:1")
        with pytest.raises(vt.APITimeoutError):
            client.embed(TEXTS)
        assert faults.count("/v1/embeddings") == 2


# --------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ssl.SSLContext]:
    """A self-signed certificate for 127.0.0.1 (the file a client trusts) and a server context with it."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    return cert, server


def test_tls_is_checked_against_the_cas_httpx_reads(
    transport: Callable[[], httpx.BaseTransport],
    certificate: tuple[Path, ssl.SSLContext],
    raw_server: Callable[..., RawServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cert, context = certificate
    server = raw_server(OK, tls=context)
    with httpx.Client(transport=transport()) as http, pytest.raises(httpx.ConnectError):
        http.post(server.url, content=b"x")  # an unknown CA
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with httpx.Client(transport=transport()) as http:
        assert http.post(server.url, content=b"x").text == "ok"
