from __future__ import annotations

from typing import Any

import httpx
import pytest

import vllm_tasks as vt


@pytest.mark.parametrize("cls", [vt.Client, vt.AsyncClient])
@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"base_url": "localhost:8000"}, "base_url"),
        ({"base_url": "ftp://host"}, "base_url"),
        ({"base_url": "http://"}, "base_url"),
        ({"base_url": 8000}, "base_url"),
        ({"timeout": -1}, "timeout"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": "10"}, "timeout"),
        ({"timeout": True}, "timeout"),
        ({"api_key": 12345}, "api_key"),
        ({"api_key": ""}, "api_key"),
        ({"max_retries": -1}, "max_retries"),
        ({"max_retries": 1.5}, "max_retries"),
        ({"model": ""}, "model"),
        ({"headers": {"X-A": 1}}, "headers['X-A']"),
        ({"http_client": object()}, "http_client"),
    ],
)
def test_bad_constructor_arguments_fail_at_construction(
    cls: type, kwargs: dict[str, Any], field: str
) -> None:
    kwargs.setdefault("base_url", "http://localhost:8000")
    with pytest.raises(vt.InvalidInputError) as info:
        cls(**kwargs)
    assert info.value.field == field
    assert field.split("[", maxsplit=1)[0] in str(info.value)


def test_wrong_kind_of_http_client_is_refused() -> None:
    with httpx.Client() as sync_http, pytest.raises(vt.InvalidInputError, match="AsyncClient"):
        vt.AsyncClient(http_client=sync_http)  # type: ignore[arg-type]


def test_non_string_api_key_is_not_echoed() -> None:
    with pytest.raises(vt.InvalidInputError) as info:
        vt.Client(api_key=b"sekrit-bytes")  # type: ignore[arg-type]
    assert "sekrit" not in str(info.value)
    assert "bytes" in str(info.value)


def test_environment_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_TASKS_BASE_URL", "http://from-env:9000/")
    monkeypatch.setenv("VLLM_API_KEY", "env-key")
    with vt.Client() as client:
        assert client.base_url == "http://from-env:9000"
        assert "env-key" not in repr(client)
        assert "api_key=set" in repr(client)


def test_default_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_TASKS_BASE_URL", raising=False)
    with vt.Client() as client:
        assert client.base_url == "http://localhost:8000"


def test_openai_style_v1_suffix_is_removed() -> None:
    with vt.Client("http://host:8000/v1/") as client:
        assert client.base_url == "http://host:8000"


def test_injected_http_client_is_not_closed_or_mutated() -> None:
    http = httpx.Client(headers={"X-Mine": "1"})
    with vt.Client("http://host:8000", http_client=http, api_key="k"):
        pass
    assert not http.is_closed
    assert "authorization" not in http.headers
    assert http.headers["X-Mine"] == "1"
    http.close()


@pytest.mark.parametrize(
    "headers",
    [{"X-Id": "a\r\nInjected: yes"}, {"X-Id": "é"}, {"X-Id": 5}, {"": "v"}],
)
def test_client_headers_are_checked_like_extra_headers(headers: dict[str, object]) -> None:
    with pytest.raises(vt.InvalidInputError, match="headers"):
        vt.Client("http://localhost:8000", headers=headers)  # type: ignore[arg-type]


@pytest.mark.parametrize("timeout", [float("inf"), float("nan"), httpx.Timeout(5.0, read=-1.0)])
def test_client_timeouts_must_be_finite_and_positive(timeout: object) -> None:
    with pytest.raises(vt.InvalidInputError, match="timeout"):
        vt.Client("http://localhost:8000", timeout=timeout)  # type: ignore[arg-type]
