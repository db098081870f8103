"""Errors across boundaries: processes (pickling), logs and reports (no credentials), the CLI (exit codes).

Issue 11: exceptions raised in a worker process must come back whole; ``http://user:KEY@host`` must not
leak through a repr, a message, a retry warning, the probe report or the CLI; a non-UTF-8 ``--file`` and
Ctrl-C end the CLI with one line, not a traceback.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import logging
import multiprocessing
import multiprocessing.pool
import pickle
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
import vllm_tasks.jobs
import vllm_tasks.ocr
from vllm_tasks import cli
from vllm_tasks.errors import StatusErrorKind
from vllm_tasks.redaction import redact_text, redact_url
from vllm_tasks.server_errors import error_from_response

# -- pickling -----------------------------------------------------------------------------------------

URL = "http://vllm.test:8000/v1/embeddings"
HEADERS = {"x-request-id": "req-42", "content-type": "application/json"}
BODY = {"error": {"message": "bad input", "type": "BadRequestError", "param": "input", "code": 400}}

PUBLIC: dict[str, Any] = {
    **{name: getattr(vt, name) for name in vt.__all__},
    **{name: getattr(vllm_tasks.jobs, name) for name in vllm_tasks.jobs.__all__},
    "OCRTruncatedWarning": vllm_tasks.ocr.OCRTruncatedWarning,
    "NGramProcessorMissingWarning": vllm_tasks.ocr.NGramProcessorMissingWarning,
}
EXCEPTIONS = sorted(
    name for name, value in PUBLIC.items() if isinstance(value, type) and issubclass(value, BaseException)
)


def _status_error(cls: type[vt.APIStatusError], kind: StatusErrorKind | None = None) -> vt.APIStatusError:
    return cls(
        "bad input",
        status_code=400,
        kind=kind,
        param="input",
        request_id="req-42",
        body=BODY,
        headers=httpx.Headers(HEADERS),
        method="POST",
        url=URL,
    )


def _context_length() -> vt.ContextLengthExceeded:
    error = _status_error(vt.ContextLengthExceeded)
    assert isinstance(error, vt.ContextLengthExceeded)
    error.max_model_len, error.prompt_tokens, error.input_index = 256, 300, 3
    return error


def _not_served() -> vt.EndpointNotServed:
    error = _status_error(vt.EndpointNotServed)
    assert isinstance(error, vt.EndpointNotServed)
    error.task, error.reason = "rerank", "inactive"
    return error


def _too_large() -> vt.InvalidInputError:
    return vt.InvalidInputError(
        "image",
        "<image 90000x90000>",
        "is over the limit",
        "Downscale it.",
        kind="image_too_large",
        size=(9, 9),
    )


SPECIAL: dict[str, Callable[[], BaseException]] = {
    "VLLMTasksError": lambda: vt.VLLMTasksError("something failed"),
    "InvalidInputError": lambda: vt.InvalidInputError("input[3]", [1, 2], "must be a string", "Pass str."),
    "InvalidInputError[image_decode]": lambda: vt.InvalidInputError(
        "image", b"\x00\x01", "does not decode", "Pass a PNG or JPEG.", kind="image_decode"
    ),
    "InvalidInputError[image_too_large]": _too_large,
    "InvalidInputError[audio_decode]": lambda: vt.InvalidInputError.audio_decode(
        "speech.wav", "not a RIFF file"
    ),
    "InputFetchError": lambda: vt.InputFetchError("url", "http://x.test/a.png", "HTTP 404"),
    "InputFetchError[image_fetch]": lambda: vt.InputFetchError(
        "image", "http://x.test/a.png", "HTTP 404", kind="image_fetch"
    ),
    "InputFetchError[audio_fetch]": lambda: vt.InputFetchError(
        "audio", "http://x.test/a.wav", "timed out", kind="audio_fetch"
    ),
    "BadRequestError[matryoshka_not_supported]": lambda: _status_error(
        vt.BadRequestError, "matryoshka_not_supported"
    ),
    "UnexpectedResponse[decode]": lambda: vt.UnexpectedResponse("bad widths", kind="decode", url=URL),
    "MissingDependency": lambda: vt.MissingDependency("soundfile", "audio", "decoding audio"),
    "UnsupportedByServer": lambda: vt.UnsupportedByServer(
        "rerank_v2", server_version="0.8.0", required_version="0.9.0", server_flag="--x", detail="More."
    ),
    "ServerNotReady": lambda: vt.ServerNotReady("http://vllm.test was not ready within 5 s", "HTTP 503"),
    "StreamError": lambda: vt.StreamError("engine died", body={"error": {"message": "x"}}, code=500),
    "ContextLengthExceeded": _context_length,
    "EndpointNotServed": _not_served,
    "JobError": lambda: vt.jobs.JobError("the job stopped"),
    "JobMismatch": lambda: vt.jobs.JobMismatch("out.npy", ["input content: '3f2a...' -> '8b1d...'"]),
    "ReplicaMismatch": lambda: vt.jobs.ReplicaMismatch(("http://a.test", "http://b.test"), "'m' vs 'e5'"),
    "RowFailed": lambda: vt.jobs.RowFailed(13, "d13", "maximum context length is 512 tokens"),
    "InsufficientDiskSpace": lambda: vt.jobs.InsufficientDiskSpace("/data/out.npy", 1_000_000, 1_000),
}


CASES = EXCEPTIONS + sorted(name for name in SPECIAL if "[" in name)
"""Every exported exception class, and each ``kind`` of a folded one (``InvalidInputError[image_decode]``)."""


def build(name: str) -> BaseException:
    """A representative instance of the exported exception (or warning) class ``name``."""
    if name in SPECIAL:
        return SPECIAL[name]()
    cls = PUBLIC[name]
    if issubclass(cls, vt.APIStatusError):
        return _status_error(cls)
    if issubclass(cls, vt.APIError):  # APIConnectionError, APITimeoutError, UnexpectedResponse, ...
        return cls("POST http://vllm.test:8000/v1/embeddings timed out", method="POST", url=URL)
    if issubclass(cls, Warning):
        return cls("a warning")
    raise AssertionError(f"add a representative instance of {name} to SPECIAL")


def raise_in_worker(name: str) -> None:
    """Runs in a child process."""
    raise build(name)


def assert_same(got: BaseException, want: BaseException) -> None:
    assert type(got) is type(want)
    assert str(got) == str(want)
    assert got.args == want.args
    assert vars(got) == vars(want)
    if isinstance(want, ImportError):
        assert isinstance(got, ImportError)
        assert (got.msg, got.name, got.path) == (want.msg, want.name, want.path)


def test_every_exported_exception_is_covered() -> None:
    assert "APIStatusError" in EXCEPTIONS and "JobMismatch" in EXCEPTIONS
    for name in EXCEPTIONS:
        build(name)


@pytest.mark.parametrize("name", CASES)
def test_exception_survives_pickle(name: str) -> None:
    error = build(name)
    copy = pickle.loads(pickle.dumps(error))
    assert_same(copy, error)
    if isinstance(error, vt.APIStatusError):
        assert isinstance(copy, vt.APIStatusError)
        assert (copy.status_code, copy.request_id, copy.param) == (400, "req-42", "input")
        assert (copy.body, copy.method, copy.url) == (BODY, "POST", URL)
        assert copy.headers["x-request-id"] == "req-42"


def test_unpicklable_attribute_comes_back_as_its_repr() -> None:
    error = vt.InvalidInputError("input", (x for x in "ab"), "must be a list", "Pass a list.")
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error)
    assert isinstance(copy.value, str) and copy.value.startswith("<generator")


# "spawn": the start method of macOS and Windows, and safe in a process that has threads.
SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture(scope="module")
def process_pool() -> Iterator[concurrent.futures.ProcessPoolExecutor]:
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=SPAWN) as pool:
        yield pool


@pytest.fixture(scope="module")
def mp_pool() -> Iterator[multiprocessing.pool.Pool]:
    pool = SPAWN.Pool(processes=1)
    try:
        yield pool
    finally:
        pool.terminate()
        pool.join()


@pytest.mark.parametrize("name", CASES)
def test_exception_crosses_process_pool_executor(
    name: str, process_pool: concurrent.futures.ProcessPoolExecutor
) -> None:
    future = process_pool.submit(raise_in_worker, name)
    with pytest.raises(BaseException) as info:  # the exact type is checked below
        future.result(timeout=30)
    assert_same(info.value, build(name))


@pytest.mark.parametrize("name", CASES)
def test_exception_crosses_multiprocessing_pool(name: str, mp_pool: multiprocessing.pool.Pool) -> None:
    result = mp_pool.apply_async(raise_in_worker, (name,))
    with pytest.raises(BaseException) as info:  # the exact type is checked below
        result.get(timeout=30)  # a pool whose result thread dies leaves this waiting: the timeout fails it
    assert not isinstance(info.value, multiprocessing.TimeoutError)
    assert_same(info.value, build(name))


# -- credentials in the base URL ------------------------------------------------------------------------

SECRET = "s3cr3t-KEY"
CRED_BASE = f"http://user:{SECRET}@vllm.test:8000"
PLAIN_BASE = "http://vllm.test:8000"
BASIC = "Basic " + base64.b64encode(f"user:{SECRET}".encode()).decode()


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        assert SECRET not in text


def test_redact_url_and_text() -> None:
    assert redact_url("http://user:pw@host:8000/x?q=1") == "http://host:8000/x?q=***"
    assert redact_url("http://user:p@ss@host/x") == "http://host/x"
    assert redact_url("http://u:pw@[::1]:8000/x") == "http://[::1]:8000/x"
    assert redact_url("http://host:8000/x") == "http://host:8000/x"
    text = "GET http://user:p@ss@host:8000/health failed; 'https://a:b@c/d' and mail@example.com"
    assert redact_text(text) == "GET http://host:8000/health failed; 'https://c/d' and mail@example.com"


def test_repr_hides_url_credentials_but_requests_send_them(make_client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=f"{PLAIN_BASE}/health", text="")  # the credentials go in a header
    client = make_client(CRED_BASE)
    inner = getattr(client, "inner", client)  # the async client, unwrapped
    assert_no_secret(repr(inner), repr(inner.settings), str(inner.settings))
    assert f"base_url='{PLAIN_BASE}'" in repr(inner)
    client.wait_until_ready(timeout=5)
    assert httpx_mock.get_requests()[0].headers["authorization"] == BASIC


def test_status_and_connection_errors_hide_url_credentials(
    make_client: Any, httpx_mock: HTTPXMock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="vllm_tasks")
    httpx_mock.add_exception(httpx.ConnectError("Connection refused"), is_reusable=True)
    client = make_client(CRED_BASE, max_retries=1)
    with pytest.raises(vt.APIConnectionError) as info:
        client.embed(["hello"])
    assert "retrying" in caplog.text  # the retry warning was logged, from the redacted message
    rendered = "".join(traceback.format_exception(info.value))
    assert_no_secret(str(info.value), repr(info.value), rendered, caplog.text, repr(vars(info.value)))
    assert PLAIN_BASE in str(info.value)


def test_error_from_response_hides_url_credentials() -> None:
    request = httpx.Request("POST", f"{CRED_BASE}/v1/embeddings")
    response = httpx.Response(500, text=f"upstream {CRED_BASE} failed", request=request)
    error = error_from_response(response)
    assert_no_secret(str(error), repr(error), error.message, str(error.url))
    assert error.url == f"{PLAIN_BASE}/v1/embeddings"


def test_other_errors_hide_url_credentials() -> None:
    errors = [
        vt.ServerNotReady(f"{CRED_BASE} was not ready within 1 s", f"GET {CRED_BASE}/health failed"),
        vt.InputFetchError("image", f"{CRED_BASE}/a.png", "HTTP 404"),
        vt.StreamError(f"stream from {CRED_BASE} broke"),
        vt.InvalidInputError("base_url", CRED_BASE, "is wrong", "Fix it."),
    ]
    for error in errors:
        assert_no_secret(str(error), repr(error), repr(pickle.loads(pickle.dumps(error))))
    assert errors[1].source == f"{PLAIN_BASE}/a.png"  # type: ignore[attr-defined]


def test_invalid_base_url_error_hides_credentials() -> None:
    with pytest.raises(vt.InvalidInputError) as info:
        vt.Client(f"ftp://user:{SECRET}@vllm.test")
    assert_no_secret(str(info.value), repr(info.value.value))


def mock_probe(httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=f"{PLAIN_BASE}/version", json={"version": "0.32.0"})
    httpx_mock.add_response(
        url=f"{PLAIN_BASE}/v1/models", json={"data": [{"id": "minilm", "max_model_len": 256}]}
    )
    httpx_mock.add_response(url=f"{PLAIN_BASE}/openapi.json", status_code=404, json={"detail": "Not Found"})
    httpx_mock.add_response(status_code=404, json={"detail": "Not Found"}, is_reusable=True)


def test_probe_report_hides_url_credentials(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_probe(httpx_mock)
    report = make_client(CRED_BASE).probe()
    assert report.server.base_url == PLAIN_BASE
    assert_no_secret(repr(report), cli.format_probe(report), json.dumps(report.model_dump(mode="json")))
    assert all(r.headers["authorization"] == BASIC for r in httpx_mock.get_requests())


@pytest.mark.parametrize("as_json", [False, True])
def test_cli_probe_hides_url_credentials(
    as_json: bool, httpx_mock: HTTPXMock, capsys: pytest.CaptureFixture[str]
) -> None:
    mock_probe(httpx_mock)
    assert cli.main(["probe", CRED_BASE, *(["--json"] if as_json else [])]) == cli.EXIT_OK
    out, err = capsys.readouterr()
    assert_no_secret(out, err)
    assert PLAIN_BASE in out


def test_cli_errors_hide_url_credentials(httpx_mock: HTTPXMock, capsys: pytest.CaptureFixture[str]) -> None:
    httpx_mock.add_exception(httpx.ConnectError("Connection refused"), is_reusable=True)
    assert cli.main(["probe", CRED_BASE]) == cli.EXIT_UNREACHABLE
    assert cli.main(["probe", f"ftp://user:{SECRET}@host"]) == cli.EXIT_USAGE
    out, err = capsys.readouterr()
    assert_no_secret(out, err)
    assert "unreachable" in err and "vllm.test:8000" in err


# -- CLI: undecodable input files, Ctrl-C ---------------------------------------------------------------


@pytest.mark.parametrize("command", [["rerank", "query"], ["embed"]])
def test_cli_non_utf8_file_is_a_usage_error(
    command: list[str], tmp_path: Path, httpx_mock: HTTPXMock, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("café\nnaïve\n".encode("latin-1"))
    assert cli.main([*command, "--url", PLAIN_BASE, "--file", str(path)]) == cli.EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert str(path) in err and "UTF-8" in err


@pytest.mark.parametrize(
    ("method", "argv"),
    [
        ("probe", ["probe", PLAIN_BASE]),
        ("rerank", ["rerank", "query", "doc", "--url", PLAIN_BASE]),
        ("embed", ["embed", "text", "--url", PLAIN_BASE]),
    ],
)
def test_cli_ctrl_c_exits_130_with_one_line(
    method: str, argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(vt.Client, method, interrupted)
    assert cli.main(argv) == cli.EXIT_INTERRUPTED == 130
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "vllm-tasks: interrupted\n"


def test_url_credentials_and_an_api_key_together_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx would turn the URL's credentials into Basic auth and silently drop the Bearer key."""
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    with pytest.raises(vt.InvalidInputError, match="only one can be sent") as raised:
        vt.Client("http://user:secret@vllm.example:8000", api_key="sk-key")
    assert "secret" not in str(raised.value)
    client = vt.Client("http://user:secret@vllm.example:8000")
    assert client.base_url == "http://vllm.example:8000"
    client.close()
