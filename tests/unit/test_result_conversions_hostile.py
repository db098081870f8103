"""Result conversions given what a careless caller or a hostile server can give them: sparse vectors and
their scipy/dense forms, the SPLADE check, ``maxsim``, ``PoolingResult.mean``/``normalized`` and the
``bytes`` answer's metadata. Each refuses with a typed error, never a raw numpy/scipy error, a NaN row, or
a corrupt matrix."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import sparse
from vllm_tasks.decoding import decode_bytes_response, decode_bytes_tensors
from vllm_tasks.types import PoolingResult, SparseEmbeddingResult, SparseVector
from vllm_tasks.types.sparse import to_dense

from .conftest import BASE
from .recorded import exchange, mock_server

BGE_M3_IDS = [6, 2_685, 83_279, 249_999]  # BGE-M3 token ids: its vocabulary is 250002, BERT's 30522


def bge_m3_result() -> SparseEmbeddingResult:
    vector = SparseVector(indices=BGE_M3_IDS, values=[0.5, 0.25, 0.125, 1.0])
    return SparseEmbeddingResult(vectors=[vector, vector], model="bge-m3")


# --------------------------------------------------------------------------------------------------
# to_scipy / to_dense


@pytest.mark.parametrize("convert", ["to_scipy", "to_dense"])
def test_a_dimension_below_the_largest_index_is_refused_before_building(convert: str) -> None:
    # scipy builds such a CSR matrix without a word: toarray() drops the weight, sum() counts it and a
    # product frees memory twice (the process dies), so nothing may be built.
    with pytest.raises(vt.InvalidInputError) as caught:
        getattr(bge_m3_result(), convert)(30522)
    error = caught.value
    assert error.field == "dimension" and error.value == 30522
    assert "largest index, 249999" in str(error) and "dimension=250000" in str(error)
    with pytest.raises(vt.InvalidInputError, match="largest index, 249999"):
        to_dense(bge_m3_result().vectors, 30522)


@pytest.mark.parametrize("dimension", [0, -1, 2.5, "30522", True, None])
@pytest.mark.parametrize("convert", ["to_scipy", "to_dense"])
def test_a_dimension_that_is_not_a_positive_int_is_refused(convert: str, dimension: Any) -> None:
    result = SparseEmbeddingResult(vectors=[SparseVector(indices=[1], values=[1.0])], model="m")
    if dimension is None:  # the default: the largest index + 1
        assert getattr(result, convert)().shape == (1, 2)
        return
    with pytest.raises(vt.InvalidInputError, match=r"dimension=.*must be an integer >= 1"):
        getattr(result, convert)(dimension)


def test_a_stated_dimension_below_an_index_is_refused_too() -> None:
    result = bge_m3_result().model_copy(update={"dimension": 1000})
    with pytest.raises(vt.InvalidInputError, match="largest index, 249999"):
        result.to_scipy()
    with pytest.raises(vt.InvalidInputError, match="dimension"):
        SparseEmbeddingResult(vectors=[], model="m", dimension=-1)


def test_the_right_dimension_gives_a_whole_matrix() -> None:
    matrix = bge_m3_result().to_scipy(250002)
    assert matrix.shape == (2, 250002) and matrix.toarray().sum() == pytest.approx(matrix.sum())
    assert (matrix @ matrix.T).toarray()[0, 1] == pytest.approx(0.25 + 0.0625 + 0.015625 + 1.0)
    np.testing.assert_array_equal(bge_m3_result().to_dense(np.int64(250002)), matrix.toarray())


# --------------------------------------------------------------------------------------------------
# SparseVector


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"indices": [-1, 4], "values": [1.0, 2.0]}, "indices", "whole numbers from 0"),
        ({"indices": [1.5], "values": [1.0]}, "indices", "whole numbers"),
        ({"indices": ["a"], "values": [1.0]}, "indices", "whole numbers"),
        ({"indices": [2**70], "values": [1.0]}, "indices", "2\\*\\*63-1"),
        ({"indices": [[1, 2], [3]], "values": [1.0]}, "indices", "flat list"),
        ({"indices": [1], "values": [float("nan")]}, "values", "NaN or an infinity"),
        ({"indices": [1], "values": [float("-inf")]}, "values", "NaN or an infinity"),
        ({"indices": [1], "values": [1e300]}, "values", "NaN or an infinity"),  # inf once float32
        ({"indices": [1], "values": ["x"]}, "values", "must be numbers"),
        ({"indices": [1, 2], "values": [1.0]}, "values", "one per index"),
        ({"indices": [3, 3], "values": [1.0, 2.0]}, "indices", "must not repeat"),
        ({"indices": [1], "values": [1.0], "tokens": ["a", "b"]}, "tokens", "one per index"),
        ({"indices": [1], "values": [1.0], "tokens": [7]}, "tokens[0]", "valid string"),
        ({"indices": [1], "values": [1.0], "tokens": 7}, "tokens", "list of strings"),
        ({"indices": [1, 2], "values": [1.0, 2.0], "tokens": "ab"}, "tokens", "list of strings"),
    ],
)
def test_a_sparse_vector_refuses_bad_arrays_with_a_typed_error(
    fields: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(vt.InvalidInputError, match=message) as caught:
        SparseVector(**fields)
    assert caught.value.field == field


def test_a_bad_vector_inside_a_result_is_refused_with_a_typed_error() -> None:
    with pytest.raises(vt.InvalidInputError, match="NaN"):
        SparseEmbeddingResult(vectors=[{"indices": [1], "values": [float("nan")]}], model="m")
    with pytest.raises(vt.InvalidInputError) as caught:
        SparseEmbeddingResult(vectors=[42], model="m")
    assert caught.value.field == "vectors[0]"


def test_whole_float_ids_and_empty_vectors_are_kept() -> None:
    vector = SparseVector(indices=np.array([7.0, 2.0]), values=[1.0, 2.0])
    assert vector.indices.dtype == np.int64 and vector.indices.tolist() == [2, 7]
    assert len(SparseVector(indices=[], values=[])) == 0


# --------------------------------------------------------------------------------------------------
# A dense model is not SPLADE, even when its vectors happen to be all positive


def test_rows_with_more_non_zero_weights_than_zeros_are_dense() -> None:
    assert sparse.dense_reason(np.array([[0.0, 0.0, 0.0, 1.5]]), "splade") is None
    reason = sparse.dense_reason(np.array([[0.0, 0.0, 0.0], [0.1, 0.2, 0.0]]), "minilm")
    assert reason is not None and "input 1 has 2 non-zero weights of 3" in reason
    assert sparse.dense_reason(np.zeros((0, 8)), "m") is None


def test_an_all_positive_dense_model_is_not_taken_as_splade(make_client: Any, httpx_mock: HTTPXMock) -> None:
    """all-MiniLM-L6-v2's recorded rows, made positive: what a dense model with no negative weight sends."""
    mock_server(httpx_mock, "embed")
    recorded = exchange("embed", "embeddings_bytes_float32")["response"]
    rows = np.abs(np.frombuffer(base64.b64decode(recorded["body_b64"]), "<f4"))
    headers = {"content-type": "application/octet-stream", "metadata": recorded["headers"]["metadata"]}
    httpx_mock.add_response(url=f"{BASE}/v1/embeddings", headers=headers, content=rows.tobytes())
    client = make_client()
    with pytest.raises(vt.UnsupportedByServer, match="mostly zeros") as caught:
        client.embed_sparse(["hello world", "vLLM serves embeddings"])
    assert caught.value.feature == "sparse_embeddings" and "'minilm'" in str(caught.value)


def test_lexical_weights_that_overflow_are_an_unexpected_answer() -> None:
    response = httpx.Response(200, json={"data": [{"index": 0, "data": [0.5, 1e39]}]})  # inf as float32
    with pytest.raises(vt.UnexpectedResponse, match="non-finite") as caught:
        sparse.parse_lexical(response, 1)
    assert caught.value.kind == "decode"


# --------------------------------------------------------------------------------------------------
# maxsim


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        (["a"], "query_vectors", "must hold numbers"),
        ([["a", "b"]], "query_vectors", "must hold numbers"),
        ([[np.nan, 1.0]], "query_vectors", "NaN or an infinity"),
        ([[1.0, np.inf]], "query_vectors", "NaN or an infinity"),
        ([[1.0, 2.0], [1.0]], "query_vectors", "not a matrix"),
        ([1.0, 2.0], "query_vectors", r"\[tokens, d\]"),
        (np.ones((1, 1, 2)), "query_vectors", r"\[tokens, d\]"),
        ([], "query_vectors", r"\[tokens, d\]"),
        (np.ones((2, 0)), "query_vectors", r"\[tokens, d\]"),
        (np.ones((2, 3)), "doc_vectors", "must match the query's width 3"),
        (np.full((1, 2), 1e200), "doc_vectors", "overflows"),
    ],
)
def test_maxsim_refuses_what_is_not_two_finite_matrices(query: Any, field: str, message: str) -> None:
    doc = np.full((2, 2), 1e200) if message == "overflows" else np.ones((2, 2))
    with pytest.raises(vt.InvalidInputError, match=message) as caught:
        vt.maxsim(query, doc)
    assert caught.value.field == field


def test_maxsim_takes_lists_and_int_arrays() -> None:
    assert vt.maxsim([[1, 0], [0, 1]], np.array([[2, 0]])) == 2.0


# --------------------------------------------------------------------------------------------------
# PoolingResult.mean / normalized


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ([np.zeros((0, 4), np.float32)], "data[0]", "has no mean vector"),
        ([np.ones((2, 2, 2), np.float32)], "data[0]", "has no mean vector"),
        ([np.ones((2, 3), np.float32), np.ones((2, 4), np.float32)], "data", "widths \\[3, 4\\]"),
        ([np.ones((2, 3), np.float32), np.array([[1, np.nan, 0]], np.float32)], "data[1]", "finite numbers"),
        ([np.array(["a", "b"])], "data[0]", "finite numbers"),
    ],
)
def test_mean_refuses_arrays_with_no_mean_vector(data: list[np.ndarray], field: str, message: str) -> None:
    with pytest.raises(vt.InvalidInputError, match=message) as caught:
        PoolingResult(data=data, model="m").mean()
    assert caught.value.field == field


def test_normalized_refuses_non_finite_values_and_keeps_zero_rows_zero() -> None:
    with pytest.raises(vt.InvalidInputError, match="finite numbers"):
        PoolingResult(data=[np.array([[np.inf, 1.0]], np.float32)], model="m").normalized()
    result = PoolingResult(data=[np.array([[0.0, 0.0], [3.0, 4.0]], np.float32)], model="m")
    np.testing.assert_allclose(result.normalized().data[0], [[0.0, 0.0], [0.6, 0.8]])
    np.testing.assert_array_equal(
        PoolingResult(data=[np.zeros((2, 2), np.float32)], model="m").mean(), [[0, 0]]
    )


# --------------------------------------------------------------------------------------------------
# A bytes answer's metadata


def _item(index: int, start: int, end: int, shape: list[Any]) -> dict[str, Any]:
    return {"index": index, "start": start, "end": end, "shape": shape, "embed_dtype": "float32"}


@given(
    n=st.integers(1, 4),
    dim=st.integers(1, 4),
    reversed_order=st.booleans(),
    target=st.data(),
)
def test_a_vector_metadata_field_that_only_equals_an_int_is_refused(
    n: int, dim: int, reversed_order: bool, target: st.DataObject
) -> None:
    """``4.0 == 4`` and ``True == 1`` in Python, but a header holding them is not one vLLM writes: refused on
    the uniform fast path and on the per-item path (items out of order) alike."""
    width = dim * 4
    items = [_item(i, i * width, (i + 1) * width, [dim]) for i in range(n)]
    if reversed_order:
        items.reverse()
    item = target.draw(st.sampled_from(items))
    key = target.draw(st.sampled_from(["index", "start", "end", "shape"]))
    value = item[key][0] if key == "shape" else item[key]
    fake = target.draw(st.sampled_from([float(value), True] if value == 1 else [float(value)]))
    item[key] = [fake] if key == "shape" else fake
    body = np.ones(n * dim, "<f4").tobytes()
    with pytest.raises(vt.UnexpectedResponse) as caught:
        decode_bytes_response(body, json.dumps({"data": items}), expected_items=n, embed_dtype="float32")
    assert caught.value.kind == "decode"


@given(
    shape=st.lists(st.one_of(st.integers(-3, 6), st.floats(-3, 6), st.booleans()), min_size=0, max_size=3),
    values=st.integers(1, 12),
)
def test_a_tensor_shape_must_be_positive_ints_holding_every_value(shape: list[Any], values: int) -> None:
    metadata = json.dumps({"data": [_item(0, 0, values * 4, shape)]})
    good = bool(shape) and all(type(size) is int and size > 0 for size in shape) and np.prod(shape) == values
    try:
        (array,), _ = decode_bytes_tensors(np.ones(values, "<f4").tobytes(), metadata, expected_items=1)
    except vt.UnexpectedResponse as error:
        assert error.kind == "decode" and not good
    else:
        assert good and array.shape == tuple(shape)
