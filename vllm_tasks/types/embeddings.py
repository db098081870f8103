"""Results of ``embed()`` (``/v1/embeddings``) and ``embed_v2()`` (``/v2/embed``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import ConfigDict, Field, field_validator

from .. import defaults
from ..errors import InvalidInputError
from ..views import Shown, card, count, esc, note, shape_text, table
from .checked import CheckedModel
from .common import Usage

EncodingFormat = Literal["auto", "float", "base64", "bytes", "bytes_only"]
EmbeddingType = Literal["float", "binary", "ubinary", "base64"]
Truncate = Literal["END", "START", "NONE"]


class EmbeddingChunks(CheckedModel):
    """The chunks one input was embedded in (``embed(long_inputs="split_mean" | "late_chunking")``).

    Attributes:
        vectors: ``ndarray[n_chunks, d]``, one vector per chunk, as the model gave it.
        token_ranges: each chunk's ``[start, end)`` tokens: of the text without special tokens
            (``split_mean``: its windows), or of the whole prompt, special tokens included (late chunking,
            as vLLM reports them).
        char_ranges: each chunk's ``[start, end)`` characters of the caller's text (late chunking; ``None``
            for a chunk of special tokens only), or ``None`` when not known (``split_mean``).

    Examples:
        >>> result = client.embed(long_text, long_inputs="split_mean")
        >>> result.chunks[0].token_ranges
        [(0, 254), (223, 300)]
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    vectors: npt.NDArray[np.float32]
    token_ranges: list[tuple[int, int]]
    char_ranges: list[tuple[int, int] | None] | None = None

    @property
    def weights(self) -> list[int]:
        """Each chunk's token count: its weight in the input's vector."""
        return [end - start for start, end in self.token_ranges]


class EmbeddingResult(CheckedModel):
    """Embeddings of every input, in input order.

    Attributes:
        vectors: ``ndarray[n, d]`` (float32 unless ``widen=False`` kept a smaller dtype).
        model: the served model name that answered.
        usage: prompt tokens summed over all batches.
        encoding_format: the transport actually used (``"auto"`` resolves to bytes or base64).
        chunks: with ``long_inputs="split_mean"`` or ``"late_chunking"``, per input the chunk vectors its
            row is the token-weighted mean of (one chunk for an input that fit); else ``None``.

    Raises:
        InvalidInputError: built with a field of the wrong type, or ``vectors`` not a 2-D array (naming the
            field).

    Examples:
        >>> result = client.embed(["a", "b"])
        >>> result.vectors.shape
        (2, 384)
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    vectors: npt.NDArray[Any]
    model: str
    usage: Usage
    encoding_format: str
    chunks: list[EmbeddingChunks] | None = None

    @field_validator("vectors")
    @classmethod
    def _one_row_per_input(cls, vectors: npt.NDArray[Any]) -> npt.NDArray[Any]:
        if vectors.ndim != 2:
            raise InvalidInputError(
                "vectors",
                shape_text(vectors),
                "must be a 2-D array",
                "Pass ndarray[n, d], one row per input.",
            )
        return vectors

    @property
    def vector(self) -> npt.NDArray[Any]:
        """The single vector, for a call with one input.

        Raises:
            InvalidInputError: (also a ``ValueError``) the result holds no vector or several (use
                ``vectors``).
        """
        rows = int(self.vectors.shape[0])
        if rows != 1:
            raise InvalidInputError(
                "vector", rows, f"this result holds {rows} vectors, not one", "Use .vectors."
            )
        return np.asarray(self.vectors[0])

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # The shape, not the numbers: ``EmbeddingResult(vectors=float32[2, 384], model='minilm', ...)``.
        yield "vectors", Shown(shape_text(self.vectors))
        yield "model", self.model
        yield "usage", self.usage
        yield "encoding_format", self.encoding_format

    def to_html(self, *, max_rows: int = 5, max_columns: int = 8) -> str:
        """An HTML summary for notebooks: shape, dtype, L2-norm summary, model, usage, transport, and the
        first ``max_rows`` x ``max_columns`` values (escaped; bounded whatever the number of vectors).

        Examples:
            >>> IPython.display.HTML(result.to_html(max_rows=10))
        """
        return embedding_html(self, max_rows=max_rows, max_columns=max_columns)

    def _repr_html_(self) -> str:
        return self.to_html()


class EmbedV2Result(CheckedModel):
    """``/v2/embed`` embeddings, one array per requested type (``None`` for types not requested).

    Attributes:
        float: float32 ``(n, d)``.
        binary: packed sign bits as ``int8`` ``(n, d/8)``, exactly as the server sends them.
        ubinary: packed sign bits as ``uint8`` ``(n, d/8)``.
        base64: the base64 vectors decoded (always little-endian float32) to ``(n, d)``.
        texts: the texts echoed by the server, when the request used ``texts``.
        billed_units: ``{"input_tokens": ..., "image_tokens": ...}`` summed over batches.

    Use :func:`vllm_tasks.unpackbits` to expand ``binary``/``ubinary`` to 0/1 bits.

    Raises:
        InvalidInputError: built with a field of the wrong type (naming it).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    float: npt.NDArray[np.float32] | None = None
    binary: npt.NDArray[np.int8] | None = None
    ubinary: npt.NDArray[np.uint8] | None = None
    base64: npt.NDArray[np.float32] | None = None
    texts: list[str] | None = None
    billed_units: dict[str, int] = Field(default_factory=dict)
    id: str | None = None


# --------------------------------------------------------------------------------------------------
# Notebook view
# --------------------------------------------------------------------------------------------------


def norm_stats(vectors: Any, limit: int = defaults.VIEW_MAX_NORM_ROWS) -> dict[str, float] | None:
    """``{"min", "mean", "max", "rows", "nonfinite"}`` of the L2 norms of the first ``limit`` rows.

    Computed in blocks (bounded memory); ``None`` for an array that is not a 2-D numeric matrix.

    Examples:
        >>> norm_stats(np.array([[3.0, 4.0]]))["max"]
        5.0
    """
    array = np.asarray(vectors)
    if array.ndim != 2 or array.shape[0] == 0 or array.dtype.kind not in "fiubV":  # V: bfloat16, fp8
        return None
    rows = min(limit, array.shape[0])
    norms: list[np.ndarray[Any, Any]] = []
    nonfinite = 0
    try:
        for start in range(0, rows, 1024):
            block = np.asarray(array[start : min(rows, start + 1024)]).astype(np.float64)
            finite = np.isfinite(block).all(axis=1)
            nonfinite += int((~finite).sum())
            norms.append(np.sqrt(np.einsum("ij,ij->i", block[finite], block[finite])))
    except (TypeError, ValueError):  # a dtype numpy cannot widen
        return None
    joined = np.concatenate(norms) if norms else np.zeros(0)
    if joined.size == 0:
        return {"rows": float(rows), "nonfinite": float(nonfinite)}
    return {
        "min": float(joined.min()),
        "mean": float(joined.mean()),
        "max": float(joined.max()),
        "rows": float(rows),
        "nonfinite": float(nonfinite),
    }


def embedding_html(result: EmbeddingResult, *, max_rows: int = 5, max_columns: int = 8) -> str:
    """The view of an :class:`~vllm_tasks.EmbeddingResult`: shape, dtype, norms, model, usage, transport."""
    vectors = np.asarray(result.vectors)
    facts: list[tuple[str, object]] = [
        ("model", result.model or "?"),
        ("transport", result.encoding_format),
        ("prompt tokens", f"{result.usage.prompt_tokens:,}"),
    ]
    stats = norm_stats(vectors)
    lines = []
    if stats is not None and "min" in stats:
        unit = abs(stats["min"] - 1) < 1e-3 and abs(stats["max"] - 1) < 1e-3
        of = "" if stats["rows"] >= vectors.shape[0] else f" (first {int(stats['rows']):,} vectors)"
        lines.append(
            f"L2 norms{of}: min {stats['min']:.4g} · mean {stats['mean']:.4g} · max {stats['max']:.4g}"
            + (" — unit length (normalized)" if unit else "")
        )
    if stats is not None and stats["nonfinite"]:
        lines.append(f"{count(int(stats['nonfinite']), 'vector')} with NaN or infinite values")
    summary = "".join(note(line) for line in lines)
    title = f"EmbeddingResult — {shape_text(vectors)}"
    if vectors.ndim == 2 and vectors.shape[0]:
        title += f" ({count(vectors.shape[0], 'vector')} × {vectors.shape[1]:,} dims)"
    return card(title, facts, summary, _preview(vectors, max_rows, max_columns))


def _preview(vectors: np.ndarray[Any, Any], max_rows: int, max_columns: int) -> str:
    if vectors.ndim != 2 or not vectors.shape[0] or max_rows <= 0:
        return ""
    shown = vectors[:max_rows, :max_columns]
    more_columns = vectors.shape[1] > max_columns
    columns = [("#", True)] + [(str(j), True) for j in range(shown.shape[1])]
    if more_columns:
        columns.append(("…", False))
    rows = []
    for i, row in enumerate(shown):
        cells = [str(i)] + [esc(_number(value)) for value in row]
        rows.append(cells + (["…"] if more_columns else []))
    return table(columns, rows, total=vectors.shape[0], noun="vector")


def _number(value: Any) -> str:
    if isinstance(value, complex | np.complexfloating):  # float() would drop the imaginary part, and warn
        return f"{complex(value):.4g}"
    try:
        return f"{float(value):.4g}"
    except (TypeError, ValueError):
        return str(value)
