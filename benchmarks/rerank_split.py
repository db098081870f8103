"""Reranking 1,000 documents: vllm_tasks (split + concurrent + merge) vs one plain httpx request.

Both sides send the same query and documents to the same server and get the full ranking back; the
merged ranking must equal the single request's. Two tables: an instant in-process fake server (what the
client itself costs: request building, JSON, merge), then a real server: by default the `rerank` CPU
fixture (MiniLM cross-encoder, server-fixtures/) started for the run, or `--base-url` for a running one.
Times are medians of `--repeat` runs, alternating the two sides.

    python benchmarks/rerank_split.py [--docs 1000] [--batch-size 128] [--concurrency 4] [--base-url URL]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import zlib
from pathlib import Path

import httpx
import numpy as np

import vllm_tasks as vt
from vllm_tasks import defaults

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


def fake_vllm(request: httpx.Request) -> httpx.Response:
    """An instant in-process /rerank server (vLLM's response shapes), to measure the client alone."""
    path = request.url.path
    if path == "/version":
        return httpx.Response(200, json={"version": "0.32.0"})
    if path == "/v1/models":
        return httpx.Response(200, json={"data": [{"id": "fake", "max_model_len": 512}]})
    if path == "/openapi.json":
        return httpx.Response(200, json={"paths": {"/rerank": {}, "/score": {}, "/classify": {}}})
    payload = json.loads(request.content)
    if path == "/pooling":
        return httpx.Response(200, json={"model": "fake", "data": [{"index": 0, "data": [0.5]}]})
    results = [
        {
            "index": i,
            "document": {"text": doc, "multi_modal": None},
            "relevance_score": (zlib.crc32(doc.encode()) % 10_000) / 10_000,
        }
        for i, doc in enumerate(payload["documents"])
    ]
    results.sort(key=lambda r: -r["relevance_score"])
    if payload.get("top_n"):
        results = results[: payload["top_n"]]
    usage = {"prompt_tokens": len(results), "total_tokens": len(results)}
    return httpx.Response(200, json={"id": "score-1", "model": "fake", "usage": usage, "results": results})


def measure(
    base_url: str, docs: list[str], args: argparse.Namespace, transport: httpx.BaseTransport | None
) -> dict[str, object]:
    """Median seconds of the SDK and of one plain request, alternating, plus what the SDK returned."""
    sdk_http = httpx.Client(transport=transport) if transport else None
    with (
        vt.Client(base_url, timeout=600, http_client=sdk_http) as client,
        httpx.Client(timeout=600, transport=transport) as http,
    ):
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
    if sdk_http is not None:
        sdk_http.close()
    return {
        "sdk": statistics.median(sdk_times),
        "plain": statistics.median(plain_times),
        "same": result.indices == plain,
        "kind": result.scorer.value,
        "requests": result.num_requests,
        "top": np.round(result.scores[:3], 4).tolist(),
    }


def report(title: str, m: dict[str, object], args: argparse.Namespace) -> None:
    sdk, raw = float(m["sdk"]), float(m["plain"])  # type: ignore[arg-type]
    print(f"{title}; medians of {args.repeat} runs")
    print(f"{'method':<44} {'seconds':>9} {'docs/s':>9} {'ratio':>7}")
    label = f"vllm_tasks ({m['requests']} requests, concurrency {args.concurrency})"
    print(f"{label:<44} {sdk:9.4f} {args.docs / sdk:9.1f} {raw / sdk:6.2f}x")
    print(f"{'plain httpx, one request':<44} {raw:9.4f} {args.docs / raw:9.1f} {1.0:6.2f}x")
    print(f"ranking identical: {m['same']}   top scores: {m['top']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=defaults.SCORE_BATCH_SIZE)
    parser.add_argument("--concurrency", type=int, default=defaults.CONCURRENCY)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--base-url", default=None, help="a running server (default: the rerank fixture)")
    parser.add_argument("--fake-only", action="store_true", help="only the in-process fake server")
    args = parser.parse_args()
    docs = make_documents(args.docs)

    fake = measure("http://fake.vllm", docs, args, httpx.MockTransport(fake_vllm))
    report(f"rerank {args.docs} documents, instant in-process fake server (client cost only)", fake, args)
    ok = bool(fake["same"])
    if args.fake_only:
        return 0 if ok else 1

    server = None
    base_url = args.base_url
    if base_url is None:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server-fixtures"))
        from launcher import FixtureServer

        server = FixtureServer("rerank")
        print("starting the rerank fixture ...", file=sys.stderr)
        server.start()
        base_url = server.base_url
    try:
        real = measure(base_url, docs, args, None)
    finally:
        if server is not None:
            server.stop()
    print()
    report(f"rerank {args.docs} documents on {base_url} ({real['kind']})", real, args)
    print("(ratio = plain seconds / method seconds; > 1 means faster than one plain request)")
    return 0 if ok and real["same"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
