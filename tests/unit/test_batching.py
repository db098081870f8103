from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vllm_tasks.batching import plan_batches


def test_plan_batches_cuts_by_count_and_size() -> None:
    assert plan_batches([1] * 5, 2, 100) == [range(0, 2), range(2, 4), range(4, 5)]
    assert plan_batches([5, 5, 5], 10, 10) == [range(0, 2), range(2, 3)]
    assert plan_batches([50, 1], 10, 10) == [range(0, 1), range(1, 2)]
    assert plan_batches([], 3, 10) == []


@given(st.lists(st.integers(0, 50), max_size=60), st.integers(1, 8), st.integers(1, 100))
def test_plan_batches_cover_every_item_once_within_limits(
    sizes: list[int], batch_size: int, max_size: int
) -> None:
    batches = plan_batches(sizes, batch_size, max_size)
    assert [i for batch in batches for i in batch] == list(range(len(sizes)))
    for batch in batches:
        assert 1 <= len(batch) <= batch_size
        assert len(batch) == 1 or sum(sizes[i] for i in batch) <= max_size


def reference_batches(sizes: list[int], batch_size: int, max_size: int) -> list[range]:
    """The item-by-item rule, without plan_batches' fast path for inputs that never reach max_size."""
    batches, start, current = [], 0, 0
    for index, size in enumerate(sizes):
        if index > start and (index - start >= batch_size or current + size > max_size):
            batches.append(range(start, index))
            start, current = index, 0
        current += size
    return [*batches, range(start, len(sizes))] if start < len(sizes) else batches


@given(st.lists(st.integers(0, 50), max_size=200), st.integers(1, 16), st.integers(1, 1000))
def test_the_fast_path_cuts_exactly_as_the_item_by_item_rule(
    sizes: list[int], batch_size: int, max_size: int
) -> None:
    assert plan_batches(sizes, batch_size, max_size) == reference_batches(sizes, batch_size, max_size)
