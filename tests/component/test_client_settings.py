"""``ClientSettings``, ``with_options`` and an injected ``http_client`` where the client goes, over real HTTP.

Every request a job, an adapter or a Ray callable sends on behalf of a client given its own
``http_client`` (a proxy, mTLS, auth hooks) must go through that ``http_client``: here an httpx client
whose request hook stamps ``X-Through: injected`` on each request, and the FakeVLLM servers check that
every request they received carries it. Before ``ClientSettings`` (issue 22), jobs and adapters rebuilt
their clients from the URL, key and timeouts alone: ``embed_file`` of such a client sent all its requests
with a new httpx client, and the injected one saw none. Where the client cannot go (pickled into a Ray
worker), it is refused with a typed error naming ``http_client``.
"""

from __future__ import annotations

import asyncio
import pickle
import shutil
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

import vllm_tasks as vt
from vllm_tasks.integrations.langchain import VLLMEmbeddings, VLLMOCRLoader, VLLMReranker
from vllm_tasks.integrations.llama_index import VLLMEmbedding, VLLMRerank
from vllm_tasks.integrations.ray import OCR, Embedder, Transcriber
from vllm_tasks.testing import EMBEDDING_TASKS, OCR_TASKS, RERANKER_TASKS, SPEECH_TASKS, FakeVLLM

ROOT = Path(__file__).parents[2]
PAGE, FOX = ROOT / "examples/data/page.png", ROOT / "tests/data/audio/fox.wav"
MARK = "x-through"
pytestmark = pytest.mark.filterwarnings("ignore::vllm_tasks.ocr.OCRTruncatedWarning")


def _stamp(request: httpx.Request) -> None:
    request.headers["X-Through"] = "injected"


async def _astamp(request: httpx.Request) -> None:
    _stamp(request)


def stamping_sync() -> httpx.Client:
    """An injected ``httpx.Client`` that stamps every request it sends."""
    return httpx.Client(event_hooks={"request": [_stamp]})


def stamping_async() -> httpx.AsyncClient:
    """An injected ``httpx.AsyncClient`` that stamps every request it sends."""
    return httpx.AsyncClient(event_hooks={"request": [_astamp]})


def assert_all_through(*fakes: FakeVLLM) -> None:
    """Every request the servers received went through the injected client (and there were some)."""
    for fake in fakes:
        received = fake.requests
        assert received, f"{fake.url} received nothing"
        strays = [f"{r.method} {r.path}" for r in received if r.headers.get(MARK) != "injected"]
        assert strays == [], f"sent without the injected http_client: {strays}"
        fake.clear_requests()


def run_with_client(kind: str, url: str, job: Callable[[Any], Any], **options: Any) -> Any:
    """``job(client)`` with a ``kind`` client given a stamping ``http_client``: a sync job with a
    ``Client``, a coroutine (awaited on its own loop) with an ``AsyncClient``."""
    if kind == "sync":
        with stamping_sync() as http, vt.Client(url, http_client=http, max_retries=0, **options) as client:
            return job(client)

    async def main() -> Any:
        async with (
            stamping_async() as http,
            vt.AsyncClient(url, http_client=http, max_retries=0, **options) as client,
        ):
            result = job(client)
            return await result if isinstance(result, Awaitable) else result

    return asyncio.run(main())


@pytest.fixture(scope="module")
def embed_fakes() -> Iterator[tuple[FakeVLLM, FakeVLLM]]:
    with (
        FakeVLLM(model="minilm", tasks=EMBEDDING_TASKS, width=8) as one,
        FakeVLLM(model="minilm", tasks=EMBEDDING_TASKS, width=8) as two,
    ):
        yield one, two


@pytest.fixture
def embedder(embed_fakes: tuple[FakeVLLM, FakeVLLM]) -> FakeVLLM:
    for fake in embed_fakes:
        fake.clear_requests()
    return embed_fakes[0]


@pytest.fixture(scope="module")
def reranker() -> Iterator[FakeVLLM]:
    with FakeVLLM(model="reranker", tasks=RERANKER_TASKS) as fake:
        yield fake


@pytest.fixture(scope="module")
def ocr_fake() -> Iterator[FakeVLLM]:
    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS) as fake:
        yield fake


@pytest.fixture(scope="module")
def stt_fake() -> Iterator[FakeVLLM]:
    with FakeVLLM(model="whisper", tasks=SPEECH_TASKS) as fake:
        yield fake


@pytest.fixture(autouse=True)
def _forget_requests(reranker: FakeVLLM, ocr_fake: FakeVLLM, stt_fake: FakeVLLM) -> None:
    for fake in (reranker, ocr_fake, stt_fake):
        fake.clear_requests()


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(f"text number {i}" for i in range(49)) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------------
# Jobs
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_embed_file_sends_every_request_through_the_clients_http_client(
    kind: str, embedder: FakeVLLM, corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "vectors.npy"
    job = vt.embed_file if kind == "sync" else vt.aembed_file

    report = run_with_client(kind, embedder.url, lambda c: job(c, corpus, out, batch_size=4))
    assert report.texts == 49 and np.load(out).shape == (49, 8)
    assert len(embedder.received("/v1/embeddings")) >= 13
    assert_all_through(embedder)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_job_over_replicas_made_with_with_options_shares_the_http_client(
    kind: str, embed_fakes: tuple[FakeVLLM, FakeVLLM], corpus: Path, tmp_path: Path
) -> None:
    one, two = embed_fakes
    for fake in embed_fakes:
        fake.clear_requests()
    job = vt.embed_file if kind == "sync" else vt.aembed_file

    def both(client: Any) -> Any:
        return job([client, client.with_options(base_url=two.url)], corpus, tmp_path / "v.npy", batch_size=2)

    report = run_with_client(kind, one.url, both)
    assert report.texts == 49 and {r.url for r in report.replicas} == {one.url, two.url}
    assert_all_through(one, two)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_ocr_dir_sends_every_request_through_the_clients_http_client(
    kind: str, ocr_fake: FakeVLLM, tmp_path: Path
) -> None:
    scans = tmp_path / "scans"
    scans.mkdir()
    shutil.copy(PAGE, scans / "a.png")
    shutil.copy(PAGE, scans / "b.png")
    job = vt.ocr_dir if kind == "sync" else vt.aocr_dir

    report = run_with_client(
        kind,
        ocr_fake.url,
        lambda c: job(c, scans, tmp_path / "md", params=vt.OCRParams(max_tokens=32), quality=None),
    )
    assert report.complete and report.units_sent == 2
    assert_all_through(ocr_fake)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_transcribe_dir_sends_every_request_through_the_clients_http_client(
    kind: str, stt_fake: FakeVLLM, tmp_path: Path
) -> None:
    calls = tmp_path / "calls"
    calls.mkdir()
    shutil.copy(FOX, calls / "fox.wav")
    job = vt.transcribe_dir if kind == "sync" else vt.atranscribe_dir

    report = run_with_client(
        kind,
        stt_fake.url,
        lambda c: job(c, calls, tmp_path / "out", params=vt.TranscribeParams(language="en")),
    )
    assert report.complete and report.units_sent == 1
    assert_all_through(stt_fake)


# --------------------------------------------------------------------------------------------------
# LangChain and LlamaIndex adapters
# --------------------------------------------------------------------------------------------------


def test_langchain_adapters_given_a_client_send_sync_and_async_calls_through_its_http_client(
    embedder: FakeVLLM, reranker: FakeVLLM, ocr_fake: FakeVLLM
) -> None:
    from langchain_core.documents import Document

    with stamping_sync() as http:
        with vt.Client(embedder.url, http_client=http) as client:
            embeddings = VLLMEmbeddings(client=client)
            assert len(embeddings.embed_documents(["a", "b"])) == 2
            assert len(asyncio.run(embeddings.aembed_documents(["c"]))) == 1  # no AsyncClient of its own
            assert len(asyncio.run(embeddings.aembed_query("d"))) == 8
        with vt.Client(reranker.url, http_client=http) as client:
            compressor = VLLMReranker(client=client, top_n=1)
            docs = [Document("Paris"), Document("cats")]
            assert len(compressor.compress_documents(docs, "capital?")) == 1
            assert len(asyncio.run(compressor.acompress_documents(docs, "capital?"))) == 1
        with vt.Client(ocr_fake.url, http_client=http) as client:
            loader = VLLMOCRLoader(PAGE, client=client, params={"max_tokens": 16})
            assert len(loader.load()) == len(asyncio.run(loader.aload())) == 1
    assert_all_through(embedder, reranker, ocr_fake)


def test_an_adapter_given_only_an_async_client_with_its_own_http_client_refuses_sync_calls(
    embedder: FakeVLLM,
) -> None:
    async def main() -> None:
        async with stamping_async() as http, vt.AsyncClient(embedder.url, http_client=http) as client:
            embeddings = VLLMEmbeddings(async_client=client)
            assert len(await embeddings.aembed_documents(["a", "b"])) == 2
            with pytest.raises(vt.InvalidInputError, match="http_client") as info:
                embeddings.embed_documents(["a"])  # a Client cannot use an httpx.AsyncClient
            assert info.value.field == "client"

    asyncio.run(main())
    assert_all_through(embedder)


def test_llama_index_adapters_given_a_client_send_every_call_through_its_http_client(
    embedder: FakeVLLM, reranker: FakeVLLM
) -> None:
    from llama_index.core.schema import NodeWithScore, TextNode

    with stamping_sync() as http:
        with vt.Client(embedder.url, http_client=http) as client:
            model = VLLMEmbedding(client=client)
            assert len(model.get_text_embedding_batch(["a", "b"])) == 2
            assert len(asyncio.run(model.aget_query_embedding("c"))) == 8
        with vt.Client(reranker.url, http_client=http) as client:
            nodes = [NodeWithScore(node=TextNode(text=t)) for t in ("Paris", "cats")]
            assert len(VLLMRerank(client=client, top_n=1).postprocess_nodes(nodes, query_str="capital?")) == 1
    assert_all_through(embedder, reranker)


def test_adapters_pickle_their_settings_and_refuse_an_injected_http_client(embedder: FakeVLLM) -> None:
    settings = vt.ClientSettings(embedder.url, api_key="k-1", headers={"X-Team": "rag"})
    copied = pickle.loads(pickle.dumps(VLLMEmbeddings(settings=settings, params={"dimensions": 4})))
    assert copied.settings == settings and copied.params.dimensions == 4
    copied.embed_query("a")
    sent = embedder.received("/v1/embeddings")[-1].headers
    assert sent["authorization"] == "Bearer k-1" and sent["x-team"] == "rag"
    with (
        stamping_sync() as http,
        vt.Client(embedder.url, http_client=http) as client,
        pytest.raises(vt.InvalidInputError, match="http_client"),
    ):
        pickle.dumps(VLLMEmbeddings(client=client))


# --------------------------------------------------------------------------------------------------
# Ray callables
# --------------------------------------------------------------------------------------------------


def test_ray_callables_given_a_client_use_its_http_client_and_refuse_to_be_pickled(
    embedder: FakeVLLM,
) -> None:
    with stamping_sync() as http, vt.Client(embedder.url, http_client=http) as client:
        embed = Embedder(client=client, batch_size=2)
        out = embed({"text": np.array(["one", "two", "three"])})
        assert out["embedding"].shape == (3, 8)
        with pytest.raises(vt.InvalidInputError, match="http_client") as info:
            pickle.dumps(embed)  # what Ray does to send it to a worker
        assert info.value.field == "client"
    assert_all_through(embedder)


def test_ray_callables_pickle_settings_with_the_key(embedder: FakeVLLM) -> None:
    with vt.Client(embedder.url, api_key="k-2", max_retries=0) as client:
        embed = Embedder(client=client)
        copy = pickle.loads(pickle.dumps(embed))  # a client without its own http_client: its settings go
        assert copy.settings == client.settings and "k-2" not in repr(copy)
    copy({"text": np.array(["one"])})
    assert embedder.received("/v1/embeddings")[-1].headers["authorization"] == "Bearer k-2"
    copy.close()


@pytest.mark.parametrize("cls", [OCR, Transcriber])
def test_ray_ocr_and_transcriber_refuse_private_urls_through_the_settings(
    cls: type, ocr_fake: FakeVLLM, stt_fake: FakeVLLM
) -> None:
    fake = ocr_fake if cls is OCR else stt_fake
    limits = vt.FetchLimits(refuse_private=True)
    column = "image_column" if cls is OCR else "audio_column"
    settings = vt.ClientSettings(fake.url, fetch_limits=limits)
    callable_ = cls(settings=settings, on_error="column", **{column: "url"})
    callable_ = pickle.loads(pickle.dumps(callable_))  # as a Ray worker gets it
    private = f"{fake.url}/files/secret"  # 127.0.0.1: a private address
    out = callable_({"url": np.array([private], dtype=object)})
    assert "private" in out["error"][0] and fake.received(fake_path(cls)) == []
    callable_.close()


def fake_path(cls: type) -> str:
    return "/v1/chat/completions" if cls is OCR else "/v1/audio/transcriptions"


# --------------------------------------------------------------------------------------------------
# with_options and from_settings over real HTTP
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_with_options_shares_the_injected_http_client(
    kind: str, embed_fakes: tuple[FakeVLLM, FakeVLLM]
) -> None:
    one, two = embed_fakes
    for fake in embed_fakes:
        fake.clear_requests()

    def calls(client: Any) -> Any:
        other = client.with_options(base_url=two.url, headers={"X-Copy": "1"})
        assert other.settings.headers == {"X-Copy": "1"} and other.base_url == two.url
        if kind == "sync":
            client.embed("a"), other.embed("b")
            other.close()  # the shared http_client stays open for the original
            return client.embed("c")

        async def both() -> Any:
            await client.embed("a"), await other.embed("b")
            await other.close()
            return await client.embed("c")

        return both()

    run_with_client(kind, one.url, calls)
    assert two.received("/v1/embeddings")[-1].headers["x-copy"] == "1"
    assert_all_through(one, two)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_from_settings_builds_a_working_client_with_every_setting(kind: str, embedder: FakeVLLM) -> None:
    settings = vt.ClientSettings(embedder.url, api_key="k-3", model="minilm", headers={"X-Team": "a"})
    cls = vt.Client if kind == "sync" else vt.AsyncClient

    async def run(client: Any) -> Any:
        async with client:
            return await client.embed("hello")

    client = cls.from_settings(settings)
    assert client.settings == settings
    result = client.embed("hello") if kind == "sync" else asyncio.run(run(client))
    assert result.vectors.shape == (1, 8)
    sent = embedder.received("/v1/embeddings")[-1]
    assert sent.headers["authorization"] == "Bearer k-3" and sent.headers["x-team"] == "a"
    assert sent.json["model"] == "minilm"
    if kind == "sync":
        client.close()
