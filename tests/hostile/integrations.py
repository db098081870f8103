"""The integrations in the registry: LangChain and LlamaIndex adapters, the Ray callables (called directly on
a batch, as Ray Data does in each worker), the Spark UDFs (their function called on pandas batches, as a
Spark Python worker does, without a JVM), and the client pieces reached only through other entries."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from vllm_tasks.integrations import daft, lancedb, langchain, llama_index, ray, spark

from .inputs import HOSTILE_PATHS, refused
from .registry import ASYNC_CASES, TEXTS, Call, Env, png, register, wav

ADAPTER_CASES = ("transient", "nan", "width", "row-missing", "truncated", "html-200", "retry-after-garbage")
RANK_CASES = ("transient", "nan", "row-missing", "truncated", "html-200", "retry-after-garbage")
PLAIN_CASES = ("transient", "truncated", "html-200", "retry-after-garbage")
CONNECTION = {"max_retries": 2, "timeout": 10.0}


def adapter(name: str, run: Callable[[Env], Any], cases: tuple[str, ...], server: str = "all") -> None:
    is_async = name.rsplit(".", 1)[1].startswith("a")
    register(name, Call(run, server, tuple(c for c in cases if c in ASYNC_CASES) if is_async else cases))


def _langchain_embeddings(env: Env) -> Any:
    return langchain.VLLMEmbeddings(base_url=env.url, **CONNECTION)


def _documents() -> list[Any]:
    from langchain_core.documents import Document

    return [Document(page_content=text) for text in TEXTS]


def _ranked(documents: Any) -> list[tuple[str, Any]]:
    return [(d.page_content, d.metadata) for d in documents]


LC = "integrations.langchain."
adapter(
    LC + "VLLMEmbeddings.embed_documents",
    lambda env: _langchain_embeddings(env).embed_documents(TEXTS),
    ADAPTER_CASES,
)
adapter(
    LC + "VLLMEmbeddings.embed_query",
    lambda env: _langchain_embeddings(env).embed_query("hello"),
    ("transient", "nan", "truncated", "html-200"),
)
adapter(
    LC + "VLLMEmbeddings.aembed_documents",
    lambda env: asyncio.run(_langchain_embeddings(env).aembed_documents(TEXTS)),
    ADAPTER_CASES,
)
adapter(
    LC + "VLLMEmbeddings.aembed_query",
    lambda env: asyncio.run(_langchain_embeddings(env).aembed_query("hello")),
    ("transient", "nan", "truncated", "html-200"),
)
adapter(
    LC + "VLLMReranker.compress_documents",
    lambda env: _ranked(
        langchain.VLLMReranker(base_url=env.url, **CONNECTION).compress_documents(_documents(), "query")
    ),
    RANK_CASES,
)
adapter(
    LC + "VLLMReranker.acompress_documents",
    lambda env: _ranked(
        asyncio.run(
            langchain.VLLMReranker(base_url=env.url, **CONNECTION).acompress_documents(_documents(), "query")
        )
    ),
    RANK_CASES,
)


def _page(env: Env) -> str:

    path = env.tmp / "page.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png())
    return str(path)


def _audio(env: Env) -> str:
    path = env.tmp / "a.wav"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(wav())
    return str(path)


async def _collect(documents: Any) -> list[Any]:
    return [document async for document in documents]


def _loaded(documents: Any) -> list[tuple[str, Any]]:
    return [(d.page_content, {k: v for k, v in d.metadata.items() if k != "source"}) for d in documents]


adapter(
    LC + "VLLMOCRLoader.lazy_load",
    lambda env: _loaded(langchain.VLLMOCRLoader(_page(env), base_url=env.url, **CONNECTION).lazy_load()),
    PLAIN_CASES,
    "ocr",
)
adapter(
    LC + "VLLMOCRLoader.alazy_load",
    lambda env: _loaded(
        asyncio.run(
            _collect(langchain.VLLMOCRLoader(_page(env), base_url=env.url, **CONNECTION).alazy_load())
        )
    ),
    PLAIN_CASES,
    "ocr",
)
adapter(
    LC + "VLLMTranscriptLoader.lazy_load",
    lambda env: _loaded(
        langchain.VLLMTranscriptLoader(_audio(env), base_url=env.url, **CONNECTION).lazy_load()
    ),
    PLAIN_CASES,
)
adapter(
    LC + "VLLMTranscriptLoader.alazy_load",
    lambda env: _loaded(
        asyncio.run(
            _collect(langchain.VLLMTranscriptLoader(_audio(env), base_url=env.url, **CONNECTION).alazy_load())
        )
    ),
    PLAIN_CASES,
)

LI = "integrations.llama_index."
adapter(
    LI + "VLLMEmbedding.get_text_embedding_batch",
    lambda env: llama_index.VLLMEmbedding(base_url=env.url, **CONNECTION).get_text_embedding_batch(TEXTS),
    ADAPTER_CASES,
)
adapter(
    LI + "VLLMEmbedding.aget_text_embedding_batch",
    lambda env: asyncio.run(
        llama_index.VLLMEmbedding(base_url=env.url, **CONNECTION).aget_text_embedding_batch(TEXTS)
    ),
    ADAPTER_CASES,
)


LDB = "integrations.lancedb."


def _lancedb_function(env: Env) -> Any:
    return lancedb.VLLMEmbeddingFunction(base_url=env.url, **CONNECTION)


def _listed(vectors: list[Any]) -> list[Any]:
    return [None if v is None else v.tolist() for v in vectors]


adapter(
    LDB + "VLLMEmbeddingFunction.compute_source_embeddings",
    lambda env: _listed(_lancedb_function(env).compute_source_embeddings(TEXTS)),
    ADAPTER_CASES,
)
adapter(
    LDB + "VLLMEmbeddingFunction.compute_query_embeddings",
    lambda env: _listed(_lancedb_function(env).compute_query_embeddings("hello")),
    ("transient", "nan", "truncated", "html-200"),
)
adapter(
    LDB + "VLLMEmbeddingFunction.ndims",
    lambda env: _lancedb_function(env).ndims(),
    ("transient", "nan", "truncated", "html-200"),
)
# The same calls under LanceDB's names (its retry wrappers, its list entry point), and what reaches no server.
for _name in (
    "compute_source_embeddings_with_retry",
    "compute_query_embeddings_with_retry",
    "generate_embeddings",
    "safe_model_dump",
    "sensitive_keys",
    "close",
    "aclose",
):
    register(f"{LDB}VLLMEmbeddingFunction.{_name}")


def _postprocessed(env: Env) -> Any:
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    nodes = [NodeWithScore(node=TextNode(text=text, id_=str(i))) for i, text in enumerate(TEXTS)]
    rerank = llama_index.VLLMRerank(base_url=env.url, top_n=None, **CONNECTION)
    ranked = rerank.postprocess_nodes(nodes, QueryBundle("query"))
    return [(n.node.node_id, n.score) for n in ranked]


# LlamaIndex calls the reranker through its postprocess_nodes (the class's own method is private).
register(LI + "VLLMRerank.postprocess_nodes", Call(_postprocessed, "all", RANK_CASES))

RAY = "integrations.ray."
ray_settings = {"max_retries": 2, "timeout": 10.0}


def _ray(cls: Any, batch: Callable[[Env], dict[str, Any]]) -> Callable[[Env], Any]:
    def run(env: Env) -> Any:
        callable_ = cls(settings=env.settings())
        try:
            return callable_(batch(env))
        finally:
            callable_.close()

    return run


register(
    RAY + "Embedder.__call__",
    Call(_ray(ray.Embedder, lambda env: {"text": np.array(TEXTS)}), "all", ADAPTER_CASES),
)
register(
    RAY + "Scorer.__call__",
    Call(
        _ray(ray.Scorer, lambda env: {"query": np.array(["q"] * 3), "document": np.array(TEXTS)}),
        "all",
        RANK_CASES,
    ),
)
register(
    RAY + "OCR.__call__",
    Call(_ray(ray.OCR, lambda env: {"image": np.array([png()], dtype=object)}), "ocr", PLAIN_CASES),
)
register(
    RAY + "Transcriber.__call__",
    Call(_ray(ray.Transcriber, lambda env: {"audio": np.array([wav()], dtype=object)}), "all", PLAIN_CASES),
)


def _ray_async(cls: Any, batch: Callable[[Env], dict[str, Any]]) -> Callable[[Env], Any]:
    """An async callable's ``__call__`` on one batch, awaited as Ray Data's actor loop awaits it."""

    def run(env: Env) -> Any:
        async def call() -> Any:
            callable_ = cls(settings=env.settings())
            try:
                return await callable_(batch(env))
            finally:
                await callable_.aclose()

        return asyncio.run(call())

    return run


# The async callables share their sync twins' batches (cells, planning, isolation): what a server answers
# reaches them through the AsyncClient instead.
register(
    RAY + "AsyncEmbedder.__call__",
    Call(_ray_async(ray.AsyncEmbedder, lambda env: {"text": np.array(TEXTS)}), "all", ADAPTER_CASES),
)
register(
    RAY + "AsyncScorer.__call__",
    Call(
        _ray_async(ray.AsyncScorer, lambda env: {"query": np.array(["q"] * 3), "document": np.array(TEXTS)}),
        "all",
        RANK_CASES,
    ),
)
register(
    RAY + "AsyncOCR.__call__",
    Call(
        _ray_async(ray.AsyncOCR, lambda env: {"image": np.array([png()], dtype=object)}), "ocr", PLAIN_CASES
    ),
)
register(
    RAY + "AsyncTranscriber.__call__",
    Call(
        _ray_async(ray.AsyncTranscriber, lambda env: {"audio": np.array([wav()], dtype=object)}),
        "all",
        PLAIN_CASES,
    ),
)

SPARK = "integrations.spark."


def _spark(
    factory: Callable[..., Any],
    columns: Callable[..., list[Any]],
    bad: Callable[[Env], Any] | None = None,
) -> Callable[[Env], Any]:
    """``factory``'s UDF run on one batch of ``columns(env)`` (or ``columns(env, bad(env))``) as pandas
    Series, as a Spark Python worker runs it; the struct column it yields as lists (arrays as lists). The
    worker's callable is closed after."""

    def run(env: Env) -> Any:
        env.tmp.mkdir(parents=True, exist_ok=True)
        before = set(spark._BUILT)
        udf = factory(settings=env.settings())
        values = columns(env) if bad is None else columns(env, bad(env))
        series = [pd.Series(column, dtype=object) for column in values]
        try:
            (frame,) = udf.func(iter([series[0] if len(series) == 1 else tuple(series)]))
        finally:
            for key in set(spark._BUILT) - before:
                spark._BUILT.pop(key).close()
        return {
            name: [value.tolist() if isinstance(value, np.ndarray) else value for value in frame[name]]
            for name in frame.columns
        }

    return run


register(SPARK + "embed_udf", Call(_spark(spark.embed_udf, lambda env: [TEXTS]), "all", ADAPTER_CASES))
register(
    SPARK + "sparse_embed_udf",
    Call(_spark(spark.sparse_embed_udf, lambda env: [TEXTS]), "sparse", PLAIN_CASES),
)
register(
    SPARK + "score_udf",
    Call(_spark(spark.score_udf, lambda env: [["q"] * len(TEXTS), TEXTS]), "all", RANK_CASES),
)
register(
    SPARK + "rerank_udf",
    Call(_spark(spark.rerank_udf, lambda env: [["q", "r"], [TEXTS, TEXTS[:1]]]), "all", RANK_CASES),
)
register(SPARK + "ocr_udf", Call(_spark(spark.ocr_udf, lambda env: [[png()]]), "ocr", PLAIN_CASES))
register(
    SPARK + "transcribe_udf", Call(_spark(spark.transcribe_udf, lambda env: [[wav()]]), "all", PLAIN_CASES)
)


def _spark_row_refused(result: Any) -> bool:
    """A batch of a hostile row then a good one: the first row's error, the second's result."""
    errors = result["error"]
    return len(errors) == 2 and bool(errors[0]) and errors[1] is None


# ------------------------------------------------------------------------------- hostile inputs


def _loads(loader: Any, lazy: str, make: Callable[[Any], Any]) -> Callable[[Env], Any]:
    """A LangChain loader built on ``make``'s hostile path and run to its end (sync or async)."""

    def run(env: Env) -> Any:
        env.tmp.mkdir(parents=True, exist_ok=True)
        documents = getattr(loader(make(env.tmp), base_url=env.url, **CONNECTION), lazy)()
        return _loaded(documents if lazy == "lazy_load" else asyncio.run(_collect(documents)))

    return run


for _name, _make in HOSTILE_PATHS.items():
    for _lazy in ("lazy_load", "alazy_load"):
        register(
            f"{LC}VLLMOCRLoader.{_lazy}",
            Call(_loads(langchain.VLLMOCRLoader, _lazy, _make), "ocr", label=_name, check=refused),
        )
        register(
            f"{LC}VLLMTranscriptLoader.{_lazy}",
            Call(_loads(langchain.VLLMTranscriptLoader, _lazy, _make), "all", label=_name, check=refused),
        )


def _row_refused(error_column: str = "error") -> Callable[[Any], bool]:
    """A batch of a hostile row then a good one: the first row's error in the error column, the second's
    result."""

    def check(result: Any) -> bool:
        errors = list(result[error_column])
        return len(errors) == 2 and bool(errors[0]) and errors[1] == ""

    return check


def _hostile_row(cls: Any, columns: Callable[[Env, Any], dict[str, Any]], bad: Callable[[Env], Any]) -> Any:
    """``cls(on_error="column")`` on a batch whose first row holds ``bad(env)`` and second a good value."""

    def run(env: Env) -> Any:
        env.tmp.mkdir(parents=True, exist_ok=True)
        callable_ = cls(settings=env.settings(), on_error="column")
        try:
            return callable_(columns(env, bad(env)))
        finally:
            callable_.close()

    return run


def _column(*values: Any) -> Any:
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


BAD_CELLS: dict[str, Callable[[Env], Any]] = {
    "none": lambda env: None,
    "number": lambda env: 7,
    "nan": lambda env: float("nan"),
    "garbage-bytes": lambda env: b"\x00not a file of any kind\xff" * 4,
}
MEDIA_CELLS = {
    **BAD_CELLS,
    **{name: lambda env, m=make: str(m(env.tmp)) for name, make in HOSTILE_PATHS.items()},
}
"""What a Ray callable's column may hold that is no row's value (media columns: hostile paths too)."""
Batch = Callable[[Env, Any], dict[str, Any]]
RAY_ROWS: dict[str, tuple[Any, str, Batch, dict[str, Callable[[Env], Any]]]] = {
    "Embedder": (ray.Embedder, "all", lambda env, bad: {"text": _column(bad, TEXTS[0])}, BAD_CELLS),
    "Scorer": (
        ray.Scorer,
        "all",
        lambda env, bad: {"query": _column("q", "q"), "document": _column(bad, TEXTS[0])},
        BAD_CELLS,
    ),
    "OCR": (ray.OCR, "ocr", lambda env, bad: {"image": _column(bad, png())}, MEDIA_CELLS),
    "Transcriber": (ray.Transcriber, "all", lambda env, bad: {"audio": _column(bad, wav())}, MEDIA_CELLS),
}
for _cls_name, (_cls, _server, _batch, _cells) in RAY_ROWS.items():
    for _name, _bad in _cells.items():
        register(
            f"{RAY}{_cls_name}.__call__",
            Call(_hostile_row(_cls, _batch, _bad), _server, label=f"row-{_name}", check=_row_refused()),
        )

DAFT = "integrations.daft."


def _daft_embedding(image: bool) -> Callable[[Env], Any]:
    """What ``daft.functions.embed_text`` / ``embed_image`` do with the provider: build the descriptor,
    probe the width, embed a batch in a worker's instance."""

    def run(env: Env) -> Any:
        provider = daft.VLLMProvider(env.settings())
        described = provider.get_image_embedder() if image else provider.get_text_embedder()
        embedder = described.instantiate()
        rows = embedder.embed_image([png(), png(90)]) if image else embedder.embed_text(TEXTS)
        return described.get_dimensions().size, rows

    return run


def _daft(cls: Any, *columns: Callable[[], Any]) -> Callable[[Env], Any]:
    """A ``@daft.cls`` instance called directly on Series, as Daft calls it in each worker."""

    def run(env: Env) -> Any:
        import daft as daft_engine

        return cls(env.settings())(*(daft_engine.Series.from_pylist(column()) for column in columns))

    return run


register(DAFT + "VLLMProvider.get_text_embedder", Call(_daft_embedding(False), "all", ADAPTER_CASES))
register(DAFT + "VLLMProvider.get_image_embedder", Call(_daft_embedding(True), "all", PLAIN_CASES))
register(
    DAFT + "Scorer.__call__",
    Call(_daft(daft.Scorer, lambda: ["q"] * 3, lambda: list(TEXTS)), "all", RANK_CASES),
)
register(
    DAFT + "Reranker.__call__",
    Call(_daft(daft.Reranker, lambda: ["q"], lambda: [list(TEXTS)]), "all", RANK_CASES),
)
register(DAFT + "Transcriber.__call__", Call(_daft(daft.Transcriber, lambda: [wav()]), "all", PLAIN_CASES))
register(DAFT + "OCR.__call__", Call(_daft(daft.OCR, lambda: [png()]), "ocr", PLAIN_CASES))
SPARK_ROWS: dict[str, tuple[Any, str, Callable[[Env, Any], list[Any]], dict[str, Callable[[Env], Any]]]] = {
    "embed_udf": (spark.embed_udf, "all", lambda env, bad: [[bad, TEXTS[0]]], BAD_CELLS),
    "sparse_embed_udf": (spark.sparse_embed_udf, "sparse", lambda env, bad: [[bad, TEXTS[0]]], BAD_CELLS),
    "score_udf": (spark.score_udf, "all", lambda env, bad: [["q", "q"], [bad, TEXTS[0]]], BAD_CELLS),
    "rerank_udf": (spark.rerank_udf, "all", lambda env, bad: [["q", "q"], [bad, TEXTS]], BAD_CELLS),
    "ocr_udf": (spark.ocr_udf, "ocr", lambda env, bad: [[bad, png()]], BAD_CELLS),
    "transcribe_udf": (spark.transcribe_udf, "all", lambda env, bad: [[bad, wav()]], BAD_CELLS),
}
"""What a Spark column may hold that is no row's value: the UDF gives the row a null result and its error
(hostile paths reach the same Ray callables' cells, attacked in ``RAY_ROWS``)."""
for _udf_name, (_factory, _server, _columns, _cells) in SPARK_ROWS.items():
    for _name, _bad in _cells.items():
        register(
            SPARK + _udf_name,
            Call(
                _spark(_factory, _columns, bad=_bad), _server, label=f"row-{_name}", check=_spark_row_refused
            ),
        )

# Closing an adapter (or a Ray callable) closes its own clients: nothing a server says reaches it.
for _name in ("VLLMEmbeddings.close", "VLLMEmbeddings.aclose", "VLLMReranker.close", "VLLMReranker.aclose"):
    register(LC + _name)
for _name in (
    "VLLMEmbedding.close",
    "VLLMEmbedding.aclose",
    "VLLMRerank.close",
    "VLLMRerank.aclose",
    "VLLMEmbedding.class_name",
    "VLLMRerank.class_name",
):
    register(LI + _name)
for _name in ("Embedder", "Scorer", "OCR", "Transcriber"):
    register(f"{RAY}{_name}.close")
    register(f"{RAY}Async{_name}.aclose")

# Reached through other entries: a transcription stream is what Client.transcribe_stream returns (its
# registered call runs it to until_done); the transports are attacked as a client's transport below.
for _name in (
    "TranscriptionStream.until_done",
    "TranscriptionStream.close",
    "AsyncTranscriptionStream.until_done",
    "AsyncTranscriptionStream.close",
    "Urllib3Transport.close",
):
    register(_name)


def _urllib3_transport(env: Env) -> Any:
    import httpx

    import vllm_tasks as vt

    with (
        httpx.Client(transport=vt.Urllib3Transport()) as http,
        vt.Client.from_settings(env.settings(), http_client=http) as client,
    ):
        return client.embed(TEXTS)


register("Urllib3Transport.handle_request", Call(_urllib3_transport, "all", ADAPTER_CASES))
