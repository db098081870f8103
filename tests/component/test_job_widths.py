"""Every batch of an ``embed_file`` job is checked against the width the job found at its start, for each
kind of row (dense, sparse, per-token, images): a server that answers one batch of another width (a
broken proxy, a half-deployed model) is set aside and the batch is sent again; one that keeps doing it
stops the job with an ``UnexpectedResponse`` naming the rows and both widths. Nothing of such a batch is
written. FakeVLLM answers the job's probe as the model does and the rows wider (or narrower)."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import vllm_tasks as vt
from vllm_tasks.testing import content as fake_content

from ..fakes import fake_like

PNG = b"\x89PNG\r\n\x1a\n"
FAST = {"retry_replica_after": 0.01, "give_up_after": 0.3, "chunk_rows": 4, "batch_size": 4}

# kind -> (fixture, the FakeVLLM function that makes a row's vectors, embed_file options, output column)
KINDS: dict[str, tuple[str, str, dict[str, Any], str]] = {
    "dense": ("embed", "text_vector", {}, "embedding"),
    "sparse": ("splade", "sparse_vector", {"sparse": True}, "sparse_values"),
    "multi-vector": ("late-interaction", "token_vectors", {"multi_vector": True}, "token_embeddings"),
    "dense images": ("embed", "text_vector", {"images": True}, "embedding"),
    "multi-vector images": ("late-interaction", "token_vectors", {"images": True, "multi_vector": True}, ""),
}


def rows_file(folder: Path, images: bool) -> Path:
    """Four rows: texts, or data URLs of four distinct images."""
    rows = [f"row {i} about widths" for i in range(4)]
    if images:
        rows = ["data:image/png;base64," + base64.b64encode(PNG + b"image %d" % i).decode() for i in range(4)]
    path = folder / "in.txt"
    path.write_text("".join(row + "\n" for row in rows))
    return path


@contextmanager
def other_width(
    monkeypatch: pytest.MonkeyPatch, name: str, factor: float, *, inputs: int | None
) -> Iterator[list[int]]:
    """Make FakeVLLM's ``name`` answer ``factor`` times the width for every input but the first it sees
    (the job's probe), for the first ``inputs`` of those (``None``: all); yields how many it widened."""
    made = getattr(fake_content, name)
    probe: list[str] = []
    widened = [0]

    def wider(text: str, width: int, **kw: Any) -> Any:
        probe[:] = probe or [text]
        if text != probe[0] and (inputs is None or widened[0] < inputs):
            widened[0] += 1
            width = int(width * factor)
        return made(text, width, **kw)

    monkeypatch.setattr(fake_content, name, wider)
    yield widened


def run(kind: str, tmp_path: Path, **options: Any) -> tuple[Callable[[], Any], Path, str]:
    fixture, _, kind_options, _ = KINDS[kind]
    source, out = rows_file(tmp_path, "images" in kind_options), tmp_path / "out.parquet"

    def job() -> Any:
        with fake_like(fixture) as server:
            return vt.embed_file(server.fake.url, source, out, **kind_options, **FAST, **options)

    return job, out, fixture


@pytest.mark.parametrize("factor", [2, 1.125, 0.5], ids=["2x", "1.125x", "half"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_server_that_keeps_answering_another_width_stops_the_job_and_nothing_is_written(
    kind: str, factor: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, out, _ = run(kind, tmp_path)
    with (
        other_width(monkeypatch, KINDS[kind][1], factor, inputs=None) as widened,
        pytest.raises(vt.UnexpectedResponse) as info,
    ):
        job()
    assert widened[0] > 0
    assert info.value.kind == "decode"
    message = str(info.value)
    width = 30522 if kind == "sparse" else 384
    assert str(width) in message and str(int(width * factor)) in message  # expected and got
    if KINDS[kind][0] != "embed":  # a dense answer is refused by the client's own width check first
        assert re.search(r"the answer for rows [0-3]\.\.[0-3] holds", message)
        assert f"width is {width}" in message
    assert not out.exists() and not list(tmp_path.glob("out.parquet.partial/parts/*"))


@pytest.mark.parametrize("kind", list(KINDS))
def test_one_batch_of_another_width_is_sent_again_and_the_output_is_the_models(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "good").mkdir()
    good, good_out, _ = run(kind, tmp_path / "good")
    good()
    job, out, _ = run(kind, tmp_path)
    batch = 1 if "images" in kind else 4  # one image per request
    with other_width(monkeypatch, KINDS[kind][1], 2, inputs=batch) as widened:
        report = job()
    assert widened[0] == batch  # one batch answered wide, then the same rows again, right
    assert report.failed_rows == 0
    assert pq.read_table(out).drop(["row"]).equals(pq.read_table(good_out).drop(["row"]))
    column = pq.read_table(out).column(pq.read_table(out).schema.names[-1]).to_pylist()
    assert all(row is not None and len(row) > 0 for row in column)
    assert np.isfinite(np.asarray(column[0], np.float32)).all()
