"""What every task call shares: the per-call options, the model to name, count checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidInputError
from .steps import TimeoutLike
from .types.server import ServerInfo


@dataclass(frozen=True)
class CallOptions:
    """The per-call tail every task method accepts."""

    model: str | None
    extra_body: Mapping[str, Any] | None
    extra_headers: Mapping[str, str] | None
    timeout: TimeoutLike


def resolve_model(info: ServerInfo, requested: str | None, client_model: str | None = None) -> str | None:
    """The model to name in a request: the argument, else the client's, else the server's first."""
    return requested or client_model or info.default_model


def positive_int(field: str, value: object) -> int:
    """Validate a count argument (``batch_size``, ``concurrency``).

    Raises:
        InvalidInputError: for anything but an int >= 1.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(field, value, "must be an integer >= 1", f"For example {field}=8.")
    return value
