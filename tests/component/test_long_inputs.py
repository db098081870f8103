"""``embed(long_inputs=...)`` over real HTTP against FakeVLLM: what goes on the wire for each mode, both
clients, and the refusals (version, model, conversations) that send nothing."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

import vllm_tasks as vt
from vllm_tasks.testing import FakeVLLM

LONG = " ".join(f"word{i}" for i in range(100))  # 102 tokens with [CLS] and [SEP]
SHORT = "short text"
LATE = {"version": "0.33.0", "scorer": "late-interaction", "tasks": {"embed", "pooling"}, "width": 16}


def test_split_mean_sends_windows_as_token_ids_and_short_texts_as_they_are() -> None:
    with FakeVLLM(max_model_len=32) as fake, vt.Client(fake.url) as client:
        result = client.embed([SHORT, LONG], long_inputs="split_mean")
        sent = [request.json["input"] for request in fake.received("/v1/embeddings")]
        cls, sep = client.tokenize("x").tokens[[0, -1]].tolist()
    assert [SHORT] in sent
    windows = next(batch for batch in sent if batch != [SHORT])
    assert all(len(ids) <= 32 and ids[0] == cls and ids[-1] == sep for ids in windows)
    assert result.chunks is not None
    assert result.chunks[1].token_ranges == [(0, 30), (27, 57), (54, 84), (81, 100)]  # 30 tokens, overlap 3
    np.testing.assert_allclose(np.linalg.norm(result.vectors, axis=1), 1.0, rtol=1e-6)
    assert result.usage.prompt_tokens == 4 + sum(len(ids) for ids in windows)


def test_the_async_client_splits_the_same_way() -> None:
    async def split(url: str) -> vt.types.EmbeddingResult:
        async with vt.AsyncClient(url) as client:
            return await client.embed([LONG], long_inputs="split_mean", chunk_tokens=20, chunk_overlap=5)

    with FakeVLLM(max_model_len=32) as fake, vt.Client(fake.url) as client:
        synced = client.embed([LONG], long_inputs="split_mean", chunk_tokens=20, chunk_overlap=5)
        awaited = asyncio.run(split(fake.url))
    np.testing.assert_array_equal(synced.vectors, awaited.vectors)


def test_truncate_sends_the_models_maximum_and_error_lets_the_server_refuse() -> None:
    with FakeVLLM(max_model_len=32) as fake, vt.Client(fake.url) as client:
        assert client.embed(LONG, long_inputs="truncate").usage.prompt_tokens == 32
        assert fake.received("/v1/embeddings")[-1].json["truncate_prompt_tokens"] == -1
        with pytest.raises(vt.ContextLengthExceeded):
            client.embed(LONG)


def test_late_chunking_means_the_servers_chunks() -> None:
    with FakeVLLM(**LATE) as fake, vt.Client(fake.url) as client:  # type: ignore[arg-type]
        result = client.embed([LONG, SHORT], long_inputs="late_chunking", chunk_tokens=40)
        body = fake.received("/v1/embeddings")[-1].json
    assert body["late_chunking_params"] == {"chunk_size": 40} and body["encoding_format"] == "float"
    assert result.chunks is not None
    assert result.chunks[0].token_ranges == [(0, 40), (40, 80), (80, 102)]
    first = " ".join(f"word{i}" for i in range(39))  # [CLS] and 39 words
    assert result.chunks[0].char_ranges is not None and result.chunks[0].char_ranges[0] == (0, len(first))
    expected = sum(w * v for w, v in zip(result.chunks[0].weights, result.chunks[0].vectors, strict=True))
    np.testing.assert_allclose(result.vectors[0], expected / np.linalg.norm(expected), rtol=1e-5)
    assert result.vectors.shape == (2, 16)


@pytest.mark.parametrize(
    ("settings", "match"),
    [({"version": "0.32.0"}, "0.33.0"), ({"version": "0.33.0"}, "not served with token_embed")],
)
def test_late_chunking_is_refused_by_version_before_sending_and_by_model_after(
    settings: dict[str, str], match: str
) -> None:
    with FakeVLLM(**settings) as fake, vt.Client(fake.url) as client:  # type: ignore[arg-type]
        with pytest.raises(vt.UnsupportedByServer, match=match):
            client.embed(LONG, long_inputs="late_chunking", chunk_tokens=16)
        sent = fake.received("/v1/embeddings")
    assert len(sent) == (0 if settings["version"] == "0.32.0" else 1)


def test_conversations_cannot_be_split() -> None:
    with FakeVLLM() as fake, vt.Client(fake.url) as client:
        with pytest.raises(vt.InvalidInputError, match="conversations"):
            client.embed(messages=[{"role": "user", "content": LONG}], long_inputs="split_mean")
        assert fake.received("/v1/embeddings") == []
