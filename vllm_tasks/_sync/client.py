# GENERATED from vllm_tasks/_async/client.py by scripts/unasync.py: do not edit.
"""``Client``: every task family's methods over the shared core."""

from __future__ import annotations

from .alignment import AlignmentMethods
from .audio import AudioMethods
from .base import ClientBase
from .embeddings import EmbeddingMethods
from .ocr import OCRMethods
from .pooling import PoolingMethods
from .realtime import RealtimeMethods
from .scoring import ScoringMethods
from .tokenizing import TokenizerMethods
from .verify import VerifyMethods


class Client(
    VerifyMethods,
    EmbeddingMethods,
    ScoringMethods,
    PoolingMethods,
    OCRMethods,
    RealtimeMethods,
    AudioMethods,
    AlignmentMethods,
    TokenizerMethods,
    ClientBase,
):
    __doc__ = ClientBase.__doc__
