"""Every registered call without a server (result conversions and renderers, ``maxsim``, ``unpackbits``,
settings and params, paths given to results) with its hostile input (tests/hostile/inputs.py): a typed error
or a right value within the time limit; never another exception, a hang, or a wrong value."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..hostile.inputs import release
from ..hostile.registry import REGISTRY, Env
from ..hostile.run import bounded, capped_memory, input_verdict


@pytest.fixture(scope="module", autouse=True)
def memory_cap() -> Iterator[None]:
    """A call that reads ``/dev/zero`` whole gets a MemoryError, not the machine's memory."""
    with capped_memory():
        yield


LOCAL = [
    pytest.param(name, index, id=f"{name}[{call.label}]")
    for name, calls in REGISTRY.items()
    for index, call in enumerate(calls)
    if call.server is None and not call.cases
]


@pytest.mark.parametrize(("name", "index"), LOCAL)
def test_hostile_input(name: str, index: int, tmp_path: Path) -> None:
    call = REGISTRY[name][index]
    assert call.check is not None
    outcome = bounded(lambda: call.run(Env(None, tmp_path)))
    release(tmp_path)
    verdict = input_verdict(outcome, call.errors, call.check)
    assert not verdict, verdict
