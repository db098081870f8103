"""Every registered call attacked with every hostile answer that applies to it (tests/hostile/): it must
give the same result as on a clean server, or raise a typed error, within the time limit; a retried
transient failure must give the right result. Never another exception, a hang, or a different result."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vllm_tasks.testing import FakeVLLM

from ..hostile.answers import ANSWER_CASES, Hits
from ..hostile.registry import REGISTRY, Env, started_servers
from ..hostile.run import TIME_LIMIT, bounded, capped_memory, comparable


@pytest.fixture(scope="module", autouse=True)
def memory_cap() -> Iterator[None]:
    """A call that reads ``/dev/zero`` whole gets a MemoryError, not the machine's memory."""
    with capped_memory():
        yield


ATTACKS = [
    pytest.param(name, index, case, id=f"{name}{'[' + call.label + ']' if call.label else ''}-{case}")
    for name, calls in REGISTRY.items()
    for index, call in enumerate(calls)
    for case in call.cases
]
_CLEAN: dict[tuple[str, int], tuple[Any, list[str], Any]] = {}


@pytest.fixture(scope="module")
def fakes() -> Iterator[dict[str, FakeVLLM]]:
    with started_servers() as servers:
        yield servers


def clean_run(name: str, index: int, fake: FakeVLLM, tmp: Path) -> tuple[Any, list[str], Any]:
    """The call's result on the clean server (comparable), the paths it requested, and the result itself
    (cached per call)."""
    if (name, index) not in _CLEAN:
        fake.clear_requests()
        outcome = bounded(lambda: REGISTRY[name][index].run(Env(fake, tmp)))
        assert not outcome.hung and outcome.error is None, f"the clean call failed:\n{outcome.trace}"
        assert getattr(outcome.value, "code", 0) == 0, f"the clean command failed: {outcome.value}"
        _CLEAN[name, index] = (comparable(outcome.value), [r.path for r in fake.requests], outcome.value)
    return _CLEAN[name, index]


@pytest.mark.parametrize(("name", "index", "case"), ATTACKS)
def test_hostile_answer(name: str, index: int, case: str, fakes: dict[str, FakeVLLM], tmp_path: Path) -> None:
    call = REGISTRY[name][index]
    assert call.server is not None
    fake = fakes[call.server]
    fake.clear_faults()
    expected, paths, clean = clean_run(name, index, fake, tmp_path / "clean")
    attack, hits = ANSWER_CASES[case], Hits()
    attack.apply(fake, paths, hits)
    try:
        outcome = bounded(lambda: call.run(Env(fake, tmp_path / "hostile")))
    finally:
        fake.clear_faults()
    assert not outcome.hung, f"no answer after {TIME_LIMIT} s"
    assert hits.changed, f"{case} found nothing to change in this call's answers: not a case of it"
    if outcome.error is not None:
        assert isinstance(outcome.error, call.errors), f"untyped error:\n{outcome.trace}"
        assert not attack.must_succeed, f"a retried transient failure, then:\n{outcome.trace}"
        return
    if call.accepts is not None and not attack.must_succeed and call.accepts(clean)(outcome.value):
        return
    assert comparable(outcome.value) == expected, "a different result than on a clean server"
