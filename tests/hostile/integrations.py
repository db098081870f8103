"""The integrations in the registry: LangChain and LlamaIndex adapters, the Ray callables (called directly on
a batch, as Ray Data does in each worker), and the client pieces reached only through other entries."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np

from vllm_tasks.integrations import langchain, llama_index, ray

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
