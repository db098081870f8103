"""embed_file / aembed_file over several FakeVLLM servers, one of them stuck or slow (issue 24, item 3).

A batch that waits far longer than the job's recent batches (``HEDGE_FLOOR`` seconds, 5, or
``HEDGE_FACTOR`` times their median) is sent again to another replica; the first answer wins, the other
request is cancelled and its replica set aside. Was: a replica that stopped answering stalled the whole
job for the client's timeout (600 s) times its attempts, while the other replica idled.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import vllm_tasks as vt
from vllm_tasks.jobs import replicas
from vllm_tasks.jobs.state import PROBE_TEXT
from vllm_tasks.testing import EMBEDDING_TASKS, FakeVLLM

WIDTH = 8
EMBED = "/v1/embeddings"
HUNG = 3600.0  # "forever": FakeVLLM.stop() cuts it short
LINES = [f"text {i} " + "x" * (i % 7) for i in range(48)]
JOB: dict[str, Any] = {"chunk_rows": 8, "batch_size": 2, "concurrency": 2}


def fake_server(**settings: Any) -> FakeVLLM:
    return FakeVLLM(**{"model": "minilm", "tasks": EMBEDDING_TASKS, "width": WIDTH, **settings})


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def clean(corpus: Path, tmp_path: Path) -> Iterator[bytes]:
    """The ``.npy`` bytes a clean run on one replica writes."""
    with fake_server() as server:
        vt.embed_file(server.url, corpus, tmp_path / "clean.npy", **JOB)
    yield (tmp_path / "clean.npy").read_bytes()


def run_job(mode: str, servers: list[str], corpus: Path, out: Path) -> tuple[vt.jobs.EmbedFileReport, float]:
    """The job through ``embed_file`` (sync) or ``aembed_file`` (async); its report and wall time."""
    started = time.monotonic()
    if mode == "sync":
        report = vt.embed_file(servers, corpus, out, **JOB)
    else:
        report = asyncio.run(vt.aembed_file(servers, corpus, out, **JOB))
    return report, time.monotonic() - started


def batches(server: FakeVLLM) -> list[list[str]]:
    """The batches a fake received (the model probes left out)."""
    return [r.json["input"] for r in server.received(EMBED) if r.json["input"] != [PROBE_TEXT]]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_replica_that_stops_answering_is_set_aside_and_the_job_finishes(
    mode: str, corpus: Path, tmp_path: Path, clean: bytes
) -> None:
    out = tmp_path / "out.npy"
    with fake_server() as good, fake_server() as stuck:
        stuck.slow(HUNG, path=EMBED, after=3, times=None)  # the probe and two batches, then silence
        urls = good_url, stuck_url = good.url, stuck.url
        report, seconds = run_job(mode, list(urls), corpus, out)
        assert len(batches(stuck)) >= 3  # it was given batches after it stopped answering
    # was: stuck for the client's timeout (600 s) times its attempts on every batch it held
    assert seconds < 30
    assert out.read_bytes() == clean
    by_url = {r.url: r for r in report.replicas}
    assert by_url[stuck_url].failures >= 1 and by_url[stuck_url].rows <= 4
    assert sum(r.rows for r in report.replicas) == len(LINES)  # each row counted once
    manifest = json.loads(out.with_name("out.npy.manifest.json").read_text())
    failures = {r["url"]: r["failures"] for r in manifest["replicas"]}
    assert failures[stuck_url] >= 1 and failures[good_url] == 0


@pytest.fixture
def quick_hedge(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hedge after 0.3 s (not 5 s) so that a replica answering in 3 s is far behind."""
    monkeypatch.setattr(replicas, "HEDGE_FLOOR", 0.3)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_slow_replica_is_hedged_and_no_row_is_written_twice(
    mode: str, corpus: Path, tmp_path: Path, clean: bytes, quick_hedge: None
) -> None:
    out = tmp_path / "out.npy"
    with fake_server() as fast, fake_server() as slow:
        slow.slow(3.0, path=EMBED, after=1, times=None)  # answers every batch, 3 s late
        urls = fast_url, slow_url = fast.url, slow.url
        report, _ = run_job(mode, list(urls), corpus, out)
        sent_to_slow, sent_to_fast = batches(slow), batches(fast)
    assert out.read_bytes() == clean
    # was: the slow replica answered its batches itself, 3 s each; now a copy went to the fast one
    assert sent_to_slow and all(batch in sent_to_fast for batch in sent_to_slow)
    by_url = {r.url: r for r in report.replicas}
    assert by_url[slow_url].failures >= 1 and by_url[fast_url].rows == len(LINES)
    assert sum(r.rows for r in report.replicas) == len(LINES)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stuck_request_with_no_other_replica_is_cut_off_at_the_deadline(
    mode: str, corpus: Path, tmp_path: Path, clean: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replicas, "DEADLINE_FLOOR", 0.5)  # not 60 s
    out = tmp_path / "out.npy"
    with fake_server() as only:
        url = only.url
        only.slow(HUNG, path=EMBED, after=4, times=2)  # two requests get no answer, the rest do
        started = time.monotonic()
        if mode == "sync":
            report = vt.embed_file(url, corpus, out, retry_replica_after=0.05, **JOB)
        else:
            report = asyncio.run(vt.aembed_file(url, corpus, out, retry_replica_after=0.05, **JOB))
        seconds = time.monotonic() - started
    # was: the job waited for the client's timeout (600 s) on each
    assert seconds < 30
    assert out.read_bytes() == clean
    (only_report,) = report.replicas
    assert (only_report.url, only_report.rows) == (url, len(LINES)) and only_report.failures >= 1


def test_a_sync_client_with_its_own_http_client_returns_once_its_hung_request_is_cut_off(
    corpus: Path, tmp_path: Path, clean: bytes
) -> None:
    # Its calls run in worker threads (ThreadedClient); a request given up on runs on in its thread. Was:
    # those were the event loop's executor threads, which asyncio.run waits for: the job had written its
    # output in about 5 s but embed_file returned only at the client's timeout (here 40 s; 600 s by default).
    out = tmp_path / "out.npy"
    with fake_server() as good, fake_server() as stuck:
        stuck.slow(HUNG, path=EMBED, after=3, times=None)
        with httpx.Client(timeout=40) as http, vt.Client(stuck.url, http_client=http) as stuck_client:
            started = time.monotonic()
            vt.embed_file([good.url, stuck_client], corpus, out, **JOB)
            seconds = time.monotonic() - started
    assert seconds < 30
    assert out.read_bytes() == clean
