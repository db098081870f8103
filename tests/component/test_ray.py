"""vllm_tasks.integrations.ray against FakeVLLM servers, twice over.

Without a Ray runtime, each callable called directly: results equal the SDK's, batches split to
``batch_size``, the per-row error column (failing rows isolated by bisecting), typed column errors,
pickling (and cloudpickling the class, as Ray does), pandas batches, and ``Transcriber`` and ``OCR`` with
``concurrency="auto"`` (a limit on rows in flight kept per instance) against a fake at its capacity.

In a real local Ray runtime (``ray.init(num_cpus=2)``, the last section), against fakes configured like the
`embed`, `rerank`, `stt` and `ocr` fixtures (tests/fakes.py), all up at once: 2,000 texts through
``map_batches(Embedder)`` equal ``client.embed`` of the same texts, in order; a poisoned row and a null
isolated in the error column; ``Scorer``, ``Transcriber`` and ``OCR`` equal the SDK's calls on a handful of
rows, each row its own answer. The runtime starts once for the session (``ray_runtime``, in
tests/component/conftest.py, shared with test_ray_checkpoint.py) and its teardown checks that no Ray
process is left.

Ray's cost on the 2-core machine (measured 2026-12-04, three runs): 7-11 s to start and 1.5 s to stop,
once per session now (against the real servers it started once per server group, four times a run); about
0.6 GiB RSS once started, 1.3 GiB with two actors mapping; the object store is capped at 128 MiB. The
runtime tests take about 7 s (2,000 texts), 9 s, 3 s, 3 s and 2.5 s: about 35 s with the start and stop.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import pickle
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import ray
import ray.data
from PIL import Image, ImageDraw
from ray import cloudpickle

import vllm_tasks as vt
from vllm_tasks._backends import SyncBackend
from vllm_tasks.adaptive import Concurrency
from vllm_tasks.integrations.ray import OCR, Embedder, Scorer, Transcriber
from vllm_tasks.testing import (
    EMBEDDING_TASKS,
    OCR_TASKS,
    RERANKER_TASKS,
    SPEECH_TASKS,
    FakeVLLM,
    ReceivedRequest,
    grounding_output,
)

from ..clients import left_open_at_collection
from ..fakes import FakeFixture, fake_like

AUDIO = Path(__file__).resolve().parents[1] / "data" / "audio"
FOX = AUDIO / "fox.wav"
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
    embedder = Embedder(settings=vt.ClientSettings(server.url, model="minilm"), batch_size=4, concurrency=2)
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
    out = Embedder(settings=vt.ClientSettings(server.url), batch_size=10)(
        {"text": np.array(TEXTS)}
    )  # the client's halving
    np.testing.assert_allclose(out["embedding"], np.stack([server.vector(t) for t in TEXTS]), atol=1e-6)
    assert [len(r.json["input"]) for r in server.received("/v1/embeddings")] == [10, 5, 5]


def test_options_reach_the_server_and_plain_lists_are_batches(server: FakeVLLM) -> None:
    embedder = Embedder(
        settings=vt.ClientSettings(server.url),
        text_column="body",
        output_column="vec",
        params=vt.EmbedParams(dimensions=128, encoding_format="float"),
        extra_body={"priority": 3},
    )
    out = embedder({"body": ["a cat", "a dog"]})
    assert out["vec"].shape == (2, 128)
    np.testing.assert_allclose(out["vec"][1], server.vector("a dog", dimensions=128), atol=1e-6)
    sent = server.received("/v1/embeddings")[-1].json
    assert sent["dimensions"] == 128 and sent["priority"] == 3 and sent["encoding_format"] == "float"


def test_error_column_isolates_the_refused_rows_and_embeds_the_others(server: FakeVLLM) -> None:
    rows = list(TEXTS)
    rows[3], rows[8] = LONG, None
    out = Embedder(settings=vt.ClientSettings(server.url), on_error="column", batch_size=64)(
        {"text": texts(rows)}
    )
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
    embedder = Embedder(settings=vt.ClientSettings(server.url))
    with pytest.raises(vt.ContextLengthExceeded):
        embedder({"text": texts(["fine", LONG])})
    with pytest.raises(vt.InvalidInputError, match=r"text\[1\]=None: is a NoneType, not text.*on_error"):
        embedder({"text": texts(["fine", None])})


def test_a_batch_whose_rows_all_fail_still_has_vectors_of_the_right_width(server: FakeVLLM) -> None:
    out = Embedder(settings=vt.ClientSettings(server.url), on_error="column")({"text": texts([LONG, None])})
    assert out["embedding"].shape == (2, 384) and np.isnan(out["embedding"]).all()
    assert all(out["error"])
    empty = Embedder(settings=vt.ClientSettings(server.url))({"text": texts([])})
    assert empty["embedding"].shape == (0, 384)


def test_errors_that_are_not_a_rows_fail_the_batch_without_bisecting(server: FakeVLLM) -> None:
    embedder = Embedder(
        settings=vt.ClientSettings(server.url, max_retries=1), on_error="column", batch_size=2
    )
    server.fail(503, path="/v1/embeddings", times=None)
    with pytest.raises(vt.ServiceUnavailableError):
        embedder({"text": np.array(TEXTS)})
    server.clear_faults()
    server.clear_requests()
    with FakeVLLM(model="plain", tasks=EMBEDDING_TASKS, matryoshka=False) as plain:
        with pytest.raises(vt.BadRequestError):
            Embedder(settings=vt.ClientSettings(plain.url), on_error="column", params={"dimensions": 64})(
                {"text": np.array(TEXTS)}
            )
        assert len(plain.received("/v1/embeddings")) == 1  # a setting, not a row: no halves sent


# --------------------------------------------------------------------------------------------------
# Columns and settings
# --------------------------------------------------------------------------------------------------


def test_a_missing_column_is_named_with_the_batchs_columns(server: FakeVLLM) -> None:
    with pytest.raises(vt.InvalidInputError) as caught:
        Embedder(settings=vt.ClientSettings(server.url))({"body": np.array(["x"]), "id": np.arange(1)})
    assert caught.value.field == "text_column" and caught.value.value == "text"
    assert "is not a column of the batch (its columns: 'body', 'id')" in str(caught.value)
    with pytest.raises(vt.InvalidInputError, match="document_column='document': is not a column"):
        Scorer(settings=vt.ClientSettings(server.url))({"query": np.array(["q"]), "doc": np.array(["d"])})


def test_a_column_of_other_values_is_named_with_its_dtype(server: FakeVLLM) -> None:
    with pytest.raises(
        vt.InvalidInputError, match=r"text_column='text': holds int64 values of shape \(3,\), not text"
    ):
        Embedder(settings=vt.ClientSettings(server.url))({"text": np.arange(3)})
    with pytest.raises(vt.InvalidInputError, match=r"holds float32 values of shape \(2, 4\), not text"):
        Embedder(settings=vt.ClientSettings(server.url), on_error="column")(
            {"text": np.zeros((2, 4), dtype=np.float32)}
        )
    with pytest.raises(vt.InvalidInputError, match="text_column='text': holds dict, int values, not text"):
        Embedder(settings=vt.ClientSettings(server.url), on_error="column")(
            {"text": texts([1, {"a": 1}, None])}
        )
    assert server.received("/v1/embeddings") == []


def test_other_batch_formats_are_refused_and_pandas_is_read(server: FakeVLLM) -> None:
    with pytest.raises(vt.InvalidInputError, match=r'batch=\'Table\'.*batch_format="numpy"'):
        Embedder(settings=vt.ClientSettings(server.url))(pa.table({"text": ["a"]}))
    frame = pd.DataFrame({"text": TEXTS[:3], "id": [7, 8, 9]})
    out = Embedder(settings=vt.ClientSettings(server.url))(frame)
    assert isinstance(out, dict) and out["id"].tolist() == [7, 8, 9] and out["embedding"].shape == (3, 384)


def test_an_id_column_is_required_in_each_batch_kept_as_it_is_and_off_the_outputs(server: FakeVLLM) -> None:
    ids = np.array([f"doc-{i}" for i in range(3)], dtype=object)
    for cls, batch in [
        (Embedder, {"text": np.array(TEXTS[:3]), "doc": ids}),
        (Scorer, {"query": np.array(["q"] * 3), "document": np.array(TEXTS[:3]), "doc": ids}),
    ]:
        out = cls(settings=vt.ClientSettings(server.url), id_column="doc")(batch)
        assert out["doc"] is ids
        missing = {name: column for name, column in batch.items() if name != "doc"}
        with pytest.raises(vt.InvalidInputError) as refused:
            cls(settings=vt.ClientSettings(server.url), id_column="doc", on_error="column")(missing)
        assert refused.value.field == "id_column" and "is not a column of the batch" in str(refused.value)
    server.clear_requests()
    with pytest.raises(vt.InvalidInputError):
        Transcriber(settings=vt.ClientSettings(server.url), id_column="id")({"audio": texts([str(FOX)])})
    with pytest.raises(vt.InvalidInputError):
        OCR(settings=vt.ClientSettings(server.url), id_column="id")({"image": texts([png("white")])})
    assert server.requests == []  # refused before any request
    for cls, output in [(Embedder, "output_column"), (Scorer, "output_column"), (OCR, "error_column")]:
        with pytest.raises(vt.InvalidInputError, match=f"id_column='id': is also {output}"):
            cls(settings=vt.ClientSettings(server.url), id_column="id", **{output: "id"})
    with pytest.raises(vt.InvalidInputError, match="id_column='bytes': is also audio_column"):
        Transcriber(settings=vt.ClientSettings(server.url), audio_column="bytes", id_column="bytes")


def test_bad_settings_are_refused_at_construction(server: FakeVLLM) -> None:
    server.clear_requests()
    with pytest.raises(vt.InvalidInputError, match="output_column='text': is also text_column"):
        Embedder(settings=vt.ClientSettings(server.url), output_column="text")
    with pytest.raises(vt.InvalidInputError, match="on_error='skip'"):
        Embedder(settings=vt.ClientSettings(server.url), on_error="skip")  # type: ignore[arg-type]
    with pytest.raises(
        vt.InvalidInputError, match=r"params=\['batch', 'input'\]: are not fields of EmbedParams"
    ):
        Embedder(settings=vt.ClientSettings(server.url), params={"batch": 1, "input": ["x"]})
    with pytest.raises(TypeError, match="dimensions"):
        Embedder(settings=vt.ClientSettings(server.url), dimensions=64)  # type: ignore[call-arg]
    with pytest.raises(vt.InvalidInputError, match="batch_size"):
        Embedder(settings=vt.ClientSettings(server.url), batch_size=0)
    with pytest.raises(vt.InvalidInputError, match="dimensions=0"):
        Embedder(settings=vt.ClientSettings(server.url), params={"dimensions": 0})
    assert server.requests == []  # every refusal came before any request
    with pytest.raises(vt.InvalidInputError, match="response_format"):
        Transcriber(
            settings=vt.ClientSettings(server.url),
            segments_column="s",
            params={"response_format": "text"},
        )
    with pytest.raises(vt.InvalidInputError, match="settings"):
        Embedder(settings="http://host:8000")  # type: ignore[arg-type]
    with pytest.raises(vt.InvalidInputError, match="error_column"):
        Scorer(settings=vt.ClientSettings(server.url), error_column="")


def test_instances_pickle_and_the_class_cloudpickles_as_ray_sends_it(server: FakeVLLM) -> None:
    embedder = Embedder(
        settings=vt.ClientSettings(server.url, model="minilm", api_key="secret"),
        batch_size=3,
        on_error="column",
    )
    copy = pickle.loads(pickle.dumps(embedder))
    assert copy._client is not embedder._client
    assert (copy._plan.params, copy._plan.call, copy._plan.batch_size) == (
        embedder._plan.params,
        embedder._plan.call,
        3,
    )
    assert "secret" not in repr(copy)
    np.testing.assert_array_equal(
        copy({"text": np.array(TEXTS)})["embedding"], embedder({"text": np.array(TEXTS)})["embedding"]
    )
    assert server.received("/v1/embeddings")[-1].headers["authorization"] == "Bearer secret"
    cls, kwargs = cloudpickle.loads(
        cloudpickle.dumps((Embedder, {"settings": vt.ClientSettings(server.url), "batch_size": 3}))
    )
    assert cls is Embedder and cls(**kwargs)({"text": np.array(["one"])})["embedding"].shape == (1, 384)
    embedder.close()


def test_an_instance_dropped_unclosed_closes_its_connections(server: FakeVLLM) -> None:
    """Ray drops an actor's instance (and a pandas pipeline its callable) without ``close()``: its
    connections close with it, and never reach the collector as open sockets that warn."""
    embedder = Embedder(settings=vt.ClientSettings(server.url), batch_size=2, concurrency=4)
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
    out = Scorer(settings=vt.ClientSettings(reranker.url), on_error="column", batch_size=2)(
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
        Scorer(settings=vt.ClientSettings(reranker.url), query_column="q", document_column="d")(
            {"q": texts(queries[:3]), "d": texts(documents[:3])}
        )


def test_scorer_options_reach_the_server(reranker: FakeVLLM) -> None:
    scorer = Scorer(
        settings=vt.ClientSettings(reranker.url),
        params=vt.RerankParams(truncate_prompt_tokens=-1),
        extra_body={"priority": 1},
    )
    scorer({"query": np.array(["q"]), "document": np.array(["d"])})
    sent = reranker.received("/score")[-1].json
    assert sent["truncate_prompt_tokens"] == -1 and sent["priority"] == 1
    with pytest.raises(vt.InvalidInputError, match=r"params=\['top_k'\]: are not fields of RerankParams"):
        Scorer(settings=vt.ClientSettings(reranker.url), params={"top_k": 1})


def test_a_client_with_its_own_http_client_sends_every_request(reranker: FakeVLLM) -> None:
    sent: list[str] = []
    with httpx.Client(event_hooks={"request": [lambda request: sent.append(request.url.path)]}) as http:
        client = vt.Client(reranker.url, http_client=http)
        scorer = Scorer(client=client, batch_size=2)
        scores = scorer({"query": np.array(["q"] * 3), "document": np.array(["a", "b", "c"])})["score"]
        scorer.close()
    assert len(set(scores.tolist())) == 3 and sent.count("/score") == 2  # 2 + 1 pairs, through `http`
    assert client.usage.requests >= 2  # counted in the caller's client


# --------------------------------------------------------------------------------------------------
# Transcriber and OCR
# --------------------------------------------------------------------------------------------------


def test_transcripts_per_row_with_segments_and_undecodable_rows_in_the_error_column() -> None:
    with FakeVLLM(model="whisper", tasks=SPEECH_TASKS) as fake:
        transcriber = Transcriber(
            settings=vt.ClientSettings(fake.url),
            audio_column="bytes",
            segments_column="segments",
            params=vt.TranscribeParams(language="en"),
            on_error="column",
        )
        column = texts([FOX.read_bytes(), str(FOX), b"RIFF....WAVEfmt garbage", 42])
        out = transcriber({"bytes": column, "path": np.array(["a", "b", "c", "d"])})
        assert (
            out["transcript"].tolist()[:2]
            == ["The quick brown fox jumped over the lazy dog. It was not amused."] * 2
        )
        assert out["transcript"][2] == out["transcript"][3] == ""
        assert out["error"][2].startswith("InvalidInputError") and "bytes[3]=42: is a int" in out["error"][3]
        segments = json.loads(out["segments"][0])
        assert [s["text"] for s in segments] == [
            "The quick brown fox jumped over the lazy dog.",
            "It was not amused.",
        ]
        assert segments[0]["start"] == 0.0 and out["segments"][2] == ""
        sent = fake.received("/v1/audio/transcriptions")
        assert len(sent) == 2 and {r.form["response_format"] for r in sent} == {"verbose_json"}
        fake.clear_requests()
        with pytest.raises(vt.InvalidInputError):  # the rows after the bad one are not sent
            Transcriber(settings=vt.ClientSettings(fake.url), audio_column="bytes", concurrency=1)(
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
            settings=vt.ClientSettings(fake.url),
            image_column="image",
            blocks_column="blocks",
            on_error="column",
            concurrency=2,
        )
        out = ocr({"image": texts([png("white"), str(pdf), b"not an image", pdf.read_bytes()])})
        assert out["markdown"][0] == expected.markdown and out["error"][0] == ""
        assert (
            out["markdown"][1] == out["markdown"][3] == f"{expected.markdown}\n\n---\n\n{expected.markdown}"
        )
        assert out["markdown"][2] == "" and out["error"][2].startswith("InvalidInputError")
        blocks = json.loads(out["blocks"][1])
        assert [b["label"] for b in blocks] == ["title", "text", "table"] * 2 and {
            b["page"] for b in blocks
        } == {0, 1}
        arrays = OCR(settings=vt.ClientSettings(fake.url))(
            {"image": np.zeros((3, 48, 64, 3), dtype=np.uint8)}
        )
        assert arrays["markdown"].tolist() == [expected.markdown] * 3
        with pytest.raises(vt.InvalidInputError):
            OCR(settings=vt.ClientSettings(fake.url))({"image": texts([b"not an image"])})
        with pytest.raises(vt.InvalidInputError, match="params=\\['pages'\\]: are not fields of OCRParams"):
            OCR(settings=vt.ClientSettings(fake.url), params={"pages": "1"})


# --------------------------------------------------------------------------------------------------
# In a real local Ray runtime (``ray_runtime``: tests/component/conftest.py)
# --------------------------------------------------------------------------------------------------


def mapped(dataset: ray.data.Dataset, cls: type, batch_size: int, **kwargs: Any) -> list[dict[str, Any]]:
    """``dataset.map_batches(cls)`` on one actor (half a CPU), collected."""
    return dataset.map_batches(
        cls,
        fn_constructor_kwargs=kwargs,
        batch_size=batch_size,
        compute=ray.data.ActorPoolStrategy(size=1),
        num_cpus=0.5,
    ).take_all()


def corpus(count: int) -> list[str]:
    """Texts of varied lengths (5 to 60 words), all under the `embed` fixture's 256 tokens."""
    words = ["river", "bank", "money", "loan", "water", "fish", "stone", "bridge", "market", "bread"]
    words += ["music", "song", "child", "village"]
    return [
        f"passage {i}: " + " ".join(words[(i * 7 + k) % len(words)] for k in range(5 + i % 56))
        for i in range(count)
    ]


def test_2000_texts_through_map_batches_equal_client_embed_in_order(
    ray_runtime: None, fake_embed: FakeFixture
) -> None:
    texts = corpus(2000)
    dataset = ray.data.from_items([{"id": i, "text": text} for i, text in enumerate(texts)])
    rows = dataset.map_batches(
        Embedder,
        fn_constructor_kwargs={
            "settings": vt.ClientSettings(fake_embed.base_url, model=fake_embed.model),
            "concurrency": 2,
        },
        batch_size=256,
        compute=ray.data.ActorPoolStrategy(size=2),
        num_cpus=0.5,
    ).take_all()
    assert [row["id"] for row in rows] == list(range(2000))
    assert [row["text"] for row in rows] == texts
    vectors = np.stack([row["embedding"] for row in rows])
    with vt.Client(fake_embed.base_url) as client:
        expected = client.embed(texts).vectors
    assert vectors.dtype == np.float32 and vectors.shape == expected.shape == (2000, 384)
    np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-6)


def test_a_poisoned_row_goes_to_the_error_column_and_the_others_are_embedded(
    ray_runtime: None, fake_embed: FakeFixture, tmp_path: Path
) -> None:
    texts: list[str | None] = list(corpus(20))
    texts[6] = "word " * 400  # over the `embed` fixture's max_model_len of 256: the server refuses it
    texts[13] = None
    dataset = ray.data.from_items([{"id": i, "text": text} for i, text in enumerate(texts)])
    kwargs = {"settings": vt.ClientSettings(fake_embed.base_url), "on_error": "column"}
    rows = mapped(dataset, Embedder, batch_size=5, **kwargs)
    errors = [row["error"] for row in rows]
    assert [i for i, error in enumerate(errors) if error] == [6, 13]
    assert errors[6].startswith("ContextLengthExceeded: ") and "256" in errors[6]
    assert re.match(r"InvalidInputError: text\[\d\]=None: is a NoneType", errors[13])  # [row in its batch]
    good = [i for i in range(20) if i not in (6, 13)]
    with vt.Client(fake_embed.base_url) as client:
        expected = client.embed([texts[i] for i in good]).vectors
    vectors = np.stack([row["embedding"] for row in rows])
    np.testing.assert_allclose(vectors[good], expected, rtol=0, atol=1e-6)
    assert np.isnan(vectors[[6, 13]]).all()
    # batches without an error and with one agree on the column's type: written and read back as one
    dataset.map_batches(
        Embedder, fn_constructor_kwargs=kwargs, batch_size=5, compute=ray.data.ActorPoolStrategy(size=1)
    ).write_parquet(str(tmp_path / "out"))
    assert ray.data.read_parquet(str(tmp_path / "out")).count() == 20


def test_scorer_on_a_reranker_equals_client_score(ray_runtime: None, fake_rerank: FakeFixture) -> None:
    queries = [f"Where is the {w}?" for w in ("river", "market", "bridge", "village")] * 10
    documents = corpus(40)
    dataset = ray.data.from_items(
        [{"query": q, "document": d} for q, d in zip(queries, documents, strict=True)]
    )
    rows = mapped(dataset, Scorer, batch_size=16, settings=vt.ClientSettings(fake_rerank.base_url))
    scores = np.array([row["score"] for row in rows])
    with vt.Client(fake_rerank.base_url) as client:
        expected = client.score(queries, documents).scores
    assert scores.shape == (40,) and len(set(expected)) > 10  # the pairs score apart: order matters
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-6)


def heard(request: ReceivedRequest) -> str:
    """A transcript that names the upload it answers: each row's text says which file it came from."""
    content = request.files["file"].content
    return f" A recording of {len(content)} bytes, digest {hashlib.sha256(content).hexdigest()[:12]}."


def test_transcriber_equals_client_transcribe_row_by_row(ray_runtime: None) -> None:
    paths = [str(AUDIO / name) for name in ("fox.wav", "numbers.wav", "french.wav")]
    with fake_like("stt", transcript=heard) as stt:
        dataset = ray.data.read_binary_files(paths, include_paths=True)
        rows = mapped(
            dataset,
            Transcriber,
            batch_size=2,
            settings=vt.ClientSettings(stt.base_url),
            audio_column="bytes",
            concurrency=2,
        )
        by_path = {os.path.basename(row["path"]): row["transcript"] for row in rows}
        with vt.Client(stt.base_url) as client:
            expected = {os.path.basename(path): client.transcribe(path).text for path in paths}
        assert len(stt.fake.received("/v1/audio/transcriptions")) == 2 * len(paths)  # Ray's and the SDK's
    assert by_path == expected and len(set(by_path.values())) == len(paths)


def page(text: str) -> bytes:
    image = Image.new("RGB", (320, 240), "white")
    ImageDraw.Draw(image).text((20, 20), text, fill="black")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def read_page(request: ReceivedRequest) -> str:
    """OCR output that names the image it answers (a digest of the image sent), with a box."""
    messages = request.json.get("messages", []) if isinstance(request.json, dict) else []
    parts = [part for m in messages if isinstance(m.get("content"), list) for part in m["content"]]
    urls = [part["image_url"]["url"] for part in parts if part.get("type") == "image_url"]
    digest = hashlib.sha256("".join(urls).encode()).hexdigest()[:12]
    return grounding_output(
        [("title", (40, 30, 960, 120), f"# Scan {digest}"), ("text", (40, 150, 960, 300), "Total due.")]
    )


def test_ocr_equals_client_ocr_row_by_row(ray_runtime: None) -> None:
    images = [page(text) for text in ("Invoice 42", "Total 99.00")]
    dataset = ray.data.from_items([{"image": image} for image in images] + [{"image": b"not an image"}])
    with fake_like("ocr", ocr_output=read_page) as ocr:
        rows = mapped(
            dataset,
            OCR,
            batch_size=2,
            settings=vt.ClientSettings(ocr.base_url),
            params=vt.OCRParams(max_tokens=200),
            blocks_column="blocks",
            on_error="column",
        )
        sent = [
            r.json for r in ocr.fake.received("/v1/chat/completions") if "image_url" in json.dumps(r.json)
        ]
        with vt.Client(ocr.base_url) as client:
            expected = [client.ocr(image, max_tokens=200).markdown for image in images]
    assert [row["markdown"] for row in rows] == [*expected, ""] and expected[0] != expected[1]
    assert len(sent) == 2 and {request["max_tokens"] for request in sent} == {200}  # the bad row: never sent
    assert [row["error"] for row in rows][:2] == ["", ""] and rows[2]["error"].startswith("InvalidInputError")
    assert [[block["label"] for block in json.loads(row["blocks"])] for row in rows[:2]] == [
        ["title", "text"]
    ] * 2
    assert rows[2]["blocks"] == ""


def test_the_embedder_and_scorer_take_auto() -> None:
    with FakeVLLM(slots=2, latency=0.002) as fake:
        settings = vt.ClientSettings(fake.url)
        embedder = Embedder(settings=settings, batch_size=2, concurrency="auto")
        out = embedder({"text": texts([f"text {index}" for index in range(12)])})
        scorer = Scorer(settings=settings, batch_size=2, concurrency="auto")
        scored = scorer({"query": texts(["q"] * 6), "document": texts([f"d{index}" for index in range(6)])})
    assert out["embedding"].shape == (12, 384) and scored["score"].shape == (6,)
    assert embedder.concurrency_limit is not None and embedder.concurrency_limit >= 1
    assert scorer.concurrency_limit is not None and scorer.concurrency_limit >= 1
    assert Embedder(settings=settings).concurrency_limit is None  # a fixed concurrency
    with pytest.raises(vt.InvalidInputError, match="concurrency"):
        Embedder(settings=settings, concurrency="fast")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# Transcriber and OCR with concurrency="auto" (no Ray runtime): rows in flight under an AdaptiveLimit
# kept per instance; asserted on outputs, on where the limit settles and on the 503s the fake counted
# --------------------------------------------------------------------------------------------------


def audio_rows() -> np.ndarray:
    files = [AUDIO / name for name in ("fox.wav", "numbers.wav", "french.wav")]
    return texts([*(path.read_bytes() for path in files), b"RIFF....WAVEfmt garbage", *map(str, files)])


def scan_rows(count: int) -> np.ndarray:
    return texts([page(f"Row {index}") for index in range(count)] + [b"not an image"])


@pytest.mark.parametrize("kind", ["transcriber", "ocr"])
def test_auto_answers_as_a_fixed_concurrency_in_row_order(kind: str) -> None:
    if kind == "transcriber":
        fake = FakeVLLM(model="whisper", tasks=SPEECH_TASKS, transcript=heard)
        make: Any = functools.partial(Transcriber, audio_column="bytes")
        column, batch, output = "bytes", audio_rows(), "transcript"
    else:
        fake = FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, ocr_output=read_page)
        make = functools.partial(OCR, blocks_column="blocks")
        column, batch, output = "image", scan_rows(12), "markdown"
    with fake:
        fixed = make(settings=vt.ClientSettings(fake.url), concurrency=1, on_error="column")
        auto = make(settings=vt.ClientSettings(fake.url), concurrency="auto", on_error="column")
        assert auto.concurrency_limit is None  # before the first batch
        expected, got = fixed({column: batch}), auto({column: batch})
    assert got[output].tolist() == expected[output].tolist()
    assert got["error"].tolist() == expected["error"].tolist()
    answered = [text for text, error in zip(got[output], got["error"], strict=True) if not error]
    assert len(answered) == len(batch) - 1 and len(set(answered)) >= 3  # each row its own answer
    assert fixed.concurrency_limit is None
    assert auto.concurrency_limit is not None and auto.concurrency_limit >= 1


def test_auto_backs_off_on_a_full_queue_and_every_row_succeeds(monkeypatch: pytest.MonkeyPatch) -> None:
    # Retries wait (a tenth of their backoff) as against a server: retried at once, as with the tier's
    # no_sleep, a refused row runs out of retries at a fixed 8 before a place in the queue frees up.
    def shorter(_backend: SyncBackend, seconds: float) -> None:
        time.sleep(seconds / 10)

    monkeypatch.setattr(SyncBackend, "sleep", shorter)
    batch = scan_rows(48)[:-1]

    def run(concurrency: Concurrency) -> tuple[list[str], int, int | None]:
        # 2 slots and 2 places in the queue: more than 4 rows in flight is refused (503)
        with FakeVLLM(
            model="deepseek-ocr", tasks=OCR_TASKS, ocr_output=read_page, slots=2, queue_limit=2, latency=0.02
        ) as fake:
            ocr = OCR(settings=vt.ClientSettings(fake.url, max_retries=10), concurrency=concurrency)
            markdown = [*ocr({"image": batch})["markdown"], *ocr({"image": batch})["markdown"]]
            return markdown, fake.rejected, ocr.concurrency_limit

    fixed, refused_fixed, _ = run(8)
    auto, refused_auto, settled = run("auto")
    assert auto == fixed and len(set(auto)) == len(batch)
    assert refused_fixed > 0  # 8 in flight on 2 slots and 2 places in the queue
    # each 503 backs the limit off, those the retries absorbed too; it probes one or two rows above the
    # 4 the server holds (measured on the 2-core machine: 2-5 refused against 35-42, settled at 3-5)
    assert refused_auto < refused_fixed / 2
    assert settled is not None and 1 <= settled <= 6


def test_the_auto_limit_is_kept_across_batches_and_backs_off_on_each_503() -> None:
    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, latency=0.02) as fake:
        ocr = OCR(settings=vt.ClientSettings(fake.url, max_retries=2), concurrency="auto")
        ocr({"image": scan_rows(8)[:-1]})
        limit = ocr._limit
        ocr({"image": scan_rows(8)[:-1]})
        assert ocr._limit is limit and limit is not None and limit.answers == 16  # one limit, fed twice
        learned = ocr.concurrency_limit
        assert learned is not None and learned >= 2
        copy = pickle.loads(pickle.dumps(ocr))  # what it learned travels with a pickled copy
        assert copy.concurrency_limit == learned
        copy.close()
        fake.fail(503, path="/v1/chat/completions", times=2, retry_after=0)
        assert ocr({"image": scan_rows(3)[:-1]})["markdown"].all()  # the retries absorbed both 503s...
        assert limit.overloads == 2 and ocr.concurrency_limit < learned  # ... and each backed it off
        fake.fail(503, path="/v1/chat/completions", times=3, retry_after=0)
        with pytest.raises(vt.APIStatusError) as failed:  # a row out of retries fails the batch
            ocr({"image": scan_rows(1)[:-1]})
    assert failed.value.status_code == 503 and limit.overloads == 5


@pytest.mark.parametrize("value", [0, "fast", True, 2.5])
@pytest.mark.parametrize("cls", [Transcriber, OCR])
def test_transcriber_and_ocr_take_auto_and_refuse_other_concurrencies(cls: type, value: object) -> None:
    settings = vt.ClientSettings("http://127.0.0.1:9")
    assert cls(settings=settings, concurrency="auto").concurrency == "auto"
    with pytest.raises(vt.InvalidInputError, match="concurrency") as refused:
        cls(settings=settings, concurrency=value)
    assert "auto" in str(refused.value)


def test_the_batches_thread_is_kept_between_batches_and_ends_at_close() -> None:
    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, latency=0.01) as fake:
        ocr = OCR(settings=vt.ClientSettings(fake.url), concurrency=4)
        before = set(threading.enumerate())
        ocr({"image": scan_rows(8)[:-1]})
        (thread,) = [t for t in set(threading.enumerate()) - before if t.name == "vllm-tasks-batches"]
        ocr({"image": scan_rows(8)[:-1]})
        assert [t for t in threading.enumerate() if t.name == "vllm-tasks-batches"].count(thread) == 1
        ocr.close()
    assert not thread.is_alive()
