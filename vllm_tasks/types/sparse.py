"""Results of ``embed_sparse()``: sparse (SPLADE-style) vectors over a model's vocabulary.

Each vector is two aligned arrays: ``indices`` (token ids, ascending, ``int64``) and ``values`` (weights,
``float32``, all > 0). Conversions give the shapes vector stores take: Qdrant's ``SparseVector``
(``{"indices": [...], "values": [...]}``), Milvus' ``SPARSE_FLOAT_VECTOR`` (``{token_id: weight}``) and a
``scipy.sparse`` CSR matrix (the ``sparse`` extra).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, model_validator

from ..dependencies import require
from .common import Usage


class SparseVector(BaseModel):
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
        """Coerce to 1-D ``int64``/``float32`` arrays sorted by index; refuse unequal lengths or repeats."""
        if not isinstance(data, dict):
            return data
        indices = np.asarray(data.get("indices", ()), dtype=np.int64).reshape(-1)
        values = np.asarray(data.get("values", ()), dtype=np.float32).reshape(-1)
        if indices.shape != values.shape:
            raise ValueError(f"indices ({indices.size}) and values ({values.size}) must have the same length")
        order = np.argsort(indices, kind="stable")
        indices, values = indices[order], values[order]
        if indices.size > 1 and bool((np.diff(indices) == 0).any()):
            raise ValueError("indices must not repeat")
        tokens = data.get("tokens")
        if tokens is not None:
            tokens = tuple(tokens)
            if len(tokens) != indices.size:
                raise ValueError(
                    f"tokens ({len(tokens)}) and indices ({indices.size}) must have the same length"
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
            ValueError: the call did not ask for token strings (``return_tokens=True``).
        """
        if self.tokens is None:
            raise ValueError("this vector has no token strings: call embed_sparse(..., return_tokens=True)")
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


class SparseEmbeddingResult(BaseModel):
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
    dimension: int | None = None
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
            ValueError: when the call had several inputs (use ``vectors``).
        """
        if len(self.vectors) != 1:
            raise ValueError(f"this result holds {len(self.vectors)} vectors; use .vectors")
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
        """
        return to_dense(self.vectors, self._width(dimension))

    def to_scipy(self, dimension: int | None = None) -> Any:
        """A ``scipy.sparse.csr_matrix`` of shape ``(n, dimension)``, float32.

        Args:
            dimension: the width (default: :attr:`dimension`, else the largest index + 1).

        Raises:
            MissingDependency: scipy is not installed (``pip install "vllm-tasks[sparse]"``).
        """
        sparse = require("scipy.sparse", "sparse", "SparseEmbeddingResult.to_scipy()")
        width = self._width(dimension)
        indptr = np.zeros(len(self.vectors) + 1, dtype=np.int64)
        np.cumsum([len(vector) for vector in self.vectors], out=indptr[1:])
        indices = np.concatenate([v.indices for v in self.vectors]) if self.vectors else np.zeros(0, np.int64)
        values = np.concatenate([v.values for v in self.vectors]) if self.vectors else np.zeros(0, np.float32)
        return sparse.csr_matrix((values, indices, indptr), shape=(len(self.vectors), width))

    def _width(self, dimension: int | None) -> int:
        if dimension is not None:
            return dimension
        if self.dimension is not None:
            return self.dimension
        return max((int(v.indices[-1]) + 1 for v in self.vectors if len(v)), default=0)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        yield "vectors", len(self.vectors)
        yield "dimension", self.dimension
        yield "nnz", sum(len(vector) for vector in self.vectors)
        yield "model", self.model
        yield "usage", self.usage


def to_dense(vectors: Sequence[SparseVector], dimension: int) -> npt.NDArray[np.float32]:
    """Scatter sparse vectors back into an ``(n, dimension)`` float32 matrix.

    Examples:
        >>> to_dense([SparseVector(indices=[1], values=[2.0])], 3)
        array([[0., 2., 0.]], dtype=float32)
    """
    dense = np.zeros((len(vectors), dimension), dtype=np.float32)
    for row, vector in enumerate(vectors):
        dense[row, vector.indices] = vector.values
    return dense
