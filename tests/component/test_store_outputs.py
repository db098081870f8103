"""embed_file into vector stores against FakeVLLM and the real libraries on local folders: a LanceDB table
(``lancedb://PATH#TABLE``) and a Qdrant collection in local mode (``qdrant://PATH#COLLECTION``). Each holds
``client.embed`` (``embed_sparse``, ``pool``) of the same texts row by row; a refused row is stored without
vectors and listed in the errors file, not a failed job; a job killed (``kill -9``) after the store took a
chunk but before the checkpoint counted it stores every row exactly once when resumed, sending only what
was missing.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
import pytest
from qdrant_client import QdrantClient

import vllm_tasks as vt
from vllm_tasks import cli
from vllm_tasks.jobs.state import PROBE_TEXT

from ..clients import cli_env
from ..fakes import FakeFixture, fake_like

TEXTS = [
    f"document {i} about " + " ".join(["cats", "dogs", "stores", "vectors"][: 1 + i % 4]) for i in range(13)
]
LONG = 7  # over the fakes' context (256 or 512 tokens)
JOB: dict[str, Any] = {"text_field": "body", "id_field": "doc", "keep_columns": ["title"], "chunk_rows": 4}


def jsonl(folder: Path, refused: bool = False) -> Path:
    texts = list(TEXTS)
    if refused:
        texts[LONG] = "word " * 600
    path = folder / "in.jsonl"
    path.write_text(
        "".join(json.dumps({"doc": f"d{i}", "body": t, "title": f"T{i}"}) + "\n" for i, t in enumerate(texts))
    )
    return path


def sent(fixture: FakeFixture, route: str) -> list[str]:
    return [t for r in fixture.fake.received(route) for t in r.json["input"] if t != PROBE_TEXT]


def refused_rows(job_path: Path) -> list[tuple[int, str, int]]:
    lines = job_path.with_name(job_path.name + ".errors.jsonl").read_text().splitlines()
    return [(row["row"], row["id"], row["status"]) for row in map(json.loads, lines)]


def lance_rows(folder: Path, name: str = "docs") -> dict[str, list[Any]]:
    table = lancedb.connect(folder).open_table(name).to_arrow().sort_by("row")
    return table.to_pydict()


def qdrant_points(folder: Path, name: str = "docs") -> list[Any]:
    client = QdrantClient(path=str(folder))
    try:
        points, _ = client.scroll(name, limit=1000, with_vectors=True)
    finally:
        client.close()
    return sorted(points, key=lambda point: point.id)


@pytest.fixture(scope="module")
def embed_fake() -> Iterator[FakeFixture]:
    with fake_like("embed") as fixture:
        yield fixture


def test_a_lancedb_table_is_embed_row_by_row_and_a_refused_row_has_a_null_vector(
    tmp_path: Path, embed_fake: FakeFixture
) -> None:
    url = embed_fake.fake.url
    out = f"lancedb://{tmp_path}/db#docs"
    report = vt.embed_file(url, jsonl(tmp_path, refused=True), out, batch_size=3, **JOB)
    again = vt.embed_file(url, jsonl(tmp_path, refused=True), out, **JOB)
    with vt.Client(url) as client:
        expected = client.embed([t for i, t in enumerate(TEXTS) if i != LONG]).vectors
    table = lancedb.connect(tmp_path / "db").open_table("docs")
    assert table.schema.names == ["row", "doc", "title", "embedding"]
    assert table.schema.field("embedding").type == pa.list_(pa.float32(), 384)
    rows = lance_rows(tmp_path / "db")
    assert rows["row"] == list(range(len(TEXTS)))
    assert rows["doc"] == [f"d{i}" for i in range(len(TEXTS))] and rows["title"][1] == "T1"
    assert [v is None for v in rows["embedding"]] == [i == LONG for i in range(len(TEXTS))]
    got = np.array([v for v in rows["embedding"] if v is not None], np.float32)
    np.testing.assert_array_equal(got, expected)
    assert not np.allclose(got[0], got[1])  # the vectors depend on their texts
    assert (report.texts, report.failed_rows, report.vectors) == (len(TEXTS), 1, "dense")
    assert refused_rows(tmp_path / "db" / "docs") == [(LONG, f"d{LONG}", 400)]
    assert again.already_complete and table.count_rows() == len(TEXTS)
    assert json.loads(report.manifest.read_text())["output"] == out and report.store == again.store == out
    assert report.summary().startswith(
        f"{out}: 13 x 384 float32, 1 row(s) refused, see {tmp_path}/db/docs.errors"
    )
    assert lancedb.connect(tmp_path / "db").list_tables().tables == ["docs"]  # the job's files are not tables
    hit = table.search(expected[3]).limit(1).to_list()[0]
    assert hit["row"] == 3
    restarted = vt.embed_file(url, jsonl(tmp_path, refused=True), out, resume=False, **JOB)
    assert restarted.chunks_sent == 4 and lance_rows(tmp_path / "db")["row"] == list(range(len(TEXTS)))


def test_image_rows_go_to_lancedb_as_embed_images_row_by_row(tmp_path: Path, embed_fake: FakeFixture) -> None:
    images = [tmp_path / f"{index}.png" for index in range(3)]
    for index, image in enumerate(images):
        image.write_bytes(b"\x89PNG\r\n\x1a\n" + f"image number {index}".encode())
    listing = tmp_path / "images.txt"
    listing.write_text("0.png\nmissing.png\n1.png\n2.png\n")
    url = embed_fake.fake.url
    report = vt.embed_file(url, listing, f"lancedb://{tmp_path}/db#images", images=True)
    with vt.Client(url) as client:
        expected = client.embed(images=images).vectors
    rows = lance_rows(tmp_path / "db", "images")
    assert rows["row"] == [0, 1, 2, 3] and report.failed_rows == 1
    assert [vector is None for vector in rows["embedding"]] == [False, True, False, False]
    got = np.array([vector for vector in rows["embedding"] if vector is not None], np.float32)
    np.testing.assert_array_equal(got, expected)
    assert not np.allclose(got[0], got[1])


def test_a_lancedb_table_holds_pool_matrices_row_by_row(tmp_path: Path) -> None:
    with fake_like("late-interaction") as fixture:
        vt.embed_file(
            fixture.fake.url, jsonl(tmp_path), f"lancedb://{tmp_path}/db#tokens", multi_vector=True, **JOB
        )
        with vt.Client(fixture.fake.url) as client:
            expected = client.pool(TEXTS).data
    table = lancedb.connect(tmp_path / "db").open_table("tokens")
    width = expected[0].shape[1]
    assert table.schema.field("token_embeddings").type == pa.list_(pa.list_(pa.float32(), width))
    got = lance_rows(tmp_path / "db", "tokens")["token_embeddings"]
    assert [len(m) for m in got] == [len(m) for m in expected] and len({len(m) for m in got}) > 1
    for row, want in zip(got, expected, strict=True):
        np.testing.assert_array_equal(np.array(row, np.float32), want)


def test_sparse_vectors_into_lancedb_are_refused_naming_qdrant_before_any_request(
    tmp_path: Path, embed_fake: FakeFixture
) -> None:
    embed_fake.fake.clear_requests()
    with pytest.raises(vt.InvalidInputError, match=r"LanceDB has no sparse vectors.*Qdrant") as refused:
        vt.embed_file(embed_fake.fake.url, jsonl(tmp_path), f"lancedb://{tmp_path}/db#s", sparse=True, **JOB)
    assert refused.value.field == "sparse"
    with pytest.raises(vt.InvalidInputError, match="second column") as clash:
        vt.embed_file(
            embed_fake.fake.url, jsonl(tmp_path), f"lancedb://{tmp_path}/db#s", **{**JOB, "id_field": "row"}
        )
    assert clash.value.field == "id_field"
    assert embed_fake.fake.received() == [] and not (tmp_path / "db").exists()


# The job in a child process, which SIGKILLs itself once the store has taken its second chunk, before the
# checkpoint counts it (the patch exists only in that child).
DIE_AFTER_TWO_CHUNKS = """
import os, signal, sys

from vllm_tasks import cli
from vllm_tasks.jobs import stores

sink = getattr(stores, sys.argv.pop(1))
write = sink.write


def write_then_die(self, *args):
    write(self, *args)
    self.written = getattr(self, "written", 0) + 1
    if self.written == 2:
        os.kill(os.getpid(), signal.SIGKILL)


sink.write = write_then_die
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("kind", ["lancedb", "qdrant"])
def test_kill_9_after_the_store_took_a_chunk_then_resume_stores_every_row_once(
    tmp_path: Path, embed_fake: FakeFixture, kind: str
) -> None:
    """The store took chunk 1 but the checkpoint does not count it: the resumed run sends that chunk and
    the ones after again, and the store holds each row once (a local Qdrant folder's lock died with the
    process)."""
    url, source = embed_fake.fake.url, jsonl(tmp_path)
    out = f"{kind}://{tmp_path}/db#docs"
    sink = "LanceDBSink" if kind == "lancedb" else "QdrantSink"
    argv = ["embed-file", str(source), "--out", out, "--text-field", "body", "--id-field", "doc"]
    argv += ["--keep-column", "title", "--chunk-rows", "4", "--concurrency", "1", "--url", url]
    killed = subprocess.run(
        [sys.executable, "-c", DIE_AFTER_TWO_CHUNKS, sink, *argv],
        env=cli_env(),
        capture_output=True,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    saved = json.loads((tmp_path / "db" / "docs.partial" / "state.json").read_text())
    assert saved["done_below"] == 1 and not saved["done_above"]  # the store has chunks 0 and 1
    embed_fake.fake.clear_requests()
    report = vt.embed_file(url, source, out, **JOB)
    assert (report.chunks_resumed, report.chunks_sent) == (1, 3)
    assert sorted(sent(embed_fake, "/v1/embeddings")) == sorted(TEXTS[4:])
    with vt.Client(url) as client:
        expected = client.embed(TEXTS).vectors
    if kind == "lancedb":
        rows = lance_rows(tmp_path / "db")
        assert rows["row"] == list(range(len(TEXTS)))  # once each
        np.testing.assert_array_equal(np.array(rows["embedding"], np.float32), expected)
    else:
        points = qdrant_points(tmp_path / "db")
        assert [p.id for p in points] == list(range(len(TEXTS)))
        got = np.array([p.vector["embedding"] for p in points])
        np.testing.assert_allclose(got, expected / np.linalg.norm(expected, axis=1, keepdims=True), atol=1e-6)


@pytest.mark.parametrize(
    ("fixture", "option", "vector"),
    [
        ("embed", {}, "embedding"),
        ("splade", {"sparse": True}, "sparse"),
        ("late-interaction", {"multi_vector": True}, "token_embeddings"),
    ],
)
def test_a_qdrant_collection_is_the_sdk_row_by_row_and_a_refused_row_has_no_vector(
    tmp_path: Path, fixture: str, option: dict[str, Any], vector: str
) -> None:
    with fake_like(fixture) as fake:
        report = vt.embed_file(
            fake.fake.url, jsonl(tmp_path, refused=True), f"qdrant://{tmp_path}/qd#docs", **option, **JOB
        )
        good = [t for i, t in enumerate(TEXTS) if i != LONG]
        with vt.Client(fake.fake.url) as client:
            if fixture == "splade":
                expected: list[Any] = client.embed_sparse(good).to_milvus()
            elif fixture == "embed":
                vectors = client.embed(good).vectors
                expected = list(vectors / np.linalg.norm(vectors, axis=1, keepdims=True))  # Qdrant's cosine
            else:
                expected = [m / np.linalg.norm(m, axis=1, keepdims=True) for m in client.pool(good).data]
    points = qdrant_points(tmp_path / "qd")
    assert [p.id for p in points] == list(range(len(TEXTS)))
    assert [p.payload for p in points][:2] == [
        {"row": 0, "doc": "d0", "title": "T0"},
        {"row": 1, "doc": "d1", "title": "T1"},
    ]
    assert [p.vector == {} for p in points] == [i == LONG for i in range(len(TEXTS))]
    got = [p.vector[vector] for p in points if p.id != LONG]
    if fixture == "splade":
        got = [dict(zip(v.indices, v.values, strict=True)) for v in got]
        assert got == [{k: pytest.approx(w) for k, w in e.items()} for e in expected]
    else:
        for row, want in zip(got, expected, strict=True):
            np.testing.assert_allclose(np.array(row), want, atol=1e-6)
    assert report.failed_rows == 1 and refused_rows(tmp_path / "qd" / "docs") == [(LONG, f"d{LONG}", 400)]


def test_the_qdrant_query_finds_the_row_and_the_cli_writes_lancedb(
    tmp_path: Path, embed_fake: FakeFixture
) -> None:
    url = embed_fake.fake.url
    vt.embed_file(url, jsonl(tmp_path), f"qdrant://{tmp_path}/qd#docs", **JOB)
    with vt.Client(url) as client:
        query = client.embed([TEXTS[5]]).vectors[0]
    local = QdrantClient(path=str(tmp_path / "qd"))
    try:
        hits = local.query_points("docs", query=query.tolist(), using="embedding", limit=1).points
        with pytest.raises(vt.jobs.JobError, match=r"qd#more: .* is open in another Qdrant client"):
            vt.embed_file(url, jsonl(tmp_path), f"qdrant://{tmp_path}/qd#more", **JOB)  # the folder is held
    finally:
        local.close()
    assert hits[0].payload["doc"] == "d5"
    argv = [
        "embed-file",
        str(jsonl(tmp_path)),
        "--out",
        f"lancedb://{tmp_path}/cli#docs",
        "--text-field",
        "body",
    ]
    assert cli.main([*argv, "--url", url]) == 0
    assert lance_rows(tmp_path / "cli")["row"] == list(range(len(TEXTS)))
