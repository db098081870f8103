"""``concurrency="auto"`` bounds the client's requests in flight per route: concurrent calls (sync threads,
async tasks) share one limit, a retry takes a slot under the limit as it is then, and a ``Retry-After``
over the cap fails its call and holds nothing afterwards. Asserted on what the FakeVLLM counted (its
``slots`` serve at once, a request past them is refused with 503), never on timings."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import vllm_tasks as vt
from vllm_tasks.adaptive import AdaptiveLimit
from vllm_tasks.testing import FakeVLLM

ROUTE = "/v1/embeddings"
CALLS = 8


def texts(call: int, count: int = 6) -> list[str]:
    return [f"call {call} text {index}" for index in range(count)]


def route_limit(client: Any, value: float, *, fixed: bool = False) -> AdaptiveLimit:
    """Set the client's ``auto`` limit of the embeddings route (as if learned from earlier answers)."""
    limit = AdaptiveLimit(value=value, starting=False)
    if fixed:
        limit.floor = limit.ceiling = int(value)
    client._transport.route_limit(ROUTE).limit = limit
    return limit


def test_threads_on_one_client_share_its_limit() -> None:
    with FakeVLLM(slots=3, queue_limit=0, latency=0.02) as fake, vt.Client(fake.url, max_retries=0) as client:
        client.server_info()
        route_limit(client, 3, fixed=True)
        together = threading.Barrier(CALLS)

        def call(index: int) -> vt.EmbeddingResult:
            together.wait()
            return client.embed(texts(index), batch_size=1, concurrency="auto")

        with ThreadPoolExecutor(CALLS) as pool:
            results = list(pool.map(call, range(CALLS)))
        load = fake.load
    assert [result.vectors.shape[0] for result in results] == [6] * CALLS
    assert load.rejected == 0 and load.most_in_server <= 3


def test_tasks_on_one_async_client_share_its_limit() -> None:
    async def main(url: str) -> list[vt.EmbeddingResult]:
        async with vt.AsyncClient(url, max_retries=0) as client:
            await client.server_info()
            route_limit(client, 3, fixed=True)
            calls = [client.embed(texts(index), batch_size=1, concurrency="auto") for index in range(CALLS)]
            return await asyncio.gather(*calls)

    with FakeVLLM(slots=3, queue_limit=0, latency=0.02) as fake:
        results = asyncio.run(main(fake.url))
        load = fake.load
    assert [result.vectors.shape[0] for result in results] == [6] * CALLS
    assert load.rejected == 0 and load.most_in_server <= 3


def test_retries_after_a_retry_after_wait_for_a_slot_under_the_lowered_limit(
    make_client: Callable[..., Any],
) -> None:
    # 6 in flight on 2 slots: 4 are refused with Retry-After, and the limit backs off; sent again all at
    # once (above the limit), the 4 would meet the 2 slots busy with the batches sent under it. The limit
    # learns nothing from answers here (it would grow back past the 2 slots and be refused again, by
    # design): under the limit, the refusals stop once three have brought it to 2 (6 x 0.7^3); a busy
    # machine may send the first 6 slowly enough to refuse fewer. Requests sent above the limit would be
    # refused on and on. Without /metrics: their samples would teach it too.
    with FakeVLLM(slots=2, queue_limit=0, retry_after=1, latency=0.1, metrics=False) as fake:
        client = make_client(fake.url, max_retries=2)
        client.server_info()
        limit = route_limit(client, 6)
        limit.answered = lambda seconds: None  # type: ignore[method-assign]
        result = client.embed(texts(0, 24), batch_size=1, concurrency="auto")
        assert result.vectors.shape[0] == 24
        assert limit.overloads == fake.load.rejected
        assert 1 <= fake.load.rejected <= 4


def test_a_retry_after_over_the_cap_fails_its_call_and_holds_nothing(
    no_sleep: list[float], make_client: Callable[..., Any]
) -> None:
    with FakeVLLM() as fake:
        client = make_client(fake.url, max_retries=2)
        fake.fail(503, path=ROUTE, times=1, retry_after=3600)
        with pytest.raises(vt.ServiceUnavailableError) as caught:
            client.embed(["a"], concurrency="auto")
        assert caught.value.retry_after == 3600  # type: ignore[attr-defined]
        client.embed(["b", "c"], batch_size=1, concurrency="auto")
        client.pool(["d"], concurrency="auto")
    assert no_sleep == []


def test_a_retry_after_within_the_cap_holds_that_route_once(
    no_sleep: list[float], make_client: Callable[..., Any]
) -> None:
    with FakeVLLM() as fake:
        client = make_client(fake.url, max_retries=2)
        fake.fail(503, path=ROUTE, times=1, retry_after=5)
        assert client.embed(["a"], concurrency="auto").vectors.shape[0] == 1
    assert len(no_sleep) >= 1 and all(0 < seconds <= 5 for seconds in no_sleep)
