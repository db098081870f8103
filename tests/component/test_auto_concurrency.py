"""``concurrency="auto"`` in the jobs against a FakeVLLM at its capacity (``slots``: requests served at
once, the others queued, 503 past ``queue_limit`` waiting; issue 25). The limit is asserted on what it
settles on and on the 503s the server counted, never on timings (the convergence against every fixed
concurrency is in tests/unit/test_adaptive.py, in virtual time)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import vllm_tasks as vt
from vllm_tasks import cli, telemetry
from vllm_tasks.adaptive import AdaptiveLimit, Concurrency
from vllm_tasks.engine_metrics import METRICS_MAX_BYTES
from vllm_tasks.jobs.engine import send_request
from vllm_tasks.jobs.replicas import JobClient, Replica, ReplicaPool
from vllm_tasks.testing import OCR_TASKS, RERANKER_TASKS, CapacityLoad, FakeVLLM, Reply
from vllm_tasks.threaded import ThreadedClient

PAGE = Path(__file__).parents[2] / "examples/data/page.png"
TEXTS = [f"text number {index}" for index in range(2400)]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(TEXTS) + "\n")
    return path


def test_a_jobs_auto_fills_the_slots_from_the_metrics_without_a_503(tmp_path: Path) -> None:
    # 4 slots of 20 ms and 11 places in the queue: 15 in the server are never refused. See BOUND below:
    # R <= 4 x (1 + 20/50) = 5.6, a job's T = max(1, 5.6 / 4) = 1.4, so at most 2 x 7 + 1 = 15 allowed.
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS[:800]) + "\n")
    with (
        FakeVLLM(latency=0.02, slots=4, queue_limit=11) as fake,
        vt.Client(fake.url, max_retries=6) as client,
    ):
        auto = vt.embed_file(client, corpus, tmp_path / "auto.npy", batch_size=8, concurrency="auto")
        load = fake.load
        fixed = vt.embed_file(client, corpus, tmp_path / "fixed.npy", batch_size=8, concurrency=4)
    assert load.rejected == 0 and load.most_in_server <= 15
    (server,) = auto.replicas
    assert 2 <= server.concurrency <= 15 and len(fake.received("/metrics")) >= 2
    np.testing.assert_array_equal(np.load(auto.out), np.load(fixed.out))
    manifest = json.loads(auto.manifest.read_text())
    assert manifest["replicas"][0]["concurrency"] == server.concurrency


def test_folder_jobs_and_the_cli_take_auto(tmp_path: Path) -> None:
    scans = tmp_path / "scans"
    scans.mkdir()
    for index in range(12):
        shutil.copy(PAGE, scans / f"page{index}.png")
    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, latency=0.02, slots=2) as fake:
        report = vt.ocr_dir(fake.url, scans, tmp_path / "md", concurrency="auto")
        assert report.complete and report.units_sent == 12
        assert 1 <= report.replicas[0].concurrency <= 64
        code = cli.main(["ocr-dir", str(scans), "--out", str(tmp_path / "md2"), "--url", fake.url,
                         "--concurrency", "auto"])  # fmt: skip
    assert code == 0


@pytest.mark.parametrize("value", [0, "fast", 2.5])
def test_a_concurrency_that_is_not_a_count_or_auto_is_refused(
    value: object, corpus: Path, tmp_path: Path
) -> None:
    with pytest.raises(vt.InvalidInputError, match="concurrency"):
        vt.embed_file("http://127.0.0.1:9", corpus, tmp_path / "out.npy", concurrency=value)  # type: ignore[arg-type]


def test_the_cli_refuses_another_word(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["embed-file", "in.txt", "--out", "out.npy", "--concurrency", "fast"])
    assert exit_info.value.code == 2 and "neither a whole number nor auto" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# concurrency="auto" in the client's own calls (embed, rerank, score): FakeVLLM's capacity model
# --------------------------------------------------------------------------------------------------

BATCHES = [f"text {index}" for index in range(400)]  # 50 requests of 8

# BOUND: FakeVLLM serves /metrics by default, and auto reads its averages over each round trip (at
# least 50 ms, SAMPLE_INTERVAL): with S slots of c seconds, the average running R is at most
# S x (1 + c / 0.05) (requests that began before the window and finished in it), and the limit grows only
# after a round trip showed fewer than T waiting, to at most 2 (R + T) + 1 in the start and
# 1.25 R + T + 1 after it (adaptive.py's module doc). A call's T is 1 up to 16 running. Whatever the
# timings, no more are ever sent, so a queue with room for them never answers 503. From 1, the first
# round trip with a free slot (no wait: W = 0) lifts the limit to at least 2.


def test_embed_auto_fills_the_slots_from_the_metrics_and_never_queues_more_than_its_target(
    make_client: Any,
) -> None:
    # 4 slots of 11 ms, 16 places in the queue: R <= 4 x (1 + 11/50) = 4.9, at most 2 x 5.9 + 1 = 12
    with FakeVLLM(slots=4, latency=0.003, cost_per_input=0.001, queue_limit=16) as fake:
        client = make_client(fake.url)
        assert client.usage.concurrency_limit is None  # no auto call yet
        result = client.embed(BATCHES, batch_size=8, concurrency="auto")
        reference = client.embed(BATCHES, batch_size=8, concurrency=1)
        load = fake.load
    np.testing.assert_array_equal(result.vectors, reference.vectors)
    assert client._transport.route_limit("/v1/embeddings").limit.engine  # steered by the metrics
    assert load.rejected == 0 and load.most_in_server <= 12
    assert 2 <= client.usage.concurrency_limit <= 12


@pytest.mark.parametrize("call", ["rerank", "score"])
def test_rerank_and_score_take_auto_from_the_metrics_without_a_503(make_client: Any, call: str) -> None:
    # 2 slots of 12 ms and 5 places in the queue: R <= 2 x (1 + 12/50) = 2.48, at most 2 x 3.48 + 1 = 7
    documents = [f"document {index}" for index in range(96)]

    def run(concurrency: Concurrency) -> tuple[list[float], CapacityLoad]:
        with FakeVLLM(
            tasks=RERANKER_TASKS, slots=2, latency=0.01, cost_per_input=0.0005, queue_limit=5
        ) as fake:
            client = make_client(fake.url, max_retries=8)
            if call == "rerank":
                ranking = client.rerank("query", documents, batch_size=4, concurrency=concurrency)
                scores = [item.score for item in sorted(ranking.results, key=lambda r: r.index)]
            else:
                scores = list(client.score("query", documents, batch_size=4, concurrency=concurrency).scores)
            if concurrency == "auto":
                assert client._transport.route_limit(f"/{call}").limit.engine  # steered by the metrics
            return scores, fake.load

    best, _ = run(2)
    auto, load = run("auto")
    assert auto == best
    assert load.rejected == 0 and load.most_in_server <= 7


@pytest.mark.parametrize("answer", ["404", "500", "garbage", "oversized"])
def test_auto_without_metrics_reads_them_once_and_goes_on_from_latencies(
    make_client: Any, answer: str
) -> None:
    # Latency-only: what it settles on depends on the timings (tests/unit/test_adaptive.py converges it
    # in virtual time); here only what holds whatever they are: the call succeeds with the same answer,
    # /metrics is asked once per server, and every 503 the server sent was heard as an overload.
    with FakeVLLM(
        slots=2, latency=0.003, cost_per_input=0.001, queue_limit=4, metrics=answer != "404"
    ) as fake:
        if answer == "500":
            fake.fail(500, path="/metrics", times=1)
        elif answer == "garbage":
            fake.mutate(lambda reply: Reply(200, b"<html>a proxy's page</html>"), path="/metrics", times=1)
        elif answer == "oversized":  # vLLM's gauges, then more than a body of metrics can be
            oversized = b"#" * METRICS_MAX_BYTES
            fake.mutate(lambda reply: Reply(200, reply.body + oversized), path="/metrics", times=1)
        client = make_client(fake.url, max_retries=8)
        result = client.embed(BATCHES[:160], batch_size=8, concurrency="auto")
        client.embed(BATCHES[:160], batch_size=8, concurrency="auto")
        reference = client.embed(BATCHES[:160], batch_size=8, concurrency=1)
        route = client._transport.route_limit("/v1/embeddings")
        asked, rejected = len(fake.received("/metrics")), fake.rejected
    np.testing.assert_array_equal(result.vectors, reference.vectors)
    assert asked == 1 and not route.limit.engine
    assert route.limit.overloads == rejected and route.limit.answers >= 40


def test_auto_backs_off_after_503s(make_client: Any) -> None:
    with FakeVLLM(slots=16, latency=0.02) as fake:
        client = make_client(fake.url, max_retries=8)
        client.embed(BATCHES, batch_size=4, concurrency="auto")  # 100 answers: it grows past the start
        learned = client.usage.concurrency_limit
        fake.fail(503, path="/v1/embeddings", times=6, retry_after=0)
        client.embed(BATCHES[:16], batch_size=4, concurrency="auto")  # starts from what it learned
    assert learned >= 4
    assert client.usage.concurrency_limit < learned  # six times x0.7, a few answers after


def test_auto_waits_out_retry_after_in_every_request_it_starts(
    make_client: Any, no_sleep: list[float]
) -> None:
    # One 503 asking for 30 s: with auto, the requests started after it wait too (sleeps recorded, not
    # slept); with a fixed concurrency only the refused request waits (its retry)
    def waits(concurrency: Concurrency) -> int:
        no_sleep.clear()
        with FakeVLLM(latency=0.002) as fake:
            client = make_client(fake.url, max_retries=2)
            client.embed(["warm"])  # discovery done before the 503
            fake.fail(503, path="/v1/embeddings", times=1, retry_after=30)
            client.embed(BATCHES[:64], batch_size=4, concurrency=concurrency)
        return sum(1 for seconds in no_sleep if seconds > 20)

    assert waits(4) == 1
    assert waits("auto") >= 2


@pytest.mark.parametrize("value", [0, "fast", 2.5, True])
@pytest.mark.parametrize("call", ["embed", "rerank", "score"])
def test_a_call_refuses_a_concurrency_that_is_not_a_count_or_auto(
    make_client: Any, call: str, value: object
) -> None:
    client = make_client("http://127.0.0.1:9")
    arguments: dict[str, Any] = {
        "embed": {"input": ["a"]},
        "rerank": {"query": "q", "documents": ["a"]},
        "score": {"text_1": "q", "text_2": ["a"]},
    }[call]
    with pytest.raises(vt.InvalidInputError, match="concurrency") as error:
        getattr(client, call)(**arguments, concurrency=value)
    assert "auto" in str(error.value)


def test_auto_requests_carry_their_limit_in_telemetry(
    make_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(telemetry, "_tracer", provider.get_tracer("vllm_tasks"))
    with FakeVLLM() as fake:
        client = make_client(fake.url)
        client.embed(BATCHES[:32], batch_size=4, concurrency="auto")
        client.embed(BATCHES[:32], batch_size=4)
    limits = [
        dict(span.attributes or {}).get("vllm_tasks.concurrency.limit")
        for span in exporter.get_finished_spans()
        if span.name.startswith("embeddings")
    ]
    assert len(limits) == 16
    assert all(isinstance(limit, int) and limit >= 1 for limit in limits[:8])
    assert limits[8:] == [None] * 8  # a fixed concurrency adds nothing


@pytest.mark.parametrize("sync", [False, True], ids=["AsyncClient", "Client"])
def test_a_job_replicas_limit_hears_the_503s_its_client_retried(sync: bool) -> None:
    # The client's retries absorb both 503s (no replica failure); the limit still backs off on each,
    # also when the requests run in a ThreadedClient's threads (applied on the loop's thread).
    async def send(url: str) -> Replica:
        async with contextlib.AsyncExitStack() as stack:
            client: JobClient
            if sync:
                client = ThreadedClient(stack.enter_context(vt.Client(url, max_retries=3)))
            else:
                client = await stack.enter_async_context(vt.AsyncClient(url, max_retries=3))
            replica = Replica(client, url)
            pool = ReplicaPool([replica], "auto", retry_after=0.1, give_up_after=5.0)
            _, result = await send_request(pool, lambda job_client: job_client.embed(["a text"]), rows=1)
            await asyncio.sleep(0)  # a callback scheduled from a thread runs on the loop's next turn
            assert result.vectors.shape == (1, 384)
            return replica

    with FakeVLLM(latency=0.005) as fake:
        fake.fail(503, path="/v1/embeddings", times=2, retry_after=0)
        replica = asyncio.run(send(fake.url))
    assert replica.limit is not None and replica.limit.overloads == 2 and replica.failures == 0


def test_a_model_checks_503_backs_the_limit_off_and_a_batchs_is_not_counted_twice() -> None:
    class Overloaded(Exception):
        status_code = 503

    async def set_aside() -> AdaptiveLimit | None:
        replica = Replica(cast(JobClient, None), "http://127.0.0.1:9")
        pool = ReplicaPool([replica], "auto", retry_after=0.1, give_up_after=5.0)
        pool.set_aside(replica, Overloaded(), held=False)  # a model check: sent outside _checked's listener
        replica.in_flight = 1
        pool.set_aside(replica, Overloaded())  # a batch's: its listener heard the answer already
        return replica.limit

    limit = asyncio.run(set_aside())
    assert limit is not None and limit.overloads == 1
