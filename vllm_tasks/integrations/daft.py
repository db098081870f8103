"""Daft over the SDK: ``daft.functions.embed_text`` / ``embed_image`` served by vLLM, and ``@daft.cls``
classes that score, transcribe and OCR a DataFrame's columns. See ``docs/integrations.md``.

- :class:`VLLMProvider` -- a Daft ``Provider``: ``embed_text(col, provider=VLLMProvider(settings))``
  sends the column through the SDK's embeddings (``embed_image``: its images), each Daft batch one group
  on the job engine (``vllm_tasks.jobs.engine``, as ``embed_file``'s chunks). The
  vector width is the server's (one probe request when the expression is built), ``dimensions`` is sent
  only when you give it (the SDK checks the model takes it), and batching, retries and token limits are
  the client's: no OpenAI model table, no ``dimensions`` forced on a model that refuses it.
- :class:`Scorer` -- a query and a document column -> ``{"score", "error"}`` (``/score``, pairs zipped).
- :class:`Reranker` -- a query and a column of document lists -> ``{"ranking", "error"}`` (``/rerank``).
- :class:`Transcriber` -- an audio column (bytes, paths, URLs) -> ``{"text", "error"}``.
- :class:`OCR` -- an image or PDF column (bytes, paths, URLs, images) -> ``{"markdown", "error"}``.

A row the server (or the client's own checks) refuses -- an over-long text, an undecodable file, a null --
does not fail the query: the classes' ``error`` field holds the SDK's exception type and message and the
value is null; the provider's vector is null (and the refusals are logged, ``vllm_tasks.integrations.daft``).
Errors that are not about a row (server down after the retries, a wrong API key, a model that does not
serve the task) fail the query.

Daft pickles the provider's settings and the classes' constructor arguments, never a client: each worker
builds its own ``vllm_tasks.Client`` from a ``vllm_tasks.ClientSettings`` (which pickles with the key).
The classes check their arguments when you make them, on the driver.

``pip install "vllm-tasks[daft]"``.

Examples:
    >>> import daft
    >>> from daft.functions import embed_text
    >>> from vllm_tasks.integrations.daft import VLLMProvider, Transcriber
    >>> vllm = VLLMProvider(vt.ClientSettings("http://localhost:8000"))
    >>> df = daft.read_parquet("corpus.parquet")                  # a "text" column
    >>> df = df.with_column("vector", embed_text(daft.col("text"), provider=vllm, dimensions=256))
    >>> calls = daft.from_glob_path("calls/*.wav").with_column("audio", daft.col("path").download())
    >>> stt = Transcriber(vt.ClientSettings("http://localhost:8001"))
    >>> calls.select("path", stt(daft.col("audio")).unnest())   # "text", "error"
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar, cast

import numpy as np
import numpy.typing as npt

from .. import defaults
from ..dependencies import require

require("daft", "daft", "vllm_tasks.integrations.daft")

import daft
from daft import DataType, Series
from daft.ai.protocols import ImageEmbedderDescriptor, TextEmbedderDescriptor
from daft.ai.provider import Provider
from daft.ai.typing import EmbeddingDimensions, Options, UDFOptions

from .._sync.client import Client
from ..adaptive import Concurrency
from ..calls import CallOptions
from ..config import ClientSettings
from ..embeddings import EmbedParams
from ..errors import InvalidInputError
from ..jobs.engine import Plan
from ..jobs.replicas import JobClient
from ..jobs.vectors import DENSE
from ..ocr import OCRParams
from ..ocr.ladder import DEFAULT_QUALITY, PageQuality
from ..ocr.presets import OCRPreset
from ..scoring import RerankParams
from ..transcription import TranscribeParams
from ..types.embeddings import EmbeddingResult
from ..validation import concurrency_setting, int_at_least, positive_int
from . import ray as batches

__all__ = ["OCR", "Reranker", "Scorer", "Transcriber", "VLLMProvider"]

logger = logging.getLogger(__name__)

Vector = npt.NDArray[Any]
T = TypeVar("T")

#: ``embed_text`` / ``embed_image`` options that are Daft's own: rows per UDF batch, and what Daft does
#: when a batch fails for a reason that is not a row's.
_DAFT_OPTIONS = frozenset({"batch_size", "on_error"})
_EMBED_FIELDS = frozenset(field.name for field in dataclasses.fields(EmbedParams))
#: What the width probe of ``embed_image`` sends: one small black image.
_PROBE_IMAGE = np.zeros((32, 32, 3), np.uint8)


def _settings(settings: object) -> ClientSettings:
    if settings is None:
        return ClientSettings()  # from the environment
    if not isinstance(settings, ClientSettings):
        raise InvalidInputError(
            "settings",
            type(settings).__name__,
            "must be a vllm_tasks.ClientSettings",
            "e.g. ClientSettings('http://vllm:8000', model='BAAI/bge-m3').",
        )
    return settings


def _values(column: Any) -> npt.NDArray[np.object_]:
    """A Daft ``Series`` (or a list, for a direct call) as the 1-D object array the batch callables read."""
    return batches._objects(column.to_pylist() if isinstance(column, Series) else list(column))


def _log_refused(what: str, errors: Sequence[str | None]) -> None:
    refused = [error for error in errors if error]
    if refused:
        logger.warning(
            "%s: %d of %d rows refused, left null; the first: %s", what, len(refused), len(errors), refused[0]
        )


# --------------------------------------------------------------------------------------------------
# The provider: embed_text and embed_image
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Embedding:
    """One ``embed_text`` / ``embed_image`` expression's setup: what Daft pickles to each worker."""

    provider: str
    settings: ClientSettings
    options: Mapping[str, Any]  # Client.embed's keyword arguments
    udf: Mapping[str, Any]  # Daft's options
    probe: Literal["text", "image"]


@dataclasses.dataclass(kw_only=True, eq=False)
class _EmbedRows(batches._BatchCallable):
    """Daft's ``TextEmbedder`` and ``ImageEmbedder`` rows: texts (or images) in requests of
    ``batch_size`` on the job engine, a refused row ``None`` (logged); one client, built where Daft
    instantiates it."""

    params: EmbedParams = dataclasses.field(default_factory=EmbedParams)
    batch_size: int = defaults.EMBED_BATCH_SIZE
    extra_body: Mapping[str, Any] | None = None
    images: bool = False

    def __post_init__(self) -> None:
        self._plan = Plan(
            batch_size=self.batch_size,
            max_batch_tokens=defaults.JOB_MAX_BATCH_TOKENS,
            params=self.params,
            call=CallOptions(extra_body=self.extra_body),
            fail_fast=False,
            vectors=DENSE,
        )
        super().__post_init__()

    async def _vectors(self, client: JobClient, cells: list[Any]) -> Vector:
        plan = self._plan
        if self.images:
            result = await plan.vectors.embed(client, None, cells, plan.params, plan.call)
        else:
            result = await plan.embed(client, cells)
        assert isinstance(result, EmbeddingResult)  # the plan's vectors are dense
        return result.vectors

    def _batches(self, cells: list[Any]) -> list[range]:
        """Texts as the job engine plans them; images ``batch_size`` at a time."""
        if self.images:
            return [
                range(start, min(start + self.batch_size, len(cells)))
                for start in range(0, len(cells), self.batch_size)
            ]
        return self._plan.batches(cells)

    def embed(
        self, column: list[Any], name: str, holds: str, accepted: tuple[type, ...]
    ) -> list[Vector | None]:
        """The vectors of a batch of cells, in order; ``None`` where the row was refused (logged)."""
        cells = list(column)
        errors = batches._cell_errors(cells, name, holds, accepted, on_error="column")
        vectors: list[Vector | None] = self._on_loop(self._send(cells, errors, self._vectors, self._batches))
        _log_refused(f"embed_{name}", errors)
        return vectors


class _Embedder:
    """Daft's ``TextEmbedder`` and ``ImageEmbedder``."""

    def __init__(self, embedding: _Embedding) -> None:
        options = dict(embedding.options)
        self._rows = _EmbedRows(
            settings=embedding.settings,
            params=EmbedParams.of({key: options[key] for key in _EMBED_FIELDS & options.keys()}),
            batch_size=options["batch_size"],
            concurrency=options["concurrency"],
            extra_body=options["extra_body"],
            images=embedding.probe == "image",
            on_error="column",
        )

    def embed_text(self, text: list[str]) -> list[Vector | None]:
        """The vectors of a batch of texts, in order; ``None`` where the row was refused (logged)."""
        return self._rows.embed(text, "text", "text", (str,))

    def embed_image(self, images: list[Any]) -> list[Vector | None]:
        """The vectors of a batch of images (arrays, bytes), in order; ``None`` where refused (logged)."""
        return self._rows.embed(images, "image", "an image", batches._IMAGE_CELLS)


class _Described:
    """What Daft's text and image embedder descriptors share: the setup, and the SDK's retries."""

    def __init__(self, embedding: _Embedding) -> None:
        self.embedding = embedding

    def get_provider(self) -> str:
        return self.embedding.provider

    def get_model(self) -> str:
        return self.embedding.settings.model or ""

    def get_options(self) -> Options:
        return dict(self.embedding.udf)

    def get_udf_options(self) -> UDFOptions:
        options = UDFOptions(**self.embedding.udf)
        options.max_retries = 0  # the client retries each request: Daft retrying the batch would resend it
        return options

    def get_dimensions(self) -> EmbeddingDimensions:
        """The width and dtype of the server's vectors with these options: one request (the probe)."""
        with Client.from_settings(self.embedding.settings) as client:
            if self.embedding.probe == "text":
                vectors = client.embed(["dimension probe"], **self.embedding.options).vectors
            else:
                vectors = client.embed(images=[_PROBE_IMAGE], **self.embedding.options).vectors
        return EmbeddingDimensions(size=int(vectors.shape[1]), dtype=DataType.from_numpy_dtype(vectors.dtype))

    def instantiate(self) -> Any:  # Daft's protocols type the vectors without the refused rows' None
        return _Embedder(self.embedding)


class _TextEmbedding(_Described, TextEmbedderDescriptor):
    pass


class _ImageEmbedding(_Described, ImageEmbedderDescriptor):
    pass


class VLLMProvider(Provider):
    """A Daft ``Provider`` for ``daft.functions.embed_text`` and ``embed_image``, served by vLLM through
    the SDK (``Client.embed``).

    ``embed_text(col, provider=VLLMProvider(...), model=None, dimensions=None, **options)``: ``model``
    names the served model (default: ``settings.model``, else the server's first); ``dimensions`` is
    Matryoshka's (sent only when given; a model that refuses it fails the expression when it is built,
    with ``vllm_tasks.BadRequestError``); ``options`` are fields of ``vllm_tasks.EmbedParams``
    (``truncate_prompt_tokens=-1``, ``prompt="query: "``, ``long_inputs="split_mean"``, ...) and Daft's
    ``batch_size`` (rows per Daft batch) and ``on_error``. The vector column's width and dtype are the
    server's: the expression sends one probe request when it is built. Retries are the client's
    (``settings.max_retries``); Daft does not retry a batch on top.

    Args:
        settings: the client settings (``vllm_tasks.ClientSettings``: URL, model, API key, timeouts,
            retries, headers); default: read from the environment (``VLLM_TASKS_BASE_URL``,
            ``VLLM_API_KEY``) here, and pickled with the expression to each worker.
        params: the vector options of every expression (``vllm_tasks.EmbedParams``, or a dict of its
            fields); an expression's ``options`` override them field by field.
        batch_size: inputs per request (a Daft batch is one group on the SDK's job engine, planned into
            requests of this size and, for texts, of the engine's token budget; a 413 splits a request
            in halves).
        concurrency: requests in flight per worker, or ``"auto"``.
        extra_body: extra JSON fields for every request.
        name: the provider's name in Daft's metrics and plans.

    Raises:
        InvalidInputError: a bad argument here; from ``get_text_embedder`` (``embed_text``), an option that
            is neither an ``EmbedParams`` field nor Daft's ``batch_size`` / ``on_error`` (e.g. OpenAI's
            ``batch_token_limit``: the client bounds batches itself).
        APIError: the SDK's errors from the probe, when the expression is built (``EndpointNotServed``
            for a model that does not embed, ``APIConnectionError``, ...).

    Examples:
        >>> from daft.functions import embed_text
        >>> vllm = VLLMProvider(vt.ClientSettings("http://localhost:8000", model="BAAI/bge-m3"))
        >>> df = daft.from_pydict({"text": ["first text", "second text"]})
        >>> df.with_column("vector", embed_text(daft.col("text"), provider=vllm, truncate_prompt_tokens=-1))
    """

    def __init__(
        self,
        settings: ClientSettings | None = None,
        *,
        params: EmbedParams | Mapping[str, Any] | None = None,
        batch_size: int = defaults.EMBED_BATCH_SIZE,
        concurrency: Concurrency = defaults.CONCURRENCY,
        extra_body: Mapping[str, Any] | None = None,
        name: str = "vllm-tasks",
    ) -> None:
        self._settings = _settings(settings)
        self._params = EmbedParams.of(params)
        self._batching = {
            "batch_size": positive_int("batch_size", batch_size),
            "concurrency": concurrency_setting("concurrency", concurrency),
            "extra_body": CallOptions(extra_body=extra_body).extra_body,
        }
        if not isinstance(name, str) or not name:
            raise InvalidInputError("name", name, "must be a non-empty string", 'e.g. name="vllm".')
        self._name = name

    @property
    def name(self) -> str:
        """The provider's name (``"vllm-tasks"`` unless given)."""
        return self._name

    def get_text_embedder(
        self, model: str | None = None, dimensions: int | None = None, **options: Any
    ) -> TextEmbedderDescriptor:
        """What ``daft.functions.embed_text`` builds its expression from (see the class).

        Raises:
            InvalidInputError: an unknown option or a bad value.
            APIError: the probe's error.
        """
        return _TextEmbedding(self._embedding("text", model, dimensions, options))

    def get_image_embedder(self, model: str | None = None, **options: Any) -> ImageEmbedderDescriptor:
        """What ``daft.functions.embed_image`` builds its expression from (see the class); the images go
        to ``Client.embed(images=...)`` (CLIP, SigLIP and other multimodal embedders).

        Raises:
            InvalidInputError: an unknown option or a bad value.
            APIError: the probe's error.
        """
        return _ImageEmbedding(self._embedding("image", model, None, options))

    def _embedding(
        self,
        probe: Literal["text", "image"],
        model: str | None,
        dimensions: int | None,
        options: dict[str, Any],
    ) -> _Embedding:
        unknown = sorted(options.keys() - _DAFT_OPTIONS - _EMBED_FIELDS)
        if unknown:
            raise InvalidInputError(
                "options",
                unknown,
                f"are not options of embed_{probe} with this provider",
                f"Use Daft's batch_size or on_error, or fields of vllm_tasks.EmbedParams "
                f"({', '.join(sorted(_EMBED_FIELDS))}); retries are the client's "
                "(ClientSettings(max_retries=...)), and batches are bounded by the client.",
            )
        fields = {key: value for key, value in options.items() if key in _EMBED_FIELDS}
        if dimensions is not None:
            fields["dimensions"] = dimensions
        params = EmbedParams.of({**self._params.keywords(), **fields}, field="options")
        udf = {key: options[key] for key in _DAFT_OPTIONS & options.keys()}
        if "batch_size" in udf:
            positive_int("batch_size", udf["batch_size"])
        settings = self._settings if model is None else self._settings.replace(model=model)
        return _Embedding(self._name, settings, {**params.keywords(), **self._batching}, udf, probe)


# --------------------------------------------------------------------------------------------------
# @daft.cls classes: score, transcribe, OCR
# --------------------------------------------------------------------------------------------------


def _daft_class(cls: type[T]) -> type[T]:
    """``cls`` as a ``@daft.cls`` class whose instances build ``cls`` at once: a bad argument raises where
    the instance is made, not in the first worker. Daft still pickles only the arguments (the workers
    build their own); Daft retries no batch (the client retries each request)."""
    wrapped: Any = daft.cls(cls, max_retries=0)

    class Checked(wrapped):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._daft_get_instance()

    for attribute in ("__name__", "__qualname__", "__module__", "__doc__"):
        setattr(Checked, attribute, getattr(cls, attribute))
    return cast(type[T], Checked)


def _struct(name: str, dtype: DataType) -> DataType:
    struct: DataType = DataType.struct({name: dtype, "error": DataType.string()})
    return struct


def _rows(name: str, values: npt.NDArray[Any], errors: npt.NDArray[np.object_]) -> list[dict[str, Any]]:
    """The struct cells of a batch: the value, or null and the error's text."""
    return [
        {name: None if error else value, "error": error or None}
        for value, error in zip(values.tolist(), errors.tolist(), strict=True)
    ]


@_daft_class
class Scorer:
    """``@daft.cls``: score a query column against a document column with ``/score`` (``Client.score``,
    pairs zipped row by row); each row is ``{"score": float64, "error": string}``.

    Call it on two columns (``scorer(daft.col("query"), daft.col("document"))``), or on one query string
    and a document column (``scorer("capital of France?", daft.col("document"))``). The score's scale is
    the served model's: 0..1 for a cross-encoder, a cosine for an embedding model (``docs/scoring.md``).

    Args:
        settings: the client settings (``vllm_tasks.ClientSettings``); default: from the environment of the
            process that builds the instance (here, and each worker).
        params: the scoring options (``vllm_tasks.RerankParams(truncate_prompt_tokens=-1)``, or a dict of
            its fields).
        batch_size: pairs per request; concurrency: requests in flight per worker, or ``"auto"``.
        extra_body: extra JSON fields for every request.

    Raises:
        InvalidInputError: a bad argument, when the instance is made.

    Examples:
        >>> scorer = Scorer(vt.ClientSettings("http://localhost:8001"))
        >>> df = daft.from_pydict({"document": ["Paris is in France.", "Cats purr."]})
        >>> df.select("document", scorer("capital of France?", daft.col("document")).unnest())
    """

    def __init__(
        self,
        settings: ClientSettings | None = None,
        *,
        params: RerankParams | Mapping[str, Any] | None = None,
        batch_size: int = defaults.SCORE_BATCH_SIZE,
        concurrency: Concurrency = defaults.CONCURRENCY,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        self._rows = batches.Scorer(
            settings=settings,
            params=params,
            batch_size=batch_size,
            concurrency=concurrency,
            extra_body=extra_body,
            on_error="column",
        )

    @daft.method.batch(return_dtype=_struct("score", DataType.float64()))
    def __call__(self, query: Series | str, document: Series) -> list[dict[str, Any]]:
        """Score a batch of pairs (or one query against a batch of documents)."""
        documents = _values(document)
        queries = batches._objects([query] * len(documents)) if isinstance(query, str) else _values(query)
        out = self._rows({"query": queries, "document": documents})
        return _rows("score", out["score"], out["error"])


@dataclasses.dataclass(kw_only=True, eq=False)
class _RerankRows(batches._BatchCallable):
    """Rows of (query, list of documents) through ``Client.rerank``, ``concurrency`` rows in flight, a
    refused row's error kept (the Ray callables' rows, for a call that Ray's classes lack)."""

    params: RerankParams | Mapping[str, Any] | None = None
    top_n: int | None = None
    batch_size: int = defaults.SCORE_BATCH_SIZE
    concurrency: Concurrency = defaults.CONCURRENCY
    extra_body: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        self.options = {
            **RerankParams.of(self.params).keywords(),
            "top_n": int_at_least("top_n", self.top_n, 1, "Use None to keep every document."),
            "batch_size": positive_int("batch_size", self.batch_size),
            "extra_body": CallOptions(extra_body=self.extra_body).extra_body,
        }
        super().__post_init__()

    async def _ranking(self, client: JobClient, rows: list[tuple[str, list[Any]]]) -> list[Any]:
        return [await client.rerank(query, documents, **self.options) for query, documents in rows]

    def __call__(self, queries: list[Any], documents: list[Any]) -> list[dict[str, Any]]:
        errors = batches._cell_errors(queries, "query", "text", (str,), on_error="column")
        errors = batches._cell_errors(
            documents, "documents", "a list of documents", (list,), on_error="column", errors=errors
        )
        rows = list(zip(queries, documents, strict=True))
        results = self._on_loop(self._send(rows, errors, self._ranking))
        return [
            {
                "ranking": None
                if result is None
                else [{"index": h.index, "score": h.score, "document": h.document} for h in result.results],
                "error": error,
            }
            for result, error in zip(results, errors, strict=True)
        ]


@_daft_class
class Reranker:
    """``@daft.cls``: rerank each row's list of documents against its query with ``/rerank``
    (``Client.rerank``); each row is ``{"ranking": [{"index", "score", "document"}], "error"}``, the
    ranking highest score first (cut to ``top_n``), ``index`` the document's position in the row's list.

    Call it on a query column and a column of lists of strings (``reranker(daft.col("query"),
    daft.col("candidates"))``), or on one query string and such a column. Each row is one call (its list
    split into requests of ``batch_size``, a listwise reranker's list never split), with ``concurrency``
    rows in flight per worker.

    Args:
        settings: the client settings, as for :class:`Scorer`.
        params: the rerank options (``vllm_tasks.RerankParams(max_tokens_per_doc=512)``, or a dict of its
            fields).
        top_n: how many documents each row keeps (``None``: all).
        batch_size: documents per request; concurrency: rows in flight per worker, or ``"auto"``.
        extra_body: extra JSON fields for every request.

    Raises:
        InvalidInputError: a bad argument, when the instance is made.

    Examples:
        >>> reranker = Reranker(vt.ClientSettings("http://localhost:8001"), top_n=3)
        >>> df = daft.from_pydict({"query": ["capital of France?"], "candidates": [["Paris ...", "Cats"]]})
        >>> df.select(reranker(daft.col("query"), daft.col("candidates")).unnest())
    """

    def __init__(
        self,
        settings: ClientSettings | None = None,
        *,
        params: RerankParams | Mapping[str, Any] | None = None,
        top_n: int | None = None,
        batch_size: int = defaults.SCORE_BATCH_SIZE,
        concurrency: Concurrency = defaults.CONCURRENCY,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        self._rows = _RerankRows(
            settings=settings,
            params=params,
            top_n=top_n,
            batch_size=batch_size,
            concurrency=concurrency,
            extra_body=extra_body,
            on_error="column",
        )

    @daft.method.batch(
        return_dtype=DataType.struct(
            {
                "ranking": DataType.list(
                    DataType.struct(
                        {
                            "index": DataType.int64(),
                            "score": DataType.float64(),
                            "document": DataType.string(),
                        }
                    )
                ),
                "error": DataType.string(),
            }
        )
    )
    def __call__(self, query: Series | str, documents: Series) -> list[dict[str, Any]]:
        """Rerank a batch of rows (or one query against a batch of document lists)."""
        lists = documents.to_pylist() if isinstance(documents, Series) else list(documents)
        queries = [query] * len(lists) if isinstance(query, str) else list(_values(query))
        return self._rows(queries, lists)


@_daft_class
class Transcriber:
    """``@daft.cls``: transcribe an audio column with ``/v1/audio/transcriptions`` (``Client.transcribe``);
    each row is ``{"text": string, "error": string}``.

    Each row is one call (long audio is chunked client-side, as ``Client.transcribe`` does), with
    ``concurrency`` rows in flight per worker.

    Args:
        settings: the client settings, as for :class:`Scorer`.
        params: the speech options (``vllm_tasks.TranscribeParams(language="de")``, or a dict of its
            fields).
        concurrency: rows in flight per worker, or ``"auto"``.
        extra_body: extra form fields for every request.

    Raises:
        InvalidInputError: a bad argument, when the instance is made.

    Examples:
        >>> calls = daft.from_glob_path("calls/*.wav").with_column("audio", daft.col("path").download())
        >>> stt = Transcriber(vt.ClientSettings("http://localhost:8001"), params={"language": "en"})
        >>> calls.select("path", stt(daft.col("audio")).unnest())
    """

    def __init__(
        self,
        settings: ClientSettings | None = None,
        *,
        params: TranscribeParams | Mapping[str, Any] | None = None,
        concurrency: Concurrency = defaults.CONCURRENCY,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        self._rows = batches.Transcriber(
            settings=settings,
            params=params,
            concurrency=concurrency,
            extra_body=extra_body,
            on_error="column",
        )

    @daft.method.batch(return_dtype=_struct("text", DataType.string()))
    def __call__(self, audio: Series) -> list[dict[str, Any]]:
        """Transcribe a batch of audio cells: bytes, paths or URLs."""
        out = self._rows({"audio": _values(audio)})
        return _rows("text", out["transcript"], out["error"])


@_daft_class
class OCR:
    """``@daft.cls``: OCR an image or PDF column with an OCR model (``Client.ocr``, ``Client.ocr_pdf`` for
    a PDF); each row is ``{"markdown": string, "error": string}`` (a PDF's pages joined by ``---``).

    Args:
        settings: the client settings, as for :class:`Scorer` (for a column of untrusted URLs:
            ``fetch_limits=vt.FetchLimits(refuse_private=True)``).
        params: the OCR options (``vllm_tasks.OCRParams(prompt="free", max_tokens=2048)``, or a dict of its
            fields).
        preset: the OCR model preset (``"deepseek-ocr"``, ``"generic"``, ... or an ``OCRPreset``); default:
            recognised from the served model.
        quality: the page-quality ladder (``vllm_tasks.ocr.PageQuality``, a dict of its fields, or ``None``
            for one try per page; default: olmOCR's).
        concurrency: rows in flight per worker, or ``"auto"``; pdf_concurrency: pages in flight per PDF.
        extra_body: extra JSON fields for every request.

    Raises:
        InvalidInputError: a bad argument, when the instance is made.

    Examples:
        >>> scans = daft.from_glob_path("scans/*.png").with_column("image", daft.col("path").download())
        >>> ocr = OCR(vt.ClientSettings("http://localhost:8002"))
        >>> scans.select("path", ocr(daft.col("image")).unnest())
    """

    def __init__(
        self,
        settings: ClientSettings | None = None,
        *,
        params: OCRParams | Mapping[str, Any] | None = None,
        preset: str | OCRPreset | None = None,
        quality: PageQuality | Mapping[str, Any] | None = DEFAULT_QUALITY,
        concurrency: Concurrency = defaults.CONCURRENCY,
        pdf_concurrency: int = defaults.OCR_PDF_CONCURRENCY,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        self._rows = batches.OCR(
            settings=settings,
            params=params,
            preset=preset,
            quality=quality,
            concurrency=concurrency,
            pdf_concurrency=pdf_concurrency,
            extra_body=extra_body,
            on_error="column",
        )

    @daft.method.batch(return_dtype=_struct("markdown", DataType.string()))
    def __call__(self, image: Series) -> list[dict[str, Any]]:
        """OCR a batch of image cells: bytes, paths, URLs or decoded images."""
        out = self._rows({"image": _values(image)})
        return _rows("markdown", out["markdown"], out["error"])
