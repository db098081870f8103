"""tokenize() / detokenize() on both clients, replaying exchanges recorded from the real `embed` fixture."""

from __future__ import annotations

import json
from typing import Any

import httpx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import tokenizing

from .recorded import add_recorded, exchange, mock_server


def sent_json(httpx_mock: HTTPXMock, path: str) -> Any:
    return json.loads([r for r in httpx_mock.get_requests() if r.url.path == path][-1].content)


def test_tokenize_sends_the_text_and_reads_the_tokens(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    add_recorded(httpx_mock, "embed", "tokenize_strs")
    result = make_client().tokenize("hello world", return_token_strs=True)
    assert sent_json(httpx_mock, "/tokenize") == {
        "model": "minilm",
        "prompt": "hello world",
        "add_special_tokens": True,
        "return_token_strs": True,
    }
    assert result.tokens.tolist() == [101, 7592, 2088, 102] and result.tokens.dtype == np.int64
    assert result.count == len(result) == 4 and result.max_model_len == 256
    assert result.token_strs == ["[CLS]", "hello", "world", "[SEP]"]


def test_detokenize_takes_tokenizes_array(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    add_recorded(httpx_mock, "embed", "detokenize")
    text = make_client().detokenize(np.array([101, 7592, 2088, 102]), extra_headers={"X-Trace": "1"})
    assert text == "[CLS] hello world [SEP]"
    assert sent_json(httpx_mock, "/detokenize") == exchange("embed", "detokenize")["request"]["json"]
    assert httpx_mock.get_requests()[-1].headers["x-trace"] == "1"


def test_an_unknown_model_is_the_servers_404(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    add_recorded(httpx_mock, "embed", "error_unknown_model_tokenize")
    with pytest.raises(vt.NotFoundError, match="no-such-model"):
        make_client().tokenize("hello", model="no-such-model")


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda c: c.tokenize(["a", "b"]), "text"),
        (lambda c: c.detokenize([]), "tokens"),
        (lambda c: c.detokenize([1, -2]), "tokens[1]"),
        (lambda c: c.detokenize([1, True]), "tokens[1]"),
    ],
)
def test_bad_input_is_refused_before_any_request(
    make_client: Any, httpx_mock: HTTPXMock, call: Any, field: str
) -> None:
    mock_server(httpx_mock, "embed")
    with pytest.raises(vt.InvalidInputError) as caught:
        call(make_client())
    assert caught.value.field == field
    assert not [r for r in httpx_mock.get_requests() if "tokenize" in r.url.path]


@given(
    st.one_of(st.none(), st.integers(), st.text(), st.lists(st.one_of(st.integers(), st.text(), st.none())))
)
def test_a_tokenize_answer_without_integer_tokens_is_unexpected(tokens: Any) -> None:
    response = httpx.Response(200, json={"count": 1, "tokens": tokens})
    if isinstance(tokens, list) and all(type(t) is int and 0 <= t < 2**63 for t in tokens):
        assert tokenizing.parse_tokenize(response).tokens.tolist() == tokens
    else:
        with pytest.raises(vt.UnexpectedResponse, match="tokens"):
            tokenizing.parse_tokenize(response)
