"""``embed(long_inputs=...)``'s pure parts: option checks, token windows, the special tokens around a text,
the weighted mean, and late chunking's request and answer (bodies built from vLLM 0.33.0's
``entrypoints/pooling/token_embed/protocol.py`` and ``late_chunking.py``)."""

from __future__ import annotations

import itertools

import httpx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import vllm_tasks as vt
from vllm_tasks import long_inputs
from vllm_tasks.calls import CallOptions
from vllm_tasks.types import ServerInfo


def info(version: str) -> ServerInfo:
    return ServerInfo(base_url="http://h", version=version, models=(), routes=None)


@given(count=st.integers(0, 400), size=st.integers(1, 64), data=st.data())
def test_windows_cover_every_token_in_order_sharing_the_overlap(
    count: int, size: int, data: st.DataObject
) -> None:
    overlap = data.draw(st.integers(0, size - 1))
    ranges = long_inputs.windows(count, size, overlap)
    assert ranges[0][0] == 0 and ranges[-1][1] == count
    assert all(0 < end - start <= size or count == 0 for start, end in ranges)
    for (_, end), (start, _) in itertools.pairwise(ranges):
        assert end - start == overlap  # neighbours share exactly the overlap
    assert all(end - start == size for start, end in ranges[:-1])


def test_special_tokens_are_found_around_the_text() -> None:
    assert long_inputs.special_tokens([101, 7, 8, 102], [7, 8]) == ([101], [102])
    assert long_inputs.special_tokens([7, 8, 151643], [7, 8]) == ([], [151643])  # Qwen3-Embedding: EOS only
    with pytest.raises(vt.UnexpectedResponse):
        long_inputs.special_tokens([101, 9, 102], [7, 8])


def test_the_default_window_fills_the_context() -> None:
    assert long_inputs.chunk_budget(256, 2, None, None) == (254, 31)
    assert long_inputs.chunk_budget(256, 2, 100, 0) == (100, 0)
    with pytest.raises(vt.InvalidInputError, match="at most 254"):
        long_inputs.chunk_budget(256, 2, 255, None)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"long_inputs": "chunk"}, "long_inputs"),
        ({"chunk_tokens": 64}, "chunk_tokens"),  # without a chunking mode
        ({"long_inputs": "split_mean", "chunk_tokens": 0}, "chunk_tokens"),
        ({"long_inputs": "split_mean", "chunk_tokens": 8, "chunk_overlap": 8}, "chunk_overlap"),
        ({"long_inputs": "late_chunking"}, "chunk_tokens"),
        ({"long_inputs": "late_chunking", "chunk_tokens": 8, "chunk_overlap": 2}, "chunk_overlap"),
        ({"long_inputs": "split_mean", "truncate_prompt_tokens": 8}, "truncate_prompt_tokens"),
        ({"long_inputs": "split_mean", "prompt_name": "query"}, "long_inputs"),
    ],
)
def test_inconsistent_options_are_refused(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(vt.InvalidInputError) as raised:
        vt.EmbedParams(**kwargs)  # type: ignore[arg-type]
    assert raised.value.field == field


def test_the_weighted_mean_is_normalised_only_when_the_model_normalises() -> None:
    unit = np.array([[1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_allclose(
        long_inputs.weighted_mean(unit, [3, 1]), np.array([3, 1]) / np.sqrt(10), rtol=1e-6
    )
    raw = np.array([[2.0, 0.0], [0.0, 4.0]])
    np.testing.assert_allclose(long_inputs.weighted_mean(raw, [1, 1]), [1.0, 2.0])


def test_a_text_that_fits_goes_whole_and_a_long_one_in_windows() -> None:
    params = vt.EmbedParams(long_inputs="split_mean", chunk_tokens=3, chunk_overlap=1)
    plan = long_inputs.plan_split(["a b", "c d e f"], [[1, 2], [3, 4, 5, 6]], ([101], [102]), 5, params)
    assert plan.whole == ["a b"]
    assert plan.windows == [[101, 3, 4, 5, 102], [101, 5, 6, 102]]
    assert plan.parts == [[(False, 0, (0, 2))], [(True, 0, (0, 3)), (True, 1, (2, 4))]]


def test_late_chunking_request_is_vllm_0_33s() -> None:
    requests, batches = long_inputs.late_chunking_requests(
        ["doc one", "doc two", "doc three"],
        {"model": "m", "late_chunking_params": {"chunk_size": 8}},
        CallOptions(),
        batch_size=2,
    )
    assert batches == [range(0, 2), range(2, 3)]
    assert requests[0].json == {
        "model": "m",
        "late_chunking_params": {"chunk_size": 8},
        "encoding_format": "float",
        "input": ["doc one", "doc two"],
    }
    with pytest.raises(vt.InvalidInputError):
        long_inputs.late_chunking_requests([""], {}, CallOptions(), batch_size=1)


#: vLLM 0.33's TokenEmbeddingResponse for one text with late chunking (chunk_size 2, 3 tokens).
LATE_ANSWER = {
    "id": "embd-1",
    "object": "list",
    "created": 1,
    "model": "colbert",
    "data": [
        {
            "index": 0,
            "object": "embedding",
            "embedding": [[0.6, 0.8], [1.0, 0.0]],
            "late_chunking": {
                "chunk_size": 2,
                "input_tokens": 3,
                "chunks": [
                    {"token_range": [0, 2], "char_range": [0, 5]},
                    {"token_range": [2, 3], "char_range": None},
                ],
                "strategy": "fixed_tokens",
            },
        }
    ],
    "usage": {"prompt_tokens": 3, "total_tokens": 3, "completion_tokens": 0, "prompt_tokens_details": None},
}


def test_late_chunks_are_read_with_their_ranges() -> None:
    response = httpx.Response(200, json=LATE_ANSWER, request=httpx.Request("POST", "http://h/v1/embeddings"))
    (chunks,), usage = long_inputs.parse_late_chunking(response, 1, info("0.33.0"), "colbert")
    assert chunks.token_ranges == [(0, 2), (2, 3)] and chunks.char_ranges == [(0, 5), None]
    assert chunks.weights == [2, 1] and usage.prompt_tokens == 3
    expected = np.array([0.6 * 2 + 1.0, 0.8 * 2]) / np.linalg.norm([2.2, 1.6])
    np.testing.assert_allclose(long_inputs.weighted_mean(chunks.vectors, chunks.weights), expected, rtol=1e-6)


def test_an_answer_without_late_chunking_means_the_model_is_not_token_embed() -> None:
    plain = {**LATE_ANSWER, "data": [{"index": 0, "object": "embedding", "embedding": [0.6, 0.8]}]}
    response = httpx.Response(200, json=plain, request=httpx.Request("POST", "http://h/v1/embeddings"))
    with pytest.raises(vt.UnsupportedByServer, match="token_embed") as raised:
        long_inputs.parse_late_chunking(response, 1, info("0.33.0"), "minilm")
    assert raised.value.feature == "late_chunking"


def test_chunks_that_do_not_match_their_ranges_are_refused() -> None:
    item = {**LATE_ANSWER["data"][0], "embedding": [[0.6, 0.8]]}  # type: ignore[dict-item]
    response = httpx.Response(
        200, json={**LATE_ANSWER, "data": [item]}, request=httpx.Request("POST", "http://h/v1/embeddings")
    )
    with pytest.raises(vt.UnexpectedResponse, match="2 chunk ranges"):
        long_inputs.parse_late_chunking(response, 1, info("0.33.0"), "colbert")
