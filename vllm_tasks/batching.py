"""Splitting long inputs into requests (shared by embeddings, scoring and the other batched tasks)."""

from __future__ import annotations

from collections.abc import Sequence


def plan_batches(sizes: Sequence[int], batch_size: int, max_size: int) -> list[range]:
    """Group consecutive items into batches of at most ``batch_size`` items and ``max_size`` in total.

    An item larger than ``max_size`` gets a batch of its own.

    Args:
        sizes: each item's size (characters, bytes of JSON, ...).
        batch_size: the most items per batch.
        max_size: the most total size per batch.

    Returns:
        Index ranges covering ``0..len(sizes)`` in order.

    Examples:
        >>> plan_batches([10] * 5, 2, 100)
        [range(0, 2), range(2, 4), range(4, 5)]
    """
    count = len(sizes)
    if sizes and max(sizes) * batch_size <= max_size:  # no batch can reach max_size: plain count steps
        return [range(start, min(start + batch_size, count)) for start in range(0, count, batch_size)]
    batches: list[range] = []
    start, current = 0, 0
    for index, size in enumerate(sizes):
        if index > start and (index - start >= batch_size or current + size > max_size):
            batches.append(range(start, index))
            start, current = index, 0
        current += size
    if start < len(sizes):
        batches.append(range(start, len(sizes)))
    return batches


def smaller_batches(batches: Sequence[range], sizes: Sequence[int]) -> tuple[int, int] | None:
    """After a 413 (a proxy's or server's body limit): halve the largest batch's count and bytes.

    Returns:
        The new ``(batch_size, max_bytes)``, or ``None`` when every batch already holds one item
        (nothing left to split).

    Examples:
        >>> smaller_batches([range(0, 4)], [10, 10, 10, 10])
        (2, 20)
    """
    largest = max(batches, key=len)
    if len(largest) <= 1:
        return None
    heaviest = max(sum(sizes[i] for i in batch) for batch in batches)
    return max(1, len(largest) // 2), max(1, heaviest // 2)
