"""``embed_file(images=True)`` over rows that name hostile image paths: a FIFO, ``/dev/zero`` and a symlink
to it, a folder, a NUL byte (also in a ``~user`` name), an unknown ``~user``, a ``data:text/plain`` URL.
Each is a refused row (null, a line in ``OUT.errors.jsonl``) and the job goes on to embed the good rows,
within a stated time (a FIFO read would wait forever, ``/dev/zero`` would fill the memory)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq

import vllm_tasks as vt
from vllm_tasks.testing import FakeVLLM

from ..unit.test_image_paths_hostile import within

PNG = b"\x89PNG\r\n\x1a\n"

HOSTILE = {
    "pipe.png": "is a FIFO (named pipe)",
    "/dev/zero": "is a device",
    "zero.png": "is a device",
    "folder": "is a folder",
    "x\0y.png": "embedded null byte",
    "~nobody\0/x.png": "embedded null byte",
    "~no-such-user-here/x.png": "is not a path",
    "data:text/plain;base64,aGk=": "text/plain, not an image",
}


def test_hostile_image_rows_are_refused_rows_and_the_job_goes_on(fake_vllm: FakeVLLM, tmp_path: Path) -> None:
    (tmp_path / "good.png").write_bytes(PNG + b"good")
    os.mkfifo(tmp_path / "pipe.png")
    (tmp_path / "zero.png").symlink_to("/dev/zero")
    (tmp_path / "folder").mkdir()
    rows = ["good.png", *HOSTILE, "good.png"]
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps({"path": row}) + "\n" for row in rows))
    out = tmp_path / "out.parquet"

    report = within(lambda: vt.embed_file(fake_vllm.url, source, out, text_field="path", images=True), 30)

    assert isinstance(report, vt.jobs.EmbedFileReport), report
    column = pq.read_table(out).column("embedding").to_pylist()
    assert [row is None for row in column] == [False, *[True] * len(HOSTILE), False]
    assert report.failed_rows == len(HOSTILE) and report.errors_file is not None
    errors = [json.loads(line) for line in report.errors_file.read_text().splitlines()]
    assert [error["row"] for error in errors] == list(range(1, len(HOSTILE) + 1))
    for error, problem in zip(errors, HOSTILE.values(), strict=True):
        assert problem in error["error"]
