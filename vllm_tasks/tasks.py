"""The tasks a vLLM server can serve, their routes, and how an operator starts a server for each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

TaskName = Literal[
    "embed", "embed_v2", "score", "rerank", "classify", "pooling", "transcription", "translation", "chat"
]


@dataclass(frozen=True)
class TaskRoute:
    """One task's route, the cheapest request that tells whether it is served, and the operator's fix."""

    task: TaskName
    path: str
    probe_json: dict[str, Any] | None
    """Body of the probe request; ``None`` for multipart routes (probed with an empty form)."""
    how_to_serve: str


TASK_ROUTES: dict[TaskName, TaskRoute] = {
    route.task: route
    for route in (
        TaskRoute(
            "embed",
            "/v1/embeddings",
            {"input": "."},
            "start an embedding model, e.g. `vllm serve Qwen/Qwen3-Embedding-0.6B --runner pooling`; "
            "if the route answers 501 the model's active pooling task is another one: add "
            '`--pooler-config \'{"task": "embed"}\'`',
        ),
        TaskRoute(
            "embed_v2",
            "/v2/embed",
            {"texts": ["."]},
            "start an embedding model on vLLM >= 0.18.0 (`--runner pooling`); /v2/embed shares the "
            "`embed` task with /v1/embeddings",
        ),
        TaskRoute(
            "score",
            "/score",
            {},
            "start a cross-encoder (e.g. `vllm serve BAAI/bge-reranker-v2-m3 --runner pooling`), an "
            "embedding model, or a late-interaction model (ColBERT) with `--pooler-config "
            '\'{"task": "token_embed"}\'`; Qwen3-Reranker needs its `--hf-overrides` beside '
            "`--convert classify`",
        ),
        TaskRoute(
            "rerank",
            "/rerank",
            {},
            "start a cross-encoder (e.g. `vllm serve BAAI/bge-reranker-v2-m3 --runner pooling`), an "
            "embedding model, or a late-interaction model (ColBERT); Qwen3-Reranker needs its "
            "`--hf-overrides` beside `--convert classify` (without them it is a two-label classifier that "
            "serves no /rerank)",
        ),
        TaskRoute(
            "classify",
            "/classify",
            {"input": "."},
            "start a sequence-classification model with `--runner pooling`; a 501 means another pooling "
            'task is active: add `--pooler-config \'{"task": "classify"}\'`',
        ),
        TaskRoute(
            "pooling",
            "/pooling",
            {},
            "start any pooling model with `--runner pooling`",
        ),
        TaskRoute(
            "transcription",
            "/v1/audio/transcriptions",
            None,
            "start a speech-to-text model, e.g. `vllm serve openai/whisper-large-v3-turbo`",
        ),
        TaskRoute(
            "translation",
            "/v1/audio/translations",
            None,
            "start a speech-to-text model, e.g. `vllm serve openai/whisper-large-v3-turbo`",
        ),
        TaskRoute(
            "chat",
            "/v1/chat/completions",
            {},
            "start a generative model, e.g. the DeepSeek-OCR recipe: `vllm serve deepseek-ai/DeepSeek-OCR "
            "--logits-processors vllm.model_executor.models.deepseek_ocr:NGramPerReqLogitsProcessor "
            "--no-enable-prefix-caching --mm-processor-cache-gb 0`",
        ),
    )
}


def task_for_path(path: str) -> TaskRoute | None:
    """The task whose route is ``path`` (aliases such as ``/v1/score`` included), or ``None``."""
    aliases = {"/v1/score": "/score", "/v1/rerank": "/rerank", "/v2/rerank": "/rerank"}
    path = aliases.get(path, path)
    for route in TASK_ROUTES.values():
        if route.path == path:
            return route
    return None
