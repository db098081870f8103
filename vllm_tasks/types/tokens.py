"""Results of ``tokenize()`` (``POST /tokenize``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict


class TokenizeResult(BaseModel):
    """A text's tokens under the served model's own tokenizer.

    Attributes:
        tokens: ``ndarray[count]`` of token ids (int64).
        max_model_len: the model's context length, as the server reports it.
        token_strs: each token's text, when asked for with ``return_token_strs=True``.

    Examples:
        >>> result = client.tokenize("hello world")
        >>> result.count, result.tokens.tolist()
        (4, [101, 7592, 2088, 102])
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    tokens: npt.NDArray[np.int64]
    max_model_len: int | None = None
    token_strs: list[str] | None = None

    @property
    def count(self) -> int:
        """How many tokens the text is (what counts against ``max_model_len``)."""
        return int(self.tokens.shape[0])

    def __len__(self) -> int:
        return self.count

    def __repr_args__(self) -> Any:
        yield "count", self.count
        yield "max_model_len", self.max_model_len
