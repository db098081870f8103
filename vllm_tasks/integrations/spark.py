"""pandas UDFs for Spark: embed, sparse-embed, score, rerank, transcribe and OCR the rows of a DataFrame
through the SDK's client, from the DataFrame API or from SQL. See ``docs/integrations.md``.

- :func:`embed_udf` -- a text column -> ``struct<embedding: array<float>, error: string>``.
- :func:`sparse_embed_udf` -- a text column -> ``struct<indices: array<bigint>, values: array<float>,
  tokens: array<string>, error: string>``.
- :func:`score_udf` -- a query and a document column -> ``struct<score: double, error: string>``.
- :func:`rerank_udf` -- a query and an ``array<string>`` column of documents -> ``struct<results:
  array<struct<index: int, score: double>>, error: string>``, highest score first.
- :func:`transcribe_udf` -- an audio column (``binary`` file contents, or paths / URLs) -> ``struct<text:
  string, segments: string, error: string>``.
- :func:`ocr_udf` -- an image or PDF column (``binary``, or paths / URLs) -> ``struct<markdown: string,
  blocks: string, error: string>``.

Each factory returns a ``pandas_udf`` of the iterator form: Spark pickles it with its options (the
``ClientSettings`` travel, with the API key) and each Python worker builds one ``vllm_tasks.Client`` from
them the first time it runs the UDF, then keeps it for every later partition (Spark reuses its Python
workers: ``spark.python.worker.reuse``). Each pandas batch of a partition is one group on the SDK's job
engine (``vllm_tasks.jobs.engine``, through the Ray callables): requests of ``batch_size`` texts (a 413
splits one in halves), ``concurrency`` in flight, each retried with backoff by the client. A row the
server (or the client's own checks) refuses -- an over-long text, an undecodable file, a null -- gets a
null result and its message in the struct's ``error`` field; the other rows of its batch get their
results (the failing rows of an embedding or scoring batch are found by splitting it in halves). Errors
that are not about a row (the server down after the retries, a wrong API key, a model that does not serve
the task) fail the Spark task, which Spark retries (``spark.task.maxFailures``).

The work per batch is the Ray Data callables' (:mod:`vllm_tasks.integrations.ray`), so the two fronts
answer alike.

Examples:
    >>> from pyspark.sql import SparkSession
    >>> from vllm_tasks.integrations.spark import embed_udf
    >>> spark = SparkSession.builder.getOrCreate()
    >>> embed = embed_udf(settings=vt.ClientSettings("http://vllm:8000", model="BAAI/bge-m3"))
    >>> docs = spark.read.parquet("corpus/")                                # a "text" column
    >>> out = docs.withColumn("e", embed("text")).select("id", "e.embedding", "e.error")
    >>> spark.udf.register("vt_embed", embed)                               # the same UDF in SQL
    >>> spark.sql("SELECT id, vt_embed(text).embedding FROM corpus")
"""

from __future__ import annotations

import dataclasses
import math
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..dependencies import require

require("pyspark", "spark", "vllm_tasks.integrations.spark")
require("pandas", "spark", "vllm_tasks.integrations.spark (Spark's pandas UDFs)")
require("pyarrow", "spark", "vllm_tasks.integrations.spark (Spark's pandas UDFs)")

import pandas as pd  # noqa: E402  (named in the UDFs' type hints, which Spark reads)
from pyspark.sql.pandas.functions import pandas_udf  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from .. import defaults  # noqa: E402
from ..adaptive import Concurrency  # noqa: E402
from ..calls import CallOptions  # noqa: E402
from ..config import ClientSettings  # noqa: E402
from ..embeddings import EmbedParams  # noqa: E402
from ..errors import InvalidInputError  # noqa: E402
from ..jobs.engine import Plan  # noqa: E402
from ..jobs.replicas import JobClient  # noqa: E402
from ..jobs.vectors import SPARSE  # noqa: E402
from ..ocr import OCRParams  # noqa: E402
from ..ocr.ladder import DEFAULT_QUALITY, PageQuality  # noqa: E402
from ..ocr.presets import OCRPreset  # noqa: E402
from ..scoring import RerankParams  # noqa: E402
from ..sparse import SparseEmbedParams  # noqa: E402
from ..transcription import TranscribeParams  # noqa: E402
from ..types.scoring import RerankResult  # noqa: E402
from ..types.sparse import SparseEmbeddingResult, SparseVector  # noqa: E402
from ..validation import int_at_least, positive_int  # noqa: E402
from .ray import (  # noqa: E402
    OCR,
    Embedder,
    Scorer,
    Transcriber,
    _BatchCallable,
    _describe,
    _objects,
    _text_cells,
)

__all__ = ["embed_udf", "ocr_udf", "rerank_udf", "score_udf", "sparse_embed_udf", "transcribe_udf"]

if TYPE_CHECKING:
    from pyspark.sql._typing import UserDefinedFunctionLike

Errors = list[str | None]


# --------------------------------------------------------------------------------------------------
# One callable per Python worker
# --------------------------------------------------------------------------------------------------

_BUILT: dict[str, _BatchCallable] = {}
_BUILT_LOCK = threading.Lock()


@dataclasses.dataclass(frozen=True)
class _Recipe:
    """What a UDF carries to the workers: the batch callable's class and keyword arguments (checked once
    where the factory ran), under a name of its own; :meth:`built` makes it once per worker process."""

    cls: type[_BatchCallable]
    kwargs: Mapping[str, Any]
    key: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex)

    @classmethod
    def checked(cls, callable_cls: type[_BatchCallable], **kwargs: Any) -> _Recipe:
        """A recipe whose arguments the callable accepted (it is built here once, then closed)."""
        callable_cls(**kwargs, on_error="column").close()
        return cls(callable_cls, kwargs)

    def built(self) -> Any:
        """This process's callable for the recipe: built on the first call, kept for the process's life
        (the module's table, not the recipe, holds it: the recipe is unpickled anew for each task)."""
        with _BUILT_LOCK:
            instance = _BUILT.get(self.key)
            if instance is None:
                instance = _BUILT[self.key] = self.cls(**self.kwargs, on_error="column")
            return instance


# --------------------------------------------------------------------------------------------------
# Columns in, structs out
# --------------------------------------------------------------------------------------------------


def _missing(value: object) -> bool:
    """Whether a cell is Spark's null as pandas shows it (``None``, ``pd.NA`` or a float NaN)."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _cells(series: pd.Series) -> npt.NDArray[np.object_]:
    """A Spark column's values as an object array, ``None`` for null."""
    return _objects([None if _missing(value) else value for value in series.tolist()])


def _struct(results: Mapping[str, Sequence[Any]], errors: Sequence[str | None]) -> pd.DataFrame:
    """The UDF's struct column: the result fields (``None`` where the row failed) and ``error``."""
    failed = [bool(error) for error in errors]
    frame = {
        name: [None if bad else value for value, bad in zip(values, failed, strict=True)]
        for name, values in results.items()
    }
    # object columns: pandas would store a text column's None as NaN
    return pd.DataFrame({**frame, "error": [error or None for error in errors]}, dtype=object)


def _returns(*fields: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, kind) for name, kind in (*fields, ("error", StringType()))])


def _udf(function: Callable[..., Iterator[pd.DataFrame]], returns: StructType) -> UserDefinedFunctionLike:
    """A pandas UDF of ``function``, whose type hints make it the iterator form."""
    # pyspark's stubs know this form only with the deprecated functionType= argument
    made: UserDefinedFunctionLike = pandas_udf(function, returns)  # type: ignore[call-overload]
    return made


def _column_pairs(batch: Any) -> tuple[pd.Series, pd.Series]:
    first, second = batch
    return first, second


# --------------------------------------------------------------------------------------------------
# Sparse vectors and reranking: batch callables of their own (the Ray front has none)
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(kw_only=True, eq=False)
class _SparseEmbedder(_BatchCallable):
    """A text column -> one :class:`~vllm_tasks.SparseVector` per row (``Client.embed_sparse``)."""

    params: SparseEmbedParams | Mapping[str, Any] | None = None
    batch_size: int = defaults.SPARSE_BATCH_SIZE
    concurrency: Concurrency = defaults.CONCURRENCY
    extra_body: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        self._plan = Plan(
            batch_size=positive_int("batch_size", self.batch_size),
            max_batch_tokens=defaults.JOB_MAX_BATCH_TOKENS,
            params=SparseEmbedParams.of(self.params),
            call=CallOptions(extra_body=self.extra_body),
            fail_fast=self.on_error == "raise",
            vectors=SPARSE,
        )
        super().__post_init__()

    async def _vectors(self, client: JobClient, texts: list[str]) -> list[SparseVector]:
        result = await self._plan.embed(client, texts)
        assert isinstance(result, SparseEmbeddingResult)  # the plan's vectors are sparse
        return result.vectors

    def __call__(self, texts: npt.NDArray[np.object_]) -> tuple[list[SparseVector | None], Errors]:
        cells, errors = _text_cells({"text": texts}, "text", "text", None, self.on_error)
        vectors: list[SparseVector | None] = self._on_loop(
            self._send(cells, errors, self._vectors, self._plan.batches)
        )
        return vectors, errors


@dataclasses.dataclass(kw_only=True, eq=False)
class _Reranker(_BatchCallable):
    """A query column and a column of document lists -> one :class:`~vllm_tasks.RerankResult` per row."""

    params: RerankParams | Mapping[str, Any] | None = None
    top_n: int | None = None
    batch_size: int = defaults.SCORE_BATCH_SIZE
    concurrency: Concurrency = defaults.CONCURRENCY
    extra_body: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        int_at_least("top_n", self.top_n, 1, "Use None to keep every document.")
        self.options = {
            **RerankParams.of(self.params).keywords(),
            "top_n": self.top_n,
            "batch_size": positive_int("batch_size", self.batch_size),
            "extra_body": CallOptions(extra_body=self.extra_body).extra_body,
        }
        super().__post_init__()

    def __call__(
        self, queries: npt.NDArray[np.object_], documents: npt.NDArray[np.object_]
    ) -> tuple[list[RerankResult | None], Errors]:
        cells, errors = _text_cells({"query": queries}, "query", "query", None, self.on_error)
        for row, listed in enumerate(documents):
            if errors[row] is None and not _text_list(listed):
                errors[row] = _describe(
                    InvalidInputError(
                        f"documents[{row}]",
                        listed,
                        "is not a list of strings",
                        "Pass an array<string> column; drop or fill rows with null documents first.",
                    )
                )

        rows = list(zip(cells, documents, strict=True))
        results: list[RerankResult | None] = self._on_loop(self._send(rows, errors, self._ranking))
        return results, errors

    async def _ranking(self, client: JobClient, rows: list[tuple[str, Any]]) -> list[RerankResult]:
        return [await client.rerank(query, list(documents), **self.options) for query, documents in rows]


def _text_list(value: object) -> bool:
    """Whether an ``array<string>`` cell holds strings only (pandas shows it as an array or a list)."""
    return isinstance(value, np.ndarray | list) and all(isinstance(item, str) for item in value)


# --------------------------------------------------------------------------------------------------
# The factories
# --------------------------------------------------------------------------------------------------


def embed_udf(
    *,
    settings: ClientSettings | None = None,
    params: EmbedParams | Mapping[str, Any] | None = None,
    batch_size: int = defaults.EMBED_BATCH_SIZE,
    concurrency: Concurrency = defaults.CONCURRENCY,
    extra_body: Mapping[str, Any] | None = None,
) -> UserDefinedFunctionLike:
    """A pandas UDF embedding a string column with ``/v1/embeddings``: ``struct<embedding: array<float>,
    error: string>`` per row (the vector as ``Client.embed`` gives it, float32).

    Args:
        settings: the client settings (``vllm_tasks.ClientSettings``: server or load balancer, model, API
            key, timeouts, retries, headers); they are pickled to the workers with the key. Default:
            ``ClientSettings()``, read from each worker's environment (``VLLM_TASKS_BASE_URL``,
            ``VLLM_API_KEY``).
        params: the vector options (``vllm_tasks.EmbedParams(dimensions=256)``, or a dict of its fields).
        batch_size: texts per request; concurrency: requests in flight per Python worker, or ``"auto"``.
        extra_body: extra JSON fields for every request.

    Returns:
        The UDF: call it on a column (``df.select(embed("text"))``) or register it for SQL
        (``spark.udf.register("vt_embed", embed)``).

    Raises:
        InvalidInputError: bad settings or options, here (before any Spark job). In the job, a row's
            refusal is its ``error`` field; the SDK's errors that are not about a row fail the task.

    Examples:
        >>> embed = embed_udf(settings=vt.ClientSettings("http://vllm:8000"), params={"dimensions": 256})
        >>> df.select("id", embed("text").alias("e")).select("id", "e.embedding", "e.error")
    """
    recipe = _Recipe.checked(
        Embedder,
        settings=settings,
        params=params,
        batch_size=batch_size,
        concurrency=concurrency,
        extra_body=extra_body,
    )

    def embed(texts: Iterator[pd.Series]) -> Iterator[pd.DataFrame]:
        embedder = recipe.built()
        for batch in texts:
            out = embedder({"text": _cells(batch)})
            yield _struct({"embedding": list(out["embedding"])}, list(out["error"]))

    return _udf(embed, _returns(("embedding", ArrayType(FloatType()))))


def sparse_embed_udf(
    *,
    settings: ClientSettings | None = None,
    params: SparseEmbedParams | Mapping[str, Any] | None = None,
    batch_size: int = defaults.SPARSE_BATCH_SIZE,
    concurrency: Concurrency = defaults.CONCURRENCY,
    extra_body: Mapping[str, Any] | None = None,
) -> UserDefinedFunctionLike:
    """A pandas UDF giving each string's sparse vector (``Client.embed_sparse``: SPLADE, BGE-M3):
    ``struct<indices: array<bigint>, values: array<float>, tokens: array<string>, error: string>``.

    The vector is two aligned arrays, token ids ascending, as ``embed_file``'s Parquet writes it and Qdrant
    takes it (``{"indices": ..., "values": ...}``); Spark ML's vector is
    ``Vectors.sparse(vocabulary, indices, values)``. ``tokens`` holds each id's token with
    ``params=SparseEmbedParams(return_tokens=True)``, else null.

    Args:
        settings: the client settings, as for :func:`embed_udf`.
        params: the sparse options (``vllm_tasks.SparseEmbedParams(top_k=128)``, or a dict of its fields).
        batch_size: texts per request; concurrency: requests in flight per Python worker, or ``"auto"``.
        extra_body: extra JSON fields for every request.

    Returns:
        The UDF (a column expression's function, and SQL-registrable).

    Raises:
        InvalidInputError: bad settings or options, here; in the job, as for :func:`embed_udf`.

    Examples:
        >>> sparse = sparse_embed_udf(settings=vt.ClientSettings("http://splade:8000"), params={"top_k": 64})
        >>> df.select(sparse("text").alias("s")).select("s.indices", "s.values")
    """
    recipe = _Recipe.checked(
        _SparseEmbedder,
        settings=settings,
        params=params,
        batch_size=batch_size,
        concurrency=concurrency,
        extra_body=extra_body,
    )

    def sparse_embed(texts: Iterator[pd.Series]) -> Iterator[pd.DataFrame]:
        embedder = recipe.built()
        for batch in texts:
            vectors, errors = embedder(_cells(batch))
            fields: dict[str, list[Any]] = {"indices": [], "values": [], "tokens": []}
            for vector in vectors:
                fields["indices"].append(None if vector is None else vector.indices)
                fields["values"].append(None if vector is None else vector.values)
                fields["tokens"].append(
                    None if vector is None or vector.tokens is None else list(vector.tokens)
                )
            yield _struct(fields, errors)

    returns = _returns(
        ("indices", ArrayType(LongType())),
        ("values", ArrayType(FloatType())),
        ("tokens", ArrayType(StringType())),
    )
    return _udf(sparse_embed, returns)


def score_udf(
    *,
    settings: ClientSettings | None = None,
    params: RerankParams | Mapping[str, Any] | None = None,
    batch_size: int = defaults.SCORE_BATCH_SIZE,
    concurrency: Concurrency = defaults.CONCURRENCY,
    extra_body: Mapping[str, Any] | None = None,
) -> UserDefinedFunctionLike:
    """A pandas UDF scoring a query column against a document column, row by row (``/score``, as
    ``Client.score`` with the pairs zipped): ``struct<score: double, error: string>``.

    The score's scale is the served model's: 0..1 for a cross-encoder, a cosine for an embedding model.

    Args:
        settings: the client settings, as for :func:`embed_udf`.
        params: the scoring options (``vllm_tasks.RerankParams(truncate_prompt_tokens=-1)``, or a dict).
        batch_size: pairs per request; concurrency: requests in flight per Python worker, or ``"auto"``.
        extra_body: extra JSON fields for every request.

    Returns:
        The UDF, called with two columns: ``score("query", "document")``.

    Raises:
        InvalidInputError: bad settings or options, here; in the job, as for :func:`embed_udf`.

    Examples:
        >>> score = score_udf(settings=vt.ClientSettings("http://reranker:8000"))
        >>> pairs.select(score("query", "passage").score.alias("relevance"))
    """
    recipe = _Recipe.checked(
        Scorer,
        settings=settings,
        params=params,
        batch_size=batch_size,
        concurrency=concurrency,
        extra_body=extra_body,
    )

    def score(pairs: Iterator[tuple[pd.Series, pd.Series]]) -> Iterator[pd.DataFrame]:
        scorer = recipe.built()
        for batch in pairs:
            queries, documents = _column_pairs(batch)
            out = scorer({"query": _cells(queries), "document": _cells(documents)})
            yield _struct({"score": out["score"].tolist()}, list(out["error"]))

    return _udf(score, _returns(("score", DoubleType())))


def rerank_udf(
    *,
    settings: ClientSettings | None = None,
    params: RerankParams | Mapping[str, Any] | None = None,
    top_n: int | None = None,
    batch_size: int = defaults.SCORE_BATCH_SIZE,
    concurrency: Concurrency = defaults.CONCURRENCY,
    extra_body: Mapping[str, Any] | None = None,
) -> UserDefinedFunctionLike:
    """A pandas UDF reranking each row's documents against its query (``Client.rerank``, one call per
    row): ``struct<results: array<struct<index: int, score: double>>, error: string>``, highest score
    first; ``index`` is the document's position in the row's array.

    Args:
        settings: the client settings, as for :func:`embed_udf`.
        params: the rerank options (``vllm_tasks.RerankParams(max_tokens_per_doc=512)``, or a dict).
        top_n: how many results each row keeps (``None``: every document).
        batch_size: documents per request; concurrency: rows in flight per Python worker, or ``"auto"``
            (tuned from the rows' latencies).
        extra_body: extra JSON fields for every request.

    Returns:
        The UDF, called with a string column and an ``array<string>`` column: ``rerank("q", "docs")``.

    Raises:
        InvalidInputError: bad settings or options, here; in the job, as for :func:`embed_udf` (a null
            query or documents array is the row's error).

    Examples:
        >>> rerank = rerank_udf(settings=vt.ClientSettings("http://reranker:8000"), top_n=3)
        >>> candidates.select("qid", rerank("query", "passages").results.alias("top3"))
    """
    recipe = _Recipe.checked(
        _Reranker,
        settings=settings,
        params=params,
        top_n=top_n,
        batch_size=batch_size,
        concurrency=concurrency,
        extra_body=extra_body,
    )

    def rerank(rows: Iterator[tuple[pd.Series, pd.Series]]) -> Iterator[pd.DataFrame]:
        reranker = recipe.built()
        for batch in rows:
            queries, documents = _column_pairs(batch)
            results, errors = reranker(_cells(queries), _cells(documents))
            hits = [
                None if result is None else [{"index": h.index, "score": h.score} for h in result.results]
                for result in results
            ]
            yield _struct({"results": hits}, errors)

    hit = StructType([StructField("index", IntegerType()), StructField("score", DoubleType())])
    return _udf(rerank, _returns(("results", ArrayType(hit))))


def transcribe_udf(
    *,
    settings: ClientSettings | None = None,
    params: TranscribeParams | Mapping[str, Any] | None = None,
    segments: bool = False,
    concurrency: Concurrency = defaults.CONCURRENCY,
    extra_body: Mapping[str, Any] | None = None,
) -> UserDefinedFunctionLike:
    """A pandas UDF transcribing an audio column (``Client.transcribe``, one call per row; long audio is
    chunked client-side): ``struct<text: string, segments: string, error: string>``.

    Args:
        settings: the client settings, as for :func:`embed_udf`.
        params: the speech options (``vllm_tasks.TranscribeParams(language="de")``, or a dict).
        segments: also fill ``segments`` with the timed segments as JSON text (``[{"start": 0.0, "end":
            2.1, "text": "..."}]``); ``False`` (default): it is null.
        concurrency: rows in flight per Python worker, or ``"auto"`` (tuned from the rows' latencies).
        extra_body: extra form fields for every request.

    Returns:
        The UDF, called with a ``binary`` column of audio files (``spark.read.format("binaryFile")``'s
        ``content``) or a string column of paths / URLs the workers can read.

    Raises:
        InvalidInputError: bad settings or options, here; in the job, as for :func:`embed_udf` (an audio
            file that does not decode is the row's error).

    Examples:
        >>> files = spark.read.format("binaryFile").load("calls/*.wav")
        >>> files.select("path", transcribe_udf(settings=vt.ClientSettings("http://stt:8000"))("content"))
    """
    recipe = _Recipe.checked(
        Transcriber,
        settings=settings,
        params=params,
        segments_column="segments" if segments else None,
        concurrency=concurrency,
        extra_body=extra_body,
    )

    def transcribe(audio: Iterator[pd.Series]) -> Iterator[pd.DataFrame]:
        transcriber = recipe.built()
        for batch in audio:
            out = transcriber({"audio": _cells(batch)})
            timed = list(out["segments"]) if segments else [None] * len(batch)
            yield _struct({"text": list(out["transcript"]), "segments": timed}, list(out["error"]))

    return _udf(transcribe, _returns(("text", StringType()), ("segments", StringType())))


def ocr_udf(
    *,
    settings: ClientSettings | None = None,
    params: OCRParams | Mapping[str, Any] | None = None,
    preset: str | OCRPreset | None = None,
    quality: PageQuality | Mapping[str, Any] | None = DEFAULT_QUALITY,
    blocks: bool = False,
    concurrency: Concurrency = defaults.CONCURRENCY,
    pdf_concurrency: int = defaults.OCR_PDF_CONCURRENCY,
    extra_body: Mapping[str, Any] | None = None,
) -> UserDefinedFunctionLike:
    """A pandas UDF OCR-ing an image or PDF column with an OCR model: ``struct<markdown: string, blocks:
    string, error: string>`` per row (a PDF's pages' markdown joined by ``---``, as Ray's ``OCR`` does).

    Args:
        settings: the client settings, as for :func:`embed_udf`.
        params: the OCR options (``vllm_tasks.OCRParams(prompt="free", max_tokens=2048)``, or a dict).
        preset: the OCR model preset (``"deepseek-ocr"``, ...); default: recognised from the served model.
        quality: the page-quality ladder (``vllm_tasks.ocr.PageQuality``, a dict, or ``None`` for one try
            per page); a row over its page error rate fails as ``OCRDocumentFailed`` in ``error``.
        blocks: also fill ``blocks`` with the layout blocks as JSON text; ``False`` (default): it is null.
        concurrency: rows in flight per Python worker, or ``"auto"``; pdf_concurrency: pages in flight
            per PDF row.
        extra_body: extra JSON fields for every request.

    Returns:
        The UDF, called with a ``binary`` column (images or PDFs) or a string column of paths / URLs.

    Raises:
        InvalidInputError: bad settings or options, here; in the job, as for :func:`embed_udf` (an image
            that does not decode is the row's error).

    Examples:
        >>> scans = spark.read.format("binaryFile").load("scans/*.png")
        >>> scans.select("path", ocr_udf(settings=vt.ClientSettings("http://ocr:8000"))("content").markdown)
    """
    recipe = _Recipe.checked(
        OCR,
        settings=settings,
        params=params,
        preset=preset,
        quality=quality,
        blocks_column="blocks" if blocks else None,
        concurrency=concurrency,
        pdf_concurrency=pdf_concurrency,
        extra_body=extra_body,
    )

    def ocr(images: Iterator[pd.Series]) -> Iterator[pd.DataFrame]:
        reader = recipe.built()
        for batch in images:
            out = reader({"image": _cells(batch)})
            layout = list(out["blocks"]) if blocks else [None] * len(batch)
            yield _struct({"markdown": list(out["markdown"]), "blocks": layout}, list(out["error"]))

    return _udf(ocr, _returns(("markdown", StringType()), ("blocks", StringType())))
