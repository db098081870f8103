"""Every front of the batch jobs on one corpus against the same fake server: rows/s and client CPU.

    python benchmarks/job_fronts.py [--texts 100000] [--fronts embed_file,ray,ray_async,daft,spark,saturate]

The fronts: ``vt.embed_file`` (text file in, ``.npy`` out), Ray Data (``map_batches`` with
``vllm_tasks.integrations.ray.Embedder``; ``ray_async``: ``AsyncEmbedder``), Daft (``embed_text``
with ``VLLMProvider``), Spark
(``embed_udf`` over a local session) and, where it installs, ``saturate`` (PyPI; its own venv under
``~/.cache/vllm-tasks-bench/saturate``: it depends on ``httpx2``), each reading the same corpus (Parquet
for the dataframe engines) and writing its vectors to disk. The server is benchmarks/fake_vllm.py in its
own process (384-dim vectors, answers in microseconds): the client is what is measured.

Each front runs in a fresh Python process (``run FRONT``), so imports, a JVM or a Ray runtime are its
own. ``job s`` is the time of the job alone (the engine started); ``CPU s`` is the user + system time
of the front's whole process tree (imports, JVM and Ray start included: see ``tree_cpu``); ``µs/row``
divides it by the rows. Every front sends 64
texts per request with 4 in flight per worker.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
from embed_jobs import corpus, fake_server

HERE = Path(__file__).resolve().parent
BATCH = 64
CONCURRENCY = 4
SATURATE_VENV = Path.home() / ".cache" / "vllm-tasks-bench" / "saturate"
FRONTS = ("embed_file", "ray", "ray_async", "daft", "spark", "saturate")


def run_embed_file(url: str, text: Path, parquet: Path, out: Path) -> int:
    import vllm_tasks as vt

    started = time.perf_counter()
    report = vt.embed_file(url, text, out / "vectors.npy", batch_size=BATCH, concurrency=CONCURRENCY)
    _report_job(started)
    return report.texts


def run_ray(url: str, text: Path, parquet: Path, out: Path, *, asynchronous: bool = False) -> int:
    import ray

    import vllm_tasks as vt
    from vllm_tasks.integrations.ray import AsyncEmbedder, Embedder

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    started = time.perf_counter()
    dataset = ray.data.read_parquet(str(parquet)).map_batches(
        AsyncEmbedder if asynchronous else Embedder,
        fn_constructor_kwargs={
            "settings": vt.ClientSettings(url),
            "batch_size": BATCH,
            "concurrency": CONCURRENCY,
        },
        batch_size=4096,
        concurrency=1,
        batch_format="pandas",
    )
    dataset.write_parquet(str(out / "ray"))
    _report_job(started)
    rows = pq.read_table(out / "ray", columns=["text"]).num_rows
    ray.shutdown()
    return rows


def run_daft(url: str, text: Path, parquet: Path, out: Path) -> int:
    import daft
    from daft.functions import embed_text

    import vllm_tasks as vt
    from vllm_tasks.integrations.daft import VLLMProvider

    started = time.perf_counter()
    provider = VLLMProvider(vt.ClientSettings(url), batch_size=BATCH, concurrency=CONCURRENCY)
    frame = daft.read_parquet(str(parquet))
    frame = frame.with_column("vector", embed_text(daft.col("text"), provider=provider))
    frame.write_parquet(str(out / "daft"))
    _report_job(started)
    return pq.read_table(out / "daft", columns=["text"]).num_rows


def run_spark(url: str, text: Path, parquet: Path, out: Path) -> int:
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers import vllm_tasks from this venv

    import vllm_tasks as vt
    from vllm_tasks.integrations.spark import embed_udf

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    started = time.perf_counter()
    embed = embed_udf(settings=vt.ClientSettings(url), batch_size=BATCH, concurrency=CONCURRENCY)
    frame = spark.read.parquet(str(parquet)).withColumn("e", embed("text"))
    frame.select("text", "e.embedding").write.parquet(str(out / "spark"))
    _report_job(started)
    spark.stop()
    return pq.read_table(out / "spark", columns=["text"]).num_rows


SATURATE_SCRIPT = """
import sys, time, pyarrow.parquet as pq
from saturate import pump
url, parquet, out = sys.argv[1:4]
texts = pq.read_table(parquet).column("text").to_pylist()
started = time.perf_counter()
stats = pump(
    ({"id": str(i), "text": t} for i, t in enumerate(texts)),
    to_request=lambda row: {"model": "minilm", "input": [row["text"]]},
    parse=lambda row, response: {"vector": response["data"][0]["embedding"]},
    endpoint=url + "/v1/embeddings",
    output=out,
)
print("JOB", time.perf_counter() - started, flush=True)
print("ROWS", stats.rows_processed, flush=True)
"""


def saturate_python() -> Path | None:
    """The python of a venv holding saturate (made on first use); None where it does not install."""
    python = SATURATE_VENV / "bin" / "python"
    if not python.exists():
        venv.create(SATURATE_VENV, with_pip=True)
        install = [str(python), "-m", "pip", "install", "--quiet", "saturate==0.2.0"]
        if subprocess.run(install, check=False).returncode != 0:
            return None
    return python


def _report_job(started: float) -> None:
    print("JOB", time.perf_counter() - started, flush=True)


RUNNERS = {
    "embed_file": run_embed_file,
    "ray": run_ray,
    "ray_async": functools.partial(run_ray, asynchronous=True),
    "daft": run_daft,
    "spark": run_spark,
}


def tree_cpu(process: subprocess.Popen[str]) -> float:
    """User + system seconds of ``process`` and every process under it (a JVM, Ray's daemons and
    workers: none of them is reaped by this process, so ``RUSAGE_CHILDREN`` misses them), sampled every
    0.1 s until it exits: a descendant's last 0.1 s before it ends is missed."""
    seen: dict[tuple[int, float], float] = {}
    root = psutil.Process(process.pid)
    while process.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        for member in tree:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                times = member.cpu_times()
                seen[(member.pid, member.create_time())] = times.user + times.system
        time.sleep(0.1)
    return sum(seen.values())


def measure(front: str, url: str, text: Path, parquet: Path) -> dict[str, float] | str:
    """Run one front in its own process; its job seconds, rows and process-tree CPU seconds."""
    with tempfile.TemporaryDirectory() as out:
        if front == "saturate":
            python = saturate_python()
            if python is None:
                return "saturate did not install"
            command = [str(python), "-c", SATURATE_SCRIPT, url, str(parquet), out + "/saturate"]
        else:
            command = [sys.executable, __file__, "run", front, url, str(text), str(parquet), out]
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        cpu = tree_cpu(process)
        stdout, stderr = process.communicate()
        wall = time.perf_counter() - started
    if process.returncode != 0:
        return f"failed: {stderr.strip().splitlines()[-1] if stderr.strip() else process.returncode}"
    values = dict(line.split(" ", 1) for line in stdout.splitlines() if line.startswith(("JOB", "ROWS")))
    return {"job": float(values["JOB"]), "wall": wall, "rows": float(values["ROWS"]), "cpu": cpu}


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--texts", type=int, default=100_000)
    parser.add_argument("--fronts", default=",".join(FRONTS))
    args = parser.parse_args()
    url, server = fake_server()
    try:
        with tempfile.TemporaryDirectory() as folder:
            text = corpus(Path(folder), args.texts)
            lines = text.read_text().splitlines()
            parquet = Path(folder) / "corpus.parquet"
            pq.write_table(pa.table({"text": lines}), parquet)
            print(f"{args.texts:,} texts, {BATCH} a request, {CONCURRENCY} in flight; fake server {url}")
            print(f"{'front':<12}{'rows':>9}{'job s':>9}{'rows/s':>10}{'vs embed_file':>15}"
                  f"{'wall s':>9}{'CPU s':>8}{'µs/row':>9}")  # fmt: skip
            reference: float | None = None
            for front in args.fronts.split(","):
                result = measure(front, url, text, parquet)
                if isinstance(result, str):
                    print(f"{front:<12}{result}")
                    continue
                rate = result["rows"] / result["job"]
                reference = reference or (rate if front == "embed_file" else None)
                ratio = f"{rate / reference:.2f}x" if reference else "-"
                print(
                    f"{front:<12}{result['rows']:>9,.0f}{result['job']:>9.2f}{rate:>10,.0f}{ratio:>15}"
                    f"{result['wall']:>9.1f}{result['cpu']:>8.1f}{result['cpu'] / result['rows'] * 1e6:>9.0f}"
                )
    finally:
        server.terminate()
        server.wait()


def run_front() -> None:
    """``run FRONT URL TEXT PARQUET OUT``: one front, in this process (what ``measure`` starts)."""
    front, url, text, parquet, out = sys.argv[2:7]
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    rows = RUNNERS[front](url, Path(text), Path(parquet), Path(out))
    print("ROWS", rows, flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "run":
        run_front()
    else:
        main()
