"""vllm_tasks.testing: FakeVLLM driven by both clients through every route, its faults, its lifecycle,
the pytest plugin (docs/testing.md's example runs in tests/unit/test_docs_examples.py)."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

import vllm_tasks as vt
from vllm_tasks.testing import (
    EMBEDDING_TASKS,
    OCR_TASKS,
    RERANKER_TASKS,
    SPEECH_TASKS,
    FakeVLLM,
    grounding_output,
)
from vllm_tasks.testing.content import audio_seconds, text_vector
from vllm_tasks.testing.wire import parse_multipart

ROOT = Path(__file__).resolve().parents[2]
FOX = ROOT / "tests" / "data" / "audio" / "fox.wav"
DOCS = ["Bananas are yellow.", "Paris is the capital of France.", "France is in Europe."]
QUERY = "What is the capital of France?"


def png() -> bytes:
    from PIL import Image

    buffer = BytesIO()
    Image.new("RGB", (400, 200), "white").save(buffer, "PNG")
    return buffer.getvalue()


def collect(client: Any, stream: Any) -> list[Any]:
    """Iterate a TranscriptionStream, or an AsyncTranscriptionStream on the wrapped client's loop."""
    if hasattr(stream, "__aiter__"):

        async def run() -> list[Any]:
            return [event async for event in stream]

        return list(client._loop.run_until_complete(run()))
    return list(stream)


@pytest.fixture
def client(make_client: Callable[..., Any], fake_vllm: FakeVLLM) -> Any:
    """A client of each kind (``Client``, wrapped ``AsyncClient``) on the test's fake server."""
    return make_client(fake_vllm.url)


# ------------------------------------------------------------------------------------ discovery


def test_discovery_and_probe_report_every_task(client: Any, fake_vllm: FakeVLLM) -> None:
    info = client.server_info()
    assert (info.version, info.default_model, info.models[0].max_model_len) == ("0.32.0", "fake-model", 512)
    assert info.serves_route("/v2/rerank") and info.serves_route("/v1/audio/translations")
    report = client.probe()
    # probe() sends HTTP requests: the WebSocket route /v1/realtime is not among them
    assert sorted(report.served_tasks) == sorted(fake_vllm.settings.tasks - {"realtime"})
    client.wait_until_ready(timeout=5)


@pytest.mark.fake_vllm(model="whisper-base", tasks=SPEECH_TASKS, version="0.30.0")
def test_a_task_not_served_answers_404_like_vllm(client: Any) -> None:
    report = client.probe()
    assert report.served_tasks == ["transcription", "translation"]
    statuses = {probe.task: probe.status for probe in report.tasks}
    assert (
        statuses["embed"] is vt.types.TaskStatus.NOT_SERVED
        and statuses["chat"] is vt.types.TaskStatus.NOT_SERVED
    )
    assert client.server_info().version == "0.30.0"
    with pytest.raises(vt.EndpointNotServed):
        client.embed("hello")


def test_raw_http_answers_have_vllms_shapes(fake_vllm: FakeVLLM) -> None:
    with httpx.Client(base_url=fake_vllm.url) as http:
        assert http.get("/nope").json() == {"detail": "Not Found"}
        assert http.get("/v1/embeddings").json() == {"detail": "Method Not Allowed"}
        assert http.get("/health").content == b""
        wrong = http.post("/v1/embeddings", content=b"hello", headers={"content-type": "text/plain"})
        assert wrong.status_code == 400 and "Only 'application/json'" in wrong.json()["error"]["message"]
        other = http.post("/tokenize", json={"model": "x", "prompt": "hi"}).json()["error"]
        assert other == {
            "message": "The model `x` does not exist. Valid aliases: fake-model.",
            "type": "NotFoundError",
            "param": "model",
            "code": 404,
        }
        tokens = http.post("/tokenize", json={"prompt": "hello world", "return_token_strs": True}).json()
        assert tokens["count"] == 4 and tokens["token_strs"] == ["[CLS]", "hello", "world", "[SEP]"]
        assert http.post("/detokenize", json={"tokens": tokens["tokens"]}).json() == {"prompt": "hello world"}
        fake_vllm.settings.healthy = False
        assert http.get("/health").status_code == 503


# ------------------------------------------------------------------------------------- embeddings


@pytest.mark.parametrize("encoding_format", ["float", "base64", "bytes", "bytes_only"])
def test_every_encoding_gives_the_same_vectors(
    client: Any, fake_vllm: FakeVLLM, encoding_format: str
) -> None:
    texts = ["hello world", "vLLM serves embeddings", ""]
    result = client.embed(texts, encoding_format=encoding_format)
    expected = np.stack([fake_vllm.vector(text) for text in texts])
    np.testing.assert_array_equal(result.vectors, expected)
    assert result.vectors.dtype == np.float32 and result.model == "fake-model"
    np.testing.assert_allclose(np.linalg.norm(result.vectors, axis=1), 1.0, rtol=1e-6)
    sent = fake_vllm.received("/v1/embeddings")[-1].json
    assert sent["input"] == texts and sent["encoding_format"] == encoding_format


@pytest.mark.parametrize(
    ("embed_dtype", "endianness", "tolerance"),
    [("float32", "big", 0), ("float16", "little", 1e-3), ("bfloat16", "big", 1e-2),
     ("fp8_e4m3", "native", 0.07), ("fp8_e5m2", "native", 0.13)],
)  # fmt: skip
def test_wire_dtypes_round_trip(
    client: Any, fake_vllm: FakeVLLM, embed_dtype: str, endianness: str, tolerance: float
) -> None:
    result = client.embed(
        ["a b c", "d e"], encoding_format="bytes", embed_dtype=embed_dtype, endianness=endianness
    )
    expected = np.stack([fake_vllm.vector("a b c"), fake_vllm.vector("d e")])
    np.testing.assert_allclose(result.vectors, expected, rtol=tolerance, atol=tolerance / 8)


def test_dimensions_and_their_refusals(client: Any, fake_vllm: FakeVLLM) -> None:
    result = client.embed("hello", dimensions=64)
    np.testing.assert_array_equal(result.vector, fake_vllm.vector("hello", dimensions=64))
    fake_vllm.settings.matryoshka = [128, 256]
    with pytest.raises(vt.BadRequestError, match=r"only supports Matryoshka dimensions \[128, 256\]"):
        client.embed("hello", dimensions=64)
    fake_vllm.settings.matryoshka = False
    with pytest.raises(vt.BadRequestError, match="does not support Matryoshka"):
        client.embed("hello", dimensions=64)


def test_token_ids_and_chat_inputs(client: Any, fake_vllm: FakeVLLM) -> None:
    ids = fake_vllm.vocabulary.encode("hello world")
    np.testing.assert_array_equal(client.embed([ids]).vectors[0], fake_vllm.vector("hello world"))
    messages = [{"role": "user", "content": [{"type": "text", "text": "hello world"}]}]
    np.testing.assert_array_equal(client.embed(messages=messages).vectors[0], fake_vllm.vector("hello world"))


def test_embed_v2_every_type(client: Any, fake_vllm: FakeVLLM) -> None:
    result = client.embed_v2(
        texts=["hello", "world"], embedding_types=["float", "binary", "ubinary", "base64"]
    )
    expected = np.stack([fake_vllm.vector("hello"), fake_vllm.vector("world")])
    np.testing.assert_array_equal(result.float, expected)
    np.testing.assert_array_equal(result.base64, expected)
    np.testing.assert_array_equal(result.ubinary, np.packbits(expected >= 0, axis=1))
    np.testing.assert_array_equal(result.binary, np.packbits(expected >= 0, axis=1).astype(np.int16) - 128)
    with pytest.raises(vt.BadRequestError):
        client.embed_v2(texts=["hello"], input_type="search_query")
    fake_vllm.settings.input_types = ["search_query"]
    queried = client.embed_v2(texts=["hello"], input_type="search_query")
    np.testing.assert_array_equal(queried.float[0], fake_vllm.vector("search_query: hello"))


@pytest.mark.fake_vllm(max_model_len=16)
def test_an_input_over_the_context_is_named(client: Any) -> None:
    with pytest.raises(vt.ContextLengthExceeded) as info:
        client.embed(["short", "word " * 15])  # 15 words + [CLS] + [SEP] = 17 tokens
    assert (info.value.max_model_len, info.value.prompt_tokens, info.value.input_index) == (16, 17, 1)


def test_an_unknown_model_is_refused(client: Any) -> None:
    with pytest.raises(vt.NotFoundError):
        client.embed("hello", model="no-such-model")


# ---------------------------------------------------------------------------------------- scoring


@pytest.mark.parametrize("tasks", [EMBEDDING_TASKS, RERANKER_TASKS])
def test_rerank_orders_by_word_overlap(make_client: Callable[..., Any], tasks: frozenset[str]) -> None:
    with FakeVLLM(tasks=tasks) as fake:
        client = make_client(fake.url)
        result = client.rerank(QUERY, DOCS)
        assert [hit.index for hit in result.results] == [1, 2, 0]
        assert [hit.document for hit in result.results] == [DOCS[1], DOCS[2], DOCS[0]]
        assert [hit.score for hit in result.results] == pytest.approx(
            [fake.score(QUERY, DOCS[i]) for i in (1, 2, 0)]
        )
        kind = (
            vt.types.ScorerKind.BI_ENCODER if tasks == EMBEDDING_TASKS else vt.types.ScorerKind.CROSS_ENCODER
        )
        assert result.scorer is kind
        assert [hit.index for hit in client.rerank(QUERY, DOCS, top_n=1).results] == [1]
        scores = client.score(QUERY, DOCS).scores
        np.testing.assert_allclose(scores, [fake.score(QUERY, doc) for doc in DOCS], rtol=1e-6)
        assert fake.received("/rerank")[0].json["query"] == QUERY


@pytest.mark.fake_vllm(tasks=RERANKER_TASKS, labels=["relevance"])
def test_classify_and_pool(client: Any, fake_vllm: FakeVLLM) -> None:
    classified = client.classify(["good", "bad"])
    assert classified.labels == ["relevance", "relevance"] and classified.probs.shape == (2, 1)
    assert 0 < classified.probs[0, 0] < 1
    pooled = client.pool("good")
    np.testing.assert_allclose(pooled.data[0], classified.probs[0], rtol=1e-6)


@pytest.mark.fake_vllm(scorer="late-interaction", tasks=EMBEDDING_TASKS)
def test_pool_token_matrices_travel_as_bytes_and_as_json_alike(client: Any, fake_vllm: FakeVLLM) -> None:
    texts = ["a short one", "a somewhat longer query about late interaction"]
    binary = client.pool(texts)
    as_json = client.pool(texts, encoding_format="float")
    assert [body.json.get("encoding_format") for body in fake_vllm.received("/pooling")] == ["bytes", None]
    assert binary.data[0].ndim == 2 and binary.data[0].shape[0] < binary.data[1].shape[0]
    for got, want in zip(binary.data, as_json.data, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert binary.usage.prompt_tokens == as_json.usage.prompt_tokens > 0


# ---------------------------------------------------------------------------------- speech to text


def test_transcribe_in_every_format(client: Any, fake_vllm: FakeVLLM) -> None:
    text = "The quick brown fox jumped over the lazy dog. It was not amused."
    plain = client.transcribe(FOX, language="en")
    assert plain.text == text and plain.usage is not None and plain.usage.seconds == 4
    verbose = client.transcribe(FOX, response_format="verbose_json")
    assert verbose.language == "en" and verbose.duration == pytest.approx(audio_seconds(FOX.read_bytes()))
    assert [s.text for s in verbose.segments] == [
        "The quick brown fox jumped over the lazy dog.",
        "It was not amused.",
    ]
    assert verbose.segments[-1].end == pytest.approx(verbose.duration, abs=1e-3)
    assert "00:00:00,000 -->" in client.transcribe(FOX, response_format="srt").formatted()
    fake_vllm.settings.transcript = lambda request: f" {request.files['file'].filename} in French."
    assert client.translate(FOX).text == "fox.wav in French."
    fake_vllm.settings.transcript = lambda request: str(1 / 0)
    with pytest.raises(vt.InternalServerError, match=r"FakeVLLM failed to answer .* ZeroDivisionError"):
        client.translate(FOX)
    upload = fake_vllm.received("/v1/audio/transcriptions")[0]
    assert upload.form["language"] == "en" and upload.files["file"].content == FOX.read_bytes()


def test_transcribe_stream(client: Any) -> None:
    stream = client.transcribe_stream(FOX, include_usage=True)
    *deltas, final = collect(client, stream)
    assert [d.text for d in deltas[:3]] == ["The", " quick", " brown"] and deltas[-1].finish_reason == "stop"
    assert final.text == "The quick brown fox jumped over the lazy dog. It was not amused."
    assert final.usage is not None and final.usage.completion_tokens == 13


def test_speech_refusals(client: Any) -> None:
    with pytest.raises(vt.BadRequestError, match="Unsupported language"):
        client.transcribe(FOX, language="xx")
    with httpx.Client() as http:
        srt = http.post(client.server_info().base_url + "/v1/audio/transcriptions",
                        files={"file": ("a.wav", b"x")}, data={"response_format": "srt"})  # fmt: skip
    assert srt.status_code == 400 and "Currently only support" in srt.json()["error"]["message"]


# --------------------------------------------------------------------------------------------- OCR


@pytest.mark.fake_vllm(model="deepseek-ocr")
def test_ocr_markdown_blocks_and_prompts(client: Any, fake_vllm: FakeVLLM) -> None:
    image = png()
    result = client.ocr(image)
    assert result.markdown.startswith("# Quarterly Report")
    assert [b.label for b in result.blocks] == ["title", "text", "table"]
    assert result.blocks[0].boxes_normalized == [(112, 58, 885, 102)]
    assert result.blocks[0].boxes == [(45, 12, 354, 20)]  # in pixels of the 400 x 200 image
    assert client.ocr(image, prompt="free").text.startswith("# Quarterly Report\n\nRevenue grew")
    located = client.ocr(image, prompt="locate:Revenue grew")
    assert located.blocks[0].boxes_normalized == [(112, 130, 885, 220)]
    fake_vllm.settings.ocr_output = grounding_output([("title", (0, 0, 999, 99), "# Invoice " + "x " * 50)])
    with pytest.warns(vt.ocr.OCRTruncatedWarning):
        cut = client.ocr(image, max_tokens=5)
    assert cut.truncated and cut.usage.completion_tokens == 5
    sent = fake_vllm.received("/v1/chat/completions")
    assert sent[0].json["vllm_xargs"] == {"ngram_size": 0}  # the processor check, then the pages
    assert sent[1].json["messages"][0]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")


@pytest.mark.fake_vllm(model="deepseek-ocr", tasks=OCR_TASKS, ngram_processor=False)
def test_ocr_without_the_ngram_processor(client: Any) -> None:
    with pytest.warns(vt.ocr.NGramProcessorMissingWarning):
        client.ocr(png())
    with pytest.raises(vt.UnsupportedByServer):
        client.ocr(png(), require_ngram_processor=True)
    assert client.probe().ngram_processor is False  # the probe checks models named like OCR models


# ------------------------------------------------------------------------------------------ faults


def test_a_503_with_retry_after_is_retried_after_that_wait(
    make_client: Callable[..., Any], fake_vllm: FakeVLLM, no_sleep: list[float]
) -> None:
    fault = fake_vllm.fail(503, path="/v1/embeddings", times=2, retry_after=2)
    client = make_client(fake_vllm.url, max_retries=2)
    np.testing.assert_array_equal(client.embed("hi").vector, fake_vllm.vector("hi"))
    assert fault.hits == 2 and fault.exhausted and no_sleep == [2.0, 2.0]
    assert len(fake_vllm.received("/v1/embeddings")) == 3


def test_errors_map_to_the_sdks_types(make_client: Callable[..., Any], fake_vllm: FakeVLLM) -> None:
    client = make_client(fake_vllm.url, max_retries=1)
    fake_vllm.fail(503, path="/rerank", times=None)
    with pytest.raises(vt.ServiceUnavailableError, match=r"injected by FakeVLLM"):
        client.rerank(QUERY, DOCS)
    assert len(fake_vllm.received("/rerank")) == 2  # one retry
    fake_vllm.clear_faults()
    fake_vllm.fail(400, path="/score", message="boom")
    with pytest.raises(vt.BadRequestError, match="boom"):
        client.score(QUERY, DOCS)
    assert len(fake_vllm.received("/score")) == 1  # not retried
    fake_vllm.fail(429, path="/v1/embeddings", retry_after=3600)
    with pytest.raises(vt.RateLimitError) as info:
        client.embed("hi")
    assert getattr(info.value, "retry_after", None) == 3600.0  # longer than the cap: not retried
    fake_vllm.fail(502, path="/classify", body=b"<html>502 Bad Gateway</html>", times=2)
    with pytest.raises(vt.InternalServerError) as bad_gateway:
        client.classify("hi")
    assert bad_gateway.value.status_code == 502
    fake_vllm.fail(401, path="/v1/models")
    with pytest.raises(vt.AuthenticationError):
        client.server_info(refresh=True)


def test_after_lets_requests_through_first(make_client: Callable[..., Any], fake_vllm: FakeVLLM) -> None:
    fault = fake_vllm.fail(500, path="/v1/embeddings", after=2)
    client = make_client(fake_vllm.url)
    client.embed("a")
    client.embed("b")
    with pytest.raises(vt.InternalServerError):
        client.embed("c")
    client.embed("d")
    assert fault.hits == 1


def test_a_reset_connection_is_retried_then_raised(
    make_client: Callable[..., Any], fake_vllm: FakeVLLM
) -> None:
    fake_vllm.drop(path="/v1/embeddings")
    assert make_client(fake_vllm.url, max_retries=1).embed("hi").vectors.shape == (1, 384)
    fake_vllm.drop(path="/v1/embeddings", times=None)
    with pytest.raises(vt.APIConnectionError, match="connection"):
        make_client(fake_vllm.url).embed("hi")


def test_latency_past_the_timeout(make_client: Callable[..., Any], fake_vllm: FakeVLLM) -> None:
    fake_vllm.slow(5.0, path="/score")
    client = make_client(fake_vllm.url, timeout=0.3)
    client.server_info()
    started = time.monotonic()
    with pytest.raises(vt.APITimeoutError):
        client.score(QUERY, DOCS)
    assert time.monotonic() - started < 3
    fake_vllm.settings.latency = 0.05
    started = time.monotonic()
    client.embed("hi")
    assert time.monotonic() - started >= 0.05


@pytest.mark.fake_vllm(api_key="sk-test")
def test_api_key_guards_v1_and_v2_only(make_client: Callable[..., Any], fake_vllm: FakeVLLM) -> None:
    with pytest.raises(vt.AuthenticationError):
        make_client(fake_vllm.url).embed("hi")
    assert make_client(fake_vllm.url, api_key="sk-test").embed("hi").vectors.shape == (1, 384)
    with httpx.Client(base_url=fake_vllm.url) as http:
        assert http.post("/v1/embeddings", json={"input": "x"}).json() == {"error": "Unauthorized"}
        assert http.post("/rerank", json={"query": "a", "documents": ["b"]}).status_code == 200


def test_requests_are_recorded(client: Any, fake_vllm: FakeVLLM) -> None:
    client.embed(["a", "b"], extra_headers={"X-Request-Id": "job-7"}, extra_body={"user": "me"})
    request = fake_vllm.received("/v1/embeddings", "POST")[-1]
    assert request.headers["x-request-id"] == "job-7" and request.json["user"] == "me"
    assert request.model == "fake-model" and json.loads(request.body) == request.json
    assert {r.path for r in fake_vllm.requests} >= {"/version", "/v1/models", "/openapi.json"}
    fake_vllm.clear_requests()
    assert fake_vllm.requests == []


@pytest.mark.parametrize(
    ("call", "field"),
    [(lambda f: f.fail(99), "status"), (lambda f: f.slow(-1), "seconds"),
     (lambda f: f.drop(times=-1), "times"), (lambda f: FakeVLLM(tasks={"embed", "speech"}), "tasks"),
     (lambda f: FakeVLLM(tasks="embed"), "tasks"), (lambda f: FakeVLLM(width=0), "width")],
)  # fmt: skip
def test_bad_settings_are_refused(fake_vllm: FakeVLLM, call: Callable[[FakeVLLM], Any], field: str) -> None:
    with pytest.raises(vt.InvalidInputError) as info:
        call(fake_vllm)
    assert info.value.field == field


# --------------------------------------------------------------------------------------- lifecycle


def fake_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("FakeVLLM")]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_stop_is_clean_with_open_and_pending_connections() -> None:
    fake = FakeVLLM().start()
    port = fake.port
    idle = vt.Client(fake.url)
    idle.embed("hello")  # leaves an idle keep-alive connection
    fake.slow(30, path="/score")
    errors: list[BaseException] = []

    def pending() -> None:
        try:
            with vt.Client(fake.url, max_retries=0) as client:
                client.score("a", ["b"])
        except vt.APIError as error:
            errors.append(error)

    waiter = threading.Thread(target=pending)
    waiter.start()
    while not fake.received("/score"):
        time.sleep(0.01)
    started = time.monotonic()
    fake.stop()
    assert time.monotonic() - started < 2
    waiter.join(5)
    assert not waiter.is_alive() and isinstance(errors[0], vt.APIConnectionError)
    assert fake_threads() == [] and not fake.running
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass
    with pytest.raises(RuntimeError, match="not started"):
        _ = fake.url
    idle.close()
    fake.stop()  # a second stop is a no-op


def test_a_burst_of_new_connections_is_answered_without_resets(fake_vllm: FakeVLLM) -> None:
    """200 connections opened at once all get their answer on the first try. With socketserver's default
    listen backlog of 5, SYNs were dropped (answers late by seconds) and a failed SYN cookie reset a
    connection mid-request: a client shared by 8 threads x concurrency 4 then counted spurious retries."""
    connections = 200
    body = json.dumps({"model": "fake-model", "input": ["one two"]}).encode()
    headers = b"Host: fake\r\nContent-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
    request = b"POST /v1/embeddings HTTP/1.1\r\n" + headers + b"\r\n" + body
    barrier = threading.Barrier(connections)
    answers: list[bytes | BaseException] = []

    def one() -> None:
        barrier.wait()
        try:
            with socket.create_connection(("127.0.0.1", fake_vllm.port), timeout=5) as sock:
                sock.sendall(request)
                answers.append(sock.recv(12))
        except OSError as error:
            answers.append(error)

    threads = [threading.Thread(target=one) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [answer for answer in answers if answer != b"HTTP/1.1 200"]
    assert len(answers) == connections and not failed, f"{len(failed)} of {connections}: {failed[:3]}"


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="counts file descriptors in /proc")
def test_no_ports_or_threads_leak() -> None:
    def cycle() -> None:
        with FakeVLLM() as fake, vt.Client(fake.url) as client:
            client.embed("hello")
            fake.drop(path="/v1/embeddings")
            client.embed("again")

    cycle()  # warm-up: lazily opened files (the CA bundle, ...)
    fds, threads = open_fds(), threading.active_count()
    for _ in range(10):
        cycle()
    assert open_fds() <= fds and threading.active_count() <= threads and fake_threads() == []


def test_start_twice_and_restart() -> None:
    fake = FakeVLLM()
    with fake:
        first = fake.start().url  # already started: the same server
        assert fake.url == first and repr(fake).startswith(f"FakeVLLM({first}")
    with fake, vt.Client(fake.url) as client:  # started again, on a new port
        assert client.server_info().version == "0.32.0"
    assert "stopped" in repr(fake)


def test_command_line_server() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [
        sys.executable,
        "-m",
        "vllm_tasks.testing",
        "--port",
        "0",
        "--tasks",
        "embed",
        "--model",
        "cli",
    ]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as process:
        try:
            assert process.stdout is not None
            url = process.stdout.readline().strip()
            with vt.Client(url) as client:
                assert client.server_info().default_model == "cli"
                assert client.probe().served_tasks == ["embed"]
        finally:
            process.terminate()
        assert process.wait(10) == 0


# ----------------------------------------------------------------------------------- content parts


def test_vectors_are_stable_across_processes() -> None:
    # pinned: SHAKE-256 of each word, never Python's per-process hash()
    assert base64.b64encode(text_vector("hello world", 4).tobytes()) == b"EPnRPrFXVb+xtUc+/FGhvg=="


def test_multipart_parsing_keeps_bytes_exactly() -> None:
    payload = bytes(range(256)) * 4 + b"\r\n--x\r\n"
    request = httpx.Request(
        "POST",
        "http://h/",
        data={"a": "1", "g[]": ["x", "y"]},
        files={"file": ("f.bin", payload, "audio/wav")},
    )
    form, files = parse_multipart(request.headers["content-type"], request.read())
    assert form == {"a": "1", "g[]": ["x", "y"]}
    assert files["file"].content == payload and files["file"].filename == "f.bin"
    assert files["file"].content_type == "audio/wav"


# ---------------------------------------------------------------------------------- pytest plugin


ENTRY_POINT_GROUP = "pytest11"


def install_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the package's pytest11 entry point (read from pyproject.toml) visible to importlib.metadata,
    as an installed distribution would (the checkout's own install may predate it)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    points = project["project"]["entry-points"][ENTRY_POINT_GROUP]
    dist = tmp_path / "site" / "vllm_tasks_plugin-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-tasks-plugin\nVersion: 0\n")
    lines = "".join(f"{name} = {value}\n" for name, value in points.items())
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))


PLUGIN_TEST = """
import pytest, vllm_tasks as vt

def test_loaded_from_the_entry_point(pytestconfig):
    names = [plugin.__name__ for plugin, _ in pytestconfig.pluginmanager.list_plugin_distinfo()]
    assert "vllm_tasks.testing.pytest_plugin" in names

@pytest.mark.fake_vllm(model="m1", width=16)
def test_marker_settings_and_env(fake_vllm):
    with vt.Client() as client:  # VLLM_TASKS_BASE_URL
        assert client.embed("x").vectors.shape == (1, 16)
        assert client.server_info().default_model == "m1"

def test_defaults(fake_vllm):
    assert fake_vllm.settings.model == "fake-model" and fake_vllm.running
"""


def test_the_entry_point_gives_the_fixture(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed, the plugin loads by itself; a conftest naming it too (as ours does) does not clash."""
    install_entry_point(tmp_path, monkeypatch)
    monkeypatch.delenv("VLLM_TASKS_BASE_URL", raising=False)
    pytester.makeconftest('pytest_plugins = ["vllm_tasks.testing.pytest_plugin"]')
    # A basename no module of ours has: a full run has already imported tests/component/test_plugin.py.
    pytester.makepyfile(test_fake_vllm_entry_point=PLUGIN_TEST)
    # no:asyncio: pytest-asyncio (installed with langchain-tests) warns in a session without its loop
    # scope set; this one has no async tests.
    result = pytester.runpytest_inprocess("--strict-markers", "-p", "no:cacheprovider", "-p", "no:asyncio")
    result.assert_outcomes(passed=3)
    assert "VLLM_TASKS_BASE_URL" not in os.environ
