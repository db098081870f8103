"""Results of ``embed()`` (``/v1/embeddings``) and ``embed_v2()`` (``/v2/embed``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from .. import views
from .common import Usage

EncodingFormat = Literal["auto", "float", "base64", "bytes", "bytes_only"]
EmbeddingType = Literal["float", "binary", "ubinary", "base64"]
Truncate = Literal["END", "START", "NONE"]


class EmbeddingResult(BaseModel):
    """Embeddings of every input, in input order.

    Attributes:
        vectors: ``ndarray[n, d]`` (float32 unless ``widen=False`` kept a smaller dtype).
        model: the served model name that answered.
        usage: prompt tokens summed over all batches.
        encoding_format: the transport actually used (``"auto"`` resolves to bytes or base64).

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

    @property
    def vector(self) -> npt.NDArray[Any]:
        """The single vector, for a call with one input.

        Raises:
            ValueError: when the call had several inputs (use ``vectors``).
        """
        if self.vectors.shape[0] != 1:
            raise ValueError(f"this result holds {self.vectors.shape[0]} vectors; use .vectors")
        return np.asarray(self.vectors[0])

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # The shape, not the numbers: ``EmbeddingResult(vectors=float32[2, 384], model='minilm', ...)``.
        yield "vectors", views.Shown(views.shape_text(self.vectors))
        yield "model", self.model
        yield "usage", self.usage
        yield "encoding_format", self.encoding_format

    def to_html(self, *, max_rows: int = 5, max_columns: int = 8) -> str:
        """An HTML summary for notebooks: shape, dtype, L2-norm summary, model, usage, transport, and the
        first ``max_rows`` x ``max_columns`` values (escaped; bounded whatever the number of vectors).

        Examples:
            >>> IPython.display.HTML(result.to_html(max_rows=10))
        """
        return views.embedding_html(self, max_rows=max_rows, max_columns=max_columns)

    def _repr_html_(self) -> str:
        return self.to_html()


class EmbedV2Result(BaseModel):
    """``/v2/embed`` embeddings, one array per requested type (``None`` for types not requested).

    Attributes:
        float: float32 ``(n, d)``.
        binary: packed sign bits as ``int8`` ``(n, d/8)``, exactly as the server sends them.
        ubinary: packed sign bits as ``uint8`` ``(n, d/8)``.
        base64: the base64 vectors decoded (always little-endian float32) to ``(n, d)``.
        texts: the texts echoed by the server, when the request used ``texts``.
        billed_units: ``{"input_tokens": ..., "image_tokens": ...}`` summed over batches.

    Use :func:`vllm_tasks.unpackbits` to expand ``binary``/``ubinary`` to 0/1 bits.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    float: npt.NDArray[np.float32] | None = None
    binary: npt.NDArray[np.int8] | None = None
    ubinary: npt.NDArray[np.uint8] | None = None
    base64: npt.NDArray[np.float32] | None = None
    texts: list[str] | None = None
    billed_units: dict[str, int] = {}
    id: str | None = None
