"""Sweep fixed concurrency 1..64 and ``concurrency="auto"`` against a server at its capacity (issue 25).

Against FakeVLLM's capacity model (``python -m vllm_tasks.testing --slots N --cost-per-input S
--queue-limit Q``, in its own process) at three capacities, each with its ``/metrics`` served (auto reads
the engine's queue) and without (auto reads latencies), or, with ``--url``, against a real server: one
job (``embed_file``; ``--what call``: one ``Client.embed`` call) per setting (batches of 8, a fresh
client each, so that ``auto`` starts from nothing), printing rows/s, the p95 latency of its requests,
the 503s it got and, for ``auto``, the limit it settled on and its ratios to the best fixed setting (the
highest throughput; of those within 2% of it, the lowest p95). Targets: auto >= 0.95x the best's
throughput, p95 <= 1.5x its p95, no more 503s.
Each figure twice: over the whole call (``auto``'s start-up from one request included), and over its
steady part (the answers after the first third, as ``tests/unit/test_adaptive.py`` measures).

The capacity model sleeps rather than computes, so the sweep is light (about 2 minutes on 2 cores)::

    python benchmarks/concurrency_sweep.py
    python benchmarks/concurrency_sweep.py --url http://localhost:8000 --seconds 5
"""

from __future__ import annotations

import argparse
import itertools
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import vllm_tasks as vt
from vllm_tasks.adaptive import Concurrency

SETTINGS: list[Concurrency] = [1, 2, 4, 8, 16, 32, 64, "auto"]
BATCH = 8
CAPACITIES = [  # slots, latency (s a request), cost (s a row): 40, 100 and 300 ms a batch of 8
    (4, 0.008, 0.004),
    (16, 0.02, 0.01),
    (48, 0.06, 0.03),
]


@dataclass
class Row:
    setting: Concurrency
    whole: Measure
    steady: Measure
    refused: int
    limit: int | None


@dataclass
class Measure:
    rows_per_s: float
    p95_ms: float


class Requests(logging.Handler):
    """Collects each request's status, elapsed time and end from the client's DEBUG records."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[tuple[int | None, float, float]] = []

    def emit(self, record: logging.LogRecord) -> None:
        fields: Any = getattr(record, "vllm_tasks", None)
        if fields and fields.get("route") == "/v1/embeddings":
            self.seen.append((fields.get("status"), fields["elapsed_ms"], time.perf_counter()))

    def steady(self) -> Measure:
        """Rows/s and p95 of the answers after the first third (by count)."""
        answered = [(ms, end) for status, ms, end in self.seen if status == 200]
        tail = answered[len(answered) // 3 :]
        seconds = tail[-1][1] - answered[len(answered) // 3 - 1][1] if len(answered) >= 3 else 0.0
        return Measure(BATCH * len(tail) / seconds if seconds > 0 else 0.0, p95([ms for ms, _ in tail]))


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 2 else values[0]


def run(url: str, setting: Concurrency, rows: int, what: str) -> Row:
    """One setting: a job (``what="job"``: ``embed_file``) or one ``Client.embed`` call."""
    texts = [f"text number {index} of the sweep" for index in range(rows)]
    requests = Requests()
    logger = logging.getLogger("vllm_tasks")
    logger.addHandler(requests)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        with vt.Client(url, max_retries=20) as client, tempfile.TemporaryDirectory() as folder:
            client.embed(texts[:1])  # discovery, outside the measure
            corpus = Path(folder) / "corpus.txt"
            corpus.write_text("\n".join(texts) + "\n")
            requests.seen.clear()
            started = time.perf_counter()
            if what == "call":
                client.embed(texts, batch_size=BATCH, concurrency=setting)
                limit = client.usage.concurrency_limit
            else:
                report = vt.embed_file(
                    client, corpus, Path(folder) / "out.npy", batch_size=BATCH, concurrency=setting
                )
                limit = report.replicas[0].concurrency if setting == "auto" else None
            seconds = time.perf_counter() - started
    finally:
        logger.removeHandler(requests)
    answered = [ms for status, ms, _ in requests.seen if status == 200]
    refused = sum(1 for status, _, _ in requests.seen if status == 503)
    return Row(setting, Measure(rows / seconds, p95(answered)), requests.steady(), refused, limit)


def sweep(url: str, rows_for: Any, what: str) -> list[Row]:
    results = []
    for setting in SETTINGS:
        row = run(url, setting, rows_for(setting), what)
        results.append(row)
        limit = f"  (settled on {row.limit})" if row.limit is not None else ""
        measured = (
            f"{row.whole.rows_per_s:8.0f} rows/s  p95 {row.whole.p95_ms:7.1f} ms  503s {row.refused:4d}"
        )
        steady = f"steady {row.steady.rows_per_s:8.0f} rows/s  p95 {row.steady.p95_ms:7.1f} ms"
        print(f"  {setting!s:>5}  {measured}  {steady}{limit}", flush=True)
    fixed, auto = results[:-1], results[-1]
    for name in ("whole", "steady"):
        top = max(getattr(row, name).rows_per_s for row in fixed)
        best = min(
            (row for row in fixed if getattr(row, name).rows_per_s >= 0.98 * top),
            key=lambda row: getattr(row, name).p95_ms,
        )
        mine, theirs = getattr(auto, name), getattr(best, name)
        print(
            f"  {name}: auto / best fixed ({best.setting}): throughput "
            f"{mine.rows_per_s / theirs.rows_per_s:.2f}x, p95 {mine.p95_ms / theirs.p95_ms:.2f}x, "
            f"503s {auto.refused} vs {best.refused}",
            flush=True,
        )
    return results


def start_fake(slots: int, latency: float, cost: float, metrics: bool) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "vllm_tasks.testing", "--port", "0", "--tasks", "embed"]
    command += ["--slots", str(slots), "--latency", str(latency), "--cost-per-input", str(cost)]
    command += ["--queue-limit", str(2 * slots), "--retry-after", "1"]
    command += [] if metrics else ["--no-metrics"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None, help="sweep a real server instead of the capacity model")
    parser.add_argument("--seconds", type=float, default=3.0, help="about how long each setting runs")
    parser.add_argument("--rows", type=int, default=4000, help="with --url: rows per setting")
    parser.add_argument("--what", choices=["job", "call"], default="job", help="embed_file or Client.embed")
    args = parser.parse_args()
    if args.url:
        print(f"{args.url}: {args.rows} rows, batches of {BATCH}")
        sweep(args.url, lambda setting: args.rows, args.what)
        return
    for (slots, latency, cost), metrics in itertools.product(CAPACITIES, (True, False)):
        service = latency + BATCH * cost
        served = "/metrics served" if metrics else "no /metrics"
        batch = f"{service * 1000:.0f} ms a batch of {BATCH}"
        print(f"{slots} slots, {batch}, 503 past {2 * slots} waiting, {served}:")

        def rows_for(setting: Concurrency, slots: int = slots, service: float = service) -> int:
            in_flight = slots if setting == "auto" else min(setting, slots)
            return BATCH * max(24, int(in_flight / service * args.seconds))

        server, url = start_fake(slots, latency, cost, metrics)
        try:
            sweep(url, rows_for, args.what)
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
