"""vllm_tasks.integrations.spark on a local Spark session (``local[1]``: one Python worker), against FakeVLLM
servers configured like the `embed`, `splade`, `rerank`, `stt` and `ocr` fixtures (tests/fakes.py).

Each UDF's rows equal the SDK's direct call on the same inputs, row for row (two inputs with two different
answers each time), a refused row or a null is a null result with its ``error`` and never a failed job, and
the UDFs run from SQL once registered (``spark.udf.register``). The session starts once for the module
(``spark``): Spark needs Java (``server-fixtures/setup --system-only`` installs a headless JRE); without it
the tests skip, or fail under CI / VLLM_TASKS_REQUIRE_FIXTURES=1.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageDraw
from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType
from pytest_plugin import missing_component

import vllm_tasks as vt
from vllm_tasks.integrations import spark as vt_spark
from vllm_tasks.testing import ReceivedRequest, grounding_output

from ..fakes import FakeFixture, fake_like

ROOT = Path(__file__).resolve().parents[2]
AUDIO = ROOT / "tests" / "data" / "audio"
LONG = "word " * 400  # over the `embed` fixture's max_model_len of 256: the server refuses it
TEXTS = ["the river bank at dawn", "a loan from the bank"]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """A local Spark session, once for the module: one core (one Python worker), no UI, one shuffle
    partition; its Python workers run this interpreter on this checkout. Stopped after, with its JVM."""
    if shutil.which("java") is None:
        missing_component("java is not installed: run server-fixtures/setup --system-only as root")
    started = time.perf_counter()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYSPARK_PYTHON", sys.executable)
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        session = (
            SparkSession.builder.master("local[1]")
            .appName("vllm-tasks-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.bindAddress", "127.0.0.1")  # not the host's name, whatever it resolves to
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", "1")
            .config("spark.driver.memory", "512m")
            # The JIT's first tier only and the serial collector: the JVM's start and first jobs take about
            # half the wall time on 2 busy cores (G1 and C2 compile threads compete with the tests)
            .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        print(f"Spark session started in {time.perf_counter() - started:.1f} s")  # shown with -rA
        try:
            yield session
        finally:
            stopping = time.perf_counter()
            gateway = SparkContext._gateway
            session.stop()
            if gateway is not None:  # the JVM ends when its stdin closes
                gateway.shutdown()
                gateway.proc.stdin.close()
                gateway.proc.wait(timeout=60)
                SparkContext._gateway = SparkContext._jvm = None
            print(f"Spark session and JVM stopped in {time.perf_counter() - stopping:.1f} s")


def texts_frame(spark: SparkSession, values: list[str | None], partitions: int = 1) -> Any:
    """An ``id``, ``text`` frame in ``partitions`` slices of consecutive rows (collected in row order)."""
    schema = StructType([StructField("id", StringType()), StructField("text", StringType())])
    rows = spark.sparkContext.parallelize([(str(i), v) for i, v in enumerate(values)], partitions)
    return spark.createDataFrame(rows, schema)


def test_embed_equals_client_embed_and_a_refused_row_is_its_error(
    spark: SparkSession, fake_embed: FakeFixture
) -> None:
    embed = vt_spark.embed_udf(settings=vt.ClientSettings(fake_embed.base_url), batch_size=2)
    frame = texts_frame(spark, [TEXTS[0], LONG, None, TEXTS[1]], partitions=2)
    probes = len(fake_embed.fake.received("/version"))
    rows = frame.select("id", embed("text").alias("e")).collect()
    # two tasks on the one Python worker: one client, which read the server's facts once
    assert len(fake_embed.fake.received("/version")) == probes + 1
    with vt.Client(fake_embed.base_url) as client:
        expected = client.embed(TEXTS).vectors
    vectors = [row.e.embedding for row in rows]
    np.testing.assert_allclose(np.array([vectors[0], vectors[3]], np.float32), expected, rtol=0, atol=1e-6)
    assert not np.allclose(expected[0], expected[1])  # two inputs, two answers
    assert (len(vectors[0]), vectors[1], vectors[2]) == (384, None, None)
    errors = [row.e.error for row in rows]
    assert errors[0] is None and errors[3] is None
    assert errors[1].startswith("ContextLengthExceeded: ") and "256" in errors[1]
    assert errors[2].startswith("InvalidInputError: text[") and "NoneType" in errors[2]


def test_score_registered_for_sql_equals_client_score(spark: SparkSession, fake_rerank: FakeFixture) -> None:
    queries, documents = (
        ["Where is the river?", "Where is the market?"],
        ["The river bank.", "Bread and fish."],
    )
    spark.udf.register("vt_score", vt_spark.score_udf(settings=vt.ClientSettings(fake_rerank.base_url)))
    spark.createDataFrame(
        [(str(i), q, d) for i, (q, d) in enumerate(zip(queries, documents, strict=True))],
        "id string, query string, document string",
    ).createOrReplaceTempView("pairs")
    rows = spark.sql("SELECT id, vt_score(query, document) AS s FROM pairs").collect()
    with vt.Client(fake_rerank.base_url) as client:
        expected = client.score(queries, documents).scores
    assert expected[0] != expected[1]
    assert [row.s.score for row in rows] == pytest.approx(list(expected), abs=1e-9)
    assert [row.s.error for row in rows] == [None, None]


def test_rerank_equals_client_rerank_per_row(spark: SparkSession, fake_rerank: FakeFixture) -> None:
    candidates = [["The river bank.", "Bread and fish.", "A stone bridge."], ["Money and loans.", "Music."]]
    queries = ["Where is the river?", "Who lends money?"]
    frame = spark.createDataFrame(
        [("0", queries[0], candidates[0]), ("1", queries[1], candidates[1]), ("2", "orphan", None)],
        StructType(
            [
                StructField("id", StringType()),
                StructField("query", StringType()),
                StructField("docs", ArrayType(StringType())),
            ]
        ),
    )
    rerank = vt_spark.rerank_udf(settings=vt.ClientSettings(fake_rerank.base_url), top_n=2)
    rows = frame.select("id", rerank("query", "docs").alias("r")).collect()
    with vt.Client(fake_rerank.base_url) as client:
        expected = [
            client.rerank(q, docs, top_n=2).results for q, docs in zip(queries, candidates, strict=True)
        ]
    for row, hits in zip(rows, expected, strict=False):
        assert [hit["index"] for hit in row.r.results] == [hit.index for hit in hits]  # Row.index: a method
        assert [hit["score"] for hit in row.r.results] == pytest.approx([hit.score for hit in hits], abs=1e-9)
        assert row.r.error is None
    assert len(expected[0]) == 2 and expected[0][0].score != expected[1][0].score
    assert rows[2].r.results is None and rows[2].r.error.startswith("InvalidInputError: documents[")


def test_sparse_embed_equals_client_embed_sparse(spark: SparkSession) -> None:
    with fake_like("splade", max_model_len=64) as splade:
        sparse = vt_spark.sparse_embed_udf(settings=vt.ClientSettings(splade.base_url), params={"top_k": 8})
        rows = (
            texts_frame(spark, [TEXTS[0], LONG, TEXTS[1]]).select("id", sparse("text").alias("s")).collect()
        )
        with vt.Client(splade.base_url) as client:
            expected = client.embed_sparse(TEXTS, top_k=8).vectors
    got = [rows[0].s, rows[2].s]
    assert [(list(s.indices), list(s.values)) for s in got] == [
        (v.indices.tolist(), pytest.approx(v.values.tolist())) for v in expected
    ]
    assert expected[0].indices.tolist() != expected[1].indices.tolist()
    assert all(s.error is None and s.tokens is None for s in got)
    assert (rows[1].s.indices, rows[1].s.values) == (None, None)
    assert rows[1].s.error.startswith("ContextLengthExceeded: ")


def heard(request: ReceivedRequest) -> str:
    """A transcript that names the upload it answers."""
    content = request.files["file"].content
    return f" A recording of {len(content)} bytes, digest {hashlib.sha256(content).hexdigest()[:12]}."


def test_transcribe_of_binary_files_equals_client_transcribe(spark: SparkSession) -> None:
    paths = [AUDIO / "fox.wav", AUDIO / "numbers.wav"]
    contents = [path.read_bytes() for path in paths] + [b"RIFF....WAVEfmt garbage"]
    frame = spark.createDataFrame(
        [(str(i), c) for i, c in enumerate(contents)],
        StructType([StructField("id", StringType()), StructField("content", BinaryType())]),
    )
    with fake_like("stt", transcript=heard) as stt:
        transcribe = vt_spark.transcribe_udf(settings=vt.ClientSettings(stt.base_url), segments=True)
        rows = frame.select("id", transcribe("content").alias("t")).collect()
        with vt.Client(stt.base_url) as client:
            expected = [client.transcribe(path).text for path in paths]
    assert [row.t.text for row in rows] == [*expected, None] and expected[0] != expected[1]
    assert rows[0].t.segments.startswith("[") and rows[0].t.error is None
    assert rows[2].t.error.startswith("InvalidInputError") and rows[2].t.segments is None


def page(text: str) -> bytes:
    image = Image.new("RGB", (320, 240), "white")
    ImageDraw.Draw(image).text((20, 20), text, fill="black")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def read_page(request: ReceivedRequest) -> str:
    """OCR output that names the image it answers (a digest of the image sent)."""
    messages = request.json.get("messages", []) if isinstance(request.json, dict) else []
    parts = [part for m in messages if isinstance(m.get("content"), list) for part in m["content"]]
    urls = [part["image_url"]["url"] for part in parts if part.get("type") == "image_url"]
    digest = hashlib.sha256("".join(urls).encode()).hexdigest()[:12]
    return grounding_output([("title", (40, 30, 960, 120), f"# Scan {digest}")])


def test_ocr_equals_client_ocr(spark: SparkSession) -> None:
    images = [page("Invoice 42"), page("Total 99.00"), b"not an image"]
    frame = spark.createDataFrame(
        [(str(i), image) for i, image in enumerate(images)],
        StructType([StructField("id", StringType()), StructField("image", BinaryType())]),
    )
    with fake_like("ocr", ocr_output=read_page) as ocr:
        reader = vt_spark.ocr_udf(settings=vt.ClientSettings(ocr.base_url), params={"max_tokens": 200})
        rows = frame.select("id", reader("image").alias("o")).collect()
        with vt.Client(ocr.base_url) as client:
            expected = [client.ocr(image, max_tokens=200).markdown for image in images[:2]]
    assert [row.o.markdown for row in rows] == [*expected, None] and expected[0] != expected[1]
    assert rows[0].o.blocks is None and rows[0].o.error is None
    assert rows[2].o.error.startswith("InvalidInputError")


def test_options_are_checked_where_the_factory_runs() -> None:
    with pytest.raises(vt.InvalidInputError, match="batch_size"):
        vt_spark.embed_udf(settings=vt.ClientSettings("http://127.0.0.1:9"), batch_size=0)
    with pytest.raises(vt.InvalidInputError, match="top_n"):
        vt_spark.rerank_udf(settings=vt.ClientSettings("http://127.0.0.1:9"), top_n=0)
