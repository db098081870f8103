"""A listwise reranker on FakeVLLM: its list goes out whole, its scores are the whole list's, and a list over
the context is refused with how many documents fit."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import vllm_tasks as vt
from vllm_tasks.testing import LISTWISE_TASKS, FakeVLLM
from vllm_tasks.types.scoring import ScorerKind

QUERY = "capital of France"
DOCS = [f"document {i} about {['Paris', 'bananas', 'France', 'rivers'][i % 4]}" for i in range(200)]


@pytest.fixture
def reranker() -> Iterator[FakeVLLM]:
    with FakeVLLM(model="jina-v3", tasks=LISTWISE_TASKS, scorer="listwise", max_model_len=8192) as fake:
        yield fake


def test_the_probe_asks_twice_and_says_listwise(reranker: FakeVLLM, make_client: Callable[..., Any]) -> None:
    assert make_client(reranker.url).scorer_kind() is ScorerKind.LISTWISE
    assert [request.json["input"] for request in reranker.received("/pooling")] == ["a", ["a", "b"]]


def test_200_documents_go_out_in_one_request_whatever_the_batch_size(
    reranker: FakeVLLM, make_client: Callable[..., Any]
) -> None:
    result = make_client(reranker.url).rerank(QUERY, DOCS, batch_size=16, concurrency=4)
    sent = reranker.received("/rerank")
    assert len(sent) == 1 and len(sent[0].json["documents"]) == 200
    expected = reranker.rank(QUERY, DOCS)
    assert result.scorer is ScorerKind.LISTWISE and result.num_requests == 1
    assert [hit.index for hit in result.results] == sorted(range(200), key=lambda i: (-expected[i], i))
    assert all(hit.score == pytest.approx(expected[hit.index], abs=1e-9) for hit in result.results)


def test_a_split_list_would_have_scored_differently(reranker: FakeVLLM) -> None:
    # Why the list is never split: the first half ranked alone gets other scores.
    assert reranker.rank(QUERY, DOCS[:100]) != reranker.rank(QUERY, DOCS)[:100]


def test_score_one_to_many_is_one_list_and_zipped_pairs_are_batched(
    reranker: FakeVLLM, make_client: Callable[..., Any]
) -> None:
    client = make_client(reranker.url)
    scores = client.score(QUERY, DOCS, batch_size=16).scores
    assert len(reranker.received("/score")) == 1
    np.testing.assert_allclose(scores, reranker.rank(QUERY, DOCS), atol=1e-9)
    reranker.clear_requests()
    zipped = client.score(DOCS[:10], DOCS[10:20], batch_size=4).scores
    assert (
        len(reranker.received("/score")) == 3
    )  # each pair is its own prompt on the server: batching is safe
    np.testing.assert_allclose(
        zipped, [reranker.score(a, b) for a, b in zip(DOCS[:10], DOCS[10:20], strict=True)], atol=1e-9
    )


def test_a_list_over_the_context_says_how_many_documents_fit(make_client: Callable[..., Any]) -> None:
    with FakeVLLM(model="jina-v3", tasks=LISTWISE_TASKS, scorer="listwise", max_model_len=1000) as fake:
        client = make_client(fake.url)
        with pytest.raises(vt.ContextLengthExceeded) as caught:
            client.rerank(QUERY, DOCS)
        message = str(caught.value)
        assert "all 200 documents as one prompt" in message and "context of 1000 tokens" in message
        fitting = int(re.search(r"; the first (\d+) fit", message).group(1))  # type: ignore[union-attr]
        assert client.rerank(QUERY, DOCS[:fitting]).num_requests == 1
        with pytest.raises(vt.ContextLengthExceeded):
            client.rerank(QUERY, DOCS[: fitting + 1])
