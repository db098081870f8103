"""What an embed_file job sends and where it counts it, against FakeVLLM.

Each batch the job plans (``batch_size`` rows, ``max_batch_tokens`` estimated tokens) goes out as exactly one
request, whatever its size: no second plan inside the client splits it, and ``max_batch_tokens`` is honoured
above the client's own 200,000-character batch cap. A client handed to a job (sync or async) counts the job's
requests and tokens in its own ``usage`` and keeps what the job learned of the server.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import vllm_tasks as vt
from vllm_tasks.jobs.state import PROBE_TEXT
from vllm_tasks.testing import EMBEDDING_TASKS, FakeVLLM
from vllm_tasks.testing.content import count_tokens
from vllm_tasks.testing.wire import ReceivedRequest

EMBED = "/v1/embeddings"


def fake_server(**settings: Any) -> FakeVLLM:
    return FakeVLLM(**{"model": "minilm", "tasks": EMBEDDING_TASKS, "width": 8, **settings})


def batches(server: FakeVLLM) -> list[list[str]]:
    """The batches a fake received (the model probes left out)."""
    return batches_of(server.received(EMBED))


def batches_of(requests: list[ReceivedRequest]) -> list[list[str]]:
    """The batches among ``requests`` (the model probes left out)."""
    return [r.json["input"] for r in requests if r.json["input"] != [PROBE_TEXT]]


def test_each_planned_batch_is_one_request_above_the_clients_batch_cap(tmp_path: Path) -> None:
    source = tmp_path / "long.txt"
    lines = [f"{i} " + "word " * 12_000 for i in range(8)]  # 60,002 characters, 20,002 estimated tokens each
    source.write_text("\n".join(lines) + "\n")
    with fake_server(max_model_len=100_000) as server:
        report = vt.embed_file(
            server.url, source, tmp_path / "o.npy", batch_size=4, max_batch_tokens=100_000, concurrency=1
        )
        sent = batches(server)
    # two batches of 4 rows (80,008 estimated tokens, 240,008 characters each): two requests
    assert [len(batch) for batch in sent] == [4, 4]
    assert report.replicas[0].batches == 2
    assert [text for batch in sent for text in batch] == lines


def test_a_batch_over_the_bytes_header_cap_is_one_base64_request(tmp_path: Path) -> None:
    # a bytes answer's metadata header grows with its inputs: past the cap the one request goes as base64
    source = tmp_path / "many.txt"
    lines = [f"text {i}" for i in range(600)]
    source.write_text("\n".join(lines) + "\n")
    with fake_server() as server:
        report = vt.embed_file(server.url, source, tmp_path / "o.npy", batch_size=600, concurrency=1)
        sent = [r.json for r in server.received(EMBED) if r.json["input"] != [PROBE_TEXT]]
    assert [len(body["input"]) for body in sent] == [600]
    assert sent[0]["encoding_format"] == "base64" and report.failed_rows == 0


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_callers_client_counts_the_jobs_requests_and_keeps_the_server_info(
    kind: str, tmp_path: Path
) -> None:
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(f"text {i}" for i in range(10)) + "\n")
    with fake_server() as server:
        if kind == "sync":
            with vt.Client(server.url, max_retries=0) as client:
                report = vt.embed_file(client, source, tmp_path / "o.npy", batch_size=4, concurrency=1)
                usage = client.usage
                looked_up = len(server.received("/v1/models"))
                client.server_info()
        else:

            async def job() -> tuple[vt.jobs.EmbedFileReport, vt.types.ClientUsage, int]:
                async with vt.AsyncClient(server.url, max_retries=0) as client:
                    report = await vt.aembed_file(
                        client, source, tmp_path / "o.npy", batch_size=4, concurrency=1
                    )
                    usage, looked_up = client.usage, len(server.received("/v1/models"))
                    await client.server_info()
                    return report, usage, looked_up

            report, usage, looked_up = asyncio.run(job())
        sent, received = server.received(EMBED), len(server.requests)
        assert len(server.received("/v1/models")) == looked_up == 1  # the job's look-up is the client's
    assert report.texts == 10
    assert usage.requests == received  # every request the job sent
    assert len(batches_of(sent)) == 3
    assert usage.prompt_tokens == sum(count_tokens(text) for r in sent for text in r.json["input"])


def test_a_late_chunking_job_sends_each_planned_batch_as_one_request(tmp_path: Path) -> None:
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(f"text number {i} " + "word " * 30 for i in range(8)) + "\n")
    params = vt.EmbedParams(long_inputs="late_chunking", chunk_tokens=16)
    late = {"version": "0.33.0", "scorer": "late-interaction", "tasks": {"embed", "pooling"}}
    with fake_server(**late) as server:
        vt.embed_file(server.url, source, tmp_path / "o.npy", params=params, batch_size=4, concurrency=1)
        sent = batches(server)
    assert [len(batch) for batch in sent] == [4, 4]
