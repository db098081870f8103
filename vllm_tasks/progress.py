"""Opt-in progress bars (tqdm, imported only when asked for)."""

from __future__ import annotations

from typing import Any

from .errors import InvalidInputError


class Progress:
    """Counts finished items; draws a tqdm bar when enabled.

    Raises:
        InvalidInputError: when enabled and tqdm is not installed.
    """

    def __init__(self, total: int, *, enabled: bool, description: str) -> None:
        self._bar: Any = None
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError as error:
                raise InvalidInputError(
                    "show_progress", True, "needs tqdm", "Install it: pip install 'vllm-tasks[progress]'."
                ) from error
            self._bar = tqdm(total=total, desc=description, unit="item")

    def advance(self, count: int) -> None:
        """Mark ``count`` more items as done."""
        if self._bar is not None:
            self._bar.update(count)

    def close(self) -> None:
        """Remove the bar."""
        if self._bar is not None:
            self._bar.close()
