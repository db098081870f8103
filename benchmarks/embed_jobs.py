"""The batch job engine (``vt.embed_file``) measured against named alternatives, each in the same run.

    python benchmarks/embed_jobs.py real [--url URL] [--texts 3000]   # vs a hand-tuned raw httpx asyncio loop
    python benchmarks/embed_jobs.py replicas [--texts 20000]          # 2 and 4 fake replicas vs 1
    python benchmarks/embed_jobs.py memory [--texts 1000000]          # peak RSS vs client.embed + np.save
    python benchmarks/embed_jobs.py checkpoint [--texts 200000]       # checkpoints every chunk vs once

``real`` without ``--url`` starts the `embed` CPU fixture (server-fixtures/launcher.py; wrap the command in
``flock /tmp/vllm-server.lock``). The other parts use benchmarks/fake_vllm.py in its own process
(``--latency`` for replicas of fixed speed). Results are in docs/jobs.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

import vllm_tasks as vt

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "server-fixtures"))

from fault_proxy import free_port  # noqa: E402


def fake_server(latency: float = 0.0) -> tuple[str, subprocess.Popen[str]]:
    port = free_port()
    command = [sys.executable, str(HERE / "fake_vllm.py"), "--port", str(port), "--latency", str(latency)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process.stdout.readline().strip(), process


def corpus(folder: Path, count: int) -> Path:
    path = folder / f"corpus-{count}.txt"
    with path.open("w") as handle:
        for i in range(count):
            handle.write(f"text number {i} for the job benchmark, with {i % 17} extra words\n")
    return path


def timed(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def job(urls: list[str], source: Path, out: Path, **options: object) -> Callable[[], object]:
    def run() -> object:
        for stale in out.parent.glob(out.name + "*"):
            if stale.is_file():
                stale.unlink()
        return vt.embed_file(urls, source, out, resume=False, **options)  # type: ignore[arg-type]

    return run


def raw_loop(url: str, texts: list[str], batch: int, concurrency: int) -> Callable[[], np.ndarray]:
    """The hand-tuned alternative: httpx.AsyncClient, a semaphore, vLLM's raw ``bytes`` transport decoded
    with ``np.frombuffer`` straight into a preallocated matrix; no checks, no checkpoints, no disk."""

    async def main() -> np.ndarray:
        async with httpx.AsyncClient(base_url=url, timeout=600) as http:
            model = (await http.get("/v1/models")).json()["data"][0]["id"]
            first = await http.post("/v1/embeddings", json={"model": model, "input": texts[:1]})
            matrix = np.empty((len(texts), len(first.json()["data"][0]["embedding"])), np.float32)
            gate = asyncio.Semaphore(concurrency)

            async def send(start: int) -> None:
                body = {
                    "model": model,
                    "input": texts[start : start + batch],
                    "encoding_format": "bytes_only",
                }
                async with gate:
                    response = await http.post("/v1/embeddings", json=body)
                rows = np.frombuffer(response.content, "<f4").reshape(-1, matrix.shape[1])
                matrix[start : start + len(rows)] = rows

            await asyncio.gather(*(send(start) for start in range(0, len(texts), batch)))
            return matrix

    return lambda: asyncio.run(main())


def part_real(args: argparse.Namespace, folder: Path) -> None:
    server = None
    url = args.url
    if url is None:
        sys.path.insert(0, str(HERE.parent / "server-fixtures"))
        from launcher import FixtureServer

        server = FixtureServer("embed").start()
        url = server.base_url
    try:
        source = corpus(folder, args.texts)
        texts = source.read_text().splitlines()
        batch, concurrency = 32, 4
        runs: dict[str, list[float]] = {"raw": [], "job": [], "engine": []}
        raw_loop(url, texts[:64], batch, concurrency)()  # warm the server up
        for _ in range(args.repeat):
            runs["raw"].append(timed(raw_loop(url, texts, batch, concurrency)))
            out = folder / "real.npy"
            started = time.perf_counter()
            report = job([url], source, out, batch_size=batch, concurrency=concurrency)()
            runs["job"].append(time.perf_counter() - started)
            runs["engine"].append(report.seconds)  # type: ignore[attr-defined]
    finally:
        if server is not None:
            server.stop()
    raw, ours, engine = min(runs["raw"]), min(runs["job"]), min(runs["engine"])
    print(f"{args.texts} texts, batches of {batch}, concurrency {concurrency}, real server {url}")
    print(f"{'client':<60} {'texts/s':>8} {'x raw':>6}")
    print(f"{'hand-tuned raw httpx asyncio loop (bytes_only)':<60} {args.texts / raw:8.0f} {1.0:6.2f}")
    print(f"{'vt.embed_file -> .npy, the whole call':<60} {args.texts / ours:8.0f} {raw / ours:6.2f}")
    label = "  of which the engine (without start-up: hash, probe)"
    print(f"{label:<60} {args.texts / engine:8.0f} {raw / engine:6.2f}")


def part_replicas(args: argparse.Namespace, folder: Path) -> None:
    latency, batch, concurrency = 0.2, 32, 4
    servers = [fake_server(latency) for _ in range(4)]
    try:
        source = corpus(folder, args.texts)
        urls = [url for url, _ in servers]
        seconds = {
            n: timed(job(urls[:n], source, folder / f"r{n}.npy", batch_size=batch, concurrency=concurrency))
            for n in (1, 2, 4)
        }
    finally:
        for _, process in servers:
            process.terminate()
    print(
        f"{args.texts} texts, batches of {batch}, {concurrency} in flight per replica, {latency} s per answer"
    )
    print(f"{'replicas':<10} {'texts/s':>8} {'x one':>6} {'x linear':>9}")
    for n, wall in seconds.items():
        speedup = seconds[1] / wall
        print(f"{n:<10} {args.texts / wall:8.0f} {speedup:6.2f} {speedup / n:9.2f}")


CHILD = """
import json, resource, sys, time
import numpy as np
import vllm_tasks as vt
url, source, out, how = sys.argv[1:5]
start = time.perf_counter()
if how == "job":
    vt.embed_file(url, source, out, batch_size=256, concurrency=4, resume=False)
else:
    with open(source) as handle:
        texts = handle.read().splitlines()
    with vt.Client(url) as client:
        np.save(out, client.embed(texts, batch_size=256, concurrency=4).vectors)
print(json.dumps({"rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "seconds": time.perf_counter() - start}))
"""


def part_memory(args: argparse.Namespace, folder: Path) -> None:
    url, process = fake_server()
    results = {}
    try:
        for count in sorted({args.texts // 10, args.texts}):
            source = corpus(folder, count)
            for how in ("job", "in-memory"):
                out = folder / f"m-{how}-{count}.npy"
                done = subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        CHILD,
                        url,
                        str(source),
                        str(out),
                        "job" if how == "job" else "embed",
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                results[(how, count)] = json.loads(done.stdout.splitlines()[-1])
                out.unlink()
    finally:
        process.terminate()
    print("peak RSS of the process (ru_maxrss), fast fake server, 384-dim float32, batches of 256")
    print(f"{'how':<48} {'texts':>9} {'peak MiB':>9} {'s':>6}")
    names = {"job": "vt.embed_file -> .npy", "in-memory": "client.embed(all texts) + np.save (alternative)"}
    for (how, count), result in results.items():
        print(f"{names[how]:<48} {count:9,} {result['rss_mib']:9.0f} {result['seconds']:6.1f}")


def part_checkpoint(args: argparse.Namespace, folder: Path) -> None:
    """The same job (same chunks, same writes) with the checkpoint's work patched out: no state file
    written per chunk, no fdatasync of the matrix."""
    from vllm_tasks.jobs import outputs, state

    url, process = fake_server()
    source = corpus(folder, args.texts)
    timings: dict[bool, list[float]] = {True: [], False: []}
    save, sync = state.Checkpoint.save, outputs.NpySink.sync
    try:
        for _ in range(args.repeat):
            for checkpoints in (True, False):
                state.Checkpoint.save = save if checkpoints else lambda self, path: None  # type: ignore[method-assign]
                outputs.NpySink.sync = sync if checkpoints else lambda self: None  # type: ignore[method-assign]
                timings[checkpoints].append(timed(job([url], source, folder / "c.npy", batch_size=256)))
    finally:
        state.Checkpoint.save, outputs.NpySink.sync = save, sync  # type: ignore[method-assign]
        process.terminate()
    chunks = -(-args.texts // vt.defaults.EMBED_FILE_CHUNK_ROWS)
    best_on, best_off = min(timings[True]), min(timings[False])
    print(f"{args.texts} texts, fast fake server, batches of 256, {chunks} chunks; best of {args.repeat}")
    print(f"{'checkpoints':<52} {'texts/s':>8} {'overhead':>9}")
    print(f"{'off (state writes and fdatasync patched out)':<52} {args.texts / best_off:8.0f} {'':>9}")
    label = "on: per chunk fdatasync + atomic state.json"
    print(f"{label:<52} {args.texts / best_on:8.0f} {best_on / best_off - 1:9.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["real", "replicas", "memory", "checkpoint"])
    parser.add_argument("--texts", type=int, default=None)
    parser.add_argument("--url", default=None, help="real: a running server instead of the fixture")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    defaults = {"real": 3000, "replicas": 20000, "memory": 1_000_000, "checkpoint": 200_000}
    args.texts = args.texts or defaults[args.part]
    parts = {
        "real": part_real,
        "replicas": part_replicas,
        "memory": part_memory,
        "checkpoint": part_checkpoint,
    }
    with tempfile.TemporaryDirectory() as folder:
        parts[args.part](args, Path(folder))


if __name__ == "__main__":
    main()
