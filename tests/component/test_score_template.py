"""The missing score template (Qwen3-Reranker served without --chat-template) found by probe() and by the
first rerank()/score() of a Qwen3-Reranker-named model, against FakeVLLM configured like the
`qwen3-reranker` and `qwen3-reranker-no-template` fixtures (tests/contract/test_qwen3_reranker.py runs the
same on the real servers)."""

from __future__ import annotations

import asyncio
import warnings

import pytest

import vllm_tasks as vt
from vllm_tasks.score_template import ScoreTemplateMissingWarning
from vllm_tasks.testing import EMBEDDING_TASKS, RERANKER_TASKS, FakeVLLM

from ..fakes import fake_like

QUERY = "capital of France?"
DOCS = ["Paris is the capital of France.", "Bananas are yellow."]


def test_probe_advises_and_the_first_call_warns_once() -> None:
    with fake_like("qwen3-reranker-no-template") as server, vt.Client(server.base_url) as client:
        report = client.probe()
        assert report.score_template_missing is True
        advisory = next(a for a in report.advisories if a.id == "score-template-missing")
        assert "--chat-template" in advisory.message and "--hf-overrides" in advisory.message
        with pytest.warns(ScoreTemplateMissingWarning, match="qwen3-reranker-tiny") as caught:
            client.rerank(QUERY, DOCS)
        assert caught[0].filename == __file__  # points at the caller
        with warnings.catch_warnings():
            warnings.simplefilter("error", ScoreTemplateMissingWarning)
            client.score(QUERY, DOCS)  # once per model and client
            client.rerank(QUERY, DOCS)
        assert len(server.fake.received("/tokenize")) == 2 + 2  # probe's check, then the first call's


def test_async_client_warns_too() -> None:
    async def main(url: str) -> None:
        async with vt.AsyncClient(url) as client:
            with pytest.warns(ScoreTemplateMissingWarning):
                await client.score(QUERY, DOCS)

    with fake_like("qwen3-reranker-no-template") as server:
        asyncio.run(main(server.base_url))


def test_with_the_template_nothing_is_flagged() -> None:
    with fake_like("qwen3-reranker") as server, vt.Client(server.base_url) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("error", ScoreTemplateMissingWarning)
            client.rerank(QUERY, DOCS)
        report = client.probe()
    assert report.score_template_missing is False
    assert "score-template-missing" not in [a.id for a in report.advisories]


def test_other_cross_encoders_are_checked_by_probe_only() -> None:
    """The first call checks Qwen3-Reranker names only; probe() checks every cross-encoder."""
    fake = FakeVLLM(model="bge-reranker", tasks=RERANKER_TASKS, score_template=False)
    with fake, vt.Client(fake.start().url) as client:
        client.rerank(QUERY, DOCS)
        assert fake.received("/tokenize") == []
        assert client.probe().score_template_missing is True


def test_embedding_models_are_not_checked() -> None:
    fake = FakeVLLM(model="qwen3-reranker", tasks=EMBEDDING_TASKS, score_template=False)
    with fake, vt.Client(fake.start().url) as client:
        client.rerank(QUERY, DOCS)
        report = client.probe()
        assert fake.received("/tokenize") == []
    assert report.score_template_missing is None
