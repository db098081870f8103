"""LlamaIndex adapters over the SDK: an embedding model and a reranking node postprocessor.

``pip install "vllm-tasks[llama-index]"`` (llama-index-core). Both talk to a running vLLM server through
:class:`vllm_tasks.Client` (sync) and :class:`vllm_tasks.AsyncClient` (async), so the SDK's batching,
retries and typed errors apply unchanged. (LlamaIndex's own ``VllmEmbedding`` runs vLLM in-process; these
call a server.) See ``docs/integrations.md``.

- :class:`VLLMEmbedding` -- ``BaseEmbedding`` over ``/v1/embeddings``, sync and async, batched.
- :class:`VLLMRerank` -- ``BaseNodePostprocessor`` over ``/rerank``.

Examples:
    >>> from llama_index.core import Settings, VectorStoreIndex
    >>> from llama_index.core.schema import TextNode
    >>> from vllm_tasks.integrations.llama_index import VLLMEmbedding, VLLMRerank
    >>> Settings.llm = None  # retrieval only: no OpenAI LLM is looked up
    >>> index = VectorStoreIndex(
    ...     [TextNode(text="Paris is the capital of France."), TextNode(text="Bananas are yellow.")],
    ...     embed_model=VLLMEmbedding(base_url="http://localhost:8000"),
    ... )
    >>> retriever = index.as_retriever(similarity_top_k=10)
    >>> nodes = retriever.retrieve("capital of France?")
    >>> best = VLLMRerank(base_url="http://localhost:8001", top_n=1).postprocess_nodes(
    ...     nodes, query_str="capital of France?"
    ... )
"""

from __future__ import annotations

from typing import Annotated, Any, TypeAlias

from ..dependencies import require

require("llama_index.core", "llama-index", "vllm_tasks.integrations.llama_index")

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]  # not in its __all__
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from pydantic import WithJsonSchema

from ..errors import InvalidInputError
from ..types.scoring import RerankResult
from ..validation import positive_int
from ._common import EmbedOptions, RerankOptions, TopNField, checked_by, one_text, text_list

__all__ = ["VLLMEmbedding", "VLLMRerank"]

dispatcher = get_dispatcher(__name__)

LLAMA_INDEX_BATCH = 256
"""Texts LlamaIndex hands to one ``_get_text_embeddings`` call: the SDK splits it into ``batch_size``
requests sent ``concurrency`` at a time (LlamaIndex's own default of 10 would send one small request at a
time)."""
LLAMA_INDEX_MAX_BATCH = 2048
"""The largest ``embed_batch_size`` LlamaIndex's ``BaseEmbedding`` takes."""


def _embed_batch_size(field: str, value: object) -> int:
    size = positive_int(field, value)
    if size > LLAMA_INDEX_MAX_BATCH:
        raise InvalidInputError(
            field,
            value,
            f"must be at most {LLAMA_INDEX_MAX_BATCH} (LlamaIndex's limit)",
            "Use batch_size= for the request size: the SDK splits each LlamaIndex batch into requests.",
        )
    return size


EmbedBatchField: TypeAlias = Annotated[
    int,
    checked_by(_embed_batch_size),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": LLAMA_INDEX_MAX_BATCH}),
]


class VLLMEmbedding(EmbedOptions, BaseEmbedding):
    """A LlamaIndex embedding model served by vLLM's ``/v1/embeddings`` (through the SDK).

    LlamaIndex hands over ``embed_batch_size`` texts per call (default 256); the SDK sends them as
    requests of ``batch_size`` (64) texts, ``concurrency`` (4) in flight. Vectors are ``list[float]``.

    The server connection is one ``vllm_tasks.ClientSettings``: ``settings=`` (default: from the
    environment, ``VLLM_TASKS_BASE_URL`` and ``VLLM_API_KEY``), or any of its settings by name
    (``base_url=``, ``model=``, ``api_key=``, ...), or your own ``client=`` / ``async_client=``
    (``ConnectionFields`` in ``vllm_tasks/integrations/_common.py``); all keyword arguments.
    ``model_name`` (what LlamaIndex reports) defaults to the settings' ``model``.

    Attributes:
        embed_batch_size: texts per LlamaIndex batch (1..2048).
        params: the vector options of every request (``vllm_tasks.EmbedParams(dimensions=256,
            truncate_prompt_tokens=-1)`` or a dict of its fields): ``dimensions`` for a Matryoshka
            width, ``truncate_prompt_tokens=-1`` to cut over-long texts to the model's maximum instead
            of raising ``vllm_tasks.ContextLengthExceeded``, ...
        batch_size: texts per request.
        concurrency: requests in flight, or ``"auto"`` (tuned from the server's answers).
        query_prefix: text put before queries (e.g. ``"query: "`` for E5 models).
        text_prefix: text put before documents (e.g. ``"passage: "`` for E5 models).
        extra_body: extra JSON fields for every request.

    Raises:
        InvalidInputError: a bad setting or field value (naming it), at construction.

    Examples:
        >>> embed_model = VLLMEmbedding(base_url="http://localhost:8000", model="BAAI/bge-m3")
        >>> vector = embed_model.get_query_embedding("what is vLLM?")
        >>> vectors = await embed_model.aget_text_embedding_batch(["a", "b"])
    """

    embed_batch_size: EmbedBatchField = LLAMA_INDEX_BATCH
    query_prefix: str = ""
    text_prefix: str = ""

    def __init__(self, **data: Any) -> None:
        named = "model_name" in data
        super().__init__(**data)
        if not named:
            self.model_name = self.model or "unknown"

    @classmethod
    def class_name(cls) -> str:
        return "VLLMEmbedding"

    def get_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[Embedding]:
        """LlamaIndex's batch call, with ``texts`` checked first (a string is not a list of characters).

        Raises:
            InvalidInputError: ``texts`` is a string or holds something else than strings.
        """
        return super().get_text_embedding_batch(text_list(texts), show_progress, **kwargs)

    async def aget_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[Embedding]:
        """:meth:`get_text_embedding_batch` on the running loop."""
        return await super().aget_text_embedding_batch(text_list(texts), show_progress, **kwargs)

    def _embed(self, texts: list[str]) -> list[Embedding]:
        texts = text_list(texts)
        if not texts:
            return []
        vectors: list[Embedding] = self._sync_client().embed(texts, **self._options()).vectors.tolist()
        return vectors

    async def _aembed(self, texts: list[str]) -> list[Embedding]:
        texts = text_list(texts)
        if not texts:
            return []
        client = await self._async_client()
        result = await client.embed(texts, **self._options())
        vectors: list[Embedding] = result.vectors.tolist()
        return vectors

    def _get_query_embedding(self, query: str) -> Embedding:
        return self._embed([self.query_prefix + one_text(query, "query")])[0]

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return (await self._aembed([self.query_prefix + one_text(query, "query")]))[0]

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._embed([self.text_prefix + one_text(text)])[0]

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return (await self._aembed([self.text_prefix + one_text(text)]))[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return self._embed([self.text_prefix + text for text in text_list(texts)])

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await self._aembed([self.text_prefix + text for text in text_list(texts)])


class VLLMRerank(RerankOptions, BaseNodePostprocessor):
    """A LlamaIndex node postprocessor that reorders nodes with vLLM's ``/rerank``.

    Each node's text is read as LlamaIndex's rerankers read it (``get_content(MetadataMode.EMBED)``);
    the nodes come back best first, cut to ``top_n``, with the rerank score as their ``score``. The
    score's scale depends on the served model (``docs/scoring.md``). Emits LlamaIndex's ``RERANKING``
    callback event and the ``ReRankStartEvent`` / ``ReRankEndEvent`` instrumentation events.

    The server connection is set as for :class:`VLLMEmbedding` (``settings=``, its settings by name, or
    ``client=`` / ``async_client=``).

    Attributes:
        top_n: nodes to keep (default 2, as LlamaIndex's rerankers; ``None`` keeps all, reordered).
        keep_retrieval_score: copy each node's previous score to ``metadata["retrieval_score"]``.
        batch_size: documents per request.
        concurrency: requests in flight, or ``"auto"``.
        params: the rerank options (``vllm_tasks.RerankParams(max_tokens_per_doc=512,
            truncate_prompt_tokens=-1)`` or a dict of its fields): ``max_tokens_per_doc`` cuts each document
            to N tokens server-side (vLLM >= 0.20.0), ``truncate_prompt_tokens=-1`` cuts over-long pairs to
            the model's maximum, ...
        extra_body: extra JSON fields for every request.

    Raises:
        InvalidInputError: a bad setting or field value (naming it), at construction.

    Examples:
        >>> rerank = VLLMRerank(base_url="http://localhost:8001", top_n=3)
        >>> engine = index.as_query_engine(similarity_top_k=20, node_postprocessors=[rerank])
    """

    top_n: TopNField = 2
    keep_retrieval_score: bool = False

    @classmethod
    def class_name(cls) -> str:
        return "VLLMRerank"

    def _start(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> tuple[str, list[str]]:
        dispatcher.event(
            ReRankStartEvent(
                query=query_bundle,
                nodes=nodes,
                top_n=self.top_n or len(nodes),
                model_name=self.model or "",
            )
        )
        if query_bundle is None:
            raise InvalidInputError(
                "query_bundle", None, "is required to rerank", "Pass query_str= or query_bundle=."
            )
        return query_bundle.query_str, [n.node.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]

    def _payload(self, nodes: list[NodeWithScore], query: str) -> dict[str, Any]:
        return {
            EventPayload.NODES: nodes,
            EventPayload.MODEL_NAME: self.model or "",
            EventPayload.QUERY_STR: query,
            EventPayload.TOP_K: self.top_n,
        }

    def _ranked(self, nodes: list[NodeWithScore], result: RerankResult) -> list[NodeWithScore]:
        ranked = []
        for hit in result.results:
            original = nodes[hit.index]
            if self.keep_retrieval_score:
                original.node.metadata["retrieval_score"] = original.score
            ranked.append(NodeWithScore(node=original.node, score=hit.score))
        dispatcher.event(ReRankEndEvent(nodes=ranked))
        return ranked

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query, texts = self._start(nodes, query_bundle)
        if not nodes:
            return []
        with self.callback_manager.event(CBEventType.RERANKING, payload=self._payload(nodes, query)) as event:
            ranked = self._ranked(nodes, self._sync_client().rerank(query, texts, **self._options()))
            event.on_end(payload={EventPayload.NODES: ranked})
        return ranked

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        query, texts = self._start(nodes, query_bundle)
        if not nodes:
            return []
        with self.callback_manager.event(CBEventType.RERANKING, payload=self._payload(nodes, query)) as event:
            client = await self._async_client()
            result = await client.rerank(query, texts, **self._options())
            ranked = self._ranked(nodes, result)
            event.on_end(payload={EventPayload.NODES: ranked})
        return ranked
