"""embed_sparse() against the real `splade` fixture (SPLADE's architecture, BertSpladeSparseEmbeddingModel on
vLLM 0.32), compared with server-fixtures/references.py's transformers computation on the same weights.
One start of each server, a handful of requests to it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import vllm_tasks as vt
from tests.zoo import reference as zoo_reference

pytestmark = pytest.mark.contract

TEXTS = ["hello world", "The cat sat on the mat.", "vLLM serves SPLADE: sparse lexical weights!"]


def reference(texts: list[str]) -> dict[str, Any]:
    """SPLADE from transformers on the fixture's weights (references.py splade)."""
    answer: dict[str, Any] = zoo_reference("splade", "splade", {"texts": texts})
    return answer


def test_the_sparse_vectors_are_the_references(vllm_splade: Any) -> None:
    expected = reference(TEXTS)
    with vt.Client(vllm_splade.base_url) as client:
        result = client.embed_sparse(TEXTS, batch_size=2)
    assert result.dimension == 30522 and result.model == vllm_splade.model
    assert result.usage.prompt_tokens == expected["prompt_tokens"]
    for vector, indices, values in zip(result, expected["indices"], expected["values"], strict=True):
        assert vector.indices.tolist() == indices  # the same token ids, [CLS] and [SEP] pooled too
        np.testing.assert_allclose(vector.values, np.array(values, dtype=np.float32), atol=1e-3, rtol=0)
        assert 10 < len(vector) < 1000  # sparse, as the seeded head's -3 bias makes it


def test_async_client_tokens_and_conversions(vllm_splade: Any) -> None:
    async def run() -> vt.types.SparseEmbeddingResult:
        async with vt.AsyncClient(vllm_splade.base_url) as client:
            return await client.embed_sparse("hello world", top_k=4, return_tokens=True)

    result = asyncio.run(run())
    expected = reference(["hello world"])
    weights = dict(zip(expected["indices"][0], expected["values"][0], strict=True))
    vector = result.vector
    assert len(vector) == 4 and set(vector.indices.tolist()) <= set(weights)
    assert sorted(vector.values.tolist(), reverse=True) == pytest.approx(
        sorted(weights.values(), reverse=True)[:4], abs=1e-3
    )
    assert vector.tokens is not None and all(isinstance(t, str) and t for t in vector.tokens)
    assert list(vector.to_dict().values()) == vector.values.tolist()
    assert vector.to_qdrant()["indices"] == vector.indices.tolist()
    assert vector.to_milvus() == dict(zip(vector.indices.tolist(), vector.values.tolist(), strict=True))


def test_a_sparse_embed_file_job_writes_the_reference_vectors(vllm_splade: Any, tmp_path: Path) -> None:
    """embed_file(sparse=True) on the real server: the Parquet's sparse_indices/sparse_values are the
    transformers reference's ids and weights, row by row (two chunks, each checked with the probe text)."""
    expected = reference(TEXTS)
    source, out = tmp_path / "in.txt", tmp_path / "out.parquet"
    source.write_text("\n".join(TEXTS) + "\n")
    report = vt.embed_file(vllm_splade.base_url, source, out, sparse=True, chunk_rows=2, batch_size=2)
    assert (report.texts, report.dimensions, report.failed_rows, report.sparse) == (3, 30522, 0, True)
    table = pq.read_table(out)
    rows = zip(
        table.column("sparse_indices").to_pylist(), table.column("sparse_values").to_pylist(), strict=True
    )
    for (indices, values), want_indices, want_values in zip(
        rows, expected["indices"], expected["values"], strict=True
    ):
        assert indices == want_indices
        np.testing.assert_allclose(values, want_values, atol=1e-3, rtol=0)


def reference_lexical(texts: list[str]) -> dict[str, Any]:
    """BGE-M3's lexical weights from transformers on the fixture's weights (references.py bge-m3-lexical)."""
    answer: dict[str, Any] = zoo_reference("bge-m3-lexical", "bge-m3", {"texts": texts})
    return answer


LEXICAL_TEXTS = ["hello world hello", "The cat sat on the mat.", "the the the cat", "sparse lexical weights"]


def test_bge_m3_lexical_weights_are_flagembeddings(vllm_bge_m3: Any) -> None:
    """Both clients: the same ids as FlagEmbedding's reduction, weights within 1e-3; the first call meets
    /v1/embeddings' 501 (token_classify is the active task) and reads /pooling."""
    expected = reference_lexical(LEXICAL_TEXTS)
    with vt.Client(vllm_bge_m3.base_url) as client:
        result = client.embed_sparse(LEXICAL_TEXTS, batch_size=3, return_tokens=True)

    async def run() -> vt.types.SparseEmbeddingResult:
        async with vt.AsyncClient(vllm_bge_m3.base_url) as client:
            return await client.embed_sparse(LEXICAL_TEXTS)

    again = asyncio.run(run())
    assert result.usage.prompt_tokens == expected["prompt_tokens"]
    assert sum(len(vector) for vector in result) > 0
    for one, other, indices, values in zip(
        result, again, expected["indices"], expected["values"], strict=True
    ):
        assert one.indices.tolist() == indices == other.indices.tolist()
        np.testing.assert_allclose(one.values, np.array(values, dtype=np.float32), atol=1e-3, rtol=0)
        np.testing.assert_array_equal(one.values, other.values)
        assert one.tokens is not None and len(one.tokens) == len(one)


def test_bge_m3_colbert_vectors_and_maxsim_are_flagembeddings(vllm_bge_m3_colbert: Any) -> None:
    """The same BGE-M3 weights with the ColBERT head active: per-token vectors as FlagEmbedding computes
    them, and vLLM's /rerank score is their MaxSim (FlagEmbedding's ``colbert_score`` further divides by
    the query's token count: the ranking is the same)."""
    query, *documents = TEXTS
    answer = zoo_reference("bge-m3-colbert", "bge-m3-colbert", {"texts": TEXTS})
    expected = [np.array(matrix, dtype=np.float32) for matrix in answer["matrices"]]
    with vt.Client(vllm_bge_m3_colbert.base_url) as client:
        pooled = client.pool(TEXTS)
        ranked = client.rerank(query, documents)
    for got, want in zip(pooled.data, expected, strict=True):
        assert got.shape == want.shape  # every token but <s>, </s> kept
        np.testing.assert_allclose(got, want, atol=1e-5)
    assert ranked.scorer is vt.types.ScorerKind.LATE_INTERACTION
    maxsims = [vt.maxsim(expected[0], matrix) for matrix in expected[1:]]
    np.testing.assert_allclose(
        [hit.score for hit in sorted(ranked.results, key=lambda h: h.index)], maxsims, atol=1e-4
    )
    assert [hit.index for hit in ranked.results] == sorted(range(2), key=lambda i: -maxsims[i])


def test_bge_m3_colbert_vectors_through_embed_file(vllm_bge_m3_colbert: Any, tmp_path: Path) -> None:
    """embed_file(multi_vector=True) on the real server: each row's token_embeddings are FlagEmbedding's."""
    source, out = tmp_path / "in.txt", tmp_path / "tokens.parquet"
    source.write_text("".join(text + "\n" for text in TEXTS))
    report = vt.embed_file(vllm_bge_m3_colbert.base_url, source, out, multi_vector=True, chunk_rows=2)
    answer = zoo_reference("bge-m3-colbert", "bge-m3-colbert", {"texts": TEXTS})
    rows = pq.read_table(out).column("token_embeddings").to_pylist()
    assert (report.texts, report.failed_rows, report.vectors) == (3, 0, "multi-vector")
    for row, want in zip(rows, answer["matrices"], strict=True):
        np.testing.assert_allclose(np.array(row, np.float32), np.array(want, np.float32), atol=1e-5)
