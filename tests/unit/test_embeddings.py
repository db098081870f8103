"""embed() and embed_v2() on both clients, replaying responses recorded from the real CPU fixtures."""

from __future__ import annotations

import json
from typing import Any

import httpx
import numpy as np
import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt

from .conftest import BASE
from .recorded import add_recorded, mock_server, recorded_json

EMBED = f"{BASE}/v1/embeddings"


def float_reference() -> np.ndarray:
    body = recorded_json("embed", "embeddings_float")
    return np.array([item["embedding"] for item in body["data"]], dtype=np.float32)


def sent_bodies(httpx_mock: HTTPXMock, path: str = "/v1/embeddings") -> list[dict[str, Any]]:
    return [json.loads(r.content) for r in httpx_mock.get_requests() if r.url.path == path]


TRANSPORTS = [
    ("embeddings_float", "float", None, None, 1e-7),
    ("embeddings_base64", "base64", None, None, 1e-7),
    ("embeddings_base64_float16_big", "base64", "float16", "big", 2e-3),
    ("embeddings_bytes_float32", "bytes", "float32", None, 1e-7),
    ("embeddings_bytes_float32_big", "bytes", "float32", "big", 1e-7),
    ("embeddings_bytes_float16", "bytes", "float16", None, 2e-3),
    ("embeddings_bytes_float16_little", "bytes", "float16", "little", 2e-3),
    ("embeddings_bytes_bfloat16", "bytes", "bfloat16", None, 1e-2),
    ("embeddings_bytes_fp8_e4m3", "bytes", "fp8_e4m3", None, 2e-2),
    ("embeddings_bytes_fp8_e5m2", "bytes", "fp8_e5m2", None, 4e-2),
    ("embeddings_bytes_only", "bytes_only", "float32", None, 1e-7),
]


@pytest.mark.parametrize(("name", "fmt", "dtype", "endianness", "tolerance"), TRANSPORTS)
def test_every_recorded_transport_decodes_to_the_float_answer(
    name: str,
    fmt: str,
    dtype: str | None,
    endianness: str | None,
    tolerance: float,
    make_client: Any,
    httpx_mock: HTTPXMock,
) -> None:
    mock_server(httpx_mock, "embed")
    add_recorded(httpx_mock, "embed", name)
    result = make_client().embed(
        ["hello world", "vLLM serves embeddings"],
        encoding_format=fmt,
        embed_dtype=dtype,
        endianness=endianness,
    )
    assert result.vectors.dtype == np.float32
    assert result.vectors.shape == (2, 384)
    assert np.abs(result.vectors - float_reference()).max() <= tolerance * 8  # fp8: few ulps of 0.16
    assert result.model == "minilm"
    body = sent_bodies(httpx_mock)[0]
    assert body["encoding_format"] == fmt
    assert body.get("embed_dtype") == dtype


def test_auto_picks_bytes_on_a_current_server(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    add_recorded(httpx_mock, "embed", "embeddings_bytes_float32")
    result = make_client().embed(["hello world", "vLLM serves embeddings"])
    assert result.encoding_format == "bytes"
    assert result.usage.prompt_tokens == 14
    np.testing.assert_allclose(result.vectors, float_reference(), atol=1e-7)
    assert "embed_dtype" not in sent_bodies(httpx_mock)[0]


@pytest.mark.parametrize("version", ["0.11.0", "0.10.1", None])
def test_auto_falls_back_to_base64(version: str | None, make_client: Any, httpx_mock: HTTPXMock) -> None:
    if version is None:
        httpx_mock.add_response(url=f"{BASE}/version", status_code=404, json={"detail": "Not Found"})
        add_recorded(httpx_mock, "embed", "models")
        add_recorded(httpx_mock, "embed", "openapi")
    else:
        mock_server(httpx_mock, "embed", version=version)
    add_recorded(httpx_mock, "embed", "embeddings_base64")
    result = make_client().embed(["hello world", "vLLM serves embeddings"])
    assert result.encoding_format == "base64"
    assert sent_bodies(httpx_mock)[0]["encoding_format"] == "base64"


def test_single_string_gives_one_vector(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    add_recorded(httpx_mock, "embed", "embeddings_float_single")
    result = make_client().embed("hello world", encoding_format="float")
    assert result.vectors.shape == (1, 384)
    assert result.vector.shape == (384,)
    np.testing.assert_allclose(result.vector, float_reference()[0], atol=1e-7)
    assert sent_bodies(httpx_mock)[0]["input"] == ["hello world"]


def fake_embeddings(request: httpx.Request) -> httpx.Response:
    """A server that embeds text i as [len(text), first char code] (floats, any order of data)."""
    body = json.loads(request.content)
    data = [
        {"index": i, "object": "embedding", "embedding": [float(len(t)), float(ord(t[0]))]}
        for i, t in enumerate(body["input"])
    ]
    return httpx.Response(
        200,
        json={
            "object": "list",
            "model": "minilm",
            "data": data[::-1],
            "usage": {"prompt_tokens": len(data), "total_tokens": len(data)},
        },
    )


def test_long_lists_are_batched_and_merged_in_order(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_callback(fake_embeddings, url=EMBED, is_reusable=True)
    texts = [chr(ord("a") + i % 26) * (i + 1) for i in range(23)]
    result = make_client().embed(texts, encoding_format="float", batch_size=5, concurrency=3)
    # Three batches are in flight at once (threads for Client), so the order they are sent in is not
    # fixed: a full local run once saw [5, 5, 5, 3, 5]. Put back in input order: 5, 5, 5, 5, 3 and the input.
    batches = sorted((b["input"] for b in sent_bodies(httpx_mock)), key=lambda batch: texts.index(batch[0]))
    assert [len(batch) for batch in batches] == [5, 5, 5, 5, 3]
    assert [text for batch in batches for text in batch] == texts
    np.testing.assert_array_equal(result.vectors[:, 0], [len(t) for t in texts])
    np.testing.assert_array_equal(result.vectors[:, 1], [ord(t[0]) for t in texts])
    assert result.usage.prompt_tokens == 23


def test_progress_bar_counts_every_input(
    make_client: Any, httpx_mock: HTTPXMock, capsys: pytest.CaptureFixture[str]
) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_callback(fake_embeddings, url=EMBED, is_reusable=True)
    make_client().embed(["x"] * 10, encoding_format="float", batch_size=3, show_progress=True)
    assert "10/10" in capsys.readouterr().err


def test_token_id_inputs(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(
        url=EMBED, json={"model": "minilm", "data": [{"index": 0, "embedding": [1.0, 2.0]}]}
    )
    httpx_mock.add_response(
        url=EMBED,
        json={
            "model": "minilm",
            "data": [{"index": 0, "embedding": [1.0, 0.0]}, {"index": 1, "embedding": [2.0, 0.0]}],
        },
    )
    client = make_client()
    assert client.embed([101, 7592, 102], encoding_format="float").vectors.shape == (1, 2)
    assert client.embed([[101, 102], [101, 7592, 102]], encoding_format="float").vectors.shape == (2, 2)
    bodies = sent_bodies(httpx_mock)
    assert bodies[0]["input"] == [[101, 7592, 102]]
    assert bodies[1]["input"] == [[101, 102], [101, 7592, 102]]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"input": []}, "input"),
        ({"input": ["a", 3]}, "input[1]"),
        ({"input": b"bytes"}, "input"),
        ({"input": [[1, 2], []]}, "input[1]"),
        ({"input": [[1, 2], [3, -4]]}, "input[1][1]"),
        ({"input": [101, -1]}, "input[1]"),
        ({"input": None}, "input"),
        ({"input": "a", "batch_size": 0}, "batch_size"),
        ({"input": "a", "concurrency": -2}, "concurrency"),
        ({"input": "a", "dimensions": 0}, "dimensions"),
        ({"input": "a", "embed_dtype": "int8"}, "embed_dtype"),
        ({"input": "a", "normalize": True, "use_activation": True}, "normalize"),
        ({"messages": [{"content": "no role"}]}, "messages[0][0]"),
    ],
)
def test_bad_input_is_refused_before_any_request(
    kwargs: dict[str, Any], field: str, make_client: Any
) -> None:
    with pytest.raises(vt.InvalidInputError) as info:
        make_client().embed(**kwargs)
    assert info.value.field == field


@pytest.mark.parametrize(
    ("version", "kwargs", "feature", "needed"),
    [
        ("0.11.0", {"embed_dtype": "float16"}, "embed_dtype", "0.11.1"),
        ("0.11.0", {"endianness": "big"}, "endianness", "0.11.1"),
        ("0.11.0", {"encoding_format": "bytes"}, "encoding_format_bytes", "0.11.1"),
        ("0.12.0", {"encoding_format": "bytes_only"}, "encoding_format_bytes_only", "0.13.0"),
        ("0.17.0", {"truncation_side": "left"}, "truncation_side", "0.18.0"),
    ],
)
def test_gated_fields_raise_before_sending(
    version: str, kwargs: dict[str, Any], feature: str, needed: str, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed", version=version)
    with pytest.raises(vt.UnsupportedByServer) as info:
        make_client().embed("hello", **kwargs)
    assert (info.value.feature, info.value.required_version, info.value.server_version) == (
        feature,
        needed,
        version,
    )
    assert sent_bodies(httpx_mock) == []


@pytest.mark.parametrize(
    ("version", "field"),
    [("0.16.0", "normalize"), ("0.20.0", "use_activation"), ("0.32.0", "use_activation")],
)
def test_normalize_is_sent_as_the_field_the_server_reads(
    version: str, field: str, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed", version=version)
    httpx_mock.add_callback(fake_embeddings, url=EMBED)
    make_client().embed("hello", normalize=False, encoding_format="float")
    body = sent_bodies(httpx_mock)[0]
    assert body[field] is False
    assert {"normalize", "use_activation"} - {field} & body.keys() == set()


def test_use_activation_is_refused_before_sending_to_a_0_11_server(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed", version="0.11.0")
    with pytest.raises(vt.UnsupportedByServer, match=r"use_activation.*0\.12\.0"):
        make_client().embed("hello", use_activation=False)
    assert sent_bodies(httpx_mock) == []


def test_dimensions_on_a_non_matryoshka_model(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    add_recorded(httpx_mock, "embed", "error_dimensions_not_matryoshka")
    with pytest.raises(vt.BadRequestError) as info:
        make_client().embed(["hello world", "vLLM serves embeddings"], dimensions=128)
    assert "is_matryoshka" in str(info.value) and "does not support Matryoshka" in str(info.value)


@pytest.mark.parametrize("name", ["error_dimensions_100", "error_dimensions_512"])
def test_unsupported_matryoshka_dimension(name: str, make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed-mrl")
    add_recorded(httpx_mock, "embed-mrl", name)
    with pytest.raises(vt.BadRequestError):
        make_client().embed(["hello world", "vLLM serves embeddings"], dimensions=int(name.rsplit("_", 1)[1]))


def test_matryoshka_dimensions_slice(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed-mrl")
    add_recorded(httpx_mock, "embed-mrl", "embeddings_dimensions_128")
    result = make_client().embed(
        ["hello world", "vLLM serves embeddings"], dimensions=128, encoding_format="float"
    )
    assert result.vectors.shape == (2, 128)
    np.testing.assert_allclose(np.linalg.norm(result.vectors, axis=1), 1.0, atol=1e-5)


def test_old_server_ignoring_dimensions_is_caught(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed", version="0.23.0")
    add_recorded(httpx_mock, "embed", "embeddings_float")
    with pytest.raises(vt.UnexpectedResponse, match="dimensions=512"):
        make_client().embed(
            ["hello world", "vLLM serves embeddings"], dimensions=512, encoding_format="float"
        )


def test_context_length_names_the_input(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    add_recorded(httpx_mock, "embed", "error_context_length")

    def tokenize(request: httpx.Request) -> httpx.Response:
        prompt = json.loads(request.content)["prompt"]
        return httpx.Response(
            200, json={"count": len(prompt.split()) + 2, "max_model_len": 256, "tokens": []}
        )

    httpx_mock.add_callback(tokenize, url=f"{BASE}/tokenize", is_reusable=True)
    texts = ["short", "also short", "token " * 300, "fine"]
    with pytest.raises(vt.ContextLengthExceeded) as info:
        make_client().embed(texts, encoding_format="float")
    assert info.value.input_index == 2
    assert info.value.max_model_len == 256
    assert "input[2]" in str(info.value)


def test_context_length_survives_a_tokenize_that_drops_the_connection(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    """vLLM 0.19.1's /tokenize resets the connection for a text over max_model_len (a real server)."""
    mock_server(httpx_mock, "embed")
    add_recorded(httpx_mock, "embed", "error_context_length")
    httpx_mock.add_exception(httpx.ReadError("Connection reset by peer"), url=f"{BASE}/tokenize")
    with pytest.raises(vt.ContextLengthExceeded) as info:
        make_client().embed(["token " * 300], encoding_format="float")
    assert info.value.max_model_len == 256 and info.value.input_index is None
    assert [r.url.path for r in httpx_mock.get_requests()].count("/tokenize") == 1  # not retried


def test_context_length_with_token_ids_needs_no_tokenize(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    add_recorded(httpx_mock, "embed", "error_context_length")
    with pytest.raises(vt.ContextLengthExceeded) as info:
        make_client().embed([[1] * 10, [1] * 300], encoding_format="float")
    assert info.value.input_index == 1


def test_embeddings_on_a_cross_encoder_says_what_to_start(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "rerank")
    add_recorded(httpx_mock, "rerank", "error_embeddings_on_cross_encoder")
    with pytest.raises(vt.EndpointNotServed) as info:
        make_client().embed(["hello world", "vLLM serves embeddings"])
    assert info.value.task == "embed"
    assert "--runner pooling" in str(info.value)


def test_unknown_model(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    add_recorded(httpx_mock, "embed", "error_unknown_model")
    with pytest.raises(vt.NotFoundError, match="no-such-model"):
        make_client().embed(["hello"], model="no-such-model")


def test_chat_messages_with_image_parts(make_client: Any, httpx_mock: HTTPXMock) -> None:
    from PIL import Image

    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(url=EMBED, json={"model": "m", "data": [{"index": 0, "embedding": [1.0]}]})
    image = Image.new("RGB", (4, 4), "red")
    conversation = [
        {"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": "a"}]}
    ]
    result = make_client().embed(messages=conversation, encoding_format="float")
    assert result.vectors.shape == (1, 1)
    sent = sent_bodies(httpx_mock)[0]["messages"]
    assert sent[0]["content"][0]["type"] == "image_url"
    assert sent[0]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")


def test_batched_conversations_go_one_per_request_on_old_servers(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed", version="0.24.0")
    httpx_mock.add_response(
        url=EMBED, json={"model": "m", "data": [{"index": 0, "embedding": [1.0]}]}, is_reusable=True
    )
    conversations = [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]]
    result = make_client().embed(messages=conversations, encoding_format="float")
    assert result.vectors.shape == (2, 1)
    sent_conversations = [b["messages"] for b in sent_bodies(httpx_mock)]
    assert sorted(sent_conversations, key=str) == conversations  # concurrent: any order


# ----------------------------------------------------------------------------------- /v2/embed


def test_v2_all_types_are_consistent(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    add_recorded(httpx_mock, "embed", "v2_embed_all_types")
    result = make_client().embed_v2(
        texts=["hello world"], embedding_types=["float", "binary", "ubinary", "base64"]
    )
    assert result.float is not None and result.float.shape == (1, 384)
    assert result.base64 is not None
    np.testing.assert_allclose(result.base64, result.float, atol=1e-7)
    sign_bits = (result.float >= 0).astype(np.uint8)
    np.testing.assert_array_equal(vt.unpackbits(result.ubinary), sign_bits)
    np.testing.assert_array_equal(vt.unpackbits(result.binary), sign_bits)
    assert result.binary.dtype == np.int8 and result.ubinary.dtype == np.uint8
    assert result.texts == ["hello world"]
    assert result.billed_units["input_tokens"] > 0


@pytest.mark.parametrize("kind", ["int8", "uint8", "float16"])
def test_v2_types_vllm_rejects_are_refused_client_side(kind: str, make_client: Any) -> None:
    with pytest.raises(vt.InvalidInputError, match="float, binary, ubinary, base64"):
        make_client().embed_v2(texts=["a"], embedding_types=[kind])


def test_v2_input_type_without_instructions(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    add_recorded(httpx_mock, "embed", "error_v2_embed_input_type")
    with pytest.raises(vt.BadRequestError, match="does not define any input_type"):
        make_client().embed_v2(texts=["hello world", "vLLM serves embeddings"], input_type="search_query")


def test_v2_needs_vllm_0_18(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed", version="0.17.1")
    with pytest.raises(vt.UnsupportedByServer, match=r"0\.18\.0"):
        make_client().embed_v2(texts=["a"])


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"texts": ["a"], "images": ["b"]}, {"texts": []}, {"texts": "abc"}, {"texts": ["a", 1]}],
)
def test_v2_needs_exactly_one_input_kind(kwargs: dict[str, Any], make_client: Any) -> None:
    with pytest.raises(vt.InvalidInputError):
        make_client().embed_v2(**kwargs)


def test_v2_batches_merge(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed-mrl")
    body = recorded_json("embed-mrl", "v2_embed_output_dimension_128")
    for _ in range(2):
        httpx_mock.add_response(url=f"{BASE}/v2/embed", json=body)
    result = make_client().embed_v2(
        texts=["hello world", "vLLM serves embeddings"] * 2, output_dimension=128, batch_size=2
    )
    assert result.float is not None and result.float.shape == (4, 128)
    np.testing.assert_array_equal(result.float[:2], result.float[2:])


def test_a_413_halves_the_batches_until_they_fit(make_client: Any, httpx_mock: HTTPXMock) -> None:
    """A proxy's body limit (nginx client_max_body_size): batches are halved and sent again."""
    mock_server(httpx_mock, "embed")

    def answer(request: httpx.Request) -> httpx.Response:
        texts = json.loads(request.content)["input"]
        if len(texts) > 2:
            return httpx.Response(413, text="<html><body>413 Request Entity Too Large</body></html>")
        data = [
            {"index": i, "object": "embedding", "embedding": [float(len(t)), 1.0]}
            for i, t in enumerate(texts)
        ]
        return httpx.Response(200, json={"object": "list", "model": "minilm", "data": data, "usage": {}})

    httpx_mock.add_callback(answer, url=EMBED, is_reusable=True)
    texts = [f"text {'x' * i}" for i in range(7)]
    result = make_client().embed(texts, encoding_format="float", batch_size=8)
    np.testing.assert_array_equal(result.vectors[:, 0], [len(t) for t in texts])
    sizes = [
        len(json.loads(r.content)["input"])
        for r in httpx_mock.get_requests()
        if r.url.path == "/v1/embeddings"
    ]
    assert sizes[0] == 7 and min(sizes) <= 2  # the first try was one batch of 7; the last ones fit


def test_a_413_for_a_single_input_is_raised(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(url=EMBED, status_code=413, text="too large", is_reusable=True)
    with pytest.raises(vt.RequestTooLargeError):
        make_client().embed(["one text"], encoding_format="float")


def bytes_answer(request: httpx.Request) -> httpx.Response:
    """A vLLM ``bytes`` answer: one float32 row ``[len(text), 1.0]`` per input, metadata in the header."""
    texts = json.loads(request.content)["input"]
    rows = np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32)
    items = [
        {
            "index": i,
            "embed_dtype": "float32",
            "endianness": "little",
            "start": 8 * i,
            "end": 8 * i + 8,
            "shape": [2],
        }
        for i in range(len(texts))
    ]
    metadata = {"id": "e", "created": 0, "model": "minilm", "data": items, "usage": {}}
    headers = {"content-type": "application/octet-stream", "metadata": json.dumps(metadata)}
    return httpx.Response(200, content=rows.astype("<f4").tobytes(), headers=headers)


def test_a_502_for_large_bytes_batches_makes_them_small_for_good(
    make_client: Any, httpx_mock: HTTPXMock, caplog: pytest.LogCaptureFixture
) -> None:
    """nginx's default 4 KiB proxy_buffer_size answered 502 to every default batch of 64 in ``bytes``:
    vLLM's ``metadata`` header holds ~110 bytes per input."""
    mock_server(httpx_mock, "embed")

    def proxy(request: httpx.Request) -> httpx.Response:
        if len(json.loads(request.content)["input"]) > 34:
            return httpx.Response(502, text="<html><center><h1>502 Bad Gateway</h1></center></html>")
        return bytes_answer(request)

    httpx_mock.add_callback(proxy, url=EMBED, is_reusable=True)
    client = make_client(max_retries=0)
    texts = [f"text {'x' * i}" for i in range(64)]
    for _ in range(2):
        np.testing.assert_array_equal(client.embed(texts).vectors[:, 0], [len(t) for t in texts])
    sizes = [len(body["input"]) for body in sent_bodies(httpx_mock)]
    # One refused batch, then small ones for good; the small ones of a call go out concurrently.
    assert (sizes[0], sorted(sizes[1:4]), sorted(sizes[4:])) == (64, [16, 24, 24], [16, 24, 24])
    assert "proxy_buffer_size" in caplog.text


def test_a_502_that_persists_with_small_bytes_batches_is_raised(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(url=EMBED, status_code=502, text="Bad Gateway", is_reusable=True)
    with pytest.raises(vt.InternalServerError) as caught:
        make_client(max_retries=0).embed([f"t{i}" for i in range(64)])
    assert caught.value.status_code == 502
    assert [len(body["input"]) for body in sent_bodies(httpx_mock)][:2] == [64, 24]


def test_a_502_for_small_batches_is_not_split(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_response(url=EMBED, status_code=502, text="Bad Gateway", is_reusable=True)
    with pytest.raises(vt.InternalServerError):
        make_client(max_retries=0).embed(["a", "b"])
    assert len(sent_bodies(httpx_mock)) == 1


def test_a_bytes_only_answer_cut_to_half_width_is_caught_once_the_width_is_known(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    """bytes_only states no width: half the body splits evenly into half-width rows."""
    from .recorded import recorded_response

    mock_server(httpx_mock, "embed")
    whole = recorded_response("embed", "embeddings_bytes_only").content
    for body in (whole, whole[: len(whole) // 2]):
        httpx_mock.add_response(url=EMBED, content=body, headers={"content-type": "application/octet-stream"})
    client = make_client()
    texts = ["hello world", "vLLM serves embeddings"]
    assert client.embed(texts, encoding_format="bytes_only").vectors.shape == (2, 384)
    with pytest.raises(vt.UnexpectedResponse, match="earlier answers were 384-wide"):
        client.embed(texts, encoding_format="bytes_only")


def test_a_refreshed_server_info_accepts_a_new_width(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed")
    mock_server(httpx_mock, "embed")
    for width in (4, 3):
        data = [{"index": 0, "object": "embedding", "embedding": [0.5] * width}]
        httpx_mock.add_response(url=EMBED, json={"object": "list", "model": "m", "data": data, "usage": {}})
    client = make_client()
    assert client.embed("a", encoding_format="float").vectors.shape == (1, 4)
    client.server_info(refresh=True)
    assert client.embed("a", encoding_format="float").vectors.shape == (1, 3)
