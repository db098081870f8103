"""Telemetry: the DEBUG line and the OpenTelemetry span of every request (made once, in the transport),
``client.usage`` totals on both clients, and that no secret reaches a log record or a span."""

from __future__ import annotations

import io
import logging
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from PIL import Image
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import telemetry
from vllm_tasks.testing import FakeVLLM
from vllm_tasks.transport import Request

from ..clients import stream_result
from .conftest import BASE

ROOT = Path(__file__).resolve().parents[2]
FOX = ROOT / "tests" / "data" / "audio" / "fox.wav"
SECRET = "sk-very-secret-key-123"
DOCS = ["Paris is the capital of France.", "Bananas are yellow.", "France is in Europe."]


@pytest.fixture
def records(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """``caplog`` capturing the ``vllm_tasks`` logger at DEBUG.

    A failed sync ``send_all`` returns at once and leaves its in-flight requests to finish on its worker
    threads; a previous test's are waited for first (a worker thread running a send has the name
    ``vllm-tasks-send``), so that their log lines do not land here.
    """
    until = time.monotonic() + 10
    while time.monotonic() < until and any(t.name == "vllm-tasks-send" for t in threading.enumerate()):
        time.sleep(0.02)
    with caplog.at_level(logging.DEBUG, logger="vllm_tasks"):
        yield caplog


def request_records(records: pytest.LogCaptureFixture, route: str | None = None) -> list[dict[str, Any]]:
    """The structured fields of the per-request DEBUG records (retry warnings left out)."""
    fields = [r.vllm_tasks for r in records.records if hasattr(r, "vllm_tasks")]  # type: ignore[attr-defined]
    return [f for f in fields if route is None or f["route"] == route]


def request_lines(records: pytest.LogCaptureFixture) -> list[str]:
    """The messages of the per-request DEBUG records."""
    return [r.getMessage() for r in records.records if hasattr(r, "vllm_tasks")]


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """An SDK tracer (in-memory exporter) for the telemetry module; the global provider is left alone."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(telemetry, "_tracer", provider.get_tracer("vllm_tasks"))
    return exporter


# --------------------------------------------------------------------------------------------------
# The DEBUG line
# --------------------------------------------------------------------------------------------------


def test_each_request_is_logged_once_with_its_facts(
    make_client: Any, fake_vllm: FakeVLLM, records: pytest.LogCaptureFixture
) -> None:
    client = make_client(fake_vllm.url)
    texts = [f"text {i}" for i in range(100)]
    client.embed(texts, batch_size=64)
    logged = request_records(records, "/v1/embeddings")
    assert sorted(f["inputs"] for f in logged) == [36, 64]
    assert len(logged) == len(fake_vllm.received("/v1/embeddings")) == 2
    for fields in logged:
        assert fields["method"] == "POST" and fields["model"] == "fake-model" and fields["status"] == 200
        assert fields["request_id"].startswith("embd-") and fields["elapsed_ms"] >= 0
        assert fields["attempt"] == 1 and fields["error"] is None and fields["stream"] is False
    discovery = {f["route"] for f in request_records(records)} - {"/v1/embeddings"}
    assert discovery == {"/version", "/v1/models", "/openapi.json"}
    line = next(line for line in request_lines(records) if line.startswith("POST /v1/embeddings"))
    assert line.startswith("POST /v1/embeddings model=fake-model inputs=")
    assert "status=200 request_id=embd-" in line and "elapsed=" in line
    assert all(r.levelno == logging.DEBUG for r in records.records if hasattr(r, "vllm_tasks"))


def test_every_task_is_logged_with_its_batch_size(
    make_client: Any, fake_vllm: FakeVLLM, records: pytest.LogCaptureFixture
) -> None:
    client = make_client(fake_vllm.url)
    client.rerank("capital of France?", DOCS)
    client.score("capital of France?", DOCS[:2])
    client.embed_v2(texts=DOCS)
    client.classify(DOCS)
    client.transcribe(FOX)
    client.ocr(Image.new("RGB", (64, 64), "white"), preset="deepseek-ocr")
    inputs = {f["route"]: f["inputs"] for f in request_records(records) if f["status"] == 200}
    assert inputs["/rerank"] == 3 and inputs["/score"] == 2 and inputs["/v2/embed"] == 3
    assert inputs["/classify"] == 3 and inputs["/v1/audio/transcriptions"] == 1
    assert inputs["/v1/chat/completions"] == 1
    assert {f["model"] for f in request_records(records, "/v1/audio/transcriptions")} == {"fake-model"}


def test_stream_is_logged_when_its_headers_arrive(
    make_client: Any, fake_vllm: FakeVLLM, records: pytest.LogCaptureFixture
) -> None:
    client = make_client(fake_vllm.url)
    stream = client.transcribe_stream(FOX)
    result = stream_result(client, stream)
    (fields,) = request_records(records, "/v1/audio/transcriptions")
    assert fields["stream"] is True and fields["status"] == 200 and fields["inputs"] == 1
    assert client.usage.audio_seconds == pytest.approx(result.duration)


def test_failures_and_retries_are_logged_and_counted(
    make_client: Any, fake_vllm: FakeVLLM, records: pytest.LogCaptureFixture
) -> None:
    client = make_client(fake_vllm.url, max_retries=2)
    client.server_info()
    fake_vllm.fail(503, path="/v1/embeddings", times=2)
    client.embed("hello")
    logged = request_records(records, "/v1/embeddings")
    assert [(f["attempt"], f["status"], f["error"]) for f in logged] == [
        (1, 503, "ServiceUnavailableError"),
        (2, 503, "ServiceUnavailableError"),
        (3, 200, None),
    ]
    usage = client.usage
    assert (usage.requests, usage.failed_requests, usage.retries) == (3 + 3, 2, 2)
    assert "attempt=2" in request_lines(records)[4]


def test_a_connection_error_is_a_failed_request(make_client: Any, records: pytest.LogCaptureFixture) -> None:
    client = make_client("http://127.0.0.1:9")  # nothing listens on the discard port
    with pytest.raises(vt.APIConnectionError):
        client.embed("hello", model="m")
    # The sync client's discovery requests run in worker threads: the first failure ends the call, and
    # the others (not cancellable) finish a moment later, each counted and logged when it does.
    deadline, seen = time.monotonic() + 5, (-1, -1)
    while time.monotonic() < deadline:
        now = (len(request_records(records)), client.usage.requests)
        if now == seen and now[0] == now[1]:
            break
        seen = now
        time.sleep(0.1)
    fields = request_records(records)
    assert fields and all(f["status"] is None and f["error"] == "APIConnectionError" for f in fields)
    assert client.usage.failed_requests == client.usage.requests == len(fields)


def test_request_id_header_is_preferred(make_client: Any, httpx_mock: HTTPXMock, records: Any) -> None:
    httpx_mock.add_response(url=f"{BASE}/version", json={"version": "0.32.0"})
    httpx_mock.add_response(url=f"{BASE}/openapi.json", json={"paths": {}})
    httpx_mock.add_response(url=f"{BASE}/v1/models", json={"data": [{"id": "m"}]})
    httpx_mock.add_response(
        url=f"{BASE}/rerank",
        headers={"x-request-id": "req-from-header"},
        json={"id": "rerank-body", "results": [{"index": 0, "relevance_score": 0.5}], "usage": {}},
    )
    httpx_mock.add_response(
        url=f"{BASE}/pooling", json={"data": [{"data": [0.1]}], "usage": {}}, is_optional=True
    )
    client = make_client()
    client.rerank("q", ["d"])
    (fields,) = request_records(records, "/rerank")
    assert fields["request_id"] == "req-from-header"


def test_nothing_is_logged_without_debug(make_client: Any, fake_vllm: FakeVLLM, caplog: Any) -> None:
    with caplog.at_level(logging.INFO, logger="vllm_tasks"):
        make_client(fake_vllm.url).embed("hello")
    assert not [r for r in caplog.records if hasattr(r, "vllm_tasks")]


def test_no_secret_in_logs_or_spans(
    make_client: Any, fake_vllm: FakeVLLM, records: pytest.LogCaptureFixture, spans: InMemorySpanExporter
) -> None:
    keyed = make_client(fake_vllm.url, api_key=SECRET)
    keyed.embed("hello")
    host = fake_vllm.url.removeprefix("http://")
    with_credentials = make_client(f"http://alice:{SECRET}@{host}")
    with_credentials.embed("hello")
    fake_vllm.fail(401, path="/v1/embeddings")
    with pytest.raises(vt.AuthenticationError):
        keyed.embed("again")
    texts = [r.getMessage() + repr(getattr(r, "vllm_tasks", "")) for r in records.records]
    texts += [repr(dict(span.attributes or {})) + span.name for span in spans.get_finished_spans()]
    assert texts and not [t for t in texts if SECRET in t or "alice" in t]
    urls = {span.attributes["url.full"] for span in spans.get_finished_spans()}  # type: ignore[index]
    assert f"{fake_vllm.url}/v1/embeddings" in urls


# --------------------------------------------------------------------------------------------------
# OpenTelemetry spans
# --------------------------------------------------------------------------------------------------


def test_spans_carry_the_request_facts(
    make_client: Any, fake_vllm: FakeVLLM, spans: InMemorySpanExporter
) -> None:
    make_client(fake_vllm.url).embed(["a", "b", "c"])
    (span,) = [s for s in spans.get_finished_spans() if s.name.startswith("embeddings")]
    assert span.name == "embeddings fake-model" and span.kind is SpanKind.CLIENT
    attributes = dict(span.attributes or {})
    host, port = fake_vllm.url.removeprefix("http://").split(":")
    assert attributes == {
        "http.request.method": "POST",
        "url.full": f"{fake_vllm.url}/v1/embeddings",
        "server.address": host,
        "server.port": int(port),
        "gen_ai.operation.name": "embeddings",
        "gen_ai.provider.name": "vllm",
        "gen_ai.request.model": "fake-model",
        "vllm_tasks.request.inputs": 3,
        "http.response.status_code": 200,
        "gen_ai.response.id": attributes["gen_ai.response.id"],
    }
    assert str(attributes["gen_ai.response.id"]).startswith("embd-")
    assert span.status.status_code is StatusCode.UNSET
    names = {s.name for s in spans.get_finished_spans()}
    assert {"GET /version", "GET /v1/models", "GET /openapi.json"} <= names


def test_a_span_per_attempt_with_errors_marked(
    make_client: Any, fake_vllm: FakeVLLM, spans: InMemorySpanExporter
) -> None:
    client = make_client(fake_vllm.url, max_retries=1)
    client.server_info()
    spans.clear()
    fake_vllm.fail(503, path="/rerank")
    client.rerank("q", DOCS)
    reranks = [s for s in spans.get_finished_spans() if s.name == "rerank fake-model"]
    assert len(reranks) == 2
    failed, retried = reranks
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes["error.type"] == "ServiceUnavailableError"  # type: ignore[index]
    assert failed.attributes["http.response.status_code"] == 503  # type: ignore[index]
    assert "http.request.resend_count" not in (failed.attributes or {})
    assert retried.attributes["http.request.resend_count"] == 1  # type: ignore[index]
    assert retried.status.status_code is StatusCode.UNSET


def test_trace_context_goes_to_the_server(
    make_client: Any, fake_vllm: FakeVLLM, spans: InMemorySpanExporter
) -> None:
    make_client(fake_vllm.url).embed("hello")
    (sent,) = fake_vllm.received("/v1/embeddings")
    (span,) = [s for s in spans.get_finished_spans() if s.name.startswith("embeddings")]
    context = span.context
    assert sent.headers["traceparent"].startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")


@pytest.mark.parametrize("texts", [["hello"], ["a", "b", "c", "d"]], ids=["one", "concurrent"])
def test_spans_join_the_callers_trace(
    texts: list[str], make_client: Any, fake_vllm: FakeVLLM, spans: InMemorySpanExporter
) -> None:
    """Concurrent requests too: ``send_all``'s workers (the sync client's threads) run in the caller's
    context."""
    tracer = telemetry.tracer()
    assert tracer is not None
    with tracer.start_as_current_span("my job") as parent:
        make_client(fake_vllm.url).embed(texts, batch_size=1, concurrency=4)
    embeds = [s for s in spans.get_finished_spans() if s.name.startswith("embeddings")]
    assert len(embeds) == len(texts)
    assert {s.parent.span_id if s.parent else None for s in embeds} == {parent.get_span_context().span_id}


def test_without_opentelemetry_nothing_changes(
    make_client: Any, fake_vllm: FakeVLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # `import opentelemetry` raises ImportError
    monkeypatch.setattr(telemetry, "_tracer", telemetry._UNSET)
    assert telemetry.tracer() is None
    assert make_client(fake_vllm.url).embed("hello").vectors.shape == (1, 384)
    assert "traceparent" not in fake_vllm.received("/v1/embeddings")[0].headers


def test_the_api_without_an_sdk_records_nothing(
    make_client: Any, fake_vllm: FakeVLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(telemetry, "_tracer", trace.NoOpTracer())
    make_client(fake_vllm.url).embed("hello")
    assert "traceparent" not in fake_vllm.received("/v1/embeddings")[0].headers


def test_the_runtime_dependencies_did_not_grow() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if "opentelemetry" in d]
    assert any(d.startswith("opentelemetry-sdk") for d in project["optional-dependencies"]["test"])


# --------------------------------------------------------------------------------------------------
# client.usage
# --------------------------------------------------------------------------------------------------


def test_usage_totals_add_up_the_results(make_client: Any, fake_vllm: FakeVLLM) -> None:
    client = make_client(fake_vllm.url)
    assert client.usage == vt.types.ClientUsage()
    embedded = client.embed(DOCS)
    ranked = client.rerank("capital?", DOCS)
    spoken = client.transcribe(FOX)
    page = client.ocr(Image.new("RGB", (64, 64), "white"), preset="deepseek-ocr")
    buffer = io.BytesIO()
    pages = [Image.new("RGB", (200, 100), "white"), Image.new("RGB", (200, 100))]
    pages[0].save(buffer, "PDF", save_all=True, append_images=pages[1:])
    document = client.ocr_pdf(buffer.getvalue(), preset="deepseek-ocr")
    usage = client.usage
    prompt = embedded.usage.prompt_tokens + ranked.usage.prompt_tokens + page.usage.prompt_tokens
    prompt += document.usage.prompt_tokens + (spoken.usage.prompt_tokens or 0 if spoken.usage else 0)
    assert usage.prompt_tokens == prompt
    completion = (page.usage.completion_tokens or 0) + (document.usage.completion_tokens or 0)
    assert usage.completion_tokens == completion
    assert usage.audio_seconds == pytest.approx(spoken.duration)
    assert usage.pages == 1 + 2
    assert usage.requests == len(fake_vllm.received()) and usage.failed_requests >= 0
    with pytest.raises(Exception, match="frozen"):
        usage.requests = 0  # type: ignore[misc]


def test_a_failed_call_adds_no_tokens(make_client: Any, fake_vllm: FakeVLLM) -> None:
    client = make_client(fake_vllm.url)
    fake_vllm.fail(400, path="/v1/embeddings")
    with pytest.raises(vt.BadRequestError):
        client.embed("hello")
    assert client.usage.prompt_tokens == 0 and client.usage.failed_requests == 1


def test_usage_is_exact_with_a_sync_client_shared_by_threads(fake_vllm: FakeVLLM) -> None:
    with vt.Client(fake_vllm.url) as client:
        client.server_info()
        expected = client.embed("one two").usage.prompt_tokens
        errors: list[BaseException] = []

        def work() -> None:
            try:
                for _ in range(10):
                    client.embed(["one two"] * 4, batch_size=1, concurrency=4)
            except BaseException as error:  # pragma: no cover - reported below
                errors.append(error)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        usage = client.usage
        assert usage.requests == 3 + 1 + 8 * 10 * 4 == len(fake_vllm.received())
        assert usage.prompt_tokens == expected * (1 + 8 * 10 * 4)


def test_usage_counter_under_contention() -> None:
    counter = telemetry.UsageCounter()
    result = vt.types.EmbeddingResult.model_construct(usage=vt.types.Usage(prompt_tokens=3, total_tokens=3))

    def work() -> None:
        for i in range(2000):
            counter.request_done(failed=i % 2 == 0, retry=i % 4 == 0)
            counter.add_result(result)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    usage = counter.snapshot()
    assert (usage.requests, usage.failed_requests, usage.retries) == (16_000, 8_000, 4_000)
    assert usage.prompt_tokens == 48_000


# --------------------------------------------------------------------------------------------------
# The pure parts
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "inputs"),
    [
        ({"input": ["a", "b"]}, 2),
        ({"input": "a"}, 1),
        ({"input": [1, 2, 3]}, 1),  # one prompt of token ids
        ({"input": [[1, 2], [3]]}, 2),
        ({"query": "q", "documents": ["a", "b", "c"]}, 3),
        ({"text_1": "q", "text_2": ["a", "b"]}, 2),
        ({"queries": ["q1", "q2"], "documents": ["a", "b"]}, 2),
        ({"queries": "q", "documents": "a"}, 1),
        ({"texts": ["a"]}, 1),
        ({"images": ["x", "y"]}, 2),
        ({"messages": [{"role": "user", "content": "x"}]}, 1),
        ({"messages": [[{"role": "user"}], [{"role": "user"}]]}, 2),
        ({}, None),
        (None, None),
    ],
)
def test_request_inputs(body: Any, inputs: int | None) -> None:
    assert telemetry.request_inputs(Request("POST", "/x", json=body)) == inputs


def test_request_inputs_and_model_of_a_form() -> None:
    request = Request("POST", "/v1/audio/transcriptions", data={"model": "whisper"}, files={"file": b"x"})
    assert telemetry.request_inputs(request) == 1
    assert telemetry.request_model(request) == "whisper"
    assert telemetry.request_model(Request("GET", "/version")) is None


def test_response_request_id() -> None:
    request_id = telemetry.response_request_id
    assert request_id(httpx.Response(200, headers={"x-request-id": "h"}, json={"id": "b"})) == "h"
    assert request_id(httpx.Response(200, content=b'{"id":"embd-1","data":[]}')) == "embd-1"
    assert request_id(httpx.Response(200, content=b'{"data":[],"id":"late"}')) is None
    metadata = '{"id": "embd-2", "data": []}'
    assert request_id(httpx.Response(200, headers={"metadata": metadata})) == "embd-2"
    assert request_id(httpx.Response(200, content=b"\x00" * 10)) is None
