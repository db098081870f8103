"""vLLM's engine signals from ``GET /metrics``: the requests running and waiting, the KV cache's usage.

``concurrency="auto"`` reads them, where a server serves them, instead of guessing the queue from
latencies (:mod:`vllm_tasks.adaptive`). The names are vLLM's Prometheus gauges (``vllm/v1/metrics/
loggers.py``); a server with several engines (data parallel) reports one sample per engine, summed here.
Whether ``/metrics`` is served is learned from the first sample of a client's ``auto`` calls (one GET; a
404, another status, or a body without the two request gauges: latency-only from then on, for that
client's server), and the samples are taken at most every :data:`SAMPLE_INTERVAL` seconds while a call
runs, in the task or thread that just got an answer (no thread of their own).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

RUNNING = "vllm:num_requests_running"
"""Requests in the engine's running batch (vLLM >= 0.4 and the V1 engine alike)."""
WAITING = "vllm:num_requests_waiting"
"""Requests waiting for a place in the running batch."""
KV_CACHE_USAGE_NAMES: tuple[tuple[str, str], ...] = (
    ("vllm:kv_cache_usage_perc", "the V1 engine's name (vllm PR #18354; 0.32 serves only it)"),
    ("vllm:gpu_cache_usage_perc", "the older name, deprecated by #18354 and hidden by default later"),
)
"""The KV-cache usage gauge (1.0: full) by its names across vLLM versions, the newest first, with the
evidence. The first one a server reports is read."""

QUEUE_TIME = "vllm:request_queue_time_seconds"
"""The histogram of the seconds each finished request waited (``_sum`` and ``_count`` are read)."""
INFERENCE_TIME = "vllm:request_inference_time_seconds"
"""The histogram of the seconds each finished request ran (its ``_sum`` is read)."""

SAMPLE_INTERVAL = 0.05
"""The least seconds between two samples of one server's ``/metrics`` (on a busy engine a request takes
tens of milliseconds or more: a sample every 50 ms sees each wave of answers, and costs the server one
cheap GET per 50 ms)."""

METRICS_TIMEOUT = 5.0
"""Seconds a sample may take (vLLM's API server answers ``/metrics`` itself, without the engine); one
that takes longer is a failed sample."""

METRICS_MAX_BYTES = 4 * 1024 * 1024
"""The largest ``/metrics`` body read (vLLM 0.32's is about 50 KB; a larger one is not read, and the
limit goes on from the latencies)."""


@dataclass(frozen=True)
class EngineLoad:
    """One sample of a server's engine state.

    The counts are the engine's requests: one per prompt (vLLM runs a batch of 8 texts as 8), of every
    client. Between two samples, the growth of ``queue_seconds`` (and ``inference_seconds``) over the
    seconds between them is the average number of requests waiting (and running) in that time, for the
    requests that finished in it (Little's law): unlike the gauges, read at any instant, it does not
    depend on when the sample is taken (right after a batch ended, the gauges read an empty engine).

    Attributes:
        running: requests in the running batch now (all engines).
        waiting: requests waiting for a place in it now.
        kv_cache_usage: the KV cache's usage, 0 to 1 (the fullest engine's); ``None`` when not reported.
        finished: requests finished so far (a counter); ``None`` when not reported (then so are the
            next two).
        queue_seconds: the seconds they waited, summed.
        inference_seconds: the seconds they ran, summed.
    """

    running: float
    waiting: float
    kv_cache_usage: float | None = None
    finished: float | None = None
    queue_seconds: float | None = None
    inference_seconds: float | None = None


def parse_metrics(text: str) -> EngineLoad | None:
    """The engine's load from a Prometheus text exposition (what vLLM's ``GET /metrics`` answers).

    Args:
        text: the body.

    Returns:
        The sums of :data:`RUNNING` and :data:`WAITING` over their samples (one per engine), the largest
        KV-cache usage, and the sums of :data:`QUEUE_TIME`'s and :data:`INFERENCE_TIME`'s ``_count`` and
        ``_sum`` (all three or none), or ``None`` when either request gauge is absent or a value of theirs is
        not a finite number of 0 or more (not vLLM's metrics: the caller goes on without them). Lines
        that are not samples of these gauges are ignored.

    Examples:
        >>> load = parse_metrics('vllm:num_requests_running{engine="0"} 4\\nvllm:num_requests_waiting 1\\n')
        >>> load.running, load.waiting, load.finished
        (4.0, 1.0, None)
        >>> parse_metrics("<html>Not Found</html>") is None
        True
    """
    kv_names = [name for name, _ in KV_CACHE_USAGE_NAMES]
    summed = (RUNNING, WAITING, f"{QUEUE_TIME}_count", f"{QUEUE_TIME}_sum", f"{INFERENCE_TIME}_sum")
    sums: dict[str, float] = {}
    for line in text.splitlines():
        name, value = _sample(line)
        if name is None:
            continue
        if name in summed:
            if value is None or value < 0:
                return None
            sums[name] = sums.get(name, 0.0) + value
        elif name in kv_names and value is not None and value >= 0:
            sums[name] = max(sums.get(name, 0.0), value)
    if RUNNING not in sums or WAITING not in sums:
        return None
    usage = next((sums[name] for name in kv_names if name in sums), None)
    times = [sums.get(name) for name in summed[2:]]
    finished, queued, ran = times if None not in times else (None, None, None)
    return EngineLoad(sums[RUNNING], sums[WAITING], usage, finished, queued, ran)


def _sample(line: str) -> tuple[str | None, float | None]:
    """``(name, value)`` of one sample line (``name{labels} value [timestamp]``); ``(None, None)`` for a
    comment, a blank line or a line that is not a sample; the value ``None`` when it is not finite."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None, None
    if "{" in line:
        name, brace, rest = line.partition("{")
        labels_end = rest.rfind("}")
        if labels_end < 0:
            return None, None
        fields = rest[labels_end + 1 :].split()
    else:
        name, *fields = line.split()
        brace = ""
    if not fields or not name or " " in name.strip() or (brace and name != name.strip()):
        return None, None
    try:
        value = float(fields[0])
    except ValueError:
        return name.strip(), None
    return name.strip(), value if math.isfinite(value) else None


@dataclass
class EngineSampler:
    """When to sample one server's ``/metrics``, and whether it serves them (one per client's server).

    The caller reads its own clock and says what happened; nothing here reads one.

    Attributes:
        served: ``True`` once a sample was read, ``False`` once ``/metrics`` failed (not served, an error
            status, a body that is not vLLM's metrics): never asked again; ``None`` before the first.
        samples: samples read.

    Examples:
        >>> sampler = EngineSampler()
        >>> sampler.due(10.0), sampler.due(10.0)  # the first is taken; another is not due while it runs
        (True, False)
        >>> sampler.read(EngineLoad(4, 0))
        >>> sampler.due(10.01), sampler.due(10.06)
        (False, True)
    """

    served: bool | None = None
    samples: int = 0
    _last: float = -math.inf
    _busy: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def due(self, now: float) -> bool:
        """Whether to take a sample now (``now``: seconds on the caller's monotonic clock); when it says
        so, the caller takes it and reports it through :meth:`read` or :meth:`failed`. Thread-safe: of
        the threads that ask at once, one is told to."""
        with self._lock:
            if self.served is False or self._busy or now - self._last < SAMPLE_INTERVAL:
                return False
            self._busy, self._last = True, now
            return True

    def read(self, load: EngineLoad | None) -> None:
        """The sample taken (``None``: the body was not vLLM's metrics, see :meth:`failed`)."""
        if load is None:
            self.failed()
            return
        self._busy, self.served = False, True
        self.samples += 1

    def failed(self) -> None:
        """The sample could not be read: latency-only from now on."""
        self._busy, self.served = False, False
