"""embed_file(): streaming to a .npy matrix, resuming after a failure; and the embed CLI commands.

The server is a FakeVLLM (vllm_tasks.testing): real HTTP, vLLM's shapes, deterministic vectors
(``fake.vector(text)``), and an injected failure for the resume test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import vllm_tasks as vt
from vllm_tasks import cli
from vllm_tasks.jobs import embed_file
from vllm_tasks.testing import EMBEDDING_TASKS, FakeVLLM

from .conftest import BASE

WIDTH = 8
EMBED = "/v1/embeddings"


@pytest.fixture
def fake() -> Iterator[FakeVLLM]:
    with FakeVLLM(model="minilm", tasks=EMBEDDING_TASKS, width=WIDTH) as server:
        yield server


def expected(fake: FakeVLLM, lines: list[str]) -> np.ndarray:
    return np.stack([fake.vector(text) for text in lines])


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[Path, list[str]]:
    lines = [f"text {i} " + "x" * (i % 7) for i in range(23)] + [""]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, lines


def test_embed_file_writes_every_line_in_order(
    corpus: tuple[Path, list[str]], tmp_path: Path, fake: FakeVLLM
) -> None:
    source, lines = corpus
    out = tmp_path / "out.npy"
    with vt.Client(fake.url, max_retries=0) as client:
        report = embed_file(client, source, out, chunk_lines=5, encoding_format="float", batch_size=2)
    assert (report.texts, report.dimensions, report.chunks_sent, report.chunks_resumed) == (24, WIDTH, 5, 0)
    np.testing.assert_array_equal(np.load(out), expected(fake, lines))
    assert not out.with_name("out.npy.progress.json").exists()
    batches = [r.json["input"] for r in fake.received(EMBED)]  # sent concurrently: in any order
    assert sorted(text for batch in batches for text in batch) == sorted(lines)
    assert max(len(batch) for batch in batches) == 2


def test_embed_file_resumes_after_a_failure(
    corpus: tuple[Path, list[str]], tmp_path: Path, fake: FakeVLLM
) -> None:
    source, lines = corpus
    out = tmp_path / "out.npy"
    failure = fake.fail(400, path=EMBED, after=2, message="boom")  # the third chunk's request
    with vt.Client(fake.url, max_retries=0) as client, pytest.raises(vt.BadRequestError, match="boom"):
        embed_file(client, source, out, chunk_lines=5, encoding_format="float")
    assert failure.hits == 1
    progress = json.loads(out.with_name("out.npy.progress.json").read_text())
    assert progress["chunks_done"] == 2
    sent_before = len(fake.received(EMBED))

    with vt.Client(fake.url, max_retries=0) as client:
        report = embed_file(client, source, out, chunk_lines=5, encoding_format="float")
    assert (report.chunks_resumed, report.chunks_sent) == (2, 3)
    assert len(fake.received(EMBED)) - sent_before == 3
    np.testing.assert_array_equal(np.load(out), expected(fake, lines))


def test_changed_options_start_over(corpus: tuple[Path, list[str]], tmp_path: Path, fake: FakeVLLM) -> None:
    source, _ = corpus
    out = tmp_path / "out.npy"
    progress = out.with_name("out.npy.progress.json")
    np.save(out, np.zeros((24, WIDTH), np.float32))
    progress.write_text(json.dumps({"fingerprint": "from another job", "chunks_done": 4}))
    with vt.Client(fake.url, max_retries=0) as client:
        report = embed_file(client, source, out, chunk_lines=5, encoding_format="float")
    assert report.chunks_resumed == 0 and report.chunks_sent == 5


@pytest.mark.parametrize(
    ("content", "kwargs", "field"),
    [("", {}, "source"), ("a\n", {"chunk_lines": 0}, "chunk_lines"), ("a\n", {"input": ["x"]}, "input")],
)
def test_bad_jobs_are_refused(content: str, kwargs: dict[str, object], field: str, tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text(content)
    with vt.Client(BASE) as client, pytest.raises(vt.InvalidInputError) as info:
        embed_file(client, source, tmp_path / "o.npy", **kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


def test_cli_embed_and_embed_file(
    corpus: tuple[Path, list[str]], tmp_path: Path, fake: FakeVLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    source, lines = corpus
    assert cli.main(["embed", "hello", "hi", "--url", fake.url]) == cli.EXIT_OK
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    np.testing.assert_array_equal(np.array(printed, np.float32), expected(fake, ["hello", "hi"]))
    out = tmp_path / "cli.npy"
    assert (
        cli.main(["embed-file", str(source), "--out", str(out), "--url", fake.url, "--chunk-lines", "10"])
        == 0
    )
    np.testing.assert_array_equal(np.load(out), expected(fake, lines))
    assert f"24 x {WIDTH} float32" in capsys.readouterr().err
    assert cli.main(["embed", "--url", fake.url]) == cli.EXIT_USAGE
