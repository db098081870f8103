"""embed_file(..., multi_vector=True) and ``vllm-tasks embed-file --multi-vector`` against FakeVLLM servers
configured like the `late-interaction` fixture (a ``token_embed`` model: /pooling answers one vector per
token): the Parquet's ``token_embeddings`` equal ``client.pool`` of the same texts row by row, resumable
like every job; the refusals (.npy, with sparse, a one-vector-per-text model) come before any row is sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import vllm_tasks as vt
from vllm_tasks import cli
from vllm_tasks.jobs import JobMismatch
from vllm_tasks.jobs.state import PROBE_TEXT

from ..fakes import fake_like

TEXTS = [f"row {i} " + "about late interaction " * (1 + i % 3) for i in range(11)]


def text_file(folder: Path) -> Path:
    path = folder / "in.txt"
    path.write_text("".join(t + "\n" for t in TEXTS))
    return path


def matrices(out: Path) -> list[np.ndarray | None]:
    column = pq.read_table(out).column("token_embeddings").to_pylist()
    return [None if rows is None else np.array(rows, np.float32) for rows in column]


def test_the_parquet_is_pool_row_by_row_and_a_rerun_is_a_no_op(tmp_path: Path) -> None:
    source, out = text_file(tmp_path), tmp_path / "out.parquet"
    with fake_like("late-interaction") as fixture:
        url = fixture.fake.url
        report = vt.embed_file(url, source, out, multi_vector=True, chunk_rows=4, batch_size=3)
        rows_sent = [
            r.json["input"] for r in fixture.fake.received("/pooling") if r.json["input"] != [PROBE_TEXT]
        ]
        with vt.Client(url) as client:
            expected = client.pool(TEXTS).data
        again = vt.embed_file(url, source, out, multi_vector=True, chunk_rows=4)
    table = pq.read_table(out)
    width = expected[0].shape[1]
    assert table.schema.field("token_embeddings").type == pa.list_(pa.list_(pa.float32(), width))
    got = matrices(out)
    assert [m.shape for m in got if m is not None] == [m.shape for m in expected]  # a row per token
    for row, want in zip(got, expected, strict=True):
        np.testing.assert_array_equal(row, want)
    assert (report.texts, report.dimensions, report.vectors) == (len(TEXTS), width, "multi-vector")
    assert "per-token matrices" in report.summary()
    assert sum(len(batch) for batch in rows_sent) == len(TEXTS)
    assert again.already_complete and again.vectors == "multi-vector"
    manifest = json.loads(report.manifest.read_text())
    assert manifest["vectors"] == "multi-vector"


def test_a_dense_job_is_not_taken_for_a_multi_vector_one(tmp_path: Path) -> None:
    source, out = text_file(tmp_path), tmp_path / "out.parquet"
    with fake_like("embed") as dense, fake_like("late-interaction") as tokens:
        vt.embed_file(dense.fake.url, source, out)
        with pytest.raises(JobMismatch, match="per-token vectors: None -> True"):
            vt.embed_file(tokens.fake.url, source, out, multi_vector=True)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"out": "x.npy"}, "out"),
        ({"out": "x.parquet", "sparse": True}, "multi_vector"),
        ({"out": "x.parquet", "params": vt.EmbedParams(dimensions=8)}, "params"),
        ({"out": "x.parquet", "multi_vector": "yes"}, "multi_vector"),
    ],
)
def test_refusals_before_any_request(tmp_path: Path, kwargs: dict[str, Any], field: str) -> None:
    job = {"multi_vector": True, **kwargs, "out": tmp_path / kwargs["out"]}
    with fake_like("late-interaction") as fixture:
        with pytest.raises(vt.InvalidInputError) as info:
            vt.embed_file(fixture.fake.url, text_file(tmp_path), **job)
        assert not fixture.fake.received("/pooling")
    assert info.value.field == field


def test_a_model_with_one_vector_per_text_is_refused_naming_the_flag(tmp_path: Path) -> None:
    with fake_like("embed") as fixture, pytest.raises(vt.UnsupportedByServer, match="token_embed"):
        vt.embed_file(fixture.fake.url, text_file(tmp_path), tmp_path / "o.parquet", multi_vector=True)


def test_the_cli_flag(tmp_path: Path) -> None:
    source, out = text_file(tmp_path), tmp_path / "cli.parquet"
    with fake_like("late-interaction") as fixture:
        code = cli.main(
            ["embed-file", str(source), "--out", str(out), "--multi-vector", "--url", fixture.fake.url]
        )
    assert code == 0
    assert len(matrices(out)) == len(TEXTS)


def test_an_interrupted_job_resumes_with_only_the_missing_chunks(tmp_path: Path) -> None:
    source, out = text_file(tmp_path), tmp_path / "out.parquet"
    fast = {"retry_replica_after": 0.05, "give_up_after": 0.3}
    job: dict[str, Any] = {"multi_vector": True, "chunk_rows": 4, "batch_size": 4}
    with fake_like("late-interaction") as fixture:
        fake = fixture.fake
        fake.fail(
            500, path="/pooling", after=1 + 2 * 2, times=None
        )  # the start's probe, 2 chunks, their probes
        with vt.Client(fake.url, max_retries=0) as client, pytest.raises(vt.InternalServerError):
            vt.embed_file(client, source, out, concurrency=1, **job, **fast)
        assert not out.exists()
        fake.clear_faults()
        fake.clear_requests()
        report = vt.embed_file(fake.url, source, out, **job)
        sent = [r.json["input"] for r in fake.received("/pooling") if r.json["input"] != [PROBE_TEXT]]
        with vt.Client(fake.url) as client:
            expected = client.pool(TEXTS).data
    # which chunks finished before the fault depends on how the sends and the model checks interleave
    assert report.chunks_resumed >= 1 and report.chunks_resumed + report.chunks_sent == 3
    # only the missing chunks, each once (which ones were done depends on that interleaving too)
    chunks = [TEXTS[start : start + 4] for start in range(0, len(TEXTS), 4)]
    texts_sent = sorted(text for batch in sent for text in batch)
    missing = [chunk for chunk in chunks if set(chunk) & set(texts_sent)]
    assert len(missing) == report.chunks_sent and texts_sent == sorted(t for c in missing for t in c)
    for row, want in zip(matrices(out), expected, strict=True):
        np.testing.assert_array_equal(row, want)
