"""Secrets never reach a log line, an exception chain or a notebook (issue 24, "Secrets").

``http://user:KEY@host`` is sent as an ``Authorization: Basic`` header: neither the SDK nor httpx ever
sees (or logs) a URL with credentials; no exception's chain (``__cause__`` or ``__context__``) holds a
request, whose headers carry the API key; a notebook audio player's ``src`` has no credentials.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import traceback
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks._async.transport import AsyncTransport
from vllm_tasks._sync.transport import SyncTransport
from vllm_tasks.transport import Request
from vllm_tasks.types.audio import audio_player

SECRET = "s3cr3t-KEY"
CRED_BASE = f"http://admin:{SECRET}@vllm.test:8000"
PLAIN_BASE = "http://vllm.test:8000"
BASIC = "Basic " + base64.b64encode(f"admin:{SECRET}".encode()).decode()


def logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every record as a handler would write it (message and arguments formatted)."""
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return "\n".join(formatter.format(record) for record in caplog.records)


def test_url_credentials_are_sent_as_basic_auth_and_logged_nowhere(
    make_client: Any, httpx_mock: HTTPXMock, caplog: pytest.LogCaptureFixture
) -> None:
    """logging.basicConfig(level="INFO") used to show httpx's ``HTTP Request: GET http://admin:KEY@...``."""
    caplog.set_level(logging.DEBUG)
    httpx_mock.add_response(text="", is_reusable=True)
    make_client(CRED_BASE).wait_until_ready(timeout=5)
    text = logged(caplog)
    assert "HTTP Request: GET http://vllm.test:8000/health" in text  # httpx's INFO line
    assert SECRET not in text
    (request,) = httpx_mock.get_requests()
    assert request.headers["authorization"] == BASIC
    assert request.url == httpx.URL(f"{PLAIN_BASE}/health") and not request.url.userinfo


def test_percent_encoded_url_credentials_are_decoded_for_basic_auth(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    httpx_mock.add_response(text="")
    make_client("http://ad%40min:p%3Ass@vllm.test:8000").wait_until_ready(timeout=5)
    expected = "Basic " + base64.b64encode(b"ad@min:p:ss").decode()
    assert httpx_mock.get_requests()[0].headers["authorization"] == expected


def test_url_credentials_and_an_api_key_are_refused_together() -> None:
    with pytest.raises(vt.InvalidInputError, match="only one can be sent") as info:
        vt.ClientSettings(CRED_BASE, api_key="sk-1")
    assert info.value.field == "base_url" and SECRET not in str(info.value)


def test_settings_send_url_credentials_as_a_header_and_keep_them_for_workers() -> None:
    settings = vt.ClientSettings(CRED_BASE)
    assert settings.request_headers["Authorization"] == BASIC
    assert settings.base_url == CRED_BASE  # a Ray worker's client is built from it
    assert settings.display_url == PLAIN_BASE
    assert "Authorization" not in vt.ClientSettings(PLAIN_BASE, api_key=None).request_headers


def chain(error: BaseException) -> Iterator[BaseException]:
    """The error and every exception reachable from it through ``__cause__`` and ``__context__``."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [error]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo += [current.__cause__, current.__context__]


def assert_no_key_in_chain(error: BaseException) -> None:
    rendered = "".join(traceback.format_exception(error))
    assert SECRET not in rendered
    for link in chain(error):
        request = vars(link).get("_request")  # httpx errors hold their request (and its headers)
        assert request is None, f"{type(link).__name__} in the chain holds the request"
        assert SECRET not in repr(vars(link)) and SECRET not in str(link)


@pytest.mark.parametrize("exception", [httpx.ConnectError("refused"), httpx.ReadTimeout("slow")])
def test_a_connection_errors_chain_holds_no_request_headers(
    make_client: Any, httpx_mock: HTTPXMock, exception: httpx.TransportError
) -> None:
    httpx_mock.add_exception(exception, is_reusable=True)
    client = make_client(PLAIN_BASE, api_key=SECRET, max_retries=1)
    with pytest.raises(vt.APIConnectionError) as info:
        client.server_info()
    assert_no_key_in_chain(info.value)
    assert info.value.__cause__ is not None  # what httpx said is kept, without its request
    assert str(exception) in str(info.value.__cause__)


def read_streams(error: type[vt.APIError], match: str = "") -> None:
    """Open and read a stream on both transports (key set): each raises ``error``, with a clean chain."""
    settings = vt.ClientSettings(PLAIN_BASE, api_key=SECRET, max_retries=0)
    sync = SyncTransport(httpx.Client(), settings)
    asynchronous = AsyncTransport(httpx.AsyncClient(), settings)
    request = Request("POST", "/v1/audio/transcriptions", json={})

    async def read() -> list[str]:
        return [line async for line in await asynchronous.open_stream(request)]

    for run in (lambda: list(sync.open_stream(request)), lambda: asyncio.run(read())):
        with pytest.raises(error, match=match) as info:
            run()
        assert_no_key_in_chain(info.value)


def test_a_stream_that_cannot_start_holds_no_request_headers(httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_exception(httpx.ConnectError("refused"), is_reusable=True)
    read_streams(vt.APIConnectionError, "could not connect")


def test_a_stream_that_breaks_holds_no_request_headers(httpx_mock: HTTPXMock) -> None:
    class Broken(httpx.SyncByteStream, httpx.AsyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield b"data: 1\n"
            raise httpx.ReadError("reset")

        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield b"data: 1\n"
            raise httpx.ReadError("reset")

    httpx_mock.add_callback(lambda request: httpx.Response(200, stream=Broken()), is_reusable=True)
    read_streams(vt.APIConnectionError, "the stream broke")


@pytest.mark.parametrize(
    ("url", "src"),
    [
        ("https://user:pw@cdn.test/a.wav", "https://cdn.test/a.wav"),
        ("http://user@cdn.test:8080/a.wav?x=1", "http://cdn.test:8080/a.wav?x=1"),
        ("https://cdn.test/a.wav", "https://cdn.test/a.wav"),
    ],
)
def test_a_notebook_audio_player_keeps_no_url_credentials(url: str, src: str) -> None:
    html = audio_player(url)._repr_html_()
    assert f'src="{src}"' in html.replace("&amp;", "&") and "pw" not in html and "user" not in html


# -- answers and URLs that httpx refuses: the SDK's typed errors, with no request in their chain ------------


def test_a_body_that_does_not_decode_as_its_content_encoding_is_unexpected(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    """A broken ``Content-Encoding: gzip`` used to raise httpx.DecodingError, request and key included."""
    httpx_mock.add_response(headers={"Content-Encoding": "gzip"}, content=b"not gzip", is_reusable=True)
    client = make_client(PLAIN_BASE, api_key=SECRET, max_retries=0)
    with pytest.raises(vt.UnexpectedResponse, match="does not decode as its Content-Encoding") as info:
        client.server_info()
    assert info.value.url is not None and info.value.url.startswith(PLAIN_BASE)
    assert_no_key_in_chain(info.value)


@pytest.mark.parametrize(
    "url", ["http://[::1", "http://h:99999", "http://h:abc", "http://h h:8000", "http://\x00h"]
)
@pytest.mark.parametrize("client_class", [vt.Client, vt.AsyncClient])
def test_an_invalid_url_is_refused_naming_base_url(url: str, client_class: type[Any]) -> None:
    with pytest.raises(vt.InvalidInputError) as info:
        client_class(url)
    assert info.value.field == "base_url" and "e.g. 'http://localhost:8000'" in info.value.fix
    with pytest.raises(vt.InvalidInputError, match="base_url") as info:
        client_class(url.replace("http://", f"http://admin:{SECRET}@"))
    assert SECRET not in str(info.value)


def test_a_stream_that_does_not_decode_is_unexpected(httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(headers={"Content-Encoding": "gzip"}, content=b"not gzip", is_reusable=True)
    read_streams(vt.UnexpectedResponse, "does not decode")
