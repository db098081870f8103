"""PoolingResult.normalized() and .mean(): per-token output made into unit rows and single vectors."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import vllm_tasks as vt
from vllm_tasks.pooling import merge_pool
from vllm_tasks.types import PoolingResult

matrices = st.lists(
    arrays(np.float32, st.tuples(st.integers(1, 6), st.just(8)), elements=st.floats(-100, 100, width=32)),
    min_size=1,
    max_size=4,
)


@given(matrices)
def test_normalized_rows_are_unit_or_zero_and_point_the_same_way(data: list[np.ndarray]) -> None:
    result = PoolingResult(data=data, model="m").normalized()
    for before, after in zip(data, result.data, strict=True):
        norms = np.linalg.norm(after.astype(np.float64), axis=1)
        zero = np.linalg.norm(before.astype(np.float64), axis=1) == 0
        assert np.all(np.isclose(norms[~zero], 1.0, atol=1e-4)) and np.all(norms[zero] == 0)
        assert np.all(np.sum(before.astype(np.float64) * after, axis=1) >= -1e-6)


@given(matrices)
def test_mean_is_the_token_average_made_unit(data: list[np.ndarray]) -> None:
    result = PoolingResult(data=data, model="m")
    raw = result.mean(normalize=False)
    np.testing.assert_allclose(raw, np.stack([m.mean(axis=0) for m in data]), rtol=1e-5, atol=1e-4)
    unit = result.mean()
    assert unit.shape == (len(data), 8) and unit.dtype == np.float32
    nonzero = np.linalg.norm(raw.astype(np.float64), axis=1) > 1e-3
    np.testing.assert_allclose(np.linalg.norm(unit[nonzero].astype(np.float64), axis=1), 1.0, atol=1e-4)


def test_vectors_are_stacked_and_the_usage_kept() -> None:
    result = PoolingResult(data=[np.array([3.0, 4.0], np.float32)], model="m")
    assert result.mean().tolist() == [[0.6000000238418579, 0.800000011920929]]
    assert (
        result.normalized().model == "m" and result.normalized().data[0].tolist() == result.mean()[0].tolist()
    )


def test_pooling_arrays_of_different_shapes_in_one_answer_are_an_unexpected_answer() -> None:
    body = {"data": [{"index": 0, "data": [0.5, 0.5]}, {"index": 1, "data": [0.5, 0.5, 0.5]}]}
    answer = httpx.Response(200, json=body, request=httpx.Request("POST", "http://x/pooling"))
    with pytest.raises(vt.UnexpectedResponse, match="different shapes") as info:
        merge_pool([answer], [range(2)], "m")
    assert info.value.kind == "decode"
