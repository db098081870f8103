"""The LangChain adapters against the real CPU fixtures: LangChain's standard ``EmbeddingsIntegrationTests``
on the `embed` server, embeddings and reranking equal to the SDK's own calls, typed errors from the real
servers, and the transcript loader on the `stt` server. The OCR loader runs in test_rag_pipeline.py.

Few requests each: the suite shares the servers with the other integration modules.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import EmbeddingsIntegrationTests

import vllm_tasks as vt
from vllm_tasks.integrations.langchain import VLLMEmbeddings, VLLMReranker, VLLMTranscriptLoader

pytestmark = [pytest.mark.integration, pytest.mark.anyio]

AUDIO = Path(__file__).resolve().parents[1] / "data" / "audio"
FACTS = [
    "The Eiffel Tower is a wrought-iron lattice tower in Paris.",
    "Photosynthesis turns sunlight, water and carbon dioxide into sugar.",
    "The Pacific is the largest ocean on Earth.",
    "Python is a programming language created by Guido van Rossum.",
]
QUERY = "Who created the Python programming language?"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


class TestVLLMEmbeddingsOnTheEmbedFixture(EmbeddingsIntegrationTests):
    """LangChain's standard integration suite for ``Embeddings`` (sync and async) on real MiniLM."""

    url = ""
    served = ""

    @pytest.fixture(autouse=True)
    def _embed_server(self, vllm_embed: Any) -> None:
        type(self).url, type(self).served = vllm_embed.base_url, vllm_embed.model

    @property
    def embeddings_class(self) -> type[VLLMEmbeddings]:
        return VLLMEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"base_url": self.url, "model": self.served}


def test_embeddings_equal_the_sdks_and_errors_are_typed(vllm_embed: Any) -> None:
    embeddings = VLLMEmbeddings(base_url=vllm_embed.base_url, batch_size=2)
    with vt.Client(vllm_embed.base_url) as client:
        expected = client.embed(FACTS).vectors
        query = client.embed(QUERY).vector
    vectors = np.array(embeddings.embed_documents(FACTS), dtype=np.float32)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    np.testing.assert_allclose(embeddings.embed_query(QUERY), query, atol=1e-6)
    np.testing.assert_allclose(asyncio.run(embeddings.aembed_query(QUERY)), query, atol=1e-6)
    assert int(np.argmax(vectors @ query)) == 3  # real MiniLM: the Python sentence answers the query
    too_long = "word " * 1000
    with pytest.raises(vt.ContextLengthExceeded) as caught:
        embeddings.embed_documents(["short", too_long])
    assert caught.value.input_index == 1
    cut = VLLMEmbeddings(base_url=vllm_embed.base_url, truncate_prompt_tokens=-1)
    assert len(cut.embed_documents([too_long])[0]) == 384


def test_reranker_equals_the_sdks_ranking(vllm_rerank: Any) -> None:
    """The fixture's classifier head is random: the ranking is checked against the SDK, not meaning."""
    docs = [Document(page_content=t, metadata={"n": i}, id=f"d{i}") for i, t in enumerate(FACTS)]
    reranker = VLLMReranker(base_url=vllm_rerank.base_url, top_n=3)
    with vt.Client(vllm_rerank.base_url) as client:
        expected = client.rerank(QUERY, FACTS, top_n=3)
    for ranked in (
        reranker.compress_documents(docs, QUERY),
        asyncio.run(reranker.acompress_documents(docs, QUERY)),
    ):
        assert [d.metadata["n"] for d in ranked] == expected.indices
        assert [d.id for d in ranked] == [f"d{i}" for i in expected.indices]
        assert [d.metadata["relevance_score"] for d in ranked] == pytest.approx(
            list(expected.scores), abs=1e-6
        )
    with pytest.raises(vt.ContextLengthExceeded) as caught:
        reranker.compress_documents([Document("short"), Document("word " * 1000)], QUERY)
    assert caught.value.input_index == 1


def test_transcript_loader_on_whisper(vllm_stt: Any) -> None:
    """46 s of speech: client-side chunking gives segments over the whole file; 3 s: one document."""
    segments = VLLMTranscriptLoader(AUDIO / "long45.wav", base_url=vllm_stt.base_url, language="en").load()
    starts = [d.metadata["start"] for d in segments]
    assert len(segments) >= 2 and starts == sorted(starts) and starts[0] == 0.0
    assert all(d.metadata["end"] > d.metadata["start"] for d in segments)
    assert 40.0 < segments[-1].metadata["end"] <= 46.5
    text = " ".join(d.page_content for d in segments).lower()
    assert "village" in text and "river" in text
    loader = VLLMTranscriptLoader(AUDIO / "fox.wav", base_url=vllm_stt.base_url, mode="single", language="en")
    [whole] = asyncio.run(loader.aload())
    assert "fox" in whole.page_content.lower() and whole.metadata["start"] == 0.0
    assert whole.metadata["source"].endswith("fox.wav") and whole.metadata["language"] == "en"
    joined = " ".join(s["text"] for s in whole.metadata["segments"])
    assert re.sub(r"\s+", " ", joined).strip() == re.sub(r"\s+", " ", whole.page_content).strip()
