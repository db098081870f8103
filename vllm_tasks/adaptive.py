"""``concurrency="auto"``: a limit on requests in flight that tunes itself from the server's ``/metrics``
(where it serves them: see "From the engine's own signals" below) or from the answers' latencies.

The right number of requests in flight depends on the server (model size, GPU, ``--max-num-seqs``, other
tenants): too few leaves the GPU idle, too many only fills vLLM's queue and raises latency. Without
``/metrics``, the limit reads the queue from latencies, as TCP Vegas does: ``smoothed`` is the answers'
latency smoothed over the last few, ``baseline`` its lowest value (no queueing; smoothed too, so that one
lucky answer is none); ``limit * (1 - baseline / smoothed)`` estimates the requests waiting in the
server's queue rather than being served.

The baseline comes from the start (the lowest smoothed latency after the first :data:`START` answers)
until the first probe, then from the probes alone (their median): between two probes a lucky streak of
fast answers cannot lower it, so latencies that are bimodal for reasons other than a queue (a loopback
server answering in about 40 or 70 ms for 20 ms of work) are not read as one.

- **Start**: from :data:`START` (one request), one more per answer while no queue shows (doubling per
  round trip).
- **Steady**: one more per ``limit`` answers (a round trip) while the queue estimate is under
  :data:`QUEUE_LOW` or :data:`QUEUE_LOW_SHARE` of the limit; one less per round trip while it is over
  :data:`QUEUE_HIGH_SHARE` of the limit (at least one request); the first time that happens, the
  estimated queue is taken off at once (the start's doubling overshoots by up to a round trip).
- **Overload** (429, 503, ``Retry-After``): the limit times :data:`OVERLOAD_FACTOR`, and no more start-up
  growth.

Every :data:`PROBE_ROUNDS` round trips the limit is halved for one round trip (after the requests already
in flight drained) and the baseline is measured again from those answers (their median), as BBR probes
for its round-trip time: a server that got slower for good (another tenant, a longer input mix) is
learned again rather than read as a queue forever, and a queue that never drains cannot pass for the
baseline.

**From the engine's own signals** (:meth:`AdaptiveLimit.sampled`): where the server serves ``/metrics``
(:mod:`vllm_tasks.engine_metrics`), the latencies steer nothing; the samples say how many of the
server's requests wait and run. Between two samples at least a round trip apart (``limit`` answers),
vLLM's histograms give the average number waiting ``W`` and running ``R`` over that time, counted in our
requests (the engine counts one per prompt: divided by the prompts it finished per answer of ours), and
the answers give ``H``, the average of ours in flight (Little's law: their seconds over the window's).
Without the histograms, the gauges at the sample's instant (``H``: the limit; the caps below, in what
the server holds, apply only to the averages). With the
waiting target ``T`` (:meth:`AdaptiveLimit.target`: a quarter of the running requests for a job's
throughput, at least :data:`JOB_WAITING`; a sixteenth for an interactive call's latency, at least
:data:`CALL_WAITING`):

- **Start**: while ``W < T`` the limit doubles what it kept in flight (``2 min(limit, H)``, at least one
  more); the first time ``W >= T`` (or it shrinks), the start ends;
- **Steady**: while ``W < T`` it grows to ``min(limit, H) + max(1, T - W)``: what it kept in flight,
  plus the room left in the queue (at least one). A limit the caller does not fill does not grow, and a
  step is taken only after a round trip at the limit before it showed room;
- while ``W > 2 T + 1`` it shrinks by ``W - T`` (at once: the engine says how many are too many);
- a KV cache at :data:`KV_FULL` or more shrinks it by a tenth (a full cache preempts running
  requests); from :data:`KV_HIGH` it does not grow;
- 429/503 and ``Retry-After`` back off as above, and for :data:`PROBE_ROUNDS` round trips the limit
  grows to no more than one under where the first came.

Read as averages over a round trip, the engine's queue is the same whenever the sample is taken (its
gauges are not: right after a batch ended they read an empty engine). A job keeps a few requests ready
for the engine's next step (throughput), a call keeps one (latency) and still grows while none waits
(its throughput floor). No clock is read here: the caller gives each answer's seconds and each sample
with its time, so the behaviour is the same in a test as on a GPU.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Literal

from .engine_metrics import EngineLoad

Concurrency = int | Literal["auto"]
"""Requests in flight (per server): a number, or ``"auto"``: an :class:`AdaptiveLimit` tuned from the
server's ``/metrics`` where it serves them, else from the answers' latencies."""

OVERLOAD_STATUSES = frozenset({429, 503})
"""Answers that make an ``auto`` limit back off (the server says it is overloaded)."""

START = 1
"""The limit before any answer: one request, so that the first answers measure the server's latency
without a queue of ours. Started at 4 (the fixed default), a server with fewer slots and a short queue
was overflowed (503s) before any queue could show in the latencies."""
CEILING = 64
"""The most requests in flight ``auto`` ever allows per server."""
QUEUE_LOW = 0.5
"""Grow while fewer requests than this (or than :data:`QUEUE_LOW_SHARE` of the limit) are estimated to
wait in the server's queue."""
QUEUE_LOW_SHARE = 0.1
"""Grow also while the queue estimate is under this share of the limit: the estimate scales with the
limit, so at 48 requests in flight a 2% jitter in latency reads as one request waiting (with 0.5 alone,
the limit stopped at 29 of 48 slots with 5% jitter in the capacity model, and at 38 over real HTTP)."""
QUEUE_HIGH_SHARE = 0.25
"""Shrink while more than this share of the limit (at least one request) waits in the queue."""
OVERLOAD_FACTOR = 0.7
"""The limit is multiplied by this on a 429 or 503 answer."""
SMOOTHING = 0.3
"""The weight of the newest answer in the smoothed latency."""
PROBE_ROUNDS = 30
"""Round trips (of ``limit`` answers each) between two measurements of the baseline at half the limit."""
JOB_WAITING = 1
"""A job's least waiting target (requests waiting in the engine's queue, from ``/metrics``)."""
JOB_WAITING_SHARE = 0.25
"""A job's waiting target as a share of the running batch: enough ready for the engine's next step."""
CALL_WAITING = 1
"""An interactive call's least waiting target."""
CALL_WAITING_SHARE = 1 / 16
"""An interactive call's waiting target as a share of the running batch."""
ON_THE_WAY = 0.25
"""Fed by ``/metrics``, the limit grows to at most the running requests, this share more (requests on
their way to the server and back: a network gap of up to an eighth of the service time each way), and
the waiting target plus one; past it, a client that reads its answers late (a loaded machine) would
fill the queue once it caught up."""
KV_HIGH = 0.9
"""From this KV-cache usage on, the limit does not grow."""
KV_FULL = 0.97
"""From this KV-cache usage on, the limit shrinks by a tenth per sample."""

Goal = Literal["throughput", "latency"]
"""What an ``auto`` limit fed by ``/metrics`` aims at: a job's rows per second (a few requests waiting),
or an interactive call's latency (one waiting)."""


@dataclass
class AdaptiveLimit:
    """How many requests may be in flight to one server now (see the module doc).

    Attributes:
        value: the limit now (fractional: it grows by fractions of a request).
        floor, ceiling: its bounds.
        starting: still in the start phase (growing by one per answer).
        answers, overloads: answers and overload answers seen.
        goal: what the limit aims at when fed by ``/metrics`` (see :meth:`sampled`).
        engine: fed by the engine's ``/metrics`` (after the first :meth:`sampled`); the latencies steer
            nothing then.

    Examples:
        >>> limit = AdaptiveLimit()
        >>> for _ in range(3):
        ...     limit.answered(0.1)
        >>> limit.allowed
        4
        >>> limit.overloaded()
        >>> limit.allowed
        2
    """

    value: float = START
    floor: int = 1
    ceiling: int = CEILING
    starting: bool = True
    answers: int = 0
    overloads: int = 0
    goal: Goal = "latency"
    engine: bool = False
    _baseline: float | None = None
    _smoothed: float | None = None
    _since_probe: int = 0
    _probe: list[float] | None = None
    _probe_drain: int = 0
    _probed: bool = False
    _window: tuple[float, EngineLoad, int, float] | None = None
    _origin: tuple[float, int] = (0.0, 0)
    _answered_seconds: float = 0.0
    _overload_cap: float = float(CEILING)
    _cap_until: int = 0

    @property
    def allowed(self) -> int:
        """The whole number of requests that may be in flight now (half the limit while probing)."""
        limit = max(self.floor, min(self.ceiling, int(self.value)))
        return max(self.floor, limit // 2) if self._probe is not None else limit

    @property
    def settled(self) -> int:
        """The whole limit, not halved by a probe: where it settled (what reports show)."""
        return max(self.floor, min(self.ceiling, int(self.value)))

    def queue(self) -> float:
        """The requests estimated to wait in the server's queue (0 before two answers).

        Examples:
            >>> limit = AdaptiveLimit(value=8.0)
            >>> for seconds in [0.1] * 6 + [0.2] * 2:
            ...     limit.answered(seconds)
            >>> round(limit.queue(), 2)
            3.13
        """
        if self._baseline is None or self._smoothed is None or self._smoothed <= 0:
            return 0.0
        return max(0.0, self.value * (1.0 - self._baseline / self._smoothed))

    def answered(self, seconds: float) -> None:
        """Learn from one answer that took ``seconds`` (from sending to the last byte)."""
        self.answers += 1
        self._answered_seconds += seconds
        if self.engine:
            return
        seconds = max(seconds, 1e-6)
        if self._probe is not None:
            self._probing(seconds)
            return
        previous = self._smoothed
        self._smoothed = seconds if previous is None else previous + SMOOTHING * (seconds - previous)
        # the lowest smoothed latency, not the lowest answer: one lucky answer is no baseline; and not
        # before START answers (the first ones, on fresh connections, are not what the server does)
        if self.answers > START and not self._probed:
            self._baseline = self._smoothed if self._baseline is None else min(self._baseline, self._smoothed)
        waiting = self.queue()
        if waiting < max(QUEUE_LOW, QUEUE_LOW_SHARE * self.value):
            self.value += 1.0 if self.starting else 1.0 / self.value
        elif waiting > max(1.0, QUEUE_HIGH_SHARE * self.value):
            # the start's doubling overshoots by up to a round trip: take the estimated queue off at once
            self.value -= waiting if self.starting else 1.0 / self.value
            self.starting = False
        self.value = float(max(self.floor, min(self.ceiling, self.value)))
        self._since_probe += 1
        if not self.starting and self._since_probe >= PROBE_ROUNDS * self.value:
            self._probe, self._probe_drain = [], int(self.value)  # the requests in flight answer first

    def target(self, running: float) -> float:
        """The requests to keep waiting in the engine's queue while ``running`` run (see the module doc)."""
        if self.goal == "throughput":
            return max(JOB_WAITING, JOB_WAITING_SHARE * running)
        return max(CALL_WAITING, CALL_WAITING_SHARE * running)

    def sampled(self, load: EngineLoad, now: float) -> None:
        """Learn from one sample of the engine's ``/metrics`` taken at ``now`` (seconds on the caller's
        monotonic clock; see the module doc); from the first one on, the latencies steer nothing.

        Examples:
            >>> limit = AdaptiveLimit(goal="throughput")  # a server without the histograms
            >>> limit.sampled(EngineLoad(running=1, waiting=0), now=0.0)  # no queue: doubled
            >>> limit.allowed
            2
            >>> limit.answered(0.1), limit.answered(0.1)  # a round trip at 2
            (None, None)
            >>> limit.sampled(EngineLoad(running=2, waiting=8), now=0.1)  # 8 waiting: 7 too many
            >>> limit.allowed
            1
        """
        if not self.engine:
            self.engine, self.starting, self._probe = True, True, None
        seen = self._averages(load, now)
        if seen is None:
            return
        held, waiting, running, averaged = seen
        before, usage = self.value, load.kv_cache_usage
        target = self.target(running)
        if usage is not None and usage >= KV_FULL:
            self.value -= max(1.0, 0.1 * self.value)
        elif waiting > 2 * target + 1:
            self.value -= waiting - target
        elif waiting < target and (usage is None or usage < KV_HIGH):
            kept = min(self.value, held)
            if self.starting:
                grown = max(2 * kept, kept + 1)
                cap = 2 * (running + waiting) + 1
            else:
                grown = kept + max(1.0, target - waiting)
                cap = running * (1 + ON_THE_WAY) + target + 1
            grown = max(grown, int(self.value) + 1)  # room shown: one more at least, as capped
            if averaged:  # the gauges at an instant are no measure of what the server holds
                grown = min(grown, cap)
            if self.answers < self._cap_until:
                grown = min(grown, self._overload_cap)
            else:
                self._overload_cap = float(CEILING)
            self.value = max(self.value, grown)
        if waiting >= target or self.value < before:
            self.starting = False
        self.value = float(max(self.floor, min(self.ceiling, self.value)))

    def _averages(self, load: EngineLoad, now: float) -> tuple[float, float, float, bool] | None:
        """``(held, waiting, running, averaged)`` in our requests, once a round trip was answered since
        the last decision (``None`` before: none yet). With the histograms, averages since then
        (``averaged``): ``held`` is ours in flight (the answers' seconds over the window's), the others
        the engine's, divided by the prompts it finished per answer of ours; the first sample (or one
        from a restarted server) only starts the window. Without them, the gauges now, and ``held`` the
        limit."""
        window, mark = self._window, (now, load, self.answers, self._answered_seconds)
        round_trip = max(1, int(self.value))
        if load.finished is None or load.queue_seconds is None or load.inference_seconds is None:
            if window is not None and self.answers - window[2] < round_trip:
                return None
            self._window = mark
            return self.value, load.waiting, load.running, False
        if window is None or window[1].finished is None or load.finished < window[1].finished:
            self._window, self._origin = mark, (load.finished, self.answers)
            return None
        began, first, answers, answered_seconds = window
        answered, finished = self.answers - answers, load.finished - (first.finished or 0.0)
        if answered < round_trip or finished <= 0 or now <= began:
            return None
        self._window = mark
        seconds = now - began
        # prompts per answer since the first sample: one window's count is off by the requests that
        # finished on one side of its edges and were answered on the other
        prompts = (load.finished - self._origin[0]) / max(1, self.answers - self._origin[1])
        per_answer = max(1.0, prompts) * seconds
        waiting = (load.queue_seconds - (first.queue_seconds or 0.0)) / per_answer
        running = (load.inference_seconds - (first.inference_seconds or 0.0)) / per_answer
        return (self._answered_seconds - answered_seconds) / seconds, waiting, running, True

    def _probing(self, seconds: float) -> None:
        """One answer while the limit is halved: the first ``limit`` ones were sent before (queued with
        the rest); the next half-limit ones measure the baseline."""
        assert self._probe is not None
        if self._probe_drain > 0:
            self._probe_drain -= 1
            return
        self._probe.append(seconds)
        if len(self._probe) >= self.allowed:
            self._baseline = self._smoothed = statistics.median(self._probe)
            self._probe, self._since_probe, self._probed = None, 0, True

    def overloaded(self) -> None:
        """Back off after an answer saying the server is overloaded (429, 503, ``Retry-After``); fed by
        ``/metrics``, the limit then grows to no more than one under where it was for
        :data:`PROBE_ROUNDS` round trips (a proxy's or the server's own cap on requests that its metrics
        do not show)."""
        self.overloads += 1
        self.starting = False
        self._overload_cap = max(float(self.floor), min(self._overload_cap, self.value - 1))
        self._cap_until = self.answers + int(PROBE_ROUNDS * self.value)
        self.value = float(max(self.floor, self.value * OVERLOAD_FACTOR))
