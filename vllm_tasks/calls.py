"""What every task call shares: the per-call options and the model to name in a request."""

from __future__ import annotations

import dataclasses
import enum
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Self, TypeAlias, cast

from .adaptive import Concurrency
from .config import TimeoutArg
from .errors import InvalidInputError
from .types.server import ServerInfo
from .validation import concurrency_setting, header_values, positive_int, timeout_value


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


class TaskParams:
    """The base of the task parameter objects (:class:`~vllm_tasks.EmbedParams`,
    :class:`~vllm_tasks.RerankParams`, :class:`~vllm_tasks.TranscribeParams`, ...): frozen dataclasses,
    checked on construction, whose field names are the task method's keyword arguments.

    Examples:
        >>> params = vt.EmbedParams(dimensions=256)
        >>> params.keywords()
        {'dimensions': 256}
        >>> client.embed(texts, **params.keywords())  # the same call as client.embed(texts, dimensions=256)
    """

    @classmethod
    def of(cls, value: object, *, field: str = "params") -> Self:
        """``value`` as parameters of this class: an instance as is, a mapping of field names (an
        adapter's config, a dump), or ``None`` for the defaults.

        Raises:
            InvalidInputError: another type, or a name that is not a field (naming the fields there are).

        Examples:
            >>> vt.EmbedParams.of({"dimensions": 256}).dimensions
            256
        """
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise InvalidInputError(
                field,
                type(value).__name__,
                f"must be vllm_tasks.{cls.__name__} or a dict of its fields",
                f"Pass vllm_tasks.{cls.__name__}(...).",
            )
        names = [item.name for item in dataclasses.fields(cast(Any, cls))]
        unknown = sorted(set(map(str, value)) - set(names))
        if unknown:
            raise InvalidInputError(
                field, unknown, f"are not fields of {cls.__name__}", f"Use some of: {', '.join(names)}."
            )
        return cls(**value)

    def keywords(self) -> dict[str, Any]:
        """The fields that differ from their defaults, by name: keyword arguments for the task's methods
        (their defaults are the fields' defaults, so leaving the others out changes nothing, and a method
        that lacks an option, e.g. ``translate`` and ``timestamp_granularities``, still takes the rest).
        """
        return {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(cast(Any, self))
            if getattr(self, field.name) != field.default
        }

    def changed(self) -> dict[str, Any]:
        """:meth:`keywords` as JSON values (lists, dicts): what a job's fingerprint records, so that a
        field added later with a default keeps earlier jobs resumable."""
        changed: dict[str, Any] = plain(self.keywords())
        return changed


def plain(value: Any) -> Any:
    """``value`` with its sequences as lists and mappings as dicts (JSON values).

    Examples:
        >>> plain({"ids": (1, 2)})
        {'ids': [1, 2]}
    """
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def resolve_model(info: ServerInfo, requested: str | None, client_model: str | None = None) -> str | None:
    """The model to name in a request: the argument, else the client's, else the server's first."""
    return requested or client_model or info.default_model


def max_model_len(info: ServerInfo, model: str | None) -> int | None:
    """The context length of ``model`` (a LoRA card: its base model's), when the server states it."""
    try:
        card = info.model_card(model)
    except KeyError:
        return None
    if card.max_model_len is None and card.parent is not None:
        return max_model_len(info, card.parent)
    return card.max_model_len


AUTO_WINDOW = 16
"""With ``concurrency="auto"``, the requests whose work is held at once where it must be bounded ahead."""


@dataclass(frozen=True)
class Batching:
    """How a call's inputs are split into requests and sent: shared by every batched task.

    Attributes:
        batch_size: the most inputs per request.
        concurrency: the most requests in flight at once, or ``"auto"`` (tuned from the answers'
            latencies: :mod:`vllm_tasks.adaptive`).
        show_progress: draw a tqdm bar (``vllm-tasks[progress]``).
        one_request: send every input in one request, whatever their count and size (a job's batch, planned
            by the job): ``batch_size`` and the size caps do not split them, and a request the server finds
            too large is not split either (the 413 is raised).

    Raises:
        InvalidInputError: ``batch_size`` is not an int >= 1, or ``concurrency`` is neither that nor
            ``"auto"``.
    """

    batch_size: int
    concurrency: Concurrency
    show_progress: bool = False
    one_request: bool = False

    def __post_init__(self) -> None:
        positive_int("batch_size", self.batch_size)
        concurrency_setting("concurrency", self.concurrency)

    def caps(self, inputs: int, size_cap: int) -> tuple[int, int]:
        """The most inputs and the size cap per request for a call of ``inputs`` inputs: ``batch_size`` and
        ``size_cap``, or, with :attr:`one_request`, caps that all of them fit.

        Examples:
            >>> Batching(8, 1).caps(100, 1000), Batching(1, 1, one_request=True).caps(100, 1000)[0]
            ((8, 1000), 100)
        """
        return (max(inputs, 1), sys.maxsize) if self.one_request else (self.batch_size, size_cap)

    def inputs_per_request(self, inputs: int) -> int:
        """The most inputs per request for a call of ``inputs`` inputs (see :meth:`caps`)."""
        return self.caps(inputs, 0)[0]

    @property
    def window(self) -> int:
        """Requests whose work is held at once where it must be bounded ahead (``embed_sparse``'s dense
        rows): ``concurrency``, or with ``"auto"`` :data:`AUTO_WINDOW`."""
        return AUTO_WINDOW if self.concurrency == "auto" else self.concurrency
