"""A secret in the base URL's query (``?key=...``, as some gateways ask) is shown nowhere the SDK writes:
not in the clients' or the settings' ``repr``, ``base_url``, an error's message or ``url``, nor the SDK's own
log lines; the requests still go to the real URL, each route's path before the query."""

from __future__ import annotations

import logging
import pickle
from typing import Any

import httpx
import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks.redaction import redact_text, redact_url, route_url

SECRET = "s3cr3t-QUERY"
BASE = f"http://gateway.test:8000/vllm?key={SECRET}&region=eu"
SHOWN = "http://gateway.test:8000/vllm?key=***&region=***"


def test_reprs_and_base_url_hide_the_query_values(make_client: Any) -> None:
    made = make_client(BASE)
    client = getattr(made, "inner", made)  # the AsyncClient itself, not the tests' wrapper
    settings = vt.ClientSettings(BASE)
    for text in (repr(client), client.base_url, repr(settings), settings.display_url):
        assert SECRET not in text and SHOWN in text
    assert pickle.loads(pickle.dumps(settings)).base_url == BASE  # workers still send the real URL


def test_requests_go_to_the_real_url_and_errors_hide_its_query(
    make_client: Any, httpx_mock: HTTPXMock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="vllm_tasks")
    httpx_mock.add_exception(httpx.ConnectError("refused"), is_reusable=True)
    with pytest.raises(vt.APIConnectionError) as caught:
        make_client(BASE).server_info()
    sent = [str(request.url) for request in httpx_mock.get_requests()]
    assert sent and all(url.startswith("http://gateway.test:8000/vllm/") for url in sent)
    assert all(url.endswith(f"?key={SECRET}&region=eu") for url in sent)
    error = caught.value
    assert SECRET not in str(error) and SECRET not in repr(vars(error))
    assert "http://gateway.test:8000/vllm/" in str(error) and "?key=***&region=***" in str(error)
    assert SECRET not in "\n".join(record.getMessage() for record in caplog.records)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://h/p?token=abc", "https://h/p?token=***"),
        ("https://u:pw@h:1/p?a=1&b&c=#frag", "https://h:1/p?a=***&***&c=#frag"),
        ("https://h/p", "https://h/p"),
        ("https://h/p?", "https://h/p?"),
    ],
)
def test_redact_url_hides_credentials_and_query_values(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert redact_text(f"GET {url} failed") == f"GET {shown} failed"


def test_redact_url_keeps_the_query_where_the_url_must_still_work() -> None:
    assert redact_url("https://u:pw@cdn/a.wav?sig=1", query=False) == "https://cdn/a.wav?sig=1"


def test_route_url_puts_the_path_before_the_query() -> None:
    assert (
        route_url(BASE, "/v1/embeddings")
        == f"http://gateway.test:8000/vllm/v1/embeddings?key={SECRET}&region=eu"
    )
    assert route_url("http://u:p@h:8000/", "/health") == "http://h:8000/health"
