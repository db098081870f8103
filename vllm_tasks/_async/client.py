"""``AsyncClient``: every task family's methods over the shared core."""

from __future__ import annotations

from .alignment import AsyncAlignmentMethods
from .audio import AsyncAudioMethods
from .base import AsyncClientBase
from .embeddings import AsyncEmbeddingMethods
from .ocr import AsyncOCRMethods
from .pooling import AsyncPoolingMethods
from .realtime import AsyncRealtimeMethods
from .scoring import AsyncScoringMethods
from .tokenizing import AsyncTokenizerMethods
from .verify import AsyncVerifyMethods


class AsyncClient(
    AsyncVerifyMethods,
    AsyncEmbeddingMethods,
    AsyncScoringMethods,
    AsyncPoolingMethods,
    AsyncOCRMethods,
    AsyncRealtimeMethods,
    AsyncAudioMethods,
    AsyncAlignmentMethods,
    AsyncTokenizerMethods,
    AsyncClientBase,
):
    __doc__ = AsyncClientBase.__doc__
