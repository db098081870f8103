"""vLLM >= 0.33 serves /v1/embeddings of a ``token_embed`` model (ColBERT, BGE-M3 multi-vector) with one
vector per token, ``"float"`` only (0.32: 501). ``embed()`` says so instead of a bare 400 or a decode error.
The answers are built from vLLM 0.33.0's source (``entrypoints/pooling/token_embed/``, its validation handler
``serve/exception_handling/handlers/validation.py``), replayed after the real `late-interaction` fixture's
discovery with its version set to 0.33.0."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt

from .conftest import BASE
from .recorded import mock_server

# the literal error of TokenEmbeddingRequest.encoding_format (Literal["float"]), as the handler words it
BYTES_REFUSED = {
    "error": {
        "message": "1 validation error:\n  {'type': 'literal_error', 'loc': 'body.encoding_format', 'msg': "
        "\"Input should be 'float'\", 'input': 'bytes', 'ctx': {'expected': \"'float'\"}}",
        "type": "Bad Request",
        "param": "body.encoding_format",
        "code": 400,
    }
}
# token_embed/serving.py:28-49: one matrix per input, late_chunking left out when not asked
PER_TOKEN = {
    "id": "embd-1",
    "object": "list",
    "created": 1,
    "model": "minilm-colbert",
    "data": [{"index": 0, "object": "embedding", "embedding": [[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]]}],
    "usage": {"prompt_tokens": 3, "total_tokens": 3, "completion_tokens": 0},
}


def test_the_bytes_transport_refused_means_token_embed_is_active(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "late-interaction", version="0.33.0")
    httpx_mock.add_response(url=f"{BASE}/v1/embeddings", status_code=400, json=BYTES_REFUSED)
    with pytest.raises(vt.EndpointNotServed, match="token_embed") as caught:
        make_client().embed("hello")
    assert (caught.value.task, caught.value.reason, caught.value.status_code) == ("embed", "inactive", 400)
    sent = [json.loads(r.content) for r in httpx_mock.get_requests() if r.url.path == "/v1/embeddings"]
    assert sent[0]["encoding_format"] == "bytes"


def test_another_encoding_format_error_stays_a_bad_request(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "late-interaction", version="0.33.0")
    other = {"error": {**BYTES_REFUSED["error"], "param": "body.dimensions", "message": "dimensions: no"}}
    httpx_mock.add_response(url=f"{BASE}/v1/embeddings", status_code=400, json=other)
    with pytest.raises(vt.BadRequestError) as caught:
        make_client().embed("hello")
    assert not isinstance(caught.value, vt.EndpointNotServed)


def test_the_embed_routes_own_format_error_stays_a_bad_request(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    """An embedding model's route lists every format it takes after 'float': a value it refuses is the
    caller's 400, not a token_embed model (the contract tier sends one through extra_body)."""
    mock_server(httpx_mock, "embed")
    message = (
        "1 validation error:\n  {'type': 'literal_error', 'loc': 'body.encoding_format', 'msg': \"Input "
        "should be 'float', 'base64', 'bytes' or 'bytes_only'\", 'input': 'bad'}"
    )
    refused = {"error": {**BYTES_REFUSED["error"], "message": message}}
    httpx_mock.add_response(url=f"{BASE}/v1/embeddings", status_code=400, json=refused)
    with pytest.raises(vt.BadRequestError) as caught:
        make_client().embed("hello", encoding_format="base64", extra_body={"encoding_format": "bad"})
    assert not isinstance(caught.value, vt.EndpointNotServed)


def test_a_matrix_per_input_is_named_for_what_it_is(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "late-interaction", version="0.33.0")
    httpx_mock.add_response(url=f"{BASE}/v1/embeddings", json=PER_TOKEN)
    with pytest.raises(vt.UnexpectedResponse, match="one matrix per input") as caught:
        make_client().embed("hello", encoding_format="float")
    assert caught.value.kind == "decode" and "pool(task=" in str(caught.value)
