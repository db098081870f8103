"""Results of the scoring family: ``/rerank``, ``/score``, ``/classify`` and ``/pooling``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, PrivateAttr

from .. import defaults, views
from .common import Usage


class ScorerKind(StrEnum):
    """Which kind of model produced a server's scores (learned from the server, see ``docs/scoring.md``).

    Scores of different kinds are not comparable: a cross-encoder gives a sigmoid in 0..1 (or a raw
    logit with ``use_activation=False``), a bi-encoder the cosine of two embeddings in -1..1, and a
    late-interaction (ColBERT-style) model an unbounded MaxSim sum that grows with the query's length.
    """

    CROSS_ENCODER = "cross-encoder"
    """A sequence classifier with one label (active pooling task ``classify``)."""
    BI_ENCODER = "bi-encoder"
    """An embedding model (active task ``embed``): cosine similarity of two embeddings."""
    LATE_INTERACTION = "late-interaction"
    """A multi-vector model (active task ``token_embed``): MaxSim over token embeddings."""
    UNKNOWN = "unknown"
    """The server gave no usable signal (``/pooling`` refused and ``/openapi.json`` disabled)."""


class RerankHit(BaseModel):
    """One ranked document.

    Attributes:
        index: the document's position in the caller's ``documents`` list.
        score: the relevance score (its scale depends on :attr:`RerankResult.scorer`).
        document: the caller's original object (string, dict, image, ...), not the server's echo.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    index: int
    score: float
    document: Any


class RerankResult(BaseModel):
    """What :meth:`Client.rerank` returns: hits sorted by score, highest first.

    Attributes:
        results: the hits, cut to ``top_n`` when it was given.
        model: the served model that scored them.
        scorer: which kind of model produced the scores.
        usage: token counts summed over all requests.
        num_requests: how many ``/rerank`` requests the documents were split into.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    results: list[RerankHit]
    model: str
    scorer: ScorerKind
    usage: Usage = Usage()
    num_requests: int = 1

    @property
    def scores(self) -> npt.NDArray[np.float64]:
        """The scores of :attr:`results`, in ranked order."""
        return np.array([hit.score for hit in self.results], dtype=np.float64)

    @property
    def indices(self) -> list[int]:
        """The documents' positions in the caller's list, in ranked order."""
        return [hit.index for hit in self.results]

    @property
    def documents(self) -> list[Any]:
        """The caller's documents, in ranked order."""
        return [hit.document for hit in self.results]

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # The first hits, not all of them: a 100,000-document ranking has a one-line repr.
        top = ", ".join(
            f"{hit.index} ({hit.score:.4f}) {views.describe(hit.document, 40)!r}" for hit in self.results[:3]
        )
        more = ", …" if len(self.results) > 3 else ""
        yield "results", views.Shown(f"[{views.count(len(self.results), 'hit')}: {top}{more}]")
        yield "model", self.model
        yield "scorer", str(self.scorer)
        yield "usage", self.usage
        yield "num_requests", self.num_requests

    def to_html(
        self, *, max_rows: int = defaults.VIEW_MAX_ROWS, max_chars: int = defaults.VIEW_MAX_CELL_CHARS
    ) -> str:
        """An HTML table for notebooks: rank, index, score and document, best first.

        Documents are escaped and cut to ``max_chars``; only the first ``max_rows`` hits are rendered and
        the rest are counted, so the HTML stays small for any number of documents.

        Examples:
            >>> IPython.display.HTML(result.to_html(max_rows=200))
        """
        return views.rerank_html(self, max_rows=max_rows, max_chars=max_chars)

    def _repr_html_(self) -> str:
        return self.to_html()


class ScoreResult(BaseModel):
    """What :meth:`Client.score` returns.

    Attributes:
        scores: ``ndarray[n]`` in pair order (1:1 gives one score, 1:N and N:N give N).
        model: the served model that scored the pairs.
        scorer: which kind of model produced the scores.
        usage: token counts summed over all requests.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    scores: npt.NDArray[np.float64]
    model: str
    scorer: ScorerKind
    usage: Usage = Usage()
    _inputs: views.Attachment = PrivateAttr(default_factory=views.Attachment)
    """``(text_1 side, text_2 side, pairing)`` of the call, for the notebook view only (by reference)."""

    def keep_inputs(self, firsts: Sequence[Any], seconds: Sequence[Any], mode: str) -> ScoreResult:
        """Keep (by reference, not copied, not pickled) the scored texts for :meth:`to_html`; returns self.

        Kept only when every input is a string: encoded images would hold memory for a view.
        """
        if all(type(item) is str for item in firsts) and all(type(item) is str for item in seconds):
            self._inputs = views.Attachment((firsts, seconds, mode))
        return self

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        values = ", ".join(f"{score:.4g}" for score in np.asarray(self.scores).reshape(-1)[:5].tolist())
        more = ", …" if np.asarray(self.scores).size > 5 else ""
        yield "scores", views.Shown(f"{views.shape_text(self.scores)} [{values}{more}]")
        yield "model", self.model
        yield "scorer", str(self.scorer)
        yield "usage", self.usage

    def to_html(
        self, *, max_rows: int = defaults.VIEW_MAX_ROWS, max_chars: int = defaults.VIEW_MAX_CELL_CHARS
    ) -> str:
        """An HTML table for notebooks: the pairs ranked by score (highest first), with their texts when
        this result was made by ``score()`` from strings (``.scores`` keeps pair order).

        Only the top ``max_rows`` pairs are rendered (found in O(n)); texts are escaped and cut to
        ``max_chars``.

        Examples:
            >>> IPython.display.HTML(result.to_html(max_rows=20))
        """
        inputs = self._inputs.value
        return views.score_html(self, inputs, max_rows=max_rows, max_chars=max_chars)

    def _repr_html_(self) -> str:
        return self.to_html()


class ClassificationResult(BaseModel):
    """What :meth:`Client.classify` returns.

    Attributes:
        labels: the most probable label of each input (``None`` when the model names no labels).
        probs: ``ndarray[n, num_classes]``: softmax/sigmoid outputs (raw logits with
            ``use_activation=False``).
        num_classes: the number of classes.
        model: the served model.
        usage: token counts summed over all requests.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    labels: list[str | None]
    probs: npt.NDArray[np.float64]
    num_classes: int
    model: str
    usage: Usage = Usage()


class PoolingResult(BaseModel):
    """What :meth:`Client.pool` returns.

    Attributes:
        data: one array per input: ``[d]`` for ``embed``, ``[num_labels]`` for ``classify``,
            ``[n_tokens, d]`` for ``token_embed``, ``[n_tokens, labels]`` for ``token_classify``.
        model: the served model.
        usage: token counts summed over all requests.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    data: list[npt.NDArray[np.float32]]
    model: str
    usage: Usage = Usage()
