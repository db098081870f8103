"""vllm_tasks: a typed client for vLLM's embedding, scoring, speech-to-text and OCR endpoints.

Examples:
    >>> import vllm_tasks as vt
    >>> with vt.Client("http://localhost:8000") as client:
    ...     print(client.server_info().version)
"""

from ._async.audio import AsyncTranscriptionStream
from ._async.client import AsyncClient
from ._sync.audio import TranscriptionStream
from ._sync.client import Client
from .decoding import DecodeError, unpackbits
from .errors import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AudioDecodeError,
    AudioFetchError,
    AudioTooLarge,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    ContextLengthExceeded,
    DimensionsNotApplied,
    EndpointNotServed,
    GatewayTimeoutError,
    ImageError,
    ImageFetchError,
    ImageTooLarge,
    InputFetchError,
    InputTypeNotSupported,
    InsufficientDiskSpace,
    InternalServerError,
    InvalidInputError,
    JobError,
    JobMismatch,
    MatryoshkaNotSupported,
    MissingDependency,
    ModelNotFoundError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ReplicaMismatch,
    RequestTooLargeError,
    RowFailed,
    ServerNotReady,
    ServiceUnavailableError,
    StreamError,
    UnexpectedResponse,
    UnprocessableEntityError,
    UnsupportedByServer,
    VLLMTasksError,
)
from .jobs import EmbedFileReport, ReplicaReport, aembed_file, embed_file
from .ocr import NGramProcessorMissingWarning, OCRTruncatedWarning, locate
from .scoring import maxsim
from .transcription import ChunkingOptions
from .transport import FetchLimits
from .types import Advisory, ModelCard, ProbeReport, ServerInfo, TaskProbe, TaskStatus
from .types.audio import Transcription, TranscriptionDelta, TranscriptionSegment, TranscriptionUsage
from .types.common import ClientUsage, Usage
from .types.embeddings import EmbeddingResult, EmbedV2Result
from .types.ocr import OCRBlock, OCRDocument, OCRPage, OCRResult
from .types.scoring import (
    ClassificationResult,
    PoolingResult,
    RerankHit,
    RerankResult,
    ScoreResult,
    ScorerKind,
)
from .version import __version__
from .versions import ServerVersion

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "APITimeoutError",
    "Advisory",
    "AsyncClient",
    "AsyncTranscriptionStream",
    "AudioDecodeError",
    "AudioFetchError",
    "AudioTooLarge",
    "AuthenticationError",
    "BadRequestError",
    "ChunkingOptions",
    "ClassificationResult",
    "Client",
    "ClientUsage",
    "ConflictError",
    "ContextLengthExceeded",
    "DecodeError",
    "DimensionsNotApplied",
    "EmbedFileReport",
    "EmbedV2Result",
    "EmbeddingResult",
    "EndpointNotServed",
    "FetchLimits",
    "GatewayTimeoutError",
    "ImageError",
    "ImageFetchError",
    "ImageTooLarge",
    "InputFetchError",
    "InputTypeNotSupported",
    "InsufficientDiskSpace",
    "InternalServerError",
    "InvalidInputError",
    "JobError",
    "JobMismatch",
    "MatryoshkaNotSupported",
    "MissingDependency",
    "ModelCard",
    "ModelNotFoundError",
    "NGramProcessorMissingWarning",
    "NotFoundError",
    "OCRBlock",
    "OCRDocument",
    "OCRPage",
    "OCRResult",
    "OCRTruncatedWarning",
    "PermissionDeniedError",
    "PoolingResult",
    "ProbeReport",
    "RateLimitError",
    "ReplicaMismatch",
    "ReplicaReport",
    "RequestTooLargeError",
    "RerankHit",
    "RerankResult",
    "RowFailed",
    "ScoreResult",
    "ScorerKind",
    "ServerInfo",
    "ServerNotReady",
    "ServerVersion",
    "ServiceUnavailableError",
    "StreamError",
    "TaskProbe",
    "TaskStatus",
    "Transcription",
    "TranscriptionDelta",
    "TranscriptionSegment",
    "TranscriptionStream",
    "TranscriptionUsage",
    "UnexpectedResponse",
    "UnprocessableEntityError",
    "UnsupportedByServer",
    "Usage",
    "VLLMTasksError",
    "__version__",
    "aembed_file",
    "embed_file",
    "locate",
    "maxsim",
    "unpackbits",
]
