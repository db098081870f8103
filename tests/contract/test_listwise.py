"""jina-reranker-v3's architecture (JinaForRanking) on real vLLM against the reference computed from the same
weights with transformers (the `listwise` fixture: a tiny seeded checkpoint, server-fixtures/build_zoo.py)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import numpy as np
import pytest

import vllm_tasks as vt
from tests.zoo import reference
from vllm_tasks.types.scoring import ScorerKind

pytestmark = pytest.mark.contract

QUERY = "where do cats live"
DOCS = [
    f"document {i} about {['cats', 'dogs', 'the weather in paris', 'stock markets'][i % 4]}"
    for i in range(200)
]


@pytest.fixture(scope="module")
def expected() -> list[float]:
    scores: list[float] = reference("jina-listwise", "listwise", {"query": QUERY, "documents": DOCS})[
        "scores"
    ]
    return scores


def test_200_documents_are_ranked_as_the_reference_ranks_them(
    vllm_listwise: Any, expected: list[float]
) -> None:
    with vt.Client(vllm_listwise.base_url) as client:
        assert client.scorer_kind() is ScorerKind.LISTWISE
        result = client.rerank(QUERY, DOCS, batch_size=16)
    assert result.num_requests == 1 and result.scorer is ScorerKind.LISTWISE
    got = np.array([hit.score for hit in sorted(result.results, key=lambda hit: hit.index)])
    assert np.abs(got - np.array(expected)).max() <= 1e-3
    assert [hit.index for hit in result.results] == sorted(range(len(DOCS)), key=lambda i: -expected[i])


def test_async_score_of_the_list_agrees(vllm_listwise: Any, expected: list[float]) -> None:
    async def score() -> np.ndarray:
        async with vt.AsyncClient(vllm_listwise.base_url) as client:
            return (await client.score(QUERY, DOCS, batch_size=16)).scores

    np.testing.assert_allclose(asyncio.run(score()), expected, atol=1e-3)


def test_a_list_over_the_context_names_exactly_how_many_documents_fit(vllm_listwise: Any) -> None:
    many = [f"passage {i} says something about cats and dogs and more words here" for i in range(1000)]
    with vt.Client(vllm_listwise.base_url) as client:
        with pytest.raises(vt.ContextLengthExceeded) as caught:
            client.rerank(QUERY, many)
        found = re.search(
            r"all 1000 documents as one prompt.*context of 8192 tokens; the first (\d+) fit",
            str(caught.value),
        )
        assert found is not None, str(caught.value)
        fitting = int(found.group(1))
        assert client.rerank(QUERY, many[:fitting]).num_requests == 1
        with pytest.raises(vt.ContextLengthExceeded):
            client.rerank(QUERY, many[: fitting + 1])
