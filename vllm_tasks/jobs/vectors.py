"""What an ``embed_file`` job's rows are: dense vectors (``embed``), sparse ones (``embed_sparse``) or
per-token matrices (``pool`` on a ``token_embed`` model: ColBERT, BGE-M3's multi-vector head, Jina v4).

:data:`DENSE`, :data:`SPARSE` and :data:`MULTI_VECTOR` tell the job the rest: which client method a batch
(and the probe text) goes to, what the fingerprint records of the probe (a list of floats, or
``{token id: weight}``, both compared by :func:`~vllm_tasks.jobs.state.cosine`; a matrix is recorded by
its normalised mean), how a chunk holds its rows until it is written (a ``rows x width`` matrix, each
row's token ids and weights -- never a vocabulary-wide matrix -- or each row's own matrix), and the
Parquet columns they go to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ..calls import CallOptions
from ..errors import UnsupportedByServer
from ..types.embeddings import EmbeddingResult
from ..types.scoring import PoolingResult
from ..types.sparse import SparseEmbeddingResult, SparseVector
from .replicas import JobClient

Result = EmbeddingResult | SparseEmbeddingResult | PoolingResult
SPARSE_ROW_BYTES = 256 * 12
"""A sparse row's expected Parquet bytes for the free-space check (256 weights of int64 + float32; the
real count depends on the texts, and a disk that fills up later is still a resumable error)."""
MULTI_VECTOR_ROW_TOKENS = 256
"""The tokens a row is expected to have, for a per-token row's free-space estimate (as above)."""


class Rows(Protocol):
    """A chunk's rows while it is embedded, in row order."""

    @property
    def nbytes(self) -> int:
        """The bytes the rows hold."""

    def put(self, start: int, result: Any) -> None:
        """Store the vectors of a batch's answer at rows ``start`` onwards."""

    def arrow(self, pa: Any, failed: npt.NDArray[np.bool_]) -> list[Any]:
        """The columns of the rows in a part file (null where ``failed``), in :meth:`Vectors.fields`
        order; a ``fixed_size_list`` field is a variable ``list`` of the same values there (see
        :class:`~vllm_tasks.jobs.outputs.ParquetSink`)."""


class Vectors(Protocol):
    """Dense or sparse: how a job asks for its rows, keeps them, and compares probe vectors."""

    name: str
    columns: tuple[str, ...]

    async def embed(
        self,
        client: JobClient,
        texts: Sequence[str] | None,
        images: Sequence[Any] | None,
        params: Any,
        call: CallOptions,
    ) -> Result:
        """The vectors of ``texts`` (or ``images``) from ``client`` in one request, with the job's vector
        options ``params`` and ``call``."""

    def probe(self, result: Result) -> list[float] | dict[str, float]:
        """The fingerprint's record of the probe text's vector (JSON: sparse ids become strings)."""

    def width(self, result: Result) -> int:
        """The width of the vectors (sparse: the vocabulary when the answer states it, else 0)."""

    def mismatch(self, result: Result, count: int, width: int) -> str | None:
        """What in a batch's answer does not fit the job (``count`` rows of ``width``, as
        :meth:`width` found it at the start), else ``None``."""

    def rows(self, count: int, width: int) -> Rows:
        """Empty storage for a chunk of ``count`` rows."""

    def fields(self, pa: Any, width: int) -> list[Any]:
        """The Parquet fields of the vectors."""

    def row_bytes(self, width: int) -> int:
        """A row's expected bytes in the output, for the free-space check."""


@dataclass
class DenseRows:
    """A chunk's dense vectors: a float32 matrix, NaN until embedded."""

    matrix: npt.NDArray[np.float32]

    @property
    def nbytes(self) -> int:
        """The matrix's bytes."""
        return int(self.matrix.nbytes)

    def put(self, start: int, result: Any) -> None:
        """Copy ``result.vectors`` into rows ``start`` onwards."""
        self.matrix[start : start + len(result.vectors)] = result.vectors

    def arrow(self, pa: Any, failed: npt.NDArray[np.bool_]) -> list[Any]:
        """One ``list<float32>`` column: each row's ``width`` values, a refused row null and empty."""
        held = np.ascontiguousarray(self.matrix[~failed], dtype=np.float32)
        offsets = np.zeros(len(failed) + 1, np.int32)
        np.cumsum(np.where(failed, 0, self.matrix.shape[1]), out=offsets[1:])
        return [
            pa.ListArray.from_arrays(pa.array(offsets), pa.array(held.reshape(-1)), mask=pa.array(failed))
        ]


@dataclass
class SparseRows:
    """A chunk's sparse vectors, one :class:`SparseVector` per row (``None`` until embedded)."""

    vectors: list[SparseVector | None]

    @property
    def nbytes(self) -> int:
        """The bytes of the token ids and weights held."""
        return sum(v.indices.nbytes + v.values.nbytes for v in self.vectors if v is not None)

    def put(self, start: int, result: Any) -> None:
        """Keep ``result.vectors`` as rows ``start`` onwards."""
        self.vectors[start : start + len(result.vectors)] = result.vectors

    def arrow(self, pa: Any, failed: npt.NDArray[np.bool_]) -> list[Any]:
        """A ``list<int64>`` column of token ids and a ``list<float32>`` column of weights."""
        held = [v for v in self.vectors if v is not None]
        offsets = np.zeros(len(self.vectors) + 1, np.int32)
        np.cumsum([0 if v is None else len(v) for v in self.vectors], out=offsets[1:])
        indices = np.concatenate([np.zeros(0, np.int64), *(v.indices for v in held)])
        values = np.concatenate([np.zeros(0, np.float32), *(v.values for v in held)])
        mask = pa.array(failed)
        return [
            pa.ListArray.from_arrays(pa.array(offsets), pa.array(part), mask=mask)
            for part in (indices, values)
        ]


@dataclass
class MatrixRows:
    """A chunk's per-token matrices, one ``[n_tokens, width]`` float32 array per row (``None`` until
    embedded), all of the job's ``width``."""

    matrices: list[npt.NDArray[np.float32] | None]
    width: int

    @property
    def nbytes(self) -> int:
        """The bytes of the matrices held."""
        return sum(m.nbytes for m in self.matrices if m is not None)

    def put(self, start: int, result: Any) -> None:
        """Keep ``result.data`` (one matrix per text) as rows ``start`` onwards."""
        self.matrices[start : start + len(result.data)] = result.data

    def arrow(self, pa: Any, failed: npt.NDArray[np.bool_]) -> list[Any]:
        """One ``list<fixed_size_list<float32>[width]>`` column: a row's token vectors in token order."""
        held = [m for m in self.matrices if m is not None]
        offsets = np.zeros(len(self.matrices) + 1, np.int32)
        np.cumsum([0 if m is None else len(m) for m in self.matrices], out=offsets[1:])
        flat = np.concatenate([np.zeros(0, np.float32), *(m.reshape(-1) for m in held)])
        tokens = pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), self.width)
        return [pa.ListArray.from_arrays(pa.array(offsets), tokens, mask=pa.array(failed))]


class Dense:
    """``embed``'s vectors: an ``embedding`` column, ``fixed_size_list<float32>[width]``."""

    name = "dense"
    columns: tuple[str, ...] = ("embedding",)

    async def embed(
        self,
        client: JobClient,
        texts: Sequence[str] | None,
        images: Sequence[Any] | None,
        params: Any,
        call: CallOptions,
    ) -> Result:
        """``client.embed`` of ``texts`` (or ``images``), as one request."""
        return await client._embed_request(texts, images, params, call)

    def probe(self, result: Result) -> list[float]:
        """The probe's vector as a list of floats."""
        assert isinstance(result, EmbeddingResult)
        probe: list[float] = result.vector.tolist()
        return probe

    def width(self, result: Result) -> int:
        """The vectors' width."""
        assert isinstance(result, EmbeddingResult)
        return int(result.vectors.shape[1])

    def mismatch(self, result: Result, count: int, width: int) -> str | None:
        """Not a ``count x width`` matrix."""
        assert isinstance(result, EmbeddingResult)
        shape = tuple(result.vectors.shape)
        return None if shape == (count, width) else f"vectors of shape {list(shape)}, not {[count, width]}"

    def rows(self, count: int, width: int) -> DenseRows:
        """A ``count x width`` matrix of NaN."""
        return DenseRows(np.full((count, width), np.nan, np.float32))

    def fields(self, pa: Any, width: int) -> list[Any]:
        """``embedding: fixed_size_list<float32>[width]``."""
        return [pa.field("embedding", pa.list_(pa.float32(), width))]

    def row_bytes(self, width: int) -> int:
        """``width`` float32 and some overhead."""
        return width * 4 + 64


class Sparse:
    """``embed_sparse``'s vectors: ``sparse_indices: list<int64>`` (token ids, ascending) and
    ``sparse_values: list<float32>`` (their weights)."""

    name = "sparse"
    columns: tuple[str, ...] = ("sparse_indices", "sparse_values")

    async def embed(
        self,
        client: JobClient,
        texts: Sequence[str] | None,
        images: Sequence[Any] | None,
        params: Any,
        call: CallOptions,
    ) -> Result:
        """``client.embed_sparse`` of ``texts``, as one request (texts only: no sparse image jobs)."""
        assert texts is not None
        return await client._embed_sparse_request(texts, params, call)

    def probe(self, result: Result) -> dict[str, float]:
        """The probe's weights by token id (a string: JSON object keys are)."""
        assert isinstance(result, SparseEmbeddingResult)
        return {str(index): weight for index, weight in result.vector.to_milvus().items()}

    def width(self, result: Result) -> int:
        """The vocabulary width the answer states (SPLADE), else 0 (BGE-M3's lexical weights)."""
        assert isinstance(result, SparseEmbeddingResult)
        return result.dimension or 0

    def mismatch(self, result: Result, count: int, width: int) -> str | None:
        """Not ``count`` vectors, another vocabulary than the job's, or a token id outside it."""
        assert isinstance(result, SparseEmbeddingResult)
        if len(result.vectors) != count:
            return f"{len(result.vectors)} vectors for {count} rows"
        if (result.dimension or 0) != width:
            return f"a vocabulary of {result.dimension or 'unstated'} ids, not {width or 'unstated'}"
        for vector in result.vectors:
            low, high = (int(vector.indices.min()), int(vector.indices.max())) if len(vector) else (0, 0)
            if low < 0 or (width and high >= width):
                return f"token id {low if low < 0 else high} outside the vocabulary of {width or 'any'} ids"
        return None

    def rows(self, count: int, width: int) -> SparseRows:
        """``count`` empty rows (no vocabulary-wide storage)."""
        return SparseRows([None] * count)

    def fields(self, pa: Any, width: int) -> list[Any]:
        """``sparse_indices: list<int64>``, ``sparse_values: list<float32>``."""
        return [
            pa.field("sparse_indices", pa.list_(pa.int64())),
            pa.field("sparse_values", pa.list_(pa.float32())),
        ]

    def row_bytes(self, width: int) -> int:
        """:data:`SPARSE_ROW_BYTES` and some overhead."""
        return SPARSE_ROW_BYTES + 64


class MultiVector:
    """``pool``'s per-token matrices (a ``token_embed`` model): a ``token_embeddings`` column,
    ``list<fixed_size_list<float32>[width]>``, one vector per token of the row."""

    name = "multi-vector"
    columns: tuple[str, ...] = ("token_embeddings",)

    async def embed(
        self,
        client: JobClient,
        texts: Sequence[str] | None,
        images: Sequence[Any] | None,
        params: Any,
        call: CallOptions,
    ) -> Result:
        """``client.pool`` of ``texts`` (or ``images``: ColPali), as one request."""
        return await client._pool_request(texts, images, params, call)

    def probe(self, result: Result) -> list[float]:
        """The probe's normalised mean token vector (what a changed model changes too)."""
        assert isinstance(result, PoolingResult)
        probe: list[float] = result.mean()[0].tolist()
        return probe

    def width(self, result: Result) -> int:
        """The token vectors' width.

        Raises:
            UnsupportedByServer: the model answers one vector per text, not per token.
        """
        assert isinstance(result, PoolingResult)
        matrix = result.data[0]
        if matrix.ndim != 2:
            raise UnsupportedByServer(
                "multi_vector",
                server_version=None,
                required_version=None,
                server_flag='--pooler-config \'{"task": "token_embed"}\'',
                detail=f"its /pooling answers one vector of shape {list(matrix.shape)} per text, not one per "
                "token (drop multi_vector=True for a single-vector model)",
            )
        return int(matrix.shape[1])

    def mismatch(self, result: Result, count: int, width: int) -> str | None:
        """Not ``count`` matrices of ``width``-wide token vectors."""
        assert isinstance(result, PoolingResult)
        if len(result.data) != count:
            return f"{len(result.data)} matrices for {count} rows"
        for matrix in result.data:
            if matrix.ndim != 2 or matrix.shape[1] != width:
                return f"a matrix of shape {list(matrix.shape)}, not [tokens, {width}]"
        return None

    def rows(self, count: int, width: int) -> MatrixRows:
        """``count`` empty rows of ``width``-wide token vectors."""
        return MatrixRows([None] * count, width)

    def fields(self, pa: Any, width: int) -> list[Any]:
        """``token_embeddings: list<fixed_size_list<float32>[width]>``."""
        return [pa.field("token_embeddings", pa.list_(pa.list_(pa.float32(), width)))]

    def row_bytes(self, width: int) -> int:
        """:data:`MULTI_VECTOR_ROW_TOKENS` vectors of ``width`` float32 and some overhead."""
        return MULTI_VECTOR_ROW_TOKENS * width * 4 + 64


DENSE: Vectors = Dense()
SPARSE: Vectors = Sparse()
MULTI_VECTOR: Vectors = MultiVector()
