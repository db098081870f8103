"""FakeVLLM configured like each CPU fixture of server-fixtures/fixture_table.py.

The component tier runs the SDK's glue (adapters, jobs, docs blocks, notebook, CLI) against these instead of
the real servers, and tests/component/test_fake_replay.py holds each one to what the real fixture answered
(tests/recorded/<fixture>/): same status, content type, headers a client reads, error shape, JSON shape.

Example:
    with fake_like("embed") as server:      # a FakeFixture: .base_url, .model, .api_key, .fake
        vt.Client(server.base_url).embed(["hello"])
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vllm_tasks.testing import (
    EMBEDDING_TASKS,
    LISTWISE_TASKS,
    OCR_TASKS,
    RERANKER_TASKS,
    SPEECH_TASKS,
    FakeVLLM,
)
from vllm_tasks.testing.wire import ReceivedRequest

_SERVER_FIXTURES = str(Path(__file__).resolve().parent.parent / "server-fixtures")
if _SERVER_FIXTURES not in sys.path:
    sys.path.insert(0, _SERVER_FIXTURES)

from fixture_pins import VLLM_VERSION  # noqa: E402
from fixture_table import FIXTURES, TEST_API_KEY  # noqa: E402

_MINILM: dict[str, Any] = {"width": 384, "max_model_len": 256, "version": VLLM_VERSION}
_TOPICS = ("sports", "politics", "science", "arts")  # build_classifiers.TOPIC_LABELS
_QWEN3_RERANKER: dict[str, Any] = {
    "tasks": RERANKER_TASKS,
    "labels": ("LABEL_0",),
    "max_model_len": 2048,
    "version": VLLM_VERSION,
}

#: The OCR reference fixtures (PaddleOCR-VL, GLM-OCR, LightOnOCR): a 1024-token context, no n-gram processor.
_OCR_REFERENCE: dict[str, Any] = {
    "tasks": OCR_TASKS,
    "max_model_len": 1024,
    "version": VLLM_VERSION,
    "ngram_processor": False,
}

#: FakeVLLM keyword arguments per fixture name: what the real fixture serves, its model name, width,
#: context length, Matryoshka declaration, scorer, labels and key. (The embed fixture's chat template is
#: for /v1/embeddings' `messages`: it mounts no /v1/chat/completions.)
FAKE_SETTINGS: dict[str, dict[str, Any]] = {
    "embed": {**_MINILM, "tasks": EMBEDDING_TASKS, "matryoshka": False},
    "embed-mrl": {**_MINILM, "tasks": EMBEDDING_TASKS, "matryoshka": [128, 256, 384]},
    "embed-matryoshka": {**_MINILM, "tasks": EMBEDDING_TASKS, "matryoshka": True},
    "rerank": {**_MINILM, "tasks": RERANKER_TASKS, "labels": ("relevance",)},  # the head's id2label
    "api-key": {**_MINILM, "tasks": EMBEDDING_TASKS, "matryoshka": False, "api_key": TEST_API_KEY},
    "late-interaction": {**_MINILM, "tasks": EMBEDDING_TASKS, "scorer": "late-interaction"},
    "listwise": {
        "tasks": LISTWISE_TASKS,
        "scorer": "listwise",
        "width": 512,  # the projector's width (vLLM sets embedding_size 512)
        "max_model_len": 8192,
        "version": VLLM_VERSION,
    },
    "qwen3-embedding": {
        "tasks": EMBEDDING_TASKS,
        "width": 32,
        "max_model_len": 2048,
        "matryoshka": True,
        "input_types": ("document", "query"),
        "version": VLLM_VERSION,
    },
    # Qwen3-Reranker's tiny stand-in: a one-label head read from the yes/no logits; without the template
    # the pair is read as the bare concatenation of query and document (score_template=False).
    "qwen3-reranker": {**_QWEN3_RERANKER, "score_template": True},
    "qwen3-reranker-no-template": {**_QWEN3_RERANKER, "score_template": False},
    # SPLADE: /v1/embeddings answers vocabulary-wide rows of non-negative weights, mostly zeros
    "splade": {
        "tasks": EMBEDDING_TASKS,
        "sparse": True,
        "width": 30522,
        "max_model_len": 512,
        "version": VLLM_VERSION,
    },
    # BGE-M3 with token_classify active: /pooling per-token weights, the embedding routes 501
    "bge-m3": {
        "tasks": frozenset({"embed", "embed_v2", "pooling"}),
        "lexical": True,
        "width": 64,
        "max_model_len": 512,
        "version": VLLM_VERSION,
    },
    # sequence classifiers over four topics: softmax, or a sigmoid per label (problem_type multi-label)
    "classify": {**_MINILM, "tasks": frozenset({"classify", "pooling"}), "labels": _TOPICS},
    "classify-multilabel": {
        **_MINILM,
        "tasks": frozenset({"classify", "pooling"}),
        "labels": _TOPICS,
        "multi_label": True,
    },
    "ocr": {"tasks": OCR_TASKS, "max_model_len": 4096, "version": VLLM_VERSION},
    "ocr-no-processor": {
        "tasks": OCR_TASKS,
        "max_model_len": 4096,
        "version": VLLM_VERSION,
        "ngram_processor": False,
    },
    "stt": {"tasks": SPEECH_TASKS, "max_model_len": 448, "version": VLLM_VERSION},
    # a sequence reward model: classify active, /pooling answers one raw value per conversation
    "reward": {
        "tasks": frozenset({"pooling"}),
        "reward": "sequence",
        "max_model_len": 512,
        "version": VLLM_VERSION,
    },
    "paddleocr-vl": {**_OCR_REFERENCE, "ocr_preset": "paddleocr-vl"},
    "glm-ocr": {**_OCR_REFERENCE, "ocr_preset": "glm-ocr"},
    "lighton-ocr": {**_OCR_REFERENCE, "ocr_preset": "lighton-ocr"},
}


@dataclasses.dataclass(frozen=True)
class FakeFixture:
    """A FakeVLLM standing in for fixture ``name``; the attributes tests read from a real VLLMServer."""

    name: str
    fake: FakeVLLM

    @property
    def base_url(self) -> str:
        return self.fake.url

    @property
    def model(self) -> str:
        return self.fake.settings.model

    @property
    def api_key(self) -> str | None:
        return self.fake.settings.api_key


def fake_settings(name: str) -> dict[str, Any]:
    """FakeVLLM's keyword arguments for fixture ``name`` (its served model name included)."""
    if name not in FAKE_SETTINGS:
        raise KeyError(f"no fake for fixture {name!r}; known: {', '.join(sorted(FAKE_SETTINGS))}")
    return {"model": FIXTURES[name].served_model_name, **FAKE_SETTINGS[name]}


@contextmanager
def fake_like(name: str, **changes: Any) -> Iterator[FakeFixture]:
    """A started FakeVLLM configured like fixture ``name`` (``changes`` override its settings)."""
    with FakeVLLM(**{**fake_settings(name), **changes}) as fake:
        yield FakeFixture(name, fake)


def piece_transcript(request: ReceivedRequest) -> str:
    """A transcript for the speech fake (``fake_like("stt", transcript=piece_transcript)``): a client-side
    piece (``long45-0001.flac``, the SDK names them ``<stem>-NNNN``) answers two sentences naming it."""
    piece = int(Path(request.files["file"].filename or "").stem.rsplit("-", 1)[1])
    return f" Piece {piece} begins here. Piece {piece} ends here."
