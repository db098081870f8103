"""client.verify() (both clients) with references and servers that answer what cannot be compared: NaN or
infinite vectors, another width or number of rows. Each is refused with a typed error naming the reference
call (or the server's answer), never reported as agreeing nor as a raw numpy error."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import vllm_tasks as vt
from vllm_tasks.testing import EMBEDDING_TASKS, FakeVLLM

WIDTH = 16
TEXTS = ["a cat", "a dog", "stock markets"]


class Reference:
    """FakeVLLM's own model as the reference, with one answer spoiled: ``spoil(call, vectors)`` replaces
    what ``call`` (``"encode"``, ``"encode:query"``, ``"pooled"``) returns."""

    def __init__(self, fake: FakeVLLM, call: str, spoil: Callable[[Any], Any]) -> None:
        self.fake, self.call, self.spoil = fake, call, spoil
        self.prompts = {"query": "query: "}
        self.pooling = "lasttoken"
        self.normalizes = True
        self.max_tokens: int | None = 512

    def _vectors(self, texts: Sequence[str], prefix: str = "") -> npt.NDArray[Any]:
        return np.stack([self.fake.vector(prefix + text) for text in texts])

    def encode(self, texts: Sequence[str], prompt_name: str | None = None) -> Any:
        vectors = self._vectors(texts, self.prompts.get(prompt_name or "", ""))
        call = "encode" if prompt_name is None else f"encode:{prompt_name}"
        return self.spoil(vectors) if call == self.call else vectors

    def pooled(self, texts: Sequence[str]) -> Any:
        poolings = {"mean": -self._vectors(texts, "other "), "cls": self._vectors(texts, "cls ")}
        return self.spoil(poolings) if self.call == "pooled" else poolings


def nan_row(vectors: npt.NDArray[Any]) -> npt.NDArray[Any]:
    spoiled = vectors.copy()
    spoiled[1] = np.nan
    return spoiled


@pytest.fixture
def fake() -> Iterator[FakeVLLM]:
    with FakeVLLM(tasks=EMBEDDING_TASKS, width=WIDTH, input_types=("query",)) as server:
        yield server


@pytest.mark.parametrize(
    ("call", "spoil", "message"),
    [
        ("encode", nan_row, r"reference\.encode\(texts\).*NaN or an infinity \(texts\[1\]\)"),
        ("encode", lambda v: np.full_like(v, np.nan), r"reference\.encode\(texts\).*NaN"),
        ("encode", lambda v: v * np.inf, r"reference\.encode\(texts\).*NaN or an infinity"),
        ("encode", lambda v: v[:, :8], r"shape \(3, 8\) for 3 texts of width 16"),
        ("encode", lambda v: v[:2], r"shape \(2, 16\) for 3 texts"),
        ("encode", lambda v: v[0], r"shape \(16,\) for 3 texts"),
        ("encode", lambda v: [["x"] * WIDTH] * 3, "not numbers"),
        ("encode", lambda v: [[1.0], [1.0, 2.0], []], "returned no matrix"),
        ("encode:query", nan_row, r"reference\.encode\(texts, 'query'\).*NaN"),
        ("encode:query", lambda v: v[:, :4], r"reference\.encode\(texts, 'query'\).*width 16"),
        ("pooled", lambda p: {**p, "mean": nan_row(p["mean"])}, r"reference\.pooled\(texts\)\['mean'\].*NaN"),
        ("pooled", lambda p: {**p, "cls": p["cls"][:, :3]}, r"\['cls'\].*shape \(3, 3\)"),
        ("pooled", lambda p: list(p.values()), r"reference\.pooled\(texts\).*returned a list"),
    ],
)
def test_a_reference_that_cannot_be_compared_is_refused(
    fake: FakeVLLM, make_client: Callable[..., Any], call: str, spoil: Callable[[Any], Any], message: str
) -> None:
    with pytest.raises(vt.InvalidInputError, match=message) as caught:
        make_client(fake.url).verify(Reference(fake, call, spoil), texts=TEXTS)
    assert caught.value.field == "reference"


def test_an_unspoiled_reference_agrees(fake: FakeVLLM, make_client: Callable[..., Any]) -> None:
    report = make_client(fake.url).verify(Reference(fake, "", lambda v: v), texts=TEXTS)
    assert report.agrees and report.min_cosine > 0.9999


def test_non_finite_server_vectors_are_an_unexpected_answer(
    fake: FakeVLLM, make_client: Callable[..., Any]
) -> None:
    rows = [{"index": i, "object": "embedding", "embedding": [1e39] * WIDTH} for i in range(len(TEXTS))]
    body = json.dumps({"object": "list", "model": "m", "data": rows, "usage": {"prompt_tokens": 3}})
    fake.fail(200, path="/v1/embeddings", body=body.encode(), content_type="application/json", times=None)
    with pytest.raises(vt.UnexpectedResponse, match="non-finite") as caught:
        make_client(fake.url).verify(Reference(fake, "", lambda v: v), texts=TEXTS)
    assert caught.value.kind == "decode"


def test_prompted_server_vectors_of_another_width_are_an_unexpected_answer(
    fake: FakeVLLM, make_client: Callable[..., Any]
) -> None:
    narrow = base64.b64encode(np.ones(4, "<f4").tobytes()).decode()
    body = {"id": "e", "embeddings": {"base64": [narrow] * len(TEXTS)}, "texts": TEXTS, "meta": {}}
    fake.fail(200, path="/v2/embed", body=json.dumps(body).encode(), content_type="application/json")
    with pytest.raises(vt.UnexpectedResponse, match=r"prompt_name='query'.*\(3, 4\).*\(3, 16\)") as caught:
        make_client(fake.url).verify(Reference(fake, "", lambda v: v), texts=TEXTS)
    assert caught.value.kind == "decode"


def test_a_sample_wholly_over_the_context_checks_no_prompt(make_client: Callable[..., Any]) -> None:
    with FakeVLLM(tasks=EMBEDDING_TASKS, width=WIDTH, max_model_len=8, input_types=("query",)) as short:
        report = make_client(short.url).verify(Reference(short, "", lambda v: v), texts=["word " * 20] * 2)
        assert not short.received("/v2/embed")  # no prompted request of no text
    assert [finding.kind for finding in report.findings] == ["truncation"] and report.prompts == {}
