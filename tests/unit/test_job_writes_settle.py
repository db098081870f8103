"""A cancelled job's write in a worker thread finishes before the cancellation reaches its caller: no file
is still being written once the job (and its lock on the output folder) has ended."""

from __future__ import annotations

import asyncio
import threading

from vllm_tasks.jobs.files import write_in_thread


def test_a_cancelled_caller_waits_for_its_write() -> None:
    started, returned = threading.Event(), threading.Event()
    order: list[str] = []

    def write() -> None:
        started.set()
        returned.wait(2)  # without the wait on the thread, the caller returns first and sets it
        order.append("write finished")

    async def main() -> None:
        task = asyncio.create_task(write_in_thread(write))
        await asyncio.to_thread(started.wait)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            order.append("caller cancelled")
            returned.set()

    asyncio.run(main())
    assert order == ["write finished", "caller cancelled"]


def test_the_result_and_errors_come_back() -> None:
    assert asyncio.run(write_in_thread(lambda a, b: a + b, 2, b=3)) == 5

    def fails() -> None:
        raise OSError("disk")

    async def main() -> str:
        try:
            await write_in_thread(fails)
        except OSError as error:
            return str(error)
        return "no error"

    assert asyncio.run(main()) == "disk"
