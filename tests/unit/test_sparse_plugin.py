"""``embed_sparse`` on BGE-M3 served with vLLM's sparse IO-processor plugin: ``/pooling`` ``task=plugin``
answers ``{"sparse_embedding": [{"token_id", "weight", "token"}]}`` (tests/data/vllm-source/: made from the
plugin's source, not from a live server), and a server without the plugin is told apart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import sparse

from .conftest import BASE
from .recorded import add_recorded, exchange, mock_server

PLUGIN = json.loads(
    (Path(__file__).parents[1] / "data" / "vllm-source" / "bge_m3_sparse_plugin.json").read_text()
)
TEXTS = PLUGIN["request"]["json"]["data"]["input"]  # "hello world hello", "world hello world"
# vLLM 0.33.0 entrypoints/pooling/pooling/serving.py:84-96: the task is supported but not active; no plugin.
NOT_ACTIVE = (
    "Try switching the model's pooling_task via --pooler-config.task token_classify. (parameter=task)"
)
NO_PLUGIN = (
    "No IOProcessor plugin installed. Please refer to the documentation and to the "
    "'prithvi_geospatial_mae_io_processor' offline inference example for more details. (parameter=task)"
)


def refusal(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "BadRequestError", "param": "task", "code": 400}}


def sent(httpx_mock: HTTPXMock, path: str) -> list[dict[str, Any]]:
    return [json.loads(r.content) for r in httpx_mock.get_requests() if r.url.path == path]


def plugin_server(httpx_mock: HTTPXMock) -> None:
    """The `bge-m3` fixture's discovery with the plugin's server behind /pooling: /v1/embeddings 501, the
    token_classify task refused (embed&token_classify is active), the plugin request answered."""
    mock_server(httpx_mock, "bge-m3")
    add_recorded(httpx_mock, "bge-m3", "error_embeddings")
    add_recorded(httpx_mock, "bge-m3", "tokenize", reusable=True)
    httpx_mock.add_response(
        url=f"{BASE}/pooling", status_code=400, json=refusal(NOT_ACTIVE), match_json=token_classify_body()
    )
    httpx_mock.add_response(
        url=f"{BASE}/pooling",
        status_code=200,
        content=PLUGIN["response"]["body_text"].encode(),
        headers={"content-type": "application/json"},
        match_json=PLUGIN["request"]["json"],
        is_reusable=True,
    )


def token_classify_body() -> dict[str, Any]:
    ids = json.loads(exchange("bge-m3", "tokenize")["response"]["body_text"])["tokens"]
    return {"model": "bge-m3-tiny", "input": [ids, ids], "task": "token_classify"}


def test_the_plugins_answer_becomes_sparse_vectors(make_client: Any, httpx_mock: HTTPXMock) -> None:
    plugin_server(httpx_mock)
    client = make_client()
    result = client.embed_sparse(TEXTS, return_tokens=True)
    hello, world = result  # "hello world hello", "world hello world": same ids, other weights
    assert hello.indices.tolist() == world.indices.tolist() == [2092, 7596]
    assert hello.tokens == world.tokens == ("world", "hello")
    assert not np.allclose(hello.values, world.values)
    # the first text's weights are the real bge-m3 fixture's (/pooling token_classify, vLLM 0.32.0): the
    # largest of the two "hello" weights, and "world"'s
    real = json.loads(exchange("bge-m3", "pooling_token_classify")["response"]["body_text"])["data"][0][
        "data"
    ]
    np.testing.assert_allclose(hello.values, [real[1], max(real[0], real[2])], rtol=1e-6)
    assert result.usage.prompt_tokens == 10 and result.dimension is None
    again = client.embed_sparse(TEXTS, top_k=1)  # learned: straight to the plugin
    assert [v.indices.tolist() for v in again] == [[7596], [7596]] and again[0].tokens is None
    assert len(sent(httpx_mock, "/v1/embeddings")) == 1 and len(sent(httpx_mock, "/tokenize")) == 2
    assert sent(httpx_mock, "/pooling")[1:] == [PLUGIN["request"]["json"]] * 2


def test_the_plugin_path_refuses_what_its_server_cannot_do(make_client: Any, httpx_mock: HTTPXMock) -> None:
    plugin_server(httpx_mock)
    client = make_client()
    client.embed_sparse(TEXTS)
    with pytest.raises(vt.InvalidInputError) as caught:
        client.embed_sparse(TEXTS, add_special_tokens=False)
    assert caught.value.field == "add_special_tokens"


def test_a_model_without_the_plugin_is_not_sparse(make_client: Any, httpx_mock: HTTPXMock) -> None:
    """token_classify refused, then the plugin request refused: not sparse, remembered."""
    mock_server(httpx_mock, "bge-m3")
    add_recorded(httpx_mock, "bge-m3", "error_embeddings")
    add_recorded(httpx_mock, "bge-m3", "tokenize", reusable=True)
    httpx_mock.add_response(url=f"{BASE}/pooling", status_code=400, json=refusal(NOT_ACTIVE))
    httpx_mock.add_response(url=f"{BASE}/pooling", status_code=400, json=refusal(NO_PLUGIN))
    client = make_client()
    with pytest.raises(vt.UnsupportedByServer, match="io-processor-plugin") as caught:
        client.embed_sparse("hello world hello")
    assert "task=token_classify" in str(caught.value)
    with pytest.raises(vt.UnsupportedByServer):
        client.embed_sparse("hello world hello")  # known: refused before sending
    assert len(sent(httpx_mock, "/pooling")) == 2


def plugin_body(items: list[Any]) -> httpx.Response:
    return httpx.Response(
        200, json={"request_id": "r", "data": {"data": items, "usage": {"prompt_tokens": 3}}}
    )


entries = st.lists(
    st.fixed_dictionaries(
        {
            "token_id": st.integers(0, 40),
            "weight": st.floats(-2, 10, allow_nan=False, width=32),
            "token": st.sampled_from(["a", "b", "<s>", "</s>", "[CLS]", "cat"]),
        }
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(entries)
def test_plugin_entries_reduce_to_their_largest_positive_non_special_weight(
    items: list[dict[str, Any]],
) -> None:
    vectors, usage = sparse.parse_plugin(plugin_body([{"index": 0, "sparse_embedding": items}]), 1)
    expected: dict[int, float] = {}
    for entry in items:
        if entry["weight"] > 0 and entry["token"] not in sparse.SPECIAL_TOKENS:
            expected[entry["token_id"]] = max(expected.get(entry["token_id"], 0.0), entry["weight"])
    assert vectors[0].indices.tolist() == sorted(expected)
    np.testing.assert_array_equal(
        vectors[0].values, np.array([expected[i] for i in sorted(expected)], np.float32)
    )
    assert usage.prompt_tokens == 3


hostile = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        hostile,
        st.fixed_dictionaries({"data": st.fixed_dictionaries({"data": st.lists(hostile, max_size=2)})}),
        st.fixed_dictionaries(
            {"data": st.fixed_dictionaries({"data": st.just([{"index": 0, "sparse_embedding": [{}]}])})}
        ),
        st.builds(
            lambda entry: {"data": {"data": [{"index": 0, "sparse_embedding": [entry]}]}},
            st.fixed_dictionaries({"token_id": hostile, "weight": hostile, "token": hostile}),
        ),
    )
)
def test_any_other_answer_is_an_unexpected_response(body: Any) -> None:
    try:
        vectors, _ = sparse.parse_plugin(httpx.Response(200, json=body), 1)
    except vt.UnexpectedResponse as error:
        assert error.kind in ("decode", "response")  # the shape, or not a JSON object at all
    else:
        assert len(vectors) == 1
