"""``ClientSettings``: one frozen, picklable value for everything a client is configured with, and the
clients' ``settings``, ``from_settings`` and ``with_options`` (issue 22). Over real HTTP (jobs, adapters,
Ray callables): tests/component/test_client_settings.py."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
import re
from typing import Any

import httpx
import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import cli

from ..clients import AsyncAsSync
from .conftest import BASE

SECRET = "sk-s3cr3t"


def unwrapped(client: Any) -> Any:
    """The client itself (``make_client`` wraps an ``AsyncClient`` to be called synchronously)."""
    return getattr(client, "inner", client)


def callable_sync(client: Any) -> Any:
    """A client made by ``with_options``/``from_settings``, callable like ``make_client``'s."""
    return AsyncAsSync(client) if isinstance(client, vt.AsyncClient) else client


# --------------------------------------------------------------------------------------------------
# The value
# --------------------------------------------------------------------------------------------------


def test_defaults_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_TASKS_BASE_URL", "http://from-env:9000/v1/")
    monkeypatch.setenv("VLLM_API_KEY", "env-key")
    settings = vt.ClientSettings()
    assert (settings.base_url, settings.api_key, settings.model) == ("http://from-env:9000", "env-key", None)
    assert settings.timeout == httpx.Timeout(600.0, connect=10.0) and settings.max_retries == 2
    assert settings.headers == {} and settings.fetch_limits == vt.FetchLimits()
    assert vt.ClientSettings(timeout=5).timeout == httpx.Timeout(5.0)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"base_url": "localhost:8000"}, "base_url"),
        ({"api_key": 12345}, "api_key"),
        ({"model": " "}, "model"),
        ({"timeout": 0}, "timeout"),
        ({"max_retries": -1}, "max_retries"),
        ({"headers": {"X-A": 1}}, "headers['X-A']"),
        ({"fetch_limits": {"max_bytes": 10}}, "fetch_limits"),
    ],
)
def test_bad_settings_name_the_setting(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(vt.InvalidInputError) as info:
        vt.ClientSettings(**{"base_url": "http://localhost:8000", **kwargs})
    assert info.value.field == field


def test_repr_and_str_show_neither_the_key_nor_url_credentials_nor_header_values() -> None:
    keyed = vt.ClientSettings("http://vllm:8000", api_key=SECRET, headers={"X-Token": "hdr-s3cr3t"})
    basic = vt.ClientSettings(f"http://user:{SECRET}@vllm:8000", api_key=None)
    for settings in (keyed, basic):
        for text in (repr(settings), str(settings), f"{settings}"):
            assert "s3cr3t" not in text and "base_url='http://vllm:8000'" in text
    assert "api_key=set" in repr(keyed) and "['X-Token']" in repr(keyed)
    assert basic.base_url == f"http://user:{SECRET}@vllm:8000"  # kept for requests (Basic auth)


def test_pickling_keeps_every_setting_the_key_included() -> None:
    settings = vt.ClientSettings(
        "http://vllm:8000",
        api_key=SECRET,
        model="minilm",
        timeout=httpx.Timeout(30.0, connect=2.0),
        max_retries=5,
        headers={"X-Team": "rag"},
        fetch_limits=vt.FetchLimits(max_bytes=1_000, refuse_private=True),
    )
    copy = pickle.loads(pickle.dumps(settings))
    assert copy == settings and hash(copy) == hash(settings)
    assert copy.api_key == SECRET and copy.request_headers["Authorization"] == f"Bearer {SECRET}"
    with pytest.raises(TypeError):
        copy.headers["X-Team"] = "other"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.max_retries = 0  # type: ignore[misc]


def test_replace_checks_the_new_values_and_names_unknown_settings() -> None:
    settings = vt.ClientSettings("http://vllm:8000", api_key=SECRET)
    moved = settings.replace(base_url="http://gpu2:8000/v1", max_retries=0)
    assert (moved.base_url, moved.max_retries, moved.api_key) == ("http://gpu2:8000", 0, SECRET)
    assert settings.base_url == "http://vllm:8000"
    with pytest.raises(vt.InvalidInputError) as info:
        settings.replace(apikey="typo", timout=3)
    assert info.value.field == "options" and "'apikey'" in str(info.value) and "'timout'" in str(info.value)
    assert "typo" not in str(info.value) and "api_key" in info.value.fix
    with pytest.raises(vt.InvalidInputError, match="timeout"):
        settings.replace(timeout=-1)


# --------------------------------------------------------------------------------------------------
# The clients
# --------------------------------------------------------------------------------------------------


def test_client_settings_hold_the_constructor_arguments(make_client: Any) -> None:
    limits = vt.FetchLimits(max_bytes=5_000)
    client = unwrapped(make_client(api_key=SECRET, model="m", headers={"X-A": "1"}, fetch_limits=limits))
    settings = client.settings
    assert (settings.base_url, settings.api_key, settings.model) == (BASE, SECRET, "m")
    assert (settings.headers, settings.fetch_limits, settings.max_retries) == ({"X-A": "1"}, limits, 0)
    assert SECRET not in repr(client) and client.http_client is None
    rebuilt = type(client).from_settings(settings)
    assert rebuilt.settings is settings and type(rebuilt) is type(client)
    callable_sync(rebuilt).close()


def test_with_options_makes_a_client_with_the_changes_and_leaves_this_one(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    httpx_mock.add_response(url="http://gpu2:8000/health", text="")
    client = make_client(api_key=SECRET, headers={"X-A": "1"})
    other = unwrapped(client).with_options(base_url="http://gpu2:8000", api_key="k2", headers={"X-B": "2"})
    assert type(other) is type(unwrapped(client)) and other.settings.max_retries == 0
    assert client.settings.api_key == SECRET and client.base_url == BASE
    copy = callable_sync(other)
    copy.wait_until_ready(timeout=5)
    sent = httpx_mock.get_requests()[0]
    assert (
        sent.headers["authorization"] == "Bearer k2"
        and sent.headers["x-b"] == "2"
        and "x-a" not in sent.headers
    )
    copy.close()


def test_with_options_refuses_unknown_names(make_client: Any) -> None:
    with pytest.raises(vt.InvalidInputError, match="'http_client'") as info:
        unwrapped(make_client()).with_options(http_client=httpx.Client(), max_retries=1)
    assert info.value.field == "options"


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_with_options_shares_an_injected_http_client_and_not_its_own(kind: str) -> None:
    http: Any = httpx.Client() if kind == "sync" else httpx.AsyncClient()
    cls: Any = vt.Client if kind == "sync" else vt.AsyncClient
    given = cls(BASE, http_client=http)
    assert given.with_options(model="m").http_client is http
    own = cls(BASE).with_options(model="m")
    assert own.http_client is None and own.model == "m"
    for client in (own, given):
        callable_sync(client).close()
    assert not http.is_closed  # the caller's, closed by the caller


@pytest.mark.parametrize("cls", [vt.Client, vt.AsyncClient])
def test_from_settings_refuses_what_is_not_settings(cls: Any) -> None:
    with pytest.raises(vt.InvalidInputError) as info:
        cls.from_settings({"base_url": BASE})
    assert info.value.field == "settings" and "ClientSettings" in str(info.value)
    wrong_http = httpx.AsyncClient() if cls is vt.Client else httpx.Client()
    with pytest.raises(vt.InvalidInputError) as info:
        cls.from_settings(vt.ClientSettings(BASE), http_client=wrong_http)
    assert info.value.field == "http_client"


def test_fetch_limits_changed_by_with_options_apply(make_client: Any, httpx_mock: HTTPXMock) -> None:
    strict = callable_sync(
        unwrapped(make_client()).with_options(fetch_limits=vt.FetchLimits(refuse_private=True))
    )
    with pytest.raises(vt.InputFetchError, match="non-public address"):
        strict.transcribe("http://127.0.0.1:9/a.wav")
    assert httpx_mock.get_requests() == []
    strict.close()


# --------------------------------------------------------------------------------------------------
# The CLI and the job hint
# --------------------------------------------------------------------------------------------------


def test_the_cli_builds_one_settings_value() -> None:
    args = cli.build_parser().parse_args(["--timeout", "7", "probe", "http://h:1/v1"])
    settings = cli.client_settings(args)
    assert isinstance(settings, vt.ClientSettings)
    assert (settings.base_url, settings.max_retries, settings.timeout.read) == ("http://h:1", 0, 7.0)
    job = cli.build_parser().parse_args(
        ["embed-file", "in.txt", "--out", "o.npy", "--url", "http://a:1", "--url", "b"]
    )
    assert cli.client_settings(job).base_url == "http://a:1"


def test_the_job_mismatch_hint_names_real_arguments() -> None:
    message = str(vt.jobs.JobMismatch("out.npy", ["input content: 'a' -> 'b'"]))
    arguments = re.findall(r"\b(\w+)=(True|False)\b", message)
    flags = re.findall(r"(--[\w-]+)", message)
    assert arguments == [("resume", "False")] and flags == ["--restart"]
    for job in (
        vt.embed_file,
        vt.aembed_file,
        vt.ocr_dir,
        vt.aocr_dir,
        vt.transcribe_dir,
        vt.atranscribe_dir,
    ):
        assert inspect.signature(job).parameters["resume"].default is True, job.__name__
    for command in (
        ["embed-file", "in.txt"],
        ["ocr-dir", "in"],
        ["transcribe-dir", "in"],
    ):
        assert cli.build_parser().parse_args([*command, "--out", "o", "--restart"]).restart is True
