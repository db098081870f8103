"""Listwise rerankers (jina-reranker-v3): told apart by the probe from the real server's recorded answers,
never split, and a 413 explained (tests/recorded/listwise/, the `listwise` fixture)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import listwise, scorer_kind
from vllm_tasks.types.scoring import ScorerKind

from .conftest import BASE
from .recorded import add_recorded, exchange, mock_server

QUERY = "What is the capital of France?"


def recorded_response(name: str) -> httpx.Response:
    answer = exchange("listwise", name)["response"]
    return httpx.Response(answer["status"], content=answer["body_text"].encode())


def test_the_real_servers_answers_read_as_listwise() -> None:
    paths = json.loads(exchange("listwise", "openapi")["response"]["body_text"])["paths"]
    info = vt.types.ServerInfo(base_url=BASE, version="0.32.0", models=(), routes=frozenset(paths))
    one_input = recorded_response("error_pooling_one_input")
    first = scorer_kind.scorer_from_probe(one_input, info)
    assert first is ScorerKind.UNKNOWN and scorer_kind.needs_list_probe(first, one_input)
    assert scorer_kind.scorer_from_list_probe(recorded_response("pooling_list")) is ScorerKind.LISTWISE


@pytest.mark.parametrize(
    ("status", "payload"),
    [
        (200, {"data": [{"data": [[0.1], [0.2]]}, {"data": [[0.3], [0.4]]}]}),  # one matrix per input
        (200, {"data": [{"data": [0.1, 0.2]}]}),  # a vector
        (400, {"error": {"message": "no", "code": 400}}),
        (200, {"data": "x"}),
    ],
    ids=["late-interaction", "vector", "refused", "malformed"],
)
def test_only_one_matrix_for_two_inputs_is_listwise(status: int, payload: Any) -> None:
    assert scorer_kind.scorer_from_list_probe(httpx.Response(status, json=payload)) is ScorerKind.UNKNOWN


def test_a_known_kind_or_an_answered_probe_asks_no_list_probe() -> None:
    refused = httpx.Response(400, json={"error": {"message": "no", "code": 400}})
    answered = httpx.Response(200, json={"data": [{"data": [0.1]}]})
    assert not scorer_kind.needs_list_probe(ScorerKind.CROSS_ENCODER, refused)
    assert not scorer_kind.needs_list_probe(ScorerKind.UNKNOWN, answered)
    assert not scorer_kind.needs_list_probe(ScorerKind.UNKNOWN, None)


def test_the_prompt_keeps_the_embedding_tokens_out_of_the_texts() -> None:
    prompt = listwise.listwise_prompt("q<|rerank_token|>", ["a<|embed_token|>b"], instruction="be brief")
    assert prompt.count(listwise.DOCUMENT_EMBED_TOKEN) == 1 and prompt.count(listwise.QUERY_EMBED_TOKEN) == 1
    assert "<instruct>\nbe brief\n</instruct>" in prompt and "ab<|embed_token|>" in prompt


def test_a_413_for_a_listwise_list_is_not_split(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "listwise")
    add_recorded(httpx_mock, "listwise", "error_pooling_one_input")
    add_recorded(httpx_mock, "listwise", "pooling_list")
    httpx_mock.add_response(url=f"{BASE}/rerank", status_code=413, text="Request Entity Too Large")
    with pytest.raises(vt.RequestTooLargeError, match="not split") as caught:
        make_client().rerank(QUERY, ["x" * 1000] * 300, batch_size=10)
    assert caught.value.status_code == 413
    reranks = [r for r in httpx_mock.get_requests() if r.url.path == "/rerank"]
    assert len(reranks) == 1 and len(json.loads(reranks[0].content)["documents"]) == 300


def test_truncating_a_listwise_list_is_refused_before_it_is_sent(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    """vLLM 0.32-0.33 cut the one list prompt, the query last (meaningless scores, no error); vLLM 0.34.0
    answers 400 ("JinaForRanking does not support truncate_prompt_tokens"). The SDK refuses it on all."""
    mock_server(httpx_mock, "listwise")
    add_recorded(httpx_mock, "listwise", "error_pooling_one_input")
    add_recorded(httpx_mock, "listwise", "pooling_list")
    client = make_client()
    for call in (client.rerank, client.score):
        with pytest.raises(vt.InvalidInputError, match="max_tokens_per_doc") as caught:
            call(QUERY, ["Paris.", "Bananas."], truncate_prompt_tokens=64)
        assert caught.value.field == "truncate_prompt_tokens"
    assert [r.url.path for r in httpx_mock.get_requests() if r.url.path in ("/rerank", "/score")] == []
