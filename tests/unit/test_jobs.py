"""embed_file(): streaming to a .npy matrix, resuming after a failure; and the embed CLI commands."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import cli
from vllm_tasks.jobs import embed_file

from .conftest import BASE
from .recorded import mock_server

EMBED = f"{BASE}/v1/embeddings"


def vector_of(text: str) -> list[float]:
    return [float(len(text)), float(sum(map(ord, text)) % 97), 1.0]


def fake(request: httpx.Request) -> httpx.Response:
    texts = json.loads(request.content)["input"]
    data = [{"index": i, "embedding": vector_of(t)} for i, t in enumerate(texts)]
    return httpx.Response(200, json={"model": "minilm", "data": data, "usage": {"prompt_tokens": len(texts)}})


def expected(lines: list[str]) -> np.ndarray:
    return np.array([vector_of(t) for t in lines], dtype=np.float32)


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[Path, list[str]]:
    lines = [f"text {i} " + "x" * (i % 7) for i in range(23)] + [""]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, lines


def test_embed_file_writes_every_line_in_order(
    corpus: tuple[Path, list[str]], tmp_path: Path, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")
    httpx_mock.add_callback(fake, url=EMBED, is_reusable=True)
    source, lines = corpus
    out = tmp_path / "out.npy"
    with vt.Client(BASE, max_retries=0) as client:
        report = embed_file(client, source, out, chunk_lines=5, encoding_format="float", batch_size=2)
    assert (report.texts, report.dimensions, report.chunks_sent, report.chunks_resumed) == (24, 3, 5, 0)
    np.testing.assert_array_equal(np.load(out), expected(lines))
    assert not out.with_name("out.npy.progress.json").exists()


def test_embed_file_resumes_after_a_failure(
    corpus: tuple[Path, list[str]], tmp_path: Path, httpx_mock: HTTPXMock
) -> None:
    source, lines = corpus
    out = tmp_path / "out.npy"
    calls = {"n": 0}

    def failing_third(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 3:
            return httpx.Response(400, json={"error": {"message": "boom", "code": 400}})
        return fake(request)

    mock_server(httpx_mock, "embed")
    httpx_mock.add_callback(failing_third, url=EMBED, is_reusable=True)
    with vt.Client(BASE, max_retries=0) as client, pytest.raises(vt.BadRequestError):
        embed_file(client, source, out, chunk_lines=5, encoding_format="float")
    progress = json.loads(out.with_name("out.npy.progress.json").read_text())
    assert progress["chunks_done"] == 2
    sent_before = len(httpx_mock.get_requests(url=EMBED))

    mock_server(httpx_mock, "embed")
    with vt.Client(BASE, max_retries=0) as client:
        report = embed_file(client, source, out, chunk_lines=5, encoding_format="float")
    assert (report.chunks_resumed, report.chunks_sent) == (2, 3)
    assert len(httpx_mock.get_requests(url=EMBED)) - sent_before == 3
    np.testing.assert_array_equal(np.load(out), expected(lines))


def test_changed_options_start_over(
    corpus: tuple[Path, list[str]], tmp_path: Path, httpx_mock: HTTPXMock
) -> None:
    source, _ = corpus
    out = tmp_path / "out.npy"
    progress = out.with_name("out.npy.progress.json")
    np.save(out, np.zeros((24, 3), np.float32))
    progress.write_text(json.dumps({"fingerprint": "from another job", "chunks_done": 4}))
    mock_server(httpx_mock, "embed")
    httpx_mock.add_callback(fake, url=EMBED, is_reusable=True)
    with vt.Client(BASE, max_retries=0) as client:
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
    corpus: tuple[Path, list[str]], tmp_path: Path, httpx_mock: HTTPXMock, capsys: pytest.CaptureFixture[str]
) -> None:
    source, lines = corpus
    for _ in range(2):
        mock_server(httpx_mock, "embed")
    httpx_mock.add_callback(fake, url=EMBED, is_reusable=True)
    assert cli.main(["embed", "hello", "hi", "--url", BASE]) == cli.EXIT_OK
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed == [vector_of("hello"), vector_of("hi")]
    out = tmp_path / "cli.npy"
    assert cli.main(["embed-file", str(source), "--out", str(out), "--url", BASE, "--chunk-lines", "10"]) == 0
    np.testing.assert_array_equal(np.load(out), expected(lines))
    assert "24 x 3 float32" in capsys.readouterr().err
    assert cli.main(["embed", "--url", BASE]) == cli.EXIT_USAGE
