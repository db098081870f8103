"""``concurrency="auto"`` (``vllm_tasks.adaptive.AdaptiveLimit``) against a capacity model of a server, in
virtual time (issue 25): N slots, a cost per request, a bounded queue answering 503 when full, a network
gap each way. The limit is compared with every fixed concurrency 1..64 run against the same model: it
must reach 0.95x the best fixed one's throughput at no more than 1.5x its p95 latency and no more 503s.
No clock is read: the assertions are on what the model counts, not on timings."""

from __future__ import annotations

import functools
import heapq
import itertools
import random
import statistics
from collections import deque
from dataclasses import dataclass

import pytest

from vllm_tasks.adaptive import CEILING, KV_FULL, KV_HIGH, AdaptiveLimit, Goal
from vllm_tasks.engine_metrics import EngineLoad

PROMPTS = 8
"""The engine requests in one of ours (vLLM runs a batch of 8 texts as 8)."""


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
    the server's /metrics after an answer, at most every ``metrics`` seconds, as vLLM counts them (each
    request :data:`PROMPTS` engine requests; the requests still on their way are not in them)."""
    limit = AdaptiveLimit(goal=goal)
    sampled_at = -1.0
    rng = random.Random(1)

    def jittered(seconds: float) -> float:
        return seconds * rng.lognormvariate(0.0, jitter) if jitter else seconds

    # (time, order, kind, sent_at, arrived_at, started_at)
    events: list[tuple[float, int, str, float, float, float]] = []
    order = itertools.count()
    busy, waiting = 0, deque[tuple[float, float]]()
    finished, queued, ran = 0, 0.0, 0.0  # what vLLM's histograms sum, in prompts
    in_flight, done, rejected, now = 0, 0, 0, 0.0
    latencies: list[float] = []
    first_counted = None

    def allowed() -> int:
        return fixed if fixed is not None else limit.allowed

    def send() -> None:
        nonlocal in_flight
        in_flight += 1
        heapq.heappush(events, (now + jittered(gap), next(order), "arrive", now, 0.0, 0.0))

    def serve(sent: float, arrived: float) -> None:
        heapq.heappush(events, (now + jittered(cost), next(order), "served", sent, arrived, now))

    while done < answers:
        while in_flight < allowed():
            send()
        now, _, kind, sent, arrived, started = heapq.heappop(events)
        if kind == "arrive":
            if busy < slots:
                busy += 1
                serve(sent, now)
            elif len(waiting) < queue_cap:
                waiting.append((sent, now))
            else:
                heapq.heappush(events, (now + jittered(gap), next(order), "rejected", sent, 0.0, 0.0))
        elif kind == "served":
            finished, queued, ran = (
                finished + PROMPTS,
                queued + PROMPTS * (started - arrived),
                ran + PROMPTS * (now - started),
            )
            heapq.heappush(events, (now + jittered(gap), next(order), "answer", sent, 0.0, 0.0))
            if waiting:
                serve(*waiting.popleft())
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
                gauges = (PROMPTS * busy, PROMPTS * len(waiting), 0.0)
                limit.sampled(EngineLoad(*gauges, finished, queued, ran), now)
                sampled_at = now
            if done == answers // 3:  # measured after the start-up
                first_counted = now
            if done > answers // 3:
                latencies.append(now - sent)
    assert first_counted is not None
    p95 = statistics.quantiles(latencies, n=20)[-1]
    return Outcome(len(latencies) / (now - first_counted), p95, rejected, fixed or limit.settled)


@functools.cache
def best_fixed(slots: int, cost: float, gap: float, jitter: float) -> tuple[dict[int, Outcome], int]:
    """Every fixed concurrency against the model, and the best of them (the highest throughput; of those
    within 1% of it, the lowest p95)."""
    sweep = {
        fixed: simulate(slots, cost, fixed=fixed, gap=gap, jitter=jitter)
        for fixed in range(1, CEILING + 1, 1 if slots < 8 else 2)
    }
    top = max(outcome.throughput for outcome in sweep.values())
    best = min((f for f, o in sweep.items() if o.throughput >= 0.99 * top), key=lambda f: sweep[f].p95)
    return sweep, best


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
    sweep, best = best_fixed(slots, cost, gap, jitter)
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
def test_auto_from_the_metrics_reaches_the_best_fixed_concurrency(
    slots: int, cost: float, gap: float, jitter: float, goal: Goal
) -> None:
    sweep, best = best_fixed(slots, cost, gap, jitter)
    auto = simulate(slots, cost, fixed=None, gap=gap, jitter=jitter, metrics=0.05, goal=goal)
    assert auto.throughput >= 0.95 * sweep[best].throughput, (auto, best, sweep[best])
    assert auto.p95 <= 1.5 * sweep[best].p95 + 2 * gap, (auto, best, sweep[best])
    assert auto.rejected == 0


@pytest.mark.parametrize("queue_cap", [0, 1, 2, 3])
def test_auto_from_the_metrics_meets_no_more_503s_than_latency_only(queue_cap: int) -> None:
    # 2 slots and a short queue (a proxy's cap, which the metrics do not show): no more 503s than the
    # latency-only limit, and none once the queue has room for the target and the start's doubling
    # (twice the 2 slots and 1 waiting: 6 in the server)
    engine = simulate(2, 0.01, fixed=None, queue_cap=queue_cap, gap=0.001, jitter=0.05, metrics=0.05)
    latency = simulate(2, 0.01, fixed=None, queue_cap=queue_cap, gap=0.001, jitter=0.05)
    assert engine.rejected <= latency.rejected
    assert engine.throughput >= 0.95 * latency.throughput
    if queue_cap >= 2 * (2 + 1) - 2:
        assert engine.rejected == 0


def test_a_sample_steers_the_limit_and_latencies_no_longer_do() -> None:
    limit = AdaptiveLimit(goal="throughput")  # a server without the histograms: the gauges are read
    limit.sampled(EngineLoad(running=0, waiting=0), now=0.0)
    assert limit.engine and limit.allowed == 2  # no queue: the start doubles
    for step in range(500):
        limit.answered(0.01 * (1 + step % 7))  # latencies that latency-only would read as a queue
    assert limit.allowed == 2
    limit.sampled(EngineLoad(running=2, waiting=1), now=1.0)  # the target (1) waits: the start ends
    assert limit.allowed == 2 and not limit.starting
    limit.answered(0.1), limit.answered(0.1)
    limit.sampled(EngineLoad(running=2, waiting=0), now=2.0)
    assert limit.allowed == 3  # one more: a round trip showed room
    limit.sampled(EngineLoad(running=3, waiting=0), now=3.0)
    assert limit.allowed == 3  # not a round trip at 3 since: no decision
    for _ in range(3):
        limit.answered(0.1)
    limit.sampled(EngineLoad(running=3, waiting=9), now=4.0)  # over 2 x 1 + 1 waiting: the excess goes
    assert limit.allowed == 1
    limit.overloaded()  # a 503 still backs off
    assert limit.allowed == 1 and limit.overloads == 1


def test_the_histograms_give_the_averages_over_a_round_trip_in_our_requests() -> None:
    # 8 prompts a request; over 1 s the finished ones waited 16 s and ran 32 s in all: on average 2 of
    # ours waited and 4 ran (whatever the gauges say at the instant of the sample)
    limit = AdaptiveLimit(value=6.0, goal="throughput")
    limit.sampled(EngineLoad(0, 0, None, finished=0, queue_seconds=0, inference_seconds=0), now=10.0)
    assert limit.allowed == 6  # the first sample starts the window
    for _ in range(5):
        limit.answered(1.0)
    later = EngineLoad(0, 0, None, finished=48, queue_seconds=16, inference_seconds=32)
    limit.sampled(later, now=11.0)
    assert limit.allowed == 6  # 5 answers: not yet a round trip at 6, no decision
    limit.answered(1.0)
    limit.sampled(later, now=11.0)
    assert limit.allowed == 6 and not limit.starting  # 2 waiting of a target of 1: too many to grow
    for _ in range(6):
        limit.answered(1.0)
    limit.sampled(EngineLoad(0, 0, None, finished=96, queue_seconds=16, inference_seconds=64), now=12.0)
    assert limit.allowed == 7  # none waited in that second: 6 kept in flight, 1 more


def test_a_full_kv_cache_shrinks_the_limit_and_a_nearly_full_one_stops_its_growth() -> None:
    limit = AdaptiveLimit(value=20.0, goal="throughput", starting=False)

    def round_trip() -> None:
        for _ in range(limit.allowed):
            limit.answered(0.1)

    limit.sampled(EngineLoad(running=20, waiting=0, kv_cache_usage=KV_HIGH), now=0.0)
    assert limit.allowed == 20  # room in the queue, but the cache is nearly full
    round_trip()
    limit.sampled(EngineLoad(running=20, waiting=0, kv_cache_usage=KV_FULL), now=1.0)
    assert limit.allowed == 18
    round_trip()
    limit.sampled(EngineLoad(running=18, waiting=0, kv_cache_usage=0.5), now=2.0)
    assert limit.allowed == int(18 + 18 / 4)  # the target: a quarter of 18 running


def test_a_limit_the_caller_does_not_fill_does_not_grow() -> None:
    # 10 allowed, 2 kept in flight on average over the round trip: 2 + 1 of room, not 10 + 1
    limit = AdaptiveLimit(value=10.0, starting=False)
    limit.sampled(EngineLoad(0, 0, None, finished=0, queue_seconds=0, inference_seconds=0), now=0.0)
    for _ in range(10):
        limit.answered(0.2)  # 2 s of answers in 1 s: 2 in flight on average
    limit.sampled(EngineLoad(0, 0, None, finished=10, queue_seconds=0, inference_seconds=2), now=1.0)
    assert limit.allowed == 10
