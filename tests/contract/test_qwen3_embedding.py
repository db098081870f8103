"""Qwen3-Embedding's layout on real vLLM against sentence-transformers on the same weights (the
`qwen3-embedding` fixture: a tiny seeded Qwen3ForCausalLM with Qwen3-Embedding's sentence-transformers files,
server-fixtures/build_zoo.py): last-token pooling, normalisation, the model's query prompt, Matryoshka."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import vllm_tasks as vt
from tests.zoo import reference

pytestmark = pytest.mark.contract

QUERIES = ["where do cats live", "what is the capital of france", "how to bake bread"]
DOCUMENTS = ["Cats live in houses.", "Paris is the capital of France.", "Mix flour and water, then bake it."]
QUERY_PROMPT = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"


REQUESTS = {
    "documents": {"texts": DOCUMENTS},
    "queries": {"texts": QUERIES, "prompt_name": "query"},
    "queries_16": {"texts": QUERIES, "prompt_name": "query", "dimensions": 16},
}


@pytest.fixture(scope="module")
def expected() -> dict[str, np.ndarray]:
    """sentence-transformers' vectors for each of REQUESTS (one process)."""
    answers = reference("qwen3-embedding", "qwen3-embedding", list(REQUESTS.values()))
    return {name: np.array(answer["vectors"]) for name, answer in zip(REQUESTS, answers, strict=True)}


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_documents_and_prompted_queries_equal_sentence_transformers(
    vllm_qwen3_embedding: Any, expected: dict[str, np.ndarray]
) -> None:
    with vt.Client(vllm_qwen3_embedding.base_url) as client:
        documents = client.embed(DOCUMENTS).vectors
        queries = client.embed(QUERIES, prompt_name="query").vectors
        literal = client.embed(QUERIES, prompt=QUERY_PROMPT).vectors
        bare = client.embed(QUERIES).vectors
    assert cosines(documents, expected["documents"]).min() >= 0.999
    reference_queries = expected["queries"]
    assert cosines(queries, reference_queries).min() >= 0.999
    assert cosines(literal, reference_queries).min() >= 0.999
    # The prompt matters: without it the queries are other vectors (what users see when they forget it).
    assert cosines(bare, reference_queries).max() < 0.99


def test_matryoshka_width_with_the_prompt_equals_truncated_sentence_transformers(
    vllm_qwen3_embedding: Any, expected: dict[str, np.ndarray]
) -> None:
    with vt.Client(vllm_qwen3_embedding.base_url) as client:
        vectors = client.embed(QUERIES, prompt_name="query", dimensions=16).vectors
    assert vectors.shape == (3, 16)
    assert cosines(vectors, expected["queries_16"]).min() >= 0.999


def test_an_unknown_prompt_name_lists_the_models_prompts(vllm_qwen3_embedding: Any) -> None:
    with vt.Client(vllm_qwen3_embedding.base_url) as client, pytest.raises(vt.BadRequestError) as caught:
        client.embed(QUERIES, prompt_name="passage")
    assert caught.value.kind == "input_type_not_supported"
    assert "prompt_name='passage'" in str(caught.value) and "document, query" in str(caught.value)
