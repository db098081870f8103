"""rerank(), score(), classify(), pool(), maxsim(): replayed from responses recorded on real vLLM servers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import calls, defaults, pooling, scorer_kind, scoring
from vllm_tasks.calls import CallOptions
from vllm_tasks.types.scoring import ScorerKind

from .conftest import BASE

RECORDED = Path(__file__).resolve().parent.parent / "recorded"
QUERY = "What is the capital of France?"
DOCS = ["Paris is the capital of France.", "Bananas are yellow.", "France is in Europe."]


def recorded(fixture: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / fixture / f"{name}.json").read_text())
    return data


def body(fixture: str, name: str) -> Any:
    return json.loads(recorded(fixture, name)["response"]["body_text"])


def add(httpx_mock: HTTPXMock, fixture: str, name: str, **kwargs: Any) -> None:
    """Answer the recorded request's method + path with the recorded status and body."""
    exchange = recorded(fixture, name)
    httpx_mock.add_response(
        url=BASE + exchange["request"]["path"],
        method=exchange["request"]["method"],
        status_code=exchange["response"]["status"],
        content=exchange["response"]["body_text"].encode(),
        headers={"content-type": "application/json"},
        **kwargs,
    )


def add_at(httpx_mock: HTTPXMock, fixture: str, name: str, path: str) -> None:
    """Answer ``path`` with a recorded response of another route (same server version and shape)."""
    exchange = recorded(fixture, name)
    httpx_mock.add_response(
        url=BASE + path,
        status_code=exchange["response"]["status"],
        content=exchange["response"]["body_text"].encode(),
        headers={"content-type": "application/json"},
    )


def mock_server(httpx_mock: HTTPXMock, fixture: str, version: str | None = None, probe: bool = True) -> None:
    """Discovery as the recorded fixture answered it (``version`` overrides), plus the scorer probe."""
    if version is None:
        add(httpx_mock, fixture, "version")
    else:
        httpx_mock.add_response(url=f"{BASE}/version", json={"version": version})
    add(httpx_mock, fixture, "models")
    add(httpx_mock, fixture, "openapi")
    if probe:
        add(httpx_mock, fixture, "pooling")


def sent(httpx_mock: HTTPXMock, path: str) -> list[dict[str, Any]]:
    return [json.loads(r.content) for r in httpx_mock.get_requests() if r.url.path == path]


def score_lookup(fixture: str) -> dict[str, float]:
    """Document text -> the recorded /score answer for (QUERY, text)."""
    scores = body(fixture, "score")["data"]
    return {DOCS[entry["index"]]: entry["score"] for entry in scores}


def rerank_callback(fixture: str) -> Any:
    """A /rerank server that answers any subset of DOCS with the recorded scores, sorted as vLLM does."""
    lookup = score_lookup(fixture)

    def answer(request: httpx.Request) -> httpx.Response:
        payload = json.loads(request.content)
        results = [
            {"index": i, "document": {"text": d, "multi_modal": None}, "relevance_score": lookup[d]}
            for i, d in enumerate(payload["documents"])
        ]
        results.sort(key=lambda r: -r["relevance_score"])
        if payload.get("top_n"):
            results = results[: payload["top_n"]]
        return httpx.Response(200, json={"id": "score-x", "model": payload["model"], "results": results})

    return answer


# --------------------------------------------------------------------------------------------------
# rerank
# --------------------------------------------------------------------------------------------------


def test_rerank_cross_encoder_returns_sorted_hits_with_original_documents(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "rerank")
    add(httpx_mock, "rerank", "rerank")
    docs = [{"text": text, "id": i} for i, text in enumerate(DOCS)]
    result = make_client().rerank(QUERY, docs)
    expected = body("rerank", "rerank")["results"]
    assert result.indices == [r["index"] for r in expected]
    assert result.scores.tolist() == [r["relevance_score"] for r in expected]
    assert result.results[0].document is docs[expected[0]["index"]]
    assert result.scorer is ScorerKind.CROSS_ENCODER
    assert result.model == "minilm-rerank"
    assert result.usage.prompt_tokens == 46
    assert result.num_requests == 1
    (request,) = sent(httpx_mock, "/rerank")
    assert request == recorded("rerank", "rerank")["request"]["json"]


def test_rerank_top_n_is_sent_and_applied(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "rerank")
    add(httpx_mock, "rerank", "rerank_top_n")
    result = make_client().rerank(QUERY, DOCS, top_n=1)
    assert [(hit.index, hit.document) for hit in result.results] == [(1, DOCS[1])]
    assert sent(httpx_mock, "/rerank")[0]["top_n"] == 1


def test_rerank_bi_encoder_is_detected_from_the_pooling_vector(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")
    add(httpx_mock, "embed", "rerank")
    result = make_client().rerank(QUERY, DOCS)
    assert result.scorer is ScorerKind.BI_ENCODER
    assert result.indices == [0, 2, 1]
    assert result.documents == [DOCS[0], DOCS[2], DOCS[1]]


@pytest.mark.parametrize(("batch_size", "top_n"), [(1, None), (2, None), (2, 2), (1, 1), (3, 0)])
def test_rerank_splits_and_merges_into_the_single_request_ranking(
    batch_size: int, top_n: int | None, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "rerank")
    httpx_mock.add_callback(rerank_callback("rerank"), url=f"{BASE}/rerank", is_reusable=True)
    result = make_client().rerank(QUERY, DOCS, batch_size=batch_size, top_n=top_n)
    single = [r["index"] for r in body("rerank", "rerank")["results"]]
    assert result.indices == single[: top_n or None]
    batches = sent(httpx_mock, "/rerank")
    assert result.num_requests == len(batches) == -(-len(DOCS) // batch_size)
    assert sum(len(b["documents"]) for b in batches) == len(DOCS)
    assert all(b["query"] == QUERY for b in batches)


def test_rerank_splits_by_request_size(
    make_client: Any, httpx_mock: HTTPXMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(defaults, "SCORE_MAX_REQUEST_BYTES", 40)
    mock_server(httpx_mock, "rerank")
    httpx_mock.add_callback(rerank_callback("rerank"), url=f"{BASE}/rerank", is_reusable=True)
    result = make_client().rerank(QUERY, DOCS)
    assert result.num_requests == 3
    assert result.indices == [1, 2, 0]


def test_scorer_kind_is_probed_once_per_model(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "rerank")
    add(httpx_mock, "rerank", "rerank", is_reusable=True)
    client = make_client()
    client.rerank(QUERY, DOCS)
    client.rerank(QUERY, DOCS)
    assert client.scorer_kind() is ScorerKind.CROSS_ENCODER
    assert len(sent(httpx_mock, "/pooling")) == 1


def test_the_scorer_probe_is_answered_before_any_scoring_request_is_sent(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    """vLLM 0.11 and 0.16 died when the /pooling probe shared an engine batch with /rerank (issue 14)."""
    mock_server(httpx_mock, "rerank")

    def one_result(request: httpx.Request) -> httpx.Response:
        docs = json.loads(request.content)["documents"]
        results = [{"index": i, "relevance_score": 0.5} for i in range(len(docs))]
        return httpx.Response(200, json={"model": "minilm-rerank", "results": results})

    httpx_mock.add_callback(one_result, url=f"{BASE}/rerank", is_reusable=True)
    make_client().rerank(QUERY, DOCS, batch_size=1, concurrency=4)
    paths = [r.url.path for r in httpx_mock.get_requests() if r.url.path in ("/pooling", "/rerank")]
    assert paths[0] == "/pooling" and paths.count("/pooling") == 1
    assert paths[1:] == ["/rerank"] * len(DOCS)


def test_late_interaction_is_detected_from_a_token_matrix() -> None:
    info = vt.types.ServerInfo(
        base_url=BASE, version="0.32.0", models=(), routes=frozenset({"/v1/embeddings"})
    )
    matrix = httpx.Response(200, json={"data": [{"index": 0, "data": [[0.1, 0.2], [0.3, 0.4]]}]})
    assert scorer_kind.scorer_from_probe(matrix, info) is ScorerKind.LATE_INTERACTION


PER_TOKEN_384 = [[0.01] * 384] * 3  # /pooling's default answer for "a" (3 tokens) on vLLM 0.11-0.16
PER_TOKEN_1 = [[0.5]] * 3
EMBED_REFUSED = {
    "error": {"message": "Unsupported task: 'embed' Supported tasks: ['token_embed']", "code": 400}
}


# What the real 0.11.0, 0.12.0 and 0.16.0 servers of the version matrix answered (issue 14): the default
# /pooling answer is per token for every model, so it alone never means late interaction there.
@pytest.mark.parametrize(
    ("version", "first", "second", "expected"),
    [
        ("0.16.0", PER_TOKEN_1, None, ScorerKind.CROSS_ENCODER),  # token_classify, one label
        ("0.16.0", PER_TOKEN_384, (200, [0.1] * 384), ScorerKind.BI_ENCODER),  # task=embed: one vector
        ("0.12.0", PER_TOKEN_384, (400, EMBED_REFUSED), ScorerKind.LATE_INTERACTION),  # token_embed only
        ("0.11.0", PER_TOKEN_384, (200, PER_TOKEN_384), ScorerKind.UNKNOWN),  # 0.11 ignores `task`
        ("0.19.1", PER_TOKEN_384, None, ScorerKind.LATE_INTERACTION),  # the active task: token_embed
    ],
    ids=["0.16-cross-encoder", "0.16-bi-encoder", "0.12-late-interaction", "0.11-cannot-tell", "0.19-late"],
)
def test_old_servers_per_token_pooling_answer_is_not_late_interaction(
    make_client: Any,
    httpx_mock: HTTPXMock,
    version: str,
    first: list[Any],
    second: tuple[int, Any] | None,
    expected: ScorerKind,
) -> None:
    mock_server(httpx_mock, "embed", version=version, probe=False)
    httpx_mock.add_response(url=f"{BASE}/pooling", json={"data": [{"index": 0, "data": first}]})
    if second is not None:
        status, answer = second
        payload = answer if status != 200 else {"data": [{"index": 0, "data": answer}]}
        httpx_mock.add_response(url=f"{BASE}/pooling", status_code=status, json=payload)
    assert make_client().scorer_kind() is expected
    probes = sent(httpx_mock, "/pooling")
    assert [p.get("task") for p in probes] == ([None] if second is None else [None, "embed"])


@pytest.mark.parametrize(
    ("routes", "expected"),
    [
        ({"/classify", "/rerank"}, ScorerKind.CROSS_ENCODER),
        ({"/v1/embeddings", "/rerank"}, ScorerKind.BI_ENCODER),
        ({"/rerank"}, ScorerKind.UNKNOWN),
        (None, ScorerKind.UNKNOWN),
    ],
)
def test_scorer_falls_back_to_routes_when_pooling_refuses(
    routes: set[str] | None, expected: ScorerKind
) -> None:
    info = vt.types.ServerInfo(
        base_url=BASE, version="0.32.0", models=(), routes=None if routes is None else frozenset(routes)
    )
    refused = httpx.Response(400, json={"error": {"message": "Unsupported task", "code": 400}})
    assert scorer_kind.scorer_from_probe(refused, info) is expected


def test_rerank_sends_gated_fields_on_a_new_server(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "rerank")
    add(httpx_mock, "rerank", "rerank")
    make_client().rerank(
        QUERY,
        DOCS,
        max_tokens_per_doc=16,
        max_tokens_per_query=8,
        instruction="Find the capital",
        use_activation=False,
        truncate_prompt_tokens=-1,
        extra_body={"priority": 3},
        extra_headers={"X-Request-Id": "abc"},
    )
    (request,) = sent(httpx_mock, "/rerank")
    assert request["max_tokens_per_doc"] == 16
    assert request["max_tokens_per_query"] == 8
    assert request["instruction"] == "Find the capital"
    assert request["use_activation"] is False
    assert request["truncate_prompt_tokens"] == -1
    assert request["priority"] == 3
    rerank_request = next(r for r in httpx_mock.get_requests() if r.url.path == "/rerank")
    assert rerank_request.headers["x-request-id"] == "abc"


@pytest.mark.parametrize(
    ("kwargs", "feature"),
    [
        ({"max_tokens_per_doc": 16}, "max_tokens_per_doc"),
        ({"max_tokens_per_query": 16}, "max_tokens_per_query"),
        ({"instruction": "Find the capital"}, "score_instruction"),
    ],
)
def test_rerank_gates_refuse_on_a_0_19_server_before_sending(
    kwargs: dict[str, Any], feature: str, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "rerank", version="0.19.0", probe=False)
    with pytest.raises(vt.UnsupportedByServer) as info:
        make_client().rerank(QUERY, DOCS, **kwargs)
    assert info.value.feature == feature
    assert info.value.required_version == "0.20.0"
    assert "0.19.0" in str(info.value)
    assert sent(httpx_mock, "/rerank") == []


def test_max_tokens_per_doc_client_fallback_on_a_0_19_server(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed", version="0.19.0")

    def tokenize(request: httpx.Request) -> httpx.Response:
        prompt = json.loads(request.content)["prompt"]
        words = prompt.lower().rstrip(".?").split()
        return httpx.Response(
            200, json={"count": len(words), "max_model_len": 256, "tokens": list(range(len(words)))}
        )

    def detokenize(request: httpx.Request) -> httpx.Response:
        tokens = json.loads(request.content)["tokens"]
        return httpx.Response(200, json={"prompt": f"cut to {len(tokens)}"})

    httpx_mock.add_callback(tokenize, url=f"{BASE}/tokenize", is_reusable=True)
    httpx_mock.add_callback(detokenize, url=f"{BASE}/detokenize", is_reusable=True)
    httpx_mock.add_callback(
        lambda request: httpx.Response(
            200,
            json={
                "model": "minilm",
                "results": [
                    {"index": i, "relevance_score": 1.0 - i / 10}
                    for i in range(len(json.loads(request.content)["documents"]))
                ],
            },
        ),
        url=f"{BASE}/rerank",
    )
    result = make_client().rerank(QUERY, DOCS, max_tokens_per_doc=3, max_tokens_per_doc_fallback="client")
    (request,) = sent(httpx_mock, "/rerank")
    assert "max_tokens_per_doc" not in request
    # Only "Bananas are yellow." fits in 3 "tokens"; the others are rebuilt from their first 3.
    assert request["documents"] == ["cut to 3", "Bananas are yellow.", "cut to 3"]
    assert all(t["add_special_tokens"] is False for t in sent(httpx_mock, "/tokenize"))
    assert result.results[0].document == DOCS[0]


def test_max_tokens_per_doc_must_be_below_max_model_len(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "rerank", probe=False)
    with pytest.raises(vt.InvalidInputError, match=r"max_model_len \(256\)"):
        make_client().rerank(QUERY, DOCS, max_tokens_per_doc=1000)


@pytest.mark.parametrize(
    ("query", "documents", "kwargs", "field"),
    [
        (QUERY, DOCS, {"top_n": -1}, "top_n"),
        (QUERY, [], {}, "documents"),
        (QUERY, "one string", {}, "documents"),
        (QUERY, [{"body": "x"}], {}, "documents[0]"),
        (QUERY, [{"text": 3}], {}, "documents[0]['text']"),
        (QUERY, [object()], {}, "documents[0]"),
        (QUERY, DOCS, {"batch_size": 0}, "batch_size"),
        (QUERY, DOCS, {"concurrency": 0}, "concurrency"),
        (QUERY, DOCS, {"truncate_prompt_tokens": -2}, "truncate_prompt_tokens"),
        (QUERY, DOCS, {"max_tokens_per_doc": -1}, "max_tokens_per_doc"),
        (
            QUERY,
            DOCS,
            {"max_tokens_per_doc_fallback": "maybe", "max_tokens_per_doc": 5},
            "max_tokens_per_doc_fallback",
        ),
    ],
)
def test_rerank_refuses_bad_input_before_sending(
    query: Any, documents: Any, kwargs: dict[str, Any], field: str, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    httpx_mock.add_response(url=f"{BASE}/version", json={"version": "0.32.0"}, is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/v1/models", json=body("rerank", "models"), is_optional=True)
    httpx_mock.add_response(url=f"{BASE}/openapi.json", status_code=404, is_optional=True)
    with pytest.raises(vt.InvalidInputError) as info:
        make_client().rerank(query, documents, **kwargs)
    assert info.value.field == field
    assert sent(httpx_mock, "/rerank") == []


def test_rerank_text_field_and_attribute_documents(make_client: Any, httpx_mock: HTTPXMock) -> None:
    class Doc:
        def __init__(self, page_content: str) -> None:
            self.page_content = page_content

    mock_server(httpx_mock, "rerank")
    add(httpx_mock, "rerank", "rerank")
    docs = [Doc(text) for text in DOCS]
    result = make_client().rerank(QUERY, docs, text_field="page_content")
    assert sent(httpx_mock, "/rerank")[0]["documents"] == DOCS
    assert result.results[0].document is docs[1]


def test_rerank_multimodal_documents_become_content_parts(
    make_client: Any, httpx_mock: HTTPXMock, tmp_path: Path
) -> None:
    from PIL import Image

    image = Image.new("RGB", (4, 4), "red")
    path = tmp_path / "red.png"
    image.save(path)
    mock_server(httpx_mock, "rerank")
    httpx_mock.add_response(
        url=f"{BASE}/rerank",
        json={"model": "m", "results": [{"index": i, "relevance_score": 0.1 * i} for i in range(3)]},
    )
    docs = [image, ["a caption", path], {"content": [{"type": "text", "text": "plain"}]}]
    result = make_client().rerank(QUERY, docs)
    sent_docs = sent(httpx_mock, "/rerank")[0]["documents"]
    assert sent_docs[0]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert sent_docs[1]["content"][0] == {"type": "text", "text": "a caption"}
    assert sent_docs[1]["content"][1]["type"] == "image_url"
    assert sent_docs[2] == {"content": [{"type": "text", "text": "plain"}]}
    assert result.results[0].document is image or result.results[-1].document is image


def test_rerank_multimodal_is_gated(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "rerank", version="0.9.2", probe=False)
    with pytest.raises(vt.UnsupportedByServer, match="score_multimodal"):
        make_client().rerank(QUERY, [b"\x89PNG\r\n\x1a\n0000"])


def test_rerank_on_a_server_without_the_route(make_client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=f"{BASE}/version", json={"version": "0.32.0"})
    add(httpx_mock, "rerank", "models")
    httpx_mock.add_response(url=f"{BASE}/openapi.json", json={"paths": {"/v1/chat/completions": {}}})
    httpx_mock.add_response(url=f"{BASE}/rerank", status_code=404, json={"detail": "Not Found"})
    httpx_mock.add_response(
        url=f"{BASE}/pooling", status_code=404, json={"detail": "Not Found"}, is_optional=True
    )
    with pytest.raises(vt.EndpointNotServed) as info:
        make_client().rerank(QUERY, DOCS)
    assert info.value.task == "rerank"


def test_client_model_is_used_and_unknown_model_maps(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "rerank", probe=False)
    httpx_mock.add_response(
        url=f"{BASE}/pooling", status_code=404, json=body("rerank", "error_unknown_model"), is_optional=True
    )
    add(httpx_mock, "rerank", "error_unknown_model")
    with pytest.raises(vt.NotFoundError):
        make_client(model="no-such-model").rerank(QUERY, DOCS)
    assert sent(httpx_mock, "/rerank")[0]["model"] == "no-such-model"


# --------------------------------------------------------------------------------------------------
# score
# --------------------------------------------------------------------------------------------------


def test_score_one_to_many_uses_queries_documents_on_new_servers(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")
    add(httpx_mock, "embed", "score_queries_documents")
    result = make_client().score(QUERY, DOCS)
    expected = [entry["score"] for entry in body("embed", "score_queries_documents")["data"]]
    assert result.scores.tolist() == expected
    assert result.scores.dtype == np.float64
    assert result.scorer is ScorerKind.BI_ENCODER
    assert sent(httpx_mock, "/score") == [{"model": "minilm", "queries": QUERY, "documents": DOCS}]


def test_score_uses_text_1_text_2_on_old_servers(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "rerank", version="0.15.1")
    add(httpx_mock, "rerank", "score")
    result = make_client().score(QUERY, DOCS)
    assert sent(httpx_mock, "/score") == [recorded("rerank", "score")["request"]["json"]]
    assert result.scores.shape == (3,)
    assert result.scorer is ScorerKind.CROSS_ENCODER


def test_score_one_to_one_and_n_to_n(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "rerank")
    lookup = score_lookup("rerank")

    def answer(request: httpx.Request) -> httpx.Response:
        payload = json.loads(request.content)
        docs = payload["documents"] if isinstance(payload["documents"], list) else [payload["documents"]]
        data = [{"index": i, "object": "score", "score": lookup[d]} for i, d in enumerate(docs)]
        return httpx.Response(200, json={"model": "minilm-rerank", "data": data[::-1]})

    httpx_mock.add_callback(answer, url=f"{BASE}/score", is_reusable=True)
    client = make_client()
    one = client.score(QUERY, DOCS[1])
    assert one.scores.tolist() == [lookup[DOCS[1]]]
    many = client.score([QUERY] * 3, DOCS, batch_size=2)
    assert many.scores.tolist() == [lookup[d] for d in DOCS]
    requests = sent(httpx_mock, "/score")
    assert requests[0]["queries"] == QUERY and requests[0]["documents"] == DOCS[1]
    assert [len(r["queries"]) for r in requests[1:]] == [2, 1]


@pytest.mark.parametrize(
    ("text_1", "text_2"), [(["a", "b"], ["x", "y", "z"]), (["a", "b"], "x"), ([], ["x"])]
)
def test_score_refuses_pairings_the_server_refuses(text_1: Any, text_2: Any, make_client: Any) -> None:
    # The server answers N:M with the recorded 400 "Input lengths must be either 1:1, 1:N or N:N".
    assert "1:1, 1:N or N:N" in body("embed", "error_score_lengths")["error"]["message"]
    with pytest.raises(vt.InvalidInputError, match=r"1:1, 1:N nor N:N|is empty"):
        make_client().score(text_1, text_2)


def test_pair_mode() -> None:
    assert scoring.pair_mode(1, 1) == "1:1"
    assert scoring.pair_mode(1, 5) == "1:N"
    assert scoring.pair_mode(4, 4) == "N:N"


# --------------------------------------------------------------------------------------------------
# classify and pool
# --------------------------------------------------------------------------------------------------


def test_classify(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "rerank", probe=False)
    add(httpx_mock, "rerank", "classify")
    result = make_client().classify(["hello world", "vLLM serves embeddings"])
    assert result.labels == ["relevance", "relevance"]
    assert result.probs.shape == (2, 1)
    assert result.num_classes == 1
    assert result.probs[1, 0] == pytest.approx(0.48374441266059875)
    assert sent(httpx_mock, "/classify") == [recorded("rerank", "classify")["request"]["json"]]


def test_classify_on_an_embedding_server(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed", probe=False)
    add(httpx_mock, "embed", "error_404_classify")
    with pytest.raises(vt.EndpointNotServed) as info:
        make_client().classify("hello")
    assert info.value.task == "classify"


def test_pool_returns_one_array_per_input(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed", probe=False)
    add(httpx_mock, "embed", "pooling")
    result = make_client().pool("hello world", encoding_format="float")
    assert len(result.data) == 1
    assert result.data[0].shape == (384,)
    assert result.model == "minilm"
    assert sent(httpx_mock, "/pooling") == [{"model": "minilm", "input": ["hello world"]}]


def test_pool_token_matrices_and_task(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed", probe=False)
    matrices = [[[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], [[0.0, 1.0]]]
    httpx_mock.add_response(
        url=f"{BASE}/pooling",
        json={"model": "colbert", "data": [{"index": i, "data": m} for i, m in enumerate(matrices)]},
    )
    result = make_client().pool(["query text", "doc"], task="token_embed")
    assert [a.shape for a in result.data] == [(3, 2), (1, 2)]
    assert sent(httpx_mock, "/pooling")[0]["task"] == "token_embed"


@pytest.mark.parametrize("task", ["score", "encode", "nonsense"])
def test_pool_refuses_removed_tasks(task: str, make_client: Any) -> None:
    with pytest.raises(vt.InvalidInputError, match="task"):
        make_client().pool("x", task=task)


# Token ids, in the shapes vLLM's own /classify tests send (input: list[int] and list[list[int]]). The
# answers are the recorded ones for text: a /classify or /pooling answer has the same shape either way.
IDS = [101, 7592, 2088, 102]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([101, 7592, 2088, 102], [IDS]),
        ((101, 7592, 2088, 102), [IDS]),
        ([IDS, [101, 102]], [IDS, [101, 102]]),
    ],
)
def test_pool_inputs_accepts_token_ids(value: Any, expected: Any) -> None:
    assert pooling.pool_inputs(value) == expected


def test_classify_token_id_lists(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "rerank", probe=False)
    add(httpx_mock, "rerank", "classify")
    result = make_client().classify([IDS, (101, 102)])
    assert result.probs.shape == (2, 1)
    assert result.probs[1, 0] == pytest.approx(0.48374441266059875)
    assert result.labels == ["relevance", "relevance"]
    assert sent(httpx_mock, "/classify") == [{"model": "minilm-rerank", "input": [IDS, [101, 102]]}]


def test_pool_one_tokenized_prompt(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed", probe=False)
    add(httpx_mock, "embed", "pooling")
    result = make_client().pool(IDS, task="embed", encoding_format="float")
    assert [array.shape for array in result.data] == [(384,)]
    assert sent(httpx_mock, "/pooling") == [{"model": "minilm", "input": [IDS], "task": "embed"}]


def test_token_ids_are_batched_by_count_and_by_size(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "rerank", probe=False)

    def answer(request: httpx.Request) -> httpx.Response:
        inputs = json.loads(request.content)["input"]
        data = [{"index": i, "label": "x", "probs": [0.5], "num_classes": 1} for i in range(len(inputs))]
        return httpx.Response(200, json={"model": "minilm-rerank", "data": data})

    httpx_mock.add_callback(answer, url=f"{BASE}/classify", is_reusable=True)
    prompts = [[i + 1] * 3 for i in range(5)]
    assert make_client().classify(prompts, batch_size=2).probs.shape == (5, 1)
    # The batches go out concurrently, so the order they arrive in is not fixed.
    assert sorted(body["input"] for body in sent(httpx_mock, "/classify")) == [
        prompts[0:2],
        prompts[2:4],
        prompts[4:],
    ]
    # Without characters, a token-id list is sized at TOKEN_ID_JSON_BYTES per id against the byte limit.
    ids = [7] * ((defaults.SCORE_MAX_REQUEST_BYTES - 24) // scoring.TOKEN_ID_JSON_BYTES)
    large = [ids, ids, [7]]
    sizes = scoring.json_sizes(large)
    assert sizes[0] <= defaults.SCORE_MAX_REQUEST_BYTES < sizes[0] + sizes[1]
    assert sizes[1] + sizes[2] <= defaults.SCORE_MAX_REQUEST_BYTES
    _, batches = pooling.plan_pooling_requests(
        "/pooling", "pooling", large, {}, CallOptions(), batch_size=128
    )
    assert batches == [range(0, 1), range(1, 3)]
    assert len(json.dumps([99999] * 100, separators=(",", ":"))) <= 100 * scoring.TOKEN_ID_JSON_BYTES


@pytest.mark.parametrize(
    ("value", "field", "problem"),
    [
        ([], "input", "is empty"),
        ([[]], "input[0]", "non-empty list of token ids"),
        ([1, -2], "input[1]", "int >= 0"),
        ([1, True], "input[1]", "int >= 0"),
        ([1, 2.0], "input[1]", "int >= 0"),
        ([[1], [2, False]], "input[1][1]", "int >= 0"),
        ([[1], "text"], "input[1]", "list of token ids"),
        ([[1], b"\x01"], "input[1]", "list of token ids"),
        (["text", [1]], "input[1]", "must be a string"),
        (["text", b"raw"], "input[1]", "must be a string"),
        ([True, 1], "input[0]", "must be a string"),
        ({"input": [1]}, "input", "must be a list"),
    ],
)
def test_classify_and_pool_refuse_bad_token_ids_before_sending(
    value: Any, field: str, problem: str, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    client = make_client()
    for method in (client.classify, client.pool):
        with pytest.raises(vt.InvalidInputError, match=problem) as info:
            method(value)
        assert info.value.field == field
    assert httpx_mock.get_requests() == []


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda c: c.rerank(IDS, DOCS), "query"),
        (lambda c: c.rerank(QUERY, [IDS, [101, 102]]), "documents[0]"),
        (lambda c: c.rerank(QUERY, IDS), "documents[0]"),
        (lambda c: c.score(IDS, DOCS), "text_1"),
        (lambda c: c.score(QUERY, (101, 102)), "text_2"),
        (lambda c: c.score([QUERY], [IDS]), "text_2[0]"),
        (lambda c: c.score([IDS, IDS], ["a", "b"]), "text_1[0]"),
    ],
)
def test_score_and_rerank_refuse_token_ids_which_vllm_does_not_read(
    call: Any, field: str, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    # vLLM 0.32's ScoreInput is `str | {"content": [parts]}` on every side of /score and /rerank.
    with pytest.raises(vt.InvalidInputError, match="/score and /rerank do not accept") as info:
        call(make_client())
    assert info.value.field == field
    assert "/detokenize" in info.value.fix
    assert httpx_mock.get_requests() == []


def test_maxsim_matches_the_definition() -> None:
    rng = np.random.default_rng(0)
    query, doc = rng.normal(size=(5, 8)), rng.normal(size=(7, 8))
    expected = sum(max(float(q @ d) for d in doc) for q in query)
    assert vt.maxsim(query, doc) == pytest.approx(expected)
    assert vt.maxsim([[1.0, 0.0]], [[0.5, 0.5], [2.0, 0.0]]) == 2.0
    with pytest.raises(vt.InvalidInputError):
        vt.maxsim(query, rng.normal(size=(3, 4)))
    with pytest.raises(vt.InvalidInputError):
        vt.maxsim(query[0], doc)


def test_to_score_input_shapes() -> None:
    assert scoring.to_score_input("t", "q") == "t"
    assert scoring.to_score_input({"content": "hi"}, "q") == {"content": [{"type": "text", "text": "hi"}]}
    part = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    assert scoring.to_score_input(part, "q") == {"content": [part]}
    assert scoring.is_multimodal(scoring.to_score_input(part, "q"))
    assert not scoring.is_multimodal(scoring.to_score_input(["a", "b"], "q"))


def test_multimodal_late_interaction_is_gated_once_the_scorer_is_known(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed", version="0.16.0", probe=False)
    matrix = {"data": [{"index": 0, "data": [[0.1, 0.2], [0.2, 0.1]]}]}
    httpx_mock.add_response(url=f"{BASE}/pooling", json=matrix)
    httpx_mock.add_response(url=f"{BASE}/pooling", status_code=400, json=EMBED_REFUSED)  # task=embed
    client = make_client()
    assert client.scorer_kind() is ScorerKind.LATE_INTERACTION
    with pytest.raises(vt.UnsupportedByServer, match="score_multimodal_late_interaction"):
        client.rerank(QUERY, [b"\x89PNG\r\n\x1a\n0000"])


# --------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------


def test_cli_rerank_prints_ranked_lines_and_json(
    httpx_mock: HTTPXMock, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from vllm_tasks import cli

    mock_server(httpx_mock, "rerank")
    add(httpx_mock, "rerank", "rerank", is_reusable=True)
    assert cli.main(["rerank", QUERY, *DOCS, "--url", BASE]) == cli.EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[1] for line in lines] == ["1", "2", "0"]
    assert lines[0].split("\t")[2] == DOCS[1]
    docs_file = tmp_path / "docs.txt"
    docs_file.write_text("\n".join(DOCS) + "\n\n")
    mock_server(httpx_mock, "rerank")
    assert cli.main(["rerank", QUERY, "--file", str(docs_file), "--url", BASE, "--json"]) == cli.EXIT_OK
    payload = json.loads(capsys.readouterr().out)
    assert payload["scorer"] == "cross-encoder"
    assert [hit["index"] for hit in payload["results"]] == [1, 2, 0]


def test_cli_rerank_without_documents_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from vllm_tasks import cli

    assert cli.main(["rerank", QUERY, "--url", BASE]) == cli.EXIT_USAGE
    assert "no documents" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# Length errors
# --------------------------------------------------------------------------------------------------


def word_tokenizer(request: httpx.Request) -> httpx.Response:
    """/tokenize stand-in: one token per word plus [CLS] and [SEP]."""
    count = len(json.loads(request.content)["prompt"].split()) + 2
    return httpx.Response(200, json={"count": count, "max_model_len": 256, "tokens": list(range(count))})


@pytest.mark.parametrize(
    ("documents", "index"),
    [
        (["short", "word " * 300, "word " * 400], 1),  # over the limit on its own
        (["short", "word " * 250, "word " * 100], 1),  # only the pair with the query is over
        (["short", "word " * 100], None),  # none found: only the hint is added
    ],
)
def test_context_length_error_names_the_document_and_the_fix(
    documents: list[str], index: int | None, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "rerank", probe=False)
    httpx_mock.add_response(url=f"{BASE}/pooling", json=body("rerank", "pooling"), is_optional=True)
    # The 0.32 server's answer to an over-long pair (the rerank fixture answers /rerank the same way).
    add_at(httpx_mock, "embed", "error_context_length", "/rerank")
    httpx_mock.add_callback(word_tokenizer, url=f"{BASE}/tokenize", is_reusable=True)
    with pytest.raises(vt.ContextLengthExceeded) as info:
        make_client().rerank("query " * 10, documents)
    assert info.value.input_index == index
    assert info.value.max_model_len == 256
    assert "max_tokens_per_doc=N" in str(info.value)
    if index is not None:
        assert str(info.value).count(f"documents[{index}] is too long") == 1


def test_query_too_long_with_max_tokens_per_doc_is_explained(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "rerank", probe=False)
    httpx_mock.add_response(url=f"{BASE}/pooling", json=body("rerank", "pooling"), is_optional=True)
    # What the 0.32 rerank fixture answers for a 300-word query with max_tokens_per_doc=5.
    httpx_mock.add_response(
        url=f"{BASE}/rerank",
        status_code=500,
        json={
            "error": {
                "message": "Truncation error: Sequence to truncate too short to respect the provided "
                "max_length",
                "type": "InternalServerError",
                "param": None,
                "code": 500,
            }
        },
    )
    with pytest.raises(vt.InternalServerError, match="max_tokens_per_query=N"):
        make_client().rerank("x " * 300, DOCS, max_tokens_per_doc=5)


def test_score_falls_back_to_text_1_text_2_when_the_version_is_hidden(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    httpx_mock.add_response(url=f"{BASE}/version", status_code=404, json={"detail": "Not Found"})
    add(httpx_mock, "rerank", "models")
    add(httpx_mock, "rerank", "openapi")
    httpx_mock.add_response(url=f"{BASE}/pooling", json=body("rerank", "pooling"), is_reusable=True)
    # A vLLM < 0.16 server validates only the text_1/text_2 form (constructed: no such server is recorded).
    missing = "{'type': 'missing', 'loc': ('body', 'text_1'), 'msg': 'Field required'}"
    httpx_mock.add_response(
        url=f"{BASE}/score",
        status_code=400,
        json={"error": {"message": f"1 validation error:\n  {missing}", "type": "Bad Request", "code": 400}},
        match_json={"model": "minilm-rerank", "queries": QUERY, "documents": DOCS},
    )
    add(httpx_mock, "rerank", "score", match_json=recorded("rerank", "score")["request"]["json"])
    result = make_client().score(QUERY, DOCS)
    assert result.scores.tolist() == [entry["score"] for entry in body("rerank", "score")["data"]]
    assert [list(r)[1] for r in sent(httpx_mock, "/score")] == ["queries", "text_1"]


def test_show_progress_counts_documents(
    make_client: Any, httpx_mock: HTTPXMock, capsys: pytest.CaptureFixture[str]
) -> None:
    mock_server(httpx_mock, "rerank")
    httpx_mock.add_callback(rerank_callback("rerank"), url=f"{BASE}/rerank", is_reusable=True)
    make_client().rerank(QUERY, DOCS, batch_size=1, show_progress=True)
    assert "3/3" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# Late interaction, recorded from MiniLM served with the token_embed pooling task
# (server-fixtures/record.py late-interaction)
# --------------------------------------------------------------------------------------------------


def test_late_interaction_server_is_told_apart_from_a_bi_encoder(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    # Its /openapi.json lists /v1/embeddings (mounted, but answering 501), exactly like a bi-encoder's:
    # only the /pooling probe's token matrix tells them apart.
    paths = json.loads(recorded("late-interaction", "openapi")["response"]["body_text"])["paths"]
    assert "/v1/embeddings" in paths and "/classify" not in paths
    assert recorded("late-interaction", "error_embeddings")["response"]["status"] == 501
    add(httpx_mock, "late-interaction", "version")
    add(httpx_mock, "late-interaction", "models")
    add(httpx_mock, "late-interaction", "openapi")
    add(httpx_mock, "late-interaction", "pooling_probe")
    add(httpx_mock, "late-interaction", "rerank")
    result = make_client().rerank(QUERY, DOCS)
    assert result.scorer is ScorerKind.LATE_INTERACTION
    assert result.indices == [0, 2, 1]
    assert result.scores[0] > 1.0  # unbounded MaxSim, not a probability or a cosine


def test_maxsim_of_recorded_token_vectors_equals_the_servers_score(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    add(httpx_mock, "late-interaction", "version")
    add(httpx_mock, "late-interaction", "models")
    add(httpx_mock, "late-interaction", "openapi")
    add(httpx_mock, "late-interaction", "pooling")
    query, *docs = make_client().pool([QUERY, *DOCS]).data
    assert query.ndim == 2 and query.shape[1] == 384
    expected = [entry["score"] for entry in body("late-interaction", "score")["data"]]
    assert [vt.maxsim(query, doc) for doc in docs] == pytest.approx(expected, rel=1e-5)


def test_max_model_len_of_the_requested_model_and_of_a_loras_base() -> None:
    info = vt.types.ServerInfo(
        base_url=BASE,
        version="0.32.0",
        models=(
            vt.types.ModelCard(id="base", max_model_len=256),
            vt.types.ModelCard(id="long", max_model_len=8192),
            vt.types.ModelCard(id="lora", parent="base", max_model_len=None),
        ),
        routes=None,
    )
    assert calls.max_model_len(info, "long") == 8192
    assert calls.max_model_len(info, "lora") == 256
    assert calls.max_model_len(info, None) == 256
    assert calls.max_model_len(info, "unknown") is None
    limits = scoring.split_token_limits(
        info, max_tokens_per_doc=1000, max_tokens_per_query=None, fallback="error", model="long"
    )
    assert limits == ({"max_tokens_per_doc": 1000}, {})
    with pytest.raises(vt.InvalidInputError, match=r"max_model_len \(256\)"):
        scoring.split_token_limits(
            info, max_tokens_per_doc=1000, max_tokens_per_query=None, fallback="error", model="lora"
        )


def test_a_413_halves_the_batches_until_they_fit(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "rerank", probe=False)
    # The scorer probe rides along with the first requests; it is asked again when they fail.
    httpx_mock.add_response(url=f"{BASE}/pooling", json=body("rerank", "pooling"), is_reusable=True)
    answer = rerank_callback("rerank")
    lookup = score_lookup("rerank")

    def proxy_limit(request: httpx.Request) -> httpx.Response:
        payload = json.loads(request.content)
        docs = payload["documents"]
        if isinstance(docs, list) and len(docs) > 1:  # a proxy that takes one document per request
            return httpx.Response(413, text="<html><body>413 Request Entity Too Large</body></html>")
        if request.url.path == "/rerank":
            return answer(request)
        single = docs[0] if isinstance(docs, list) else docs
        return httpx.Response(200, json={"data": [{"index": 0, "score": lookup[single]}]})

    httpx_mock.add_callback(proxy_limit, url=f"{BASE}/rerank", is_reusable=True)
    httpx_mock.add_callback(proxy_limit, url=f"{BASE}/score", is_reusable=True)
    client = make_client()
    result = client.rerank(QUERY, DOCS, batch_size=4)
    assert result.indices == [1, 2, 0]
    assert result.num_requests == 3
    assert client.score(QUERY, DOCS).scores.tolist() == [lookup[d] for d in DOCS]


def test_a_413_for_a_single_document_is_raised(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "rerank", probe=False)
    httpx_mock.add_response(
        url=f"{BASE}/pooling", json=body("rerank", "pooling"), is_optional=True, is_reusable=True
    )
    httpx_mock.add_response(url=f"{BASE}/rerank", status_code=413, text="too large", is_reusable=True)
    with pytest.raises(vt.RequestTooLargeError):
        make_client().rerank(QUERY, DOCS)
    sizes = [len(r["documents"]) for r in sent(httpx_mock, "/rerank")]
    assert sizes[0] == 3 and set(sizes[1:]) == {1}


# A real 0.11.0 server answers use_activation=false as if it were unset (issue 14's version matrix).
@pytest.mark.parametrize("call", ["classify", "score", "rerank"])
def test_use_activation_is_refused_before_sending_to_a_0_11_server(
    make_client: Any, httpx_mock: HTTPXMock, call: str
) -> None:
    mock_server(httpx_mock, "rerank", version="0.11.0", probe=False)
    client = make_client()
    method = getattr(client, call)
    args = (DOCS,) if call == "classify" else (QUERY, DOCS)
    with pytest.raises(vt.UnsupportedByServer, match=r"use_activation.*0\.12\.0"):
        method(*args, use_activation=False)
    assert not [r for r in httpx_mock.get_requests() if r.method == "POST"]
