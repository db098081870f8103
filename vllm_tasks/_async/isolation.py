"""Row isolation, the one loop every batch caller uses (``embed_file``'s engine, the Ray callables): a
request refused for one row's sake is split in halves and each half sent again, down to single rows,
whose errors are handed to the caller; the other rows all get results.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from ..errors import is_about

Output = TypeVar("Output")


async def isolate_rows(
    send: Callable[[Sequence[int]], Awaitable[Output]],
    rows: Sequence[int],
    refused: Callable[[int, Exception], None],
) -> list[tuple[Sequence[int], Output]]:
    """``send`` the rows; when it fails for a row's sake (``error.scope == "row"``), send each half
    again, down to single rows, each of whose errors goes to ``refused``. A batch with one bad row costs
    about ``2 * log2(len(rows))`` extra requests.

    Args:
        send: sends the rows (their indices, a slice of ``rows``) and returns their results, in order.
        rows: the indices of the rows to send.
        refused: called with a row and its error (it may raise, to stop at the first one).

    Returns:
        The ``(rows, results)`` pairs that succeeded, in row order.

    Raises:
        Exception: whatever ``send`` raises that is not a row's error (connection, authentication, 5xx
            after retries), or ``refused`` raises.
    """
    if not rows:
        return []
    try:
        return [(rows, await send(rows))]
    except Exception as error:
        if not is_about(error, "row"):
            raise
        if len(rows) == 1:
            refused(rows[0], error)
            return []
    middle = len(rows) // 2
    return await isolate_rows(send, rows[:middle], refused) + await isolate_rows(send, rows[middle:], refused)
