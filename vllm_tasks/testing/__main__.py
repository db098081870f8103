"""Run a FakeVLLM from the shell: ``python -m vllm_tasks.testing --port 8000``.

Prints the URL on the first line of stdout, then serves until interrupted (Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Sequence

from .server import FakeVLLM
from .settings import ALL_TASKS


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, start the server, print its URL and wait for a signal.

    Returns:
        The exit status (0).

    Examples:
        $ python -m vllm_tasks.testing --port 8000 --tasks embed,rerank --model bge-m3
        http://127.0.0.1:8000
    """
    parser = argparse.ArgumentParser(prog="python -m vllm_tasks.testing", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--model", default="fake-model")
    parser.add_argument("--tasks", default=",".join(sorted(ALL_TASKS)), help="comma-separated task names")
    parser.add_argument("--version", default="0.32.0", help="what /version answers")
    parser.add_argument("--width", type=int, default=384, help="the embedding width")
    parser.add_argument("--max-model-len", type=int, default=512)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every answer")
    parser.add_argument("--slots", type=int, default=None, help="requests served at once (a capacity)")
    parser.add_argument("--queue-limit", type=int, default=None, help="503 past this many waiting")
    parser.add_argument("--cost-per-input", type=float, default=0.0, help="seconds per input row")
    parser.add_argument("--no-metrics", action="store_true", help="answer 404 to GET /metrics")
    parser.add_argument("--retry-after", type=float, default=None, help="Retry-After seconds of those 503s")
    args = parser.parse_args(argv)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    tasks = [name.strip() for name in args.tasks.split(",") if name.strip()]
    with FakeVLLM(
        model=args.model, tasks=tasks, version=args.version, width=args.width,
        max_model_len=args.max_model_len, api_key=args.api_key, host=args.host, port=args.port,
        latency=args.latency, slots=args.slots, queue_limit=args.queue_limit,
        cost_per_input=args.cost_per_input, retry_after=args.retry_after,
        metrics=not args.no_metrics,
    ) as fake:  # fmt: skip
        print(fake.url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            done.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
