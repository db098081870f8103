"""A testing kit for apps built on vllm_tasks: a fake vLLM server and a pytest fixture.

:class:`FakeVLLM` is a real HTTP server on ``127.0.0.1`` (background threads, standard library only)
that speaks vLLM's routes and shapes: discovery (``/version``, ``/v1/models``, ``/health``,
``/openapi.json``), ``/tokenize``, embeddings (``/v1/embeddings`` in every encoding, ``/v2/embed``),
scoring (``/score``, ``/rerank``), ``/classify``, ``/pooling``, speech-to-text (``/v1/audio/*``, streams
included, and the WebSocket ``/v1/realtime``) and DeepSeek-OCR-style ``/v1/chat/completions``. Answers are
deterministic; requests are recorded; faults (error statuses, ``Retry-After``, latency, connection resets,
rewritten answers) can be injected.

With pytest, the ``fake_vllm`` fixture (registered on install) gives a started server per test; see
``docs/testing.md``.

Examples:
    >>> from vllm_tasks.testing import FakeVLLM
    >>> with FakeVLLM() as fake, vllm_tasks.Client(fake.url) as client:
    ...     fake.fail(503, path="/rerank", retry_after=0)     # one 503, then the real answer
    ...     ranking = client.rerank("capital of France", ["Bananas.", "Paris is the capital of France."])
    ...     ranking.results[0].index
    1
"""

from .content import DEFAULT_OCR_OUTPUT, DEFAULT_TRANSCRIPT, grounding_output, token_classifier_files
from .server import CapacityLoad, FakeVLLM, Fault
from .settings import (
    ALL_TASKS,
    EMBEDDING_TASKS,
    LISTWISE_TASKS,
    OCR_TASKS,
    REALTIME_TASKS,
    RERANKER_TASKS,
    SPEECH_TASKS,
    FakeSettings,
)
from .wire import ReceivedRequest, Reply, UploadedFile

__all__ = [
    "ALL_TASKS",
    "DEFAULT_OCR_OUTPUT",
    "DEFAULT_TRANSCRIPT",
    "EMBEDDING_TASKS",
    "LISTWISE_TASKS",
    "OCR_TASKS",
    "REALTIME_TASKS",
    "RERANKER_TASKS",
    "SPEECH_TASKS",
    "CapacityLoad",
    "FakeSettings",
    "FakeVLLM",
    "Fault",
    "ReceivedRequest",
    "Reply",
    "UploadedFile",
    "grounding_output",
    "token_classifier_files",
]
