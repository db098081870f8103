"""What the LangChain and LlamaIndex adapters share, without importing either framework.

- :class:`Connection` and :class:`ClientPool`: the SDK clients an adapter calls through -- one ``Client``,
  one ``AsyncClient`` per event loop (an ``httpx.AsyncClient`` must not outlive or change its loop) --
  built lazily from settings that pickle; the clients themselves never travel through ``pickle``.
- :class:`ConnectionFields`: the pydantic fields every adapter model has (``base_url``, ``model``,
  ``api_key``, ``timeout``, ``max_retries``, ``headers``) and the ``client=`` / ``async_client=`` arguments.
- Pure converters from SDK results to ``(text, metadata)`` pairs, which each framework wraps in its own
  document type: OCR pages (:func:`ocr_page_records`) and transcripts (:func:`transcript_records`).
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr

from .. import defaults
from .._async.client import AsyncClient
from .._sync.client import Client
from ..config import ClientConfig
from ..errors import InvalidInputError
from ..types.audio import Transcription
from ..types.ocr import OCRBlock, OCRDocument, OCRResult
from ..validation import int_at_least, positive_int

Record = tuple[str, dict[str, Any]]
"""A document before a framework wraps it: its text and its metadata."""

DEFAULT_TIMEOUT = 600.0
"""Seconds per request (connecting: at most 10 s), as the SDK's clients default to."""


@dataclass(frozen=True)
class Connection:
    """Everything needed to build a client; plain data, so it pickles.

    Raises:
        InvalidInputError: on creation, for a bad URL, key, model, retries or headers (the SDK's checks).
    """

    base_url: str | None
    api_key: str | None = field(default=None, repr=False)
    model: str | None = None
    timeout: float | None = DEFAULT_TIMEOUT
    max_retries: int = defaults.MAX_RETRIES
    headers: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        ClientConfig.create(
            self.base_url,
            api_key=self.api_key,
            model=self.model,
            timeout=self._timeout(),
            max_retries=self.max_retries,
            headers=self.headers,
        )

    def _timeout(self) -> httpx.Timeout | None:
        if self.timeout is None:
            return None
        return httpx.Timeout(self.timeout, connect=min(self.timeout, defaults.TIMEOUT.connect or 10.0))

    def _arguments(self) -> dict[str, Any]:
        return {
            "api_key": self.api_key,
            "model": self.model,
            "timeout": self._timeout(),
            "max_retries": self.max_retries,
            "headers": self.headers,
        }

    def client(self) -> Client:
        """A new ``Client`` with these settings."""
        return Client(self.base_url, **self._arguments())

    def async_client(self) -> AsyncClient:
        """A new ``AsyncClient`` with these settings."""
        return AsyncClient(self.base_url, **self._arguments())


class _LoopClient:
    """An ``AsyncClient`` built for one event loop, closed when that loop shuts down.

    Its closer is an async generator, which the loop registers at its first step and closes in
    ``loop.shutdown_asyncgens()``, while the loop can still run the connections' closing I/O. Until then
    ``_LoopClient.open`` holds it: not the adapter, which may be dropped first, and not the loop, which
    holds it only weakly. Closed any other way (a task started by a finalizer), the close could still be
    under way when the loop closes, leaving sockets open.
    """

    open: ClassVar[set[_LoopClient]] = set()
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, loop: asyncio.AbstractEventLoop, client: AsyncClient) -> None:
        self.loop = loop
        self.client = client
        self.closer = self._close_at_shutdown()
        with self._lock:
            for stale in [entry for entry in self.open if entry.loop.is_closed()]:
                self.open.discard(stale)  # closed without shutdown_asyncgens(): nothing left to run
            self.open.add(self)

    async def start(self) -> None:
        """Register the closer with the running loop (call once, on ``loop``)."""
        await self.closer.__anext__()

    async def _close_at_shutdown(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            with self._lock:
                self.open.discard(self)
            await self.client.close()


class ClientPool:
    """The clients an adapter calls through, built on first use.

    ``sync()`` returns one ``Client`` (thread-safe, shared). ``for_running_loop()`` returns one
    ``AsyncClient`` per running event loop: an ``httpx.AsyncClient``'s connections belong to the loop that
    opened them, and frameworks call async methods from several loops (``asyncio.run`` per call, a
    notebook's loop, worker threads).

    What the pool built is closed by ``close()`` / ``aclose()``, or else without being asked (frameworks
    drop adapters unclosed): the ``Client`` when the pool is garbage-collected, each ``AsyncClient`` when
    its loop shuts down (the ``loop.shutdown_asyncgens()`` that ``asyncio.run``, ``asyncio.Runner``, anyio
    and pytest-asyncio call before closing a loop). A loop closed without ``shutdown_asyncgens()`` leaves
    its connections to the garbage collector: ``await adapter.aclose()`` before closing such a loop.
    Clients passed in by the caller are used as they are, on every loop, and never closed here.

    Pickling (and ``copy.deepcopy``) keeps only the :class:`Connection`: the copy builds its own clients.
    """

    def __init__(
        self, connection: Connection, client: Client | None = None, async_client: AsyncClient | None = None
    ) -> None:
        self.connection = connection
        self._given_client = client
        self._given_async = async_client
        self._lock = threading.Lock()
        self._client: Client | None = None
        self._close_client: weakref.finalize[[], ClientPool] | None = None
        # An entry refers to its loop (through its connections), so a weak key would never go: entries of
        # closed loops are dropped when the next loop's entry is made.
        self._per_loop: dict[asyncio.AbstractEventLoop, _LoopClient] = {}

    def sync(self) -> Client:
        """The ``Client`` (the caller's, else one built from the connection)."""
        if self._given_client is not None:
            return self._given_client
        with self._lock:
            if self._client is None:
                self._client = self.connection.client()
                self._close_client = weakref.finalize(self, self._client.close)
            return self._client

    async def for_running_loop(self) -> AsyncClient:
        """The ``AsyncClient`` for the running event loop (the caller's, else one per loop).

        Raises:
            RuntimeError: no event loop is running (call it from a coroutine).
        """
        if self._given_async is not None:
            return self._given_async
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._per_loop.get(loop)
            if entry is None:
                for closed in [other for other in self._per_loop if other.is_closed()]:
                    del self._per_loop[closed]
                entry = self._per_loop[loop] = _LoopClient(loop, self.connection.async_client())
                new = True
            else:
                new = False
        if new:
            await entry.start()
        return entry.client

    def close(self) -> None:
        """Close the ``Client`` built here (a caller's client is left open). Each ``AsyncClient`` built
        here closes when its loop shuts down, or at ``aclose()`` on that loop."""
        with self._lock:
            close_client, self._close_client, self._client = self._close_client, None, None
        if close_client is not None:
            close_client()

    async def aclose(self) -> None:
        """Close the clients built here: the running loop's ``AsyncClient`` and the ``Client``."""
        with self._lock:
            entry = self._per_loop.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            await entry.closer.aclose()
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"connection": self.connection}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["connection"])  # type: ignore[misc]

    def __deepcopy__(self, memo: dict[int, Any]) -> ClientPool:
        return ClientPool(self.connection, self._given_client, self._given_async)


def _env_base_url() -> str:
    return os.environ.get(defaults.BASE_URL_ENV) or defaults.BASE_URL


def _env_api_key() -> SecretStr | None:
    value = os.environ.get(defaults.API_KEY_ENV)
    return SecretStr(value) if value else None


class ConnectionFields(BaseModel):
    """The server connection of an adapter model (pydantic fields, so frameworks can serialise them).

    Args:
        base_url: the vLLM server's root URL. Default: env ``VLLM_TASKS_BASE_URL``, else
            ``http://localhost:8000`` (a trailing ``/v1`` is removed).
        model: the served model name; ``None`` uses the server's first model.
        api_key: sent as ``Authorization: Bearer``. Default: env ``VLLM_API_KEY``.
        timeout: seconds per request (``None``: no limit).
        max_retries: retries for connection errors, timeouts, 408/409/429/5xx.
        headers: extra headers sent with every request.
        client: your own ``vllm_tasks.Client`` for the sync methods (not carried through pickling: a
            copy builds its own from the fields above, which default to this client's settings).
        async_client: your own ``vllm_tasks.AsyncClient`` for the async methods (same rule).

    Raises:
        InvalidInputError: a bad URL, key, model name, ``max_retries`` or headers, at construction.
    """

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(default_factory=_env_base_url)
    model: str | None = None
    # Never serialised (model_dump, LlamaIndex's to_json): a model rebuilt from a dump reads the key from
    # the environment again. Pickling keeps it (the SDK's own rule for copies sent to worker processes).
    api_key: SecretStr | None = Field(default_factory=_env_api_key, exclude=True)
    timeout: float | None = DEFAULT_TIMEOUT
    max_retries: int = defaults.MAX_RETRIES
    headers: dict[str, str] | None = None

    _pool: ClientPool = PrivateAttr()

    def __init__(
        self, *, client: Client | None = None, async_client: AsyncClient | None = None, **data: Any
    ) -> None:
        given = client if client is not None else async_client
        if given is not None:
            _check_client_types(client, async_client)
            data.setdefault("base_url", given.base_url)
            data.setdefault("model", given.model)
            if given._config.api_key is not None:
                data.setdefault("api_key", SecretStr(given._config.api_key))
        super().__init__(**data)
        connection = Connection(
            self.base_url,
            api_key=self.api_key.get_secret_value() if self.api_key is not None else None,
            model=self.model,
            timeout=self.timeout,
            max_retries=self.max_retries,
            headers=self.headers,
        )
        self._pool = ClientPool(connection, client, async_client)

    def _sync_client(self) -> Client:
        return self._pool.sync()

    async def _async_client(self) -> AsyncClient:
        return await self._pool.for_running_loop()

    def close(self) -> None:
        """Close the connections this adapter opened (your own ``client=`` is left to you)."""
        self._pool.close()

    async def aclose(self) -> None:
        """Close the connections this adapter opened on the running loop, and the sync ones."""
        await self._pool.aclose()


class EmbedOptions(ConnectionFields):
    """The embedding settings every embeddings adapter has, on top of the connection.

    Args:
        dimensions: Matryoshka width (``vllm_tasks.MatryoshkaNotSupported`` on other models).
        batch_size: texts per request; concurrency: requests in flight.
        truncate_prompt_tokens: ``-1`` cuts over-long texts to the model's maximum.
        extra_body: extra JSON fields for every request.

    Raises:
        InvalidInputError: ``batch_size`` or ``concurrency`` not an int >= 1, at construction.
    """

    dimensions: int | None = None
    batch_size: int = defaults.EMBED_BATCH_SIZE
    concurrency: int = defaults.CONCURRENCY
    truncate_prompt_tokens: int | None = None
    extra_body: dict[str, Any] | None = None

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        check_batching(self.batch_size, self.concurrency)

    def _options(self) -> dict[str, Any]:
        """The keyword arguments of ``Client.embed`` these settings stand for."""
        return {
            "dimensions": self.dimensions,
            "batch_size": self.batch_size,
            "concurrency": self.concurrency,
            "truncate_prompt_tokens": self.truncate_prompt_tokens,
            "extra_body": self.extra_body,
        }


class RerankOptions(ConnectionFields):
    """The rerank settings every reranking adapter has, on top of the connection (each framework's
    adapter sets its own ``top_n`` default).

    Raises:
        InvalidInputError: ``batch_size``, ``concurrency`` or ``top_n`` out of range, at construction.
    """

    top_n: int | None = None
    batch_size: int = defaults.SCORE_BATCH_SIZE
    concurrency: int = defaults.CONCURRENCY
    max_tokens_per_doc: int | None = None
    truncate_prompt_tokens: int | None = None
    extra_body: dict[str, Any] | None = None

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        check_batching(self.batch_size, self.concurrency)
        check_top_n(self.top_n)

    def _options(self) -> dict[str, Any]:
        """The keyword arguments of ``Client.rerank`` these settings stand for."""
        return {
            "top_n": self.top_n,
            "batch_size": self.batch_size,
            "concurrency": self.concurrency,
            "max_tokens_per_doc": self.max_tokens_per_doc,
            "truncate_prompt_tokens": self.truncate_prompt_tokens,
            "extra_body": self.extra_body,
        }


def _check_client_types(client: object, async_client: object) -> None:
    if client is not None and not isinstance(client, Client):
        raise InvalidInputError(
            "client",
            type(client).__name__,
            "must be a vllm_tasks.Client",
            "Pass an AsyncClient as async_client=.",
        )
    if async_client is not None and not isinstance(async_client, AsyncClient):
        raise InvalidInputError(
            "async_client",
            type(async_client).__name__,
            "must be a vllm_tasks.AsyncClient",
            "Pass sync clients as client=.",
        )


def check_batching(batch_size: object, concurrency: object) -> None:
    """``batch_size`` and ``concurrency`` are ints >= 1, else ``InvalidInputError`` at construction."""
    positive_int("batch_size", batch_size)
    positive_int("concurrency", concurrency)


def check_top_n(top_n: object) -> None:
    """``top_n`` is ``None`` or an int >= 1."""
    int_at_least("top_n", top_n, 1, "Use None to keep every document.")


# --------------------------------------------------------------------------------------------------
# Documents: SDK results as (text, metadata) records
# --------------------------------------------------------------------------------------------------


def source_name(source: Any) -> str:
    """What a loader writes as ``metadata["source"]``: the path or URL as given."""
    return os.fspath(source) if isinstance(source, os.PathLike) else str(source)


def is_pdf(source: str | os.PathLike[str]) -> bool:
    """Whether a local file is a PDF (by its first bytes; a ``.pdf`` name that is not one is refused).

    Raises:
        InvalidInputError: the file does not exist.
    """
    text = os.fspath(source)
    if text.startswith(("http://", "https://", "data:")):
        return False
    path = Path(text)
    if not path.is_file():
        raise InvalidInputError("file_path", text, "is not a file", "Pass the path of a PDF or an image.")
    with path.open("rb") as handle:
        return handle.read(5) == b"%PDF-"


def block_metadata(block: OCRBlock) -> dict[str, Any]:
    """One OCR block as JSON-friendly metadata: label, text, pixel and 0-999 boxes, complete."""
    return {
        "label": block.label,
        "text": block.text,
        "boxes": [list(box) for box in block.boxes],
        "boxes_normalized": [list(box) for box in block.boxes_normalized],
        "complete": block.complete,
    }


def ocr_page_metadata(source: str, page: int, result: OCRResult) -> dict[str, Any]:
    """Metadata of one OCR'd page: ``page`` is 0-based and ``page_label`` 1-based, as LangChain's
    ``PyPDFLoader`` writes them; blocks and boxes as :func:`block_metadata`."""
    return {
        "source": source,
        "page": page - 1,
        "page_label": str(page),
        "blocks": [block_metadata(block) for block in result.blocks],
        "image_size": list(result.image_size) if result.image_size is not None else None,
        "truncated": result.truncated,
        "finish_reason": result.finish_reason,
        "model": result.model,
    }


def ocr_page_records(
    source: str, pages: Sequence[tuple[int, OCRResult]], mode: Literal["page", "single"]
) -> list[Record]:
    """OCR results as records: one per page (``mode="page"``), or one for the whole document with the
    pages' markdown joined by ``---`` and every block tagged with its ``page``.

    Examples:
        >>> ocr_page_records("scan.png", [(1, result)], "page")[0][1]["page_label"]
        '1'
    """
    if mode == "page":
        return [(result.markdown, ocr_page_metadata(source, page, result)) for page, result in pages]
    blocks = [
        {**block_metadata(block), "page": page - 1} for page, result in pages for block in result.blocks
    ]
    metadata = {
        "source": source,
        "pages": [page - 1 for page, _ in pages],
        "blocks": blocks,
        "truncated_pages": [page - 1 for page, result in pages if result.truncated],
        "model": pages[0][1].model if pages else None,
    }
    return [("\n\n---\n\n".join(result.markdown for _, result in pages), metadata)]


def ocr_document_pages(document: OCRDocument | OCRResult) -> list[tuple[int, OCRResult]]:
    """``(1-based page number, result)`` pairs of a PDF's ``OCRDocument`` or one image's ``OCRResult``."""
    if isinstance(document, OCRResult):
        return [(1, document)]
    return [(page.page, page.result) for page in document.pages]


def transcript_records(
    source: str, transcription: Transcription, mode: Literal["segments", "single"]
) -> list[Record]:
    """A transcript as records: one per timed segment (``start``/``end`` in seconds from the start of
    the file), or one for the whole text with its segments in the metadata. A transcript without
    segments (the server sent none) is one record spanning the whole file in both modes.

    Examples:
        >>> transcript_records("talk.wav", result, "segments")[0][1]["start"]
        0.0
    """
    common = {"source": source, "language": transcription.language, "model": transcription.model}
    end = transcription.duration
    if end is None and transcription.segments:
        end = transcription.segments[-1].end
    segments = [s for s in transcription.segments if s.text.strip()]
    if mode == "single" or not segments:
        timed = [{"start": s.start, "end": s.end, "text": s.text.strip()} for s in segments]
        metadata = {**common, "start": 0.0, "end": end, "duration": transcription.duration, "segments": timed}
        return [(transcription.text.strip(), metadata)]
    return [
        (s.text.strip(), {**common, "segment": index, "start": s.start, "end": s.end})
        for index, s in enumerate(segments)
    ]
