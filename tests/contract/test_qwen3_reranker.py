"""Qwen3-Reranker served as its operators do, against the model card's formula, and the missing template.

Fixtures: `qwen3-reranker` (a tiny seeded Qwen3ForCausalLM served with the recipe's flags: --convert classify,
the yes/no --hf-overrides, --chat-template server-fixtures/templates/qwen3_reranker.jinja),
`qwen3-reranker-no-template` (the same without --chat-template) and `rerank` (MiniLM cross-encoder, which
must not be flagged). The reference is server-fixtures/references.py's ``qwen3_reranker``: the same weights
in transformers, P(yes) = softmax([logit_no, logit_yes])[1] at the last token of the model card's prompt.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import vllm_tasks as vt
from tests.zoo import reference as zoo_reference
from vllm_tasks.score_template import ScoreTemplateMissingWarning

pytestmark = [
    pytest.mark.contract,
    pytest.mark.vllm_min("0.32.0", "is_original_qwen3_reranker and `instruction` as today's vLLM reads them"),
]

QUERY = "What is the capital of France?"
DOCS = [
    "Paris is the capital of France.",
    "Bananas are yellow.",
    "France is in Europe.",
    "Berlin is the capital of Germany.",
    "vLLM serves embeddings and rerankers.",
]
INSTRUCTION = "Given a question, find the passage that names a city"
#: Float32 on both sides; the server batches pairs of different lengths (padding-free), transformers not.
TOLERANCE = 1e-3


@pytest.fixture(scope="module")
def reference() -> dict[str | None, np.ndarray]:
    """The reference scores of DOCS for QUERY, without and with INSTRUCTION (one subprocess)."""
    plain = {"query": QUERY, "documents": DOCS}
    answers = zoo_reference(
        "qwen3-reranker", "qwen3-reranker", [plain, {**plain, "instruction": INSTRUCTION}]
    )
    return {None: np.array(answers[0]["scores"]), INSTRUCTION: np.array(answers[1]["scores"])}


@pytest.fixture(scope="module")
def qwen3_client(vllm_qwen3_reranker: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_qwen3_reranker.base_url, model=vllm_qwen3_reranker.model, timeout=120) as client:
        yield client


def _reranked(client: vt.Client, instruction: str | None) -> np.ndarray:
    """The rerank() scores in DOCS order."""
    result = client.rerank(QUERY, DOCS, instruction=instruction)
    scores = np.empty(len(DOCS))
    scores[result.indices] = result.scores
    return scores


@pytest.mark.parametrize("instruction", [None, INSTRUCTION])
def test_scores_equal_the_model_card_formula(
    qwen3_client: vt.Client, reference: dict[str | None, np.ndarray], instruction: str | None
) -> None:
    expected = reference[instruction]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScoreTemplateMissingWarning)  # served with its template: no warning
        reranked = _reranked(qwen3_client, instruction)
        scored = qwen3_client.score(QUERY, DOCS, instruction=instruction).scores
    assert np.abs(reranked - expected).max() <= TOLERANCE, (reranked, expected)
    assert np.abs(scored - expected).max() <= TOLERANCE, (scored, expected)
    assert list(np.argsort(-reranked)) == list(np.argsort(-expected))
    assert qwen3_client.scorer_kind() is vt.types.ScorerKind.CROSS_ENCODER


def test_the_instruction_reaches_the_template(reference: dict[str | None, np.ndarray]) -> None:
    """The two references differ: the comparisons above would catch a server that dropped the instruction."""
    assert np.abs(reference[None] - reference[INSTRUCTION]).max() > 10 * TOLERANCE


def test_probe_with_the_template_has_no_advisory(qwen3_client: vt.Client) -> None:
    report = qwen3_client.probe()
    assert report.score_template_missing is False
    assert "score-template-missing" not in [a.id for a in report.advisories]


def test_probe_and_first_call_flag_the_missing_template(
    vllm_qwen3_reranker_no_template: Any, reference: dict[str | None, np.ndarray]
) -> None:
    server = vllm_qwen3_reranker_no_template
    with vt.Client(server.base_url, model=server.model, timeout=120) as client:
        report = client.probe()
        assert report.score_template_missing is True
        advisory = next(a for a in report.advisories if a.id == "score-template-missing")
        assert "--chat-template" in advisory.message and "--hf-overrides" in advisory.message
        with pytest.warns(ScoreTemplateMissingWarning, match="--chat-template"):
            plain = _reranked(client, None)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ScoreTemplateMissingWarning)  # once per model and client
            instructed = _reranked(client, INSTRUCTION)
    # The pitfall itself: the instruction is dropped and the scores are not the model's.
    assert np.array_equal(plain, instructed)
    assert np.abs(plain - reference[None]).max() > 10 * TOLERANCE


def test_a_bert_cross_encoder_is_not_flagged(vllm_rerank: Any) -> None:
    """MiniLM ignores instructions too; its pairs carry separators, so the token counts tell it apart."""
    with vt.Client(vllm_rerank.base_url, model=vllm_rerank.model, timeout=120) as client:
        report = client.probe()
    assert report.score_template_missing is False
    assert "score-template-missing" not in [a.id for a in report.advisories]
