"""Results of the scoring family: ``/rerank``, ``/score``, ``/classify`` and ``/pooling``."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, PrivateAttr

from .. import defaults
from ..errors import InvalidInputError
from ..views import Attachment, Shown, card, count, describe, esc, note, shape_text, table
from .common import Usage


class ScorerKind(StrEnum):
    """Which kind of model produced a server's scores (learned from the server, see ``docs/scoring.md``).

    Scores of different kinds are not comparable: a cross-encoder gives a sigmoid in 0..1 (or a raw
    logit with ``use_activation=False``), a bi-encoder the cosine of two embeddings in -1..1, and a
    late-interaction (ColBERT-style) model an unbounded MaxSim sum that grows with the query's length, and a
    listwise reranker the cosine of projected embeddings that depends on every document in the list.
    """

    CROSS_ENCODER = "cross-encoder"
    """A sequence classifier with one label (active pooling task ``classify``)."""
    BI_ENCODER = "bi-encoder"
    """An embedding model (active task ``embed``): cosine similarity of two embeddings."""
    LATE_INTERACTION = "late-interaction"
    """A multi-vector model (active task ``token_embed``): MaxSim over token embeddings."""
    LISTWISE = "listwise"
    """A listwise reranker (jina-reranker-v3, vLLM's ``JinaForRanking``): the query and the whole list are
    read as one prompt, so a document's score depends on the others; the SDK never splits such a list."""
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
            f"{hit.index} ({hit.score:.4f}) {describe(hit.document, 40)!r}" for hit in self.results[:3]
        )
        more = ", …" if len(self.results) > 3 else ""
        yield "results", Shown(f"[{count(len(self.results), 'hit')}: {top}{more}]")
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
        return rerank_html(self, max_rows=max_rows, max_chars=max_chars)

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
    _inputs: Attachment = PrivateAttr(default_factory=Attachment)
    """``(text_1 side, text_2 side, pairing)`` of the call, for the notebook view only (by reference)."""

    def keep_inputs(self, firsts: Sequence[Any], seconds: Sequence[Any], mode: str) -> ScoreResult:
        """Keep (by reference, not copied, not pickled) the scored texts for :meth:`to_html`; returns self.

        Kept only when every input is a string: encoded images would hold memory for a view.

        Args:
            firsts: the ``text_1`` side (one input, broadcast, or one per pair).
            seconds: the ``text_2`` side, one per score.
            mode: how they paired: ``"1:1"``, ``"1:N"`` or ``"N:N"``.

        Raises:
            InvalidInputError: sides or a mode that do not pair into this result's scores.
        """
        pairs, width = np.asarray(self.scores).size, len(seconds)
        expected = "1:1" if len(firsts) == width == 1 else "1:N" if len(firsts) == 1 else "N:N"
        if width != pairs or len(firsts) not in (1, width) or mode != expected:
            raise InvalidInputError(
                "inputs",
                f"{len(firsts)} x {width} ({mode})",
                f"do not pair into the {pairs} scores of this result",
                "Pass the sides score() was called with, and their mode (1:1, 1:N or N:N).",
            )
        if all(type(item) is str for item in firsts) and all(type(item) is str for item in seconds):
            self._inputs = Attachment((firsts, seconds, mode))
        return self

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        values = ", ".join(f"{score:.4g}" for score in np.asarray(self.scores).reshape(-1)[:5].tolist())
        more = ", …" if np.asarray(self.scores).size > 5 else ""
        yield "scores", Shown(f"{shape_text(self.scores)} [{values}{more}]")
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
        return score_html(self, inputs, max_rows=max_rows, max_chars=max_chars)

    def _repr_html_(self) -> str:
        return self.to_html()


class ClassLabel(BaseModel):
    """One class chosen for one input by :meth:`Client.classify`.

    Attributes:
        index: the class's position in ``probs``' row.
        label: its name (``label_names``, else the server's name for it, else ``None``).
        score: its value in ``probs`` (a probability, or a raw logit with ``use_activation=False``).
    """

    model_config = ConfigDict(frozen=True)

    index: int
    label: str | None
    score: float


class ClassificationResult(BaseModel):
    """What :meth:`Client.classify` returns.

    Attributes:
        labels: per input, a single-label model's most probable label (``None`` when the model names no
            labels); a list of names instead for a multi-label model (every label whose probability is over
            the threshold, most probable first, at most ``top_k``) and wherever ``top_k`` is given (the
            ``top_k`` most probable).
        predictions: the same choice per input, always a list of :class:`ClassLabel` (index, name, score).
        probs: ``ndarray[n, num_classes]``: softmax/sigmoid outputs (raw logits with
            ``use_activation=False``).
        num_classes: the number of classes.
        multi_label: whether the labels were chosen as a multi-label model's (see ``classify``'s
            ``multi_label``).
        model: the served model.
        usage: token counts summed over all requests.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    labels: list[str | None] | list[list[str | None]]
    probs: npt.NDArray[np.float64]
    num_classes: int
    predictions: list[list[ClassLabel]] = []
    multi_label: bool = False
    model: str
    usage: Usage = Usage()


class TokenEntity(BaseModel):
    """One entity (or, with ``aggregation=None``, one token) found by :meth:`Client.token_classify`.

    Attributes:
        label: the entity type (``PER``; with ``aggregation=None`` the token's own label, ``B-PER``).
        score: its probability (a group's: the mean of its tokens' or words').
        start: where it starts in the caller's text (a character index).
        end: where it ends (exclusive): ``text == caller_text[start:end]``.
        text: the caller's text of it, as written (not the tokenizer's lower-cased pieces).
        index: with ``aggregation=None``, the token's position in the model's input (special tokens
            counted); else ``None``.
    """

    model_config = ConfigDict(frozen=True)

    label: str
    score: float
    start: int
    end: int
    text: str
    index: int | None = None


class TokenClassificationResult(BaseModel):
    """What :meth:`Client.token_classify` returns.

    Attributes:
        entities: per input, its entities in text order.
        aggregation: how token labels became entities (``None``: one entity per token).
        model: the served model.
        usage: token counts summed over all requests.
    """

    model_config = ConfigDict(frozen=True)

    entities: list[list[TokenEntity]]
    aggregation: str | None
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

    def normalized(self) -> PoolingResult:
        """This result with every vector L2-normalised: each token's row of a per-token matrix, or the
        whole vector (zero vectors stay zero). For per-token output the server did not normalise
        (``use_activation=False``, or a model served that way).

        Raises:
            InvalidInputError: an array that is not numbers, or holds NaN or an infinity.

        Examples:
            >>> result = client.pool(["a cat"], use_activation=False).normalized()
            >>> float(np.linalg.norm(result.data[0][0]))
            1.0
        """
        return self.model_copy(
            update={"data": [_unit_rows(_finite(i, array)) for i, array in enumerate(self.data)]}
        )

    def mean(self, *, normalize: bool = True) -> npt.NDArray[np.float32]:
        """One vector per input: the mean of its per-token vectors (Jina v4's single-vector mode from its
        multi-vector output), L2-normalised unless ``normalize=False`` (a zero mean stays zero); vector
        outputs are stacked as they are (normalised if asked).

        Returns:
            ``ndarray[n_inputs, d]``.

        Raises:
            InvalidInputError: an array that is not a ``[d]`` vector or a ``[n_tokens, d]`` matrix with
                ``n_tokens, d > 0`` (a per-token matrix of no tokens has no mean), arrays of different
                widths, or NaN or an infinity.

        Examples:
            >>> client.pool(["a cat", "a dog"]).mean().shape
            (2, 2048)
        """
        rows = [_mean_row(i, array) for i, array in enumerate(self.data)]
        widths = sorted({row.shape[0] for row in rows})
        if len(widths) > 1:
            raise InvalidInputError(
                "data", f"widths {widths[:5]}", "cannot be stacked into one matrix", "Average one width."
            )
        stacked = np.stack(rows).astype(np.float32) if rows else np.zeros((0, 0), np.float32)
        return _unit_rows(stacked) if normalize else stacked


def _finite(index: int, array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``array`` (``data[index]``), after checking that it holds only finite numbers.

    Raises:
        InvalidInputError: it holds something else.
    """
    values = np.asarray(array)
    if values.dtype.kind not in "iuf" or not np.isfinite(values).all():
        raise InvalidInputError(
            f"data[{index}]", f"array of {values.dtype}", "must hold finite numbers", "Pool again."
        )
    return values


def _mean_row(index: int, array: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """The mean of ``data[index]``'s per-token rows, or the vector itself (float64).

    Raises:
        InvalidInputError: not a non-empty ``[d]`` or ``[n_tokens, d]`` array of finite numbers.
    """
    values = _finite(index, array)
    if values.ndim not in (1, 2) or 0 in values.shape:
        raise InvalidInputError(
            f"data[{index}]",
            f"array of shape {values.shape}",
            "has no mean vector: not a [d] vector or a [n_tokens, d] matrix with tokens",
            "Leave out inputs whose per-token output is empty.",
        )
    wide = values.astype(np.float64)
    return wide.mean(axis=0) if wide.ndim == 2 else wide


def _unit_rows(array: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """``array`` with each row (or the vector itself) divided by its L2 norm; zero rows stay zero."""
    wide = array.astype(np.float64)  # float32 squares of tiny values underflow to a norm that is not theirs
    norms = np.linalg.norm(wide, axis=-1, keepdims=True)
    out: npt.NDArray[np.float32] = (wide / np.where(norms == 0, 1.0, norms)).astype(np.float32)
    return out


# --------------------------------------------------------------------------------------------------
# Notebook view
# --------------------------------------------------------------------------------------------------


def bar(value: float, low: float, high: float) -> str:
    """A thin horizontal bar for a score between ``low`` and ``high``."""
    span = high - low
    share = 0.0 if span <= 0 or not math.isfinite(value) else min(1.0, max(0.0, (value - low) / span))
    return (
        '<div style="width:80px;height:6px;background:rgba(128,128,128,.2);border-radius:3px">'
        f'<div style="width:{share * 100:.0f}%;height:6px;background:#4c8bf5;border-radius:3px"></div></div>'
    )


def _score_range(scores: Iterable[float]) -> tuple[float, float]:
    values = [s for s in scores if math.isfinite(s)]
    if not values:
        return 0.0, 1.0
    return min(0.0, *values), max(values)


# --------------------------------------------------------------------------------------------------


def _scoring_facts(result: RerankResult | ScoreResult) -> list[tuple[str, object]]:
    return [
        ("model", result.model or "?"),
        ("scorer", str(result.scorer)),
        ("prompt tokens", f"{result.usage.prompt_tokens:,}"),
    ]


def rerank_html(
    result: RerankResult,
    *,
    max_rows: int = defaults.VIEW_MAX_ROWS,
    max_chars: int = defaults.VIEW_MAX_CELL_CHARS,
) -> str:
    """The view of a :class:`~vllm_tasks.RerankResult`: the ranked documents, best first."""
    hits = result.results
    low, high = _score_range(hit.score for hit in hits)
    rows = [
        [
            str(rank),
            str(hit.index),
            f"{hit.score:.4f}",
            bar(hit.score, low, high),
            esc(describe(hit.document, max_chars)),
        ]
        for rank, hit in enumerate(hits[: max(0, max_rows)], start=1)
    ]
    columns = [("rank", True), ("index", True), ("score", True), ("", False), ("document", False)]
    facts = [*_scoring_facts(result), ("requests", result.num_requests)]
    title = f"RerankResult — {count(len(hits), 'hit')}"
    return card(title, facts, table(columns, rows, total=len(hits), noun="hit"))


def top_indices(scores: np.ndarray[Any, Any], k: int) -> list[int]:
    """Positions of the ``k`` highest scores, highest first (ties: lower position first); O(n) for large n.

    Examples:
        >>> top_indices(np.array([0.1, 0.9, 0.5]), 2)
        [1, 2]
    """
    n = scores.shape[0]
    if k <= 0 or n == 0:
        return []
    candidates = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
    order = sorted(candidates.tolist(), key=lambda i: (-float(scores[i]), i))
    return order[:k]


def score_html(
    result: ScoreResult,
    inputs: tuple[Sequence[Any], Sequence[Any], str] | None,
    *,
    max_rows: int = defaults.VIEW_MAX_ROWS,
    max_chars: int = defaults.VIEW_MAX_CELL_CHARS,
) -> str:
    """The view of a :class:`~vllm_tasks.ScoreResult`: pairs ranked by score, with their texts when the
    result kept them (``inputs`` = ``(text_1 side, text_2 side, mode)``)."""
    scores = np.asarray(result.scores, dtype=np.float64).reshape(-1)
    order = top_indices(scores, max_rows)
    low, high = _score_range(scores[order].tolist())
    firsts, seconds, mode = inputs if inputs is not None else ((), (), "")
    zipped = mode == "N:N"
    columns = [("rank", True), ("pair", True), ("score", True), ("", False)]
    if seconds:
        columns += [("text_1", False)] if zipped else []
        columns.append(("text_2", False))
    rows = []
    for rank, i in enumerate(order, start=1):
        cells = [str(rank), str(i), f"{scores[i]:.4f}", bar(float(scores[i]), low, high)]
        if seconds and i < len(seconds):
            if zipped:
                cells.append(esc(describe(firsts[i], max_chars)))
            cells.append(esc(describe(seconds[i], max_chars)))
        rows.append(cells)
    body = []
    if firsts and not zipped:
        body.append(note("text_1: " + describe(firsts[0], max_chars)))
    if not seconds:
        body.append(note("texts not kept by this result (made elsewhere, unpickled, or not all strings)"))
    body.append(table(columns, rows, total=scores.shape[0], noun="pair"))
    title = f"ScoreResult — {count(scores.shape[0], 'score')}, ranked"
    return card(title, _scoring_facts(result), *body)
