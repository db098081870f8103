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

from vllm_tasks.adaptive import CEILING, AdaptiveLimit


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
) -> Outcome:
    """A closed-loop client keeping ``fixed`` (else the adaptive limit's) requests in flight against a
    server of ``slots`` slots, ``cost`` seconds per request, at most ``queue_cap`` waiting (503 beyond),
    ``gap`` seconds of network each way; ``jitter``: each cost and gap times a log-normal factor of that
    sigma (a loaded machine), from a seeded generator."""
    limit = AdaptiveLimit()
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
