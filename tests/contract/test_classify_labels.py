"""``classify`` on single- and multi-label models against transformers' text-classification pipeline on
the same weights.

Fixtures: `classify` and `classify-multilabel` (server-fixtures/build_classifiers.py:
``BertForSequenceClassification``, the MiniLM encoder and a seeded four-label head, ``problem_type``
``single_label_classification`` or ``multi_label_classification``). The reference is
server-fixtures/references.py's ``sequence_classification``: ``pipeline("text-classification",
top_k=None)``, which reads ``problem_type`` itself (softmax, or a sigmoid per label). vLLM says nothing of
the problem type in its answer; the SDK tells it from the probabilities (``looks_multi_label``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import vllm_tasks as vt
from tests.zoo import reference as zoo_reference

pytestmark = [
    pytest.mark.contract,
    pytest.mark.vllm_min("0.32.0", "the classify fixtures are built and checked on today's vLLM only"),
]

TEXTS = [
    "great game last night",
    "quantum physics experiment",
    "stock markets fell",
    "the parliament passed the bill",
]
LABELS = ["sports", "politics", "science", "arts"]


def expected(fixture: str) -> tuple[np.ndarray, str]:
    """The pipeline's probabilities (``[text, label]`` in class order) and the config's problem type."""
    answer = zoo_reference("sequence-classification", fixture, {"texts": TEXTS})
    rows = np.array([[scores[label] for label in LABELS] for scores in answer["scores"]])
    return rows, answer["problem_type"]


@pytest.fixture(scope="module")
def single(vllm_classify: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_classify.base_url, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def multi(vllm_classify_multilabel: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_classify_multilabel.base_url, timeout=60) as client:
        yield client


def test_single_label_is_the_argmax_of_the_softmax(single: vt.Client) -> None:
    probs, problem = expected("classify")
    assert problem == "single_label_classification"
    result = single.classify(TEXTS)
    np.testing.assert_allclose(result.probs, probs, atol=1e-5)
    assert not result.multi_label
    assert result.labels == [LABELS[i] for i in probs.argmax(axis=1)]
    assert len(set(result.labels)) > 1  # the label follows the text
    top = single.classify(TEXTS, top_k=2)
    assert top.labels == [[LABELS[i] for i in np.argsort(-row)[:2]] for row in probs]
    assert [p.score for p in top.predictions[0]] == pytest.approx(
        sorted(probs[0], reverse=True)[:2], abs=1e-5
    )


def test_multi_label_is_every_label_over_the_threshold(multi: vt.Client) -> None:
    probs, problem = expected("classify-multilabel")
    assert problem == "multi_label_classification"
    result = multi.classify(TEXTS, label_names=LABELS)
    np.testing.assert_allclose(result.probs, probs, atol=1e-5)
    assert result.multi_label
    over = [[LABELS[i] for i in np.argsort(-row) if row[i] > 0.5] for row in probs]
    assert result.labels == over
    assert any(len(labels) >= 2 for labels in over)  # more than one label applies somewhere
    assert multi.classify(TEXTS, label_names=LABELS, threshold=0.1).labels == [
        [LABELS[i] for i in np.argsort(-row) if row[i] > 0.1] for row in probs
    ]
    assert multi.classify(TEXTS, label_names=LABELS, top_k=1).labels == [labels[:1] for labels in over]


def test_multi_label_forced_off_gives_the_servers_argmax(multi: vt.Client) -> None:
    result = multi.classify(TEXTS, multi_label=False)
    assert not result.multi_label and result.labels == [
        LABELS[i] for i in expected("classify-multilabel")[0].argmax(1)
    ]
