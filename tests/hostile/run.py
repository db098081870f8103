"""Running one entry point's call under the harness's rules: in a worker thread, within a time limit, its
outcome judged against the same call on a clean server."""

from __future__ import annotations

import contextlib
import inspect
import math
import resource
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pydantic

SERVER_MADE = frozenset({"id", "created", "request_id"})
"""Fields the server makes up per answer (random ids, clocks): not part of a result's content."""

TIME_LIMIT = 10.0
"""Seconds a hostile call may take before it counts as a hang."""


@dataclass
class Outcome:
    """What a call did: its ``value``, or the ``error`` it raised, or ``hung``."""

    value: Any = None
    error: BaseException | None = None
    hung: bool = False
    trace: str = ""


def finished(value: Any) -> Any:
    """A sync entry's return value run to its end (a transcription stream to its final result)."""
    return value.until_done() if hasattr(value, "until_done") else value


async def afinished(value: Any) -> Any:
    """An async entry's return value run to its end: awaited, and a stream to its final result."""
    if inspect.isawaitable(value):
        value = await value
    return await value.until_done() if hasattr(value, "until_done") else value


def bounded(call: Callable[[], Any], limit: float = TIME_LIMIT) -> Outcome:
    """``call()`` in a daemon thread; ``hung`` when it has not ended after ``limit`` seconds."""
    outcome = Outcome()

    def target() -> None:
        try:
            outcome.value = call()
        except BaseException as error:  # judged by the caller, whatever it is
            outcome.error = error
            outcome.trace = traceback.format_exc()

    worker = threading.Thread(target=target, name="hostile-call", daemon=True)
    worker.start()
    worker.join(limit)
    outcome.hung = worker.is_alive()
    return outcome


def comparable(value: Any) -> Any:
    """``value`` as plain data that compares by content (arrays by dtype, shape and bytes; NaN equal to
    NaN; models by their fields; paths by the files they name)."""
    if isinstance(value, pydantic.BaseModel):
        fields = {k: getattr(value, k) for k in type(value).model_fields}
        return (type(value).__name__, comparable(fields))
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return ("objects", value.shape, [comparable(item) for item in value.ravel()])
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, dict):
        return {str(k): comparable(v) for k, v in value.items() if k not in SERVER_MADE}
    if isinstance(value, list | tuple):
        return [comparable(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, np.generic):
        return comparable(value.item())
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "__dataclass_fields__"):
        return (type(value).__name__, {k: comparable(getattr(value, k)) for k in value.__dataclass_fields__})
    return value


def input_verdict(
    outcome: Outcome, errors: tuple[type[BaseException], ...], check: Callable[[Any], bool]
) -> str:
    """Why a hostile input's outcome is wrong ("" when it is right: a typed error, or a value ``check``
    accepts, within the time limit)."""
    if outcome.hung:
        return f"no answer after {TIME_LIMIT} s"
    if outcome.error is not None:
        return "" if isinstance(outcome.error, errors) else f"untyped error:\n{outcome.trace}"
    return "" if check(outcome.value) else f"a wrong result, not refused: {outcome.value!r:.300}"


MEMORY_HEADROOM = 3 << 30
"""Bytes of address space a hostile call may add before it gets a MemoryError (``/dev/zero`` read whole
would otherwise take the machine's memory)."""


@contextlib.contextmanager
def capped_memory() -> Iterator[None]:
    """Cap this process's address space at its current size plus :data:`MEMORY_HEADROOM`."""
    with open("/proc/self/statm") as statm:
        size = int(statm.read().split()[0]) * resource.getpagesize()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = size + MEMORY_HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
