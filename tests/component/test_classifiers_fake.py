"""FakeVLLM as a multi-label classifier and as a token classifier, through the sync and async clients:
the requests ``classify`` and ``token_classify`` send and the results they build from vLLM-shaped
answers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vllm_tasks as vt
from vllm_tasks.testing import FakeVLLM, token_classifier_files

TAGS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
TEXTS = ["Ada Lovelace lived in London.", "Paris is big."]


def test_a_multi_label_server_gives_label_sets() -> None:
    labels = ("sports", "politics", "science", "arts")
    with FakeVLLM(multi_label=True, labels=labels) as fake, vt.Client(fake.url) as client:
        result = client.classify(["hello", "world x"], label_names=labels)
    assert result.multi_label
    assert result.labels == [[labels[i] for i in np.argsort(-row) if row[i] > 0.5] for row in result.probs]
    assert result.labels[0] != result.labels[1]


def test_token_classify_sends_token_ids_and_reads_per_token_rows(tmp_path: Path) -> None:
    folder = token_classifier_files(tmp_path / "ner", TEXTS, TAGS)
    with FakeVLLM(token_classifier=True, labels=TAGS) as fake, vt.Client(fake.url) as client:
        fake.settings.root = str(folder)  # /v1/models names the model's directory
        result = client.token_classify(TEXTS)  # the tokenizer from there
        pooling = [r for r in fake.requests if r.path == "/pooling"][-1].json
        tokenize = [r for r in fake.requests if r.path == "/tokenize"][-1].json
    assert pooling["task"] == "token_classify" and pooling["use_activation"] is False
    assert pooling["input"][1][0] == 101 and pooling["input"][1][-1] == 102  # ids as they are, specials in
    assert tokenize["prompt"] == TEXTS[0]  # one check of the tokenizer
    assert result.aggregation == "simple" and len(result.entities) == 2
    for text, found in zip(TEXTS, result.entities, strict=True):
        assert found and all(e.text == text[e.start : e.end] and "-" not in e.label for e in found)
    assert result.usage.prompt_tokens > 0


def test_the_async_client_gives_the_same_entities(tmp_path: Path) -> None:
    folder = token_classifier_files(tmp_path / "ner", TEXTS, TAGS)

    async def both() -> tuple[vt.types.TokenClassificationResult, vt.types.TokenClassificationResult]:
        async with vt.AsyncClient(fake.url) as client:
            return (
                await client.token_classify(TEXTS, aggregation=None, tokenizer=folder),
                await client.token_classify(TEXTS, aggregation="max", tokenizer=folder),
            )

    with FakeVLLM(token_classifier=True, labels=TAGS) as fake, vt.Client(fake.url) as client:
        tokens, words = asyncio.run(both())
        assert tokens == client.token_classify(TEXTS, aggregation=None, tokenizer=folder)
        assert words == client.token_classify(TEXTS, aggregation="max", tokenizer=folder)
    assert all(e.index is not None for e in tokens.entities[0])
    assert tokens != words


@pytest.mark.parametrize(
    ("settings", "served", "refused"),
    [
        ({"token_classifier": True, "labels": TAGS}, [], ["classify", "embed", "score", "rerank"]),
        ({"reward": "token"}, [], ["classify", "embed", "score", "rerank"]),
        ({"reward": "sequence"}, ["classify", "score", "rerank"], ["embed"]),
    ],
    ids=["token-classifier", "token-reward", "sequence-reward"],
)
def test_a_mounted_route_the_active_task_does_not_serve_is_vllms_501(
    settings: dict[str, Any], served: list[str], refused: list[str]
) -> None:
    calls: dict[str, Callable[[vt.Client], object]] = {
        "classify": lambda c: c.classify(["hello"]),
        "embed": lambda c: c.embed(["hello"]),
        "score": lambda c: c.score("q", ["d"]),
        "rerank": lambda c: c.rerank("q", ["d"]),
    }
    with FakeVLLM(**settings) as fake, vt.Client(fake.url, max_retries=0) as client:
        for name in served:
            calls[name](client)
        for name in refused:
            with pytest.raises(vt.EndpointNotServed) as caught:
                calls[name](client)
            assert (caught.value.status_code, caught.value.reason) == (501, "inactive"), name
