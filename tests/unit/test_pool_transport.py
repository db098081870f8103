"""pool()'s inputs and transports: page images one conversation per request, the binary ``bytes`` answer
(per-item shapes in its ``metadata`` header, as vLLM 0.32's /pooling sends a ColPali page), and its gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks.decoding import decode_bytes_tensors
from vllm_tasks.pooling import PoolParams, pool_prompts

from .conftest import BASE
from .test_scoring import mock_server, sent


def bytes_answer(arrays: list[np.ndarray], tokens: int) -> dict[str, Any]:
    """A /pooling ``bytes`` answer laid out as vLLM 0.32 writes it (seen on the colpali fixture)."""
    chunks = [np.ascontiguousarray(a, dtype="=f4").tobytes() for a in arrays]
    ends = np.cumsum([len(c) for c in chunks]).tolist()
    data = [
        {"index": i, "embed_dtype": "float32", "endianness": "native", "start": end - len(chunk), "end": end,
         "shape": list(array.shape)}
        for i, (array, chunk, end) in enumerate(zip(arrays, chunks, ends, strict=True))
    ]  # fmt: skip
    meta = {"id": "pooling-1", "created": 1, "model": "colpali-tiny", "data": data,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}  # fmt: skip
    return {
        "content": b"".join(chunks),
        "headers": {"content-type": "application/octet-stream", "metadata": json.dumps(meta)},
    }


def test_pool_asks_for_bytes_and_keeps_each_items_shape(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed", probe=False)
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3), np.full((4, 3), 0.5, np.float32)]
    httpx_mock.add_response(url=f"{BASE}/pooling", **bytes_answer(arrays, tokens=6))
    result = make_client().pool(["two words", "four words right here"])
    assert sent(httpx_mock, "/pooling")[0]["encoding_format"] == "bytes"
    assert [a.shape for a in result.data] == [(2, 3), (4, 3)]
    np.testing.assert_array_equal(result.data[0], arrays[0])
    assert result.data[1].dtype == np.float32
    assert result.usage.prompt_tokens == 6
    assert result.model == "minilm"


def test_pool_on_a_vllm_before_the_binary_transport(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed", version="0.11.0", probe=False)
    httpx_mock.add_response(url=f"{BASE}/pooling", json={"data": [{"index": 0, "data": [1.0, 2.0]}]})
    client = make_client()
    assert client.pool("x").data[0].tolist() == [1.0, 2.0]
    assert "encoding_format" not in sent(httpx_mock, "/pooling")[0]
    with pytest.raises(vt.UnsupportedByServer, match=r"0\.11\.1"):
        client.pool("x", encoding_format="bytes")


def test_pool_images_go_one_conversation_per_request(
    make_client: Any, httpx_mock: HTTPXMock, tmp_path: Path
) -> None:
    mock_server(httpx_mock, "embed", probe=False)
    page = tmp_path / "page.png"
    Image.new("RGB", (8, 8), (255, 0, 0)).save(page)
    for rows in (3, 5):
        httpx_mock.add_response(url=f"{BASE}/pooling", **bytes_answer([np.ones((rows, 2), np.float32)], rows))
    result = make_client().pool(images=[page, page], concurrency=1)
    bodies = sent(httpx_mock, "/pooling")
    assert [len(body["messages"]) for body in bodies] == [1, 1]
    assert all("input" not in body for body in bodies)
    part = bodies[0]["messages"][0]["content"][0]
    assert part["type"] == "image_url" and part["image_url"]["url"].startswith("data:image/png;base64,")
    assert [a.shape for a in result.data] == [(3, 2), (5, 2)]
    assert result.usage.prompt_tokens == 8


def test_a_bytes_answer_whose_shape_disagrees_with_its_bytes(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "embed", probe=False)
    answer = bytes_answer([np.ones((2, 3), np.float32)], tokens=2)
    answer["headers"]["metadata"] = answer["headers"]["metadata"].replace("[2, 3]", "[3, 3]")
    httpx_mock.add_response(url=f"{BASE}/pooling", **answer)
    with pytest.raises(vt.UnexpectedResponse, match=r"declares shape \[3, 3\]"):
        make_client().pool("x")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"input": "x", "images": ["https://example.com/a.png"]}, "input"),
        ({}, "input"),
        ({"images": "page.png"}, "images"),
    ],
)
def test_pool_takes_exactly_one_kind_of_input(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(vt.InvalidInputError) as info:
        pool_prompts(kwargs.get("input"), kwargs.get("messages"), kwargs.get("images"))
    assert info.value.field == field


def test_pool_encoding_format_is_checked() -> None:
    with pytest.raises(vt.InvalidInputError, match="encoding_format"):
        PoolParams(encoding_format="base64")  # type: ignore[arg-type]


shapes = st.lists(st.lists(st.integers(1, 5), min_size=1, max_size=3), min_size=1, max_size=6)


@given(shapes, st.data())
def test_bytes_tensors_round_trip(item_shapes: list[list[int]], data: st.DataObject) -> None:
    arrays = [
        np.asarray(data.draw(st.lists(st.floats(-1e3, 1e3, width=32), min_size=int(np.prod(s)),
                                      max_size=int(np.prod(s)))), np.float32).reshape(s)
        for s in item_shapes
    ]  # fmt: skip
    answer = bytes_answer(arrays, tokens=1)
    decoded, meta = decode_bytes_tensors(
        answer["content"], answer["headers"]["metadata"], expected_items=len(arrays)
    )
    assert meta["usage"]["prompt_tokens"] == 1
    for got, want in zip(decoded, arrays, strict=True):
        np.testing.assert_array_equal(got, want)


@given(shapes, st.integers(0, 5))
def test_bytes_tensors_refuse_a_body_cut_short(item_shapes: list[list[int]], cut: int) -> None:
    arrays = [np.zeros(s, np.float32) for s in item_shapes]
    answer = bytes_answer(arrays, tokens=1)
    body = answer["content"][: len(answer["content"]) - 1 - cut]
    with pytest.raises(vt.UnexpectedResponse):
        decode_bytes_tensors(body, answer["headers"]["metadata"], expected_items=len(arrays))
