"""What the LangChain and LlamaIndex adapters share, without importing either framework.

- :class:`ClientPool`: the SDK clients an adapter calls through -- one ``Client``, one ``AsyncClient`` per
  event loop (an ``httpx.AsyncClient`` must not outlive or change its loop) -- built lazily from a
  ``ClientSettings``, which pickles; the clients themselves never travel through ``pickle``.
- :class:`ConnectionFields`: the pydantic field every adapter model has (``settings``, a
  ``ClientSettings``; its settings may be given one by one too: ``base_url=``, ``api_key=``, ...) and the
  ``client=`` / ``async_client=`` arguments.
- Pure converters from SDK results to ``(text, metadata)`` pairs, which each framework wraps in its own
  document type: OCR pages (:func:`ocr_page_records`) and transcripts (:func:`transcript_records`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, TypeAlias

import httpx
from pydantic import (
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    SecretStr,
    WithJsonSchema,
)

from .. import defaults
from .._async.client import AsyncClient
from .._sync.client import Client
from ..calls import TaskParams, plain
from ..config import ClientSettings, FetchLimits
from ..embeddings import EmbedParams
from ..errors import InvalidInputError
from ..media_files import open_regular_file
from ..scoring import RerankParams
from ..threaded import ThreadedClient
from ..types.audio import Transcription
from ..types.checked import CheckedModel
from ..types.ocr import OCRBlock, OCRDocument, OCRResult
from ..validation import concurrency_setting, int_at_least, positive_int

Record = tuple[str, dict[str, Any]]
"""A document before a framework wraps it: its text and its metadata."""


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
    Clients passed in by the caller are used as they are, on every loop, and never closed here. A given
    client's own ``http_client`` is never left out: a ``Client`` with one serves the async methods too (in
    worker threads), and an ``AsyncClient`` with one, given without a ``Client``, makes the sync methods
    raise rather than send without it.

    Pickling (and ``copy.deepcopy``) keeps only the settings: the copy builds its own clients. A pool
    given a client with its own ``http_client`` refuses to pickle (that client cannot be copied).
    """

    def __init__(
        self, settings: ClientSettings, client: Client | None = None, async_client: AsyncClient | None = None
    ) -> None:
        self.settings = settings
        self._given_client = client
        self._given_async = async_client
        self._lock = threading.Lock()
        self._client: Client | None = None
        self._close_client: weakref.finalize[[], ClientPool] | None = None
        # An entry refers to its loop (through its connections), so a weak key would never go: entries of
        # closed loops are dropped when the next loop's entry is made.
        self._per_loop: dict[asyncio.AbstractEventLoop, _LoopClient] = {}

    def _injected(self) -> Client | AsyncClient | None:
        """A given client that has its own ``http_client`` (which no client built here could use)."""
        return next((c for c in (self._given_client, self._given_async) if c and c.http_client), None)

    def sync(self) -> Client:
        """The ``Client`` (the caller's, else one built from the settings).

        Raises:
            InvalidInputError: only an ``AsyncClient`` with its own ``http_client`` was given.
        """
        if self._given_client is not None:
            return self._given_client
        if self._injected() is not None:
            raise InvalidInputError(
                "client",
                None,
                "is needed for the sync methods: async_client= has its own http_client, which a Client "
                "cannot use",
                "Pass client= too (a vllm_tasks.Client over your httpx.Client), or call the async methods.",
            )
        with self._lock:
            if self._client is None:
                self._client = Client.from_settings(self.settings)
                self._close_client = weakref.finalize(self, self._client.close)
            return self._client

    async def for_running_loop(self) -> AsyncClient | ThreadedClient:
        """The ``AsyncClient`` for the running event loop (the caller's, else one per loop: beside the
        caller's ``Client`` where one was given, counting into its ``usage``), or the caller's ``Client`` in
        worker threads when it has its own ``http_client``.

        Raises:
            RuntimeError: no event loop is running (call it from a coroutine).
        """
        if self._given_async is not None:
            return self._given_async
        if self._given_client is not None and self._given_client.http_client is not None:
            return ThreadedClient(self._given_client)
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._per_loop.get(loop)
            if entry is None:
                for closed in [other for other in self._per_loop if other.is_closed()]:
                    del self._per_loop[closed]
                client = (
                    AsyncClient._beside(self._given_client)  # counts into the caller's usage
                    if self._given_client is not None
                    else AsyncClient.from_settings(self.settings)
                )
                entry = self._per_loop[loop] = _LoopClient(loop, client)
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
        injected = self._injected()
        if injected is not None:
            raise InvalidInputError(
                "client" if isinstance(injected, Client) else "async_client",
                injected,
                "has its own http_client, which cannot be copied into another process (pickle)",
                "Give the adapter settings= instead (a copy makes its own connections from them), or use "
                "it in this process only.",
            )
        return {"settings": self.settings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["settings"])  # type: ignore[misc]

    def __deepcopy__(self, memo: dict[int, Any]) -> ClientPool:
        return ClientPool(self.settings, self._given_client, self._given_async)


def _settings(value: object) -> ClientSettings:
    """The ``settings`` field from what was given: a ``ClientSettings``, or a dump of one (a framework
    rebuilding the adapter from ``model_dump``; the key then comes from the environment again)."""
    if isinstance(value, ClientSettings):
        return value
    if isinstance(value, Mapping):
        parts = dict(value)
        if isinstance(parts.get("timeout"), Mapping):
            parts["timeout"] = httpx.Timeout(**parts["timeout"])
        if isinstance(parts.get("fetch_limits"), Mapping):
            parts["fetch_limits"] = FetchLimits(**parts["fetch_limits"])
        return ClientSettings(**parts)
    raise InvalidInputError(
        "settings", type(value).__name__, "must be a vllm_tasks.ClientSettings", "e.g. client.settings."
    )


def _dump(settings: ClientSettings) -> dict[str, Any]:
    """The ``settings`` field as JSON-friendly data, without the API key or URL credentials."""
    return {
        "base_url": settings.display_url,
        "model": settings.model,
        "timeout": settings.timeout.as_dict(),
        "max_retries": settings.max_retries,
        "headers": dict(settings.headers),
        "fetch_limits": dataclasses.asdict(settings.fetch_limits),
    }


SettingsField = Annotated[
    ClientSettings, PlainValidator(_settings), PlainSerializer(_dump), WithJsonSchema({"type": "object"})
]
#: The names of the settings an adapter also takes one by one (``base_url=``, ``api_key=``, ...).
SETTING_NAMES = frozenset(field.name for field in dataclasses.fields(ClientSettings))


class ConnectionFields(CheckedModel):
    """The server connection of an adapter model: one ``ClientSettings`` (a pydantic field, so frameworks
    can serialise it; never with the API key).

    Args:
        settings: the client settings (default: ``vllm_tasks.ClientSettings()``, from the environment).
        client: your own ``vllm_tasks.Client``, for the sync methods (and for the async ones when it has
            its own ``http_client``, in worker threads); ``settings`` are then its settings, which is what a
            pickled copy builds its clients from (one with its own ``http_client`` refuses to pickle).
        async_client: your own ``vllm_tasks.AsyncClient`` for the async methods (same rules).
        **data: the adapter's other fields, and any setting of ``ClientSettings`` by name (``base_url=``,
            ``model=``, ``api_key=``, ``timeout=``, ``max_retries=``, ``headers=``, ``fetch_limits=``):
            they change ``settings``.

    Raises:
        InvalidInputError: a bad setting or field value (naming it; pydantic's ``ValidationError`` never
            escapes), or a setting given with ``client=`` / ``async_client=`` (whose settings are used).
    """

    model_config = ConfigDict(extra="forbid")

    settings: SettingsField = Field(default_factory=ClientSettings)

    _pool: ClientPool = PrivateAttr()

    def __init__(
        self, *, client: Client | None = None, async_client: AsyncClient | None = None, **data: Any
    ) -> None:
        changes = {name: data.pop(name) for name in SETTING_NAMES & data.keys()}
        settings = data.pop("settings", None)
        given = client if client is not None else async_client
        if given is not None:
            _check_client_types(client, async_client)
            if changes or settings is not None:
                named = ", ".join(sorted(changes)) or "settings"
                raise InvalidInputError(
                    named,
                    "<given>",
                    "is set by the client given (its settings are used)",
                    f"Drop {named}=, or give a client made with client.with_options(...).",
                )
            settings = given.settings
        elif changes:
            settings = (
                ClientSettings(**changes) if settings is None else _settings(settings).replace(**changes)
            )
        if settings is not None:
            data["settings"] = settings
        super().__init__(**data)
        self._pool = ClientPool(self.settings, client, async_client)

    @property
    def base_url(self) -> str:
        """The server's root URL (``settings.base_url``, without credentials)."""
        return self.settings.display_url

    @property
    def model(self) -> str | None:
        """The served model name (``settings.model``; ``None``: the server's first)."""
        return self.settings.model

    @property
    def api_key(self) -> SecretStr | None:
        """The API key (``settings.api_key``), as LangChain adapters expose theirs."""
        key = self.settings.api_key
        return SecretStr(key) if key is not None else None

    def _sync_client(self) -> Client:
        return self._pool.sync()

    async def _async_client(self) -> AsyncClient | ThreadedClient:
        return await self._pool.for_running_loop()

    def close(self) -> None:
        """Close the connections this adapter opened (your own ``client=`` is left to you)."""
        self._pool.close()

    async def aclose(self) -> None:
        """Close the connections this adapter opened on the running loop, and the sync ones."""
        await self._pool.aclose()


def _dump_params(params: TaskParams) -> dict[str, Any]:
    dumped: dict[str, Any] = plain(params.keywords())
    return dumped


# An adapter's ``params`` field: an instance, or a mapping of its fields (a config file, a framework's
# ``model_dump``) checked by ``TaskParams.of`` (a misspelt field is an error, not ignored); dumped as a dict.
_PARAMS_DUMP = PlainSerializer(_dump_params)
_OBJECT_SCHEMA = WithJsonSchema({"type": "object"})
RerankParamsField: TypeAlias = Annotated[
    RerankParams, PlainValidator(RerankParams.of), _PARAMS_DUMP, _OBJECT_SCHEMA
]
EmbedParamsField: TypeAlias = Annotated[
    EmbedParams, PlainValidator(EmbedParams.of), _PARAMS_DUMP, _OBJECT_SCHEMA
]


def checked_by(check: Callable[[str, Any], object]) -> PlainValidator:
    """A pydantic validator running ``check(field name, value)`` on the value as given, before any coercion
    (so ``True`` or ``"8"`` is not taken for a count)."""
    return PlainValidator(lambda value, info: check(str(info.field_name), value))


def _top_n(field: str, value: object) -> int | None:
    return int_at_least(field, value, 1, "Use None to keep every document.")


_COUNT_SCHEMA = {"type": "integer", "minimum": 1}
#: A field of requests or documents per call: an int >= 1.
CountField: TypeAlias = Annotated[int, checked_by(positive_int), WithJsonSchema(_COUNT_SCHEMA)]
#: A ``concurrency`` field: an int >= 1, or ``"auto"`` (a limit tuned from the server's answers).
ConcurrencyField: TypeAlias = Annotated[
    int | Literal["auto"],
    checked_by(concurrency_setting),
    WithJsonSchema({"anyOf": [_COUNT_SCHEMA, {"const": "auto"}]}),
]
#: A reranker's ``top_n`` field: an int >= 1, or ``None`` for every document.
TopNField: TypeAlias = Annotated[
    int | None, checked_by(_top_n), WithJsonSchema({"anyOf": [_COUNT_SCHEMA, {"type": "null"}]})
]


class EmbedOptions(ConnectionFields):
    """The embedding settings every embeddings adapter has, on top of the connection.

    Args:
        params: the vector options of every ``embed`` call (``EmbedParams(dimensions=256)``, or a dict of
            its fields), checked at construction.
        batch_size: texts per request; concurrency: requests in flight (or ``"auto"``).
        extra_body: extra JSON fields for every request.

    Raises:
        InvalidInputError: bad ``params``, ``batch_size`` not an int >= 1, or ``concurrency`` neither that
            nor ``"auto"``, at construction.
    """

    params: EmbedParamsField = EmbedParams()
    batch_size: CountField = defaults.EMBED_BATCH_SIZE
    concurrency: ConcurrencyField = defaults.CONCURRENCY
    extra_body: dict[str, Any] | None = None

    def _options(self) -> dict[str, Any]:
        """The keyword arguments of ``Client.embed`` these settings stand for."""
        return {
            **self.params.keywords(),
            "batch_size": self.batch_size,
            "concurrency": self.concurrency,
            "extra_body": self.extra_body,
        }


class RerankOptions(ConnectionFields):
    """The rerank settings every reranking adapter has, on top of the connection (each framework's
    adapter sets its own ``top_n`` default).

    Args:
        params: the options of every ``rerank`` call (``RerankParams(max_tokens_per_doc=512,
            truncate_prompt_tokens=-1)``, or a dict of its fields), checked at construction.
        top_n: how many documents come back (``None``: all; an adapter redeclaring it keeps
            :data:`TopNField`).
        batch_size: pairs per request; concurrency: requests in flight (or ``"auto"``).
        extra_body: extra JSON fields for every request.

    Raises:
        InvalidInputError: bad ``params``, ``batch_size``, ``concurrency`` or ``top_n``, at construction.
    """

    params: RerankParamsField = RerankParams()
    top_n: TopNField = None
    batch_size: CountField = defaults.SCORE_BATCH_SIZE
    concurrency: ConcurrencyField = defaults.CONCURRENCY
    extra_body: dict[str, Any] | None = None

    def _options(self) -> dict[str, Any]:
        """The keyword arguments of ``Client.rerank`` these settings stand for."""
        return {
            **self.params.keywords(),
            "top_n": self.top_n,
            "batch_size": self.batch_size,
            "concurrency": self.concurrency,
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


def text_list(texts: object, field: str = "texts") -> list[str]:
    """An adapter's list of texts, checked: a single string is not a list of one-character texts, and a
    number is not a token-id prompt.

    Raises:
        InvalidInputError: ``texts`` is a string or not a list, or an item is not a string (naming it).

    Examples:
        >>> text_list(["a", "b"])
        ['a', 'b']
    """
    if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
        raise InvalidInputError(
            field, texts, f"must be a list of strings, not {type(texts).__name__}", "Wrap one text in a list."
        )
    for index, text in enumerate(texts):
        one_text(text, f"{field}[{index}]")
    return list(texts)


def one_text(text: object, field: str = "text") -> str:
    """One text of an adapter's input.

    Raises:
        InvalidInputError: ``text`` is not a string (naming ``field``).
    """
    if not isinstance(text, str):
        raise InvalidInputError(field, text, f"is {type(text).__name__}, not a string", "Pass text.")
    return text


# --------------------------------------------------------------------------------------------------
# Documents: SDK results as (text, metadata) records
# --------------------------------------------------------------------------------------------------


def source_name(source: Any) -> str:
    """What a loader writes as ``metadata["source"]``: the path or URL as given."""
    return os.fspath(source) if isinstance(source, os.PathLike) else str(source)


def is_pdf(source: str | os.PathLike[str]) -> bool:
    """Whether a local file is a PDF (by its first bytes; a ``.pdf`` name that is not one is refused).

    Raises:
        InvalidInputError: the path names no readable regular file (missing, a folder, a FIFO, a device, a
            name over ``NAME_MAX``, a NUL byte).
    """
    text = os.fspath(source)
    if text.startswith(("http://", "https://", "data:")):
        return False
    with open_regular_file(text, "file_path", max_bytes=None) as handle:
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
