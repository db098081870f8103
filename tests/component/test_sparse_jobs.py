"""embed_file(..., sparse=True) and ``vllm-tasks embed-file --sparse`` against FakeVLLM servers configured
like the `splade` (SPLADE: vocabulary-wide /v1/embeddings rows) and `bge-m3` (lexical weights from
/pooling) fixtures: the Parquet's ``sparse_indices``/``sparse_values`` equal ``client.embed_sparse`` of
the same texts row by row, with everything the dense job guarantees (resume, refused rows, replicas, the
model check after each chunk, the fingerprint)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import vllm_tasks as vt
from vllm_tasks import cli
from vllm_tasks.jobs.state import PROBE_TEXT
from vllm_tasks.testing import FakeVLLM
from vllm_tasks.testing import content as fake_content

from ..fakes import fake_like

EMBED = "/v1/embeddings"
FAST = {"retry_replica_after": 0.05, "give_up_after": 0.3}
SPARSE: dict[str, Any] = {"sparse": True, "text_field": "body"}  # the input is jsonl()'s
TEXTS = [
    f"document {i} about " + " ".join(["cats", "dogs", "sparse", "retrieval"][: 1 + i % 4]) for i in range(23)
]


@pytest.fixture
def splade() -> Iterator[FakeVLLM]:
    """A fresh SPLADE-like fake (30522 ids) whose context is 64 tokens, per test (faults, request counts)."""
    with fake_like("splade", max_model_len=64) as fixture:
        yield fixture.fake


def jsonl(folder: Path, texts: list[str] = TEXTS) -> Path:
    path = folder / "in.jsonl"
    path.write_text(
        "".join(json.dumps({"doc": f"d{i}", "body": t, "title": f"T{i}"}) + "\n" for i, t in enumerate(texts))
    )
    return path


def sparse_rows(out: Path) -> list[dict[int, float] | None]:
    """Each row of a sparse Parquet output as ``{token id: weight}`` (Milvus' shape), ``None`` when null."""
    table = pq.read_table(out)
    indices, values = table.column("sparse_indices").to_pylist(), table.column("sparse_values").to_pylist()
    return [None if i is None else dict(zip(i, v, strict=True)) for i, v in zip(indices, values, strict=True)]


def reference(server: FakeVLLM, texts: list[str]) -> list[dict[int, float]]:
    with vt.Client(server.url) as client:
        return client.embed_sparse(texts).to_milvus()


def row_requests(server: FakeVLLM) -> list[list[str]]:
    return [r.json["input"] for r in server.received(EMBED) if r.json["input"] != [PROBE_TEXT]]


@pytest.mark.parametrize("kind", ["splade", "bge-m3"])
def test_the_parquet_is_embed_sparse_row_by_row(tmp_path: Path, kind: str) -> None:
    source, out = jsonl(tmp_path), tmp_path / "out.parquet"
    with fake_like(kind) as fixture:
        job: dict[str, Any] = {"id_field": "doc", "keep_columns": ["title"], "chunk_rows": 5, **SPARSE}
        report = vt.embed_file(fixture.fake.url, source, out, batch_size=3, **job)
        expected = reference(fixture.fake, TEXTS)
        again = vt.embed_file(fixture.fake.url, source, out, **job)
    table = pq.read_table(out)
    assert table.schema.names == ["doc", "title", "sparse_indices", "sparse_values"]
    assert table.schema.field("sparse_indices").type == pa.list_(pa.int64())
    assert table.schema.field("sparse_values").type == pa.list_(pa.float32())
    assert table.column("doc").to_pylist() == [f"d{i}" for i in range(len(TEXTS))]
    assert table.column("title").to_pylist() == [f"T{i}" for i in range(len(TEXTS))]
    assert sparse_rows(out) == expected  # float32 both sides: exact
    assert all(expected)  # every row has weights
    assert pq.ParquetFile(out).metadata.num_row_groups == 5  # one per chunk
    width = 30522 if kind == "splade" else 0  # BGE-M3's answer does not state its vocabulary
    assert (report.texts, report.dimensions, report.sparse, report.failed_rows) == (23, width, True, 0)
    assert "23 sparse vectors" in report.summary()
    manifest = json.loads(out.with_name("out.parquet.manifest.json").read_text())
    assert manifest["vectors"] == "sparse" and manifest["fingerprint"]["output"] == {
        "format": "parquet",
        "sparse": True,
    }
    assert (
        again.already_complete and again.sparse and "already complete (23 sparse vectors" in again.summary()
    )


def test_an_interrupted_sparse_job_resumes_with_only_the_missing_chunks(
    tmp_path: Path, splade: FakeVLLM
) -> None:
    """The dense job's claim (test_jobs.py's test_a_failed_run_resumes_where_it_stopped) for sparse rows:
    the finished chunks are kept, only the others are sent again, and the output is the uninterrupted one."""
    source, out = jsonl(tmp_path), tmp_path / "out.parquet"
    splade.fail(500, path=EMBED, after=1 + 2 * 2, times=None)  # the start's probe, 2 chunks and their probes
    with vt.Client(splade.url, max_retries=0) as client, pytest.raises(vt.InternalServerError):
        vt.embed_file(client, source, out, **SPARSE, chunk_rows=5, batch_size=5, concurrency=1, **FAST)
    saved = json.loads((tmp_path / "out.parquet.partial" / "state.json").read_text())
    # which chunks finished before the fault depends on how the sends and the model checks interleave
    done = set(range(saved["done_below"])) | set(saved["done_above"])
    assert done and not out.exists()
    splade.clear_faults()
    splade.clear_requests()
    with vt.Client(splade.url) as client:
        report = vt.embed_file(client, source, out, **SPARSE, chunk_rows=5, batch_size=5)
    assert (report.chunks_resumed, report.chunks_sent) == (len(done), 5 - len(done))
    missing = [text for row, text in enumerate(TEXTS) if row // 5 not in done]
    assert sorted(t for batch in row_requests(splade) for t in batch) == sorted(missing)
    assert sparse_rows(out) == reference(splade, TEXTS)


def test_a_refused_row_is_null_in_both_columns_and_in_the_errors_file(
    tmp_path: Path, splade: FakeVLLM
) -> None:
    texts = list(TEXTS)
    texts[7] = " ".join(["word"] * 100)  # over the fake's 64 tokens
    source, out = jsonl(tmp_path, texts), tmp_path / "out.parquet"
    with vt.Client(splade.url, max_retries=0) as client:
        report = vt.embed_file(client, source, out, **SPARSE, id_field="doc", chunk_rows=10, batch_size=4)
    refused = [
        json.loads(line) for line in out.with_name("out.parquet.errors.jsonl").read_text().splitlines()
    ]
    assert report.failed_rows == 1 and [(r["row"], r["id"], r["status"]) for r in refused] == [(7, "d7", 400)]
    assert "maximum context length is 64 tokens" in refused[0]["error"]
    table = pq.read_table(out)
    assert table.column("sparse_indices").is_null().to_pylist() == [i == 7 for i in range(len(texts))]
    assert table.column("sparse_values").is_null().to_pylist() == [i == 7 for i in range(len(texts))]
    rows = sparse_rows(out)
    good = [i for i in range(len(texts)) if i != 7]
    assert [rows[i] for i in good] == reference(splade, [texts[i] for i in good])


def test_replicas_share_the_rows_and_a_sparse_model_swapped_mid_run_keeps_no_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, out = jsonl(tmp_path), tmp_path / "out.parquet"
    with fake_like("splade", latency=0.01) as a, fake_like("splade", latency=0.01) as b:
        report = vt.embed_file([a.fake.url, b.fake.url], source, out, **SPARSE, batch_size=2, concurrency=2)
        assert sparse_rows(out) == reference(a.fake, TEXTS)
        assert {r.url: r.rows > 0 for r in report.replicas} == {a.fake.url: True, b.fake.url: True}
        # A rolling deploy on one server (same name and width, other weights) after 10 vectors: the sparse
        # probe vector after the chunk differs (cosine of the {id: weight} forms), the chunk is not kept.
        old_model, answered = fake_content.sparse_vector, 0

        def rolling_deploy(text: str, width: int) -> Any:
            nonlocal answered
            answered += 1
            return old_model(text if answered <= 10 else text[::-1], width)

        monkeypatch.setattr(fake_content, "sparse_vector", rolling_deploy)
        swapped = tmp_path / "swapped.parquet"
        swap: dict[str, Any] = {"chunk_rows": 10, "batch_size": 5, "concurrency": 1, **SPARSE}
        with pytest.raises(
            vt.jobs.JobMismatch, match=r"changed during the run \(cosine 0\.\d+ .* were not kept"
        ):
            vt.embed_file(a.fake.url, source, swapped, **swap)
        monkeypatch.undo()
        report = vt.embed_file(a.fake.url, source, swapped, **swap)
        assert report.chunks_resumed == 0 and sparse_rows(swapped) == sparse_rows(out)


def test_a_dense_checkpoint_is_not_resumed_as_sparse_nor_the_reverse(
    tmp_path: Path, splade: FakeVLLM
) -> None:
    source, out = jsonl(tmp_path), tmp_path / "out.parquet"
    splade.fail(500, path=EMBED, after=3, times=None)
    with vt.Client(splade.url, max_retries=0) as client, pytest.raises(vt.InternalServerError):
        vt.embed_file(client, source, out, text_field="body", chunk_rows=5, concurrency=1, **FAST)  # dense
    state_file = tmp_path / "out.parquet.partial" / "state.json"
    saved = state_file.read_bytes()
    splade.clear_faults()
    with pytest.raises(vt.jobs.JobMismatch) as refused:
        vt.embed_file(splade.url, source, out, **SPARSE, chunk_rows=5)
    assert "sparse vectors: None -> True" in str(refused.value) and "swapped" not in str(refused.value)
    assert state_file.read_bytes() == saved  # left alone for the dense run it belongs to
    finished = vt.embed_file(splade.url, source, out, **SPARSE, chunk_rows=5, resume=False)
    assert finished.sparse and sparse_rows(out) == reference(splade, TEXTS)
    with pytest.raises(vt.jobs.JobMismatch, match=r"sparse vectors: True -> None"):
        vt.embed_file(splade.url, source, out, text_field="body", chunk_rows=5)  # dense over a sparse output


def test_sparse_into_npy_and_options_of_the_wrong_kind_are_refused_before_any_request(
    tmp_path: Path, splade: FakeVLLM
) -> None:
    source = jsonl(tmp_path)
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("o.npy", {}, "out"),
        ("o.parquet", {"output_format": "npy"}, "output_format"),
        ("o.parquet", {"params": vt.EmbedParams(dimensions=4)}, "params"),
        ("o.parquet", {"params": vt.SparseEmbedParams(return_tokens=True)}, "return_tokens"),
        ("o.parquet", {"params": {"top_k": 0}}, "top_k"),
    ]
    for name, kwargs, field in cases:
        with pytest.raises(vt.InvalidInputError) as info:
            vt.embed_file(splade.url, source, tmp_path / name, **SPARSE, **kwargs)
        assert info.value.field == field, kwargs
    with pytest.raises(vt.InvalidInputError, match=r"\.parquet") as npy:
        vt.embed_file(splade.url, source, tmp_path / "o.npy", **SPARSE)
    assert npy.value.value == str(tmp_path / "o.npy")
    with pytest.raises(vt.InvalidInputError) as dense:
        vt.embed_file(
            splade.url, source, tmp_path / "d.npy", text_field="body", params=vt.SparseEmbedParams()
        )
    assert dense.value.field == "params"
    assert splade.requests == []
    assert not list(tmp_path.glob("o.*")) and not list(tmp_path.glob("d.*"))


def test_the_cli_sparse_flag(tmp_path: Path, splade: FakeVLLM, capsys: pytest.CaptureFixture[str]) -> None:
    source, out = jsonl(tmp_path), tmp_path / "out.parquet"
    command = ["embed-file", str(source), "--out", str(out), "--text-field", "body", "--url", splade.url]
    assert cli.main([*command, "--sparse", "--chunk-rows", "10"]) == cli.EXIT_OK
    assert "23 sparse vectors (30522 ids)" in capsys.readouterr().err
    assert sparse_rows(out) == reference(splade, TEXTS)
    assert cli.main([*command, "--sparse", "--dimensions", "8"]) == cli.EXIT_USAGE
    npy = ["embed-file", str(source), "--out", str(tmp_path / "o.npy"), "--text-field", "body", "--sparse"]
    assert cli.main([*npy, "--url", splade.url]) == cli.EXIT_USAGE
    assert "out" in (err := capsys.readouterr().err) and "Write Parquet" in err


def test_a_client_with_its_own_http_client_runs_a_sparse_job(tmp_path: Path, splade: FakeVLLM) -> None:
    """Its calls go through that client in worker threads (ThreadedClient): embed_sparse among them.
    Was: AttributeError, ThreadedClient had no embed_sparse."""
    source, out = jsonl(tmp_path), tmp_path / "out.parquet"
    with httpx.Client() as own, vt.Client(splade.url, http_client=own) as client:
        vt.embed_file(client, source, out, **SPARSE, chunk_rows=10)
    assert sparse_rows(out) == reference(splade, TEXTS)
