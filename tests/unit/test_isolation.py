"""The one row-isolation loop (``vllm_tasks._async.isolation``; its sync twin is generated): the engine
of ``embed_file`` and the Ray callables both use it (issue 24: it was written twice)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

import vllm_tasks as vt
from vllm_tasks._async.isolation import isolate_rows as isolate_rows_async
from vllm_tasks._sync.isolation import isolate_rows


def _refusing(bad: set[int], sent: list[list[int]]):  # type: ignore[no-untyped-def]
    def send(rows: Sequence[int]) -> list[int]:
        sent.append(list(rows))
        if bad & set(rows):
            raise vt.InvalidInputError("input", list(rows), "holds a bad row", "Leave it out.")
        return [row * 10 for row in rows]

    return send


@given(st.integers(1, 64).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1)))))
def test_every_good_row_gets_its_result_and_every_bad_row_its_error(case: tuple[int, set[int]]) -> None:
    count, bad = case
    sent: list[list[int]] = []
    refused: dict[int, Exception] = {}
    done = isolate_rows(_refusing(bad, sent), range(count), refused.__setitem__)
    results = {row: value for rows, values in done for row, value in zip(rows, values, strict=True)}
    assert results == {row: row * 10 for row in range(count) if row not in bad}
    assert set(refused) == bad
    assert [row for rows, _ in done for row in rows] == sorted(results)  # in row order
    if len(bad) == 1:  # about 2 * log2(n) extra requests for one bad row
        assert len(sent) <= 1 + 2 * max(1, (count - 1).bit_length())


def test_the_async_loop_is_the_same_loop() -> None:
    sent: list[list[int]] = []
    refused: dict[int, Exception] = {}
    send = _refusing({2}, sent)

    async def send_async(rows: Sequence[int]) -> list[int]:
        return send(rows)

    done = asyncio.run(isolate_rows_async(send_async, [0, 1, 2, 3], refused.__setitem__))
    assert [(list(rows), values) for rows, values in done] == [([0, 1], [0, 10]), ([3], [30])]
    assert list(refused) == [2]


def test_an_error_not_about_a_row_is_raised_at_once() -> None:
    sent: list[list[int]] = []

    def send(rows: Sequence[int]) -> None:
        sent.append(list(rows))
        raise vt.APIConnectionError("down")

    with pytest.raises(vt.APIConnectionError):
        isolate_rows(send, range(8), lambda row, error: None)
    assert sent == [list(range(8))]  # not split: the server, not a row, failed


def test_refused_may_stop_at_the_first_bad_row() -> None:
    def stop(row: int, error: Exception) -> None:
        raise vt.jobs.RowFailed(row, row, str(error))

    with pytest.raises(vt.jobs.RowFailed):
        isolate_rows(_refusing({5}, []), range(8), stop)


def test_no_rows_send_nothing() -> None:
    assert isolate_rows(_refusing(set(), []), [], lambda row, error: None) == []
