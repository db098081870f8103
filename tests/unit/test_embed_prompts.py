"""embed(prompt=..., prompt_name=...): a prompt put before each text client-side, or the model's own prompt
applied by the server through /v2/embed's input_type (replayed from the real `qwen3-embedding` fixture)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import embeddings

from .recorded import add_recorded, exchange, mock_server

TEXTS = ["hello world", "vLLM serves embeddings"]  # what server-fixtures/record.py sent


def sent(httpx_mock: HTTPXMock, path: str) -> list[dict[str, Any]]:
    return [json.loads(r.content) for r in httpx_mock.get_requests() if r.url.path == path]


def test_a_prompt_goes_before_every_text(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "qwen3-embedding")
    add_recorded(httpx_mock, "qwen3-embedding", "embeddings_float")
    make_client().embed(["a", "b"], prompt="query: ", encoding_format="float")
    assert sent(httpx_mock, "/v1/embeddings")[0]["input"] == ["query: a", "query: b"]


@pytest.mark.parametrize(("name", "dimensions"), [("v2_embed_query", None), ("v2_embed_query_16", 16)])
def test_a_prompt_name_is_the_servers_input_type(
    make_client: Any, httpx_mock: HTTPXMock, name: str, dimensions: int | None
) -> None:
    mock_server(httpx_mock, "qwen3-embedding")
    add_recorded(httpx_mock, "qwen3-embedding", name)
    result = make_client().embed(TEXTS, prompt_name="query", dimensions=dimensions)
    body = sent(httpx_mock, "/v2/embed")[0]
    assert body["input_type"] == "query" and body["texts"] == TEXTS and body["embedding_types"] == ["base64"]
    assert body.get("output_dimension") == dimensions
    assert not sent(httpx_mock, "/v1/embeddings")
    assert result.vectors.dtype == np.float32 and result.vectors.shape == (2, dimensions or 32)
    assert result.model == "qwen3-embedding-tiny" and result.usage.prompt_tokens > 0
    np.testing.assert_allclose(np.linalg.norm(result.vectors, axis=1), 1.0, atol=1e-5)


def test_an_unknown_prompt_name_names_the_models_prompts(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "qwen3-embedding")
    add_recorded(httpx_mock, "qwen3-embedding", "error_v2_embed_unknown_input_type")
    with pytest.raises(vt.BadRequestError) as caught:
        make_client().embed(TEXTS, prompt_name="passage")
    assert caught.value.kind == "input_type_not_supported"
    message = str(caught.value)
    assert (
        "prompt_name='passage' is not one of the model's prompts" in message and "document, query" in message
    )
    assert exchange("qwen3-embedding", "error_v2_embed_unknown_input_type")["response"]["status"] == 400


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"prompt": "q: ", "prompt_name": "query"}, "prompt_name"),
        ({"prompt_name": ""}, "prompt_name"),
        ({"prompt_name": 3}, "prompt_name"),
        ({"prompt": b"q"}, "prompt"),
        ({"prompt_name": "query", "embed_dtype": "float16"}, "embed_dtype"),
        ({"prompt_name": "query", "encoding_format": "bytes"}, "encoding_format"),
        ({"prompt_name": "query", "truncate_prompt_tokens": 10}, "truncate_prompt_tokens"),
        ({"prompt_name": "query", "normalize": False}, "normalize"),
    ],
)
def test_bad_prompt_options_are_refused_before_sending(
    kwargs: dict[str, Any], field: str, make_client: Any
) -> None:
    with pytest.raises(vt.InvalidInputError) as caught:
        make_client().embed(["a"], **kwargs)
    assert caught.value.field == field


@pytest.mark.parametrize("option", ["prompt", "prompt_name"])
def test_prompts_are_for_texts_only(option: str, make_client: Any, httpx_mock: HTTPXMock) -> None:
    with pytest.raises(vt.InvalidInputError, match=f"cannot take {option}") as caught:
        make_client().embed([[1, 2, 3]], **{option: "query"})
    assert caught.value.field == "input[0]"
    assert not httpx_mock.get_requests()  # refused before any request


def test_the_params_object_carries_the_prompts() -> None:
    params = vt.EmbedParams(prompt_name="query", dimensions=16)
    assert params.keywords()["prompt_name"] == "query"
    assert embeddings.with_prompt(["x"], "p ") == ["p x"]
