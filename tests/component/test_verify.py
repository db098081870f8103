"""client.verify() on FakeVLLM with references built to disagree in one known way each: every diagnosis
names its cause (the real-server proof, with sentence-transformers, is tests/contract/test_verify.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import vllm_tasks as vt
from vllm_tasks import cli, verify
from vllm_tasks.testing import EMBEDDING_TASKS, FakeVLLM

WIDTH = 64
PROMPT = "query: "  # what FakeVLLM puts before a text for input_type "query"


class Reference:
    """A reference of FakeVLLM's model; ``change`` makes it differ from the server in one way."""

    def __init__(self, fake: FakeVLLM, change: str = "", *, prompts: dict[str, str] | None = None) -> None:
        self.fake, self.change = fake, change
        self.prompts = {"query": PROMPT, "document": ""} if prompts is None else prompts
        self.pooling = "lasttoken"
        self.normalizes = change != "raw"
        self.max_tokens: int | None = 512

    def _server(self, texts: Sequence[str]) -> npt.NDArray[Any]:
        return np.stack([self.fake.vector(text) for text in texts])

    def _other(self, texts: Sequence[str]) -> npt.NDArray[Any]:
        return np.stack([self.fake.vector(text + " other weights") for text in texts])

    def encode(self, texts: Sequence[str], prompt_name: str | None = None) -> npt.NDArray[Any]:
        prefix = self.prompts.get(prompt_name or "", "")
        texts = [prefix + text for text in texts]
        if self.change in ("pooling", "other"):
            return self._other(texts)
        vectors = self._server(texts)
        if self.change == "precision":
            noise = np.random.default_rng(0).normal(0.0, 0.06, vectors.shape) / np.sqrt(WIDTH)
            return vectors + noise.astype(np.float32)
        return vectors * 3.0 if self.change == "raw" else vectors

    def pooled(self, texts: Sequence[str]) -> dict[str, npt.NDArray[Any]]:
        other = self._other(texts)
        return {"mean": self._server(texts) if self.change == "pooling" else -other, "cls": -other}


@pytest.fixture
def fake() -> Any:
    with FakeVLLM(tasks=EMBEDDING_TASKS, width=WIDTH, input_types=("query", "document")) as server:
        yield server


def kinds(report: verify.VerifyReport) -> list[str]:
    return [finding.kind for finding in report.findings]


def test_an_agreeing_server_gets_only_the_prompt_advice(
    fake: FakeVLLM, make_client: Callable[..., Any]
) -> None:
    report = make_client(fake.url).verify(Reference(fake))
    assert report.agrees and report.min_cosine > 0.9999 and report.neighbour_overlap == 1.0
    assert kinds(report) == ["prompt"] and report.prompts == {"query": pytest.approx(1.0)}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("pooling", ["pooling"]),
        ("raw", ["normalisation"]),
        ("precision", ["precision"]),
        ("other", ["different_model"]),
    ],
)
def test_each_cause_is_named(
    fake: FakeVLLM, make_client: Callable[..., Any], change: str, expected: list[str]
) -> None:
    report = make_client(fake.url).verify(Reference(fake, change), texts=["a cat", "a dog", "stock markets"])
    assert not report.agrees
    assert [kind for kind in kinds(report) if kind != "prompt"] == expected
    if change == "pooling":
        assert "pools with MEAN where the model's sentence-transformers config says LAST" in str(report)


def test_a_server_without_the_models_prompts_is_told_to_take_prompt_text(
    make_client: Callable[..., Any],
) -> None:
    with FakeVLLM(tasks=EMBEDDING_TASKS, width=WIDTH) as bare:  # no input types: /v2/embed refuses them
        report = make_client(bare.url).verify(Reference(bare))
    assert kinds(report) == ["prompts_not_served", "prompt"] and report.prompts == {"query": None}
    assert "pass prompt='query: ' instead" in str(report)


def test_texts_over_the_servers_context_are_named(make_client: Callable[..., Any]) -> None:
    with FakeVLLM(tasks=EMBEDDING_TASKS, width=WIDTH, max_model_len=16, input_types=("query",)) as short:
        report = make_client(short.url).verify(
            Reference(short), texts=["a cat", "a dog", " ".join(["word"] * 40)]
        )
    assert kinds(report)[0] == "truncation" and "texts[2] is over the server's context of 16 tokens" in str(
        report
    )
    assert report.min_cosine > 0.9999  # the texts read whole agree


def test_a_sample_wholly_over_the_context_says_so(make_client: Callable[..., Any]) -> None:
    with FakeVLLM(tasks=EMBEDDING_TASKS, width=WIDTH, max_model_len=8) as short:
        report = make_client(short.url).verify(Reference(short, prompts={}), texts=["word " * 20] * 2)
    assert not report.agrees and kinds(report) == ["truncation"] and report.min_cosine == 0.0


def test_bad_samples_and_references_are_refused(fake: FakeVLLM, make_client: Callable[..., Any]) -> None:
    client = make_client(fake.url)
    with pytest.raises(vt.InvalidInputError, match="texts"):
        client.verify(Reference(fake), texts=["only one"])
    with pytest.raises(vt.InvalidInputError, match=r"texts\[1\]"):
        client.verify(Reference(fake), texts=["a", " "])
    with pytest.raises(vt.InvalidInputError, match="reference"):
        client.verify(42)
    assert not fake.received("/v1/embeddings")


def test_a_server_whose_prompt_text_differs_is_named(fake: FakeVLLM, make_client: Callable[..., Any]) -> None:
    # The server puts "query: " before a query; this model's prompt is "search: ".
    report = make_client(fake.url).verify(Reference(fake, prompts={"query": "search: "}))
    assert not report.agrees and kinds(report) == ["prompt_differs", "prompt"]


def test_a_directory_needs_the_verify_extra(
    fake: FakeVLLM, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # The test venv has no sentence-transformers (the fixture venv has it: tests/contract/test_verify.py).
    with pytest.raises(vt.MissingDependency, match=r"vllm-tasks\[verify\]"):
        verify.SentenceTransformerReference(tmp_path)
    assert cli.main(["verify", fake.url, "--reference", str(tmp_path)]) == cli.EXIT_USAGE
    assert "vllm-tasks[verify]" in capsys.readouterr().err


def test_the_report_has_a_notebook_view(fake: FakeVLLM) -> None:
    with vt.Client(fake.url) as client:
        html = client.verify(Reference(fake, "raw"))._repr_html_()
    assert "VerifyReport" in html and "normalisation" in html and "<script" not in html
