"""The LangChain and LlamaIndex adapters refuse a bad field value at construction with an
``InvalidInputError`` naming the field (pydantic's ``ValidationError`` is not part of the error tree): the
counts (``batch_size``, ``concurrency``, ``top_n``, ``embed_batch_size``) as the client methods check them,
before any coercion (``True`` is not 1), and any other field of the wrong type. ``concurrency="auto"`` is
taken, as by the client methods."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore, TextNode

import vllm_tasks as vt
from vllm_tasks.integrations.langchain import VLLMEmbeddings, VLLMReranker
from vllm_tasks.integrations.llama_index import VLLMEmbedding, VLLMRerank

from ..fakes import FakeFixture
from .conftest import BASE

ADAPTERS = [VLLMEmbeddings, VLLMReranker, VLLMEmbedding, VLLMRerank]
RERANKERS = [VLLMReranker, VLLMRerank]
NOT_COUNTS = [None, "fast", 0, -1, 1.5, True, "8"]


@pytest.mark.parametrize("value", NOT_COUNTS)
@pytest.mark.parametrize("field", ["batch_size", "concurrency"])
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_batch_size_and_concurrency_must_be_counts(adapter: type[Any], field: str, value: object) -> None:
    with pytest.raises(vt.InvalidInputError) as caught:
        adapter(base_url=BASE, **{field: value})
    assert caught.value.field == field and caught.value.value is value


@pytest.mark.parametrize("value", ["x", 0, -1, 1.5, True])
@pytest.mark.parametrize("adapter", RERANKERS)
def test_top_n_must_be_a_count_or_none(adapter: type[Any], value: object) -> None:
    with pytest.raises(vt.InvalidInputError) as caught:
        adapter(base_url=BASE, top_n=value)
    assert caught.value.field == "top_n"
    assert adapter(base_url=BASE, top_n=None).top_n is None


@pytest.mark.parametrize("value", [None, 0, -1, 1.5, True, 2049])
def test_llama_index_embed_batch_size_is_1_to_2048(value: object) -> None:
    with pytest.raises(vt.InvalidInputError) as caught:
        VLLMEmbedding(base_url=BASE, embed_batch_size=value)
    assert caught.value.field == "embed_batch_size"
    assert VLLMEmbedding(base_url=BASE, embed_batch_size=2048).embed_batch_size == 2048


WRONG_TYPES: list[tuple[str, object]] = [
    ("extra_body", 5),
    ("params", 5),
    ("params", {"no_such_option": 1}),
    ("settings", 5),
    ("model", 5),
    ("timeout", "slow"),
    ("batchsize", 8),  # misspelt: not a field
]


@pytest.mark.parametrize(("field", "value"), WRONG_TYPES)
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_any_field_of_the_wrong_type_is_an_invalid_input_error(
    adapter: type[Any], field: str, value: object
) -> None:
    with pytest.raises(vt.InvalidInputError, match=field) as caught:
        adapter(base_url=BASE, **{field: value})
    assert caught.value.field.startswith(field)


@pytest.mark.parametrize(
    ("adapter", "field", "value"),
    [
        (VLLMEmbeddings, "query_prefix", 5),
        (VLLMEmbeddings, "document_prefix", ["passage: "]),
        (VLLMEmbedding, "text_prefix", 5),
        (VLLMEmbedding, "model_name", 5),
        (VLLMEmbedding, "num_workers", "many"),
        (VLLMRerank, "keep_retrieval_score", "sometimes"),
    ],
)
def test_each_adapters_own_fields_too(adapter: type[Any], field: str, value: object) -> None:
    with pytest.raises(vt.InvalidInputError) as caught:
        adapter(base_url=BASE, **{field: value})
    assert caught.value.field == field


def test_concurrency_auto_embeds_and_reranks(fake_embed: FakeFixture, fake_rerank: FakeFixture) -> None:
    texts = ["one", "two", "three"]
    embeddings = VLLMEmbeddings(base_url=fake_embed.base_url, concurrency="auto", batch_size=1)
    assert len(embeddings.embed_documents(texts)) == 3
    assert len(asyncio.run(embeddings.aembed_documents(texts))) == 3
    assert len(VLLMEmbedding(base_url=fake_embed.base_url, concurrency="auto").get_query_embedding("a")) > 0
    reranker = VLLMReranker(base_url=fake_rerank.base_url, concurrency="auto", top_n=2)
    assert len(reranker.compress_documents([Document(text) for text in texts], "one")) == 2
    rerank = VLLMRerank(base_url=fake_rerank.base_url, concurrency="auto", top_n=2)
    nodes = [NodeWithScore(node=TextNode(text=text)) for text in texts]
    assert len(rerank.postprocess_nodes(nodes, query_str="one")) == 2
