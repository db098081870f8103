"""vllm_tasks.integrations.llama_index against FakeVLLM: VLLMEmbedding in a VectorStoreIndex (sync and
async, batched), VLLMRerank as a node postprocessor (alone and in a query engine), pickling, typed
errors, events, and the missing-extra error.

Retrieval and reranking run on fakes configured like the real `embed` and `rerank` fixtures
(tests/fakes.py): each question retrieves the node that shares its words, stored vectors equal the SDK's
``client.embed``, and rankings equal its ``client.rerank``. MockLLM everywhere: nothing reaches for OpenAI.
"""

from __future__ import annotations

import asyncio
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core import Settings, SummaryIndex, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler
from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.llms import MockLLM
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

import vllm_tasks as vt
from vllm_tasks.integrations.llama_index import VLLMEmbedding, VLLMRerank
from vllm_tasks.testing import EMBEDDING_TASKS, FakeVLLM

from ..fakes import FakeFixture

ROOT = Path(__file__).resolve().parents[2]
FACTS = {
    "bananas": "Bananas are yellow fruit.",
    "paris": "Paris is the capital of France.",
    "europe": "France is a country in Europe.",
    "cats": "Cats purr when they are content.",
}
QUERY = "What is the capital of France?"
QUESTIONS = {  # question -> the node that answers it (the one sharing its words)
    "Which fruit is yellow?": "bananas",
    "What is the capital of France?": "paris",
    "Which continent is France in?": "europe",
    "When do cats purr?": "cats",
}


class NoFallback(BaseEmbedding):
    """Settings.embed_model during these tests: using it means LlamaIndex ignored the explicit model."""

    def _get_query_embedding(self, query: str) -> list[float]:
        raise AssertionError("LlamaIndex fell back to Settings.embed_model")

    async def _aget_query_embedding(self, query: str) -> list[float]:
        raise AssertionError("LlamaIndex fell back to Settings.embed_model")

    def _get_text_embedding(self, text: str) -> list[float]:
        raise AssertionError("LlamaIndex fell back to Settings.embed_model")


@pytest.fixture(autouse=True)
def no_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    """No LLM or embedding model is looked up from Settings (whose defaults are OpenAI's)."""
    monkeypatch.setattr(Settings, "_llm", MockLLM())
    monkeypatch.setattr(Settings, "_embed_model", NoFallback())


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeVLLM]:
    with FakeVLLM(model="minilm", tasks=EMBEDDING_TASKS) as server:
        yield server


@pytest.fixture
def server(fake: FakeVLLM) -> FakeVLLM:
    fake.clear_faults()
    fake.clear_requests()
    return fake


def nodes() -> list[TextNode]:
    return [TextNode(text=text, id_=key) for key, text in FACTS.items()]


def test_vector_store_index_retrieves_the_matching_node(fake_embed: FakeFixture) -> None:
    embed_model = VLLMEmbedding(base_url=fake_embed.base_url, model=fake_embed.model)
    index = VectorStoreIndex(nodes(), embed_model=embed_model)
    retriever = index.as_retriever(similarity_top_k=2)
    for question, key in QUESTIONS.items():
        assert retriever.retrieve(question)[0].node.node_id == key, question
    vector = np.array(index.vector_store.get("paris"))
    np.testing.assert_allclose(vector, fake_embed.fake.vector(FACTS["paris"]), atol=1e-6)
    with vt.Client(fake_embed.base_url) as client:
        np.testing.assert_allclose(vector, client.embed(FACTS["paris"]).vector, atol=1e-6)
    assert embed_model.model_name == fake_embed.model


def test_async_retrieval_equals_sync(fake_embed: FakeFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index built with ``use_async`` (its nodes embedded by ``aget_text_embedding_batch``) and queried
    with ``aretrieve`` ranks every node as the sync one does, the answering node first.

    The loop is set but not running while the index is built, so LlamaIndex embeds on it; inside a
    running loop it would embed on a private thread loop that it closes without ``shutdown_asyncgens()``,
    leaving that loop's connections open (docs/integrations.md, "Clients and event loops")."""
    embedded_async: list[int] = []
    async_batch = VLLMEmbedding._aget_text_embeddings

    async def counted(self: VLLMEmbedding, texts: list[str]) -> list[list[float]]:
        embedded_async.append(len(texts))
        return await async_batch(self, texts)

    monkeypatch.setattr(VLLMEmbedding, "_aget_text_embeddings", counted)
    embed_model = VLLMEmbedding(base_url=fake_embed.base_url)
    with asyncio.Runner() as runner:
        runner.get_loop()  # the current loop from here to the end of the block
        async_index = VectorStoreIndex(nodes(), embed_model=embed_model, use_async=True)
        async_retriever = async_index.as_retriever(similarity_top_k=4)

        async def retrieve_all() -> list[list[str]]:
            return [[hit.node.node_id for hit in await async_retriever.aretrieve(q)] for q in QUESTIONS]

        async_ids = runner.run(retrieve_all())
    assert sum(embedded_async) == len(FACTS)  # the nodes went through the async path
    retriever = VectorStoreIndex(nodes(), embed_model=embed_model).as_retriever(similarity_top_k=4)
    sync_ids = [[hit.node.node_id for hit in retriever.retrieve(q)] for q in QUESTIONS]
    assert async_ids == sync_ids
    assert [ids[0] for ids in sync_ids] == list(QUESTIONS.values())


def test_batches_reach_the_sdk_whole_and_are_split_there(server: FakeVLLM) -> None:
    texts = [f"text number {i}" for i in range(10)]
    embed_model = VLLMEmbedding(base_url=server.url, embed_batch_size=5, batch_size=2, concurrency=2)
    vectors = embed_model.get_text_embedding_batch(texts)
    sent = server.received("/v1/embeddings")
    assert len(sent) == 6  # LlamaIndex hands over 5 + 5; the SDK sends 2 + 2 + 1 each
    assert sorted(len(r.json["input"]) for r in sent) == [1, 1, 2, 2, 2, 2]
    np.testing.assert_allclose(np.array(vectors), np.stack([server.vector(t) for t in texts]), atol=1e-6)
    again = asyncio.run(embed_model.aget_text_embedding_batch(texts))
    np.testing.assert_allclose(np.array(again), np.array(vectors), atol=1e-7)
    assert embed_model.get_text_embedding_batch([]) == []


def test_prefixes_dimensions_and_single_calls(server: FakeVLLM) -> None:
    embed_model = VLLMEmbedding(
        base_url=server.url, query_prefix="query: ", text_prefix="passage: ", params={"dimensions": 16}
    )
    query = embed_model.get_query_embedding("x")
    text = embed_model.get_text_embedding("y")
    aquery = asyncio.run(embed_model.aget_query_embedding("x"))
    atext = asyncio.run(embed_model.aget_text_embedding("y"))
    inputs = [r.json["input"] for r in server.received("/v1/embeddings")]
    assert inputs == [["query: x"], ["passage: y"], ["query: x"], ["passage: y"]]
    assert len(query) == 16 and aquery == query and atext == text
    np.testing.assert_allclose(query, server.vector("query: x", dimensions=16), atol=1e-6)


def test_embedding_errors_pass_through(server: FakeVLLM) -> None:
    server.fail(500, path="/v1/embeddings", times=None)
    embed_model = VLLMEmbedding(base_url=server.url, max_retries=0)
    with pytest.raises(vt.InternalServerError):
        embed_model.get_query_embedding("a")
    with pytest.raises(vt.InternalServerError):
        asyncio.run(embed_model.aget_text_embedding_batch(["a", "b"]))
    server.clear_faults()
    with pytest.raises(vt.ContextLengthExceeded):
        embed_model.get_text_embedding_batch(["ok", "word " * 2000])
    with pytest.raises(vt.InvalidInputError, match="batch_size"):
        VLLMEmbedding(base_url=server.url, batch_size=0)


def test_pickle_round_trip_without_warnings(server: FakeVLLM, caplog: pytest.LogCaptureFixture) -> None:
    embed_model = VLLMEmbedding(base_url=server.url, api_key="k", params=vt.EmbedParams(dimensions=8))
    expected = embed_model.get_query_embedding("hello")
    copied = pickle.loads(pickle.dumps(embed_model))
    assert copied.get_query_embedding("hello") == expected
    assert copied.api_key is not None and copied.api_key.get_secret_value() == "k"
    rerank = pickle.loads(pickle.dumps(VLLMRerank(base_url=server.url, top_n=1)))
    assert rerank.top_n == 1 and len(rerank.postprocess_nodes(scored(), query_str=QUERY)) == 1
    assert "unpickleable" not in caplog.text
    assert "api_key" not in embed_model.to_json() and "api_key" not in embed_model.to_dict()
    rebuilt = VLLMEmbedding.from_dict(embed_model.to_dict())  # the key comes from the environment then
    assert rebuilt.params.dimensions == 8 and rebuilt.api_key is None


# --------------------------------------------------------------------------------------------------
# VLLMRerank
# --------------------------------------------------------------------------------------------------


def scored() -> list[NodeWithScore]:
    return [NodeWithScore(node=node, score=0.5) for node in nodes()]


def test_rerank_orders_like_the_sdk(fake_rerank: FakeFixture) -> None:
    """On a cross-encoder like the `rerank` fixture: sync and async order and score as ``client.rerank``."""
    debug = LlamaDebugHandler()
    rerank = VLLMRerank(base_url=fake_rerank.base_url, top_n=3, callback_manager=CallbackManager([debug]))
    ranked = rerank.postprocess_nodes(scored(), query_str=QUERY)
    [(_start, end)] = debug.get_event_pairs(CBEventType.RERANKING)
    assert end.payload is not None and end.payload["nodes"] == ranked
    with vt.Client(fake_rerank.base_url) as client:
        expected = client.rerank(QUERY, list(FACTS.values()), top_n=3)
    keys = list(FACTS)
    for nodes_ranked in (ranked, asyncio.run(rerank.apostprocess_nodes(scored(), query_str=QUERY))):
        assert [n.node.node_id for n in nodes_ranked] == [keys[i] for i in expected.indices]
        assert [n.score for n in nodes_ranked] == pytest.approx(list(expected.scores))
    assert ranked[0].node.node_id == "paris"


def test_rerank_async_top_n_none_and_retrieval_score(server: FakeVLLM) -> None:
    rerank = VLLMRerank(base_url=server.url, top_n=None, keep_retrieval_score=True)
    sync = rerank.postprocess_nodes(scored(), query_bundle=QueryBundle(QUERY))
    again = asyncio.run(rerank.apostprocess_nodes(scored(), query_str=QUERY))
    assert [n.node.node_id for n in again] == [n.node.node_id for n in sync]
    assert len(sync) == 4 and all(n.node.metadata["retrieval_score"] == 0.5 for n in sync)
    assert rerank.postprocess_nodes([], query_str=QUERY) == []
    with pytest.raises(vt.InvalidInputError, match="query"):
        rerank.postprocess_nodes(scored())


def test_rerank_in_a_query_engine_with_events(fake_rerank: FakeFixture) -> None:
    """SummaryIndex retrieves every node without embeddings; the postprocessor reorders them and
    LlamaIndex's instrumentation events see it; MockLLM answers (no OpenAI)."""
    seen: list[str] = []

    class Recorder(BaseEventHandler):
        def handle(self, event: BaseEvent, **kwargs: Any) -> None:
            seen.append(event.class_name())

    recorder = Recorder()
    root = get_dispatcher()
    root.add_event_handler(recorder)
    try:
        rerank = VLLMRerank(base_url=fake_rerank.base_url, top_n=2)
        engine = SummaryIndex(nodes()).as_query_engine(llm=MockLLM(), node_postprocessors=[rerank])
        response = engine.query(QUERY)
    finally:
        root.event_handlers.remove(recorder)
    with vt.Client(fake_rerank.base_url) as client:
        expected = client.rerank(QUERY, list(FACTS.values()), top_n=2)
    keys = list(FACTS)
    assert [n.node.node_id for n in response.source_nodes] == [keys[i] for i in expected.indices]
    assert response.source_nodes[0].node.node_id == "paris"
    assert "ReRankStartEvent" in seen and "ReRankEndEvent" in seen


def test_rerank_errors_pass_through(server: FakeVLLM) -> None:
    server.fail(503, path="/rerank", times=None)
    rerank = VLLMRerank(base_url=server.url, max_retries=0)
    with pytest.raises(vt.ServiceUnavailableError):
        rerank.postprocess_nodes(scored(), query_str=QUERY)
    with pytest.raises(vt.ServiceUnavailableError):
        asyncio.run(rerank.apostprocess_nodes(scored(), query_str=QUERY))
    with pytest.raises(vt.InvalidInputError, match="top_n"):
        VLLMRerank(base_url=server.url, top_n=-1)


def test_without_llama_index_the_extra_is_named() -> None:
    code = (
        "import sys; sys.modules['llama_index.core'] = None\n"
        "import vllm_tasks as vt\n"
        "try:\n"
        "    import vllm_tasks.integrations.llama_index\n"
        "except vt.MissingDependency as e:\n"
        "    print(type(e).__name__, e.extra, e)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "MissingDependency llama-index" in result.stdout
    assert 'pip install "vllm-tasks[llama-index]"' in result.stdout


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda m: m.get_text_embedding_batch("abc"), "texts"),  # was: one vector per character
        (lambda m: m.get_text_embedding_batch(["a", 3]), "texts[1]"),
        (lambda m: m.get_text_embedding(None), "text"),
        (lambda m: asyncio.run(m.aget_text_embedding_batch("abc")), "texts"),
    ],
)
def test_embedding_refuses_what_is_not_a_list_of_texts(server: FakeVLLM, call: Any, field: str) -> None:
    server.clear_requests()
    with pytest.raises(vt.InvalidInputError) as caught:
        call(VLLMEmbedding(base_url=server.url))
    assert caught.value.field == field and not server.received("/v1/embeddings")
