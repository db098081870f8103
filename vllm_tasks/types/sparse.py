"""Results of ``embed_sparse()``: sparse (SPLADE-style) vectors over a model's vocabulary.

Each vector is two aligned arrays: ``indices`` (token ids, ascending, ``int64``) and ``values`` (weights,
``float32``, all > 0). Conversions give the shapes vector stores take: Qdrant's ``SparseVector``
(``{"indices": [...], "values": [...]}``), Milvus' ``SPARSE_FLOAT_VECTOR`` (``{token_id: weight}``) and a
``scipy.sparse`` CSR matrix (the ``sparse`` extra).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import ConfigDict, Field, model_validator

from ..dependencies import require
from ..errors import InvalidInputError
from .checked import CheckedModel
from .common import Usage

_VOCABULARY_FIX = "the model's vocabulary size: 30522 for a BERT SPLADE, 250002 for BAAI/bge-m3"


def _index_array(value: Any) -> npt.NDArray[np.int64]:
    """``value`` as a flat ``int64`` array of token ids (whole numbers >= 0).

    Raises:
        InvalidInputError: ragged, not numbers, not whole, negative or over ``int64``.
    """
    try:
        raw = np.asarray(value).reshape(-1)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(
            "indices", value, f"is not a flat list of token ids ({error})", "Pass one list of integers."
        ) from None
    if raw.size == 0:
        return np.zeros(0, np.int64)
    whole = raw.dtype.kind in "iu" or (
        raw.dtype.kind == "f" and bool(np.isfinite(raw).all()) and bool((raw == np.floor(raw)).all())
    )
    if not whole or raw.min() < 0 or raw.max() > np.iinfo(np.int64).max:
        raise InvalidInputError(
            "indices",
            value,
            "must be token ids: whole numbers from 0 to 2**63-1",
            "Pass the ids as integers.",
        )
    return raw.astype(np.int64)


def _weight_array(value: Any) -> npt.NDArray[np.float32]:
    """``value`` as a flat ``float32`` array of finite weights.

    Raises:
        InvalidInputError: ragged, not numbers, or NaN/infinite (also once cast to float32).
    """
    try:
        raw = np.asarray(value).reshape(-1)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(
            "values", value, f"is not a flat list of weights ({error})", "Pass one list of floats."
        ) from None
    if raw.size and raw.dtype.kind not in "iuf":
        raise InvalidInputError("values", value, "must be numbers", "Pass float weights.")
    with np.errstate(over="ignore"):  # an overflow is a non-finite weight, refused below
        weights = raw.astype(np.float32)
    if not np.isfinite(weights).all():
        raise InvalidInputError(
            "values", value, "holds NaN or an infinity (in float32)", "Pass finite weights, one per index."
        )
    return weights


class SparseVector(CheckedModel):
    """One input's sparse vector: the non-zero weights and the token ids they belong to.

    Attributes:
        indices: token ids, ascending, ``int64`` (the column of each weight in a vocabulary-wide vector).
        values: the weights, ``float32``, one per index.
        tokens: the token string of each index, when the call asked for them (``return_tokens=True``).

    Examples:
        >>> vector = SparseVector(indices=np.array([7592, 2088]), values=np.array([0.5, 1.25]))
        >>> vector.to_qdrant()
        {'indices': [2088, 7592], 'values': [1.25, 0.5]}
        >>> vector.to_milvus()
        {2088: 1.25, 7592: 0.5}
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    indices: npt.NDArray[np.int64]
    values: npt.NDArray[np.float32]
    tokens: tuple[str, ...] | None = None

    @model_validator(mode="before")
    @classmethod
    def _as_arrays(cls, data: Any) -> Any:
        """Coerce to 1-D ``int64``/``float32`` arrays sorted by index; refuse ids that are not whole numbers
        >= 0, weights that are not finite, unequal lengths or repeats (:class:`InvalidInputError`)."""
        if not isinstance(data, dict):
            return data
        indices, values = _index_array(data.get("indices", ())), _weight_array(data.get("values", ()))
        if indices.shape != values.shape:
            raise InvalidInputError(
                "values",
                f"{values.size} weights",
                f"must be one per index ({indices.size} indices)",
                "Pass indices and values of the same length.",
            )
        order = np.argsort(indices, kind="stable")
        indices, values = indices[order], values[order]
        if indices.size > 1 and bool((np.diff(indices) == 0).any()):
            repeated = int(indices[1:][np.diff(indices) == 0][0])
            raise InvalidInputError("indices", repeated, "must not repeat", "Pass each token id once.")
        tokens = data.get("tokens")
        if tokens is not None:
            if isinstance(tokens, str) or not isinstance(tokens, Iterable):
                raise InvalidInputError("tokens", tokens, "must be a list of strings", "Pass one per index.")
            tokens = tuple(tokens)
            if len(tokens) != indices.size:
                raise InvalidInputError(
                    "tokens",
                    f"{len(tokens)} strings",
                    f"must be one per index ({indices.size} indices)",
                    "Pass tokens of the same length as indices.",
                )
            tokens = tuple(tokens[i] for i in order)
        return {**data, "indices": indices, "values": values, "tokens": tokens}

    def __len__(self) -> int:
        return int(self.indices.size)

    def to_qdrant(self) -> dict[str, list[Any]]:
        """Qdrant's sparse vector shape: ``{"indices": [int, ...], "values": [float, ...]}``
        (``models.SparseVector(**vector.to_qdrant())``)."""
        return {"indices": self.indices.tolist(), "values": self.values.tolist()}

    def to_milvus(self) -> dict[int, float]:
        """Milvus' ``SPARSE_FLOAT_VECTOR`` row: ``{token_id: weight}``."""
        return dict(zip(self.indices.tolist(), self.values.tolist(), strict=True))

    def to_dict(self) -> dict[str, float]:
        """``{token_string: weight}`` (FlagEmbedding's ``lexical_weights`` shape), in index order.

        Raises:
            InvalidInputError: the call did not ask for token strings (``return_tokens=True``).
        """
        if self.tokens is None:
            raise InvalidInputError(
                "tokens",
                None,
                "this vector has no token strings",
                "Call embed_sparse(..., return_tokens=True).",
            )
        return dict(zip(self.tokens, self.values.tolist(), strict=True))

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        yield "nnz", len(self)
        top = np.argsort(-self.values, kind="stable")[:3]
        yield (
            "top",
            [
                (
                    self.tokens[i] if self.tokens is not None else int(self.indices[i]),
                    round(float(self.values[i]), 4),
                )
                for i in top
            ],
        )


class SparseEmbeddingResult(CheckedModel):
    """Sparse vectors of every input, in input order.

    Attributes:
        vectors: one :class:`SparseVector` per input.
        dimension: the vocabulary width the vectors live in (SPLADE: the server's row width); ``None`` for
            BGE-M3's lexical weights, whose answer does not state it (pass ``dimension=`` to
            :meth:`to_scipy` / :meth:`to_dense`, e.g. 250002 for BAAI/bge-m3).
        model: the served model name that answered.
        usage: prompt tokens summed over all batches.

    Examples:
        >>> result = client.embed_sparse(["the cat sat on the mat"])
        >>> result[0].to_qdrant()["indices"][:3]
        [1010, 1996, 2006]
        >>> result.to_scipy().shape
        (1, 30522)
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    vectors: list[SparseVector]
    dimension: int | None = Field(default=None, ge=0)
    model: str
    usage: Usage = Usage()

    def __len__(self) -> int:
        return len(self.vectors)

    def __getitem__(self, index: int) -> SparseVector:
        return self.vectors[index]

    def __iter__(self) -> Iterator[SparseVector]:  # type: ignore[override]
        return iter(self.vectors)

    @property
    def vector(self) -> SparseVector:
        """The single vector, for a call with one input.

        Raises:
            InvalidInputError: when the call had several inputs (use ``vectors``).
        """
        if len(self.vectors) != 1:
            count = len(self.vectors)
            raise InvalidInputError(
                "vector", count, f"this result holds {count} vectors, not one", "Use .vectors."
            )
        return self.vectors[0]

    @property
    def indices(self) -> list[npt.NDArray[np.int64]]:
        """Each input's token ids (``int64`` arrays)."""
        return [vector.indices for vector in self.vectors]

    @property
    def values(self) -> list[npt.NDArray[np.float32]]:
        """Each input's weights (``float32`` arrays)."""
        return [vector.values for vector in self.vectors]

    def to_qdrant(self) -> list[dict[str, list[Any]]]:
        """One ``{"indices": [...], "values": [...]}`` per input (Qdrant's sparse vector shape)."""
        return [vector.to_qdrant() for vector in self.vectors]

    def to_milvus(self) -> list[dict[int, float]]:
        """One ``{token_id: weight}`` per input (Milvus' ``SPARSE_FLOAT_VECTOR`` rows)."""
        return [vector.to_milvus() for vector in self.vectors]

    def to_dense(self, dimension: int | None = None) -> npt.NDArray[np.float32]:
        """The ``(n, dimension)`` float32 matrix (memory: ``n * dimension * 4`` bytes); for SPLADE, the rows
        the server sent.

        Args:
            dimension: the width (default: :attr:`dimension`, else the largest index + 1).

        Raises:
            InvalidInputError: ``dimension`` is not an integer >= 1, or not above the largest index.
        """
        return _scatter(self.vectors, self._width(dimension))

    def to_scipy(self, dimension: int | None = None) -> Any:
        """A ``scipy.sparse.csr_matrix`` of shape ``(n, dimension)``, float32.

        Args:
            dimension: the width (default: :attr:`dimension`, else the largest index + 1).

        Raises:
            InvalidInputError: ``dimension`` is not an integer >= 1, or not above the largest index (scipy
                would build a matrix that loses those weights and corrupts memory in products).
            MissingDependency: scipy is not installed (``pip install "vllm-tasks[sparse]"``).
        """
        width = self._width(dimension)
        sparse = require("scipy.sparse", "sparse", "SparseEmbeddingResult.to_scipy()")
        indptr = np.zeros(len(self.vectors) + 1, dtype=np.int64)
        np.cumsum([len(vector) for vector in self.vectors], out=indptr[1:])
        indices = np.concatenate([v.indices for v in self.vectors]) if self.vectors else np.zeros(0, np.int64)
        values = np.concatenate([v.values for v in self.vectors]) if self.vectors else np.zeros(0, np.float32)
        return sparse.csr_matrix((values, indices, indptr), shape=(len(self.vectors), width))

    def _width(self, dimension: int | None) -> int:
        """``dimension``, else :attr:`dimension`, checked against the indices; else the largest index + 1."""
        width = (self.dimension or None) if dimension is None else dimension
        if width is None:
            return _largest_index(self.vectors) + 1
        return _checked_dimension(self.vectors, width)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        yield "vectors", len(self.vectors)
        yield "dimension", self.dimension
        yield "nnz", sum(len(vector) for vector in self.vectors)
        yield "model", self.model
        yield "usage", self.usage


def to_dense(vectors: Sequence[SparseVector], dimension: int) -> npt.NDArray[np.float32]:
    """Scatter sparse vectors back into an ``(n, dimension)`` float32 matrix.

    Raises:
        InvalidInputError: ``dimension`` is not an integer >= 1, or not above the largest index.

    Examples:
        >>> to_dense([SparseVector(indices=[1], values=[2.0])], 3)
        array([[0., 2., 0.]], dtype=float32)
    """
    return _scatter(vectors, _checked_dimension(vectors, dimension))


def _largest_index(vectors: Sequence[SparseVector]) -> int:
    """The largest token id of ``vectors`` (-1 when they hold none)."""
    return max((int(vector.indices[-1]) for vector in vectors if len(vector)), default=-1)


def _checked_dimension(vectors: Sequence[SparseVector], dimension: object) -> int:
    """``dimension`` as an ``int``, when it is an integer >= 1 above every index of ``vectors``.

    Raises:
        InvalidInputError: naming the dimension, the largest index and the width to pass.
    """
    if isinstance(dimension, bool) or not isinstance(dimension, int | np.integer) or dimension < 1:
        raise InvalidInputError("dimension", dimension, "must be an integer >= 1", f"Pass {_VOCABULARY_FIX}.")
    largest = _largest_index(vectors)
    if largest >= dimension:
        raise InvalidInputError(
            "dimension",
            dimension,
            f"is not above the largest index, {largest}",
            f"Pass dimension={largest + 1} or more: {_VOCABULARY_FIX}.",
        )
    return int(dimension)


def _scatter(vectors: Sequence[SparseVector], dimension: int) -> npt.NDArray[np.float32]:
    dense = np.zeros((len(vectors), dimension), dtype=np.float32)
    for row, vector in enumerate(vectors):
        dense[row, vector.indices] = vector.values
    return dense
