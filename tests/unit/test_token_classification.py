"""``token_classify``'s pure parts: the local tokenizer, its check against the server's, and the answer's
shape. The aggregation itself is compared with transformers' pipeline on real vLLM
(tests/contract/test_token_classify.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import vllm_tasks as vt
from vllm_tasks.testing import token_classifier_files
from vllm_tasks.testing.content import Vocabulary
from vllm_tasks.token_classification import (
    TokenClassifyParams,
    check_server_tokens,
    entities,
    load_tokenizer,
    softmax,
    token_texts,
)

TAGS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
TEXT = "Zoë  Müller, née Ångström, left Köln."


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return token_classifier_files(tmp_path / "model", [TEXT], TAGS)


def rows(tags: list[int]) -> np.ndarray:
    """Logits of one text whose tokens get ``tags`` ([CLS] and [SEP] around them)."""
    logits = np.full((len(tags) + 2, len(TAGS)), -4.0, np.float32)
    for row, tag in enumerate([0, *tags, 0], start=0):
        logits[row, tag] = 4.0
    return logits


def test_offsets_are_characters_of_the_callers_text(folder: Path) -> None:
    local = load_tokenizer(folder, None)
    encoding = local.encode(TEXT)
    assert encoding.ids == Vocabulary().encode(TEXT, special=True)  # the fake server's tokens
    # Zoë Müller , née Ångström , left Köln .
    tags = [1, 2, 0, 0, 3, 0, 0, 3, 0]
    found = entities(TEXT, encoding, rows(tags), local, names=TAGS, params=TokenClassifyParams())
    assert [(e.label, e.text, e.start, e.end) for e in found] == [
        ("PER", "Zoë  Müller", 0, 11),
        ("LOC", "Ångström", TEXT.index("Å"), TEXT.index("Å") + 8),
        ("LOC", "Köln", TEXT.index("K"), TEXT.index("K") + 4),
    ]
    tokens = entities(
        TEXT, encoding, rows(tags), local, names=TAGS, params=TokenClassifyParams(aggregation=None)
    )
    assert [(e.label, e.text, e.index) for e in tokens[:2]] == [("B-PER", "Zoë", 1), ("I-PER", "Müller", 2)]


def test_labels_come_from_the_config_beside_the_tokenizer(folder: Path) -> None:
    assert load_tokenizer(folder / "tokenizer.json", None).label_names == TAGS
    assert load_tokenizer(None, str(folder)).label_names == TAGS  # the served model's root


def test_another_tokenizer_is_named() -> None:
    check_server_tokens([101, 5, 102], [101, 5, 102])
    with pytest.raises(vt.InvalidInputError, match=r"token 1 of texts\[0\].*differs from the server's"):
        check_server_tokens([101, 5, 102], [101, 6, 102])
    with pytest.raises(vt.InvalidInputError, match=r"token 2 of texts\[0\]"):
        check_server_tokens([101, 5], [101, 5, 102])


def test_no_tokenizer_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(vt.InvalidInputError, match=r"tokenizer='/no/such'.*huggingface-cli download"):
        load_tokenizer(None, "/no/such")
    with pytest.raises(vt.InvalidInputError, match="cannot be read"):
        load_tokenizer(tmp_path / "tokenizer.json", None)
    with pytest.raises(vt.InvalidInputError, match="is not a fast tokenizer"):
        load_tokenizer(object(), None)


def test_an_answer_of_another_shape_is_unexpected(folder: Path) -> None:
    local = load_tokenizer(folder, None)
    encoding = local.encode(TEXT)
    with pytest.raises(vt.UnexpectedResponse, match="logits of shape"):
        entities(TEXT, encoding, rows([0] * 8), local, names=TAGS, params=TokenClassifyParams())


def test_softmax_matches_the_pipelines() -> None:
    logits = np.array([[1.0, 2.0, 3.0]], np.float32)
    assert softmax(logits).dtype == np.float32
    np.testing.assert_allclose(softmax(logits), np.exp(logits) / np.exp(logits).sum(), rtol=1e-6)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"aggregation": "none"}, "aggregation='none'"),
        ({"ignore_labels": "O"}, "ignore_labels"),
        ({"label_names": []}, "label_names"),
        ({"label_names": ["O", 1]}, r"label_names\[1\]"),
    ],
)
def test_bad_options_are_refused(options: dict[str, object], message: str) -> None:
    with pytest.raises(vt.InvalidInputError, match=message):
        TokenClassifyParams(**options)  # type: ignore[arg-type]


def test_texts_are_strings() -> None:
    assert token_texts("a b") == ["a b"]
    with pytest.raises(vt.InvalidInputError, match=r"texts\[1\]"):
        token_texts(["a", 3])
    with pytest.raises(vt.InvalidInputError, match="texts"):
        token_texts(b"bytes")
