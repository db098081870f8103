"""server_info(), wait_until_ready(), probe() and the probe CLI."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import cli
from vllm_tasks.tasks import TASK_ROUTES

from .conftest import BASE

MODELS = {
    "object": "list",
    "data": [
        {
            "id": "minilm",
            "object": "model",
            "created": 1764666000,
            "owned_by": "vllm",
            "root": "/cache/models/all-MiniLM-L6-v2",
            "parent": None,
            "max_model_len": 256,
            "permission": [{"id": "modelperm-1", "object": "model_permission"}],
        },
        {
            "id": "my-lora",
            "object": "model",
            "root": "/adapters/lora",
            "parent": "minilm",
            "max_model_len": None,
        },
    ],
}
EMBED_PATHS = [
    "/v1/embeddings",
    "/v2/embed",
    "/score",
    "/v1/score",
    "/rerank",
    "/v1/rerank",
    "/v2/rerank",
    "/pooling",
]


def mock_discovery(
    httpx_mock: HTTPXMock,
    version: str | None = "0.32.0",
    paths: list[str] | None = EMBED_PATHS,
    models: Any = MODELS,
) -> None:
    if version is None:
        httpx_mock.add_response(url=f"{BASE}/version", status_code=404, json={"detail": "Not Found"})
    else:
        httpx_mock.add_response(url=f"{BASE}/version", json={"version": version})
    httpx_mock.add_response(url=f"{BASE}/v1/models", json=models)
    if paths is None:
        httpx_mock.add_response(url=f"{BASE}/openapi.json", status_code=404, json={"detail": "Not Found"})
    else:
        httpx_mock.add_response(
            url=f"{BASE}/openapi.json", json={"openapi": "3.1.0", "paths": {p: {} for p in paths}}
        )


def test_server_info_reads_version_models_and_routes_once(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_discovery(httpx_mock)
    client = make_client()
    info = client.server_info()
    assert info.version == "0.32.0"
    assert info.parsed_version.release == (0, 32, 0)
    assert info.default_model == "minilm"
    assert info.max_model_len == 256
    assert info.model_card("my-lora").parent == "minilm"
    assert info.serves_route("/rerank") is True
    assert info.serves_route("/v1/audio/transcriptions") is False
    assert client.server_info() is info  # cached: pytest-httpx fails on an unexpected 2nd request
    assert len(httpx_mock.get_requests()) == 3


def test_refresh_reads_again(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_discovery(httpx_mock)
    mock_discovery(httpx_mock, version="0.33.0")
    client = make_client()
    assert client.server_info().version == "0.32.0"
    assert client.server_info(refresh=True).version == "0.33.0"


def test_hidden_version_and_disabled_docs(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_discovery(httpx_mock, version=None, paths=None)
    info = make_client().server_info()
    assert info.version is None
    assert not info.parsed_version.known
    assert info.routes is None
    assert info.serves_route("/score") is None


@pytest.mark.parametrize("raw", ["0.32.0", "0.11.1.post2", "0.30.1.dev202609231158", "0.32.0+cpu", "dev"])
def test_every_version_form_parses(raw: str, make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_discovery(httpx_mock, version=raw)
    info = make_client().server_info()
    assert info.version == raw
    assert info.parsed_version.known is (raw != "dev")


def test_wait_until_ready_tolerates_refused_and_503(
    make_client: Any, httpx_mock: HTTPXMock, no_sleep: list[float]
) -> None:
    httpx_mock.add_exception(httpx.ConnectError("Connection refused"), url=f"{BASE}/health")
    httpx_mock.add_response(url=f"{BASE}/health", status_code=503)
    httpx_mock.add_response(url=f"{BASE}/health", status_code=200)
    make_client(max_retries=5).wait_until_ready(timeout=60, interval=0.25)
    assert no_sleep == [0.25, 0.25]


def test_wait_until_ready_raises_with_last_cause(
    make_client: Any, httpx_mock: HTTPXMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = iter(range(0, 1000, 1))
    monkeypatch.setattr("vllm_tasks._async.discovery.time.monotonic", lambda: float(next(clock)))
    httpx_mock.add_response(url=f"{BASE}/health", status_code=503, is_reusable=True)
    with pytest.raises(vt.ServerNotReady) as info:
        make_client().wait_until_ready(timeout=5)
    assert info.value.last_cause == "/health answered HTTP 503"
    assert "not ready within 5 s" in str(info.value)


def test_wait_until_ready_validates_timeout(make_client: Any) -> None:
    with pytest.raises(vt.InvalidInputError, match="timeout"):
        make_client().wait_until_ready(timeout=-1)


def mock_probe_routes(httpx_mock: HTTPXMock, answers: dict[str, tuple[int, Any]]) -> None:
    for route in TASK_ROUTES.values():
        status, body = answers.get(route.task, (404, {"detail": "Not Found"}))
        httpx_mock.add_response(url=f"{BASE}{route.path}", method="POST", status_code=status, json=body)


EMBED_ANSWERS = {
    "embed": (200, {"object": "list", "data": [{"index": 0, "embedding": [0.1]}]}),
    "embed_v2": (200, {"embeddings": {"float": [[0.1]]}}),
    "score": (400, {"error": {"message": "validation", "code": 400}}),
    "rerank": (400, {"error": {"message": "validation", "code": 400}}),
    "classify": (501, {"error": {"message": "The model does not support Classification API", "code": 501}}),
    "pooling": (400, {"error": {"message": "validation", "code": 400}}),
}


def test_probe_reports_each_task(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_discovery(httpx_mock)
    mock_probe_routes(httpx_mock, EMBED_ANSWERS)
    report = make_client().probe()
    assert report.served_tasks == ["embed", "embed_v2", "score", "rerank", "pooling"]
    assert report.status("classify") is vt.types.TaskStatus.INACTIVE
    assert report.status("transcription") is vt.types.TaskStatus.NOT_SERVED
    assert report.status("chat") is vt.types.TaskStatus.NOT_SERVED
    assert report.advisories == ()


def test_probe_on_a_keyed_server_without_key(make_client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=f"{BASE}/version", json={"version": "0.32.0"})
    httpx_mock.add_response(url=f"{BASE}/v1/models", status_code=401, json={"error": "Unauthorized"})
    httpx_mock.add_response(url=f"{BASE}/openapi.json", json={"paths": {p: {} for p in EMBED_PATHS}})
    unauthorized = (401, {"error": "Unauthorized"})
    answers = {
        **EMBED_ANSWERS,
        "embed": unauthorized,
        "embed_v2": unauthorized,
        "chat": unauthorized,
        "transcription": unauthorized,
        "translation": unauthorized,
    }
    mock_probe_routes(httpx_mock, answers)
    report = make_client().probe()
    assert report.server.models == ()
    assert report.status("embed") is vt.types.TaskStatus.UNAUTHORIZED
    assert report.status("rerank") is vt.types.TaskStatus.SERVED
    assert [a.id for a in report.advisories] == ["unguarded-pooling-routes"]


@pytest.mark.parametrize(
    ("version", "root", "expected"),
    [
        ("0.25.2", "Qwen/Qwen3-Reranker-0.6B", {"last-pooling-chunked-prefill", "normalize-ignored"}),
        ("0.26.0", "Qwen/Qwen3-Reranker-0.6B", set()),
        ("0.23.0", "BAAI/bge-m3", {"dimensions-unchecked", "normalize-ignored"}),
        ("0.10.0", "BAAI/bge-m3", {"dimensions-unchecked", "flat-error-bodies"}),
        (None, "Qwen/Qwen3-Embedding-0.6B", set()),
    ],
)
def test_probe_advisories_match_version_and_model(
    version: str | None, root: str, expected: set[str], make_client: Any, httpx_mock: HTTPXMock
) -> None:
    models = {"data": [{"id": "served", "root": root, "max_model_len": 8192}]}
    mock_discovery(httpx_mock, version=version, models=models)
    mock_probe_routes(httpx_mock, EMBED_ANSWERS)
    report = make_client().probe()
    assert {a.id for a in report.advisories} == expected


def test_cli_probe_prints_table_and_json(httpx_mock: HTTPXMock, capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(2):
        mock_discovery(httpx_mock)
        mock_probe_routes(httpx_mock, EMBED_ANSWERS)
    assert cli.main(["probe", BASE]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "version  0.32.0" in out
    assert "/v1/embeddings" in out and "inactive (501)" in out
    assert cli.main(["probe", BASE, "--json"]) == cli.EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert report["server"]["version"] == "0.32.0"


def test_cli_probe_unreachable_exits_nonzero(
    httpx_mock: HTTPXMock, capsys: pytest.CaptureFixture[str]
) -> None:
    httpx_mock.add_exception(httpx.ConnectError("Connection refused"), is_reusable=True)
    assert cli.main(["probe", BASE]) == cli.EXIT_UNREACHABLE
    assert "unreachable" in capsys.readouterr().err


def test_cli_bad_url_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["probe", "not a url"]) == cli.EXIT_USAGE


def test_cli_missing_input_file_is_a_usage_error(
    httpx_mock: HTTPXMock, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["rerank", "query", "--url", BASE, "--file", "/nonexistent/docs.txt"]) == cli.EXIT_USAGE
    assert "docs.txt" in capsys.readouterr().err


def test_qwen3_reranker_without_its_overrides_is_advised() -> None:
    """With --convert classify alone (seen on vLLM 0.32.0, CPU): a two-label classifier, /rerank 404."""
    from vllm_tasks.discovery import advisories_for
    from vllm_tasks.types.server import ModelCard, ServerInfo, TaskProbe, TaskStatus

    card = ModelCard(id="qwen3-reranker", root="/models/Qwen3-Reranker-0.6B")
    info = ServerInfo(base_url=BASE, version="0.32.0", models=(card,), routes=None)
    served, not_served = TaskStatus.SERVED, TaskStatus.NOT_SERVED
    classify_only = (
        TaskProbe(task="classify", path="/classify", status=served),
        TaskProbe(task="rerank", path="/rerank", status=not_served),
    )
    found = advisories_for(info, classify_only)
    advisory = next(a for a in found if a.id == "qwen3-reranker-overrides-missing")
    assert "--hf-overrides" in advisory.message and "classifier_from_token" in advisory.message
    reranking = (classify_only[0], TaskProbe(task="rerank", path="/rerank", status=served))
    assert "qwen3-reranker-overrides-missing" not in [a.id for a in advisories_for(info, reranking)]
