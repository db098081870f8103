"""Ray Data's row-id checkpoints through vllm_tasks.integrations.ray, in a real local Ray runtime
(``ray_runtime``, shared with test_ray.py) against a FakeVLLM like the `embed` fixture.

A pipeline ``read_json -> map_batches(Embedder) -> write_parquet`` (six files, six blocks) with
``CheckpointConfig(id_column="id")`` is killed mid-way: once Ray has committed the checkpoint of a written
block, the fake refuses every request (503, no retries), so the job fails. Run again with the same
checkpoint, it sends only the rows whose blocks were not committed: every row is in the output once,
equal to ``client.embed``, and the fake served each row of a committed block once in all.
"""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import ray
import ray.data
from ray.data.checkpoint import CheckpointConfig

import vllm_tasks as vt
from vllm_tasks.integrations.ray import Embedder
from vllm_tasks.testing import Reply

from ..fakes import FakeFixture

FILES, ROWS = 6, 8  # one read block and one map batch per file
#: How long the fake holds the first refused request for a committed checkpoint: a bound, not a wait.
COMMIT_DEADLINE = 60.0


def committed(checkpoint: Path) -> list[Path]:
    """Ray's committed checkpoint files (a block written whole); a pending one ends ``.pending.parquet``."""
    return [path for path in checkpoint.glob("*.parquet") if not path.name.endswith(".pending.parquet")]


@pytest.fixture
def checkpointing(tmp_path: Path) -> Iterator[Path]:
    """Ray's row-id checkpoints in ``tmp_path/checkpoint`` for the test (the driver's DataContext); a run
    that stops making progress fails with Ray's diagnosis after a minute instead of its default 30."""
    context = ray.data.DataContext.get_current()
    stall = context.execution_no_progress_timeout_s
    context.checkpoint_config = CheckpointConfig(id_column="id", checkpoint_path=str(tmp_path / "checkpoint"))
    context.execution_no_progress_timeout_s = 60
    try:
        yield tmp_path / "checkpoint"
    finally:
        context.checkpoint_config = None
        context.execution_no_progress_timeout_s = stall


def test_a_killed_pipeline_resumes_from_its_checkpoint_without_sending_finished_rows_again(
    ray_runtime: None, fake_embed: FakeFixture, checkpointing: Path, tmp_path: Path
) -> None:
    texts = [f"passage {i}: the river bank near village {i % 7} sells bread" for i in range(FILES * ROWS)]
    source = tmp_path / "source"
    source.mkdir()
    for file in range(FILES):
        rows = range(file * ROWS, (file + 1) * ROWS)
        lines = [json.dumps({"id": i, "text": texts[i]}) + "\n" for i in rows]
        (source / f"part-{file}.jsonl").write_text("".join(lines))
    out = tmp_path / "out"

    def run() -> None:
        # A resumed run adds Ray's CheckpointFilter actor (1 CPU), and the killed run's actor may hold
        # its CPU a while: on the runtime's 2 CPUs, the reads, the actor and the writes take a quarter
        # each, or the read waits for a CPU that does not free up.
        ray.data.read_json(str(source), override_num_blocks=FILES, num_cpus=0.25).map_batches(
            Embedder,
            fn_constructor_kwargs={
                "settings": vt.ClientSettings(fake_embed.base_url, max_retries=0),
                "id_column": "id",
            },
            batch_size=ROWS,
            compute=ray.data.ActorPoolStrategy(size=1),
            num_cpus=0.25,
        ).write_parquet(str(out), ray_remote_args={"num_cpus": 0.25})

    fake = fake_embed.fake
    fake.clear_requests()
    waited: list[bool] = []

    def refuse_once_a_block_is_committed(_reply: Reply) -> Reply:
        deadline = time.monotonic() + COMMIT_DEADLINE
        while not committed(checkpointing) and time.monotonic() < deadline:
            time.sleep(0.05)
        waited.append(bool(committed(checkpointing)))
        return Reply(503, b'{"error": {"message": "the server went away", "code": 503}}')

    fake.mutate(refuse_once_a_block_is_committed, path="/v1/embeddings", times=None, after=3)
    try:
        with pytest.raises(Exception, match="the server went away"):  # Ray's UserCodeException
            run()
    finally:
        fake.clear_faults()
    assert waited and all(waited)  # each refusal came after a committed block
    first = [request.json["input"] for request in fake.received("/v1/embeddings")]
    done = {int(i) for path in committed(checkpointing) for i in pq.read_table(path)["id"].to_pylist()}
    assert 0 < len(done) < len(texts)  # killed mid-way, with some blocks written

    fake.clear_requests()
    run()
    second = [request.json["input"] for request in fake.received("/v1/embeddings")]
    sent = collections.Counter(text for inputs in first[:3] + second for text in inputs)
    assert all(sent[texts[i]] == 1 for i in done)  # served once, before the kill: never sent again
    assert {texts.index(text) for inputs in second for text in inputs} == set(range(len(texts))) - done

    assert not checkpointing.exists()  # deleted once the run succeeded
    ray.data.DataContext.get_current().checkpoint_config = None  # reading back: no write, no checkpoint
    rows = ray.data.read_parquet(str(out)).take_all()
    ids = [int(row["id"]) for row in rows]
    assert sorted(ids) == list(range(len(texts)))  # every row once: none lost, none written twice
    vectors = np.stack([row["embedding"] for row in sorted(rows, key=lambda row: int(row["id"]))])
    with vt.Client(fake_embed.base_url) as client:
        expected = client.embed(texts).vectors
    assert len({tuple(vector[:4]) for vector in expected}) == len(texts)  # each text its own vector
    np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-6)
