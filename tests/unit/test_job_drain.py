"""The job engine's window of groups (``jobs.engine.drain``): how the first fatal error ends it."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from vllm_tasks.jobs.engine import drain


def test_groups_that_fail_together_raise_the_first_error_and_leave_none_unretrieved() -> None:
    """Two groups that fail at once: one error is raised, and the other's is retrieved, not left for
    asyncio to log as "Task exception was never retrieved" when the task is collected."""
    unretrieved: list[str] = []
    committed: list[Any] = []

    async def fail(group: int) -> int:
        raise ValueError(f"group {group}")

    async def run() -> None:
        asyncio.get_running_loop().set_exception_handler(
            lambda _loop, context: unretrieved.append(str(context.get("message")))
        )
        with pytest.raises(ValueError, match="group"):
            await drain(iter([1, 2]), fail, committed.append, window=2)
        gc.collect()

    asyncio.run(run())
    gc.collect()
    assert committed == [] and unretrieved == []
