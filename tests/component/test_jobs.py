"""embed_file() / aembed_file(): the job engine against FakeVLLM servers (real HTTP, deterministic vectors).

Each gap issue 12 lists under "Why" has a test here that failed on the old ``vllm_tasks/jobs.py``:
``test_full_disk_*``, ``test_a_finished_job_*``, ``test_a_swapped_model_*`` / ``test_changed_concurrency_*``
/ ``test_an_in_place_edit_*``, ``test_lone_carriage_returns_*``, ``test_a_poisoned_row_*``, and
``test_the_job_shares_an_event_loop``.
"""

from __future__ import annotations

import asyncio
import csv
import errno
import json
import os
import signal
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
from vllm_tasks.testing import EMBEDDING_TASKS, FakeVLLM

from ..clients import Ticker, start_cli_for_ctrl_c
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
        report = vt.embed_file(c, corpus, out, chunk_rows=5, batch_size=2, encoding_format="float")
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
    batches = [r.json["input"] for r in fake.received(EMBED)[1:]]  # [0]: the probe text
    assert sorted(text for batch in batches for text in batch) == sorted(LINES)
    assert max(len(batch) for batch in batches) == 2


def test_a_failed_run_resumes_where_it_stopped(corpus: Path, tmp_path: Path, fake: FakeVLLM) -> None:
    out = tmp_path / "out.npy"
    break_after(fake, 4)
    with client(fake) as c, pytest.raises(vt.InternalServerError):
        vt.embed_file(c, corpus, out, chunk_rows=5, batch_size=5, concurrency=1, **FAST)
    saved = json.loads((tmp_path / "out.npy.partial" / "state.json").read_text())
    assert saved["done_below"] == 3 and not out.exists()
    fake.clear_faults()
    fake.clear_requests()
    with client(fake) as c:
        report = vt.embed_file(c, corpus, out, chunk_rows=5, batch_size=5)
    assert (report.chunks_resumed, report.chunks_sent) == (3, 7)
    assert len(fake.received(EMBED)) == 1 + 7  # the probe, then only the missing chunks
    np.testing.assert_array_equal(np.load(out), expected(fake, LINES))


# --- the gaps listed under "Why" ------------------------------------------------------------------


def test_full_disk_is_a_typed_error_before_any_row(
    corpus: Path, tmp_path: Path, fake: FakeVLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outputs, "free_bytes", lambda folder: 100)
    with client(fake) as c, pytest.raises(vt.InsufficientDiskSpace) as info:
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
    with client(fake) as c, pytest.raises(vt.InsufficientDiskSpace):
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
            vt.JobMismatch, match="served model weights: 'BAAI/bge-small' -> 'intfloat/e5-small'"
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
    break_after(fake, 3)
    with client(fake) as c, pytest.raises(vt.InternalServerError):
        vt.embed_file(c, corpus, out, chunk_rows=5, batch_size=5, concurrency=1, **FAST)
    fake.clear_faults()
    with client(fake) as c:
        report = vt.embed_file(c, corpus, out, chunk_rows=5, batch_size=3, concurrency=7)
    assert report.chunks_resumed == 2  # old code: concurrency was in the fingerprint, chunk 0 again
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
    with client(fake) as c, pytest.raises(vt.JobMismatch, match="input content") as info:
        vt.embed_file(c, corpus, out, chunk_rows=5)
    assert "--restart" in str(info.value)
    with client(fake) as c:  # starting over is the user's call
        report = vt.embed_file(c, corpus, out, chunk_rows=5, resume=False)
    assert report.chunks_resumed == 0


def test_changed_vector_options_are_refused(corpus: Path, tmp_path: Path, fake: FakeVLLM) -> None:
    out = tmp_path / "out.npy"
    with client(fake) as c:
        vt.embed_file(c, corpus, out)
        with pytest.raises(vt.JobMismatch, match="option dimensions: None -> 4"):
            vt.embed_file(c, corpus, out, dimensions=4)
        assert vt.embed_file(c, corpus, out, encoding_format="float").already_complete  # transport only


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
        assert "maximum context length" in refused[0]["error"]
        matrix = np.load(out)
        assert np.isnan(matrix[13]).all()
        good = [i for i in range(40) if i != 13]
        np.testing.assert_array_equal(matrix[good], expected(fake, [lines[i] for i in good]))
        assert out.with_name("out.npy.ids.jsonl").read_text().split() == [f'"d{i}"' for i in range(40)]
        with pytest.raises(vt.RowFailed, match=r"row 13 \(id 'd13'\)") as info:
            vt.embed_file(c, source, tmp_path / "ff.npy", text_field="body", id_field="doc", fail_fast=True)
        assert (info.value.row, info.value.row_id) == (13, "d13")
        truncated = vt.embed_file(c, source, tmp_path / "t.npy", text_field="body", too_long="truncate")
        assert truncated.failed_rows == 0


def test_the_job_shares_an_event_loop(corpus: Path, tmp_path: Path) -> None:
    async def main() -> tuple[vt.EmbedFileReport, int]:
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

    async def cell() -> vt.EmbedFileReport:
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
        (text, {"input": ["x"]}, "input"),
        (text, {"concurrency": 0}, "concurrency"),
        (text, {"text_field": "body"}, "text_field"),
        (text, {"too_long": "drop"}, "too_long"),
        (text, {"output_format": "csv"}, "output_format"),
    ]
    for source, kwargs, field in cases:
        with pytest.raises(vt.InvalidInputError) as info:
            vt.embed_file(BASE, source, tmp_path / "o.npy", **kwargs)
        assert info.value.field == field, kwargs


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
                [good.url, flaky], corpus, tmp_path / "o.npy", batch_size=2, retry_replica_after=0.05
            )
        np.testing.assert_array_equal(np.load(report.out), expected(good, LINES))
        by_url = {r.url: r for r in report.replicas}
        assert by_url[bad.url].failures >= 2 and by_url[bad.url].rows == 0  # retried later, failed again
        assert by_url[good.url].rows == 48


def test_replicas_must_serve_the_same_model(corpus: Path, tmp_path: Path) -> None:
    with fake_server() as a, fake_server(model="e5") as b, pytest.raises(vt.ReplicaMismatch) as info:
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
