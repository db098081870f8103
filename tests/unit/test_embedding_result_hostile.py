"""``EmbeddingResult`` and ``EmbedV2Result`` on hostile data: ``.vector`` of a result without exactly one
row, arrays that are not one row per input, fields of the wrong type, and the views (``len``, ``repr``,
``to_html``) on any 2-D array (NaN, no rows, no columns, complex, strings, objects) raise only
``InvalidInputError`` (still a ``ValueError``) and warn nothing."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import vllm_tasks as vt
from vllm_tasks.types import EmbeddingResult, EmbedV2Result, Usage

USAGE = Usage(prompt_tokens=1, total_tokens=1)


def result(vectors: Any) -> EmbeddingResult:
    return EmbeddingResult(vectors=vectors, model="m", usage=USAGE, encoding_format="float")


@pytest.mark.parametrize("rows", [0, 2, 5])
def test_vector_of_a_result_without_exactly_one_row_names_the_count(rows: int) -> None:
    with pytest.raises(vt.InvalidInputError, match=rf"holds {rows} vectors.*\.vectors") as caught:
        _ = result(np.zeros((rows, 3), np.float32)).vector
    assert caught.value.field == "vector" and caught.value.value == rows
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    "row",
    [np.full((1, 3), np.nan), np.ones((1, 2), np.float16), np.arange(4).reshape(1, 4), np.zeros((1, 0))],
)
def test_vector_of_one_row_is_that_row_whatever_it_holds(row: np.ndarray) -> None:
    np.testing.assert_array_equal(result(row).vector, row[0])


@pytest.mark.parametrize("vectors", [np.array(1.0), np.arange(3.0), np.zeros((1, 2, 3))])
def test_vectors_that_are_not_a_2d_array_are_refused(vectors: np.ndarray) -> None:
    with pytest.raises(vt.InvalidInputError, match="2-D") as caught:
        result(vectors)
    assert caught.value.field == "vectors"


@pytest.mark.parametrize(
    ("model", "fields", "named"),
    [
        (
            EmbeddingResult,
            {"vectors": [[1.0]], "model": "m", "usage": USAGE, "encoding_format": "float"},
            "vectors",
        ),
        (
            EmbeddingResult,
            {"vectors": np.zeros((1, 2)), "model": 5, "usage": USAGE, "encoding_format": "f"},
            "model",
        ),
        (EmbedV2Result, {"float": "not an array"}, "float"),
        (EmbedV2Result, {"texts": 5}, "texts"),
        (EmbedV2Result, {"billed_units": {"input_tokens": "many"}}, "billed_units.input_tokens"),
    ],
)
def test_a_field_of_the_wrong_type_is_an_invalid_input_error(
    model: type[Any], fields: dict[str, Any], named: str
) -> None:
    with pytest.raises(vt.InvalidInputError) as caught:
        model(**fields)
    assert caught.value.field == named


def any_2d_array() -> st.SearchStrategy[np.ndarray]:
    dtypes = st.one_of(
        hnp.scalar_dtypes(),
        st.just(np.dtype(object)),
        st.just(np.dtype([("a", "f4"), ("b", "i4")])),
    )
    return hnp.arrays(dtypes, hnp.array_shapes(min_dims=2, max_dims=2, min_side=0, max_side=4))


@settings(max_examples=60, deadline=None)
@given(any_2d_array())
def test_the_views_of_any_2d_array_raise_and_warn_nothing(vectors: np.ndarray) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        embedding = result(vectors)
        assert len(embedding) == vectors.shape[0]
        assert "EmbeddingResult(vectors=" in repr(embedding)
        assert "EmbeddingResult" in embedding.to_html(max_rows=3, max_columns=3)
        assert embedding._repr_html_()
        if vectors.shape[0] != 1:
            with pytest.raises(vt.InvalidInputError):
                _ = embedding.vector


def test_complex_values_are_shown_whole() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        html = result(np.array([[1 + 2j, 3 - 4j]])).to_html()
    assert "1+2j" in html and "3-4j" in html
