"""Parsing and ordering of the version strings that vLLM servers report on ``GET /version``."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_VERSION_RE = re.compile(
    r"""^v?
    (?P<release>\d+(?:\.\d+)*)
    (?:[.-]?(?P<pre>a|b|rc)(?P<pre_n>\d+))?
    (?:[.-]?post(?P<post>\d+))?
    (?:[.-]?dev(?P<dev>\d+)?)?
    (?:\+(?P<local>[A-Za-z0-9.]+))?
    $""",
    re.VERBOSE,
)
_PRE_ORDER = {"a": 0, "b": 1, "rc": 2}


@dataclass(frozen=True, order=False)
class ServerVersion:
    """A vLLM version as reported by the server, ordered like PEP 440.

    ``release`` is ``None`` for strings that carry no release number (``"dev"``, ``"unknown"``):
    such a server's features cannot be known in advance, so gates let requests through and the
    server's answer decides.

    Examples:
        >>> ServerVersion.parse("0.30.1.dev202609231158") < ServerVersion.parse("0.30.1")
        True
    """

    raw: str
    release: tuple[int, int, int] | None = None
    pre: tuple[int, int] | None = None
    post: int | None = None
    dev: int | None = None
    local: str | None = None

    @classmethod
    @functools.lru_cache(maxsize=64)  # a handful of version strings, parsed on every gate check
    def parse(cls, text: str) -> ServerVersion:
        """Parse a version string such as ``0.32.0``, ``0.11.1.post2``, ``0.32.0+cpu`` or ``dev``.

        Args:
            text: the ``version`` value of ``GET /version``.

        Returns:
            A ``ServerVersion``; unparseable strings give one with ``release=None`` (unknown).
        """
        raw = text.strip()
        match = _VERSION_RE.match(raw)
        if match is None:
            return cls(raw=raw)
        parts = [int(p) for p in match["release"].split(".")][:3]
        while len(parts) < 3:
            parts.append(0)
        release = (parts[0], parts[1], parts[2])
        pre = (_PRE_ORDER[match["pre"]], int(match["pre_n"])) if match["pre"] else None
        post = int(match["post"]) if match["post"] is not None else None
        dev: int | None = None
        if "dev" in raw[len(match["release"]) :].split("+")[0]:
            dev = int(match["dev"]) if match["dev"] else 0
        return cls(raw=raw, release=release, pre=pre, post=post, dev=dev, local=match["local"])

    @property
    def known(self) -> bool:
        """Whether the string carried a release number that gates can compare against."""
        return self.release is not None

    def sort_key(self) -> tuple[object, ...]:
        """A tuple that orders versions as PEP 440 does (dev < pre < release < post)."""
        if self.release is None:
            return (1, ())  # unknown sorts after every known version
        pre = self.pre if self.pre is not None else (3, 0)
        if self.dev is not None and self.pre is None and self.post is None:
            pre = (-1, 0)  # X.Y.Z.devN comes before X.Y.Za1
        post = self.post if self.post is not None else -1
        dev = self.dev if self.dev is not None else float("inf")
        return (0, self.release, pre, post, dev)

    def at_least(self, minimum: str) -> bool:
        """True when this version is ``minimum`` or newer. Unknown versions answer True."""
        if not self.known:
            return True
        return bool(self.sort_key() >= ServerVersion.parse(minimum).sort_key())

    def __lt__(self, other: ServerVersion) -> bool:
        return bool(self.sort_key() < other.sort_key())

    def __le__(self, other: ServerVersion) -> bool:
        return bool(self.sort_key() <= other.sort_key())

    def __gt__(self, other: ServerVersion) -> bool:
        return bool(self.sort_key() > other.sort_key())

    def __ge__(self, other: ServerVersion) -> bool:
        return bool(self.sort_key() >= other.sort_key())

    def __str__(self) -> str:
        return self.raw
