"""User-URL fetches are bounded (bytes, overall time), can refuse private addresses, and send nothing of
the client's to other hosts (issue 11). Through the public clients where a client is involved."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import ClientSettings, FetchLimits
from vllm_tasks._async.fetching import fetch_url as async_fetch_url
from vllm_tasks._async.transport import AsyncTransport
from vllm_tasks._backends import IDLE_THREAD_NAME
from vllm_tasks._sync.fetching import fetch_url
from vllm_tasks._sync.transport import SyncTransport

from .conftest import BASE

URL = "https://files.example/talk.wav"


class EndlessBody(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A body that never ends, in 64 KiB chunks (sync and async)."""

    def __iter__(self) -> Iterator[bytes]:
        while True:
            yield b"\0" * 65536

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            yield b"\0" * 65536


class Trickle(httpx.SyncByteStream, httpx.AsyncByteStream):
    """One byte every ``gap`` seconds, forever: each read is quick, the whole never ends."""

    def __init__(self, gap: float = 0.05) -> None:
        self.gap = gap

    def __iter__(self) -> Iterator[bytes]:
        while True:
            time.sleep(self.gap)
            yield b"x"

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            await asyncio.sleep(self.gap)
            yield b"x"


def test_an_endless_body_stops_at_the_byte_cap(make_client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=URL, stream=EndlessBody())
    client = make_client(fetch_limits=FetchLimits(max_bytes=1_000_000))
    with pytest.raises(vt.InputFetchError, match=r"over the 1000000-byte cap of FetchLimits\.max_bytes"):
        client.transcribe(URL)
    assert [r.url for r in httpx_mock.get_requests()] == [httpx.URL(URL)]


def test_a_declared_length_over_the_cap_is_refused_before_reading(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    httpx_mock.add_response(url=URL, headers={"content-length": "5000000000"}, stream=EndlessBody())
    with pytest.raises(vt.InputFetchError, match="declares 5000000000 bytes"):
        make_client().transcribe(URL)


def test_a_trickle_ends_at_the_overall_deadline(make_client: Any, httpx_mock: HTTPXMock) -> None:
    """1 byte every 50 ms never trips a per-read timeout; the whole download still ends."""
    httpx_mock.add_response(url=URL, stream=Trickle())
    client = make_client(fetch_limits=FetchLimits(deadline=0.5))
    started = time.monotonic()
    with pytest.raises(vt.InputFetchError, match=r"over the 0\.5 s deadline"):
        client.transcribe(URL)
    assert time.monotonic() - started < 2.0


def test_the_default_limits_come_from_defaults() -> None:
    from vllm_tasks import defaults

    limits = FetchLimits()
    assert (limits.max_bytes, limits.deadline, limits.refuse_private) == (
        defaults.FETCH_MAX_BYTES,
        defaults.FETCH_DEADLINE,
        False,
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_bytes": 0},
        {"max_bytes": 1.5},
        {"deadline": -1},
        {"deadline": float("inf")},
        {"refuse_private": 1},
    ],
)
def test_bad_limits_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(vt.InvalidInputError):
        FetchLimits(**kwargs)


def test_fetch_limits_must_be_a_fetch_limits(make_client: Any) -> None:
    with pytest.raises(vt.InvalidInputError, match="fetch_limits"):
        make_client(fetch_limits={"max_bytes": 10})


# ----------------------------------------------------------------------------------- private addresses


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/a.wav",
        "http://localhost/a.wav",
        "http://10.1.2.3/a.wav",
        "http://192.168.0.1/a.wav",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/a.wav",
        "http://[::ffff:127.0.0.1]/a.wav",
    ],
)
def test_private_addresses_are_refused_when_asked(url: str, make_client: Any, httpx_mock: HTTPXMock) -> None:
    client = make_client(fetch_limits=FetchLimits(refuse_private=True))
    with pytest.raises(vt.InputFetchError, match="non-public address"):
        client.transcribe(url)
    assert httpx_mock.get_requests() == []


def test_a_redirect_to_a_private_address_is_refused(make_client: Any, httpx_mock: HTTPXMock) -> None:
    public = "http://93.184.216.34/talk.wav"  # an IP literal: no DNS needed
    httpx_mock.add_response(url=public, status_code=302, headers={"location": "http://127.0.0.1:8080/secret"})
    client = make_client(fetch_limits=FetchLimits(refuse_private=True))
    with pytest.raises(vt.InputFetchError, match=r"127\.0\.0\.1"):
        client.transcribe(public)
    assert [str(r.url) for r in httpx_mock.get_requests()] == [public]


def test_private_addresses_are_fetched_by_default(make_client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url="http://127.0.0.1:9/gone.wav", status_code=404)
    with pytest.raises(vt.InputFetchError, match="HTTP 404"):
        make_client().transcribe("http://127.0.0.1:9/gone.wav")


def test_an_unresolvable_host_is_refused_when_checking_addresses(
    make_client: Any, httpx_mock: HTTPXMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    def fail(*_args: Any, **_kwargs: Any) -> Any:
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", fail)
    client = make_client(fetch_limits=FetchLimits(refuse_private=True))
    with pytest.raises(vt.InputFetchError, match="cannot be resolved"):
        client.transcribe("http://nowhere.invalid/a.wav")
    assert httpx_mock.get_requests() == []


# -------------------------------------------------------------------------------------------- redirects


def test_redirects_are_followed_within_the_limits(make_client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=URL, status_code=301, headers={"location": "/moved.wav"})
    httpx_mock.add_response(url="https://files.example/moved.wav", status_code=404)
    with pytest.raises(vt.InputFetchError, match="HTTP 404"):
        make_client().transcribe(URL)


def test_too_many_redirects(make_client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=URL, status_code=302, headers={"location": URL}, is_reusable=True)
    with pytest.raises(vt.InputFetchError, match="more than 2 redirects"):
        make_client(fetch_limits=FetchLimits(max_redirects=2)).transcribe(URL)
    assert len(httpx_mock.get_requests()) == 3


def test_a_redirect_to_another_scheme_is_refused(make_client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=URL, status_code=302, headers={"location": "file:///etc/passwd"})
    with pytest.raises(vt.InputFetchError, match="file: URL"):
        make_client().transcribe(URL)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_no_credentials_or_cookies_follow_a_redirect_to_another_host(
    kind: str, httpx_mock: HTTPXMock
) -> None:
    """An injected client's auth, default headers and cookies go to neither host of a redirect chain."""
    httpx_mock.add_response(url=URL, status_code=302, headers={"location": "https://cdn.example/t.wav"})
    httpx_mock.add_response(url="https://cdn.example/t.wav", content=b"RIFF")
    config = ClientSettings(BASE, api_key="sk-key", timeout=5.0, max_retries=0, headers={"X-Extra": "1"})
    settings: dict[str, Any] = {
        "auth": ("user", "secret"),
        "headers": {"X-Team": "rag", "Authorization": "Bearer k"},
        "cookies": {"s": "1"},
    }
    if kind == "sync":
        with httpx.Client(**settings) as http:
            response = fetch_url(SyncTransport(http, config), URL, timeout=5.0)
    else:

        async def run() -> httpx.Response:
            async with httpx.AsyncClient(**settings) as http:
                return await async_fetch_url(AsyncTransport(http, config), URL, timeout=5.0)

        response = asyncio.run(run())
    assert response.content == b"RIFF"
    sent = httpx_mock.get_requests()
    assert [r.url.host for r in sent] == ["files.example", "cdn.example"]
    for request in sent:
        assert {"authorization", "x-team", "x-extra", "cookie"}.isdisjoint(request.headers)


def test_a_gzip_body_is_counted_decoded(make_client: Any, httpx_mock: HTTPXMock) -> None:
    """The cap counts the bytes as decoded: a small gzip bomb is refused too."""
    import gzip

    bomb = gzip.compress(b"\0" * 5_000_000)
    httpx_mock.add_response(url=URL, stream=httpx.ByteStream(bomb), headers={"content-encoding": "gzip"})
    client = make_client(fetch_limits=FetchLimits(max_bytes=1_000_000))
    with pytest.raises(vt.InputFetchError, match="byte cap"):
        client.transcribe(URL)


# ------------------------------------------------------------------------------- the deadline, exactly

SLACK = 0.4  # seconds past the deadline a loaded machine may take to hand control back


class Stall(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A body whose first byte never comes (until ``release`` is set): a read blocked as long as its own
    timeout allows, or a server that stopped sending."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release

    def __iter__(self) -> Iterator[bytes]:
        self.release.wait(10)
        yield b"x"

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while not self.release.is_set():
            await asyncio.sleep(0.05)
        yield b"x"


def test_a_stalled_body_ends_at_the_deadline(make_client: Any, httpx_mock: HTTPXMock) -> None:
    """Control comes back at ``FetchLimits.deadline``, however long the read in progress would block."""
    release = threading.Event()
    httpx_mock.add_response(url=URL, stream=Stall(release))
    client = make_client(fetch_limits=FetchLimits(deadline=0.5))
    started = time.monotonic()
    try:
        with pytest.raises(vt.InputFetchError, match=r"over the 0\.5 s deadline"):
            client.transcribe(URL)
        assert time.monotonic() - started < 0.5 + SLACK
    finally:
        release.set()
    _wait_for_abandoned_fetches()


@pytest.mark.parametrize("refuse_private", [True, False], ids=["refuse_private", "httpx-resolves"])
def test_a_hanging_dns_lookup_ends_at_the_deadline(
    refuse_private: bool, make_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resolver that does not answer (the SDK's own check, or httpx's while connecting) is bounded by
    the deadline too: name resolution has no timeout of its own."""
    import socket

    release = threading.Event()

    def hang(*_args: Any, **_kwargs: Any) -> Any:
        release.wait(10)
        raise socket.gaierror(-3, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", hang)
    client = make_client(fetch_limits=FetchLimits(deadline=0.5, refuse_private=refuse_private))
    started = time.monotonic()
    try:
        with pytest.raises(vt.InputFetchError, match=r"over the 0\.5 s deadline"):
            client.transcribe("http://slow-dns.example/talk.wav")
        assert time.monotonic() - started < 0.5 + SLACK
    finally:
        release.set()
    _wait_for_abandoned_fetches()


def _wait_for_abandoned_fetches(seconds: float = 5.0) -> None:
    """Let a download given up at its deadline end in its worker thread (it closes its response)."""
    until = time.monotonic() + seconds
    while time.monotonic() < until and any(
        t.name.startswith("vllm-tasks") and t.name != IDLE_THREAD_NAME for t in threading.enumerate()
    ):
        time.sleep(0.02)
