"""``ClientSettings.transport``: what a client's own ``httpx`` client sends with. ``"auto"`` is urllib3's pool
under ``Client``, and httpx's own transport wherever that would change behaviour: a proxy in the
environment, a mocked httpx (pytest-httpx, respx), urllib3 missing, and under ``AsyncClient``."""

from __future__ import annotations

import pickle
import sys

import httpx
import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks.transport import own_http_client

PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture(autouse=True)
def no_proxy_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)


def sends_with(http: httpx.Client | httpx.AsyncClient) -> type:
    return type(http._transport)


def test_auto_is_urllib3_under_client_and_httpx_under_async_client() -> None:
    with own_http_client(httpx.Client, "auto") as http:
        assert sends_with(http) is vt.Urllib3Transport
    assert sends_with(own_http_client(httpx.AsyncClient, "auto")) is httpx.AsyncHTTPTransport


def test_httpx_is_httpx_own_transport() -> None:
    with own_http_client(httpx.Client, "httpx") as http:
        assert sends_with(http) is httpx.HTTPTransport


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "http_proxy", "ALL_PROXY"])
def test_a_proxy_in_the_environment_keeps_httpx_which_reads_it(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "http://proxy.test:3128")
    with own_http_client(httpx.Client, "auto") as http:
        assert sends_with(http) is httpx.HTTPTransport
        assert http._mounts  # httpx mounted the proxy, as for any httpx.Client()


def test_a_mocked_httpx_keeps_httpx_so_the_mock_sees_the_requests(httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url="http://vllm.test:8000/version", json={"version": "0.32.0"})
    with own_http_client(httpx.Client, "auto") as http:
        assert sends_with(http) is httpx.HTTPTransport
        assert http.get("http://vllm.test:8000/version").json() == {"version": "0.32.0"}


def test_without_urllib3_the_core_install_uses_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "urllib3", None)  # import urllib3 now raises ImportError
    with own_http_client(httpx.Client, "auto") as http:
        assert sends_with(http) is httpx.HTTPTransport
    with pytest.raises(vt.MissingDependency, match="fast"):
        vt.Urllib3Transport()


def test_the_setting_is_checked_kept_and_pickled() -> None:
    with pytest.raises(vt.InvalidInputError, match="transport"):
        vt.ClientSettings(transport="requests")  # type: ignore[arg-type]
    settings = vt.ClientSettings(transport="httpx")
    assert pickle.loads(pickle.dumps(settings)).transport == "httpx"
    assert settings.replace(transport="auto").transport == "auto"
    assert vt.ClientSettings().transport == "auto" and "transport='httpx'" in repr(settings)
