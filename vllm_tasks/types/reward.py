"""The result of :meth:`Client.reward`: what a reward model gives each conversation."""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from ..errors import InvalidInputError
from .common import Usage

RewardKind = Literal["sequence", "token"]
"""A reward model's output granularity: one value set per conversation (``sequence``: Skywork-Reward,
any ``*ForSequenceClassification`` served with ``classify`` active) or one per token (``token``:
InternLM2's and Qwen2's reward models, process reward models; ``token_classify`` active)."""


class RewardResult(BaseModel):
    """What :meth:`Client.reward` returns.

    Attributes:
        kind: ``"sequence"`` or ``"token"``, read from the answer's shape.
        rewards: one array per conversation: ``[num_labels]`` for a sequence reward model,
            ``[n_tokens, num_labels]`` for a token reward model (for a process reward model started with
            vLLM's ``STEP`` pooling: one row per step tag).
        scores: one reward per conversation, for models with one label: the sequence reward, or a token
            reward model's value at the last token (the outcome reward InternLM2-Reward and
            Qwen2.5-Math-RM read there); None for models with several labels (read ``rewards``).
        model: the served model.
        usage: token counts summed over all requests.

    Examples:
        >>> result = client.reward([chosen, rejected])
        >>> result.scores
        array([ 3.03,  1.32], dtype=float32)
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    kind: RewardKind
    rewards: list[npt.NDArray[np.float32]]
    scores: npt.NDArray[np.float32] | None
    model: str
    usage: Usage = Usage()

    def __len__(self) -> int:
        return len(self.rewards)

    @property
    def score(self) -> float:
        """The one conversation's reward (``scores[0]``).

        Raises:
            InvalidInputError: the result holds several conversations, or the model has several labels.

        Examples:
            >>> client.reward(conversation).score
            3.03
        """
        if self.scores is None:
            raise InvalidInputError(
                "score", None, "is not defined for a model with several labels", "Read .rewards instead."
            )
        if len(self.scores) != 1:
            raise InvalidInputError(
                "score", len(self.scores), "needs exactly one conversation", "Read .scores for several."
            )
        return float(self.scores[0])
