"""``reward`` (``/pooling`` with chat-style ``messages``), the pure parts: its options, the gates it needs,
and reading the pooled arrays as rewards.

vLLM serves reward models through ``/pooling`` (vLLM's ``docs/models/pooling_models/reward.md``, 0.32-0.34):
a sequence (outcome) reward model with ``classify`` active answers ``[num_labels]`` per conversation, a
token reward model or a process reward model with ``token_classify`` active answers ``[n_tokens,
num_labels]``. The conversation goes through the server's chat template (``add_generation_prompt`` false,
vLLM's default on ``/pooling``). The sending is ``AsyncPoolingMethods.reward``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from . import gates
from .calls import TaskParams
from .errors import InvalidInputError, UnexpectedResponse, UnsupportedByServer
from .types.reward import RewardKind, RewardResult
from .types.scoring import PoolingResult
from .types.server import ServerInfo

RewardModelKind = Literal["auto", "sequence", "token"]
"""What ``reward`` asks for: ``auto`` (the server's active pooling task decides), ``sequence``
(``task="classify"``) or ``token`` (``task="token_classify"``)."""
REWARD_MODEL_KINDS: tuple[str, ...] = ("auto", "sequence", "token")

TASKS: dict[str, str | None] = {"auto": None, "sequence": "classify", "token": "token_classify"}
"""The ``/pooling`` ``task`` each kind sends (``None``: the field left out)."""


@dataclass(frozen=True)
class RewardParams(TaskParams):
    """The options of ``reward`` (``/pooling`` with ``messages``), checked on construction; each field is its
    keyword argument of the same name (see :meth:`~vllm_tasks.Client.reward`).

    Raises:
        InvalidInputError: an unknown ``kind``, or ``use_activation`` not a bool.

    Examples:
        >>> RewardParams(kind="token").fields()
        {'task': 'token_classify', 'use_activation': False}
    """

    kind: RewardModelKind = "auto"
    use_activation: bool = False

    def __post_init__(self) -> None:
        if self.kind not in REWARD_MODEL_KINDS:
            raise InvalidInputError(
                "kind",
                self.kind,
                f"must be one of {', '.join(REWARD_MODEL_KINDS)}",
                "'auto' reads the model's kind from the server's answer.",
            )
        if not isinstance(self.use_activation, bool):
            raise InvalidInputError(
                "use_activation", self.use_activation, "must be True or False", "Pass a bool."
            )

    def fields(self) -> dict[str, Any]:
        """The request's JSON fields (``task`` is None for ``auto``: the server's active task)."""
        return {"task": TASKS[self.kind], "use_activation": self.use_activation}


def require_reward(info: ServerInfo, kind: str) -> None:
    """Check the server's version for ``kind`` before sending.

    ``auto`` needs vLLM 0.19.0: before it ``/pooling`` without a ``task`` answers per token for every
    model, so a sequence reward model would look like a token one. Every kind needs 0.12.0: ``sequence``
    and ``token`` send the task by name, which 0.11.0 ignores (it answers hidden states).

    Raises:
        UnsupportedByServer: the server's version is older than the kind needs.

    Examples:
        >>> from vllm_tasks.types import ServerInfo
        >>> require_reward(ServerInfo(base_url="http://h", version="0.32.0", models=(), routes=None), "auto")
    """
    if kind == "auto" and not gates.supports(info, "reward_active_task"):
        raise UnsupportedByServer(
            "reward_active_task",
            server_version=info.version,
            required_version=gates.FEATURES["reward_active_task"].min_version,
            detail="Name the model's kind instead: kind='sequence' or kind='token' (vLLM >= 0.12.0).",
        )
    gates.require(info, ["reward_task"])


def reward_result(pooled: PoolingResult, kind: str) -> RewardResult:
    """Read ``/pooling``'s arrays (one per conversation) as rewards.

    A vector per conversation is a sequence reward, a matrix a token reward; one label gives ``scores``
    (the vector's value, or the matrix's last row).

    Raises:
        UnexpectedResponse: a shape that is neither (``kind="decode"``), an empty per-token answer, or a
            granularity other than the ``kind`` asked for (``"sequence"`` but per-token rows).

    Examples:
        >>> pooled = PoolingResult(data=[np.array([3.0], np.float32)], model="rm")
        >>> reward_result(pooled, "auto").scores
        array([3.], dtype=float32)
    """
    dims = {array.ndim for array in pooled.data}
    if dims - {1, 2} or len(dims) > 1:
        raise UnexpectedResponse(
            f"/pooling: a reward model answers one vector or one matrix per conversation, not arrays of "
            f"{sorted(dims)} dimensions",
            kind="decode",
        )
    found: RewardKind = "token" if dims == {2} else "sequence"
    if kind not in ("auto", found):
        raise UnexpectedResponse(
            f"/pooling: asked for {kind} rewards, the server answered {found} rewards (arrays of shape "
            f"{pooled.data[0].shape})",
            kind="decode",
        )
    if found == "token" and any(array.shape[0] == 0 for array in pooled.data):
        raise UnexpectedResponse("/pooling: a token reward answer without rows", kind="decode")
    labels = pooled.data[0].shape[-1] if pooled.data else 1
    scores = None
    if labels == 1:
        scores = np.array([float(array.reshape(-1)[-1]) for array in pooled.data], dtype=np.float32)
    return RewardResult(
        kind=found, rewards=list(pooled.data), scores=scores, model=pooled.model, usage=pooled.usage
    )
