"""LangChain adapters over the SDK: embeddings, a reranker and two document loaders.

``pip install "vllm-tasks[langchain]"`` (langchain-core). Every class talks to a running vLLM server
through :class:`vllm_tasks.Client` (sync methods) and :class:`vllm_tasks.AsyncClient` (async methods), so
the SDK's batching, retries and typed errors (``vllm_tasks.ContextLengthExceeded``,
``vllm_tasks.EndpointNotServed``, ...) apply unchanged. See ``docs/integrations.md``.

- :class:`VLLMEmbeddings` -- ``Embeddings`` over ``/v1/embeddings``; no tokenizer switch to set (unlike
  ``OpenAIEmbeddings``' ``check_embedding_ctx_length``): texts go to vLLM as text.
- :class:`VLLMReranker` -- ``BaseDocumentCompressor`` over ``/rerank``; ``relevance_score`` in metadata.
- :class:`VLLMOCRLoader` -- ``BaseLoader``: a PDF or an image through DeepSeek-OCR, one ``Document`` per
  page (markdown), blocks and boxes in metadata.
- :class:`VLLMTranscriptLoader` -- ``BaseLoader``: audio through ``/v1/audio/transcriptions``, one
  ``Document`` per timed segment or one for the whole file.

Examples:
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> from vllm_tasks.integrations.langchain import VLLMEmbeddings, VLLMReranker
    >>> store = InMemoryVectorStore(VLLMEmbeddings(base_url="http://localhost:8000"))
    >>> store.add_texts(["Paris is the capital of France.", "Bananas are yellow."])
    >>> hits = store.similarity_search("capital of France?", k=2)
    >>> VLLMReranker(base_url="http://localhost:8001", top_n=1).compress_documents(hits, "capital?")
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, Literal

from ..dependencies import require

require("langchain_core", "langchain", "vllm_tasks.integrations.langchain")

from langchain_core.callbacks import Callbacks
from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import Embeddings

from .. import defaults
from .._async.client import AsyncClient
from .._sync.client import Client
from ..config import ClientSettings
from ..errors import InvalidInputError
from ..ocr import OCRParams
from ..ocr.ladder import DEFAULT_QUALITY, PageQuality, quality_of
from ..ocr.presets import OCRPreset
from ..transcription import TranscribeParams, segment_keywords
from ..types.ocr import OCRDocument, OCRResult
from ..types.scoring import RerankResult
from ._common import (
    SETTING_NAMES,
    ConnectionFields,
    EmbedOptions,
    RerankOptions,
    TopNField,
    is_pdf,
    ocr_document_pages,
    ocr_page_records,
    one_text,
    source_name,
    text_list,
    transcript_records,
)

__all__ = ["VLLMEmbeddings", "VLLMOCRLoader", "VLLMReranker", "VLLMTranscriptLoader"]


class VLLMEmbeddings(EmbedOptions, Embeddings):
    """LangChain ``Embeddings`` served by vLLM's ``/v1/embeddings`` (through the SDK).

    Long lists are split into requests of ``batch_size`` texts sent ``concurrency`` at a time; vectors
    come back as ``list[list[float]]`` in input order. Texts are sent as text: vLLM tokenizes them with
    the served model's own tokenizer (nothing to switch off, unlike ``OpenAIEmbeddings``).

    The server connection is one ``vllm_tasks.ClientSettings``: ``settings=`` (default: from the
    environment, ``VLLM_TASKS_BASE_URL`` and ``VLLM_API_KEY``), or any of its settings by name
    (``base_url=``, ``model=``, ``api_key=``, ``timeout=``, ``max_retries=``, ``headers=``,
    ``fetch_limits=``), or your own ``client=`` / ``async_client=`` (``ConnectionFields`` in
    ``vllm_tasks/integrations/_common.py``); all keyword arguments. ``base_url``, ``model`` and
    ``api_key`` read back from the settings.

    Attributes:
        params: the vector options of every request (``vllm_tasks.EmbedParams(dimensions=256,
            truncate_prompt_tokens=-1)`` or a dict of its fields): ``dimensions`` for a Matryoshka
            width, ``truncate_prompt_tokens=-1`` to cut over-long texts to the model's maximum instead
            of raising ``vllm_tasks.ContextLengthExceeded``, ...
        batch_size: texts per request (default 64).
        concurrency: requests in flight (default 4), or ``"auto"`` (tuned from the server's answers).
        query_prefix: text put before queries (e.g. ``"query: "`` for E5 models).
        document_prefix: text put before documents (e.g. ``"passage: "`` for E5 models).
        extra_body: extra JSON fields for every request.

    Raises:
        InvalidInputError: a bad setting or field value (naming it), at construction.

    Examples:
        >>> embeddings = VLLMEmbeddings(base_url="http://localhost:8000", model="BAAI/bge-m3")
        >>> vectors = embeddings.embed_documents(["first text", "second text"])
        >>> len(vectors), len(vectors[0])
        (2, 1024)
        >>> query = await embeddings.aembed_query("what is the second text?")
    """

    query_prefix: str = ""
    document_prefix: str = ""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents; ``[]`` for no texts (no request).

        Raises:
            InvalidInputError: a text that is not a string. Server errors as ``Client.embed`` raises them.
        """
        inputs = [self.document_prefix + text for text in text_list(texts)]
        if not inputs:
            return []
        vectors: list[list[float]] = self._sync_client().embed(inputs, **self._options()).vectors.tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        """Embed one query (``query_prefix`` put before it)."""
        result = self._sync_client().embed([self.query_prefix + one_text(text)], **self._options())
        vector: list[float] = result.vectors[0].tolist()
        return vector

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents with the running loop's ``AsyncClient``; ``[]`` for no texts."""
        inputs = [self.document_prefix + text for text in text_list(texts)]
        if not inputs:
            return []
        client = await self._async_client()
        result = await client.embed(inputs, **self._options())
        vectors: list[list[float]] = result.vectors.tolist()
        return vectors

    async def aembed_query(self, text: str) -> list[float]:
        """Embed one query with the running loop's ``AsyncClient``."""
        client = await self._async_client()
        result = await client.embed([self.query_prefix + one_text(text)], **self._options())
        vector: list[float] = result.vectors[0].tolist()
        return vector


class VLLMReranker(RerankOptions, BaseDocumentCompressor):
    """A LangChain document compressor that reorders documents with vLLM's ``/rerank``.

    The documents come back best first, cut to ``top_n``, each a copy with
    ``metadata["relevance_score"]`` set (the other metadata and the ``id`` kept). The score's scale
    depends on the served model: 0..1 for a cross-encoder, a cosine for an embedding model, an unbounded
    sum for late interaction (``docs/scoring.md``).

    The server connection is set as for :class:`VLLMEmbeddings` (``settings=``, its settings by name, or
    ``client=`` / ``async_client=``).

    Attributes:
        top_n: documents to keep (default 3; ``None`` keeps all, reordered).
        batch_size: documents per request (default 128).
        concurrency: requests in flight (default 4), or ``"auto"``.
        params: the rerank options (``vllm_tasks.RerankParams(max_tokens_per_doc=512,
            truncate_prompt_tokens=-1)`` or a dict of its fields): ``max_tokens_per_doc`` cuts each document
            to N tokens server-side (vLLM >= 0.20.0), ``truncate_prompt_tokens=-1`` cuts over-long pairs to
            the model's maximum, ...
        extra_body: extra JSON fields for every request.

    Raises:
        InvalidInputError: a bad setting or field value (naming it), at construction.

    Examples:
        >>> reranker = VLLMReranker(base_url="http://localhost:8001", top_n=2)
        >>> best = reranker.compress_documents(documents, "What is the capital of France?")
        >>> best[0].metadata["relevance_score"]
        0.97
    """

    top_n: TopNField = 3

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Rerank ``documents`` for ``query``: best first, at most ``top_n``; ``[]`` for none.

        Raises:
            VLLMTasksError: the SDK's errors, as ``Client.rerank`` raises them (e.g.
                ``EndpointNotServed`` when the server's model does not rerank).
        """
        docs = list(documents)
        if not docs:
            return []
        result = self._sync_client().rerank(query, [doc.page_content for doc in docs], **self._options())
        return _ranked(docs, result)

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """:meth:`compress_documents` with the running loop's ``AsyncClient``."""
        docs = list(documents)
        if not docs:
            return []
        client = await self._async_client()
        result = await client.rerank(query, [doc.page_content for doc in docs], **self._options())
        return _ranked(docs, result)


def _ranked(docs: Sequence[Document], result: RerankResult) -> list[Document]:
    ranked = []
    for hit in result.results:
        doc = docs[hit.index]
        metadata = {**doc.metadata, "relevance_score": hit.score}
        ranked.append(Document(page_content=doc.page_content, metadata=metadata, id=doc.id))
    return ranked


def _connection(
    settings: ClientSettings | None,
    client: Client | None,
    async_client: AsyncClient | None,
    connection: Mapping[str, Any],
) -> ConnectionFields:
    """A loader's connection (``connection``: settings by name, ``base_url=`` ...).

    Raises:
        InvalidInputError: a keyword that is not a setting (naming it), or a bad value.
    """
    unknown = sorted(set(connection) - SETTING_NAMES)
    if unknown:
        raise InvalidInputError(
            "options", unknown, "are not arguments of the loader or client settings", "Check the spelling."
        )
    return ConnectionFields(settings=settings, client=client, async_client=async_client, **connection)


class VLLMOCRLoader(BaseLoader):
    """Load a PDF or an image through DeepSeek-OCR on vLLM: one ``Document`` per page.

    ``page_content`` is the page's clean markdown (``OCRResult.markdown``). Metadata: ``source``,
    ``page`` (0-based) and ``page_label`` (1-based, as text) as LangChain's ``PyPDFLoader`` writes them,
    ``blocks`` (``label``, ``text``, ``boxes`` in pixels of the rendered page, ``boxes_normalized`` on
    the model's 0-999 grid, ``complete``), ``image_size``, ``truncated``, ``finish_reason``, ``model``.
    ``mode="single"`` gives one ``Document`` (pages joined by ``---``; each block carries its ``page``).

    Nested metadata (``blocks``) suits in-memory stores; for stores that take flat values only, drop it
    (``langchain_community``'s ``filter_complex_metadata``).

    Args:
        file_path: a PDF or an image file (PNG, JPEG, ... -- decided by the file's first bytes), or an
            image ``http(s)`` URL.
        mode: ``"page"`` (default) or ``"single"``.
        pages: PDF pages, 1-based numbers or a spec such as ``"1-5,8"`` (default: all).
        dpi: PDF rendering resolution (default 144).
        concurrency: PDF pages in flight.
        quality: the page-quality ladder of a PDF's pages (``vllm_tasks.ocr.PageQuality``, a dict of its
            fields, or ``None`` for one try per page; see :meth:`~vllm_tasks.Client.ocr_pdf`).
        params: the OCR options (``vllm_tasks.OCRParams(prompt="free", max_tokens=2048)``, or a dict of its
            fields): the prompt (``"markdown"``, ``"ocr"``, ``"free"``, ...; see ``docs/ocr.md``), the
            output limit per page (a page cut short has ``metadata["truncated"]`` set and warns,
            ``vllm_tasks.OCRTruncatedWarning``), the n-gram guard, ``max_side``, ...
        preset: the OCR model preset (``"deepseek-ocr"``, ``"generic"``, ... or an ``OCRPreset``), as
            ``params``' ``preset``; default: recognised from the served model.
        extra_body: extra JSON fields for every request.

    The connection arguments (``settings``, its settings by name such as ``base_url``, ``client``,
    ``async_client``) are as for :class:`VLLMEmbeddings`.

    Raises:
        InvalidInputError: the file does not exist, or ``pages`` was given for an image.
        MissingDependency: pillow / pypdfium2 are missing (``pip install "vllm-tasks[image]"``).

    Examples:
        >>> loader = VLLMOCRLoader("report.pdf", base_url="http://gpu-host:8000", pages="1-3")
        >>> docs = loader.load()
        >>> docs[0].metadata["page_label"], docs[0].metadata["blocks"][0]["label"]
        ('1', 'title')
    """

    def __init__(
        self,
        file_path: str | os.PathLike[str],
        *,
        mode: Literal["page", "single"] = "page",
        pages: Sequence[int] | str | None = None,
        dpi: float = defaults.OCR_PDF_DPI,
        concurrency: int = defaults.OCR_PDF_CONCURRENCY,
        quality: PageQuality | Mapping[str, Any] | None = DEFAULT_QUALITY,
        params: OCRParams | Mapping[str, Any] | None = None,
        preset: str | OCRPreset | None = None,
        extra_body: Mapping[str, Any] | None = None,
        settings: ClientSettings | None = None,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
        **connection: Any,
    ) -> None:
        if mode not in ("page", "single"):
            raise InvalidInputError("mode", mode, "must be 'page' or 'single'", "")
        self.file_path = file_path
        self.source = source_name(file_path)
        self.pdf = is_pdf(file_path)
        if pages is not None and not self.pdf:
            raise InvalidInputError("pages", pages, "applies to PDFs only", "Leave pages=None for an image.")
        self.mode: Literal["page", "single"] = mode
        self.pdf_options: dict[str, Any] = {
            "pages": pages,
            "dpi": dpi,
            "concurrency": concurrency,
            "quality": quality_of(quality),
        }
        self.params = OCRParams.of(params).using(preset)
        self.ocr_options: dict[str, Any] = {**self.params.keywords(), "extra_body": extra_body}
        self.connection = _connection(settings, client, async_client, connection)

    def _documents(self, document: OCRDocument | OCRResult) -> list[Document]:
        records = ocr_page_records(self.source, ocr_document_pages(document), self.mode)
        return [Document(page_content=text, metadata=metadata) for text, metadata in records]

    def lazy_load(self) -> Iterator[Document]:
        """OCR the file (every page, ``concurrency`` at a time) and yield its ``Document``s in page order."""
        client = self.connection._sync_client()
        if self.pdf:
            document: OCRDocument | OCRResult = client.ocr_pdf(
                self.file_path, **self.pdf_options, **self.ocr_options
            )
        else:
            document = client.ocr(self.file_path, **self.ocr_options)
        yield from self._documents(document)

    async def alazy_load(self) -> AsyncIterator[Document]:
        """:meth:`lazy_load` with the running loop's ``AsyncClient``."""
        client = await self.connection._async_client()
        if self.pdf:
            document: OCRDocument | OCRResult = await client.ocr_pdf(
                self.file_path, **self.pdf_options, **self.ocr_options
            )
        else:
            document = await client.ocr(self.file_path, **self.ocr_options)
        for doc in self._documents(document):
            yield doc


class VLLMTranscriptLoader(BaseLoader):
    """Load audio through vLLM's ``/v1/audio/transcriptions``: one ``Document`` per timed segment.

    The SDK asks for ``verbose_json`` and transcribes audio over 30 s client-side in Whisper's sequential
    windows so the segments cover the whole file (``docs/speech-to-text.md``). Segment metadata: ``source``,
    ``segment`` (0-based), ``start`` and ``end`` (seconds from the start of the file), ``language``,
    ``model``. ``mode="single"`` gives one ``Document`` with the whole transcript, ``start`` 0, ``end``,
    ``duration`` and ``segments`` (``start``, ``end``, ``text`` each). Segments without text are left out;
    a transcript the server sent without segments is one ``Document`` in both modes.

    Args:
        file_path: an audio file (WAV, FLAC, MP3, OGG, M4A, ...) or an ``http(s)`` URL.
        mode: ``"segments"`` (default) or ``"single"``.
        params: the speech options (``vllm_tasks.TranscribeParams(language="de", prompt=...)``, or a dict
            of its fields); ``response_format`` is the loader's (it needs the segments).
        translate: use ``/v1/audio/translations`` (to English) instead.
        extra_body: extra form fields for every request.

    The connection arguments (``settings``, its settings by name such as ``base_url``, ``client``,
    ``async_client``) are as for :class:`VLLMEmbeddings`.

    Raises:
        InvalidInputError: (``kind="audio_decode"``) the file cannot be decoded (before any upload).

    Examples:
        >>> docs = VLLMTranscriptLoader("meeting.mp3", base_url="http://localhost:8002").load()
        >>> docs[0].metadata["start"], docs[0].metadata["end"], docs[0].page_content
        (0.0, 4.2, 'Good morning everyone.')
    """

    def __init__(
        self,
        file_path: str | os.PathLike[str],
        *,
        mode: Literal["segments", "single"] = "segments",
        params: TranscribeParams | Mapping[str, Any] | None = None,
        translate: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        settings: ClientSettings | None = None,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
        **connection: Any,
    ) -> None:
        if mode not in ("segments", "single"):
            raise InvalidInputError("mode", mode, "must be 'segments' or 'single'", "")
        self.file_path = file_path
        self.source = source_name(file_path)
        self.mode: Literal["segments", "single"] = mode
        self.translate = translate
        self.params = TranscribeParams.of(params)
        self.options: dict[str, Any] = {**segment_keywords(self.params), "extra_body": extra_body}
        self.connection = _connection(settings, client, async_client, connection)

    def lazy_load(self) -> Iterator[Document]:
        """Transcribe the file and yield its ``Document``s in time order."""
        client = self.connection._sync_client()
        method = client.translate if self.translate else client.transcribe
        result = method(os.fspath(self.file_path), **self.options)
        for text, metadata in transcript_records(self.source, result, self.mode):
            yield Document(page_content=text, metadata=metadata)

    async def alazy_load(self) -> AsyncIterator[Document]:
        """:meth:`lazy_load` with the running loop's ``AsyncClient``."""
        client = await self.connection._async_client()
        method = client.translate if self.translate else client.transcribe
        result = await method(os.fspath(self.file_path), **self.options)
        for text, metadata in transcript_records(self.source, result, self.mode):
            yield Document(page_content=text, metadata=metadata)
