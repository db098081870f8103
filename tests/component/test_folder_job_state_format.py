"""A folder job's work folder as the job writes it (``state.json`` holding its fingerprint alone, a record
per page) resumes on the one checkpoint store: nothing finished is sent again, and the outputs come back.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import vllm_tasks as vt
from vllm_tasks.testing import FakeVLLM

PAGE = Path(__file__).parents[2] / "examples/data/page.png"


def test_a_folder_jobs_fingerprint_only_state_resumes(tmp_path: Path, ocr_fake: FakeVLLM) -> None:
    scans, out = tmp_path / "scans", tmp_path / "md"
    scans.mkdir()
    shutil.copy(PAGE, scans / "a.png")
    shutil.copy(PAGE, scans / "b.png")
    first = vt.ocr_dir(ocr_fake.url, scans, out)
    state = out / ".vllm-tasks" / "state.json"
    fingerprint = json.loads(state.read_text())["fingerprint"]
    state.write_text(json.dumps({"fingerprint": fingerprint}, indent=1))
    markdown = (out / "a.md").read_bytes()
    (out / "a.md").unlink()
    assert sorted(p.name for p in (out / ".vllm-tasks" / "records" / "a.png").iterdir()) == ["000001.json"]
    ocr_fake.clear_requests()
    report = vt.ocr_dir(ocr_fake.url, scans, out)
    assert first.units_sent == 2 and (report.units_sent, report.units_resumed) == (0, 2) and report.complete
    assert ocr_fake.received("/v1/chat/completions") == []
    assert (out / "a.md").read_bytes() == markdown
