"""The safety checks at the end of an ``embed_file`` run, each met on its own against FakeVLLM: every chunk
done before the result is moved into place (the input read gave fewer rows than its scan counted), and
the input unchanged since the run started (edited mid-run, same row count). Each stops the job with
nothing moved into place; without the check the job would report success on a wrong output. (The rows
joined into a Parquet output: tests/component/test_jobs.py, the run stopped between joining and the
manifest; the width of every batch: tests/component/test_job_widths.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import vllm_tasks as vt
from vllm_tasks.jobs import embed, engine
from vllm_tasks.jobs.inputs import InputSpec

from ..fakes import FakeFixture

ROWS = 10


def corpus(folder: Path) -> Path:
    """``ROWS`` numbered rows in ``folder/in.txt``."""
    (folder / "in.txt").write_text("".join(f"row {i}\n" for i in range(ROWS)))
    return folder / "in.txt"


@pytest.mark.parametrize("name", ["out.npy", "out.parquet"])
def test_a_chunk_left_undone_stops_the_job_before_anything_is_moved_into_place(
    tmp_path: Path, fake_embed: FakeFixture, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # The scan counts 5 rows more than reading the input gives (same content, so the input check passes):
    # the last chunk is never embedded. Without the check the .npy came out with 5 rows of NaN.
    source, real_scan = corpus(tmp_path), embed.scan

    def over_counted(spec: InputSpec) -> tuple[int, str]:
        rows, digest = real_scan(spec)
        return rows + 5, digest

    monkeypatch.setattr(embed, "scan", over_counted)
    out = tmp_path / name
    with pytest.raises(vt.jobs.JobError, match=r"1 of 3 chunks were not embedded: .* fewer rows than the 15"):
        vt.embed_file(fake_embed.fake.url, source, out, chunk_rows=5)
    assert not out.exists() and not out.with_name(name + ".manifest.json").exists()


def test_an_input_edited_during_the_run_stops_the_job_before_anything_is_moved_into_place(
    tmp_path: Path, fake_embed: FakeFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After the first chunk is written, a row is edited in place (same row count): the rows embedded
    # before and after the edit would mix two inputs in one output.
    source, real_committed = corpus(tmp_path), engine.EmbedRun.committed

    def committed_then_edit(self: engine.EmbedRun, work: Any) -> None:
        real_committed(self, work)
        source.write_text(source.read_text().replace("row 9\n", "row nine\n"))

    monkeypatch.setattr(engine.EmbedRun, "committed", committed_then_edit)
    out = tmp_path / "out.npy"
    with pytest.raises(vt.jobs.JobMismatch, match=r"input content changed during the run"):
        vt.embed_file(fake_embed.fake.url, source, out, chunk_rows=5, concurrency=1)
    assert not out.exists() and not (tmp_path / "out.npy.manifest.json").exists()
