"""Retry rules of the transport, exercised through the public clients (sync and async)."""

from __future__ import annotations

import email.utils
import json
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks.retries import Backoff, retry_after_seconds
from vllm_tasks.transport import overload_listener

from .conftest import BASE

VERSION = f"{BASE}/version"


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504])
def test_retryable_statuses_on_a_raising_request(
    status: int, make_client: Any, httpx_mock: HTTPXMock, no_sleep: list[float]
) -> None:
    httpx_mock.add_response(url=VERSION, json={"version": "0.32.0"}, is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/openapi.json", json={"paths": {}}, is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/v1/models", status_code=status)
    httpx_mock.add_response(url=f"{BASE}/v1/models", status_code=status)
    httpx_mock.add_response(url=f"{BASE}/v1/models", json={"data": [{"id": "m"}]})
    client = make_client(max_retries=2)
    assert client.server_info().default_model == "m"
    assert len(no_sleep) == 2
    assert all(0 < s <= 8 for s in no_sleep)


def test_the_overload_listener_hears_each_429_and_503_the_retries_absorb(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    httpx_mock.add_response(url=VERSION, json={"version": "0.32.0"}, is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/openapi.json", json={"paths": {}}, is_optional=True)
    for status in (503, 500, 429):
        httpx_mock.add_response(url=f"{BASE}/v1/models", status_code=status)
    httpx_mock.add_response(url=f"{BASE}/v1/models", json={"data": [{"id": "m"}]})
    heard: list[None] = []
    client = make_client(max_retries=3)
    token = overload_listener.set(lambda: heard.append(None))
    try:
        assert client.server_info().default_model == "m"
    finally:
        overload_listener.reset(token)
    assert len(heard) == 2  # the 503 and the 429; a 500 is no overload


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422, 501])
def test_other_statuses_are_not_retried(
    status: int, make_client: Any, httpx_mock: HTTPXMock, no_sleep: list[float]
) -> None:
    httpx_mock.add_response(url=VERSION, json={"version": "0.32.0"}, is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/openapi.json", json={"paths": {}}, is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/v1/models", status_code=status, json={"error": {"message": "no"}})
    client = make_client(max_retries=3)
    with pytest.raises(vt.APIStatusError) as info:
        client.server_info()
    assert info.value.status_code == status
    assert no_sleep == []
    assert len([r for r in httpx_mock.get_requests() if r.url.path == "/v1/models"]) == 1


def test_retries_give_up_after_max_retries(
    make_client: Any, httpx_mock: HTTPXMock, no_sleep: list[float]
) -> None:
    httpx_mock.add_response(url=VERSION, json={"version": "0.32.0"}, is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/openapi.json", json={"paths": {}}, is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/v1/models", status_code=503, is_reusable=True)
    client = make_client(max_retries=3)
    with pytest.raises(vt.ServiceUnavailableError):
        client.server_info()
    assert len([r for r in httpx_mock.get_requests() if r.url.path == "/v1/models"]) == 4
    assert len(no_sleep) == 3


def test_max_retries_zero_disables_retries(
    make_client: Any, httpx_mock: HTTPXMock, no_sleep: list[float]
) -> None:
    httpx_mock.add_response(url=VERSION, json={"version": "0.32.0"}, is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/openapi.json", json={"paths": {}}, is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/v1/models", status_code=503)
    client = make_client(max_retries=0)
    with pytest.raises(vt.ServiceUnavailableError):
        client.server_info()
    assert no_sleep == []


def test_connection_errors_are_retried_then_raised(
    make_client: Any, httpx_mock: HTTPXMock, no_sleep: list[float]
) -> None:
    httpx_mock.add_exception(httpx.ConnectError("Connection refused"), is_reusable=True)
    client = make_client(max_retries=2)
    with pytest.raises(vt.APIConnectionError) as info:
        client.server_info()
    assert not isinstance(info.value, vt.APITimeoutError)
    assert "Connection refused" in str(info.value)
    assert len(no_sleep) >= 2


def test_timeouts_raise_api_timeout_error(make_client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_exception(httpx.ReadTimeout("slow"), is_reusable=True)
    client = make_client(max_retries=0)
    with pytest.raises(vt.APITimeoutError):
        client.server_info()


@pytest.mark.parametrize("header", [{"retry-after": "7"}, {"retry-after-ms": "7000"}])
def test_retry_after_is_honoured(
    header: dict[str, str], make_client: Any, httpx_mock: HTTPXMock, no_sleep: list[float]
) -> None:
    httpx_mock.add_response(url=VERSION, json={"version": "0.32.0"}, is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/openapi.json", json={"paths": {}}, is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/v1/models", status_code=429, headers=header)
    httpx_mock.add_response(url=f"{BASE}/v1/models", json={"data": [{"id": "m"}]})
    client = make_client(max_retries=1)
    client.server_info()
    assert no_sleep == [7.0]


def test_retry_after_http_date() -> None:
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    seconds = retry_after_seconds(httpx.Headers({"retry-after": date}), now=now)
    assert seconds is not None and 28 <= seconds <= 31


def test_retry_after_over_the_cap_falls_back_to_backoff() -> None:
    error = vt.RateLimitError("slow", status_code=429, headers=httpx.Headers({"retry-after": "3600"}))
    delay = Backoff(initial=0.5, maximum=8, retry_after_cap=60).delay(1, error)
    assert 0.375 <= delay <= 0.5


def test_backoff_is_exponential_and_capped() -> None:
    backoff = Backoff(initial=0.5, maximum=8)
    delays = [backoff.delay(attempt, None) for attempt in range(1, 9)]
    assert 0.375 <= delays[0] <= 0.5
    assert 0.75 <= delays[1] <= 1.0
    assert all(d <= 8 for d in delays)
    assert delays[-1] >= 6


@pytest.mark.parametrize("value", ["soon", "", "Wed, 99 Foo 2026"])
def test_bad_retry_after_is_ignored(value: str) -> None:
    assert retry_after_seconds(httpx.Headers({"retry-after": value})) is None


# --------------------------------------------------------------------------------- the sealed transport


def test_fetch_sends_none_of_an_injected_clients_auth_headers_or_cookies(httpx_mock: HTTPXMock) -> None:
    """A user-given image URL is fetched without the key, the injected client's auth, headers or cookies."""
    from vllm_tasks._sync.fetching import fetch_url
    from vllm_tasks._sync.transport import SyncTransport
    from vllm_tasks.config import ClientSettings

    httpx_mock.add_response(url="https://images.example/page.png", content=b"png bytes")
    http = httpx.Client(
        auth=("user", "secret"), headers={"X-Team": "rag", "Authorization": "Bearer k"}, cookies={"s": "1"}
    )
    config = ClientSettings(BASE, api_key="sk-key", timeout=5.0, max_retries=0, headers={"X-Extra": "1"})
    response = fetch_url(SyncTransport(http, config), "https://images.example/page.png", timeout=5.0)
    assert response.content == b"png bytes"
    sent = httpx_mock.get_requests()[0]
    assert {"authorization", "x-team", "x-extra", "cookie"}.isdisjoint(sent.headers)
    assert sent.headers["user-agent"].startswith("vllm-tasks/")
    http.close()


def test_json_bodies_are_encoded_with_orjson_and_fall_back_for_what_it_refuses() -> None:
    import json

    import numpy as np

    from vllm_tasks.transport import json_bytes

    assert json.loads(json_bytes({"input": ["é", "b"], "ids": np.arange(3), "n": 1.5})) == {
        "input": ["é", "b"],
        "ids": [0, 1, 2],
        "n": 1.5,
    }
    assert json.loads(json_bytes({1: "non-string key"})) == {"1": "non-string key"}


def test_json_object_types_every_bad_answer() -> None:
    from vllm_tasks.responses import json_object

    assert json_object(httpx.Response(200, json={"count": 3}), "/tokenize") == {"count": 3}
    with pytest.raises(vt.APIError, match="/tokenize: the server's answer is not JSON"):
        json_object(httpx.Response(200, text="<html>"), "/tokenize")
    with pytest.raises(vt.APIError, match="unexpected answer"):
        json_object(httpx.Response(200, json=[1, 2]), "/tokenize")


def test_a_missing_optional_package_names_the_extra() -> None:
    from vllm_tasks.dependencies import require

    with pytest.raises(vt.MissingDependency, match=r'pip install "vllm-tasks\[audio\]"') as raised:
        require("no_such_module_for_vllm_tasks", "audio", "decoding audio")
    assert isinstance(raised.value, ImportError) and raised.value.extra == "audio"
    assert require("json", "audio", "x").__name__ == "json"


def test_fetch_errors_are_one_family() -> None:
    image = vt.InputFetchError("image", "https://x/a.png", "the host answered HTTP 404", kind="image_fetch")
    audio = vt.InputFetchError("audio", "https://x/a.wav", "could not connect", kind="audio_fetch")
    assert isinstance(image, vt.InvalidInputError) and image.kind == "image_fetch"
    assert isinstance(audio, vt.InvalidInputError) and audio.kind == "audio_fetch"
    assert type(image).__mro__ == (
        vt.InputFetchError,
        vt.InvalidInputError,
        vt.VLLMTasksError,
        ValueError,
        Exception,
        BaseException,
        object,
    )
    assert audio.source == "https://x/a.wav" and "could not be fetched (could not connect)" in str(audio)


def test_no_exception_chain_carries_the_api_key(make_client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_exception(httpx.ConnectError("refused"), is_reusable=True)
    client = make_client(api_key="sk-secret-key")
    with pytest.raises(vt.APIConnectionError) as raised:
        client.server_info()
    chain: BaseException | None = raised.value
    while chain is not None:
        request = getattr(chain, "_request", None)
        assert request is None or "sk-secret-key" not in str(request.headers)
        chain = chain.__cause__ or chain.__context__
    cause = raised.value.__cause__
    assert isinstance(cause, httpx.ConnectError) and str(cause) == "refused"
    with pytest.raises(RuntimeError):
        _ = cause.request  # httpx raises when no request is attached


# ------------------------------------------------------------- Retry-After over the cap, broken answers


@pytest.mark.parametrize(
    ("status", "kind", "header"),
    [
        (429, vt.RateLimitError, {"retry-after": "3600"}),
        (503, vt.ServiceUnavailableError, {"retry-after": "120"}),
        (429, vt.RateLimitError, {"retry-after-ms": "90000"}),
    ],
)
def test_retry_after_over_the_cap_ends_the_retries_naming_the_wait(
    status: int,
    kind: type[vt.APIStatusError],
    header: dict[str, str],
    make_client: Any,
    httpx_mock: HTTPXMock,
    no_sleep: list[float],
) -> None:
    """A server asking for a longer wait than the cap (60 s) is not retried within a second."""
    httpx_mock.add_response(url=VERSION, json={"version": "0.32.0"}, is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/openapi.json", json={"paths": {}}, is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/v1/models", status_code=status, headers=header, is_reusable=True)
    client = make_client(max_retries=3)
    with pytest.raises(kind) as raised:
        client.server_info()
    asked = retry_after_seconds(httpx.Headers(header))
    assert raised.value.retry_after == asked  # type: ignore[attr-defined]
    assert f"the server asked to wait {asked:g} s, over the client's cap of 60 s" in str(raised.value)
    assert len([r for r in httpx_mock.get_requests() if r.url.path == "/v1/models"]) == 1
    assert no_sleep == []


def test_retry_after_within_the_cap_is_still_retried(
    make_client: Any, httpx_mock: HTTPXMock, no_sleep: list[float]
) -> None:
    httpx_mock.add_response(url=VERSION, json={"version": "0.32.0"}, is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/openapi.json", json={"paths": {}}, is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/v1/models", status_code=429, headers={"retry-after": "60"})
    httpx_mock.add_response(url=f"{BASE}/v1/models", json={"data": [{"id": "m"}]})
    assert make_client(max_retries=1).server_info().default_model == "m"
    assert no_sleep == [60.0]


@pytest.mark.parametrize(
    "error",
    [httpx.ReadError("Connection reset by peer"), httpx.RemoteProtocolError("peer closed connection")],
)
def test_a_connection_broken_mid_answer_is_not_reported_as_could_not_connect(
    error: httpx.TransportError, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    httpx_mock.add_exception(error, is_reusable=True)
    with pytest.raises(vt.APIConnectionError) as raised:
        make_client().server_info()
    assert "the connection broke while reading the answer" in str(raised.value)
    assert "could not connect" not in str(raised.value)
    assert str(error) in str(raised.value)


@pytest.mark.parametrize(
    ("error", "kind", "words"),
    [
        (httpx.ConnectError("Connection refused"), vt.APIConnectionError, "could not connect"),
        (httpx.ConnectTimeout("slow dns"), vt.APITimeoutError, "timed out connecting"),
        (httpx.ReadTimeout("slow"), vt.APITimeoutError, "timed out waiting for the answer"),
        (httpx.WriteError("broken pipe"), vt.APIConnectionError, "broke while sending the request"),
    ],
)
def test_connection_failures_name_the_phase(
    error: httpx.TransportError, kind: type[Exception], words: str, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    httpx_mock.add_exception(error, is_reusable=True)
    with pytest.raises(kind, match=words):
        make_client().server_info()


# ---------------------------------------------------------------- Ctrl-C on the sync client's send_all


class _BlockingServer:
    """Answers through httpx.MockTransport: every request blocks until released, then gets a 503 (which
    the transport would retry); records which request indices were sent and when."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.sent: list[tuple[int, float]] = []
        self.four_in_flight = threading.Event()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        index = json.loads(request.content)["i"]
        with self.lock:
            self.sent.append((index, time.monotonic()))
            if len(self.sent) == 4:
                self.four_in_flight.set()
        if index == 0 and getattr(self, "answer_first", False):
            return httpx.Response(200, json={"ok": True})
        self.release.wait(10)
        return httpx.Response(503, json={"error": {"message": "busy"}})


def _blocking_transport(server: _BlockingServer) -> Any:
    from vllm_tasks._sync.transport import SyncTransport
    from vllm_tasks.config import ClientSettings

    config = ClientSettings(BASE, timeout=30.0, max_retries=3)
    return SyncTransport(httpx.Client(transport=httpx.MockTransport(server)), config)


@pytest.fixture
def sigint_raises() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt`` in this process, as at a terminal: a pytest started in the
    background of a script (scripts/test.sh runs two tiers side by side) inherits SIGINT ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("sigint_raises")
def test_ctrl_c_stops_send_all_at_once_and_nothing_is_sent_after_it() -> None:
    """A real SIGINT to the main thread while 4 requests are in flight: control returns at once, no
    queued request starts and the in-flight ones are not retried (they would be: 503, max_retries=3)."""
    from vllm_tasks.transport import Request

    server = _BlockingServer()
    transport = _blocking_transport(server)
    requests = [Request("POST", "/v1/embeddings", json={"i": i}) for i in range(12)]
    interrupted_at: list[float] = []

    def press_ctrl_c() -> None:
        server.four_in_flight.wait(30)  # long: two test processes and a vLLM server share 2 cores in CI
        interrupted_at.append(time.monotonic())
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    releaser = threading.Timer(30.0, server.release.set)  # unblocks the old code, which waited for them
    releaser.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            transport.send_all(requests, concurrency=4)
        returned_at = time.monotonic()
        assert returned_at - interrupted_at[0] < 2.0
        server.release.set()  # the in-flight answers (503) now arrive: they must not be retried
        time.sleep(0.3)
        with server.lock:
            after = [index for index, at in server.sent if at > interrupted_at[0]]
            indices = [index for index, _ in server.sent]
        assert after == []
        assert sorted(indices) == [0, 1, 2, 3]
    finally:
        releaser.cancel()
        server.release.set()
        transport.http.close()


def test_a_failure_in_on_response_stops_send_all_without_retrying_the_requests_in_flight() -> None:
    from vllm_tasks.transport import Request

    server = _BlockingServer()
    server.answer_first = True  # type: ignore[attr-defined]
    transport = _blocking_transport(server)
    requests = [Request("POST", "/v1/embeddings", json={"i": i}) for i in range(12)]

    raised_at: list[float] = []

    def on_response(index: int, _response: httpx.Response) -> None:
        server.four_in_flight.wait(30)
        raised_at.append(time.monotonic())
        raise RuntimeError("stop")

    releaser = threading.Timer(30.0, server.release.set)  # unblocks the old code, which waited for them
    releaser.start()
    try:
        with pytest.raises(RuntimeError, match="stop"):
            transport.send_all(requests, concurrency=4, on_response=on_response)
        assert time.monotonic() - raised_at[0] < 2.0
        server.release.set()
        time.sleep(0.3)
        with server.lock:
            indices = [index for index, _ in server.sent]
        assert len(indices) == len(set(indices)), f"a request was retried after the failure: {indices}"
        assert len(indices) <= 5  # the 4 first, and at most one a worker took while on_response ran
    finally:
        releaser.cancel()
        server.release.set()
        transport.http.close()
