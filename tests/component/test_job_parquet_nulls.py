"""A Parquet job with a refused row (a null vector) on every pyarrow the project accepts (``>=25``).

pyarrow before 26 cannot read a null ``fixed_size_list`` row back from Parquet (apache/arrow#35692:
``ArrowInvalid: Expected all lists to be of size=384 but index 3 had size=0``). The part files of a job
hold the vectors as variable lists, joined into the ``fixed_size_list`` column at the end, so a job never
reads a null ``fixed_size_list``. Here pyarrow's reader is made to fail as those versions do; the lowest
pyarrow accepted runs the jobs' tests in scripts/lowest-versions.sh."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import vllm_tasks as vt

from ..fakes import FakeFixture

TEXTS = [f"row {i}" for i in range(3)] + ["too long " * 200, "row 4"]  # row 3 is refused


def corpus(folder: Path) -> Path:
    (folder / "in.txt").write_text("".join(text + "\n" for text in TEXTS))
    return folder / "in.txt"


def null_fixed_size_list(table: pa.Table) -> bool:
    """Whether a ``fixed_size_list`` column of ``table`` has a null row."""
    columns = zip(table.schema, table.columns, strict=True)
    return any(pa.types.is_fixed_size_list(field.type) and column.null_count for field, column in columns)


def reader_before_26(monkeypatch: pytest.MonkeyPatch) -> None:
    """``pq.read_table`` refuses a file with a null ``fixed_size_list`` row, as pyarrow 16-25 do."""
    real = pq.read_table

    def read_table(source: Any, *args: Any, **kwargs: Any) -> pa.Table:
        table = real(source, *args, **kwargs)
        if null_fixed_size_list(table):
            raise pa.ArrowInvalid("Expected all lists to be of size=384 but index 3 had size=0")
        return table

    monkeypatch.setattr(pq, "read_table", read_table)


def test_a_refused_row_is_joined_without_reading_a_null_fixed_size_list(
    tmp_path: Path, fake_embed: FakeFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out.parquet"
    reader_before_26(monkeypatch)
    report = vt.embed_file(fake_embed.fake.url, corpus(tmp_path), out, chunk_rows=2)
    monkeypatch.undo()
    assert (report.texts, report.failed_rows) == (len(TEXTS), 1)
    table = pq.read_table(out)
    assert table.schema.field("embedding").type == pa.list_(pa.float32(), 384)
    rows = table.column("embedding").to_pylist()
    assert [row is None for row in rows] == [False, False, False, True, False]
    with vt.Client(fake_embed.fake.url) as client:
        expected = client.embed([t for t in TEXTS if t != TEXTS[3]]).vectors
    np.testing.assert_array_equal(np.array([r for r in rows if r is not None], np.float32), expected)
