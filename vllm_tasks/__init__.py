"""vllm_tasks: a typed client for vLLM's embedding, scoring, speech-to-text and OCR endpoints.

The top level holds what a program starts from: the clients and their settings, the batch jobs, the
exception tree. Result types live in :mod:`vllm_tasks.types`; job errors and reports in
:mod:`vllm_tasks.jobs`; OCR's ``locate`` and warnings in :mod:`vllm_tasks.ocr`.

Examples:
    >>> import vllm_tasks as vt
    >>> with vt.Client("http://localhost:8000") as client:
    ...     print(client.server_info().version)
"""

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from . import types as _types
from ._async.audio import AsyncTranscriptionStream
from ._async.client import AsyncClient
from ._sync.audio import TranscriptionStream
from ._sync.client import Client
from .config import ClientSettings, FetchLimits
from .decoding import unpackbits
from .embeddings import EmbedParams, EmbedV2Params
from .errors import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    ContextLengthExceeded,
    EndpointNotServed,
    GatewayTimeoutError,
    InputFetchError,
    InternalServerError,
    InvalidInputError,
    MissingDependency,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    RequestTooLargeError,
    ServerNotReady,
    ServiceUnavailableError,
    StreamError,
    UnexpectedResponse,
    UnprocessableEntityError,
    UnsupportedByServer,
    VLLMTasksError,
)
from .jobs import aembed_file, aocr_dir, atranscribe_dir, embed_file, ocr_dir, transcribe_dir
from .ocr import OCRParams
from .pooling import ClassifyParams, PoolParams, maxsim
from .scoring import RerankParams
from .sparse import SparseEmbedParams
from .transcription import ChunkingOptions, TranscribeParams
from .urllib3_transport import Urllib3Transport
from .version import __version__

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "APITimeoutError",
    "AsyncClient",
    "AsyncTranscriptionStream",
    "AuthenticationError",
    "BadRequestError",
    "ChunkingOptions",
    "ClassifyParams",
    "Client",
    "ClientSettings",
    "ConflictError",
    "ContextLengthExceeded",
    "EmbedParams",
    "EmbedV2Params",
    "EndpointNotServed",
    "FetchLimits",
    "GatewayTimeoutError",
    "InputFetchError",
    "InternalServerError",
    "InvalidInputError",
    "MissingDependency",
    "NotFoundError",
    "OCRParams",
    "PermissionDeniedError",
    "PoolParams",
    "RateLimitError",
    "RequestTooLargeError",
    "RerankParams",
    "ServerNotReady",
    "ServiceUnavailableError",
    "SparseEmbedParams",
    "StreamError",
    "TranscribeParams",
    "TranscriptionStream",
    "UnexpectedResponse",
    "UnprocessableEntityError",
    "UnsupportedByServer",
    "Urllib3Transport",
    "VLLMTasksError",
    "__version__",
    "aembed_file",
    "aocr_dir",
    "atranscribe_dir",
    "embed_file",
    "maxsim",
    "ocr_dir",
    "transcribe_dir",
    "unpackbits",
]

_JOBS = (
    "EmbedFileReport FolderJobReport ReplicaReport JobError JobMismatch ReplicaMismatch RowFailed "
    "InsufficientDiskSpace"
)
_OCR = "locate OCRTruncatedWarning NGramProcessorMissingWarning"

_MOVED: dict[str, tuple[str, str, str]] = {
    **{
        name: ("vllm_tasks.types", name, "")
        for name in _types.__all__
        if name
        not in ("TranscriptionWord", "SpeakerSegment", "SparseEmbeddingResult", "SparseVector", "Alignment")
        # never top-level names (the sparse results and Alignment are newer than 0.1)
    },
    **{name: ("vllm_tasks.jobs", name, "") for name in _JOBS.split()},
    **{name: ("vllm_tasks.ocr", name, "") for name in _OCR.split()},
    "ImageError": ("vllm_tasks", "InvalidInputError", "image_decode"),
    "ImageTooLarge": ("vllm_tasks", "InvalidInputError", "image_too_large"),
    "AudioDecodeError": ("vllm_tasks", "InvalidInputError", "audio_decode"),
    "ImageFetchError": ("vllm_tasks", "InputFetchError", "image_fetch"),
    "AudioFetchError": ("vllm_tasks", "InputFetchError", "audio_fetch"),
    "MatryoshkaNotSupported": ("vllm_tasks", "BadRequestError", "matryoshka_not_supported"),
    "InputTypeNotSupported": ("vllm_tasks", "BadRequestError", "input_type_not_supported"),
    "AudioTooLarge": ("vllm_tasks", "BadRequestError", "audio_too_large"),
    "ModelNotFoundError": ("vllm_tasks", "NotFoundError", "model_not_found"),
    "DimensionsNotApplied": ("vllm_tasks", "UnexpectedResponse", "dimensions_not_applied"),
    "DecodeError": ("vllm_tasks", "UnexpectedResponse", "decode"),
}
"""Top-level names of 0.1 that moved or were folded in 0.2.0: ``old name -> (module, new name, kind)``
(``kind``: the ``.kind`` the old class is now, ``""`` for a move). They resolve, with a
``DeprecationWarning``, until 0.3.0."""


def _moved(name: str) -> Any:
    """Resolve a 0.1 name (see ``_MOVED``) with a ``DeprecationWarning`` naming its new place."""
    try:
        module, new, kind = _MOVED[name]
    except KeyError:
        raise AttributeError(f"module 'vllm_tasks' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), new)
    if kind:
        advice = f"catch {module}.{new} and check `.kind == {kind!r}`"
    else:
        advice = f"import it from {module} (`from {module} import {new}`)"
    warnings.warn(
        f"vllm_tasks.{name} is deprecated and will be removed in 0.3.0: {advice}.",
        DeprecationWarning,
        stacklevel=2,
    )
    return value


if not TYPE_CHECKING:  # type checkers report the old names as missing, pointing users to the new ones
    __getattr__ = _moved
