"""The result types the client returns, one module per endpoint family; import them from here.

Examples:
    >>> from vllm_tasks.types import EmbeddingResult, RerankResult, Transcription
"""

from ..versions import ServerVersion
from .audio import (
    Alignment,
    SpeakerSegment,
    Transcription,
    TranscriptionDelta,
    TranscriptionSegment,
    TranscriptionUsage,
    TranscriptionWord,
)
from .common import ClientUsage, Usage
from .embeddings import EmbeddingChunks, EmbeddingResult, EmbedV2Result
from .ocr import OCRBlock, OCRDocument, OCRPage, OCRResult
from .reward import RewardResult
from .scoring import (
    ClassificationResult,
    ClassLabel,
    PoolingResult,
    RerankHit,
    RerankResult,
    ScoreResult,
    ScorerKind,
    TokenClassificationResult,
    TokenEntity,
)
from .server import Advisory, ModelCard, ProbeReport, ServerInfo, TaskProbe, TaskStatus
from .sparse import SparseEmbeddingResult, SparseVector
from .tokens import TokenizeResult

__all__ = [
    "Advisory",
    "Alignment",
    "ClassLabel",
    "ClassificationResult",
    "ClientUsage",
    "EmbedV2Result",
    "EmbeddingChunks",
    "EmbeddingResult",
    "ModelCard",
    "OCRBlock",
    "OCRDocument",
    "OCRPage",
    "OCRResult",
    "PoolingResult",
    "ProbeReport",
    "RerankHit",
    "RerankResult",
    "RewardResult",
    "ScoreResult",
    "ScorerKind",
    "ServerInfo",
    "ServerVersion",
    "SparseEmbeddingResult",
    "SparseVector",
    "SpeakerSegment",
    "TaskProbe",
    "TaskStatus",
    "TokenClassificationResult",
    "TokenEntity",
    "TokenizeResult",
    "Transcription",
    "TranscriptionDelta",
    "TranscriptionSegment",
    "TranscriptionUsage",
    "TranscriptionWord",
    "Usage",
]
