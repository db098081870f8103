"""Reranking 1,000 documents: vllm_tasks (split + concurrent + merge) vs one plain httpx request.

Both sides send the same query and documents to the same server and get the full ranking back; the SDK
additionally checks its merged ranking equals the single request's. By default the `rerank` CPU fixture
(MiniLM cross-encoder, server-fixtures/) is started for the run; `--base-url` uses a running server.
Times are medians of `--repeat` runs, alternating the two sides.

    python benchmarks/rerank_split.py [--docs 1000] [--batch-size 128] [--concurrency 4] [--base-url URL]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import httpx
import numpy as np

import vllm_tasks as vt
from vllm_tasks import scoring

WORDS = [
    *("paris", "france", "capital", "city", "river", "seine", "tower", "museum", "europe", "country"),
    *("banana", "yellow", "fruit", "tropical", "berlin", "germany", "history", "train", "station"),
    *("bridge", "market", "science", "model", "server", "vector", "token"),
]
QUERY = "What is the capital of France?"


def make_documents(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))) + "." for _ in range(n)]


def plain_request(http: httpx.Client, base_url: str, model: str, docs: list[str]) -> list[int]:
    response = http.post(f"{base_url}/rerank", json={"model": model, "query": QUERY, "documents": docs})
    response.raise_for_status()
    return [r["index"] for r in response.json()["results"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=scoring.DEFAULT_BATCH_SIZE)
    parser.add_argument("--concurrency", type=int, default=scoring.DEFAULT_CONCURRENCY)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--base-url", default=None, help="a running server (default: the rerank fixture)")
    args = parser.parse_args()

    server = None
    base_url = args.base_url
    if base_url is None:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server-fixtures"))
        import fixture_servers as fs

        server = fs.FixtureServer("rerank")
        print("starting the rerank fixture ...", file=sys.stderr)
        server.start()
        base_url = server.base_url
    try:
        docs = make_documents(args.docs)
        with vt.Client(base_url, timeout=600) as client, httpx.Client(timeout=600) as http:
            model = client.server_info().default_model or ""
            client.rerank(QUERY, docs[:4])  # warm-up (and the one-time scorer probe)
            plain_request(http, base_url, model, docs[:4])
            sdk_times, plain_times = [], []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                result = client.rerank(QUERY, docs, batch_size=args.batch_size, concurrency=args.concurrency)
                sdk_times.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                plain = plain_request(http, base_url, model, docs)
                plain_times.append(time.perf_counter() - t0)
            same = result.indices == plain
            kind = result.scorer.value
            requests = result.num_requests
            top = np.round(result.scores[:3], 4).tolist()
    finally:
        if server is not None:
            server.stop()

    sdk, raw = statistics.median(sdk_times), statistics.median(plain_times)
    print(f"rerank {args.docs} documents on {base_url} ({kind}); medians of {args.repeat} runs")
    print(f"{'method':<44} {'seconds':>9} {'docs/s':>9} {'ratio':>7}")
    label = f"vllm_tasks ({requests} requests, concurrency {args.concurrency})"
    print(f"{label:<44} {sdk:9.3f} {args.docs / sdk:9.1f} {raw / sdk:6.2f}x")
    print(f"{'plain httpx, one request':<44} {raw:9.3f} {args.docs / raw:9.1f} {1.0:6.2f}x")
    print(f"ranking identical: {same}   top scores: {top}")
    print("(ratio = plain seconds / method seconds; > 1 means faster than one plain request)")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
