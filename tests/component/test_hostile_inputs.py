"""Every registered call with a hostile input that reaches a server (image and audio paths that are not
regular files, private and wrong-type URLs with ``refuse_private``; tests/hostile/inputs.py): a typed error
or a right value within the time limit; never another exception, a hang, or a wrong value."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from vllm_tasks.testing import FakeVLLM

from ..hostile.inputs import release
from ..hostile.registry import REGISTRY, Env, started_servers
from ..hostile.run import bounded, capped_memory, input_verdict


@pytest.fixture(scope="module", autouse=True)
def memory_cap() -> Iterator[None]:
    """A call that reads ``/dev/zero`` whole gets a MemoryError, not the machine's memory."""
    with capped_memory():
        yield


REMOTE = [
    pytest.param(name, index, id=f"{name}[{call.label}]")
    for name, calls in REGISTRY.items()
    for index, call in enumerate(calls)
    if call.server is not None and not call.cases
]


@pytest.fixture(scope="module")
def fakes() -> Iterator[dict[str, FakeVLLM]]:
    with started_servers() as servers:
        yield servers


@pytest.mark.parametrize(("name", "index"), REMOTE)
def test_hostile_input(name: str, index: int, fakes: dict[str, FakeVLLM], tmp_path: Path) -> None:
    call = REGISTRY[name][index]
    assert call.server is not None and call.check is not None
    outcome = bounded(lambda: call.run(Env(fakes[call.server], tmp_path)))
    release(tmp_path)
    verdict = input_verdict(outcome, call.errors, call.check)
    assert not verdict, verdict
