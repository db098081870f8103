"""Token classification (NER) through vLLM's ``/pooling`` against transformers' token-classification
pipeline on the same weights, for every aggregation strategy.

Fixture: `token-classify` (server-fixtures/build_classifiers.py: ``BertForTokenClassification``, the MiniLM
encoder and a seeded head over BIO tags of PER and LOC). The reference is server-fixtures/references.py's
``token_classification``: ``pipeline("token-classification", aggregation_strategy=...)``. The tags are noise
(random head) but vary along the text, so the strategies give different spans; the two texts give
different entities.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import vllm_tasks as vt
from tests.zoo import reference as zoo_reference
from vllm_tasks.token_classification import Aggregation

pytestmark = [
    pytest.mark.contract,
    pytest.mark.vllm_min("0.32.0", "the token-classify fixture is built and checked on today's vLLM only"),
]

TEXTS = [
    "Angela Merkel visited Paris and Washington last summer.",
    "The Eiffel tower in Paris is taller than Big Ben, said John Smithers.",
]
STRATEGIES: dict[str, Aggregation | None] = {
    "none": None,
    "simple": "simple",
    "first": "first",
    "average": "average",
    "max": "max",
}


@pytest.fixture(scope="module")
def reference() -> dict[str, list[list[dict[str, Any]]]]:
    answer: dict[str, list[list[dict[str, Any]]]] = zoo_reference(
        "token-classification", "token-classify", {"texts": TEXTS, "aggregations": list(STRATEGIES)}
    )
    return answer


@pytest.fixture(scope="module")
def ner(vllm_token_classify: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_token_classify.base_url, timeout=60) as client:
        yield client


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_entities_equal_the_pipeline(
    ner: vt.Client, reference: dict[str, list[list[dict[str, Any]]]], strategy: str
) -> None:
    expected = reference[strategy]
    assert expected[0] != expected[1] and all(expected)  # two texts, two sets of entities
    result = ner.token_classify(TEXTS, aggregation=STRATEGIES[strategy])
    for text, got, want in zip(TEXTS, result.entities, expected, strict=True):
        assert [(e.label, e.start, e.end) for e in got] == [(w["label"], w["start"], w["end"]) for w in want]
        assert [e.score for e in got] == pytest.approx([w["score"] for w in want], abs=1e-4)
        assert all(e.text == text[e.start : e.end] for e in got)


def test_the_strategies_differ(reference: dict[str, list[list[dict[str, Any]]]]) -> None:
    """What the comparison above covers: the four grouping strategies give four different answers
    (``first`` other spans than ``simple``, ``average`` and ``max`` other scores than ``first``)."""
    found = {
        s: [[(e["label"], e["start"], e["end"], round(e["score"], 4)) for e in row] for row in reference[s]]
        for s in STRATEGIES
    }
    assert len({str(found[s]) for s in ("simple", "first", "average", "max")}) == 4


def test_another_tokenizer_is_refused(ner: vt.Client, tmp_path: Any) -> None:
    """A tokenizer whose ids differ from the server's is named before any entity is made."""
    import tokenizers

    other = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "angela": 1}, unk_token="[UNK]"))
    with pytest.raises(vt.InvalidInputError, match="differs from the server's tokenizer"):
        ner.token_classify(TEXTS, tokenizer=other, label_names=["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])
