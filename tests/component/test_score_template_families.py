"""The first rerank() of any LLM reranker whose template vLLM ships checks for it, and the warning names
the family's own flags (FakeVLLM reads pairs as the bare concatenation, as vLLM does without
--chat-template)."""

from __future__ import annotations

import pytest

import vllm_tasks as vt
from vllm_tasks.score_template import ScoreTemplateMissingWarning
from vllm_tasks.testing import RERANKER_TASKS, FakeVLLM

QUERY = "capital of France?"
DOCS = ["Paris is the capital of France.", "Bananas are yellow."]


@pytest.mark.parametrize(
    ("model", "flag"),
    [
        ("mixedbread-ai/mxbai-rerank-base-v2", "mxbai_rerank_v2.jinja"),
        ("BAAI/bge-reranker-v2-gemma", "GemmaForSequenceClassification"),
        ("polaria-tech/zerank-2-reranker-vllm", "zerank2.jinja"),
    ],
)
def test_the_first_call_warns_with_the_familys_flags(model: str, flag: str) -> None:
    fake = FakeVLLM(model=model, tasks=RERANKER_TASKS, score_template=False)
    with fake, vt.Client(fake.start().url) as client:
        with pytest.warns(ScoreTemplateMissingWarning, match=flag):
            client.rerank(QUERY, DOCS)
        assert len(fake.received("/tokenize")) == 2


def test_with_the_template_the_check_runs_and_stays_quiet() -> None:
    fake = FakeVLLM(model="mixedbread-ai/mxbai-rerank-base-v2", tasks=RERANKER_TASKS, score_template=True)
    with fake, vt.Client(fake.start().url) as client:
        client.rerank(QUERY, DOCS)
        assert len(fake.received("/tokenize")) == 2
