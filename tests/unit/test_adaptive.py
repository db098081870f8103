"""``concurrency="auto"`` (``vllm_tasks.adaptive.AdaptiveLimit``) against a capacity model of a server, in
virtual time (issue 25): N slots, a cost per request, a bounded queue answering 503 when full, a network
gap each way. The limit is compared with every fixed concurrency 1..64 run against the same model: it
must reach 0.95x the best fixed one's throughput at no more than 1.5x its p95 latency and no more 503s.
No clock is read: the assertions are on what the model counts, not on timings."""

from __future__ import annotations

import heapq
import itertools
import random
import statistics
from collections import deque
from dataclasses import dataclass

import pytest

from vllm_tasks.adaptive import CEILING, KV_FULL, KV_HIGH, AdaptiveLimit, Goal
from vllm_tasks.engine_metrics import EngineLoad


@dataclass
class Outcome:
    throughput: float
    p95: float
    rejected: int
    limit: int


def simulate(
    slots: int,
    cost: float,
    *,
    fixed: int | None,
    answers: int = 3000,
    queue_cap: int = 64,
    gap: float = 0.0,
    jitter: float = 0.0,
    metrics: float | None = None,
    goal: Goal = "latency",
) -> Outcome:
    """A closed-loop client keeping ``fixed`` (else the adaptive limit's) requests in flight against a
    server of ``slots`` slots, ``cost`` seconds per request, at most ``queue_cap`` waiting (503 beyond),
    ``gap`` seconds of network each way; ``jitter``: each cost and gap times a log-normal factor of that
    sigma (a loaded machine), from a seeded generator. ``metrics``: the limit (aiming at ``goal``) is fed
    the server's running and waiting requests after an answer, at most every ``metrics`` seconds, as
    they are when the answer arrives (the requests still on their way to the server are not in them)."""
    limit = AdaptiveLimit(goal=goal)
    sampled_at = -1.0
    rng = random.Random(1)

    def jittered(seconds: float) -> float:
        return seconds * rng.lognormvariate(0.0, jitter) if jitter else seconds

    events: list[tuple[float, int, str, float]] = []  # (time, order, kind, sent_at)
    order = itertools.count()
    busy, waiting = 0, deque[float]()
    in_flight, done, rejected, now = 0, 0, 0, 0.0
    latencies: list[float] = []
    first_counted = None

    def allowed() -> int:
        return fixed if fixed is not None else limit.allowed

    def send() -> None:
        nonlocal in_flight
        in_flight += 1
        heapq.heappush(events, (now + jittered(gap), next(order), "arrive", now))

    while done < answers:
        while in_flight < allowed():
            send()
        now, _, kind, sent = heapq.heappop(events)
        if kind == "arrive":
            if busy < slots:
                busy += 1
                heapq.heappush(events, (now + jittered(cost), next(order), "served", sent))
            elif len(waiting) < queue_cap:
                waiting.append(sent)
            else:
                heapq.heappush(events, (now + jittered(gap), next(order), "rejected", sent))
        elif kind == "served":
            heapq.heappush(events, (now + jittered(gap), next(order), "answer", sent))
            if waiting:
                heapq.heappush(events, (now + jittered(cost), next(order), "served", waiting.popleft()))
            else:
                busy -= 1
        else:  # an answer or a 503 reaches the client
            in_flight -= 1
            if kind == "rejected":
                rejected += 1
                limit.overloaded()
                continue
            done += 1
            limit.answered(now - sent)
            if metrics is not None and now - sampled_at >= metrics:
                limit.sampled(EngineLoad(busy, len(waiting), busy / slots / 2))
                sampled_at = now
            if done == answers // 3:  # measured after the start-up
                first_counted = now
            if done > answers // 3:
                latencies.append(now - sent)
    assert first_counted is not None
    p95 = statistics.quantiles(latencies, n=20)[-1]
    return Outcome(len(latencies) / (now - first_counted), p95, rejected, fixed or limit.settled)


# slots, cost, gap, jitter: the jittered ones are a loaded machine, where latency noise at 48 in flight
# once read as a queue (auto stopped at 29 of 48 slots, 0.58x the best throughput)
CAPACITIES = [
    (1, 0.05, 0.005, 0.0),
    (4, 0.02, 0.002, 0.0),
    (16, 0.1, 0.01, 0.0),
    (48, 0.2, 0.005, 0.0),
    (4, 0.02, 0.002, 0.05),
    (16, 0.1, 0.01, 0.05),
    (48, 0.2, 0.005, 0.05),
]


@pytest.mark.parametrize(
    ("slots", "cost", "gap", "jitter"),
    CAPACITIES,
    ids=[f"{c[0]}-slots" + (f"-jitter-{c[3]}" if c[3] else "") for c in CAPACITIES],
)
def test_auto_reaches_the_best_fixed_concurrency(slots: int, cost: float, gap: float, jitter: float) -> None:
    sweep = {
        fixed: simulate(slots, cost, fixed=fixed, gap=gap, jitter=jitter)
        for fixed in range(1, CEILING + 1, 1 if slots < 8 else 2)
    }
    top = max(outcome.throughput for outcome in sweep.values())
    best = min((f for f, o in sweep.items() if o.throughput >= 0.99 * top), key=lambda f: sweep[f].p95)
    auto = simulate(slots, cost, fixed=None, gap=gap, jitter=jitter)
    assert auto.throughput >= 0.95 * sweep[best].throughput, (auto, best, sweep[best])
    assert auto.p95 <= 1.5 * sweep[best].p95 + 2 * gap, (auto, best, sweep[best])
    assert auto.rejected <= sweep[best].rejected
    assert slots <= auto.limit <= max(slots + 2, int(1.5 * slots) + 1)


def test_a_full_queue_makes_it_back_off() -> None:
    # A server that takes 2 at a time and queues only 2: fixed 16 is refused (503) over and over, auto
    # settles where nothing is refused after the start
    fixed = simulate(2, 0.01, fixed=16, queue_cap=2, gap=0.001)
    auto = simulate(2, 0.01, fixed=None, queue_cap=2, gap=0.001)
    assert fixed.rejected > 1000
    assert auto.rejected < 20 and auto.limit <= 4
    assert auto.throughput >= 0.95 * fixed.throughput


def test_a_server_that_gets_slower_for_good_is_learned_again() -> None:
    limit = AdaptiveLimit()
    for _ in range(300):
        limit.answered(0.1)
    assert limit.allowed == CEILING  # never a queue: it grows to the ceiling
    for _ in range(3000):  # 3x slower for good, the same load: not read as a queue forever
        limit.answered(0.3)
    assert limit.allowed == CEILING


def test_the_limit_stays_within_its_bounds() -> None:
    limit = AdaptiveLimit()
    for _ in range(50):
        limit.overloaded()
    assert limit.allowed == 1
    for _ in range(5000):
        limit.answered(0.01)
    assert limit.allowed == CEILING


# --------------------------------------------------------------------------------------------------
# fed by the engine's /metrics (every 50 ms of virtual time): the queue is read, not guessed
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("goal", ["throughput", "latency"])
@pytest.mark.parametrize(
    ("slots", "cost", "gap", "jitter"),
    CAPACITIES,
    ids=[f"{c[0]}-slots" + (f"-jitter-{c[3]}" if c[3] else "") for c in CAPACITIES],
)
def test_auto_from_the_metrics_never_holds_more_than_the_slots_and_its_target(
    slots: int, cost: float, gap: float, jitter: float, goal: Goal
) -> None:
    # What the engine-fed limit guarantees whatever the timings: no 503, and never more in the server
    # than the slots plus its waiting target plus one. (Its throughput against the best fixed setting is
    # what benchmarks/concurrency_sweep.py prints: it settles under the slots where many requests are
    # not in the server when a sample is read.)
    auto = simulate(slots, cost, fixed=None, gap=gap, jitter=jitter, metrics=0.05, goal=goal)
    target = AdaptiveLimit(goal=goal).target(slots)
    assert auto.rejected == 0
    assert 2 <= auto.limit <= slots + target + 1


@pytest.mark.parametrize("goal", ["throughput", "latency"])
def test_auto_from_the_metrics_never_fills_a_short_queue(goal: Goal) -> None:
    # 2 slots, and room for the target's queue plus one: not one 503, even from the start (latency-only
    # meets some at the start: test_a_full_queue_makes_it_back_off)
    target = int(AdaptiveLimit(goal=goal).target(2))
    auto = simulate(
        2, 0.01, fixed=None, queue_cap=target + 1, gap=0.001, jitter=0.05, metrics=0.05, goal=goal
    )
    assert auto.rejected == 0 and 2 <= auto.limit <= 2 + target + 1


def test_a_sample_steers_the_limit_and_latencies_no_longer_do() -> None:
    limit = AdaptiveLimit(goal="throughput")
    limit.sampled(EngineLoad(running=0, waiting=0))
    assert limit.engine and limit.allowed == 0 + 2 + 1  # what the server holds, the room, one more
    for _ in range(500):
        limit.answered(0.01 * (1 + _ % 7))  # latencies that latency-only would read as a queue
    assert limit.allowed == 3
    limit.sampled(EngineLoad(running=3, waiting=0))
    assert limit.allowed == 3 + 2 + 1
    limit.sampled(EngineLoad(running=6, waiting=6))  # over 2 x 2 + 1 waiting: the excess goes at once
    assert limit.allowed == 6 - (6 - 2)
    limit.overloaded()  # a 503 still backs off
    assert limit.allowed == 1 and limit.overloads == 1


def test_a_full_kv_cache_shrinks_the_limit_and_a_nearly_full_one_stops_its_growth() -> None:
    limit = AdaptiveLimit(value=20.0, goal="throughput")
    limit.sampled(EngineLoad(running=20, waiting=0, kv_cache_usage=KV_HIGH))
    assert limit.allowed == 20  # room in the queue, but the cache is nearly full
    limit.sampled(EngineLoad(running=20, waiting=0, kv_cache_usage=KV_FULL))
    assert limit.allowed == 18
    limit.sampled(EngineLoad(running=18, waiting=0, kv_cache_usage=0.5))
    assert limit.allowed == int(18 + 18 / 4 + 1)  # a quarter of 18 running as the target


def test_a_sample_that_sees_fewer_of_its_requests_grows_it_no_further_than_those() -> None:
    # 10 allowed, the server saw 2 of them (the rest on their way): the limit does not grow past 2 + 1 + 1
    limit = AdaptiveLimit(value=10.0)
    limit.sampled(EngineLoad(running=2, waiting=0))
    assert limit.allowed == 10
