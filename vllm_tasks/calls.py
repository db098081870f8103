"""What every task call shares: the per-call options and the model to name in a request."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from .config import TimeoutArg
from .errors import InvalidInputError
from .types.server import ServerInfo
from .validation import header_values, positive_int, timeout_value


class ClientDefault(enum.Enum):
    """The type of :data:`CLIENT_DEFAULT`, a per-call argument's "use the client's setting" (as
    openai-python's ``NotGiven``); its one member is ``ClientDefault.CLIENT_DEFAULT``.

    Examples:
        >>> CLIENT_DEFAULT
        CLIENT_DEFAULT
        >>> CLIENT_DEFAULT is ClientDefault.CLIENT_DEFAULT
        True
    """

    CLIENT_DEFAULT = "CLIENT_DEFAULT"

    def __repr__(self) -> str:
        return "CLIENT_DEFAULT"


CLIENT_DEFAULT: Final = ClientDefault.CLIENT_DEFAULT
"""Marks a per-call argument (e.g. ``timeout``) that falls back to the client's setting."""

ClientDefaultType: TypeAlias = Literal[ClientDefault.CLIENT_DEFAULT]
"""The type of :data:`CLIENT_DEFAULT` in an annotation (``timeout: float | ClientDefaultType``)."""

TimeoutLike: TypeAlias = TimeoutArg | ClientDefaultType
"""A per-call ``timeout``: a timeout (:data:`~vllm_tasks.config.TimeoutArg`), or :data:`CLIENT_DEFAULT`
for the client's."""


@dataclass(frozen=True)
class CallOptions:
    """The per-call tail every task method accepts, passed as one object to every task's flow.

    Attributes:
        model: the model the caller named (``None``: the client's, else the server's first).
        extra_body: extra JSON (or form) fields merged into every request of the call.
        extra_headers: extra headers for every request of the call.
        timeout: per-request timeout; ``CLIENT_DEFAULT`` uses the client's.

    Raises:
        InvalidInputError: ``extra_body``/``extra_headers`` not a mapping, a header name or value not
            ASCII text on one line, or a timeout that is not ``None``, a positive finite number or an
            ``httpx.Timeout`` of such numbers.
    """

    model: str | None = None
    extra_body: Mapping[str, Any] | None = None
    extra_headers: Mapping[str, str] | None = None
    timeout: TimeoutLike = CLIENT_DEFAULT

    def __post_init__(self) -> None:
        if self.extra_body is not None and not isinstance(self.extra_body, Mapping):
            raise InvalidInputError(
                "extra_body", self.extra_body, "must be a mapping", "Pass a dict of fields."
            )
        if self.extra_headers is not None and not isinstance(self.extra_headers, Mapping):
            raise InvalidInputError(
                "extra_headers", self.extra_headers, "must be a mapping", "Pass a dict of header values."
            )
        header_values("extra_headers", self.extra_headers)
        if self.timeout is not CLIENT_DEFAULT:
            timeout_value("timeout", self.timeout)


def resolve_model(info: ServerInfo, requested: str | None, client_model: str | None = None) -> str | None:
    """The model to name in a request: the argument, else the client's, else the server's first."""
    return requested or client_model or info.default_model


@dataclass(frozen=True)
class Batching:
    """How a call's inputs are split into requests and sent: shared by every batched task.

    Attributes:
        batch_size: the most inputs per request.
        concurrency: the most requests in flight at once.
        show_progress: draw a tqdm bar (``vllm-tasks[progress]``).

    Raises:
        InvalidInputError: ``batch_size`` or ``concurrency`` is not an int >= 1.
    """

    batch_size: int
    concurrency: int
    show_progress: bool = False

    def __post_init__(self) -> None:
        positive_int("batch_size", self.batch_size)
        positive_int("concurrency", self.concurrency)
