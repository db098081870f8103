"""Probes and discovery are retried like any request, and a transient failure is never kept as a verdict:
a listwise reranker whose scorer-kind probe met one 503 still gets its list sent whole."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import vllm_tasks as vt
from vllm_tasks.score_template import ScoreTemplateMissingWarning
from vllm_tasks.testing import LISTWISE_TASKS, OCR_TASKS, RERANKER_TASKS, FakeVLLM
from vllm_tasks.types.scoring import ScorerKind

from ..fakes import fake_like

QUERY = "capital of France"
DOCS = [f"document {i} about {['Paris', 'bananas', 'France'][i % 3]}" for i in range(40)]


@pytest.fixture
def reranker() -> Iterator[FakeVLLM]:
    with FakeVLLM(model="jina-v3", tasks=LISTWISE_TASKS, scorer="listwise", max_model_len=8192) as fake:
        yield fake


@pytest.mark.parametrize("status", [429, 500, 503])
def test_one_transient_failure_of_the_scorer_probe_is_retried(
    status: int, reranker: FakeVLLM, make_client: Callable[..., Any]
) -> None:
    reranker.fail(status, path="/pooling", times=1)
    client = make_client(reranker.url, max_retries=2)
    result = client.rerank(QUERY, DOCS, batch_size=8)
    sent = reranker.received("/rerank")
    assert result.scorer is ScorerKind.LISTWISE
    assert len(sent) == 1 and len(sent[0].json["documents"]) == len(DOCS)


def test_a_probe_that_stays_overloaded_raises_and_is_asked_again(
    reranker: FakeVLLM, make_client: Callable[..., Any]
) -> None:
    client = make_client(reranker.url, max_retries=1)
    reranker.fail(503, path="/pooling", times=2)
    with pytest.raises(vt.ServiceUnavailableError):
        client.scorer_kind()
    assert reranker.received("/rerank") == []
    assert client.scorer_kind() is ScorerKind.LISTWISE


@pytest.mark.parametrize("path", ["/version", "/openapi.json"])
def test_one_transient_failure_of_discovery_is_retried(path: str, make_client: Callable[..., Any]) -> None:
    with FakeVLLM(model="bge-reranker", tasks=RERANKER_TASKS) as fake:
        fake.fail(503, path=path, times=1)
        info = make_client(fake.url, max_retries=2).server_info()
    assert info.version == "0.32.0" and info.routes is not None


@pytest.mark.parametrize("path", ["/version", "/openapi.json"])
def test_discovery_that_stays_overloaded_raises_and_keeps_nothing(
    path: str, make_client: Callable[..., Any]
) -> None:
    with FakeVLLM(model="bge-reranker", tasks=RERANKER_TASKS) as fake:
        client = make_client(fake.url, max_retries=0)
        fake.fail(503, path=path, times=1)
        with pytest.raises(vt.ServiceUnavailableError):
            client.server_info()
        info = client.server_info()
    assert info.version == "0.32.0" and info.routes is not None


@pytest.mark.parametrize("status", [429, 503])
def test_the_score_template_check_is_retried_and_a_busy_one_is_asked_again(
    status: int, make_client: Callable[..., Any]
) -> None:
    with fake_like("qwen3-reranker-no-template") as server:
        retrying = make_client(server.base_url, max_retries=2)
        server.fake.fail(status, path="/tokenize", times=1)
        with pytest.warns(ScoreTemplateMissingWarning):
            retrying.rerank(QUERY, DOCS[:2])
        single = make_client(server.base_url, max_retries=0)
        server.fake.fail(status, path="/tokenize", times=1)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ScoreTemplateMissingWarning)
            single.rerank(QUERY, DOCS[:2])  # no answer: nothing to warn about, nothing kept
        with pytest.warns(ScoreTemplateMissingWarning):
            single.rerank(QUERY, DOCS[:2])


def test_the_ngram_processor_check_is_retried(make_client: Callable[..., Any]) -> None:
    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, ngram_processor=True) as fake:
        fake.fail(503, path="/v1/chat/completions", times=1)
        assert make_client(fake.url, max_retries=2).check_ngram_processor() is True
