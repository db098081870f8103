"""Issue 11: every response checked, nothing silent.

A proxy's answer is never taken for vLLM's (redirects, 1xx, 204, empty bodies, HTML pages), the raw
formats are read only when requested and only as declared (byte order, shape, exact length), indices,
widths and finiteness are checked, a 200 error object is the server's error, a stream closed before
``[DONE]`` is an error, and malformed bodies raise only ``VLLMTasksError`` subclasses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks.errors import UnexpectedResponse

from .conftest import BASE
from .recorded import mock_server

EMBED = f"{BASE}/v1/embeddings"
TRANSCRIBE = f"{BASE}/v1/audio/transcriptions"
FOX = Path(__file__).resolve().parent.parent / "data" / "audio" / "fox.wav"
VECTORS = np.array([[0.5, -2.0, 3.0, 4.0], [1.0, 2.0, -3.0, 0.25]], dtype=np.float32)
TEXTS = ["first", "second"]
HTML = b"<html><body><h1>Welcome to nginx!</h1><p>It works.</p></body></html>"[:64]


def float_body(vectors: np.ndarray = VECTORS, indices: list[int] | None = None) -> dict[str, Any]:
    indices = list(range(len(vectors))) if indices is None else indices
    pairs = zip(indices, vectors, strict=True)
    data = [{"index": i, "object": "embedding", "embedding": v.tolist()} for i, v in pairs]
    return {
        "object": "list",
        "model": "minilm",
        "data": data,
        "usage": {"prompt_tokens": 2, "total_tokens": 2},
    }


def bytes_metadata(
    vectors: np.ndarray = VECTORS, *, dtype: str = "float32", endianness: str = "native", size: int = 4
) -> str:
    width = vectors.shape[1] * size
    data = [
        {
            "index": i,
            "embed_dtype": dtype,
            "endianness": endianness,
            "start": i * width,
            "end": (i + 1) * width,
            "shape": [vectors.shape[1]],
        }
        for i in range(len(vectors))
    ]
    return json.dumps({"id": "embd-1", "model": "minilm", "data": data, "usage": {"prompt_tokens": 2}})


def octet(content: bytes, metadata: str | None = None) -> dict[str, Any]:
    headers = {"content-type": "application/octet-stream"}
    if metadata is not None:
        headers["metadata"] = metadata
    return {"headers": headers, "content": content}


# ------------------------------------------------------------------ 1. a proxy's answer is not vLLM's


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_a_typed_error_naming_status_url_and_proxy(
    status: int, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(
        url=EMBED, status_code=status, headers={"location": "https://vllm.test/v1/embeddings"}
    )
    with pytest.raises(vt.UnexpectedResponse) as caught:
        make_client().embed(TEXTS, encoding_format="float")
    message = str(caught.value)
    assert f"HTTP {status}" in message and EMBED in message and "https://vllm.test" in message
    assert "proxy or load balancer" in message and caught.value.status_code == status


@pytest.mark.parametrize(
    "response",
    [
        {"status_code": 204},
        {"status_code": 200},
        {"status_code": 200, "headers": {"content-type": "application/json"}},
    ],
)
def test_204_and_empty_200_are_typed_errors(
    response: dict[str, Any], make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(url=EMBED, **response)
    with pytest.raises(vt.UnexpectedResponse, match=r"empty body.*proxy or load balancer"):
        make_client().embed(TEXTS, encoding_format="float")


def test_a_1xx_status_is_a_typed_error() -> None:
    from vllm_tasks.responses import check_status

    with pytest.raises(vt.UnexpectedResponse, match="HTTP 101"):
        check_status(httpx.Response(101, request=httpx.Request("GET", EMBED)), "/v1/embeddings")


@pytest.mark.parametrize("fmt", ["float", "base64", "bytes", "bytes_only", "auto"])
def test_a_200_html_page_is_never_decoded_as_floats(
    fmt: str, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(url=EMBED, headers={"content-type": "text/html"}, content=HTML)
    with pytest.raises(vt.UnexpectedResponse, match=r"text/html.*proxy or load balancer"):
        make_client().embed(TEXTS, encoding_format=fmt)


@pytest.mark.parametrize("fmt", ["float", "base64"])
def test_a_raw_body_is_read_only_when_bytes_was_requested(
    fmt: str, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(url=EMBED, **octet(VECTORS.tobytes(), bytes_metadata()))
    with pytest.raises(vt.UnexpectedResponse, match="application/octet-stream"):
        make_client().embed(TEXTS, encoding_format=fmt)


def test_bytes_without_its_metadata_header_is_refused(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(url=EMBED, **octet(VECTORS.tobytes()))
    with pytest.raises(vt.UnexpectedResponse, match="metadata"):
        make_client().embed(TEXTS, encoding_format="bytes")


@pytest.mark.parametrize("extra", [b"\0\0\0\0", b"\0" * 32])
def test_bytes_body_must_be_exactly_the_length_the_metadata_says(
    extra: bytes, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(url=EMBED, **octet(VECTORS.tobytes() + extra, bytes_metadata()))
    with pytest.raises(UnexpectedResponse, match="cover 32 bytes of a"):
        make_client().embed(TEXTS, encoding_format="bytes")


# ------------------------------------------------------------------ 2. bytes_only with endianness="big"


@pytest.mark.parametrize(("endianness", "order"), [("big", ">"), ("little", "<"), ("native", "<")])
def test_bytes_only_decodes_with_the_requested_byte_order(
    endianness: str, order: str, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(url=EMBED, **octet(VECTORS.astype(f"{order}f4").tobytes()))
    result = make_client().embed(TEXTS, encoding_format="bytes_only", endianness=endianness)
    np.testing.assert_array_equal(result.vectors, VECTORS)


def test_bytes_only_big_endian_float16(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(url=EMBED, **octet(VECTORS.astype(">f2").tobytes()))
    result = make_client().embed(TEXTS, encoding_format="bytes_only", embed_dtype="float16", endianness="big")
    np.testing.assert_array_equal(result.vectors, VECTORS)


# ------------------------------------------------------------------ 3. shapes, indices, widths, finiteness


def test_a_float16_dtype_over_float32_bytes_is_an_error(make_client: Any, httpx_mock: HTTPXMock) -> None:
    # float32 bytes labelled float16 would give 8-wide rows of garbage; the shape says 4.
    mock_server(httpx_mock, "embed")
    wrong = bytes_metadata(dtype="float16", size=4)
    httpx_mock.add_response(url=EMBED, **octet(VECTORS.tobytes(), wrong))
    with pytest.raises(
        UnexpectedResponse, match=r"declares shape \[4\] but its 16 bytes hold 8 float16 values"
    ):
        make_client().embed(TEXTS, encoding_format="bytes", embed_dtype="float16")


@pytest.mark.parametrize("indices", [[0, 0], [0, 5], [1, 1], [-1, 0]])
def test_json_indices_must_be_exactly_0_to_n_minus_1(
    indices: list[int], make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(url=EMBED, json=float_body(indices=indices))
    with pytest.raises(UnexpectedResponse, match=r"indices must be exactly 0\.\.1"):
        make_client().embed(TEXTS, encoding_format="float")


@pytest.mark.parametrize("indices", [[0, 0], [0, 5]])
def test_bytes_indices_must_be_exactly_0_to_n_minus_1(
    indices: list[int], make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")
    meta = json.loads(bytes_metadata())
    for item, index in zip(meta["data"], indices, strict=True):
        item["index"] = index
    httpx_mock.add_response(url=EMBED, **octet(VECTORS.tobytes(), json.dumps(meta)))
    with pytest.raises(UnexpectedResponse, match=r"indices must be exactly 0\.\.1"):
        make_client().embed(TEXTS, encoding_format="bytes")


def test_json_rows_in_any_order_are_placed_by_index(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(url=EMBED, json=float_body(VECTORS[::-1], indices=[1, 0]))
    np.testing.assert_array_equal(make_client().embed(TEXTS, encoding_format="float").vectors, VECTORS)


@pytest.mark.parametrize(
    "rows",
    [[[], []], [[1.0, 2.0], [1.0]], [[1.0, True], [1.0, 2.0]], [[1.0, "2"], [1.0, 2.0]], [[[1.0]], [[2.0]]]],
)
def test_json_rows_must_be_numbers_of_one_width_above_zero(
    rows: list[Any], make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")
    body = float_body()
    for item, row in zip(body["data"], rows, strict=True):
        item["embedding"] = row
    httpx_mock.add_response(url=EMBED, json=body)
    with pytest.raises(UnexpectedResponse):
        make_client().embed(TEXTS, encoding_format="float")


def test_base64_rows_of_different_widths_are_an_error_even_when_the_total_divides() -> None:
    import base64

    from vllm_tasks.decoding import decode_base64_rows

    two = base64.b64encode(np.ones(2, "<f4").tobytes()).decode()
    with pytest.raises(UnexpectedResponse, match="equal vectors"):
        decode_base64_rows([two, ""])  # 2 values over 2 rows used to come back as (2, 1)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_non_finite_values_are_an_error_where_the_dtype_cannot_overflow(
    dtype: str, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")
    vectors = VECTORS.copy()
    vectors[1, 2] = np.nan
    raw = vectors.tobytes() if dtype == "float32" else (vectors.view(np.uint32) >> 16).astype("<u2").tobytes()
    size = 4 if dtype == "float32" else 2
    httpx_mock.add_response(url=EMBED, **octet(raw, bytes_metadata(dtype=dtype, size=size)))
    with pytest.raises(UnexpectedResponse, match=r"non-finite value .* at position 6 of"):
        make_client().embed(TEXTS, encoding_format="bytes", embed_dtype=dtype)


def test_float16_overflow_to_inf_is_kept(make_client: Any, httpx_mock: HTTPXMock) -> None:
    # A float16 cast of a value above 65504 is inf on the server too: not a transport fault.
    mock_server(httpx_mock, "embed")
    vectors = VECTORS.astype(np.float16)
    vectors[0, 0] = np.inf
    httpx_mock.add_response(url=EMBED, **octet(vectors.tobytes(), bytes_metadata(dtype="float16", size=2)))
    result = make_client().embed(TEXTS, encoding_format="bytes", embed_dtype="float16")
    assert np.isinf(result.vectors[0, 0])


def test_json_values_beyond_float32_are_an_error(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    body = float_body()
    body["data"][0]["embedding"][0] = 1e39
    httpx_mock.add_response(url=EMBED, json=body)
    with pytest.raises(UnexpectedResponse, match="non-finite"):
        make_client().embed(TEXTS, encoding_format="float")


VLLM_ERROR = {
    "object": "error",
    "message": "boom: the engine refused",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}
NESTED_ERROR = {"error": {"message": "boom: the engine refused", "type": "InternalServerError", "code": 500}}


@pytest.mark.parametrize(
    ("body", "kind"), [(VLLM_ERROR, vt.BadRequestError), (NESTED_ERROR, vt.InternalServerError)]
)
def test_a_200_error_object_raises_the_server_error(
    body: dict[str, Any], kind: type[Exception], make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(url=EMBED, json=body)
    with pytest.raises(kind, match="boom: the engine refused"):
        make_client().embed(TEXTS, encoding_format="float")


def test_transcribe_raises_the_server_error_of_a_200_error_object(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "stt")
    httpx_mock.add_response(url=TRANSCRIBE, json=VLLM_ERROR)
    with pytest.raises(vt.BadRequestError, match="boom"):
        make_client().transcribe(FOX, prepare="never", chunking="server")


def test_a_stream_closed_before_done_is_an_error(make_client: Any, httpx_mock: HTTPXMock) -> None:
    from .test_transcription import collect

    mock_server(httpx_mock, "stt")
    body = 'data: {"choices":[{"delta":{"content":" The quick"}}]}\n\n'
    httpx_mock.add_response(
        url=TRANSCRIBE, headers={"content-type": "text/event-stream"}, content=body.encode()
    )
    client = make_client()
    with pytest.raises(vt.StreamError, match=r"before \[DONE\].*truncated"):
        collect(client, client.transcribe_stream(FOX, prepare="never", chunking="server"))


def test_a_stream_that_is_an_html_page_is_an_error(make_client: Any, httpx_mock: HTTPXMock) -> None:
    from .test_transcription import collect

    mock_server(httpx_mock, "stt")
    httpx_mock.add_response(url=TRANSCRIBE, headers={"content-type": "text/html"}, content=HTML)
    client = make_client()
    with pytest.raises(vt.StreamError, match="proxy or load balancer"):
        collect(client, client.transcribe_stream(FOX, prepare="never", chunking="server"))


# ------------------------------------------------------------------ 4. only typed errors for malformed bodies


@pytest.mark.parametrize(
    "response",
    [
        {"content": b"\xff\xfe{not utf-8", "headers": {"content-type": "application/json"}},
        {"json": {"data": [{"index": 0}, {"index": 1}]}},
        {"json": {"data": [{"index": "0", "embedding": [1.0]}, {"index": 1, "embedding": [1.0]}]}},
        {"json": {"data": "nope"}},
        {"json": {"data": [1, 2]}},
        {"json": [1, 2]},
        {"json": {"data": [{"index": 0, "embedding": "%%%"}, {"index": 1, "embedding": "%%%"}]}},
        {"json": {**float_body(), "usage": {"prompt_tokens": "many"}}},
        {"json": {**float_body(), "usage": [1]}},
    ],
)
def test_embed_raises_only_typed_errors_on_malformed_bodies(
    response: dict[str, Any], make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(url=EMBED, **response)
    with pytest.raises(vt.APIError):
        make_client().embed(TEXTS, encoding_format="float")


@pytest.mark.parametrize(
    "body",
    [
        {"embeddings": {"float": [[1.0, 2.0]]}},  # one row for two inputs
        {"embeddings": {"float": [[1.0, 2.0], [1.0]]}},
        {"embeddings": {"float": [1.0, 2.0]}},  # flat: used to become (2, 1)
        {"embeddings": {"float": [[1.0, 2.0], [3.0, 4.0]]}, "meta": "x"},
        {"embeddings": {"float": [[1.0, 2.0], [3.0, 4.0]]}, "texts": "ab"},
        {"embeddings": "x"},
        {"embeddings": {"ubinary": [[300], [1]]}},
    ],
)
def test_embed_v2_raises_only_typed_errors_on_malformed_bodies(
    body: dict[str, Any], make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(url=f"{BASE}/v2/embed", json=body)
    types = ["ubinary"] if "ubinary" in str(body) else ["float"]
    with pytest.raises(vt.APIError):
        make_client().embed_v2(texts=TEXTS, embedding_types=types)


@pytest.mark.parametrize(
    "body",
    [
        {"results": [{"index": 0}, {"index": 1}, {"index": 2}]},
        {"results": [{"index": 0, "relevance_score": "high"}] * 3},
        {"results": [{"index": 0, "relevance_score": 0.5}] * 3},  # duplicate index
        {
            "results": [
                {"index": 7, "relevance_score": 0.5},
                {"index": 1, "relevance_score": 0.1},
                {"index": 2, "relevance_score": 0.2},
            ]
        },
        {"results": [{"index": 0, "relevance_score": 0.5}]},  # two documents missing
    ],
)
def test_rerank_raises_only_typed_errors_on_malformed_bodies(
    body: dict[str, Any], make_client: Any, httpx_mock: HTTPXMock
) -> None:
    from .test_scoring import mock_server as scoring_server

    scoring_server(httpx_mock, "rerank")
    httpx_mock.add_response(url=f"{BASE}/rerank", json=body)
    with pytest.raises(vt.UnexpectedResponse):
        make_client().rerank("q", ["a", "b", "c"])


@pytest.mark.parametrize(
    "body",
    [
        {"data": [{"index": 0}, {"index": 1}]},
        {"data": [{"index": 0, "score": None}, {"index": 1, "score": 0.1}]},
        {"data": [{"index": 0, "score": 0.3}, {"index": 0, "score": 0.1}]},
    ],
)
def test_score_raises_only_typed_errors_on_malformed_bodies(
    body: dict[str, Any], make_client: Any, httpx_mock: HTTPXMock
) -> None:
    from .test_scoring import mock_server as scoring_server

    scoring_server(httpx_mock, "rerank")
    httpx_mock.add_response(url=f"{BASE}/score", json=body)
    with pytest.raises(vt.UnexpectedResponse):
        make_client().score("q", ["a", "b"])


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        (
            "classify",
            "/classify",
            {"data": [{"index": 0, "probs": [0.1]}, {"index": 1, "probs": [0.1, 0.2]}]},
        ),
        ("classify", "/classify", {"data": [{"index": 0, "probs": "x"}, {"index": 1, "probs": [0.1]}]}),
        (
            "classify",
            "/classify",
            {"data": [{"index": 0, "probs": [0.1], "label": 3}, {"index": 1, "probs": [0.1]}]},
        ),
        ("pool", "/pooling", {"data": [{"index": 0, "data": [0.1, 0.2]}, {"index": 1, "data": [0.1]}]}),
        ("pool", "/pooling", {"data": [{"index": 0, "data": None}, {"index": 1, "data": [0.1]}]}),
    ],
)
def test_classify_and_pool_raise_only_typed_errors(
    method: str, path: str, body: dict[str, Any], make_client: Any, httpx_mock: HTTPXMock
) -> None:
    from .test_scoring import mock_server as scoring_server

    scoring_server(httpx_mock, "rerank", probe=False)
    httpx_mock.add_response(url=f"{BASE}{path}", json=body)
    with pytest.raises(vt.APIError):
        getattr(make_client(), method)(["a", "b"])


@pytest.mark.parametrize(
    "body",
    [
        {"text": 5},
        {"text": "ok", "segments": 3},
        {"text": "ok", "segments": [{"start": "zero", "end": 1, "text": "x"}]},
        {"text": "ok", "usage": {"seconds": "long"}},
        {"text": "ok", "duration": "long"},
        [1, 2],
    ],
)
def test_transcribe_raises_only_typed_errors(body: Any, make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "stt")
    httpx_mock.add_response(url=TRANSCRIBE, json=body)
    with pytest.raises(vt.UnexpectedResponse):
        make_client().transcribe(FOX, prepare="never", chunking="server", response_format="verbose_json")


def test_parse_body_raises_a_typed_error_not_a_bare_value_error() -> None:
    from vllm_tasks.transcription import parse_body

    with pytest.raises(vt.UnexpectedResponse):
        parse_body({"no": "text"}, task="transcribe", model=None, response_format="json")
    with pytest.raises(vt.BadRequestError, match="boom"):
        parse_body(VLLM_ERROR, task="transcribe", model=None, response_format="json")


@pytest.mark.parametrize(
    "frames",
    [
        ['data: {"choices": [{"delta": {"content": 5}}]}', ""],
        ['data: {"choices": {"delta": {}}}', ""],
        ['data: {"choices": [{"delta": null}]}', ""],
        ['data: {"usage": {"total_tokens": "x"}}', ""],
        ["data: [1, 2]", ""],
        ['data: {"type": "transcript.text.delta", "delta": 3}', ""],
    ],
)
def test_stream_frames_of_the_wrong_shape_are_stream_errors(frames: list[str]) -> None:
    from vllm_tasks.transcription import StreamParser

    with pytest.raises(vt.StreamError):
        StreamParser().feed_all(frames)


@pytest.mark.parametrize(
    "body",
    [
        {"choices": []},
        {"choices": [{"message": {"role": "assistant"}}]},  # no content key
        {"choices": [{"message": {"content": 5}}]},
        {"choices": [{"message": {"content": "x"}, "finish_reason": 1}]},
        {"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": "x"}},
    ],
)
def test_ocr_raises_only_typed_errors(body: dict[str, Any], make_client: Any, httpx_mock: HTTPXMock) -> None:
    from .test_ocr import add, mock_discovery, recorded_image

    mock_discovery(httpx_mock)
    add(httpx_mock, "ocr", "chat_ngram_check_400")
    httpx_mock.add_response(url=f"{BASE}/v1/chat/completions", json=body)
    with pytest.raises(vt.UnexpectedResponse):
        make_client().ocr(recorded_image())


def test_ocr_200_error_object_is_the_server_error(make_client: Any, httpx_mock: HTTPXMock) -> None:
    from .test_ocr import add, mock_discovery, recorded_image

    mock_discovery(httpx_mock)
    add(httpx_mock, "ocr", "chat_ngram_check_400")
    httpx_mock.add_response(url=f"{BASE}/v1/chat/completions", json=VLLM_ERROR)
    with pytest.raises(vt.BadRequestError, match="boom"):
        make_client().ocr(recorded_image())


# ------------------------------------------------------------------ discovery


@pytest.mark.parametrize(
    "response",
    [
        {"status_code": 302, "headers": {"location": "/login"}},
        {"status_code": 200, "headers": {"content-type": "text/html"}, "content": HTML},
        {"status_code": 200, "json": {"data": [{"id": 5}]}},
        {"status_code": 200, "json": {"data": [{"id": "m", "max_model_len": "long"}]}},
        {"status_code": 200, "json": {"data": "m"}},
    ],
)
def test_a_model_list_that_is_not_vllms_is_a_typed_error(
    response: dict[str, Any], make_client: Any, httpx_mock: HTTPXMock
) -> None:
    httpx_mock.add_response(url=f"{BASE}/version", json={"version": "0.32.0"})
    httpx_mock.add_response(url=f"{BASE}/openapi.json", json={"paths": {}})
    httpx_mock.add_response(url=f"{BASE}/v1/models", **response)
    with pytest.raises(vt.UnexpectedResponse):
        make_client().server_info()


def test_unexpected_response_pickles() -> None:
    import pickle

    error = vt.UnexpectedResponse("x: y", status_code=301, content_type="text/html", method="POST", url=EMBED)
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is vt.UnexpectedResponse and str(back) == "x: y"
    assert (back.status_code, back.content_type, back.url) == (301, "text/html", EMBED)
