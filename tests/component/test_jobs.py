"""embed_file() / aembed_file() and ``vllm-tasks embed-file``: the job engine against FakeVLLM servers (real
HTTP, deterministic vectors).

Each gap issue 12 lists under "Why" has a test here that failed on the old ``vllm_tasks/jobs.py``:
``test_full_disk_*``, ``test_a_finished_job_*``, ``test_a_swapped_model_*`` / ``test_changed_concurrency_*``
/ ``test_an_in_place_edit_*``, ``test_lone_carriage_returns_*``, ``test_a_poisoned_row_*``, and
``test_the_job_shares_an_event_loop``.

The last section runs the CLI in a child process against a fake configured like the `embed` fixture
(tests/fakes.py; each batch answered after 0.2 s, so that a kill lands mid-job): ``kill -9`` at seeded
random points, then a resume, is byte-identical to an uninterrupted run for text, JSONL and Parquet inputs;
a second replica (another FakeVLLM) stopped mid-job loses nothing; a swapped model and a changed input are
refused on resume (exit code 3) and leave the checkpoint alone; a full disk (a 1 MiB tmpfs, mounted as root)
is exit code 3, not a SIGBUS.
"""

from __future__ import annotations

import asyncio
import csv
import errno
import json
import os
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

import vllm_tasks as vt
from vllm_tasks import cli
from vllm_tasks.jobs import embed, outputs, state
from vllm_tasks.jobs.state import PROBE_TEXT
from vllm_tasks.testing import EMBEDDING_TASKS, FakeVLLM
from vllm_tasks.testing import content as fake_content

from ..clients import Ticker, cli_env, kill_at_random_progress, start_cli_for_ctrl_c
from ..fakes import FakeFixture, fake_like
from .conftest import BASE

WIDTH = 8
EMBED = "/v1/embeddings"
FAST = {"retry_replica_after": 0.05, "give_up_after": 0.3}  # a dead server stops the job quickly


def fake_server(**settings: Any) -> FakeVLLM:
    return FakeVLLM(**{"model": "minilm", "tasks": EMBEDDING_TASKS, "width": WIDTH, **settings})


@pytest.fixture
def fake() -> Iterator[FakeVLLM]:
    with fake_server() as server:
        yield server


def expected(fake: FakeVLLM, lines: list[str]) -> np.ndarray:
    return np.stack([fake.vector(text) for text in lines])


LINES = [f"text {i} " + "x" * (i % 7) for i in range(47)] + [""]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return path


def client(fake: FakeVLLM) -> vt.Client:
    return vt.Client(fake.url, max_retries=0)


def break_after(fake: FakeVLLM, requests: int) -> None:
    """Let ``requests`` embedding requests through (the job's probe is the first), then fail them all."""
    fake.fail(500, path=EMBED, after=requests, times=None)


def test_embed_file_writes_every_line_in_order(corpus: Path, tmp_path: Path, fake: FakeVLLM) -> None:
    out = tmp_path / "out.npy"
    with client(fake) as c:
        report = vt.embed_file(
            c, corpus, out, chunk_rows=5, batch_size=2, params=vt.EmbedParams(encoding_format="float")
        )
    assert (report.texts, report.dimensions, report.chunks_sent, report.chunks_resumed) == (48, WIDTH, 10, 0)
    np.testing.assert_array_equal(np.load(out), expected(fake, LINES))
    assert not out.with_name("out.npy.partial").exists()  # the work folder is gone, the result renamed
    manifest = json.loads(out.with_name("out.npy.manifest.json").read_text())
    assert (manifest["rows"], manifest["width"], manifest["dtype"], manifest["model"]) == (
        48,
        WIDTH,
        "float32",
        "minilm",
    )
    assert manifest["servers"] == [{"url": fake.url, "version": "0.32.0"}]
    # The probe text checks the model at the start and after each chunk.
    batches = [r.json["input"] for r in fake.received(EMBED) if r.json["input"] != [PROBE_TEXT]]
    assert sorted(text for batch in batches for text in batch) == sorted(LINES)
    assert max(len(batch) for batch in batches) == 2


def test_a_failed_run_resumes_where_it_stopped(corpus: Path, tmp_path: Path, fake: FakeVLLM) -> None:
    out = tmp_path / "out.npy"
    break_after(fake, 1 + 3 * 2)  # the start's probe, then each chunk and the probe after it
    with client(fake) as c, pytest.raises(vt.InternalServerError):
        vt.embed_file(c, corpus, out, chunk_rows=5, batch_size=5, concurrency=1, **FAST)
    saved = json.loads((tmp_path / "out.npy.partial" / "state.json").read_text())
    done = saved["done_below"] + len(saved["done_above"])  # in any order: the window interleaves them
    assert done >= 1 and not out.exists()
    fake.clear_faults()
    fake.clear_requests()
    with client(fake) as c:
        report = vt.embed_file(c, corpus, out, chunk_rows=5, batch_size=5)
    assert report.chunks_resumed == done and report.chunks_resumed + report.chunks_sent == 10
    rows_sent = [r for r in fake.received(EMBED) if r.json["input"] != [PROBE_TEXT]]
    assert len(rows_sent) == report.chunks_sent  # only the missing chunks (each checked by a probe after it)
    np.testing.assert_array_equal(np.load(out), expected(fake, LINES))


# --- the gaps listed under "Why" ------------------------------------------------------------------


def test_full_disk_is_a_typed_error_before_any_row(
    corpus: Path, tmp_path: Path, fake: FakeVLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outputs, "free_bytes", lambda folder: 100)
    with client(fake) as c, pytest.raises(vt.jobs.InsufficientDiskSpace) as info:
        vt.embed_file(c, corpus, tmp_path / "out.npy")
    assert (info.value.needed, info.value.free) == (48 * WIDTH * 4 + 128, 100)  # the rows and the header
    assert isinstance(info.value, OSError)
    assert "needs 1,664 bytes but its disk has 100 free" in str(info.value)
    assert len(fake.received(EMBED)) == 1  # only the probe: no row was sent


def test_full_disk_found_by_the_allocation_is_typed_too(
    corpus: Path, tmp_path: Path, fake: FakeVLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """statvfs can be wrong (quotas, thin provisioning): the allocation itself fails with ENOSPC."""

    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    with client(fake) as c, pytest.raises(vt.jobs.InsufficientDiskSpace):
        vt.embed_file(c, corpus, tmp_path / "out.npy")


def test_a_finished_job_run_again_is_a_no_op(
    corpus: Path, tmp_path: Path, fake: FakeVLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.npy"
    with client(fake) as c:
        vt.embed_file(c, corpus, out, chunk_rows=5)
    before = out.read_bytes()
    fake.fail(500, path=EMBED, times=None)  # old code: recreated the matrix first, then failed: zeros
    with client(fake) as c, pytest.raises(vt.InternalServerError):
        vt.embed_file(c, corpus, out, chunk_rows=5, **FAST)
    assert out.read_bytes() == before
    fake.clear_faults()
    fake.clear_requests()
    assert cli.main(["embed-file", str(corpus), "--out", str(out), "--url", fake.url]) == cli.EXIT_OK
    assert "already complete" in capsys.readouterr().err
    assert len(fake.received(EMBED)) == 1  # the probe that checks the model
    assert out.read_bytes() == before


@pytest.mark.parametrize("suffix", [".npy", ".parquet"])
def test_stopped_while_moving_the_result_into_place(
    corpus: Path, tmp_path: Path, fake: FakeVLLM, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    """Killed after the rename, before the manifest: the next run finishes without recreating rows."""
    out = tmp_path / f"out{suffix}"

    def killed(path: Path, payload: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(embed, "write_json", killed)
    with client(fake) as c, pytest.raises(KeyboardInterrupt):
        vt.embed_file(c, corpus, out, chunk_rows=5)
    assert out.exists() and not out.with_name(out.name + ".manifest.json").exists()
    monkeypatch.undo()
    fake.clear_requests()
    with client(fake) as c:
        report = vt.embed_file(c, corpus, out, chunk_rows=5)
    assert (report.chunks_sent, report.chunks_resumed) == (0, 10)
    assert len(fake.received(EMBED)) == 1  # the probe
    if suffix == ".npy":
        vectors = np.load(out)
    else:
        vectors = np.stack(pq.read_table(out).column("embedding").to_numpy(zero_copy_only=False))
    np.testing.assert_array_equal(vectors, expected(fake, LINES))
    assert out.with_name(out.name + ".manifest.json").exists()
    assert not out.with_name(out.name + ".partial").exists()


def test_a_swapped_model_is_refused_on_resume(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.npy"
    with fake_server() as first, client(first) as c:
        first.settings.root = "BAAI/bge-small"
        break_after(first, 3)
        with pytest.raises(vt.InternalServerError):
            vt.embed_file(c, corpus, out, chunk_rows=5, concurrency=1, **FAST)
    # same name, same width, other weights: the old code mixed both into one matrix
    with fake_server() as second, client(second) as c:
        second.settings.root = "intfloat/e5-small"
        with pytest.raises(
            vt.jobs.JobMismatch, match="served model weights: 'BAAI/bge-small' -> 'intfloat/e5-small'"
        ):
            vt.embed_file(c, corpus, out, chunk_rows=5)
        assert len(second.received(EMBED)) == 1  # the probe only


def test_probe_vectors_tell_a_swapped_model_apart_under_the_same_name() -> None:
    before = {"model": {"model": "m", "probe": [1.0, 0.0]}}
    assert state.changes(before, {"model": {"model": "m", "probe": [0.99999, 0.0001]}}) == []
    (line,) = state.changes(before, {"model": {"model": "m", "probe": [0.0, 1.0]}})
    assert "cosine 0.000" in line and "swapped" in line


def test_changed_concurrency_or_batch_size_resumes(corpus: Path, tmp_path: Path, fake: FakeVLLM) -> None:
    out = tmp_path / "out.npy"
    break_after(fake, 1 + 2 * 2)
    with client(fake) as c, pytest.raises(vt.InternalServerError):
        vt.embed_file(c, corpus, out, chunk_rows=5, batch_size=5, concurrency=1, **FAST)
    fake.clear_faults()
    with client(fake) as c:
        report = vt.embed_file(c, corpus, out, chunk_rows=5, batch_size=3, concurrency=7)
    assert report.chunks_resumed >= 1  # old code: concurrency was in the fingerprint, chunk 0 again
    np.testing.assert_array_equal(np.load(out), expected(fake, LINES))


def test_an_in_place_edit_with_the_mtime_kept_is_refused(
    corpus: Path, tmp_path: Path, fake: FakeVLLM
) -> None:
    out = tmp_path / "out.npy"
    break_after(fake, 3)
    with client(fake) as c, pytest.raises(vt.InternalServerError):
        vt.embed_file(c, corpus, out, chunk_rows=5, concurrency=1, **FAST)
    fake.clear_faults()
    stat = corpus.stat()
    content = corpus.read_bytes()
    corpus.write_bytes(content.replace(b"text 1 ", b"TEXT 1 "))  # same size
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with client(fake) as c, pytest.raises(vt.jobs.JobMismatch, match="input content") as info:
        vt.embed_file(c, corpus, out, chunk_rows=5)
    assert "--restart" in str(info.value)
    with client(fake) as c:  # starting over is the user's call
        report = vt.embed_file(c, corpus, out, chunk_rows=5, resume=False)
    assert report.chunks_resumed == 0


def test_changed_vector_options_are_refused(corpus: Path, tmp_path: Path, fake: FakeVLLM) -> None:
    out = tmp_path / "out.npy"
    with client(fake) as c:
        vt.embed_file(c, corpus, out)
        with pytest.raises(vt.jobs.JobMismatch, match="option dimensions: None -> 4"):
            vt.embed_file(c, corpus, out, params=vt.EmbedParams(dimensions=4))
        float_answers = vt.EmbedParams(encoding_format="float")
        assert vt.embed_file(c, corpus, out, params=float_answers).already_complete  # transport only


def test_lone_carriage_returns_stay_in_their_line(
    tmp_path: Path, fake: FakeVLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "cr.txt"
    source.write_bytes(b"one\rstill one\ntwo\r\n\rthree\nfour")
    lines = ["one\rstill one", "two", "\rthree", "four"]
    out = tmp_path / "cr.npy"
    assert cli.main(["embed-file", str(source), "--out", str(out), "--url", fake.url]) == cli.EXIT_OK
    np.testing.assert_array_equal(np.load(out), expected(fake, lines))
    assert cli.main(["embed", "--file", str(source), "--url", fake.url]) == cli.EXIT_OK
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    np.testing.assert_array_equal(np.array(printed, np.float32), np.load(out))  # same split, same rows


def test_cli_embed_prints_json_vectors(fake: FakeVLLM, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["embed", "hello", "hi", "--url", fake.url]) == cli.EXIT_OK
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    np.testing.assert_array_equal(np.array(printed, np.float32), expected(fake, ["hello", "hi"]))
    assert cli.main(["embed", "--url", fake.url]) == cli.EXIT_USAGE


def test_a_poisoned_row_is_isolated_and_every_other_row_written(tmp_path: Path) -> None:
    lines = [f"short text {i}" for i in range(40)]
    lines[13] = " ".join(["word"] * 100)  # over the fake's max_model_len of 64 tokens
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"doc": f"d{i}", "body": t}) + "\n" for i, t in enumerate(lines)))
    out = tmp_path / "out.npy"
    with fake_server(max_model_len=64) as fake, client(fake) as c:
        report = vt.embed_file(c, source, out, text_field="body", id_field="doc", batch_size=16)
        refused = [
            json.loads(line) for line in out.with_name("out.npy.errors.jsonl").read_text().splitlines()
        ]
        assert report.failed_rows == 1 and report.errors_file == out.with_name("out.npy.errors.jsonl")
        assert [(r["row"], r["id"], r["status"]) for r in refused] == [(13, "d13", 400)]
        assert "maximum context length is 64 tokens" in refused[0]["error"]  # the server's own message
        matrix = np.load(out)
        assert np.isnan(matrix[13]).all()
        good = [i for i in range(40) if i != 13]
        np.testing.assert_array_equal(matrix[good], expected(fake, [lines[i] for i in good]))
        assert out.with_name("out.npy.ids.jsonl").read_text().split() == [f'"d{i}"' for i in range(40)]
        with pytest.raises(vt.jobs.RowFailed, match=r"row 13 \(id 'd13'\)") as info:
            vt.embed_file(c, source, tmp_path / "ff.npy", text_field="body", id_field="doc", fail_fast=True)
        assert (info.value.row, info.value.row_id) == (13, "d13")
        truncated = vt.embed_file(c, source, tmp_path / "t.npy", text_field="body", too_long="truncate")
        assert truncated.failed_rows == 0


def test_the_job_shares_an_event_loop(corpus: Path, tmp_path: Path) -> None:
    async def main() -> tuple[vt.jobs.EmbedFileReport, int]:
        async with Ticker(interval=0.005) as ticker, vt.AsyncClient(fake.url) as aclient:
            report = await vt.aembed_file(aclient, corpus, tmp_path / "a.npy", chunk_rows=5, batch_size=2)
        return report, ticker.ticks

    with fake_server(latency=0.02) as fake:
        report, ticks = asyncio.run(main())
        np.testing.assert_array_equal(np.load(report.out), expected(fake, LINES))
    assert ticks > 10


def test_the_sync_job_runs_where_an_event_loop_is_running(
    corpus: Path, tmp_path: Path, fake: FakeVLLM
) -> None:
    """A Jupyter cell runs in an event loop: embed_file used to fail there ('asyncio.run() cannot be
    called from a running event loop', seen running docs/jobs.md's example)."""

    async def cell() -> vt.jobs.EmbedFileReport:
        return vt.embed_file(fake.url, corpus, tmp_path / "cell.npy", chunk_rows=5, batch_size=2)

    report = asyncio.run(cell())
    np.testing.assert_array_equal(np.load(report.out), expected(fake, LINES))


# --- inputs and outputs -------------------------------------------------------------------------


def test_jsonl_csv_and_parquet_inputs(tmp_path: Path, fake: FakeVLLM) -> None:
    texts = [f"row {i}, with a comma\nand a newline" if i % 5 == 0 else f"row {i}" for i in range(23)]
    records = [{"id": 100 + i, "text": t, "lang": "en"} for i, t in enumerate(texts)]
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in records) + "\n\n")  # a blank line is no row
    with (tmp_path / "in.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, ["id", "text", "lang"])
        writer.writeheader()
        writer.writerows(records)
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "in.parquet", row_group_size=7)
    with client(fake) as c:
        for name in ("in.jsonl", "in.csv", "in.parquet"):
            out = tmp_path / f"{name}.npy"
            report = vt.embed_file(c, tmp_path / name, out, chunk_rows=4)
            assert report.texts == 23, name
            np.testing.assert_array_equal(np.load(out), expected(fake, texts))
        with pytest.raises(vt.InvalidInputError) as info:
            vt.embed_file(c, jsonl, tmp_path / "x.npy", text_field="body")
        assert info.value.field == "text_field"


def test_parquet_output_for_a_vector_database(tmp_path: Path, fake: FakeVLLM) -> None:
    records = [{"doc_id": f"d{i}", "text": f"text {i}", "title": f"T{i}", "n": i} for i in range(11)]
    source = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(records), source, row_group_size=4)
    out = tmp_path / "out.parquet"
    with client(fake) as c:
        vt.embed_file(c, source, out, id_field="doc_id", keep_columns=["title", "n"], chunk_rows=3)
    table = pq.read_table(out)
    assert table.schema.names == ["doc_id", "title", "n", "embedding"]
    assert table.schema.field("embedding").type == pa.list_(pa.float32(), WIDTH)
    assert table.schema.field("n").type == pa.int64()  # the input's own types
    assert table.column("doc_id").to_pylist() == [r["doc_id"] for r in records]
    vectors = np.stack(table.column("embedding").to_numpy(zero_copy_only=False))
    np.testing.assert_array_equal(vectors, expected(fake, [r["text"] for r in records]))
    assert pq.ParquetFile(out).metadata.num_row_groups == 4  # one per chunk


def test_bad_jobs_are_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    text = tmp_path / "in.txt"
    text.write_text("a\n")
    cases: list[tuple[Path, dict[str, Any], str]] = [
        (empty, {}, "source"),
        (text, {"chunk_rows": 0}, "chunk_rows"),
        (text, {"params": 4}, "params"),
        (text, {"params": {"dimension": 4}}, "params"),
        (text, {"concurrency": 0}, "concurrency"),
        (text, {"text_field": "body"}, "text_field"),
        (text, {"too_long": "drop"}, "too_long"),
        (text, {"output_format": "csv"}, "output_format"),
    ]
    for source, kwargs, field in cases:
        with pytest.raises(vt.InvalidInputError) as info:
            vt.embed_file(BASE, source, tmp_path / "o.npy", **kwargs)
        assert info.value.field == field, kwargs


def test_an_unknown_or_bad_option_fails_before_any_request(tmp_path: Path) -> None:
    text = tmp_path / "in.txt"
    text.write_text("a\nb\n")
    with FakeVLLM() as fake:
        with pytest.raises(TypeError, match="dimension"):
            vt.embed_file(fake.url, text, tmp_path / "o.npy", dimension=4)  # type: ignore[call-arg]
        with pytest.raises(vt.InvalidInputError) as bad:
            vt.embed_file(fake.url, text, tmp_path / "o.npy", params=vt.EmbedParams(dimensions=0))
        assert bad.value.field == "dimensions"
        assert fake.requests == []


# --- several servers -------------------------------------------------------------------------------


def test_batches_go_to_every_replica_and_the_report_says_how_much(corpus: Path, tmp_path: Path) -> None:
    with fake_server(latency=0.01) as a, fake_server(latency=0.01) as b:
        report = vt.embed_file([a.url, b.url], corpus, tmp_path / "o.npy", batch_size=2, concurrency=2)
        np.testing.assert_array_equal(np.load(report.out), expected(a, LINES))
    rows = {r.url: r.rows for r in report.replicas}
    assert sum(rows.values()) == 48 and min(rows.values()) >= 12  # least-in-flight spreads the work
    assert all(r.rows_per_second > 0 and r.batches > 0 for r in report.replicas)


def test_a_failing_replica_is_set_aside_and_nothing_is_lost(corpus: Path, tmp_path: Path) -> None:
    with fake_server() as good, fake_server() as bad:
        bad.fail(503, path=EMBED, after=1, times=None)  # answers the probe, then fails every batch
        with vt.Client(bad.url, max_retries=0) as flaky:
            report = vt.embed_file(
                [good.url, flaky],
                corpus,
                tmp_path / "o.npy",
                batch_size=2,
                retry_replica_after=0.05,
                concurrency=4,  # auto (the default) starts at 1: the good one could finish first
            )
        np.testing.assert_array_equal(np.load(report.out), expected(good, LINES))
        by_url = {r.url: r for r in report.replicas}
        assert by_url[bad.url].failures >= 2 and by_url[bad.url].rows == 0  # retried later, failed again
        assert by_url[good.url].rows == 48


def test_replicas_must_serve_the_same_model(corpus: Path, tmp_path: Path) -> None:
    with fake_server() as a, fake_server(model="e5") as b, pytest.raises(vt.jobs.ReplicaMismatch) as info:
        vt.embed_file([a.url, b.url], corpus, tmp_path / "o.npy")
    assert "'minilm'" in str(info.value) and "'e5'" in str(info.value)
    assert not (tmp_path / "o.npy.partial").exists()


def test_every_replica_down_stops_the_job_with_its_error(corpus: Path, tmp_path: Path) -> None:
    with fake_server() as a, fake_server() as b:
        for server in (a, b):
            break_after(server, 1)
        with pytest.raises(vt.InternalServerError):
            vt.embed_file([client(a), client(b)], corpus, tmp_path / "o.npy", **FAST)


# --- progress, Ctrl-C --------------------------------------------------------------------------------


def test_progress_is_a_log_line_without_a_terminal(
    corpus: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="vllm_tasks.jobs")
    with fake_server(latency=0.01) as fake, client(fake) as c:
        vt.embed_file(
            c, corpus, tmp_path / "o.npy", batch_size=4, show_progress=True, progress_interval=0.001
        )
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("embed: ")]
    assert lines and "/48 rows" in lines[-1] and "rows/s" in lines[-1] and "tok/s" in lines[-1]


def test_progress_is_a_bar_on_a_terminal(
    corpus: Path,
    tmp_path: Path,
    fake: FakeVLLM,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with client(fake) as c:
        vt.embed_file(c, corpus, tmp_path / "o.npy", batch_size=4, show_progress=True)
    bar = capsys.readouterr().err
    assert "embed: 100%" in bar and "48/48" in bar and "tok/s" in bar and fake.url.split("//")[1] in bar


def test_a_line_that_is_not_utf8_is_named(tmp_path: Path, fake: FakeVLLM) -> None:
    source = tmp_path / "latin1.txt"
    source.write_bytes(b"fine\ncaf\xe9\n")
    with client(fake) as c, pytest.raises(vt.InvalidInputError, match="line 2 is not UTF-8"):
        vt.embed_file(c, source, tmp_path / "o.npy")


def test_ctrl_c_stops_promptly_and_the_job_resumes(corpus: Path, tmp_path: Path) -> None:
    source = tmp_path / "big.txt"
    lines = [f"line {i}" for i in range(400)]
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "o.npy"
    command = ["embed-file", str(source), "--out", str(out), "--chunk-rows", "20", "--batch-size", "5"]
    command += ["--concurrency", "2"]
    with fake_server(latency=0.05) as fake:
        child = start_cli_for_ctrl_c([*command, "--url", fake.url])
        state_file = tmp_path / "o.npy.partial" / "state.json"
        deadline = time.monotonic() + 30
        while not (state_file.exists() and json.loads(state_file.read_text())["done_below"] >= 2):
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, err = child.communicate(timeout=10)
        assert child.returncode == cli.EXIT_INTERRUPTED and time.monotonic() - sent < 3
        assert "run the same command again to resume" in err
        done = json.loads(state_file.read_text())["done_below"]
        assert 2 <= done < 20
        assert cli.main(["embed-file", str(source), "--out", str(out), "--url", fake.url]) == cli.EXIT_OK
        np.testing.assert_array_equal(np.load(out), expected(fake, lines))


# --- the CLI in a child process: kill -9, a replica stopped, a swapped model, a full disk ------------------

ROWS = 1500
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda"]
WORDS += ["mu", "nu", "xi", "omicron", "pi", "rho"]
TEXTS = [" ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(3 + i % 11)) + f" #{i}" for i in range(ROWS)]
JOB_ARGS = ["--chunk-rows", "100", "--batch-size", "25", "--concurrency", "4"]
SLOW = 0.2  # seconds per embeddings answer: a chunk (4 batches, 4 at once) takes about that, so the
# 0-0.5 s a kill waits past its target is at most 2 chunks (the seeds below aim at chunks 2, 3 and 11 of 15)


def numbered_rows(folder: Path, count: int) -> tuple[list[str], Path]:
    """``row 0`` … ``row {count - 1}``, and ``in.txt`` in ``folder`` holding them one per line."""
    lines = [f"row {i}" for i in range(count)]
    source = folder / "in.txt"
    source.write_text("\n".join(lines) + "\n")
    return lines, source


def job_command(source: Path, out: Path, *urls: str, extra: tuple[str, ...] = ()) -> list[str]:
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


@pytest.fixture
def slow_embed(fake_embed: FakeFixture) -> Iterator[FakeFixture]:
    """The module's `embed`-like fake, answering each embeddings request after ``SLOW`` seconds."""
    fake_embed.fake.slow(SLOW, path=EMBED, times=None)
    try:
        yield fake_embed
    finally:
        fake_embed.fake.clear_faults()


@pytest.fixture(scope="module")
def job_inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
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
def reference(
    fake_embed: FakeFixture, job_inputs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """An uninterrupted run: the bytes every interrupted run must end with."""
    out = tmp_path_factory.mktemp("reference") / "corpus.npy"
    result = run_cli(job_command(job_inputs["text"], out, fake_embed.base_url))
    assert result.returncode == 0, result.stderr
    with vt.Client(fake_embed.base_url) as c:
        np.testing.assert_array_equal(np.load(out), c.embed(TEXTS).vectors)
    return out


def resume_to_the_reference(command: list[str], out: Path, reference: Path, kind: str) -> None:
    """Run the job's command to the end; its output must equal the uninterrupted run's, byte for byte."""
    result = run_cli(command)
    assert result.returncode == 0, result.stderr
    if kind == "parquet":
        table = pq.read_table(out)
        assert table.column("id").to_pylist() == [f"doc-{i}" for i in range(ROWS)]
        vectors = np.stack(table.column("embedding").to_numpy(zero_copy_only=False))
        assert vectors.tobytes() == np.load(reference).tobytes()
    else:
        assert out.read_bytes() == reference.read_bytes()


@pytest.mark.parametrize("kind", ["text", "jsonl", "parquet"])
def test_kill_9_at_random_points_then_resume_is_byte_identical(
    slow_embed: FakeFixture, job_inputs: dict[str, Path], reference: Path, tmp_path: Path, kind: str
) -> None:
    out = tmp_path / ("corpus.parquet" if kind == "parquet" else "corpus.npy")
    extra = ("--id-field", "id") if kind != "text" else ()
    command = job_command(job_inputs[kind], out, slow_embed.base_url, extra=extra)
    seen: list[int] = []
    chunks, rng = ROWS // 100, random.Random(f"kill-{kind}")
    for _ in kill_at_random_progress(command, lambda: finished_chunks(out, chunks), chunks, rng, kills=4):
        seen.append(finished_chunks(out, chunks))
    assert any(0 < done < chunks for done in seen), seen  # at least one kill mid-job
    resume_to_the_reference(command, out, reference, kind)
    if kind == "parquet":
        assert pq.ParquetFile(out).metadata.num_row_groups == ROWS // 100
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
    assert manifest["timings"]["runs"] >= 2 and manifest["rows"] == ROWS


# The CLI's finish step, killed at each of its points: the child process patches the step it is told to
# die in (these patches exist only in that child) and SIGKILLs itself there.
DIE_IN_FINISH = """
import os, shutil, signal, sys
from pathlib import Path

from vllm_tasks import cli
from vllm_tasks.jobs import embed, outputs

point = sys.argv.pop(1)


def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)


def sink_finish(original):
    def finish(self, final, rows):
        if point == "move":  # the complete result written, not yet renamed into place
            replace = os.replace
            os.replace = lambda src, dst: die() if Path(dst) == final else replace(src, dst)
        original(self, final, rows)

    return finish


outputs.NpySink.finish = sink_finish(outputs.NpySink.finish)
outputs.ParquetSink.finish = sink_finish(outputs.ParquetSink.finish)
if point == "manifest":  # the result in place, the manifest not written
    write_json = embed.write_json
    manifest = lambda path: path.name.endswith(".manifest.json")
    embed.write_json = lambda path, payload: die() if manifest(path) else write_json(path, payload)
if point == "cleanup":  # the manifest written, the work folder half removed
    real_rmtree = shutil.rmtree

    def rmtree(path, *args, **kwargs):
        items = sorted(Path(path).rglob("*"), reverse=True)
        if not (Path(path).name.endswith(".partial") and items):
            return real_rmtree(path, *args, **kwargs)
        items[0].unlink() if items[0].is_file() else items[0].rmdir()  # one file gone, then killed
        die()

    embed.shutil.rmtree = rmtree
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("point", ["move", "manifest", "cleanup"])
@pytest.mark.parametrize("kind", ["text", "parquet"])
def test_kill_9_inside_the_finish_step_then_resume_is_byte_identical(
    fake_embed: FakeFixture,
    job_inputs: dict[str, Path],
    reference: Path,
    tmp_path: Path,
    kind: str,
    point: str,
) -> None:
    out = tmp_path / ("corpus.parquet" if kind == "parquet" else "corpus.npy")
    extra = ("--id-field", "id") if kind == "parquet" else ()
    command = job_command(job_inputs[kind], out, fake_embed.base_url, extra=extra)
    killed = subprocess.run(
        [sys.executable, "-c", DIE_IN_FINISH, point, *command[3:]],
        env=cli_env(),
        capture_output=True,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert out.with_name(out.name + ".partial").exists()  # killed before the work folder was gone
    resume_to_the_reference(command, out, reference, kind)
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
    assert manifest["rows"] == ROWS and manifest["complete"]
    assert not out.with_name(out.name + ".partial").exists()


def test_kill_9_during_a_model_swap_keeps_no_row_of_the_new_model(
    slow_embed: FakeFixture,
    job_inputs: dict[str, Path],
    reference: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A rolling deploy under a running job, which is killed (kill -9) while the new weights answer: the
    # resumed run is refused (the served model is not the job's), and the chunks the checkpoint kept hold
    # the old model's vectors only, byte for byte.
    out = tmp_path / "corpus.npy"
    command = job_command(job_inputs["text"], out, slow_embed.base_url)
    old_model, answered, swap_after = fake_content.text_vector, 0, 500  # vectors: the probe and 499 rows

    def rolling_deploy(text: str, width: int, **kw: Any) -> Any:
        nonlocal answered
        answered += 1
        return old_model(text if answered <= swap_after else text[::-1], width, **kw)

    monkeypatch.setattr(fake_content, "text_vector", rolling_deploy)
    child = subprocess.Popen(command, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while answered <= swap_after:  # the new weights answer (a batch of the chunk then in flight)
        assert time.monotonic() < deadline and child.poll() is None
        time.sleep(0.01)
    assert child.poll() is None  # killed while the swap is under way, before any check saw it
    child.send_signal(signal.SIGKILL)
    child.wait()
    kept = done_chunks(out)
    assert 0 < kept < ROWS // 100
    result = run_cli(command)
    assert result.returncode == cli.EXIT_JOB_REFUSED and "model" in result.stderr, result.stderr
    state = json.loads(out.with_name(out.name + ".partial").joinpath("state.json").read_text())
    partial = np.load(out.with_name(out.name + ".partial") / "data.npy", mmap_mode="r")
    done = list(range(state["done_below"])) + list(state["done_above"])
    rows = [row for chunk in done for row in range(chunk * 100, chunk * 100 + 100)]
    assert partial[rows].tobytes() == np.load(reference)[rows].tobytes()  # the old model's rows only


def test_a_replica_stopped_mid_job_loses_nothing(
    slow_embed: FakeFixture, job_inputs: dict[str, Path], reference: Path, tmp_path: Path
) -> None:
    out = tmp_path / "corpus.npy"
    with fake_like("embed") as second:
        second.fake.slow(SLOW, path=EMBED, times=None)
        second_url = second.base_url
        command = job_command(job_inputs["text"], out, slow_embed.base_url, second_url)
        child = subprocess.Popen(
            command, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 300
        # Stop the second replica once the job is well under way and the replica has answered a batch:
        # its first request is the job's model probe, and with at most 4 requests in flight, its 5th batch
        # was sent only after one before it had been answered.
        while done_chunks(out) < 3 or len(second.fake.received(EMBED)) < 1 + 5:
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        second.fake.stop()  # its port closes, the requests it held are cut off unanswered
        _, err = child.communicate(timeout=600)
    assert child.returncode == 0, err
    assert out.read_bytes() == reference.read_bytes()
    replicas = {
        r["url"]: r for r in json.loads(out.with_name("corpus.npy.manifest.json").read_text())["replicas"]
    }
    assert replicas[second_url]["rows"] > 0  # it worked before it stopped
    assert replicas[second_url]["failures"] >= 1
    assert replicas[slow_embed.base_url]["rows"] + replicas[second_url]["rows"] == ROWS
    assert "set aside" in err


def test_a_swapped_model_and_a_changed_input_are_refused_by_the_cli(
    slow_embed: FakeFixture, job_inputs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "corpus.txt"
    shutil.copy(job_inputs["text"], source)
    out = tmp_path / "corpus.npy"
    command = job_command(source, out, slow_embed.base_url)
    child = subprocess.Popen(command, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while done_chunks(out) < 2:
        assert child.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    checkpoint = out.with_name("corpus.npy.partial") / "state.json"
    saved = checkpoint.read_bytes()
    # Another model under the same name and width (what a redeploy behind the same URL can do): other
    # weights on its model card, and other vectors. FakeVLLM's vectors depend on the text and width only,
    # so the other model's are those of the text reversed (other words, other hashes).
    same_model = fake_content.text_vector
    with fake_like("embed") as swapped:
        swapped.fake.settings.root = "another/checkpoint"
        monkeypatch.setattr(
            fake_content, "text_vector", lambda text, width, **kw: same_model(text[::-1], width, **kw)
        )
        result = run_cli(job_command(source, out, swapped.base_url))
        monkeypatch.undo()
    assert result.returncode == cli.EXIT_JOB_REFUSED, result.stderr
    assert "served model weights" in result.stderr and "the served model was swapped" in result.stderr
    source.write_text(source.read_text().replace("#7\n", "#8\n"))  # same size
    result = run_cli(command)
    assert result.returncode == cli.EXIT_JOB_REFUSED and "input content" in result.stderr
    assert checkpoint.read_bytes() == saved and done_chunks(out) >= 2  # the refusals left it alone


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


def test_a_full_disk_is_exit_code_4_not_a_sigbus(
    fake_embed: FakeFixture, job_inputs: dict[str, Path], small_disk: Path
) -> None:
    out = small_disk / "corpus.npy"
    result = run_cli(job_command(job_inputs["text"], out, fake_embed.base_url))
    assert result.returncode == cli.EXIT_DISK_FULL, result.stderr
    assert f"needs {ROWS * 384 * 4 + 128:,} bytes" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


# --- nothing lost, nothing overwritten (issue 24) ---------------------------------------------------


def embed_requests(fake: FakeVLLM) -> int:
    return len(fake.received(EMBED))


@pytest.mark.parametrize("suffix", [".npy", ".parquet"])
def test_blank_csv_lines_are_no_rows_and_every_row_is_embedded(
    tmp_path: Path, fake: FakeVLLM, suffix: str
) -> None:
    source = tmp_path / "b.csv"
    source.write_text("text\na\n\n\n\nb\n")  # was: 5 rows counted, 2 read, 3 all-zero rows, exit 0
    out = tmp_path / f"b{suffix}"
    with client(fake) as c:
        report = vt.embed_file(c, source, out, chunk_rows=2)
    assert report.texts == 2
    vectors = (
        np.load(out) if suffix == ".npy" else np.stack(pq.read_table(out).column("embedding").to_pylist())
    )
    np.testing.assert_allclose(vectors, expected(fake, ["a", "b"]), atol=1e-6)
    assert json.loads(out.with_name(out.name + ".manifest.json").read_text())["rows"] == 2


def test_a_csv_with_a_bom_a_long_cell_and_a_short_row(tmp_path: Path, fake: FakeVLLM) -> None:
    long_cell = "word " * 40_000  # 200 KB: over csv's default field limit of 128 KiB
    source = tmp_path / "excel.csv"
    source.write_bytes(b"\xef\xbb\xbftext,lang\nhello,en\n" + f'"{long_cell}",en\n'.encode())
    with client(fake) as c:
        assert (
            vt.embed_file(
                c, source, tmp_path / "e.npy", params=vt.EmbedParams(truncate_prompt_tokens=-1)
            ).texts
            == 2
        )
        short = tmp_path / "short.csv"
        short.write_text("lang,text\nen,hello\nen\n")
        fake.clear_requests()
        with pytest.raises(vt.InvalidInputError, match=r"line 3 has no 'text' cell"):
            vt.embed_file(c, short, tmp_path / "s.npy")
    assert embed_requests(fake) == 0


def test_bad_rows_deep_in_the_input_are_found_before_any_request(tmp_path: Path, fake: FakeVLLM) -> None:
    source = tmp_path / "late.txt"
    source.write_bytes(b"ok\n" * 2500 + b"caf\xe9\n")
    jsonl = tmp_path / "late.jsonl"
    jsonl.write_text('{"text": "a"}\n' * 2500 + '{"body": "b"}\n')
    with client(fake) as c:
        with pytest.raises(vt.InvalidInputError, match="line 2501 is not UTF-8"):
            vt.embed_file(c, source, tmp_path / "l.npy", chunk_rows=100)
        with pytest.raises(vt.InvalidInputError, match="line 2501"):
            vt.embed_file(c, jsonl, tmp_path / "j.npy", chunk_rows=100)
    assert embed_requests(fake) == 0


def test_an_output_over_its_input_or_a_fifo_input_is_refused(tmp_path: Path, fake: FakeVLLM) -> None:
    source = tmp_path / "docs.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": 1, "text": "a"}]), source)
    before = source.read_bytes()
    fifo = tmp_path / "fifo.txt"
    os.mkfifo(fifo)
    with client(fake) as c:
        with pytest.raises(vt.InvalidInputError, match="would overwrite the input") as caught:
            vt.embed_file(c, source, source, id_field="id")
        assert caught.value.field == "out"
        with pytest.raises(vt.InvalidInputError, match="not a regular file"):
            vt.embed_file(c, fifo, tmp_path / "f.npy")  # was: a hang
        with pytest.raises(vt.InvalidInputError, match="exists and is not a regular file"):
            vt.embed_file(c, source, tmp_path, id_field="id")
    assert source.read_bytes() == before and embed_requests(fake) == 0


def test_a_run_stopped_between_joining_and_the_manifest_finishes_whole(
    tmp_path: Path, fake: FakeVLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out.parquet"
    source = tmp_path / "in.txt"
    source.write_text("".join(f"row {i}\n" for i in range(40)))

    def stopped(path: Path, payload: Any) -> None:
        raise KeyboardInterrupt("kill -9 after the join")

    with client(fake) as c:
        monkeypatch.setattr(embed, "write_json", stopped)
        with pytest.raises(KeyboardInterrupt):
            vt.embed_file(c, source, out, chunk_rows=10)
        monkeypatch.undo()
        assert pq.read_table(out).num_rows == 40
        parts = sorted((tmp_path / "out.parquet.partial" / "parts").glob("part-*.parquet"))
        assert len(parts) == 4  # kept until the manifest is written (were removed before it)
        parts[0].unlink()  # what the old removal left behind when stopped half-way
        with pytest.raises(vt.jobs.JobError, match="hold 30 rows where the input has 40"):
            vt.embed_file(c, source, out, chunk_rows=10)
    assert pq.read_table(out).num_rows == 40  # the complete output was not replaced


def test_a_model_swapped_during_the_run_stops_it_and_no_new_model_row_is_kept(
    tmp_path: Path, fake: FakeVLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A rolling deploy: the same name and width, other weights, after 16 vectors (the job's probe and 15
    # rows). Was: the job finished with most rows from the new model and one model in the manifest.
    lines, source = numbered_rows(tmp_path, 40)
    out = tmp_path / "out.npy"
    old_model = fake_content.text_vector
    answered = 0

    def rolling_deploy(text: str, width: int, **kw: Any) -> Any:
        nonlocal answered
        answered += 1
        return old_model(text if answered <= 16 else text[::-1], width, **kw)

    with client(fake) as c:
        monkeypatch.setattr(fake_content, "text_vector", rolling_deploy)
        with pytest.raises(vt.jobs.JobMismatch, match=r"changed during the run .* were not kept"):
            vt.embed_file(c, source, out, chunk_rows=10, batch_size=5, concurrency=1)
        monkeypatch.undo()  # the old weights are back: the rows not kept are redone
        report = vt.embed_file(c, source, out, chunk_rows=10, batch_size=5, concurrency=1)
    assert report.chunks_resumed + report.chunks_sent == 4
    np.testing.assert_allclose(np.load(out), expected(fake, lines), atol=1e-6)


def test_a_disk_that_fills_up_mid_run_is_insufficient_disk_space_and_the_run_resumes(
    tmp_path: Path, fake: FakeVLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "in.txt"
    source.write_text("".join(f"row {i}\n" for i in range(30)))
    out = tmp_path / "out.npy"
    real_write = outputs.NpySink.write
    writes = 0

    def full_after_one(sink: Any, chunk: Any, vectors: Any, failed: Any) -> None:
        nonlocal writes
        writes += 1
        if writes > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(sink, chunk, vectors, failed)

    monkeypatch.setattr(outputs.NpySink, "write", full_after_one)
    command = ["embed-file", str(source), "--out", str(out), "--url", fake.url, "--chunk-rows", "10"]
    with client(fake) as c, pytest.raises(vt.jobs.InsufficientDiskSpace, match="the job resumes"):
        vt.embed_file(c, source, out, chunk_rows=10, concurrency=1)
    writes = 0
    assert cli.main([*command]) == cli.EXIT_DISK_FULL  # was: 64, "bad usage"
    monkeypatch.undo()
    with client(fake) as c:
        report = vt.embed_file(c, source, out, chunk_rows=10)
    assert report.chunks_resumed >= 1
    np.testing.assert_allclose(np.load(out), expected(fake, [f"row {i}" for i in range(30)]), atol=1e-6)


def test_a_closed_stdout_ends_the_cli_quietly(fake: FakeVLLM, tmp_path: Path) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"text {i}\n" for i in range(3000)))  # ~300 KB of JSON: more than a pipe holds
    command = [sys.executable, "-m", "vllm_tasks.cli", "embed", "--file", str(texts), "--url", fake.url]
    with subprocess.Popen(command, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE) as child:
        assert child.stdout is not None and child.stderr is not None
        child.stdout.close()  # `| head -0`: nobody reads
        error = child.stderr.read().decode()
    assert child.returncode == cli.EXIT_OK and error == ""  # was: "[Errno 32] Broken pipe", exit 64


def test_a_second_run_of_the_same_job_is_refused_while_the_first_holds_it(
    tmp_path: Path, fake: FakeVLLM
) -> None:
    source = tmp_path / "in.txt"
    source.write_text("a\nb\n")
    out = tmp_path / "out.npy"
    with client(fake) as c:
        held = state.job_lock(tmp_path / "out.npy.lock", str(out))  # the first run, holding the output
        refused = pytest.raises(
            vt.jobs.JobError, match=rf"another run of this job is writing it \(pid {os.getpid()}"
        )
        with held, refused:
            vt.embed_file(c, source, out, resume=False)  # was: it removed the first run's work folder
        assert vt.embed_file(c, source, out).texts == 2
    assert not (tmp_path / "out.npy.lock").exists()


def test_kept_columns_that_would_collide_in_the_output_are_refused(tmp_path: Path, fake: FakeVLLM) -> None:
    source = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": 1, "text": "a", "embedding": "x"}]), source)
    with client(fake) as c:
        for kept in (["embedding"], ["id"]):
            with pytest.raises(vt.InvalidInputError, match="second column") as caught:
                vt.embed_file(c, source, tmp_path / "o.parquet", id_field="id", keep_columns=kept)
            assert caught.value.field == "keep_columns"


def test_a_replica_down_at_the_start_or_answering_garbage_is_set_aside(
    tmp_path: Path, fake: FakeVLLM, caplog: pytest.LogCaptureFixture
) -> None:
    lines, source = numbered_rows(tmp_path, 60)
    with fake_server() as garbage:
        down = garbage.url
    # was: the job refused to start with one replica down, and stopped at a proxy's HTML page
    with caplog.at_level("WARNING", logger="vllm_tasks.jobs"):
        report = vt.embed_file(
            [fake.url, down], source, tmp_path / "a.npy", chunk_rows=20, batch_size=5, **FAST
        )
    assert "starting without it" in caplog.text and report.texts == 60
    np.testing.assert_allclose(np.load(tmp_path / "a.npy"), expected(fake, lines), atol=1e-6)
    with fake_server() as proxy:
        # only the start's model check passes: every batch it is sent gets the page (after=3 let the first
        # two through, and under load the other replica could take every batch but those: no failure)
        proxy.fail(200, path=EMBED, after=1, times=None, body=b"<html>maintenance</html>")
        servers = [fake.url, proxy.url]
        report = vt.embed_file(servers, source, tmp_path / "b.npy", chunk_rows=20, batch_size=5, **FAST)
    np.testing.assert_allclose(np.load(tmp_path / "b.npy"), expected(fake, lines), atol=1e-6)
    failures = {r.url: r.failures for r in report.replicas}
    assert failures[servers[1]] >= 1 and failures[servers[0]] == 0


def test_a_replica_answering_a_proxys_page_from_the_start_is_set_aside(
    tmp_path: Path, fake: FakeVLLM, caplog: pytest.LogCaptureFixture
) -> None:
    # was: UnexpectedResponse from the start's model check stopped the job (only a connection error,
    # a 5xx or a 429 counted as a server's failure there); its scope, "replica", now decides
    lines, source = numbered_rows(tmp_path, 30)
    with fake_server() as proxy, caplog.at_level("WARNING", logger="vllm_tasks.jobs"):
        proxy.fail(200, path=EMBED, times=None, body=b"<html>maintenance</html>")
        report = vt.embed_file([fake.url, proxy.url], source, tmp_path / "a.npy", batch_size=5, **FAST)
    assert "starting without it" in caplog.text and report.texts == 30
    np.testing.assert_allclose(np.load(tmp_path / "a.npy"), expected(fake, lines), atol=1e-6)
