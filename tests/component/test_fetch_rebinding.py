"""``FetchLimits(refuse_private=True)`` connects to the address it checked (issue 24, item 5): the host of a
user-given URL is looked up once per hop, every address checked, and the GET sent to a checked address with
the URL's ``Host`` header. It used to check one lookup and let httpx connect after a second one, which a
host can answer otherwise (DNS rebinding: public first, then 127.0.0.1). Over real HTTP on 127.0.0.1, both
clients."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

import vllm_tasks as vt
from vllm_tasks import ClientSettings, FetchLimits, fetching
from vllm_tasks._async.fetching import fetch_url as async_fetch_url
from vllm_tasks._async.transport import AsyncTransport
from vllm_tasks._backends import IDLE_THREAD_NAME
from vllm_tasks._sync.fetching import fetch_url
from vllm_tasks._sync.transport import SyncTransport

from .conftest import BASE

PUBLIC = "93.184.216.34"


class Host(ThreadingHTTPServer):
    """A local HTTP host that records each request's path and ``Host`` header."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Answer)
        self.seen: list[tuple[str, str]] = []
        self.port = self.server_address[1]


class Answer(BaseHTTPRequestHandler):
    """``/a`` redirects to ``second.example``'s ``/b``, which redirects to ``/c``; anything else is audio."""

    server: Host

    def do_GET(self) -> None:
        self.server.seen.append((self.path, self.headers["Host"]))
        moves = {"/a": f"http://second.example:{self.server.port}/b", "/b": "/c"}
        if self.path in moves:
            self.send_response(302)
            self.send_header("Location", moves[self.path])
            self.send_header("Content-Length", "0")
        else:
            self.send_response(200)
            self.send_header("Content-Length", "4")
        self.end_headers()
        if self.path not in moves:
            self.wfile.write(b"RIFF")

    def log_message(self, *_args: Any) -> None:
        """Quiet."""


@pytest.fixture
def host() -> Iterator[Host]:
    server = Host()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def resolver(monkeypatch: pytest.MonkeyPatch, answer: Any) -> list[str]:
    """Patch ``socket.getaddrinfo`` (both clients' lookups end there): names under ``.example`` get
    ``answer(name)`` (an address or a list of them); the names looked up, in order."""
    real = socket.getaddrinfo
    lookups: list[str] = []

    def getaddrinfo(host: str | bytes, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host  # anyio passes bytes
        if not name.endswith(".example"):
            return real(host, port, *args, **kwargs)
        lookups.append(name)
        answered = answer(name)
        addresses = [answered] if isinstance(answered, str) else answered
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, int(port))) for a in addresses]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return lookups


def everywhere_public(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let 127.0.0.1 stand for a public address (``FetchLimits.refuse_private`` would refuse it)."""
    monkeypatch.setattr(ipaddress.IPv4Address, "is_global", property(lambda _address: True))


def fetch(kind: str, url: str, transport: Any = None) -> httpx.Response:
    """``fetch_url`` on the client of ``kind``'s transport (over httpx's ``transport``), with
    ``refuse_private``."""
    config = ClientSettings(BASE, max_retries=0, fetch_limits=FetchLimits(refuse_private=True, deadline=5))
    if kind == "sync":
        with httpx.Client(transport=transport) as http:
            return fetch_url(SyncTransport(http, config), url, timeout=5.0)

    async def run() -> httpx.Response:
        async with httpx.AsyncClient(transport=transport) as http:
            return await async_fetch_url(AsyncTransport(http, config), url, timeout=5.0)

    return asyncio.run(run())


def test_a_host_that_rebinds_to_a_private_address_is_never_reached(
    make_client: Any, host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Public at the check, 127.0.0.1 after it: the GET goes to the public address checked (unreachable
    here), never to the local host (it was fetched, and its body sent on to the server, before)."""
    answers = iter([PUBLIC])
    resolver(monkeypatch, lambda _name: next(answers, "127.0.0.1"))
    client = make_client(fetch_limits=FetchLimits(refuse_private=True, deadline=1))
    with pytest.raises(vt.InputFetchError):
        client.transcribe(f"http://rebind.example:{host.port}/talk.wav")
    assert host.seen == []
    _wait_for_abandoned_fetches()


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_each_hop_is_looked_up_once_and_sent_with_its_host_header(
    kind: str, host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A public host (127.0.0.1 standing for one) is fetched as before: its name in the ``Host`` header,
    a relative redirect joined to the name (not to the address), one lookup per hop."""
    lookups = resolver(monkeypatch, lambda _name: "127.0.0.1")
    everywhere_public(monkeypatch)
    response = fetch(kind, f"http://first.example:{host.port}/a")
    assert response.status_code == 200 and response.content == b"RIFF"
    assert lookups == ["first.example", "second.example", "second.example"]
    port = host.port
    assert host.seen == [
        ("/a", f"first.example:{port}"),
        ("/b", f"second.example:{port}"),
        ("/c", f"second.example:{port}"),
    ]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_next_checked_address_is_tried_when_one_refuses_the_connection(
    kind: str, host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a client resolving the name itself does (an IPv6 address that does not route, first): the other
    checked addresses, in order; nothing else."""
    lookups = resolver(monkeypatch, lambda _name: ["127.0.0.2", "127.0.0.1"])  # nothing on 127.0.0.2
    everywhere_public(monkeypatch)
    response = fetch(kind, f"http://two.example:{host.port}/talk.wav")
    assert response.content == b"RIFF" and lookups == ["two.example"]
    assert host.seen == [("/talk.wav", f"two.example:{host.port}")]


class Pooled:
    """A connection's network stream, as httpcore gives it in a response's extensions: TLS, with the name
    its certificate was checked for."""

    def __init__(self, name: str) -> None:
        self.server_hostname = name

    def get_extra_info(self, info: str) -> Any:
        return self if info == "ssl_object" else None


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_connection_pooled_for_another_name_at_the_address_is_not_used(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool keys connections by address: a GET to ``images.example``'s checked address can come on a
    connection to it checked for ``cdn.example``. It is dropped and the GET sent again, on a connection
    checked for ``images.example``."""
    resolver(monkeypatch, lambda _name: PUBLIC)
    names = iter(["cdn.example", "images.example"])
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, content=b"RIFF", extensions={"network_stream": Pooled(next(names))})

    transport = httpx.MockTransport(answer)
    assert fetch(kind, "https://images.example/p.png", transport).content == b"RIFF"
    assert [(str(r.url), r.extensions["sni_hostname"]) for r in sent] == [
        (f"https://{PUBLIC}/p.png", "images.example")
    ] * 2


@pytest.mark.parametrize(
    ("url", "address", "sent", "host_header", "tls_name"),
    [
        (
            "https://images.example/p.png",
            PUBLIC,
            f"https://{PUBLIC}/p.png",
            "images.example",
            "images.example",
        ),
        (
            "https://u:pw@images.example:8443/p.png?s=1",
            "2606:2800:220:1::1",
            "https://u:pw@[2606:2800:220:1::1]:8443/p.png?s=1",
            "images.example:8443",
            "images.example",
        ),
        (
            "http://bücher.example/a.wav",
            PUBLIC,
            f"http://{PUBLIC}/a.wav",
            "xn--bcher-kva.example",
            "xn--bcher-kva.example",
        ),
    ],
    ids=["https", "port-ipv6-credentials", "idna"],
)
def test_the_request_goes_to_the_checked_address_under_the_host_name(
    url: str, address: str, sent: str, host_header: str, tls_name: str
) -> None:
    """Over https the certificate is checked against the host's name: httpcore's ``sni_hostname``
    extension is the ``server_hostname`` ``ssl`` verifies the certificate against."""
    request = fetching.third_party_request(url, 5.0, address)
    assert str(request.url) == sent and request.headers["host"] == host_header
    assert request.extensions["sni_hostname"] == tls_name


def _wait_for_abandoned_fetches(seconds: float = 5.0) -> None:
    """Let a download given up at its deadline end in its worker thread (it closes its connection)."""
    until = time.monotonic() + seconds
    while time.monotonic() < until and any(
        t.name.startswith("vllm-tasks") and t.name != IDLE_THREAD_NAME for t in threading.enumerate()
    ):
        time.sleep(0.02)
