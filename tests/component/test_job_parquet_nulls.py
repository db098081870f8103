"""A Parquet job with a refused row (a null vector) on every pyarrow the project accepts (``>=15``).

pyarrow before 26 cannot read a null ``fixed_size_list`` row back from Parquet (apache/arrow#35692:
``ArrowInvalid: Expected all lists to be of size=384 but index 3 had size=0``), and pyarrow 15 cannot
write one between two rows. The part files of a job hold the vectors as variable lists, joined into the
``fixed_size_list`` column at the end, so a job never reads a null ``fixed_size_list``; a writer that
cannot write the joined file is a ``JobError`` that keeps the parts. Here pyarrow's reader and writer are
made to fail as those versions do (the runs on 15.0.2 and 25.0.1 themselves are not part of the suite)."""

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


def test_a_writer_that_cannot_write_a_null_vector_is_a_job_error_and_the_parts_are_kept(
    tmp_path: Path, fake_embed: FakeFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, source = tmp_path / "out.parquet", corpus(tmp_path)
    real = pq.ParquetWriter.write_table

    def pyarrow_15(self: pq.ParquetWriter, table: pa.Table, *args: Any, **kwargs: Any) -> None:
        """Refuses a null ``fixed_size_list`` row between two others, as pyarrow 15 does."""
        if null_fixed_size_list(table):
            raise pa.ArrowNotImplementedError("Lists with non-zero length null components are not supported")
        real(self, table, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(pq.ParquetWriter, "write_table", pyarrow_15)
        with pytest.raises(vt.jobs.JobError, match=r"pyarrow .* cannot write the refused rows' null vectors"):
            vt.embed_file(fake_embed.fake.url, source, out, chunk_rows=2)
    assert not out.exists() and len(list(tmp_path.glob("out.parquet.partial/parts/part-*"))) == 3
    report = vt.embed_file(fake_embed.fake.url, source, out, chunk_rows=2)  # a newer pyarrow joins them
    assert (report.chunks_sent, report.failed_rows) == (0, 1) and pq.read_table(out).num_rows == len(TEXTS)
