"""Both job kinds' work folders, as ``embed_file`` and the folder jobs write them, resume from the one
checkpoint store (``vllm_tasks.jobs.state.Progress``).

The files are laid down byte for byte as the jobs write them: ``embed_file``'s ``OUT.partial/state.json``
(every field of its checkpoint, ``json.dumps(..., indent=1)``) and ``errors.jsonl``; a folder job's
``OUT/.vllm-tasks/state.json`` (its fingerprint alone) and ``records/FILE/PAGE.json`` (the record with the
SHA-256 of the file it came from).
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from vllm_tasks.errors import JobMismatch
from vllm_tasks.jobs.state import Finished, Progress

EMBED_FINGERPRINT = {
    "input": {"sha256": "ab" * 32, "rows": 10, "format": "text"},
    "model": {"model": "m", "root": "/w", "width": 4, "probe": [1.0, 0.0, 0.0, 0.0]},
    "options": {},
    "output": {"format": "npy"},
}
FOLDER_FINGERPRINT = {"model": {"model": "ocr", "root": "/w"}, "options": {"max_tokens": 64}}
FILE_SHA = "cd" * 32


def embed_work(work: Path) -> None:
    """An unfinished ``embed_file`` job: chunks 0, 1 and 3 of 5 done, one refused row recorded, and a
    refused row of an unfinished chunk after it (cut back on resume)."""
    work.mkdir()
    kept = orjson.dumps({"row": 4, "id": 4, "status": 400, "error": "too long"}) + b"\n"
    state = {
        "fingerprint": EMBED_FINGERPRINT,
        "rows": 10,
        "width": 4,
        "chunk_rows": 2,
        "done_below": 2,
        "done_above": [3],
        "errors_bytes": len(kept),
        "failed_rows": 1,
        "seconds": 1.5,
        "runs": 1,
    }
    (work / "state.json").write_text(json.dumps(state, indent=1))
    (work / "errors.jsonl").write_bytes(kept + orjson.dumps({"row": 9, "id": 9, "status": 400, "error": "x"}))


def folder_work(work: Path) -> None:
    """A folder job's work folder: page 1 of a.pdf done; the list of written files, the lock."""
    (work / "records" / "sub" / "a.pdf").mkdir(parents=True)
    (work / "state.json").write_text(json.dumps({"fingerprint": FOLDER_FINGERPRINT}, indent=1))
    record = {"markdown": "# page one", "usage": {"total_tokens": 7}}
    (work / "records" / "sub" / "a.pdf" / "000001.json").write_bytes(
        orjson.dumps({"sha256": FILE_SHA, "record": record})
    )
    (work / "written.jsonl").write_text("")


def test_an_embed_jobs_state_resumes(tmp_path: Path) -> None:
    work = tmp_path / "out.npy.partial"
    embed_work(work)
    progress = Progress.open(
        work, EMBED_FINGERPRINT, out="out.npy", resume=True, rows=10, width=4, chunk_rows=9
    )
    assert progress.resumed
    state = progress.state
    assert (state.done, state.chunk_rows, state.failed_rows, state.runs) == (frozenset({0, 1, 3}), 2, 1, 1)
    assert state.done_rows() == 6
    progress.trim_errors()
    assert [row["row"] for row in progress.refused_rows()] == [4]
    progress.commit(Finished(index=2, refused=[{"row": 5, "id": 5, "status": 400, "error": "y"}]))
    again = Progress.open(work, EMBED_FINGERPRINT, out="out.npy", resume=True)
    assert (again.state.done_below, again.state.done_above, again.state.failed_rows) == (4, [], 2)
    assert [row["row"] for row in again.refused_rows()] == [4, 5]


def test_a_folder_jobs_records_resume(tmp_path: Path) -> None:
    work = tmp_path / "out" / ".vllm-tasks"
    folder_work(work)
    progress = Progress.open(work, FOLDER_FINGERPRINT, out="out", resume=True, keep=("written.jsonl", "lock"))
    assert progress.resumed and Progress.held_in(work) and Progress.records_of(work, "sub/a.pdf")
    assert progress.record("sub/a.pdf/000001", FILE_SHA) == {
        "markdown": "# page one",
        "usage": {"total_tokens": 7},
    }
    assert progress.record("sub/a.pdf/000001", "ef" * 32) is None  # the file changed: redone
    assert progress.record("sub/a.pdf/000002", FILE_SHA) is None
    progress.commit(Finished(record=("sub/a.pdf/000002", FILE_SHA, {"markdown": "two"})))
    saved = orjson.loads((work / "records" / "sub" / "a.pdf" / "000002.json").read_bytes())
    assert saved == {"sha256": FILE_SHA, "record": {"markdown": "two"}}


@pytest.mark.parametrize("kind", ["embed", "folder"])
def test_another_job_in_the_work_folder_is_refused_or_replaced(tmp_path: Path, kind: str) -> None:
    work = tmp_path / "work"
    if kind == "embed":
        embed_work(work)
        fingerprint, other = EMBED_FINGERPRINT, {**EMBED_FINGERPRINT, "options": {"dimensions": 2}}
    else:
        work.mkdir()
        folder_work(work)
        fingerprint, other = FOLDER_FINGERPRINT, {**FOLDER_FINGERPRINT, "options": {"max_tokens": 8}}
    with pytest.raises(JobMismatch, match="option"):
        Progress.open(work, other, out="out", resume=True)
    assert Progress.open(work, fingerprint, out="out", resume=True).resumed
    fresh = Progress.open(work, other, out="out", resume=False, keep=("written.jsonl",))
    assert not fresh.resumed and fresh.state.done == frozenset()
    assert sorted(entry.name for entry in work.iterdir()) == ["state.json"] + (
        ["written.jsonl"] if kind == "folder" else []
    )
