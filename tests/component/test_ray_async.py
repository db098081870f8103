"""The Ray Data async callables (``AsyncEmbedder``, ``AsyncScorer``, ``AsyncTranscriber``, ``AsyncOCR``):
``async def __call__`` on an ``AsyncClient``, the same batches as their sync twins (one job engine).

Through a real local Ray runtime (the session's ``ray_runtime``): ``map_batches(AsyncEmbedder, ...)``
equals ``client.embed`` row for row, and a refused row becomes the error column, not a failed job. Called
directly (no Ray): each async class answers what its sync twin answers, two inputs two answers.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
import ray
import ray.data

import vllm_tasks as vt
from vllm_tasks.integrations.ray import (
    OCR,
    AsyncEmbedder,
    AsyncOCR,
    AsyncScorer,
    AsyncTranscriber,
    Embedder,
    Scorer,
    Transcriber,
)
from vllm_tasks.testing import OCR_TASKS, RERANKER_TASKS, SPEECH_TASKS, FakeVLLM

from ..fakes import FakeFixture
from .test_ray import AUDIO, corpus, heard, page, read_page, texts


def test_async_embedder_in_map_batches_equals_client_embed_and_a_refused_row_is_its_error(
    ray_runtime: None, fake_embed: FakeFixture
) -> None:
    rows_in: list[str | None] = list(corpus(300))
    rows_in[41] = "word " * 400  # over the `embed` fixture's max_model_len of 256: the server refuses it
    dataset = ray.data.from_items([{"id": i, "text": text} for i, text in enumerate(rows_in)])
    rows = dataset.map_batches(
        AsyncEmbedder,
        fn_constructor_kwargs={
            "settings": vt.ClientSettings(fake_embed.base_url, model=fake_embed.model),
            "batch_size": 16,
            "on_error": "column",
        },
        batch_size=64,
        compute=ray.data.ActorPoolStrategy(size=1),
        num_cpus=0.5,
    ).take_all()
    assert [row["id"] for row in rows] == list(range(300))
    errors = [row["error"] for row in rows]
    assert [i for i, error in enumerate(errors) if error] == [41]
    assert errors[41].startswith("ContextLengthExceeded: ")
    good = [i for i in range(300) if i != 41]
    with vt.Client(fake_embed.base_url) as client:
        expected = client.embed([rows_in[i] for i in good]).vectors
    vectors = np.stack([row["embedding"] for row in rows])
    assert vectors.dtype == np.float32 and np.isnan(vectors[41]).all()
    np.testing.assert_allclose(vectors[good], expected, rtol=0, atol=1e-6)
    assert not np.allclose(vectors[0], vectors[1])  # each row its own vector


def both(sync_cls: Any, async_cls: Any, batch: dict[str, Any], **kwargs: Any) -> tuple[Any, Any]:
    """One batch through the sync class and its async twin, each closed after."""
    sync = sync_cls(**kwargs)
    try:
        expected = sync(batch)
    finally:
        sync.close()

    async def run() -> Any:
        callable_ = async_cls(**kwargs)
        try:
            return await callable_(batch)
        finally:
            await callable_.aclose()

    return expected, asyncio.run(run())


def test_each_async_class_answers_as_its_sync_twin() -> None:
    with FakeVLLM(model="rerank", tasks=RERANKER_TASKS) as reranker:
        batch = {"query": texts(["capital?", "capital?"]), "document": texts(["Paris", "Cats"])}
        expected, got = both(Scorer, AsyncScorer, batch, settings=vt.ClientSettings(reranker.url))
    assert got["score"].tolist() == expected["score"].tolist() and got["score"][0] != got["score"][1]
    with FakeVLLM(model="whisper", tasks=SPEECH_TASKS, transcript=heard) as stt:
        audio = texts([(AUDIO / name).read_bytes() for name in ("fox.wav", "numbers.wav")] + [b"garbage"])
        expected, got = both(
            Transcriber,
            AsyncTranscriber,
            {"audio": audio},
            settings=vt.ClientSettings(stt.url),
            on_error="column",
        )
    assert got["transcript"].tolist() == expected["transcript"].tolist()
    assert got["transcript"][0] != got["transcript"][1] and got["error"][2].startswith("InvalidInputError")
    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, ocr_output=read_page) as ocr:
        images = texts([page("one"), page("two")])
        expected, got = both(OCR, AsyncOCR, {"image": images}, settings=vt.ClientSettings(ocr.url))
    assert (
        got["markdown"].tolist() == expected["markdown"].tolist() and got["markdown"][0] != got["markdown"][1]
    )


def test_the_async_embedder_raises_a_refused_row_and_refuses_a_sync_client(fake_embed: FakeFixture) -> None:
    async def run() -> None:
        embedder = AsyncEmbedder(settings=vt.ClientSettings(fake_embed.base_url))
        try:
            with pytest.raises(vt.ContextLengthExceeded):
                await embedder({"text": texts(["fine", "word " * 400])})
        finally:
            await embedder.aclose()

    asyncio.run(run())
    with vt.Client(fake_embed.base_url) as client, pytest.raises(vt.InvalidInputError, match="AsyncClient"):
        AsyncEmbedder(client=client)
    with pytest.raises(vt.InvalidInputError, match=r"vllm_tasks\.Client"):
        Embedder(client=vt.AsyncClient(fake_embed.base_url))


def test_auto_tunes_from_the_servers_metrics_for_the_sync_and_the_async_class() -> None:
    batch = {"text": texts([f"text {index}" for index in range(8)])}
    with FakeVLLM(slots=2) as fake:
        embedder = Embedder(settings=vt.ClientSettings(fake.url), batch_size=2, concurrency="auto")
        embedder(batch)
        embedder.close()
        sampled = len(fake.received("/metrics"))

        async def run() -> int | None:
            callable_ = AsyncEmbedder(settings=vt.ClientSettings(fake.url), batch_size=2, concurrency="auto")
            await callable_(batch)
            await callable_.aclose()
            return callable_.concurrency_limit

        limit = asyncio.run(run())
        both_sampled = len(fake.received("/metrics"))
        fixed = Embedder(settings=vt.ClientSettings(fake.url), batch_size=2, concurrency=2)
        fixed(batch)
        fixed.close()
        assert len(fake.received("/metrics")) == both_sampled > sampled >= 1  # the auto instances only
    assert embedder.concurrency_limit is not None and limit is not None
