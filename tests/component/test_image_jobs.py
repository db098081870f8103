"""embed_file(..., images=True) and ``vllm-tasks embed-file --images`` against FakeVLLM servers configured
like the `embed` (one vector per input, as CLIP) and `late-interaction` (one vector per token, as ColPali)
fixtures: each row names an image (a path relative to the input's folder, an absolute path, a data URL); the
Parquet equals ``client.embed(images=...)`` / ``client.pool(images=...)`` row by row, one image per request;
a missing or non-image file is a refused row, not a stopped job; the refusals come before any request."""

from __future__ import annotations

import base64
import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import vllm_tasks as vt
from vllm_tasks import cli
from vllm_tasks.errors import InvalidInputError
from vllm_tasks.jobs import JobMismatch
from vllm_tasks.jobs.state import PROBE_IMAGE

from ..fakes import fake_like

PYARROW_READS_NULL_VECTORS = int(pa.__version__.split(".")[0]) >= 26
"""pyarrow 25 writes a null ``fixed_size_list`` row but cannot read it back (apache/arrow#35692,
docs/jobs.md); scripts/lowest-versions.sh runs this file on it."""

PNG = b"\x89PNG\r\n\x1a\n"


def image_bytes(index: int) -> bytes:
    """A distinct PNG-signed file per index (FakeVLLM checks the signature, the SDK sniffs it)."""
    return PNG + f"image number {index}".encode()


def corpus(folder: Path) -> tuple[Path, list[Any]]:
    """A CSV naming 5 images (relative, nested, absolute, a data URL) and two bad rows; the images as
    ``embed(images=...)`` takes them (``None`` for the bad rows)."""
    (folder / "pages").mkdir()
    for index in range(3):
        (folder / "pages" / f"{index}.png").write_bytes(image_bytes(index))
    outside = folder.parent / f"{folder.name}-outside.png"
    outside.write_bytes(image_bytes(3))
    (folder / "notes.txt").write_text("not an image")
    data_url = "data:image/png;base64," + base64.b64encode(image_bytes(4)).decode()
    rows = ["pages/0.png", "pages/1.png", "missing.png", str(outside), "notes.txt", data_url, "pages/2.png"]
    source = folder / "images.csv"
    with source.open("w", newline="") as handle:
        csv.writer(handle).writerows([("id", "path"), *((f"r{i}", row) for i, row in enumerate(rows))])
    images: list[Any] = [
        folder / "pages/0.png",
        folder / "pages/1.png",
        None,
        outside,
        None,
        data_url,
        folder / "pages/2.png",
    ]
    return source, images


def sent_images(requests: list[Any]) -> list[list[str]]:
    """The image URLs of each request (their conversations' image parts), the probe's left out."""
    probe = "data:image/png;base64," + base64.b64encode(PROBE_IMAGE).decode()
    sent = []
    for request in requests:
        text = json.dumps(request.json["messages"])
        urls = [part for part in text.split('"') if part.startswith("data:image")]
        if urls != [probe]:
            sent.append(urls)
    return sent


def test_image_rows_are_embedded_as_embed_images_row_by_row(tmp_path: Path) -> None:
    source, images = corpus(tmp_path)
    out = tmp_path / "images.parquet"
    with fake_like("embed") as fixture:
        url = fixture.fake.url
        report = vt.embed_file(url, source, out, text_field="path", id_field="id", images=True, chunk_rows=3)
        requests = fixture.fake.received("/v1/embeddings")
        with vt.Client(url) as client:
            expected = client.embed(images=[image for image in images if image is not None]).vectors
        again = vt.embed_file(url, source, out, text_field="path", id_field="id", images=True, chunk_rows=3)
    assert pq.read_table(out, columns=["id"]).column("id").to_pylist() == [f"r{i}" for i in range(7)]
    metadata = pq.ParquetFile(out).metadata  # the nulls as written, on any pyarrow
    nulls = [
        metadata.row_group(group).column(1).statistics.null_count for group in range(metadata.num_row_groups)
    ]
    assert nulls == [1, 1, 0]  # rows 2 and 4 of chunks of 3
    if PYARROW_READS_NULL_VECTORS:
        column = pq.read_table(out).column("embedding").to_pylist()
        assert [row is None for row in column] == [image is None for image in images]
        got = np.array([row for row in column if row is not None], np.float32)
        np.testing.assert_array_equal(got, expected)
    assert (report.texts, report.failed_rows, report.dimensions) == (7, 2, expected.shape[1])
    sent = sent_images(requests)
    assert len(sent) == 5 and all(len(urls) == 1 for urls in sent)  # the 5 images, one per request
    errors = [json.loads(line) for line in report.errors_file.read_text().splitlines()]  # type: ignore[union-attr]
    assert [(e["row"], e["id"]) for e in errors] == [(2, "r2"), (4, "r4")]
    assert "missing.png" in errors[0]["error"] and "not a recognised image" in errors[1]["error"]
    assert again.already_complete
    fingerprint = json.loads(report.manifest.read_text())["fingerprint"]
    assert fingerprint["input"]["images"] is True


def test_image_rows_with_multi_vector_are_pool_images_per_patch(tmp_path: Path) -> None:
    source, images = corpus(tmp_path)
    out = tmp_path / "pages.parquet"
    with fake_like("late-interaction") as fixture:
        url = fixture.fake.url
        report = vt.embed_file(url, source, out, text_field="path", images=True, multi_vector=True)
        with vt.Client(url) as client:
            expected = client.pool(images=[image for image in images if image is not None]).data
    column = pq.read_table(out).column("token_embeddings").to_pylist()
    got = [np.array(rows, np.float32) for rows in column if rows is not None]
    assert len(got) == len(expected) == 5 and report.vectors == "multi-vector" and report.failed_rows == 2
    for row, want in zip(got, expected, strict=True):
        np.testing.assert_array_equal(row, want)


def test_a_text_job_is_not_resumed_as_an_image_job(tmp_path: Path) -> None:
    source, _ = corpus(tmp_path)
    out = tmp_path / "out.parquet"
    with fake_like("embed") as fixture:
        vt.embed_file(fixture.fake.url, source, out, text_field="path")
        with pytest.raises(JobMismatch, match="images"):
            vt.embed_file(fixture.fake.url, source, out, text_field="path", images=True)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"images": "yes"}, "images"),
        ({"images": True, "sparse": True}, "images"),
        ({"images": True, "params": vt.EmbedParams(prompt="query: ")}, "prompt"),
        ({"images": True, "params": vt.EmbedParams(prompt_name="query")}, "prompt_name"),
    ],
)
def test_what_an_image_job_cannot_do_is_refused_before_any_request(
    tmp_path: Path, kwargs: dict[str, Any], field: str
) -> None:
    source, _ = corpus(tmp_path)
    with fake_like("embed") as fixture:
        with pytest.raises(InvalidInputError) as caught:
            vt.embed_file(fixture.fake.url, source, tmp_path / "out.parquet", text_field="path", **kwargs)
        assert fixture.fake.received("/v1/embeddings") == []
    assert caught.value.field == field


def test_the_cli_takes_images(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.png").write_bytes(image_bytes(0))
    (tmp_path / "b.png").write_bytes(image_bytes(1))
    source = tmp_path / "list.txt"
    source.write_text("a.png\nb.png\n")
    out = tmp_path / "list.npy"
    with fake_like("embed") as fixture:
        code = cli.main(["embed-file", str(source), "--out", str(out), "--url", fixture.fake.url, "--images"])
        with vt.Client(fixture.fake.url) as client:
            expected = client.embed(images=[tmp_path / "a.png", tmp_path / "b.png"]).vectors
    assert code == 0 and "2 x" in capsys.readouterr().err
    np.testing.assert_array_equal(np.load(out), expected)
