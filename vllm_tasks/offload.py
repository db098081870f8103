"""Running CPU-heavy work (audio decode and encode, PDF rendering, image resize, large decodes) off the
event loop: ``AsyncClient`` code awaits ``async_offload`` (a worker thread), and ``scripts/unasync.py``
turns that into ``sync_offload`` (a direct call) in the generated ``Client``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


async def async_offload(function: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``function(*args, **kwargs)`` in a worker thread, so the event loop keeps serving."""
    return await asyncio.to_thread(function, *args, **kwargs)


def sync_offload(function: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``function(*args, **kwargs)`` here: the sync twin of :func:`async_offload`."""
    return function(*args, **kwargs)
