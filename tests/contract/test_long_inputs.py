"""``embed(long_inputs=...)`` on a real server whose context a document overflows, against a reference made
by hand from the same model's per-window vectors.

Fixture: `embed` (all-MiniLM-L6-v2, ``--max-model-len 256``). The reference is server-fixtures/references.py's
``split_mean``: the model's own tokenizer, the windows, each window embedded by sentence-transformers as
``[CLS] window [SEP]``, and the token-count-weighted mean normalised, computed there by hand.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import vllm_tasks as vt
from tests.zoo import reference as zoo_reference

pytestmark = [pytest.mark.contract]

TOPICS = ["rivers", "mountains", "harbours", "forests", "deserts", "glaciers"]
#: Two documents of about 700 and 500 tokens: over the fixture's 256-token context.
DOCS = [
    " ".join(
        f"Chapter {i} describes the {TOPICS[i % 6]} of region {i * 7}, their history and people."
        for i in range(50)
    ),
    " ".join(
        f"Recipe {i}: mix {i} cups of flour with {i + 2} eggs and bake for {10 + i} minutes."
        for i in range(30)
    ),
]
SHORT = "a short note that fits"
#: Float32 on both sides; the server batches windows of different lengths, the reference runs one each.
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def client(vllm_embed: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_embed.base_url, model=vllm_embed.model, timeout=120) as client:
        yield client


@pytest.fixture(scope="module")
def reference() -> dict[tuple[int, int], dict[str, Any]]:
    """The reference for the default windows (254 tokens: 256 less [CLS] and [SEP]; overlap 254 // 8)
    and for 100-token windows overlapping by 20."""
    asks = [(254, 31), (100, 20)]
    answers = zoo_reference(
        "split-mean", "embed", [{"texts": DOCS, "window": w, "overlap": o} for w, o in asks]
    )
    return dict(zip(asks, answers, strict=True))


def test_the_default_still_refuses_an_over_long_document(client: vt.Client) -> None:
    with pytest.raises(vt.ContextLengthExceeded):
        client.embed(DOCS[:1])


@pytest.mark.parametrize(("window", "overlap"), [(254, 31), (100, 20)])
def test_split_mean_equals_the_weighted_mean_of_the_models_window_vectors(
    client: vt.Client, reference: dict[tuple[int, int], dict[str, Any]], window: int, overlap: int
) -> None:
    expected = reference[(window, overlap)]
    chunking = {} if window == 254 else {"chunk_tokens": window, "chunk_overlap": overlap}
    result = client.embed([SHORT, *DOCS], long_inputs="split_mean", **chunking)
    assert result.chunks is not None
    for doc, chunks, ranges, chunk_vectors in zip(
        DOCS, result.chunks[1:], expected["ranges"], expected["chunks"], strict=True
    ):
        assert chunks.token_ranges == [tuple(r) for r in ranges], doc[:40]
        assert np.abs(chunks.vectors - np.array(chunk_vectors)).max() <= TOLERANCE
    assert np.abs(result.vectors[1:] - np.array(expected["vectors"])).max() <= TOLERANCE
    assert float(result.vectors[1] @ result.vectors[2]) < 0.9  # two documents, two vectors
    np.testing.assert_allclose(np.linalg.norm(result.vectors, axis=1), 1.0, atol=1e-6)
    # a text that fits goes as it is: the same vector as a plain call
    np.testing.assert_allclose(result.vectors[0], client.embed(SHORT).vector, atol=1e-6)
    assert result.chunks[0].token_ranges == [
        (0, len(client.tokenize(SHORT, add_special_tokens=False).tokens))
    ]


def test_the_server_and_the_reference_split_the_same_tokens(
    client: vt.Client, reference: dict[tuple[int, int], dict[str, Any]]
) -> None:
    for doc, ids in zip(DOCS, reference[(254, 31)]["token_ids"], strict=True):
        assert client.tokenize(doc, add_special_tokens=False).tokens.tolist() == ids
        assert len(ids) > 256


def test_truncate_keeps_the_models_maximum(client: vt.Client) -> None:
    truncated = client.embed(DOCS, long_inputs="truncate")
    np.testing.assert_allclose(
        truncated.vectors, client.embed(DOCS, truncate_prompt_tokens=256).vectors, atol=1e-6
    )
    assert truncated.usage.prompt_tokens == 2 * 256
