"""One vector per token (vLLM's token_embed task with ALL pooling, as Jina v4 vllm-retrieval and ColBERT-style
models are served) on real vLLM against sentence-transformers' token embeddings of the same weights: the
`late-interaction` fixture (MiniLM with `--pooler-config '{"task": "token_embed"}'`), so no server is started
for it alone."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import vllm_tasks as vt
from tests.zoo import reference
from vllm_tasks.types.scoring import ScorerKind

pytestmark = pytest.mark.contract

TEXTS = ["where do cats live", "Paris is the capital of France.", "bread"]


@pytest.fixture(scope="module")
def tokens() -> list[np.ndarray]:
    matrices = reference("token-embeddings", "late-interaction", {"texts": TEXTS})["matrices"]
    return [np.array(matrix) for matrix in matrices]


def unit(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.linalg.norm(matrix, axis=-1, keepdims=True)


def test_per_token_vectors_equal_the_reference(vllm_late_interaction: Any, tokens: list[np.ndarray]) -> None:
    with vt.Client(vllm_late_interaction.base_url) as client:
        served = client.pool(TEXTS)
        raw = client.pool(TEXTS, use_activation=False)
        assert client.scorer_kind() is ScorerKind.LATE_INTERACTION
    for got, expected, plain in zip(served.data, tokens, raw.data, strict=True):
        assert got.shape == expected.shape  # one row per token, the final-norm hidden states' width
        np.testing.assert_allclose(got, unit(expected), atol=1e-3)  # vLLM 0.32 normalises each token
        np.testing.assert_allclose(plain, expected, atol=1e-3 * np.abs(expected).max())
    np.testing.assert_allclose(raw.normalized().data[0], served.data[0], atol=1e-4)
    means = unit(np.stack([matrix.mean(axis=0) for matrix in tokens]))
    np.testing.assert_allclose(raw.mean(), means, atol=1e-4)
