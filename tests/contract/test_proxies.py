"""Faults through real components: a real nginx and our fault proxy in front of the real `embed` server.

Issue 11, item 5. For every case the SDK either returns exactly the vectors a direct call to the same
server returns (``assert_allclose``, 1e-6), or raises a typed ``VLLMTasksError``; each test asserts which.
The one test marked ``xfail(strict=True)`` asserts what no client can know (its reason says why); it
turns into a failure (XPASS) if that ever changes.

The proxies are the ``proxies`` fixture (tests/contract/conftest.py, server-fixtures/nginx_proxy.py
and server-fixtures/fault_proxy.py); every client test runs on both ``Client`` and ``AsyncClient``.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from nginx_proxy import AUTH_PASSWORD, AUTH_USER

import vllm_tasks as vt
from tests.clients import client_factory

pytestmark = pytest.mark.contract

TEXTS = [
    "hello world",
    "vLLM serves embeddings",
    "The quick brown fox jumps over the lazy dog.",
    "Paris is the capital of France.",
    "numpy arrays out, never lists of floats",
]
#: Four texts whose one request is over the small_body block's 2 KiB, while two of them fit.
LONG_TEXTS = [f"document {i}: " + "a reverse proxy sits in front of the replicas. " * 14 for i in range(4)]
FORMATS = ["float", "base64", "bytes", "bytes_only"]
EMBEDDINGS = "/v1/embeddings"


@pytest.fixture(params=["sync", "async"])
def make_client(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Factory for a client of each kind (``max_retries`` 0 unless given); closes them afterwards."""
    yield from client_factory(request.param)


def direct(proxies: Any, make_client: Callable[..., Any], texts: list[str], **kw: Any) -> np.ndarray:
    """The vectors of a direct call to the same vLLM server (no proxy)."""
    return np.asarray(make_client(proxies.server.base_url).embed(texts, **kw).vectors)


def assert_same(got: Any, want: np.ndarray) -> None:
    vectors = np.asarray(got.vectors)
    assert vectors.shape == want.shape, (vectors.shape, want.shape)
    np.testing.assert_allclose(vectors, want, rtol=0, atol=1e-6)


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


# --- nginx: the baseline --------------------------------------------------------------------------


@pytest.mark.parametrize("encoding_format", FORMATS)
def test_nginx_in_front_changes_nothing(proxies: Any, make_client: Any, encoding_format: str) -> None:
    want = direct(proxies, make_client, TEXTS, encoding_format=encoding_format)
    got = make_client(proxies.nginx.url("plain")).embed(TEXTS, encoding_format=encoding_format)
    assert_same(got, want)


@pytest.mark.parametrize("encoding_format", ["float", "base64", "bytes_only"])
def test_nginx_default_buffers_full_batch(proxies: Any, make_client: Any, encoding_format: str) -> None:
    # 64 inputs (one default batch) in the formats whose answer headers stay small.
    texts = [f"{t} #{i}" for i in range(13) for t in TEXTS][:64]
    want = direct(proxies, make_client, texts, encoding_format=encoding_format)
    assert_same(make_client(proxies.nginx.url("plain")).embed(texts, encoding_format=encoding_format), want)


def test_nginx_default_buffers_default_format(proxies: Any, make_client: Any) -> None:
    # bytes (the default) sends one `metadata` header entry per item (~110 B); a batch of 64 outgrows
    # nginx's 4 KiB proxy_buffer_size (502 "upstream sent too big header"): the SDK resends in 24s.
    texts = [f"{t} #{i}" for i in range(13) for t in TEXTS][:64]
    want = direct(proxies, make_client, texts)
    assert_same(make_client(proxies.nginx.url("plain")).embed(texts), want)


# --- nginx: client_max_body_size ------------------------------------------------------------------


def test_413_splits_the_batch_and_succeeds(proxies: Any, make_client: Any) -> None:
    want = direct(proxies, make_client, LONG_TEXTS)
    assert_same(make_client(proxies.nginx.url("small_body")).embed(LONG_TEXTS), want)


def test_413_for_one_input_is_typed(proxies: Any, make_client: Any) -> None:
    client = make_client(proxies.nginx.url("small_body"), max_retries=2)
    with pytest.raises(vt.RequestTooLargeError) as caught:
        client.embed(["x " * 1500])  # one input over 2 KiB: nothing left to split
    assert caught.value.status_code == 413


def test_413_rerank_splits_and_matches_direct(proxies: Any, make_client: Any) -> None:
    query = "where do the replicas sit?"
    want = make_client(proxies.server.base_url).rerank(query, LONG_TEXTS * 2)
    got = make_client(proxies.nginx.url("small_body")).rerank(query, LONG_TEXTS * 2)
    assert [hit.index for hit in got.results] == [hit.index for hit in want.results]
    np.testing.assert_allclose(got.scores, want.scores, rtol=0, atol=1e-6)
    assert got.num_requests > 1


# --- nginx: basic auth ----------------------------------------------------------------------------


def test_basic_auth_missing_is_typed(proxies: Any, make_client: Any) -> None:
    with pytest.raises(vt.AuthenticationError) as caught:
        make_client(proxies.nginx.url("auth"), max_retries=2).embed(TEXTS)
    assert caught.value.status_code == 401


def test_basic_auth_header_gives_exact_vectors(proxies: Any, make_client: Any) -> None:
    want = direct(proxies, make_client, TEXTS)
    client = make_client(proxies.nginx.url("auth"), headers=basic(AUTH_USER, AUTH_PASSWORD))
    assert_same(client.embed(TEXTS), want)


def test_basic_auth_in_the_url_gives_exact_vectors(proxies: Any, make_client: Any) -> None:
    want = direct(proxies, make_client, TEXTS)
    url = proxies.nginx.url("auth").replace("http://", f"http://{AUTH_USER}:{AUTH_PASSWORD}@")
    assert_same(make_client(url).embed(TEXTS), want)


def test_basic_auth_wrong_password_is_typed_and_not_shown(proxies: Any, make_client: Any) -> None:
    password = "wrong-password-0123"
    client = make_client(proxies.nginx.url("auth").replace("http://", f"http://{AUTH_USER}:{password}@"))
    with pytest.raises(vt.AuthenticationError) as caught:
        client.embed(TEXTS)
    assert password not in str(caught.value) and password not in repr(client)
    assert password not in (caught.value.url or "")


# --- nginx: redirects -----------------------------------------------------------------------------


def test_http_to_https_redirect_is_a_typed_error(proxies: Any, make_client: Any) -> None:
    # Before the response checks: an UnexpectedResponse (kind "decode") about the page's length, not
    # naming the redirect.
    with pytest.raises(vt.VLLMTasksError) as caught:
        make_client(proxies.nginx.url("redirect"), max_retries=2).embed(TEXTS)
    assert "301" in str(caught.value)


def test_redirected_route_is_a_typed_error(proxies: Any, make_client: Any) -> None:
    # Before the response checks: the 307 page was taken for vLLM's answer (no error).
    with pytest.raises(vt.VLLMTasksError) as caught:
        make_client(proxies.nginx.url("redirect_route")).embed(TEXTS)
    assert "307" in str(caught.value)


# --- nginx: a 200 HTML page instead of vLLM's answer ----------------------------------------------


@pytest.mark.parametrize("encoding_format", ["auto", "float", "base64"])
def test_maintenance_page_with_200_is_a_typed_error(
    proxies: Any, make_client: Any, encoding_format: str
) -> None:
    # Before the response checks: the 120-byte page came back as float32 vectors, whatever the format.
    with pytest.raises(vt.VLLMTasksError):
        make_client(proxies.nginx.url("maintenance")).embed(TEXTS, encoding_format=encoding_format)


# --- nginx: proxy_read_timeout and a stopped upstream ---------------------------------------------


def test_gateway_timeout_504_is_typed_and_retried(proxies: Any, make_client: Any) -> None:
    proxies.gateway.plan(EMBEDDINGS, "delay:3", "delay:3")  # nginx gives up after 2 s
    client = make_client(proxies.nginx.url("gateway"), max_retries=1)
    with pytest.raises(vt.GatewayTimeoutError, match="proxy_read_timeout") as caught:
        client.embed(TEXTS)
    assert caught.value.status_code == 504
    assert proxies.gateway.count(EMBEDDINGS) == 2  # the first attempt and one retry


def test_gateway_timeout_504_once_then_exact_vectors(proxies: Any, make_client: Any) -> None:
    want = direct(proxies, make_client, TEXTS)
    proxies.gateway.plan(EMBEDDINGS, "delay:3")
    assert_same(make_client(proxies.nginx.url("gateway"), max_retries=1).embed(TEXTS), want)
    assert proxies.gateway.count(EMBEDDINGS) == 2


def test_upstream_down_502_is_typed_then_recovers(proxies: Any, make_client: Any) -> None:
    want = direct(proxies, make_client, TEXTS)
    client = make_client(proxies.nginx.url("gateway"))
    assert_same(client.embed(TEXTS), want)
    proxies.gateway.stop()
    with pytest.raises(vt.InternalServerError) as caught:
        client.embed(TEXTS)
    assert caught.value.status_code == 502
    proxies.gateway.start()
    assert_same(client.embed(TEXTS), want)


def test_upstream_down_before_first_call_is_typed(proxies: Any, make_client: Any) -> None:
    proxies.gateway.stop()
    with pytest.raises(vt.InternalServerError) as caught:
        make_client(proxies.nginx.url("gateway")).embed(TEXTS)
    assert caught.value.status_code == 502


def test_upstream_back_during_retries_gives_exact_vectors(proxies: Any, make_client: Any) -> None:
    want = direct(proxies, make_client, TEXTS)
    client = make_client(proxies.nginx.url("gateway"), max_retries=4)
    client.server_info()
    proxies.gateway.stop()
    comeback = threading.Timer(0.8, proxies.gateway.start)
    comeback.start()
    try:
        assert_same(client.embed(TEXTS), want)
    finally:
        comeback.join()


# --- our fault proxy: what nginx cannot do --------------------------------------------------------


def test_trickled_answer_gives_exact_vectors(proxies: Any, make_client: Any) -> None:
    want = direct(proxies, make_client, TEXTS)
    proxies.faults.plan(EMBEDDINGS, "trickle:128:0.01")
    assert_same(make_client(proxies.faults.base_url, timeout=5).embed(TEXTS), want)


def test_stalled_answer_times_out_typed_and_retried(proxies: Any, make_client: Any) -> None:
    proxies.faults.plan(EMBEDDINGS, "stall:3", "stall:3")
    client = make_client(proxies.faults.base_url, timeout=0.7, max_retries=1)
    with pytest.raises(vt.APITimeoutError):
        client.embed(TEXTS)
    assert proxies.faults.count(EMBEDDINGS) == 2


@pytest.mark.parametrize("mode", ["reset", "chunked_truncated", "close"])
def test_broken_answer_every_time_is_typed_and_retried(proxies: Any, make_client: Any, mode: str) -> None:
    proxies.faults.plan(EMBEDDINGS, mode, mode, mode)
    with pytest.raises(vt.APIConnectionError):
        make_client(proxies.faults.base_url, max_retries=2).embed(TEXTS)
    assert proxies.faults.count(EMBEDDINGS) == 3


@pytest.mark.parametrize("mode", ["reset", "chunked_truncated", "close", "stall:3"])
def test_broken_answer_once_then_exact_vectors(proxies: Any, make_client: Any, mode: str) -> None:
    want = direct(proxies, make_client, TEXTS)
    proxies.faults.plan(EMBEDDINGS, mode)
    assert_same(make_client(proxies.faults.base_url, max_retries=1, timeout=1.5).embed(TEXTS), want)
    assert proxies.faults.count(EMBEDDINGS) == 2


@pytest.mark.parametrize("mode", ["reset", "chunked_truncated"])
def test_broken_mid_body_is_not_called_could_not_connect(proxies: Any, make_client: Any, mode: str) -> None:
    # It did connect and got the head; before the fix the message said "could not connect".
    proxies.faults.plan(EMBEDDINGS, mode)
    with pytest.raises(vt.APIConnectionError) as caught:
        make_client(proxies.faults.base_url).embed(TEXTS)
    assert "could not connect" not in str(caught.value)


@pytest.mark.parametrize("encoding_format", ["float", "base64", "bytes"])
def test_short_well_framed_body_is_typed(proxies: Any, make_client: Any, encoding_format: str) -> None:
    # Half the body with a matching Content-Length: looks complete, is not.
    proxies.faults.plan(EMBEDDINGS, "short_body")
    with pytest.raises(vt.APIError):
        make_client(proxies.faults.base_url).embed(TEXTS, encoding_format=encoding_format)


def test_short_bytes_only_body_is_typed_once_the_width_is_known(proxies: Any, make_client: Any) -> None:
    client = make_client(proxies.faults.base_url)
    want = client.embed(TEXTS[:4], encoding_format="bytes_only").vectors
    proxies.faults.plan(EMBEDDINGS, "short_body")
    with pytest.raises(vt.UnexpectedResponse, match="earlier answers were"):
        client.embed(TEXTS[:4], encoding_format="bytes_only")
    assert_same(client.embed(TEXTS[:4], encoding_format="bytes_only"), want)


@pytest.mark.xfail(
    strict=True,
    reason="a limit, not a bug: a bytes_only body (no metadata) cut in half with a matching "
    "Content-Length splits evenly into rows of half the width, and a client that has seen no answer "
    "from this model yet has nothing to compare the width with (vLLM reports no width elsewhere). "
    "Use bytes or base64, or embed once first, where a cut body matters",
)
def test_short_bytes_only_body_on_the_first_call_is_typed(proxies: Any, make_client: Any) -> None:
    proxies.faults.plan(EMBEDDINGS, "short_body")
    with pytest.raises(vt.APIError):
        make_client(proxies.faults.base_url).embed(TEXTS[:4], encoding_format="bytes_only")
