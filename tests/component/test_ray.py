"""vllm_tasks.integrations.ray's callables without a Ray runtime, against FakeVLLM: results equal the
SDK's, batches split to ``batch_size``, the per-row error column (failing rows isolated by bisecting),
typed column errors, pickling (and cloudpickling the class, as Ray does), pandas batches.
(tests/integration/test_ray.py runs them in a real local Ray runtime against the real fixtures.)"""

from __future__ import annotations

import io
import json
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from PIL import Image
from ray import cloudpickle

import vllm_tasks as vt
from vllm_tasks.integrations.ray import OCR, Embedder, Scorer, Transcriber, isolate_failures
from vllm_tasks.testing import EMBEDDING_TASKS, OCR_TASKS, RERANKER_TASKS, SPEECH_TASKS, FakeVLLM

from ..clients import left_open_at_collection

FOX = Path(__file__).resolve().parents[1] / "data" / "audio" / "fox.wav"
TEXTS = [f"document number {i} about topic {i % 3}" for i in range(10)]
LONG = "word " * 80  # over the fake's max_model_len below: the server refuses it (400)


@pytest.fixture
def server() -> Iterator[FakeVLLM]:
    """An embedding model's fake, whose context (64 tokens) ``LONG`` is over."""
    with FakeVLLM(model="minilm", tasks=EMBEDDING_TASKS, max_model_len=64) as fake:
        yield fake


def texts(values: list[Any]) -> np.ndarray:
    """A text column as Ray's numpy batches hold one: an object array of str (None for nulls)."""
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


def embedded(server: FakeVLLM) -> list[list[str]]:
    return [request.json["input"] for request in server.received("/v1/embeddings")]


# --------------------------------------------------------------------------------------------------
# Embedder
# --------------------------------------------------------------------------------------------------


def test_vectors_are_the_servers_in_row_order_in_requests_of_batch_size(server: FakeVLLM) -> None:
    embedder = Embedder(base_url=server.url, model="minilm", batch_size=4, concurrency=2)
    batch = {"text": np.array(TEXTS), "id": np.arange(10)}
    out = embedder(batch)
    assert out["embedding"].dtype == np.float32 and out["embedding"].shape == (10, 384)
    np.testing.assert_allclose(out["embedding"], np.stack([server.vector(t) for t in TEXTS]), atol=1e-6)
    assert out["text"] is batch["text"] and out["id"] is batch["id"]  # input columns kept as they are
    assert "error" not in out
    sent = embedded(server)
    assert sorted(map(len, sent)) == [2, 4, 4] and sorted(t for s in sent for t in s) == sorted(TEXTS)


def test_a_413_from_a_proxy_halves_the_requests_and_every_row_is_embedded(server: FakeVLLM) -> None:
    server.fail(413, path="/v1/embeddings", times=1)
    out = Embedder(base_url=server.url, batch_size=10)({"text": np.array(TEXTS)})  # the client's halving
    np.testing.assert_allclose(out["embedding"], np.stack([server.vector(t) for t in TEXTS]), atol=1e-6)
    assert [len(r.json["input"]) for r in server.received("/v1/embeddings")] == [10, 5, 5]


def test_options_reach_the_server_and_plain_lists_are_batches(server: FakeVLLM) -> None:
    embedder = Embedder(
        base_url=server.url,
        text_column="body",
        output_column="vec",
        dimensions=128,
        embed_options={"extra_body": {"priority": 3}, "encoding_format": "float"},
    )
    out = embedder({"body": ["a cat", "a dog"]})
    assert out["vec"].shape == (2, 128)
    np.testing.assert_allclose(out["vec"][1], server.vector("a dog", dimensions=128), atol=1e-6)
    sent = server.received("/v1/embeddings")[-1].json
    assert sent["dimensions"] == 128 and sent["priority"] == 3 and sent["encoding_format"] == "float"


def test_error_column_isolates_the_refused_rows_and_embeds_the_others(server: FakeVLLM) -> None:
    rows = list(TEXTS)
    rows[3], rows[8] = LONG, None
    out = Embedder(base_url=server.url, on_error="column", batch_size=64)({"text": texts(rows)})
    errors = out["error"]
    assert errors.dtype == object and [i for i, e in enumerate(errors) if e] == [3, 8]
    assert {errors[i] for i in range(10) if i not in (3, 8)} == {""}
    assert errors[3].startswith("ContextLengthExceeded: ") and "maximum context length is 64" in errors[3]
    assert errors[8].startswith("InvalidInputError: text[8]=None: is a NoneType, not text")
    assert np.isnan(out["embedding"][[3, 8]]).all()
    good = [i for i in range(10) if i not in (3, 8)]
    np.testing.assert_allclose(
        out["embedding"][good], np.stack([server.vector(rows[i]) for i in good]), atol=1e-6
    )
    sent = embedded(server)
    assert None not in {t for s in sent for t in s}  # the null was never sent
    # 9 texts at once, then halves down to the long one alone: 1 + 2 * ceil(log2(9)) requests at most
    assert len(sent) <= 1 + 2 * 4 and [LONG] in sent


def test_raise_mode_raises_the_sdks_error_and_names_a_null_cell(server: FakeVLLM) -> None:
    embedder = Embedder(base_url=server.url)
    with pytest.raises(vt.ContextLengthExceeded):
        embedder({"text": texts(["fine", LONG])})
    with pytest.raises(vt.InvalidInputError, match=r"text\[1\]=None: is a NoneType, not text.*on_error"):
        embedder({"text": texts(["fine", None])})


def test_a_batch_whose_rows_all_fail_still_has_vectors_of_the_right_width(server: FakeVLLM) -> None:
    out = Embedder(base_url=server.url, on_error="column")({"text": texts([LONG, None])})
    assert out["embedding"].shape == (2, 384) and np.isnan(out["embedding"]).all()
    assert all(out["error"])
    empty = Embedder(base_url=server.url)({"text": texts([])})
    assert empty["embedding"].shape == (0, 384)


def test_errors_that_are_not_a_rows_fail_the_batch_without_bisecting(server: FakeVLLM) -> None:
    embedder = Embedder(base_url=server.url, on_error="column", max_retries=1, batch_size=2)
    server.fail(503, path="/v1/embeddings", times=None)
    with pytest.raises(vt.ServiceUnavailableError):
        embedder({"text": np.array(TEXTS)})
    server.clear_faults()
    server.clear_requests()
    with FakeVLLM(model="plain", tasks=EMBEDDING_TASKS, matryoshka=False) as plain:
        with pytest.raises(vt.MatryoshkaNotSupported):
            Embedder(base_url=plain.url, on_error="column", dimensions=64)({"text": np.array(TEXTS)})
        assert len(plain.received("/v1/embeddings")) == 1  # a setting, not a row: no halves sent


def test_isolate_failures_bisects_down_to_the_failing_rows() -> None:
    calls: list[list[int]] = []

    def run(rows: list[int]) -> list[int]:
        calls.append(rows)
        if 5 in rows or 6 in rows:
            raise vt.BadRequestError("refused", status_code=400)
        return [row * 10 for row in rows]

    errors: list[str | None] = [None] * 8
    done = isolate_failures(run, list(range(8)), errors)
    assert done == [([0, 1, 2, 3], [0, 10, 20, 30]), ([4], [40]), ([7], [70])]
    assert errors[5] == errors[6] == "BadRequestError: 400: refused"
    assert [e for i, e in enumerate(errors) if i not in (5, 6)] == [None] * 6
    assert calls[0] == list(range(8)) and len(calls) == 9  # 8 rows, 2 bad: whole, halves, quarters, singles
    with pytest.raises(vt.APIConnectionError):
        isolate_failures(lambda rows: (_ for _ in ()).throw(vt.APIConnectionError("down")), [0, 1], errors)


# --------------------------------------------------------------------------------------------------
# Columns and settings
# --------------------------------------------------------------------------------------------------


def test_a_missing_column_is_named_with_the_batchs_columns(server: FakeVLLM) -> None:
    with pytest.raises(vt.InvalidInputError) as caught:
        Embedder(base_url=server.url)({"body": np.array(["x"]), "id": np.arange(1)})
    assert caught.value.field == "text_column" and caught.value.value == "text"
    assert "is not a column of the batch (its columns: 'body', 'id')" in str(caught.value)
    with pytest.raises(vt.InvalidInputError, match="document_column='document': is not a column"):
        Scorer(base_url=server.url)({"query": np.array(["q"]), "doc": np.array(["d"])})


def test_a_column_of_other_values_is_named_with_its_dtype(server: FakeVLLM) -> None:
    with pytest.raises(
        vt.InvalidInputError, match=r"text_column='text': holds int64 values of shape \(3,\), not text"
    ):
        Embedder(base_url=server.url)({"text": np.arange(3)})
    with pytest.raises(vt.InvalidInputError, match=r"holds float32 values of shape \(2, 4\), not text"):
        Embedder(base_url=server.url, on_error="column")({"text": np.zeros((2, 4), dtype=np.float32)})
    with pytest.raises(vt.InvalidInputError, match="text_column='text': holds dict, int values, not text"):
        Embedder(base_url=server.url, on_error="column")({"text": texts([1, {"a": 1}, None])})
    assert server.received("/v1/embeddings") == []


def test_other_batch_formats_are_refused_and_pandas_is_read(server: FakeVLLM) -> None:
    with pytest.raises(vt.InvalidInputError, match=r'batch=\'Table\'.*batch_format="numpy"'):
        Embedder(base_url=server.url)(pa.table({"text": ["a"]}))
    frame = pd.DataFrame({"text": TEXTS[:3], "id": [7, 8, 9]})
    out = Embedder(base_url=server.url)(frame)
    assert isinstance(out, dict) and out["id"].tolist() == [7, 8, 9] and out["embedding"].shape == (3, 384)


def test_bad_settings_are_refused_at_construction(server: FakeVLLM) -> None:
    with pytest.raises(vt.InvalidInputError, match="output_column='text': is also text_column"):
        Embedder(base_url=server.url, output_column="text")
    with pytest.raises(vt.InvalidInputError, match="on_error='skip'"):
        Embedder(base_url=server.url, on_error="skip")  # type: ignore[arg-type]
    with pytest.raises(vt.InvalidInputError, match=r"embed_options=\['batch', 'input'\]: are not keyword"):
        Embedder(base_url=server.url, embed_options={"batch": 1, "input": ["x"]})
    with pytest.raises(vt.InvalidInputError, match="batch_size"):
        Embedder(base_url=server.url, batch_size=0)
    with pytest.raises(
        vt.InvalidInputError,
        match=r"embed_options=\['dimensions'\]: are arguments of the class.*Pass dimensions",
    ):
        Embedder(base_url=server.url, embed_options={"dimensions": 64})
    with pytest.raises(vt.InvalidInputError, match="response_format"):
        Transcriber(base_url=server.url, segments_column="s", transcribe_options={"response_format": "text"})
    with pytest.raises(vt.InvalidInputError, match="base_url"):
        Embedder(base_url="no-scheme-host:8000")
    with pytest.raises(vt.InvalidInputError, match="error_column"):
        Scorer(base_url=server.url, error_column="")


def test_instances_pickle_and_the_class_cloudpickles_as_ray_sends_it(server: FakeVLLM) -> None:
    embedder = Embedder(
        base_url=server.url, model="minilm", api_key="secret", batch_size=3, on_error="column"
    )
    copy = pickle.loads(pickle.dumps(embedder))
    assert copy._client is not embedder._client and copy.options == embedder.options
    assert "secret" not in repr(copy)
    np.testing.assert_array_equal(
        copy({"text": np.array(TEXTS)})["embedding"], embedder({"text": np.array(TEXTS)})["embedding"]
    )
    assert server.received("/v1/embeddings")[-1].headers["authorization"] == "Bearer secret"
    cls, kwargs = cloudpickle.loads(cloudpickle.dumps((Embedder, {"base_url": server.url, "batch_size": 3})))
    assert cls is Embedder and cls(**kwargs)({"text": np.array(["one"])})["embedding"].shape == (1, 384)
    embedder.close()


def test_an_instance_dropped_unclosed_closes_its_connections(server: FakeVLLM) -> None:
    """Ray drops an actor's instance (and a pandas pipeline its callable) without ``close()``: its
    connections close with it, and never reach the collector as open sockets that warn."""
    embedder = Embedder(base_url=server.url, batch_size=2, concurrency=4)
    copy = pickle.loads(pickle.dumps(embedder))
    for callable_ in (embedder, copy):
        callable_({"text": np.array(TEXTS * 3)})
    del embedder, copy, callable_
    assert left_open_at_collection() == []


# --------------------------------------------------------------------------------------------------
# Scorer
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def reranker() -> Iterator[FakeVLLM]:
    with FakeVLLM(model="minilm-rerank", tasks=RERANKER_TASKS, max_model_len=64) as fake:
        yield fake


def test_scores_are_zipped_pairs_and_refused_pairs_go_to_the_error_column(reranker: FakeVLLM) -> None:
    queries = ["capital of France?", "yellow fruit?", "what purrs?", "capital of France?"]
    documents = ["Paris is the capital of France.", "Bananas are yellow.", LONG, None]
    out = Scorer(base_url=reranker.url, on_error="column", batch_size=2)(
        {"query": texts(queries), "document": texts(documents), "id": np.arange(4)}
    )
    assert out["score"].dtype == np.float64
    np.testing.assert_allclose(
        out["score"][:2],
        [reranker.score(q, d) for q, d in zip(queries[:2], documents[:2], strict=True)],
        atol=1e-6,
    )
    assert np.isnan(out["score"][2:]).all() and out["error"][:2].tolist() == ["", ""]
    assert out["error"][2].startswith("ContextLengthExceeded") and "document[3]=None" in out["error"][3]
    with pytest.raises(vt.ContextLengthExceeded):
        Scorer(base_url=reranker.url, query_column="q", document_column="d")(
            {"q": texts(queries[:3]), "d": texts(documents[:3])}
        )


def test_scorer_options_reach_the_server(reranker: FakeVLLM) -> None:
    scorer = Scorer(
        base_url=reranker.url, truncate_prompt_tokens=-1, score_options={"extra_body": {"priority": 1}}
    )
    scorer({"query": np.array(["q"]), "document": np.array(["d"])})
    sent = reranker.received("/score")[-1].json
    assert sent["truncate_prompt_tokens"] == -1 and sent["priority"] == 1


# --------------------------------------------------------------------------------------------------
# Transcriber and OCR
# --------------------------------------------------------------------------------------------------


def test_transcripts_per_row_with_segments_and_undecodable_rows_in_the_error_column() -> None:
    with FakeVLLM(model="whisper", tasks=SPEECH_TASKS) as fake:
        transcriber = Transcriber(
            base_url=fake.url,
            audio_column="bytes",
            segments_column="segments",
            language="en",
            on_error="column",
        )
        column = texts([FOX.read_bytes(), str(FOX), b"RIFF....WAVEfmt garbage", 42])
        out = transcriber({"bytes": column, "path": np.array(["a", "b", "c", "d"])})
        assert (
            out["transcript"].tolist()[:2]
            == ["The quick brown fox jumped over the lazy dog. It was not amused."] * 2
        )
        assert out["transcript"][2] == out["transcript"][3] == ""
        assert out["error"][2].startswith("AudioDecodeError") and "bytes[3]=42: is a int" in out["error"][3]
        segments = json.loads(out["segments"][0])
        assert [s["text"] for s in segments] == [
            "The quick brown fox jumped over the lazy dog.",
            "It was not amused.",
        ]
        assert segments[0]["start"] == 0.0 and out["segments"][2] == ""
        sent = fake.received("/v1/audio/transcriptions")
        assert len(sent) == 2 and {r.form["response_format"] for r in sent} == {"verbose_json"}
        fake.clear_requests()
        with pytest.raises(vt.AudioDecodeError):  # the rows after the bad one are not sent
            Transcriber(base_url=fake.url, audio_column="bytes", concurrency=1)(
                {"bytes": texts([column[2], str(FOX), str(FOX)])}
            )
        # the worker thread may have started the next row while the error came back; never the third
        assert len(fake.received("/v1/audio/transcriptions")) < 2


def png(color: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), color).save(buffer, format="PNG")
    return buffer.getvalue()


def test_ocr_of_images_pdfs_and_arrays_with_blocks(tmp_path: Path) -> None:
    pdf = tmp_path / "two.pdf"
    pages = [Image.new("RGB", (200, 260), "white") for _ in range(2)]
    pages[0].save(pdf, format="PDF", save_all=True, append_images=pages[1:], resolution=72)
    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS) as fake, vt.Client(fake.url) as client:
        expected = client.ocr(png("white"))
        ocr = OCR(
            base_url=fake.url, image_column="image", blocks_column="blocks", on_error="column", concurrency=2
        )
        out = ocr({"image": texts([png("white"), str(pdf), b"not an image", pdf.read_bytes()])})
        assert out["markdown"][0] == expected.markdown and out["error"][0] == ""
        assert (
            out["markdown"][1] == out["markdown"][3] == f"{expected.markdown}\n\n---\n\n{expected.markdown}"
        )
        assert out["markdown"][2] == "" and out["error"][2].startswith("ImageError")
        blocks = json.loads(out["blocks"][1])
        assert [b["label"] for b in blocks] == ["title", "text", "table"] * 2 and {
            b["page"] for b in blocks
        } == {0, 1}
        arrays = OCR(base_url=fake.url)({"image": np.zeros((3, 48, 64, 3), dtype=np.uint8)})
        assert arrays["markdown"].tolist() == [expected.markdown] * 3
        with pytest.raises(vt.ImageError):
            OCR(base_url=fake.url)({"image": texts([b"not an image"])})
        with pytest.raises(vt.InvalidInputError, match="ocr_options=\\['pages'\\]"):
            OCR(base_url=fake.url, ocr_options={"pages": "1"})
