"""Opt-in progress bars (tqdm, imported only when asked for)."""

from __future__ import annotations

from typing import Any

from .dependencies import require


class Progress:
    """Counts finished items; draws a tqdm bar when enabled.

    Raises:
        MissingDependency: when enabled and tqdm is not installed.
    """

    def __init__(self, total: int, *, enabled: bool, description: str) -> None:
        self._bar: Any = None
        if enabled:
            tqdm = require("tqdm.auto", "progress", "show_progress=True").tqdm
            self._bar = tqdm(total=total, desc=description, unit="item")

    def advance(self, count: int) -> None:
        """Mark ``count`` more items as done."""
        if self._bar is not None:
            self._bar.update(count)

    def close(self) -> None:
        """Remove the bar."""
        if self._bar is not None:
            self._bar.close()
