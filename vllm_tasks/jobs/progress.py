"""A job's progress: a tqdm bar on a terminal, a log line every N seconds anywhere else."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

from ..dependencies import require
from .replicas import Replica

logger = logging.getLogger("vllm_tasks.jobs")


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


class JobProgress:
    """Counts rows and tokens; shows them with rates, ETA and per-replica rows/s.

    Args:
        total: rows in the job.
        done: rows finished by earlier runs.
        replicas: the job's servers (their counters are read, not changed).
        enabled: show anything at all.
        interval: seconds between log lines when stderr is not a terminal.
        description: the bar's label and the log lines' prefix.
        unit: what is counted (``row``, ``page``, ``file``).

    Raises:
        MissingDependency: on a terminal, when tqdm is not installed.
    """

    def __init__(
        self,
        total: int,
        done: int,
        replicas: Sequence[Replica],
        *,
        enabled: bool,
        interval: float,
        description: str,
        unit: str = "row",
    ) -> None:
        self._total, self._done, self._start_done = total, done, done
        self._tokens = 0
        self._replicas = replicas
        self._interval = interval
        self._description = description
        self._unit = unit
        self._started = self._last_line = time.monotonic()
        self._enabled = enabled
        self._bar: Any = None
        if enabled and sys.stderr.isatty():
            tqdm = require("tqdm.auto", "progress", "show_progress=True").tqdm
            self._bar = tqdm(total=total, initial=done, desc=description, unit=unit, smoothing=0.1)

    def advance(self, rows: int, tokens: int) -> None:
        """Count finished rows and their tokens; update the bar or log a line when one is due."""
        self._done += rows
        self._tokens += tokens
        if self._bar is not None:
            self._bar.update(rows)
            self._bar.set_postfix_str(self.rates(), refresh=False)
        elif self._enabled and time.monotonic() - self._last_line >= self._interval:
            self._last_line = time.monotonic()
            logger.info("%s", self.line())

    def rates(self) -> str:
        """Tokens/s and rows/s per replica (with ``concurrency="auto"``, the requests in flight its limit
        allows now), e.g. ``"4,100 tok/s | a:8000 310/s auto 12, b:8000 295/s auto 11"``."""
        elapsed = max(time.monotonic() - self._started, 1e-9)
        replicas = ", ".join(
            f"{replica.url.split('//')[-1]} {replica.rows / elapsed:,.0f}/s"
            + ("" if replica.limit is None else f" auto {replica.limit.settled}")
            for replica in self._replicas
        )
        return f"{self._tokens / elapsed:,.0f} tok/s | {replicas}"

    def line(self) -> str:
        """One log line: units done, units/s, tokens/s, ETA, per replica."""
        elapsed = max(time.monotonic() - self._started, 1e-9)
        speed = (self._done - self._start_done) / elapsed
        eta = _duration((self._total - self._done) / speed) if speed else "?"
        share = 100 * self._done / max(self._total, 1)
        return (
            f"{self._description}: {self._done:,}/{self._total:,} {self._unit}s ({share:.1f}%), "
            f"{speed:,.0f} {self._unit}s/s, "
            f"ETA {eta}, {self.rates()}"
        )

    def close(self) -> None:
        """Remove the bar."""
        if self._bar is not None:
            self._bar.close()
