"""vllm_tasks.integrations.langchain against FakeVLLM: LangChain's standard Embeddings suites, the
reranker, both loaders, sync and async paths, pickling, typed errors, and the missing-extra error.

Vectors and rankings are held to the SDK's own calls (``client.embed``, ``client.rerank``) on fakes
configured like the real `embed` and `rerank` fixtures (tests/fakes.py); the transcript loader chunks a
46 s file client-side against a fake like `stt`. The OCR loader's RAG chain is test_rag_pipeline.py.
"""

from __future__ import annotations

import asyncio
import copy
import pickle
import subprocess
import sys
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_tests.integration_tests import EmbeddingsIntegrationTests
from langchain_tests.unit_tests import EmbeddingsUnitTests

import vllm_tasks as vt
from vllm_tasks.integrations.langchain import (
    VLLMEmbeddings,
    VLLMOCRLoader,
    VLLMReranker,
    VLLMTranscriptLoader,
)
from vllm_tasks.testing import EMBEDDING_TASKS, OCR_TASKS, RERANKER_TASKS, SPEECH_TASKS, FakeVLLM
from vllm_tasks.testing.content import audio_seconds

from ..clients import left_open_at_collection
from ..fakes import FakeFixture, fake_like, piece_transcript

# langchain-tests' async standard tests are plain coroutines: anyio's plugin runs them (asyncio backend).
pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
FOX = ROOT / "tests" / "data" / "audio" / "fox.wav"
LONG = ROOT / "tests" / "data" / "audio" / "long45.wav"  # 46 s: chunked client-side
FACTS = ["Bananas are yellow.", "Paris is the capital of France.", "France is in Europe.", "Cats purr."]
QUERY = "What is the capital of France?"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeVLLM]:
    """One embedding-model fake for the module (cleared per test by ``server``)."""
    with FakeVLLM(model="minilm", tasks=EMBEDDING_TASKS) as server:
        yield server


@pytest.fixture
def server(fake: FakeVLLM) -> FakeVLLM:
    fake.clear_faults()
    fake.clear_requests()
    return fake


# --------------------------------------------------------------------------------------------------
# LangChain's standard suites
# --------------------------------------------------------------------------------------------------


class TestVLLMEmbeddingsStandardUnit(EmbeddingsUnitTests):
    """``EmbeddingsUnitTests``: construction from arguments and from the environment (no server)."""

    @property
    def embeddings_class(self) -> type[VLLMEmbeddings]:
        return VLLMEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"base_url": "http://vllm.test:8000", "model": "minilm"}

    @property
    def init_from_env_params(self) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        return (
            {"VLLM_TASKS_BASE_URL": "http://vllm.test:9000", "VLLM_API_KEY": "secret-key"},
            {"model": "minilm"},
            {"base_url": "http://vllm.test:9000", "api_key": "secret-key", "model": "minilm"},
        )


class TestVLLMEmbeddingsStandardOnFake(EmbeddingsIntegrationTests):
    """``EmbeddingsIntegrationTests`` (sync and async embedding calls) against a FakeVLLM configured like
    the real `embed` fixture (its served model name, width and context length)."""

    url = ""
    served = ""

    @pytest.fixture(autouse=True)
    def _fake_server(self, fake_embed: FakeFixture) -> None:
        type(self).url, type(self).served = fake_embed.base_url, fake_embed.model

    @property
    def embeddings_class(self) -> type[VLLMEmbeddings]:
        return VLLMEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"base_url": self.url, "model": self.served}


# --------------------------------------------------------------------------------------------------
# VLLMEmbeddings
# --------------------------------------------------------------------------------------------------


def test_vectors_are_the_servers_as_float_lists(server: FakeVLLM) -> None:
    embeddings = VLLMEmbeddings(base_url=server.url)
    vectors = embeddings.embed_documents(FACTS)
    assert isinstance(vectors, list) and all(isinstance(v, list) for v in vectors)
    assert all(type(x) is float for x in vectors[0])
    np.testing.assert_allclose(np.array(vectors), np.stack([server.vector(t) for t in FACTS]), atol=1e-6)
    query = embeddings.embed_query(QUERY)
    assert all(type(x) is float for x in query)
    np.testing.assert_allclose(query, server.vector(QUERY), atol=1e-6)


def test_vectors_equal_the_sdks_own_calls(fake_embed: FakeFixture) -> None:
    """Batched documents, the query, and the async query equal ``client.embed``; the vectors retrieve."""
    embeddings = VLLMEmbeddings(base_url=fake_embed.base_url, batch_size=2)
    with vt.Client(fake_embed.base_url) as client:
        expected = client.embed(FACTS).vectors
        query = client.embed(QUERY).vector
    vectors = np.array(embeddings.embed_documents(FACTS), dtype=np.float32)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    np.testing.assert_allclose(embeddings.embed_query(QUERY), query, atol=1e-6)
    np.testing.assert_allclose(asyncio.run(embeddings.aembed_query(QUERY)), query, atol=1e-6)
    assert FACTS[int(np.argmax(vectors @ query))] == "Paris is the capital of France."


async def test_async_vectors_equal_the_sync_ones(server: FakeVLLM) -> None:
    embeddings = VLLMEmbeddings(base_url=server.url)
    vectors = await embeddings.aembed_documents(FACTS)
    np.testing.assert_allclose(np.array(vectors), np.array(embeddings.embed_documents(FACTS)), atol=1e-7)
    query = await embeddings.aembed_query(QUERY)
    assert query == embeddings.embed_query(QUERY)
    await embeddings.aclose()


def test_no_texts_send_no_request(server: FakeVLLM) -> None:
    embeddings = VLLMEmbeddings(base_url=server.url)
    assert embeddings.embed_documents([]) == []
    assert asyncio.run(embeddings.aembed_documents([])) == []
    assert server.received("/v1/embeddings") == []


def test_batching_dimensions_prefixes_and_extra_fields_reach_the_server(server: FakeVLLM) -> None:
    embeddings = VLLMEmbeddings(
        base_url=server.url,
        batch_size=2,
        concurrency=1,
        params=vt.EmbedParams(dimensions=64, truncate_prompt_tokens=-1),
        query_prefix="query: ",
        document_prefix="passage: ",
        extra_body={"priority": 0},
    )
    vectors = embeddings.embed_documents(FACTS[:3])
    sent = server.received("/v1/embeddings")
    assert [r.json["input"] for r in sent] == [["passage: " + t for t in FACTS[:2]], ["passage: " + FACTS[2]]]
    assert all(r.json["dimensions"] == 64 and r.json["truncate_prompt_tokens"] == -1 for r in sent)
    assert all(r.json["priority"] == 0 for r in sent)
    assert len(vectors[0]) == 64
    np.testing.assert_allclose(vectors[0], server.vector("passage: " + FACTS[0], dimensions=64), atol=1e-6)
    embeddings.embed_query("x")
    assert server.received("/v1/embeddings")[-1].json["input"] == ["query: x"]


def test_in_memory_vector_store_finds_the_matching_text(server: FakeVLLM) -> None:
    store = InMemoryVectorStore(VLLMEmbeddings(base_url=server.url))
    store.add_texts(FACTS, metadatas=[{"n": i} for i in range(len(FACTS))])
    assert store.similarity_search("capital of France Paris", k=1)[0].metadata == {"n": 1}


def test_async_calls_from_several_event_loops(server: FakeVLLM) -> None:
    """``asyncio.run`` per call (a new loop each time) gets a client of its own loop each time."""
    embeddings = VLLMEmbeddings(base_url=server.url)
    first = asyncio.run(embeddings.aembed_query("a"))
    second = asyncio.run(embeddings.aembed_query("a"))
    assert first == second


def test_each_loops_connections_close_with_the_loop(server: FakeVLLM) -> None:
    """Each ``asyncio.run`` closes the connections its call opened: they were left to the garbage
    collector, which warned (unclosed transport) wherever it ran, and failed an unrelated test in CI."""
    embeddings = VLLMEmbeddings(base_url=server.url, batch_size=2, concurrency=4)
    for _ in range(3):
        asyncio.run(embeddings.aembed_documents(FACTS * 4))
    asyncio.run(embeddings.aembed_query("a"))
    del embeddings
    assert left_open_at_collection() == []


def test_an_adapter_dropped_unclosed_closes_its_connections(server: FakeVLLM) -> None:
    """Frameworks drop adapters without ``close()``: the sync connections close with the adapter, and
    the async ones of a loop that still runs (a notebook's) when that loop shuts down."""

    async def notebook_cell() -> None:
        embeddings = VLLMEmbeddings(base_url=server.url, batch_size=2, concurrency=4)
        embeddings.embed_documents(FACTS * 4)
        await embeddings.aembed_documents(FACTS * 4)
        del embeddings
        assert left_open_at_collection() == []

    with asyncio.Runner() as runner:
        runner.run(notebook_cell())
        assert left_open_at_collection() == []
    assert left_open_at_collection() == []


def test_aclose_closes_the_loops_client_and_a_later_call_builds_another(server: FakeVLLM) -> None:
    async def session() -> tuple[list[float], list[float]]:
        embeddings = VLLMEmbeddings(base_url=server.url)
        first = await embeddings.aembed_query("a")
        await embeddings.aclose()
        assert left_open_at_collection() == []
        second = await embeddings.aembed_query("a")
        await embeddings.aclose()
        return first, second

    first, second = asyncio.run(session())
    assert first == second
    assert left_open_at_collection() == []


def test_typed_errors_pass_through(server: FakeVLLM) -> None:
    server.fail(503, path="/v1/embeddings", times=None)
    embeddings = VLLMEmbeddings(base_url=server.url, max_retries=0)
    with pytest.raises(vt.ServiceUnavailableError):
        embeddings.embed_documents(["a"])
    with pytest.raises(vt.ServiceUnavailableError):
        asyncio.run(embeddings.aembed_query("a"))
    server.clear_faults()
    too_long = "word " * 2000
    with pytest.raises(vt.ContextLengthExceeded) as caught:
        embeddings.embed_documents(["short", too_long])
    assert caught.value.input_index == 1
    cut = VLLMEmbeddings(
        base_url=server.url, params=vt.EmbedParams(truncate_prompt_tokens=-1)
    )  # cut to the model's length instead
    np.testing.assert_allclose(cut.embed_documents([too_long])[0], server.vector("word"), atol=1e-6)
    with pytest.raises(vt.NotFoundError):
        VLLMEmbeddings(base_url=server.url, model="no-such-model").embed_query("a")


def test_an_endpoint_the_model_does_not_serve_is_named() -> None:
    with FakeVLLM(tasks=RERANKER_TASKS) as reranker, pytest.raises(vt.EndpointNotServed):
        VLLMEmbeddings(base_url=reranker.url).embed_query("a")


def test_bad_settings_are_refused_at_construction() -> None:
    with pytest.raises(vt.InvalidInputError, match="base_url"):
        VLLMEmbeddings(base_url="localhost:8000")
    with pytest.raises(vt.InvalidInputError, match="batch_size"):
        VLLMEmbeddings(base_url="http://h:1", batch_size=0)
    with pytest.raises(vt.InvalidInputError, match="concurrency"):
        VLLMReranker(base_url="http://h:1", concurrency=0)
    with pytest.raises(vt.InvalidInputError, match="top_n"):
        VLLMReranker(base_url="http://h:1", top_n=0)
    with pytest.raises(vt.InvalidInputError, match="client"):
        VLLMEmbeddings(client=vt.AsyncClient("http://h:1"))  # type: ignore[arg-type]
    with pytest.raises(vt.InvalidInputError, match="batchsize=8: is not an argument of VLLMEmbeddings"):
        VLLMEmbeddings(base_url="http://h:1", batchsize=8)


def test_api_key_is_sent_and_never_shown() -> None:
    with FakeVLLM(api_key="k-123", tasks=EMBEDDING_TASKS) as keyed:
        embeddings = VLLMEmbeddings(base_url=keyed.url, api_key="k-123")
        assert len(embeddings.embed_query("a")) == 384
        assert "k-123" not in repr(embeddings) and "k-123" not in embeddings.model_dump_json()
        with pytest.raises(vt.AuthenticationError):
            VLLMEmbeddings(base_url=keyed.url, api_key="wrong").embed_query("a")


def test_pickle_and_deepcopy_build_their_own_clients(server: FakeVLLM) -> None:
    embeddings = VLLMEmbeddings(base_url=server.url, api_key="k", params={"dimensions": 32}, batch_size=8)
    expected = embeddings.embed_query("hello")
    for copied in (pickle.loads(pickle.dumps(embeddings)), copy.deepcopy(embeddings)):
        assert copied.params.dimensions == 32 and copied.api_key is not None
        assert copied.api_key.get_secret_value() == "k"
        assert copied.embed_query("hello") == expected
        assert asyncio.run(copied.aembed_query("hello")) == expected
    reranker = pickle.loads(pickle.dumps(VLLMReranker(base_url=server.url, top_n=1)))
    assert len(reranker.compress_documents([Document("a"), Document("b")], "a")) == 1


def test_own_clients_are_used_and_not_pickled(server: FakeVLLM) -> None:
    with vt.Client(server.url, model="minilm", headers={"X-Mine": "1"}) as client:
        embeddings = VLLMEmbeddings(client=client)
        assert embeddings.base_url == server.url and embeddings.model == "minilm"
        embeddings.embed_query("a")
        assert server.received("/v1/embeddings")[-1].headers["x-mine"] == "1"
        copied = pickle.loads(pickle.dumps(embeddings))
        copied.embed_query("a")  # its own client, built from the client's settings: X-Mine too
        assert server.received("/v1/embeddings")[-1].headers["x-mine"] == "1"
        embeddings.close()  # leaves the caller's client open
        assert len(client.embed("still open").vectors) == 1


def test_the_async_methods_count_into_the_callers_client(server: FakeVLLM) -> None:
    with vt.Client(server.url, model="minilm") as client:
        embeddings = VLLMEmbeddings(client=client)
        before = len(server.received())
        vectors = asyncio.run(embeddings.aembed_documents(["first", "second"]))
        assert vectors[0] != vectors[1]
        usage = client.usage
        assert usage.requests == len(server.received()) - before > 0  # every request the async call made
        assert usage.prompt_tokens > 0


# --------------------------------------------------------------------------------------------------
# VLLMReranker
# --------------------------------------------------------------------------------------------------


def documents() -> list[Document]:
    return [Document(page_content=t, metadata={"n": i}, id=f"doc-{i}") for i, t in enumerate(FACTS)]


def test_reranker_orders_like_the_sdk_and_keeps_metadata(fake_rerank: FakeFixture) -> None:
    """On a cross-encoder like the `rerank` fixture: sync and async both rank as ``client.rerank``."""
    reranker = VLLMReranker(base_url=fake_rerank.base_url, top_n=2)
    with vt.Client(fake_rerank.base_url) as client:
        expected = client.rerank(QUERY, FACTS, top_n=2)
    for ranked in (
        reranker.compress_documents(documents(), QUERY),
        asyncio.run(reranker.acompress_documents(documents(), QUERY)),
    ):
        assert [d.metadata["n"] for d in ranked] == expected.indices
        assert [d.metadata["relevance_score"] for d in ranked] == pytest.approx(list(expected.scores))
        assert [d.id for d in ranked] == [f"doc-{i}" for i in expected.indices]
        assert ranked[0].page_content == "Paris is the capital of France."
    assert "relevance_score" not in documents()[0].metadata  # copies, not the caller's documents


def test_reranker_top_n_none_keeps_every_document_and_async_agrees(server: FakeVLLM) -> None:
    reranker = VLLMReranker(base_url=server.url, top_n=None, batch_size=2)
    ranked = reranker.compress_documents(documents(), QUERY)
    assert sorted(d.metadata["n"] for d in ranked) == [0, 1, 2, 3]
    assert len(server.received("/rerank")) == 2  # split by batch_size, merged into one ranking
    scores = [d.metadata["relevance_score"] for d in ranked]
    assert scores == sorted(scores, reverse=True)
    again = asyncio.run(reranker.acompress_documents(documents(), QUERY))
    assert [(d.id, d.metadata) for d in again] == [(d.id, d.metadata) for d in ranked]
    assert reranker.compress_documents([], QUERY) == []
    assert asyncio.run(reranker.acompress_documents([], QUERY)) == []


def test_reranker_params_reach_the_server_and_a_misspelt_one_fails_at_construction(server: FakeVLLM) -> None:
    params = vt.RerankParams(truncate_prompt_tokens=-1, use_activation=True)
    reranker = VLLMReranker(base_url=server.url, top_n=2, params=params, extra_body={"priority": 0})
    reranker.compress_documents(documents(), QUERY)
    sent = server.received("/rerank")[-1].json
    assert (sent["truncate_prompt_tokens"], sent["use_activation"], sent["priority"], sent["top_n"]) == (
        -1,
        True,
        0,
        2,
    )
    with pytest.raises(ValueError, match="are not fields of RerankParams"):
        VLLMReranker(base_url=server.url, params={"max_token_per_doc": 8})
    assert len(server.received("/rerank")) == 1


def test_reranker_typed_errors_pass_through(server: FakeVLLM) -> None:
    server.fail(429, path="/rerank", times=None)
    with pytest.raises(vt.RateLimitError):
        VLLMReranker(base_url=server.url, max_retries=0).compress_documents(documents(), QUERY)
    server.clear_faults()
    with pytest.raises(vt.ContextLengthExceeded) as caught:
        VLLMReranker(base_url=server.url).compress_documents(
            [Document("short"), Document("word " * 2000)], QUERY
        )
    assert caught.value.input_index == 1


# --------------------------------------------------------------------------------------------------
# Loaders
# --------------------------------------------------------------------------------------------------


def pdf(path: Path, pages: int) -> Path:
    from PIL import Image

    images = [Image.new("RGB", (300, 400), "white") for _ in range(pages)]
    images[0].save(path, format="PDF", save_all=True, append_images=images[1:], resolution=72)
    return path


@pytest.fixture
def ocr_server() -> Iterator[FakeVLLM]:
    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS) as fake:
        yield fake


def test_ocr_loader_gives_one_document_per_pdf_page(ocr_server: FakeVLLM, tmp_path: Path) -> None:
    loader = VLLMOCRLoader(pdf(tmp_path / "two.pdf", 2), base_url=ocr_server.url, dpi=72, concurrency=2)
    docs = loader.load()
    with vt.Client(ocr_server.url) as client:
        expected = client.ocr_pdf(tmp_path / "two.pdf", dpi=72)
    assert [d.page_content for d in docs] == [p.result.markdown for p in expected.pages]
    assert [(d.metadata["page"], d.metadata["page_label"]) for d in docs] == [(0, "1"), (1, "2")]
    meta = docs[0].metadata
    assert meta["source"] == str(tmp_path / "two.pdf") and meta["model"] == "deepseek-ocr"
    assert meta["image_size"] == [300, 400] and meta["truncated"] is False
    first = expected.pages[0].result.blocks[0]
    assert meta["blocks"][0] == {
        "label": first.label,
        "text": first.text,
        "boxes": [list(b) for b in first.boxes],
        "boxes_normalized": [list(b) for b in first.boxes_normalized],
        "complete": True,
    }
    assert [b["label"] for b in meta["blocks"]] == ["title", "text", "table"]
    assert len(ocr_server.received("/v1/chat/completions")) >= 4  # 2 pages, twice (+ processor check)


def test_ocr_loader_single_mode_async_pages_and_images(ocr_server: FakeVLLM, tmp_path: Path) -> None:
    path = pdf(tmp_path / "three.pdf", 3)
    single = VLLMOCRLoader(path, base_url=ocr_server.url, dpi=72, mode="single", pages="2-3").load()
    assert len(single) == 1 and single[0].page_content.count("\n\n---\n\n") == 1
    assert single[0].metadata["pages"] == [1, 2] and single[0].metadata["truncated_pages"] == []
    assert {b["page"] for b in single[0].metadata["blocks"]} == {1, 2}
    pages = asyncio.run(VLLMOCRLoader(path, base_url=ocr_server.url, dpi=72, pages=[3]).aload())
    assert [d.metadata["page_label"] for d in pages] == ["3"]
    image = tmp_path / "scan.png"
    from PIL import Image

    Image.new("RGB", (320, 240), "white").save(image)
    [doc] = VLLMOCRLoader(image, base_url=ocr_server.url).load()
    assert doc.metadata["page"] == 0 and doc.metadata["image_size"] == [320, 240]
    [adoc] = asyncio.run(VLLMOCRLoader(str(image), base_url=ocr_server.url).aload())
    assert adoc.page_content == doc.page_content


def test_ocr_loader_refuses_before_sending(ocr_server: FakeVLLM, tmp_path: Path) -> None:
    with pytest.raises(vt.InvalidInputError, match="cannot be read"):
        VLLMOCRLoader(tmp_path / "missing.pdf", base_url=ocr_server.url)
    image = tmp_path / "scan.png"
    from PIL import Image

    Image.new("RGB", (32, 32)).save(image)
    with pytest.raises(vt.InvalidInputError, match="PDFs only"):
        VLLMOCRLoader(image, base_url=ocr_server.url, pages=[1])
    with pytest.raises(vt.InvalidInputError, match="mode"):
        VLLMOCRLoader(image, base_url=ocr_server.url, mode="pages")  # type: ignore[arg-type]
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not an image at all")
    with pytest.raises(vt.InvalidInputError):
        VLLMOCRLoader(broken, base_url=ocr_server.url).load()
    assert ocr_server.received("/v1/chat/completions") == []


def test_ocr_loader_truncated_pages_are_marked(ocr_server: FakeVLLM, tmp_path: Path) -> None:
    loader = VLLMOCRLoader(
        pdf(tmp_path / "one.pdf", 1), base_url=ocr_server.url, dpi=72, params={"max_tokens": 5}, quality=None
    )
    with pytest.warns(vt.ocr.OCRTruncatedWarning):
        [doc] = loader.load()
    assert doc.metadata["truncated"] is True and doc.metadata["finish_reason"] == "length"


@pytest.fixture
def speech_server() -> Iterator[FakeVLLM]:
    with FakeVLLM(model="whisper", tasks=SPEECH_TASKS) as fake:
        yield fake


def test_transcript_loader_segments_and_single(speech_server: FakeVLLM) -> None:
    docs = VLLMTranscriptLoader(
        FOX, base_url=speech_server.url, params=vt.TranscribeParams(language="en")
    ).load()
    assert [d.page_content for d in docs] == [
        "The quick brown fox jumped over the lazy dog.",
        "It was not amused.",
    ]
    assert [d.metadata["segment"] for d in docs] == [0, 1]
    assert docs[0].metadata["start"] == 0.0 and docs[0].metadata["end"] == docs[1].metadata["start"]
    assert docs[0].metadata["source"] == str(FOX) and docs[0].metadata["language"] == "en"
    sent = speech_server.received("/v1/audio/transcriptions")[-1]
    assert sent.form["response_format"] == "verbose_json" and sent.form["language"] == "en"
    loader = VLLMTranscriptLoader(FOX, base_url=speech_server.url, mode="single", params={"language": "en"})
    [whole] = asyncio.run(loader.aload())
    assert whole.page_content == " ".join(d.page_content for d in docs)
    assert whole.metadata["start"] == 0.0 and whole.metadata["end"] == whole.metadata["duration"]
    assert whole.metadata["source"] == str(FOX) and whole.metadata["language"] == "en"
    assert [s["text"] for s in whole.metadata["segments"]] == [d.page_content for d in docs]


def test_transcript_loader_chunks_a_long_file_client_side() -> None:
    """46 s of audio goes up in pieces, each shorter than the file and sent concurrently; the segments
    come back in file order, each piece's text in its place, and cover the whole file without gaps."""
    with wave.open(str(LONG)) as audio:
        duration = audio.getnframes() / audio.getframerate()
    with fake_like("stt", transcript=piece_transcript) as stt:
        segments = VLLMTranscriptLoader(LONG, base_url=stt.base_url, params={"language": "en"}).load()
        uploads = [r.files["file"] for r in stt.fake.received("/v1/audio/transcriptions")]
    names = sorted(u.filename or "" for u in uploads)
    assert len(uploads) >= 2 and names == [f"long45-{i:04d}{Path(n).suffix}" for i, n in enumerate(names)]
    assert all(audio_seconds(u.content) < duration for u in uploads)
    assert [d.page_content for d in segments] == [
        f"Piece {i} {half} here." for i in range(len(uploads)) for half in ("begins", "ends")
    ]
    starts = [d.metadata["start"] for d in segments]
    ends = [d.metadata["end"] for d in segments]
    assert starts == sorted(starts) and starts[0] == 0.0
    assert all(end > start for start, end in zip(starts, ends, strict=True))
    assert starts[1:] == pytest.approx(ends[:-1], abs=1e-3)  # no gap, no overlap
    assert ends[-1] == pytest.approx(duration, abs=1e-3)
    for number, doc in enumerate(segments):
        assert doc.metadata["segment"] == number and doc.metadata["source"] == str(LONG)
        assert doc.metadata["language"] == "en" and doc.metadata["model"] == stt.model


def test_transcript_loader_translates_and_passes_options(speech_server: FakeVLLM) -> None:
    params = vt.TranscribeParams(temperature=0.0)
    docs = VLLMTranscriptLoader(
        FOX, base_url=speech_server.url, translate=True, params=params, extra_body={"seed": 3}
    ).load()
    assert docs and speech_server.received("/v1/audio/translations")
    form = speech_server.received("/v1/audio/translations")[-1].form
    assert form["temperature"] == "0.0" and form["seed"] == "3"
    with pytest.raises(vt.InvalidInputError, match=r"params\.response_format"):
        VLLMTranscriptLoader(FOX, base_url=speech_server.url, params={"response_format": "text"})


def test_transcript_loader_undecodable_audio_is_refused_before_upload(
    speech_server: FakeVLLM, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF....WAVEfmt garbage")
    with pytest.raises(vt.InvalidInputError):
        VLLMTranscriptLoader(bad, base_url=speech_server.url).load()
    assert speech_server.received("/v1/audio/transcriptions") == []


def test_loaders_pickle(speech_server: FakeVLLM) -> None:
    loader = pickle.loads(pickle.dumps(VLLMTranscriptLoader(FOX, base_url=speech_server.url)))
    assert len(loader.load()) == 2


# --------------------------------------------------------------------------------------------------
# Dependencies
# --------------------------------------------------------------------------------------------------


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)


def test_without_langchain_the_extra_is_named() -> None:
    code = (
        "import sys; sys.modules['langchain_core'] = None\n"
        "import vllm_tasks as vt\n"
        "try:\n"
        "    import vllm_tasks.integrations.langchain\n"
        "except vt.MissingDependency as e:\n"
        "    print(type(e).__name__, e.extra, e)\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert "MissingDependency langchain" in result.stdout
    assert 'pip install "vllm-tasks[langchain]"' in result.stdout


def test_the_sdk_imports_no_framework() -> None:
    code = (
        "import sys, vllm_tasks, vllm_tasks.integrations, vllm_tasks.integrations._common\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('langchain_core', 'llama_index')))\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_module_docstring_example_shapes(server: FakeVLLM) -> None:
    """The module's example (store, search, rerank) runs as written against one fake server."""
    store = InMemoryVectorStore(VLLMEmbeddings(base_url=server.url))
    store.add_texts(["Paris is the capital of France.", "Bananas are yellow."])
    hits = store.similarity_search("capital of France?", k=2)
    best = VLLMReranker(base_url=server.url, top_n=1).compress_documents(hits, "capital?")
    assert len(best) == 1 and "relevance_score" in best[0].metadata


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda e: e.embed_documents([1, 2]), "texts[0]"),  # was: one vector for two documents
        (lambda e: e.embed_documents("abc"), "texts"),  # was: one vector per character
        (lambda e: e.embed_query(7), "text"),
        (lambda e: asyncio.run(e.aembed_documents(["a", None])), "texts[1]"),
    ],
)
def test_embeddings_refuse_what_is_not_a_list_of_texts(server: FakeVLLM, call: Any, field: str) -> None:
    server.clear_requests()
    with pytest.raises(vt.InvalidInputError) as caught:
        call(VLLMEmbeddings(base_url=server.url))
    assert caught.value.field == field and not server.received("/v1/embeddings")
