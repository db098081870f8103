"""The job engine (``vllm-tasks embed-file``) against the real `embed` vLLM CPU server (issue 12, part 4).

- ``kill -9`` of the CLI at random points, then a resume: the output is byte-identical to an uninterrupted
  run, for text, JSONL and Parquet inputs;
- a replica stopped mid-job (a second `embed` server from server-fixtures/launcher.py): the job finishes
  on the other one with nothing lost;
- a poisoned row (over the model's 256 tokens, truncation off) isolated, every other row written;
- a swapped model and a changed input refused on resume;
- a full disk (a 1 MiB tmpfs) is a typed error (exit code 3), not a SIGBUS.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from launcher import FixtureServer

import vllm_tasks as vt
from tests.clients import cli_env, kill_at_random_progress
from vllm_tasks import cli
from vllm_tasks.testing import EMBEDDING_TASKS, FakeVLLM

pytestmark = pytest.mark.integration

ROWS = 1500
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda"]
WORDS += ["mu", "nu", "xi", "omicron", "pi", "rho"]
TEXTS = [" ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(3 + i % 11)) + f" #{i}" for i in range(ROWS)]
JOB_ARGS = ["--chunk-rows", "100", "--batch-size", "25", "--concurrency", "4"]


def cli_command(source: Path, out: Path, *urls: str, extra: tuple[str, ...] = ()) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "vllm_tasks.cli",
        "embed-file",
        str(source),
        "--out",
        str(out),
        *JOB_ARGS,
    ]
    for url in urls:
        command += ["--url", url]
    return command + list(extra)


def run_cli(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, env=cli_env(), capture_output=True, text=True, timeout=600, check=False)


def done_chunks(out: Path) -> int:
    try:
        saved = json.loads(out.with_name(out.name + ".partial").joinpath("state.json").read_text())
    except (OSError, ValueError):
        return 0
    return int(saved["done_below"]) + len(saved["done_above"])


def finished_chunks(out: Path, chunks: int) -> int:
    """Chunks done so far: all of them once the output is in place (the checkpoint is gone then)."""
    return chunks if out.exists() else done_chunks(out)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("inputs")
    text = folder / "corpus.txt"
    text.write_text("\n".join(TEXTS) + "\n")
    jsonl = folder / "corpus.jsonl"
    jsonl.write_text("".join(json.dumps({"id": f"doc-{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    parquet = folder / "corpus.parquet"
    table = pa.table({"id": [f"doc-{i}" for i in range(ROWS)], "text": TEXTS})
    pq.write_table(table, parquet, row_group_size=300)
    return {"text": text, "jsonl": jsonl, "parquet": parquet}


@pytest.fixture(scope="module")
def reference(vllm_embed: Any, inputs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted run: the bytes every interrupted run must end with."""
    out = tmp_path_factory.mktemp("reference") / "corpus.npy"
    result = run_cli(cli_command(inputs["text"], out, vllm_embed.base_url))
    assert result.returncode == 0, result.stderr
    with vt.Client(vllm_embed.base_url) as client:
        assert np.abs(np.load(out)[:50] - client.embed(TEXTS[:50]).vectors).max() <= 1e-5
    return out


@pytest.mark.parametrize("kind", ["text", "jsonl", "parquet"])
def test_kill_9_at_random_points_then_resume_is_byte_identical(
    vllm_embed: Any, inputs: dict[str, Path], reference: Path, tmp_path: Path, kind: str
) -> None:
    out = tmp_path / ("corpus.parquet" if kind == "parquet" else "corpus.npy")
    extra = ("--id-field", "id") if kind != "text" else ()
    command = cli_command(inputs[kind], out, vllm_embed.base_url, extra=extra)
    seen: list[int] = []
    chunks, rng = ROWS // 100, random.Random(f"kill-{kind}")
    for _ in kill_at_random_progress(command, lambda: finished_chunks(out, chunks), chunks, rng, kills=4):
        seen.append(finished_chunks(out, chunks))
    assert any(0 < done < chunks for done in seen), seen  # at least one kill mid-job
    result = run_cli(command)
    assert result.returncode == 0, result.stderr
    if kind == "parquet":
        table = pq.read_table(out)
        assert table.column("id").to_pylist() == [f"doc-{i}" for i in range(ROWS)]
        vectors = np.stack(table.column("embedding").to_numpy(zero_copy_only=False))
        assert vectors.tobytes() == np.load(reference).tobytes()
        assert pq.ParquetFile(out).metadata.num_row_groups == ROWS // 100
    else:
        assert out.read_bytes() == reference.read_bytes()
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
    assert manifest["timings"]["runs"] >= 2 and manifest["rows"] == ROWS


@pytest.fixture
def second_embed_server(vllm_embed: Any) -> Iterator[FixtureServer]:
    """A second `embed` server (the session's lock file is held by whoever runs this test session)."""
    server = FixtureServer("embed")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def answered_embeddings(server: FixtureServer) -> int:
    """How many answered embeddings requests the server's access log shows."""
    return Path(server.log_path).read_text(errors="replace").count('"POST /v1/embeddings HTTP/1.1" 200')


def test_a_replica_stopped_mid_job_loses_nothing(
    vllm_embed: Any,
    second_embed_server: FixtureServer,
    inputs: dict[str, Path],
    reference: Path,
    tmp_path: Path,
) -> None:
    out = tmp_path / "corpus.npy"
    command = cli_command(inputs["text"], out, vllm_embed.base_url, second_embed_server.base_url)
    before = answered_embeddings(second_embed_server)
    child = subprocess.Popen(
        command, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 300
    # Stop the second replica once it has answered a batch (a cold server on a loaded machine may answer
    # its first only after the other has finished three chunks) and the job is well under way. Its first
    # answer is the job's model probe, which is not a batch: wait for two.
    while done_chunks(out) < 3 or answered_embeddings(second_embed_server) < before + 2:
        assert child.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    second_embed_server.stop()
    _, err = child.communicate(timeout=600)
    assert child.returncode == 0, err
    assert np.abs(np.load(out) - np.load(reference)).max() <= 1e-5
    replicas = {
        r["url"]: r for r in json.loads(out.with_name("corpus.npy.manifest.json").read_text())["replicas"]
    }
    assert replicas[second_embed_server.base_url]["rows"] > 0  # it worked before it stopped
    assert replicas[second_embed_server.base_url]["failures"] >= 1
    assert replicas[vllm_embed.base_url]["rows"] + replicas[second_embed_server.base_url]["rows"] == ROWS
    assert "set aside" in err


def test_a_poisoned_row_is_isolated(vllm_embed: Any, tmp_path: Path) -> None:
    texts = TEXTS[:200]
    texts[77] = " ".join(WORDS * 60)  # about 1,000 tokens: over the fixture's max_model_len of 256
    source = tmp_path / "poisoned.txt"
    source.write_text("\n".join(texts) + "\n")
    out = tmp_path / "poisoned.npy"
    with vt.Client(vllm_embed.base_url) as client:
        report = vt.embed_file(client, source, out, batch_size=32)
        good = [i for i in range(200) if i != 77]
        expected = client.embed([texts[i] for i in good]).vectors
    assert report.failed_rows == 1
    (refused,) = [
        json.loads(line) for line in out.with_name("poisoned.npy.errors.jsonl").read_text().splitlines()
    ]
    assert (refused["row"], refused["status"]) == (77, 400)
    assert "maximum context length is 256 tokens" in refused["error"]
    matrix = np.load(out)
    assert np.isnan(matrix[77]).all()
    assert np.abs(matrix[good] - expected).max() <= 1e-5


def test_a_swapped_model_and_a_changed_input_are_refused(
    vllm_embed: Any, inputs: dict[str, Path], tmp_path: Path
) -> None:
    source = tmp_path / "corpus.txt"
    shutil.copy(inputs["text"], source)
    out = tmp_path / "corpus.npy"
    command = cli_command(source, out, vllm_embed.base_url)
    child = subprocess.Popen(command, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while done_chunks(out) < 2:
        assert child.poll() is None
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    # Another model under the same name and width (what a redeploy behind the same URL can do).
    with FakeVLLM(model=vllm_embed.model, tasks=EMBEDDING_TASKS, width=384) as swapped:
        result = run_cli(cli_command(source, out, swapped.url))
    assert result.returncode == cli.EXIT_JOB_REFUSED
    assert "served model weights" in result.stderr and "the served model was swapped" in result.stderr
    source.write_text(source.read_text().replace("#7\n", "#8\n"))
    result = run_cli(command)
    assert result.returncode == cli.EXIT_JOB_REFUSED and "input content" in result.stderr
    assert done_chunks(out) >= 2  # the refusals left the checkpoint alone


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (the tests run as root on the CI machine)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (needs root): {done.stderr.decode()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_is_a_typed_error(vllm_embed: Any, inputs: dict[str, Path], small_disk: Path) -> None:
    out = small_disk / "corpus.npy"
    result = run_cli(cli_command(inputs["text"], out, vllm_embed.base_url))
    assert result.returncode == cli.EXIT_JOB_REFUSED, result.stderr
    assert f"needs {ROWS * 384 * 4 + 128:,} bytes" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()
