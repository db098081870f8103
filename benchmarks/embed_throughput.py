"""Client cost of embedding many texts: vllm_tasks vs a raw httpx loop, openai-python and
baseten-performance-client, each at the concurrency it is given, in one run.

By default nginx answers (benchmarks/nginx_vllm.py: the `embed` fixture's vLLM 0.32 recordings widened
to the batch size, served as static files), so the client is the bottleneck; `--base-url` points the same
measurement at a real server (e.g. `server-fixtures/serve embed`), where the model is. Each client asks
for the encoding it asks a vLLM server for (vllm_tasks: `bytes`; openai-python: `base64`; baseten: its
default, `float`), and every decoded matrix is checked against the recorded vectors. Reports the median
over `--repeats` rounds (the clients take turns within a round) of vectors/s and client CPU microseconds
per vector (this process's CPU time: baseten's Rust threads included), the spread of the rounds'
vectors/s ((max - min) / median: the noise of a shared machine), the ratios to baseten at the same
concurrency, and whether each default meets the target (>= 1.0x baseten's vectors/s at <= its CPU per
vector at every concurrency; concurrency 4 >= concurrency 1 at <= 1.1x its CPU).

The SDK is measured over each transport it can send with: ``Client`` over httpx's own and over its default
(``Urllib3Transport``), ``AsyncClient`` over its default (httpx's own) and over aiohttp
(benchmarks/aiohttp_transport.py, the async candidate, not shipped: see its docstring).

    python benchmarks/embed_throughput.py [--texts 51200] [--batch 64] [--repeats 3] [--base-url URL]

On a shared machine, prefer short runs and more rounds (``--texts 10000 --repeats 7``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

import vllm_tasks as vt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aiohttp_transport import AiohttpTransport
from nginx_vllm import NginxVLLM

CONCURRENCIES = (1, 4, 16)
Run = Callable[[], np.ndarray]
LOOP = asyncio.new_event_loop()
"""The async clients' loop: their connections belong to it."""
ASYNC_CLIENTS: list[vt.AsyncClient | httpx.AsyncClient] = []
"""Closed on :data:`LOOP` at the end (with the httpx clients they were given)."""
EXTRA_SYNC_TRANSPORTS: dict[str, Callable[[], httpx.BaseTransport]] = {}
"""More sync transports to measure beside the default (e.g. one from another branch), by row name."""


def measure(run: Run, expected: np.ndarray | None) -> tuple[float, float]:
    """(vectors/s, CPU µs/vector) of one ``run()``, its matrix checked against ``expected``."""
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    n = vectors.shape[0]
    if expected is not None:
        np.testing.assert_array_equal(vectors, expected)
    return n / wall, cpu / n * 1e6


def clients(urls: dict[str, str], texts: list[str], batch: int) -> list[tuple[str, int, Run]]:
    """(name, concurrency, run) of every client measured; ``urls`` by the encoding each asks for."""
    batches = [texts[i : i + batch] for i in range(0, len(texts), batch)]
    model = vt.Client(urls["bytes"]).server_info().default_model or ""
    rows: list[tuple[str, int, Run]] = []

    raw_http = httpx.Client(base_url=urls["bytes"], timeout=600)

    def raw_loop() -> np.ndarray:
        parts = []
        for part in batches:
            body = {"model": model, "input": part, "encoding_format": "bytes"}
            answer = raw_http.post("/v1/embeddings", json=body)
            parts.append(np.frombuffer(answer.content, dtype="<f4").reshape(len(part), -1))
        return np.concatenate(parts)

    rows.append(("raw httpx loop, bytes", 1, raw_loop))
    # None: the client's own httpx client, over the transport ClientSettings.transport="auto" picks.
    sync_transports: dict[str, Callable[[], httpx.BaseTransport] | None] = {
        "Client, httpx transport": httpx.HTTPTransport,
        "Client default (Urllib3Transport)": None,
        **EXTRA_SYNC_TRANSPORTS,
    }
    for name, transport in sync_transports.items():
        http = None if transport is None else httpx.Client(transport=transport(), timeout=600)
        sdk = vt.Client(urls["bytes"], max_retries=0, http_client=http)
        sdk.server_info()
        for concurrency in CONCURRENCIES:

            def run(sdk: vt.Client = sdk, concurrency: int = concurrency) -> np.ndarray:
                return sdk.embed(texts, batch_size=batch, concurrency=concurrency).vectors

            rows.append((name, concurrency, run))
    async_transports: dict[str, Callable[[], httpx.AsyncBaseTransport] | None] = {
        "AsyncClient default (httpx transport)": None,
        "AsyncClient + AiohttpTransport": AiohttpTransport,
    }
    for name, async_transport in async_transports.items():
        async_http = None if async_transport is None else httpx.AsyncClient(transport=async_transport())
        asdk = vt.AsyncClient(urls["bytes"], max_retries=0, http_client=async_http)
        LOOP.run_until_complete(asdk.server_info())
        ASYNC_CLIENTS.append(asdk)
        if async_http is not None:
            ASYNC_CLIENTS.append(async_http)
        for concurrency in CONCURRENCIES:

            def run_async(asdk: vt.AsyncClient = asdk, concurrency: int = concurrency) -> np.ndarray:
                job = asdk.embed(texts, batch_size=batch, concurrency=concurrency)
                return LOOP.run_until_complete(job).vectors

            rows.append((name, concurrency, run_async))
    try:
        import openai

        oai = openai.OpenAI(base_url=urls["base64"] + "/v1", api_key="x", max_retries=0)

        def openai_loop() -> np.ndarray:
            answers = [oai.embeddings.create(model=model, input=part) for part in batches]
            return np.asarray([d.embedding for answer in answers for d in answer.data], dtype=np.float32)

        rows.append(("openai-python loop", 1, openai_loop))
    except ImportError:
        print("openai-python is not installed (pip install 'vllm-tasks[bench]'): left out")
    try:
        import baseten_performance_client as baseten

        performance = baseten.PerformanceClient(base_url=urls["float"], api_key="x")
        for concurrency in CONCURRENCIES:
            preference = baseten.RequestProcessingPreference(
                max_concurrent_requests=concurrency, batch_size=batch
            )

            def run_baseten(preference: object = preference) -> np.ndarray:
                answer = performance.embed(texts, model=model, preference=preference)
                return np.asarray(answer.numpy(), dtype=np.float32)

            rows.append(("baseten-performance-client", concurrency, run_baseten))
    except ImportError:
        print("baseten-performance-client is not installed (pip install 'vllm-tasks[bench]'): left out")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=51_200, help="rounded up to whole batches")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--base-url", default=None, help="a real server instead of nginx")
    args = parser.parse_args()
    count = -(-args.texts // args.batch) * args.batch  # nginx answers whole batches only
    texts = [f"text number {i:07d} for the embedding benchmark" for i in range(count)]
    server = None
    if args.base_url is None:
        server = NginxVLLM(args.batch).start()
        urls = {encoding: server.url(encoding) for encoding in ("float", "base64", "bytes")}
        expected: np.ndarray | None = server.expected(count)
        where = "nginx replaying vLLM 0.32 answers (client-bound)"
    else:
        urls = dict.fromkeys(("float", "base64", "bytes"), args.base_url.rstrip("/"))
        expected, where = None, f"real server {args.base_url}"
    try:
        rows = clients(urls, texts, args.batch)
        for _, _, run in rows:  # warm up: connections, imports, the server's page cache
            run()
        samples: list[list[tuple[float, float]]] = [[] for _ in rows]
        for _ in range(args.repeats):
            for sample, (_, _, run) in zip(samples, rows, strict=True):
                sample.append(measure(run, expected))
    finally:
        for client in ASYNC_CLIENTS:
            LOOP.run_until_complete(
                client.aclose() if isinstance(client, httpx.AsyncClient) else client.close()
            )
        if server is not None:
            server.stop()
    medians = [(statistics.median(r for r, _ in s), statistics.median(c for _, c in s)) for s in samples]
    baseten = {c: m for (name, c, _), m in zip(rows, medians, strict=True) if name.startswith("baseten")}
    print(f"{count} texts, batches of {args.batch}, {where}; median of {args.repeats}")
    print(f"{'client':<38} {'conc.':>5} {'vectors/s':>10} {'spread':>7} {'CPU us/vec':>11}", end=" ")
    print(f"{'x baseten v/s':>14} {'x baseten CPU':>14}")
    for (name, concurrency, _), (rate, cpu), sample in zip(rows, medians, samples, strict=True):
        peer = baseten.get(concurrency)
        ratios = f"{rate / peer[0]:14.2f} {cpu / peer[1]:14.2f}" if peer else f"{'':>14} {'':>14}"
        spread = (max(r for r, _ in sample) - min(r for r, _ in sample)) / rate  # the noise of the rounds
        print(f"{name:<38} {concurrency:>5} {rate:10.0f} {spread:7.0%} {cpu:11.1f} {ratios}")
    table = {(name, c): m for (name, c, _), m in zip(rows, medians, strict=True)}
    for name in dict.fromkeys(name for name, _, _ in rows if "default" in name):
        print(f"{name}: {verdict(table, name, baseten)}")


def verdict(table: dict[tuple[str, int], tuple[float, float]], name: str, baseten: dict[int, Any]) -> str:
    """Whether ``name`` meets the target: at every concurrency >= 1.0x baseten's vectors/s at <= its CPU
    per vector, and concurrency 4 >= concurrency 1 at <= 1.1x its CPU."""
    misses = [
        f"c={c}: {table[name, c][0] / baseten[c][0]:.2f}x v/s at {table[name, c][1] / baseten[c][1]:.2f}x CPU"
        for c in CONCURRENCIES
        if c in baseten and (table[name, c][0] < baseten[c][0] or table[name, c][1] > baseten[c][1])
    ]
    (rate_1, cpu_1), (rate_4, cpu_4) = table[name, 1], table[name, 4]
    if rate_4 < rate_1 or cpu_4 > 1.1 * cpu_1:
        misses.append(f"c=4 is {rate_4 / rate_1:.2f}x c=1's vectors/s at {cpu_4 / cpu_1:.2f}x its CPU")
    return "target met" if not misses else "target missed: " + "; ".join(misses)


if __name__ == "__main__":
    main()
