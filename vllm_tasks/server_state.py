"""Everything a client has learned about its server, as one immutable value swapped whole.

A client reads ``/version``, ``/v1/models`` and ``/openapi.json`` once (the :class:`ServerInfo`), then
learns facts per model as calls go: the width of the embeddings it answers, the kind of scorer it
serves, whether DeepSeek-OCR's n-gram processor is loaded, the largest bytes batch a proxy lets
through. Each task family declares its facts as :class:`Fact` values next to its code; the client keeps
them all in one :class:`ServerState`. ``server_info(refresh=True)`` starts a new state, so a server
restarted on other weights is learned again from scratch.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, TypeVar, cast

from .types.server import ServerInfo

Key = TypeVar("Key", bound=Hashable)
Value = TypeVar("Value")


class Fact(Generic[Key, Value]):
    """One kind of fact a client learns about its server, looked up by a key (usually the model name).

    Task families declare theirs as module constants; every declared fact is listed in :data:`FACTS`.

    Args:
        name: what the fact is, for ``repr`` and the docs (e.g. ``"embedding width"``).
        key: what the fact is looked up by (e.g. ``"(model, dimensions)"``).

    Examples:
        >>> from vllm_tasks.scorer_kind import SCORER_KIND
        >>> from vllm_tasks.types.scoring import ScorerKind
        >>> ServerState().learned(SCORER_KIND, "bge", ScorerKind.CROSS_ENCODER).get(SCORER_KIND, "bge")
        <ScorerKind.CROSS_ENCODER: 'cross-encoder'>
    """

    __slots__ = ("key", "name")

    def __init__(self, name: str, *, key: str) -> None:
        self.name = name
        self.key = key
        FACTS.append(self)

    def __repr__(self) -> str:
        return f"Fact({self.name!r}, key={self.key!r})"


FACTS: list[Fact[Any, Any]] = []
"""Every fact a task family has declared, in declaration order."""


@dataclass(frozen=True)
class ServerState:
    """What a client knows about its server: the :class:`ServerInfo` and every fact learned since.

    Immutable: learning a fact returns a new state, which the client swaps in whole.

    Attributes:
        info: the server's version, models and routes; ``None`` until first read.
    """

    info: ServerInfo | None = None
    _facts: Mapping[tuple[Fact[Any, Any], Hashable], Any] = field(
        default_factory=lambda: MappingProxyType({})
    )

    def knows(self, fact: Fact[Key, Any], key: Key) -> bool:
        """Whether ``fact`` has been learned for ``key`` (its value may be ``None``: inconclusive)."""
        return (fact, key) in self._facts

    def get(self, fact: Fact[Key, Value], key: Key) -> Value | None:
        """The value learned for ``key``, or ``None`` when it has not been learned."""
        value: Value | None = self._facts.get((fact, key))
        return value

    def all_of(self, fact: Fact[Key, Value]) -> dict[Key, Value]:
        """Every value learned of ``fact``, by key."""
        return {cast(Key, key): value for (kind, key), value in self._facts.items() if kind is fact}

    def with_info(self, info: ServerInfo) -> ServerState:
        """A new state with ``info`` and the facts learned so far."""
        return ServerState(info, self._facts)

    def learned(self, fact: Fact[Key, Value], key: Key, value: Value) -> ServerState:
        """A new state that also knows ``fact`` for ``key`` (replacing a value learned before)."""
        facts = dict(self._facts)
        facts[fact, key] = value
        return ServerState(self.info, MappingProxyType(facts))
