"""ocr_dir() / transcribe_dir() at their boundaries (issue 24), against FakeVLLM servers.

- One run per output folder at a time: a second run (even ``resume=False``, ``--restart``) is refused with
  ``JobError`` naming the first one's pid before it touches anything; the lock goes when a run ends, by
  an error or a cancel too.
- A file the job cannot name (not UTF-8, an output name over NAME_MAX bytes, an output that would be
  another file's output folder) is a failure of that file, listed in ``errors.jsonl`` (valid UTF-8 JSON)
  before any request for it; the others are done and the CLI exits with 1.
- A file deleted or unreadable (at the start or mid-run) fails alone; the next run goes on without it,
  and once it is back only what is missing of it is sent.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import vllm_tasks as vt
from vllm_tasks import cli
from vllm_tasks.jobs import folders
from vllm_tasks.testing import OCR_TASKS, FakeVLLM, ReceivedRequest, Reply
from vllm_tasks.testing.content import DEFAULT_OCR_OUTPUT

from ..clients import cli_env

DATA = Path(__file__).parents[2]
PAGE, REPORT = DATA / "examples/data/page.png", DATA / "examples/data/report.pdf"
FOX = DATA / "tests/data/audio/fox.wav"
CHAT, AUDIO = "/v1/chat/completions", "/v1/audio/transcriptions"
pytestmark = pytest.mark.filterwarnings("ignore::vllm_tasks.ocr.OCRTruncatedWarning")  # the fake's long page


def images(folder: Path, *names: str) -> Path:
    """``folder`` holding a copy of page.png under each name (made with its subfolders)."""
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PAGE, folder / name)
    return folder


def page_requests(fake: FakeVLLM) -> int:
    """How many OCR requests (not the n-gram processor check) the fake received."""
    return sum("image_url" in json.dumps(r.json) for r in fake.received(CHAT))


def errors_of(out: Path) -> list[dict[str, object]]:
    """``OUT/errors.jsonl``, read as strict UTF-8."""
    return [json.loads(line) for line in (out / "errors.jsonl").read_bytes().decode("utf-8").splitlines()]


def saved(out: Path) -> int:
    return len(list((out / ".vllm-tasks" / "records").rglob("*.json")))


# --- one run per output folder ---------------------------------------------------------------------------


def test_a_second_run_is_refused_naming_the_first_and_the_lock_goes_with_a_cancel(tmp_path: Path) -> None:
    """A second run (here with resume=False, which would remove the first one's work) is refused with
    JobError naming the holder's pid; the first run's records stay; a cancelled or refused run leaves no
    lock."""
    source = images(tmp_path / "scans", *(f"p{index}.png" for index in range(6)))
    out = tmp_path / "md"
    held = threading.Event()  # the first run's third page waits: it still runs when the second starts

    def hold(reply: Reply) -> Reply:
        held.wait(30)
        return reply

    async def main(fake: FakeVLLM) -> None:
        fake.mutate(hold, path="/v1/chat/completions", after=3)  # the probe and two pages
        first = asyncio.create_task(vt.aocr_dir(fake.url, source, out, concurrency=1))
        while saved(out) < 2:
            await asyncio.sleep(0.01)
        with pytest.raises(
            vt.jobs.JobError, match=f"another run of this job is writing it \\(pid {os.getpid()},"
        ):
            await vt.aocr_dir(fake.url, source, out, resume=False)
        assert saved(out) >= 2 and (out / ".vllm-tasks" / "state.json").is_file()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        held.set()
        assert not (out / ".vllm-tasks" / "lock").exists()
        with pytest.raises(vt.jobs.JobMismatch):  # refused under the lock: it goes too
            await vt.aocr_dir(fake.url, source, out, params=vt.OCRParams(max_tokens=32))
        again = await vt.aocr_dir(fake.url, source, out)
        assert again.complete and again.units_resumed >= 2 and not (out / ".vllm-tasks" / "lock").exists()

    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS) as fake:
        try:
            asyncio.run(main(fake))
        finally:
            held.set()


def test_the_cli_refuses_a_second_run_with_exit_code_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`vllm-tasks ocr-dir --restart` while another process runs the job: exit code 3, the other's pid;
    the sync API refuses too; the first run ends complete, and the lock file with it."""
    source = images(tmp_path / "scans", *(f"p{index}.png" for index in range(6)))
    out = tmp_path / "md"
    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, latency=0.3) as fake:
        argv = ["ocr-dir", str(source), "--out", str(out), "--url", fake.url, "--concurrency", "1"]
        child = subprocess.Popen(
            [sys.executable, "-m", "vllm_tasks.cli", *argv], env=cli_env(), stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 60
        while saved(out) < 1:
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.02)
        assert cli.main([*argv, "--restart"]) == cli.EXIT_JOB_REFUSED
        assert f"(pid {child.pid}, lock {out / '.vllm-tasks' / 'lock'})" in capsys.readouterr().err
        with pytest.raises(vt.jobs.JobError, match=f"pid {child.pid}"):
            vt.ocr_dir(fake.url, source, out)
        _, err = child.communicate(timeout=120)
    assert child.returncode == cli.EXIT_OK, err
    assert "6/6 file(s) done" in err and not (out / ".vllm-tasks" / "lock").exists()


# --- files the job cannot name ----------------------------------------------------------------------------


def test_a_file_whose_name_is_not_utf8_fails_alone(tmp_path: Path, ocr_fake: FakeVLLM) -> None:
    source = images(tmp_path / "scans", "a.png", "sub/b.png")
    bad = os.fsdecode(b"\xff-scan.png")
    shutil.copy(PAGE, source / bad)
    latin1 = os.fsdecode(b"caf\xe9")  # a folder named in Latin-1
    (source / latin1).mkdir()
    shutil.copy(PAGE, source / latin1 / "c.png")
    out = tmp_path / "md"
    report = vt.ocr_dir(ocr_fake.url, source, out)
    assert (report.documents, report.documents_done, report.units_sent) == (4, 2, 2)
    assert page_requests(ocr_fake) == 2
    assert [(document, page) for document, page, _ in report.failed] == [
        (f"{latin1}/c.png", None),
        (bad, None),
    ]
    message = report.failed[1][2]
    assert "b'\\xff-scan.png'" in message and "not valid UTF-8" in message and "Rename" in message
    assert [(e["document"], e["page"]) for e in errors_of(out)] == [
        ("caf\\xe9/c.png", None),
        ("\\xff-scan.png", None),
    ]
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == [
        "a.md",
        "errors.jsonl",
        "manifest.json",
        "pages.jsonl",
    ]
    assert json.loads((out / "manifest.json").read_text())["failed"] == 2
    assert (
        cli.main(["ocr-dir", str(source), "--out", str(out), "--url", ocr_fake.url]) == cli.EXIT_SERVER_ERROR
    )


def test_a_recording_whose_name_is_not_utf8_fails_alone_async(tmp_path: Path, stt_fake: FakeVLLM) -> None:
    source = tmp_path / "calls"
    source.mkdir()
    shutil.copy(FOX, source / "fox.wav")
    shutil.copy(FOX, source / os.fsdecode(b"\xe9t\xe9.wav"))
    report = asyncio.run(vt.atranscribe_dir(stt_fake.url, source, tmp_path / "text"))
    assert report.documents_done == 1 and len(stt_fake.received(AUDIO)) == 1
    assert [e["document"] for e in errors_of(tmp_path / "text")] == ["\\xe9t\\xe9.wav"]


def test_an_output_name_over_name_max_fails_alone(tmp_path: Path, stt_fake: FakeVLLM) -> None:
    """A 255-byte recording name is fine, its 256-byte .json is not: that file fails before any request
    for it, naming the output and the limit; without the .json format it is done."""
    source = tmp_path / "calls"
    source.mkdir()
    long = "a" * 251 + ".wav"
    shutil.copy(FOX, source / "fox.wav")
    shutil.copy(FOX, source / long)
    out = tmp_path / "text"
    report = vt.transcribe_dir(stt_fake.url, source, out)
    assert report.documents_done == 1 and len(stt_fake.received(AUDIO)) == 1
    ((document, page, message),) = report.failed
    assert (document, page) == (long, None)
    assert "256 bytes" in message and "255" in message and ".json" in message and "shorter" in message
    assert errors_of(out)[0]["document"] == long
    argv = ["transcribe-dir", str(source), "--out", str(out), "--url", stt_fake.url]
    assert cli.main(argv) == cli.EXIT_SERVER_ERROR
    assert cli.main([*argv, "--format", "srt", "--format", "txt"]) == cli.EXIT_OK
    assert (out / ("a" * 251 + ".srt")).is_file()


def test_an_output_that_would_be_another_files_output_folder_fails_alone(
    tmp_path: Path, ocr_fake: FakeVLLM
) -> None:
    """x.png's x.md would be the folder of x.md/p.png's x.md/p.md: x.png fails, the other is done."""
    source = images(tmp_path / "scans", "x.png", "x.md/p.png", "y.png")
    out = tmp_path / "md"
    report = vt.ocr_dir(ocr_fake.url, source, out)
    assert [(document, page) for document, page, _ in report.failed] == [("x.png", None)]
    assert "x.md/p.png" in report.failed[0][2]
    assert (out / "x.md" / "p.md").is_file() and (out / "y.md").is_file() and report.documents_done == 2
    assert vt.ocr_dir(ocr_fake.url, source, out).units_sent == 0  # the next run is refused nothing


# --- files deleted or unreadable ---------------------------------------------------------------------------


def test_an_image_deleted_mid_run_fails_alone_and_resumes_once_back(tmp_path: Path) -> None:
    source = images(tmp_path / "scans", "a.png", "b.png", "c.png")
    victim = source / "b.png"

    answered: list[ReceivedRequest] = []

    def answer(request: ReceivedRequest) -> str:
        if not answered:  # while the first page (a.png) is answered: b.png is sent next
            victim.unlink()
        answered.append(request)
        return DEFAULT_OCR_OUTPUT

    out = tmp_path / "md"
    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, ocr_output=answer) as fake:
        report = asyncio.run(vt.aocr_dir(fake.url, source, out, concurrency=1))
        assert [(document, page) for document, page, _ in report.failed] == [("b.png", 1)]
        assert "cannot be read (No such file or directory)" in report.failed[0][2]
        assert report.documents_done == 2 and errors_of(out)[0]["document"] == "b.png"
        again = vt.ocr_dir(fake.url, source, out)  # without it: complete, nothing sent
        assert again.complete and again.documents == 2 and again.units_sent == 0
        assert not (out / "errors.jsonl").exists()
        shutil.copy(PAGE, victim)
        fake.clear_requests()
        back = vt.ocr_dir(fake.url, source, out)
        assert back.complete and back.units_sent == 1 and page_requests(fake) == 1


def test_a_file_lost_after_it_was_found_or_unreadable_from_the_start_fails_alone(
    tmp_path: Path, ocr_fake: FakeVLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An image deleted after it was hashed (before its pages are counted), and a file unreadable from
    the start: each fails alone, the PDF is done; once both are back, only they are sent."""
    source = images(tmp_path / "scans", "a.png", "z.png")
    shutil.copy(REPORT, source / "r.pdf")
    hashed = folders._sha256

    def hash_then_lose(path: Path) -> str:
        if path.name == "z.png":
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        digest = hashed(path)
        if path.name == "a.png":
            path.unlink()
        return digest

    monkeypatch.setattr(folders, "_sha256", hash_then_lose)
    out = tmp_path / "md"
    report = vt.ocr_dir(ocr_fake.url, source, out)
    failed = {document: (page, message) for document, page, message in report.failed}
    assert set(failed) == {"a.png", "z.png"} and report.documents_done == 1
    assert "cannot be read (No such file or directory)" in failed["a.png"][1]
    assert "cannot be read (Permission denied)" in failed["z.png"][1] and "readable" in failed["z.png"][1]
    monkeypatch.undo()
    shutil.copy(PAGE, source / "a.png")
    ocr_fake.clear_requests()
    again = vt.ocr_dir(ocr_fake.url, source, out)
    assert again.complete and again.units_sent == 2 and again.units_resumed == 2
