"""The LlamaIndex adapters against the real CPU fixtures: a VectorStoreIndex over real MiniLM embeddings
puts the answering node first (sync and async), and VLLMRerank orders nodes exactly as the SDK's own
``rerank`` scores them (the `rerank` fixture's head is random, so meaning is not asserted), alone and
inside a query engine. MockLLM everywhere: nothing reaches for OpenAI.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from llama_index.core import Settings, SummaryIndex, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.schema import NodeWithScore, TextNode

import vllm_tasks as vt
from vllm_tasks.integrations.llama_index import VLLMEmbedding, VLLMRerank

pytestmark = pytest.mark.integration

FACTS = {
    "eiffel": "The Eiffel Tower was completed in 1889 and stands in Paris.",
    "photosynthesis": "Plants use photosynthesis to turn sunlight and water into sugar.",
    "pacific": "The Pacific is the largest and deepest ocean on Earth.",
    "python": "Python is a programming language created by Guido van Rossum.",
    "everest": "Mount Everest is the highest mountain above sea level.",
    "mitochondria": "Mitochondria produce most of the energy a cell needs.",
}
QUESTIONS = {
    "When was the Eiffel Tower finished?": "eiffel",
    "Which ocean is the biggest?": "pacific",
    "Who designed the Python language?": "python",
    "What is the tallest mountain in the world?": "everest",
}


@pytest.fixture(autouse=True)
def no_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Settings, "_llm", MockLLM())


def nodes() -> list[TextNode]:
    return [TextNode(text=text, id_=key) for key, text in FACTS.items()]


def test_vector_store_index_puts_the_answer_first(vllm_embed: Any) -> None:
    embed_model = VLLMEmbedding(base_url=vllm_embed.base_url, model=vllm_embed.model)
    index = VectorStoreIndex(nodes(), embed_model=embed_model)
    retriever = index.as_retriever(similarity_top_k=3)
    for question, key in QUESTIONS.items():
        assert retriever.retrieve(question)[0].node.node_id == key, question
    with vt.Client(vllm_embed.base_url) as client:
        expected = client.embed(FACTS["python"]).vector
    np.testing.assert_allclose(np.array(index.vector_store.get("python")), expected, atol=1e-6)

    async def retrieve_async() -> list[str]:
        async_index = VectorStoreIndex(nodes(), embed_model=embed_model, use_async=True)
        async_retriever = async_index.as_retriever(similarity_top_k=1)
        found = [(await async_retriever.aretrieve(q))[0].node.node_id for q in QUESTIONS]
        await embed_model.aclose()
        return found

    assert asyncio.run(retrieve_async()) == list(QUESTIONS.values())


def test_rerank_orders_nodes_by_the_sdks_scores(vllm_rerank: Any) -> None:
    question = "Who designed the Python language?"
    scored = [NodeWithScore(node=node, score=0.0) for node in nodes()]
    with vt.Client(vllm_rerank.base_url) as client:
        expected = client.rerank(question, list(FACTS.values()), top_n=3)
    keys = list(FACTS)
    rerank = VLLMRerank(base_url=vllm_rerank.base_url, top_n=3)
    for ranked in (
        rerank.postprocess_nodes(scored, query_str=question),
        asyncio.run(rerank.apostprocess_nodes(scored, query_str=question)),
    ):
        assert [n.node.node_id for n in ranked] == [keys[i] for i in expected.indices]
        assert [n.score for n in ranked] == pytest.approx(list(expected.scores), abs=1e-6)
    engine = SummaryIndex(nodes()).as_query_engine(llm=MockLLM(), node_postprocessors=[rerank])
    response = engine.query(question)
    assert [n.node.node_id for n in response.source_nodes] == [keys[i] for i in expected.indices]
