"""What an embed_file job sends and where it counts it, against FakeVLLM.

Each batch the job plans (``batch_size`` rows, ``max_batch_tokens`` estimated tokens) goes out as exactly one
request, whatever its size: no second plan inside the client splits it, and ``max_batch_tokens`` is honoured
above the client's own 200,000-character batch cap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import vllm_tasks as vt
from vllm_tasks.jobs.state import PROBE_TEXT
from vllm_tasks.testing import EMBEDDING_TASKS, FakeVLLM

EMBED = "/v1/embeddings"


def fake_server(**settings: Any) -> FakeVLLM:
    return FakeVLLM(**{"model": "minilm", "tasks": EMBEDDING_TASKS, "width": 8, **settings})


def batches(server: FakeVLLM) -> list[list[str]]:
    """The batches a fake received (the model probes left out)."""
    return [r.json["input"] for r in server.received(EMBED) if r.json["input"] != [PROBE_TEXT]]


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
