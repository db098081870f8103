"""A classifier's labels: single-label (argmax, ``top_k``) or multi-label (every label over the threshold),
told apart by the probabilities' shape or forced by the caller (``vllm_tasks.pooling.choose_labels``).

The probabilities below are vLLM 0.32's answers on the `classify` and `classify-multilabel` fixtures
(tests/contract/test_classify_labels.py compares them with transformers)."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import vllm_tasks as vt
from vllm_tasks.pooling import ClassifyParams, looks_multi_label, merge_classify

LABELS = ("sports", "politics", "science", "arts")
#: two inputs of the multi-label fixture (a sigmoid per label) and of the single-label one (softmax)
SIGMOIDS = [[0.9753999, 0.0028353, 0.5509162, 0.4192137], [0.7830, 0.0118, 0.0932, 0.4010]]
SOFTMAX = [[0.9636925, 0.0038122, 0.0295706, 0.0029246], [0.0720, 0.8412, 0.0610, 0.0258]]


def answer(rows: list[list[float]], labels: list[str | None] | None = None) -> httpx.Response:
    """A ``/classify`` answer as vLLM writes it: each input's argmax label (``id2label``) and probs."""
    names = labels or [LABELS[int(np.argmax(row))] for row in rows]
    data = [
        {"index": i, "label": name, "probs": row, "num_classes": len(row)}
        for i, (row, name) in enumerate(zip(rows, names, strict=True))
    ]
    return httpx.Response(200, json={"model": "m", "data": data, "usage": {"prompt_tokens": 4}})


def classify(rows: list[list[float]], labels: list[str | None] | None = None, **options: Any) -> Any:
    return merge_classify([answer(rows, labels)], [range(len(rows))], "m", ClassifyParams(**options))


def test_a_multi_label_answer_gives_every_label_over_the_threshold() -> None:
    result = classify(SIGMOIDS, label_names=LABELS)
    assert result.multi_label
    assert result.labels == [["sports", "science"], ["sports"]]
    assert [[(p.index, p.score) for p in row] for row in result.predictions] == [
        [(0, 0.9753999), (2, 0.5509162)],
        [(0, 0.7830)],
    ]
    assert classify(SIGMOIDS, label_names=LABELS, threshold=0.4).labels == [
        ["sports", "science", "arts"],
        ["sports", "arts"],
    ]
    assert classify(SIGMOIDS, label_names=LABELS, top_k=1).labels == [["sports"], ["sports"]]


def test_a_single_label_answer_gives_the_argmax_or_the_top_k() -> None:
    result = classify(SOFTMAX)
    assert not result.multi_label
    assert result.labels == ["sports", "politics"]
    assert [row[0].score for row in result.predictions] == [0.9636925, 0.8412]
    # other classes are named where another input's most probable class names them
    assert classify(SOFTMAX, top_k=3).labels == [["sports", None, "politics"], ["politics", "sports", None]]
    assert classify(SOFTMAX, top_k=2, label_names=LABELS).labels == [
        ["sports", "science"],
        ["politics", "sports"],
    ]


def test_the_caller_decides_where_the_shape_cannot() -> None:
    # sigmoids that sum to 1 in every row read as one softmax
    ambiguous = [[0.7, 0.3]]
    assert classify(ambiguous, ["a"]).labels == ["a"]
    forced = classify(ambiguous, ["a"], multi_label=True, label_names=("a", "b"))
    assert forced.multi_label and forced.labels == [["a"]]
    assert not classify(SIGMOIDS, multi_label=False).multi_label
    assert classify(SIGMOIDS, multi_label=False).labels == ["sports", "sports"]


def test_logits_are_never_taken_for_a_multi_label_answer_but_can_be_thresholded() -> None:
    logits = [[2.0, -1.0, 0.5, 0.9]]
    assert not classify(logits, use_activation=False).multi_label
    result = classify(logits, use_activation=False, multi_label=True, label_names=LABELS)
    assert result.labels == [["sports", "arts", "science"]]  # sigmoid(0.5) = 0.62 > 0.5 > sigmoid(-1)
    assert result.predictions[0][0].score == 2.0  # the logit as the server gave it


def test_looks_multi_label() -> None:
    assert looks_multi_label(np.array(SIGMOIDS))
    assert not looks_multi_label(np.array(SOFTMAX))
    assert not looks_multi_label(np.array([[0.8], [0.3]]))  # one label: a sigmoid, but one label
    assert not looks_multi_label(np.array([[3.0, -2.0, 0.1]]))  # logits, not probabilities


@given(st.lists(st.lists(st.floats(-8, 8), min_size=2, max_size=6), min_size=1, max_size=5).filter(
    lambda rows: len({len(row) for row in rows}) == 1
))  # fmt: skip
def test_softmax_rows_always_read_as_single_label(logits: list[list[float]]) -> None:
    rows = np.exp(np.array(logits, np.float32))
    softmax = (rows / rows.sum(axis=1, keepdims=True)).astype(np.float32).astype(np.float64)
    assert not looks_multi_label(softmax)
    result = classify(softmax.tolist(), [None] * len(logits))
    assert [row[0].index for row in result.predictions] == list(np.argmax(softmax, axis=1))


def test_label_names_of_another_length_are_refused() -> None:
    with pytest.raises(vt.InvalidInputError, match="must name each of the model's 4 classes"):
        classify(SIGMOIDS, label_names=("a", "b"))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"threshold": 1.5}, "threshold=1.5"),
        ({"threshold": True}, "threshold=True"),
        ({"top_k": 0}, "top_k=0"),
        ({"multi_label": "yes"}, "multi_label='yes'"),
        ({"label_names": "sports"}, "label_names"),
        ({"label_names": ["a", 3]}, r"label_names\[1\]"),
    ],
)
def test_bad_options_are_refused_before_any_request(options: dict[str, Any], message: str) -> None:
    with pytest.raises(vt.InvalidInputError, match=message):
        vt.ClassifyParams(**options)
