"""Client overhead of embedding many texts: vllm_tasks vs openai-python vs a hand-tuned raw httpx loop.

By default a fast fake server (benchmarks/fake_vllm.py, its own process, replaying vLLM-shaped bodies)
answers, so the client is the bottleneck; `--base-url` points the same measurement at a real server
(e.g. `server-fixtures/serve embed`), where the model is the bottleneck. Reports vectors/s and client
CPU microseconds per vector (process CPU time of this process only).

    python benchmarks/embed_throughput.py [--texts 100000] [--batch 64] [--base-url URL]
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

import vllm_tasks as vt


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_fake_server() -> tuple[str, subprocess.Popen[str]]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("fake_vllm.py")), "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    return url, process


def measure(fn: Callable[[], np.ndarray], n: int) -> tuple[float, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert vectors.shape[0] == n, vectors.shape
    return n / wall, cpu / n * 1e6, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--base-url", default=None, help="a real server instead of the fake one")
    args = parser.parse_args()
    process = None
    url = args.base_url
    if url is None:
        url, process = start_fake_server()
    texts = [f"text number {i} for the embedding benchmark" for i in range(args.texts)]
    batches = [texts[i : i + args.batch] for i in range(0, len(texts), args.batch)]
    try:
        sdk = vt.Client(url, max_retries=0)
        model = sdk.server_info().default_model or ""

        def sdk_run(concurrency: int) -> Callable[[], np.ndarray]:
            return lambda: sdk.embed(texts, batch_size=args.batch, concurrency=concurrency).vectors

        def raw_loop(fmt: str) -> Callable[[], np.ndarray]:
            def run() -> np.ndarray:
                parts = []
                with httpx.Client(base_url=url, timeout=600) as http:
                    for batch in batches:
                        response = http.post(
                            "/v1/embeddings", json={"model": model, "input": batch, "encoding_format": fmt}
                        )
                        if fmt == "bytes":
                            parts.append(np.frombuffer(response.content, dtype="<f4").reshape(len(batch), -1))
                        else:
                            import base64

                            parts.append(
                                np.frombuffer(
                                    b"".join(
                                        base64.b64decode(d["embedding"]) for d in response.json()["data"]
                                    ),
                                    "<f4",
                                ).reshape(len(batch), -1)
                            )
                return np.concatenate(parts)

            return run

        def openai_loop() -> np.ndarray:
            import openai

            client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
            rows: list[list[float]] = []
            for batch in batches:
                rows.extend(
                    item.embedding for item in client.embeddings.create(model=model, input=batch).data
                )
            return np.asarray(rows, dtype=np.float32)

        rows = [
            ("raw httpx loop, bytes (sequential)", raw_loop("bytes")),
            ("raw httpx loop, base64 (sequential)", raw_loop("base64")),
            ("vllm_tasks embed, concurrency=1", sdk_run(1)),
            (f"vllm_tasks embed, concurrency={args.concurrency}", sdk_run(args.concurrency)),
            ("openai-python embeddings.create loop", openai_loop),
        ]
        results = [(name, *measure(fn, len(texts))) for name, fn in rows]
    finally:
        if process is not None:
            process.terminate()
    raw_rate = results[0][1]
    openai_rate = results[-1][1]
    where = "fake server (client-bound)" if args.base_url is None else f"real server {args.base_url}"
    print(f"{len(texts)} texts, batches of {args.batch}, {where}")
    print(f"{'client':<42} {'vectors/s':>10} {'CPU us/vec':>11} {'wall s':>8} {'x raw':>7} {'x openai':>9}")
    for name, rate, cpu_us, wall in results:
        print(
            f"{name:<42} {rate:10.0f} {cpu_us:11.1f} {wall:8.2f} "
            f"{rate / raw_rate:7.2f} {rate / openai_rate:9.2f}"
        )


if __name__ == "__main__":
    main()
