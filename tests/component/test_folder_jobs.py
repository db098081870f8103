"""ocr_dir() / transcribe_dir() and ``vllm-tasks ocr-dir`` / ``transcribe-dir`` against FakeVLLM servers.

What is checked: the outputs (a markdown file per document, equal to ``client.ocr_pdf``'s; ``pages.jsonl``
with blocks and boxes; ``.srt``/``.json``/``.txt`` per recording), resuming (a finished page or file is
never sent again; a failed one is recorded with its message and retried by the next run; an edited file
is redone), refusals (another model, other options, bad folders), several servers, progress and the CLI.

The last section kills the CLI (a child process) with ``kill -9`` at seeded random points, against fakes
configured like the `ocr` and `stt` fixtures (tests/fakes.py) whose answers name the page or upload they
answer and come after a delay (so that a kill lands mid-job); a run to the end then gives the same output
files, byte for byte, as an uninterrupted run, and nothing finished before a kill is done again (its saved
record is untouched: same bytes, same mtime; the resumed run's report counts it as resumed).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

import vllm_tasks as vt
from vllm_tasks import cli
from vllm_tasks.testing import OCR_TASKS, FakeVLLM, ReceivedRequest, grounding_output

from ..clients import Ticker, cli_env, kill_at_random_progress, start_cli_for_ctrl_c
from ..fakes import FakeFixture, fake_like

DATA = Path(__file__).parents[2]
PAGE, REPORT = DATA / "examples/data/page.png", DATA / "examples/data/report.pdf"
FOX, NUMBERS = DATA / "tests/data/audio/fox.wav", DATA / "tests/data/audio/numbers.wav"
CHAT, AUDIO = "/v1/chat/completions", "/v1/audio/transcriptions"
FAST = {"retry_replica_after": 0.05, "give_up_after": 0.5}
pytestmark = pytest.mark.filterwarnings("ignore::vllm_tasks.ocr.OCRTruncatedWarning")  # the fake's long page


def page_requests(fake: FakeVLLM) -> list[ReceivedRequest]:
    """The OCR requests (the n-gram processor check has no image)."""
    return [r for r in fake.received(CHAT) if "image_url" in json.dumps(r.json)]


def page_of(request: ReceivedRequest) -> str:
    """A short tag of the image a request carried, to tell pages apart."""
    return json.dumps(request.json)[-200:]


@pytest.fixture
def scans(tmp_path: Path) -> Path:
    """page.png, sub/report.pdf (2 pages), sub/deeper/copy.png, and files ocr_dir must skip."""
    folder = tmp_path / "scans"
    (folder / "sub" / "deeper").mkdir(parents=True)
    shutil.copy(PAGE, folder / "page.png")
    shutil.copy(REPORT, folder / "sub" / "report.pdf")
    shutil.copy(PAGE, folder / "sub" / "deeper" / "copy.PNG")
    (folder / "notes.txt").write_text("not a document")
    (folder / ".hidden").mkdir()
    shutil.copy(PAGE, folder / ".hidden" / "skipped.png")
    return folder


@pytest.fixture
def recordings(tmp_path: Path) -> Path:
    folder = tmp_path / "calls"
    (folder / "day2").mkdir(parents=True)
    shutil.copy(FOX, folder / "fox.wav")
    shutil.copy(NUMBERS, folder / "day2" / "numbers.wav")
    return folder


def outputs(folder: Path) -> dict[str, bytes]:
    """Every output file (not the work folder, not the manifest's timings) by relative path."""
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and ".vllm-tasks" not in path.parts and path.name != "manifest.json"
    }


# --- ocr_dir: outputs ----------------------------------------------------------------------------------


def test_ocr_dir_writes_a_markdown_file_per_document_and_the_pages(
    scans: Path, tmp_path: Path, ocr_fake: FakeVLLM
) -> None:
    out = tmp_path / "md"
    report = vt.ocr_dir(ocr_fake.url, scans, out, params=vt.OCRParams(max_tokens=64), quality=None)
    assert (report.documents, report.documents_done, report.units, report.units_sent) == (3, 3, 4, 4)
    assert report.complete and report.failed == () and report.errors_file is None
    assert sorted(outputs(out)) == ["page.md", "pages.jsonl", "sub/deeper/copy.md", "sub/report.md"]
    with vt.Client(ocr_fake.url) as client:
        document = client.ocr_pdf(REPORT, max_tokens=64, quality=None)
        single = client.ocr(PAGE, max_tokens=64)
    assert (out / "sub/report.md").read_text() == document.markdown + "\n"
    assert (out / "page.md").read_text() == single.markdown + "\n"
    pages = [json.loads(line) for line in (out / "pages.jsonl").read_text().splitlines()]
    assert [(p["document"], p["page"]) for p in pages] == [
        ("page.png", 1),
        ("sub/deeper/copy.PNG", 1),
        ("sub/report.pdf", 1),
        ("sub/report.pdf", 2),
    ]
    assert [p["markdown"] for p in pages[2:]] == [page.result.markdown for page in document.pages]
    first = pages[0]["blocks"][0]
    assert first["label"] == single.blocks[0].label and first["boxes"] == [list(single.blocks[0].boxes[0])]
    assert pages[0]["image_size"] == list(single.image_size or ())
    manifest = json.loads(report.manifest.read_text())
    assert manifest["complete"] and manifest["pages"] == 4 and manifest["model"] == "deepseek-ocr"
    assert manifest["fingerprint"]["options"]["max_tokens"] == 64
    assert all(r["max_tokens"] == 64 for r in (p.json for p in page_requests(ocr_fake)))


def test_a_finished_job_run_again_sends_nothing(scans: Path, tmp_path: Path, ocr_fake: FakeVLLM) -> None:
    vt.ocr_dir(ocr_fake.url, scans, tmp_path / "md")
    before = outputs(tmp_path / "md")
    ocr_fake.clear_requests()
    report = vt.ocr_dir(ocr_fake.url, scans, tmp_path / "md")
    assert page_requests(ocr_fake) == [] and report.units_sent == 0 and report.units_resumed == 4
    assert "already complete; nothing to do" in report.summary()
    assert outputs(tmp_path / "md") == before


def test_a_new_document_is_the_only_one_sent(scans: Path, tmp_path: Path, ocr_fake: FakeVLLM) -> None:
    vt.ocr_dir(ocr_fake.url, scans, tmp_path / "md")
    shutil.copy(PAGE, scans / "added.jpg")  # PNG bytes under another suffix: the server sees an image
    ocr_fake.clear_requests()
    report = vt.ocr_dir(ocr_fake.url, scans, tmp_path / "md")
    assert len(page_requests(ocr_fake)) == 1 and report.units_sent == 1 and report.documents == 4
    assert (tmp_path / "md" / "added.md").exists()


def test_an_edited_document_is_redone(scans: Path, tmp_path: Path, ocr_fake: FakeVLLM) -> None:
    vt.ocr_dir(ocr_fake.url, scans, tmp_path / "md")
    shutil.copy(REPORT, scans / "page.png")  # same name, other content (a PDF now: 2 pages)
    ocr_fake.clear_requests()
    report = vt.ocr_dir(ocr_fake.url, scans, tmp_path / "md")
    assert report.units_sent == 2 and len(page_requests(ocr_fake)) == 2 and report.units == 5


# --- ocr_dir: failures, interruptions ------------------------------------------------------------------


def test_a_page_that_fails_is_recorded_and_retried_next_run(
    scans: Path, tmp_path: Path, ocr_fake: FakeVLLM
) -> None:
    reference = tmp_path / "reference"
    vt.ocr_dir(ocr_fake.url, scans, reference)
    ocr_fake.clear_requests()
    ocr_fake.fail(400, path=CHAT, after=3, message="this page is refused")  # 1 check + 2 pages pass
    out = tmp_path / "md"
    report = vt.ocr_dir(ocr_fake.url, scans, out, concurrency=1)
    assert not report.complete and report.documents_done == 2 and len(report.failed) == 1
    document, page, message = report.failed[0]
    assert page is not None and message == "this page is refused"
    assert json.loads((out / "errors.jsonl").read_text()) == {
        "document": document,
        "page": page,
        "error": "this page is refused",
    }
    assert not (out / Path(document).with_suffix(".md")).exists()  # not until all its pages are done
    assert "1 failed" in report.summary() and "run again" in report.summary()
    sent = len(page_requests(ocr_fake))
    ocr_fake.clear_requests()
    again = vt.ocr_dir(ocr_fake.url, scans, out)
    assert len(page_requests(ocr_fake)) == 1 and again.units_sent == 1 and sent == 4  # only that page
    assert again.complete and not (out / "errors.jsonl").exists()
    assert outputs(out) == outputs(reference)


def test_a_file_that_does_not_decode_is_recorded_and_the_others_done(
    scans: Path, tmp_path: Path, ocr_fake: FakeVLLM
) -> None:
    (scans / "broken.png").write_bytes(b"not an image")
    (scans / "broken2.pdf").write_bytes(b"not a pdf either")
    report = vt.ocr_dir(ocr_fake.url, scans, tmp_path / "md")
    failed = {document: (page, message) for document, page, message in report.failed}
    assert set(failed) == {"broken.png", "broken2.pdf"} and failed["broken2.pdf"][0] is None
    assert "cannot be opened" in failed["broken2.pdf"][1]
    assert report.documents == 5 and report.documents_done == 3
    assert cli.main(["ocr-dir", str(scans), "--out", str(tmp_path / "md"), "--url", ocr_fake.url]) == (
        cli.EXIT_SERVER_ERROR
    )
    (scans / "broken.png").unlink()
    (scans / "broken2.pdf").unlink()
    assert (
        cli.main(["ocr-dir", str(scans), "--out", str(tmp_path / "md"), "--url", ocr_fake.url]) == cli.EXIT_OK
    )


def test_an_interrupted_run_redoes_no_finished_page(scans: Path, tmp_path: Path) -> None:
    for index in range(6):
        shutil.copy(PAGE, scans / f"extra{index}.png")
    out = tmp_path / "md"

    async def interrupted() -> None:
        task = asyncio.create_task(vt.aocr_dir(fake.url, scans, out, concurrency=1))
        records = out / ".vllm-tasks" / "records"
        while len(list(records.rglob("*.json"))) < 3:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, latency=0.05) as fake:
        asyncio.run(interrupted())
        saved = len(list((out / ".vllm-tasks" / "records").rglob("*.json")))
        first = [page_of(r) for r in page_requests(fake)]
        fake.clear_requests()
        report = vt.ocr_dir(fake.url, scans, out)
        second = [page_of(r) for r in page_requests(fake)]
    assert 3 <= saved < 10 and report.units_resumed == saved and report.units_sent == 10 - saved
    assert len(second) == 10 - saved and len(first) <= saved + 1  # at most the one in flight is redone
    assert report.complete and len((out / "pages.jsonl").read_text().splitlines()) == 10


# --- ocr_dir: what refuses to resume, bad input ---------------------------------------------------------


def test_other_options_or_another_model_refuse_to_resume(
    scans: Path, tmp_path: Path, ocr_fake: FakeVLLM
) -> None:
    out = tmp_path / "md"
    vt.ocr_dir(ocr_fake.url, scans, out, params=vt.OCRParams(max_tokens=64), quality=None)
    with pytest.raises(vt.jobs.JobMismatch, match="option max_tokens: 64 -> 128"):
        vt.ocr_dir(ocr_fake.url, scans, out, params=vt.OCRParams(max_tokens=128))
    with (
        FakeVLLM(model="other-ocr", tasks=OCR_TASKS) as other,
        pytest.raises(vt.jobs.JobMismatch, match="served model: 'deepseek-ocr' -> 'other-ocr'"),
    ):
        vt.ocr_dir(other.url, scans, out, params=vt.OCRParams(max_tokens=64))
    assert cli.main(["ocr-dir", str(scans), "--out", str(out), "--url", ocr_fake.url]) == cli.EXIT_JOB_REFUSED
    ocr_fake.clear_requests()
    report = vt.ocr_dir(
        ocr_fake.url, scans, out, params=vt.OCRParams(max_tokens=128), resume=False, quality=None
    )  # --restart
    assert report.units_sent == 4 and len(page_requests(ocr_fake)) == 4


def test_concurrency_and_servers_may_change_between_runs(
    scans: Path, tmp_path: Path, ocr_fake: FakeVLLM
) -> None:
    vt.ocr_dir(ocr_fake.url, scans, tmp_path / "md", concurrency=1)
    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS) as second:
        report = vt.ocr_dir([second.url, ocr_fake.url], scans, tmp_path / "md", concurrency=3)
    assert report.complete and report.units_sent == 0


@pytest.mark.parametrize(
    ("layout", "match"),
    [
        ({}, "holds no file ending in"),
        ({"a.pdf": REPORT, "a.png": PAGE}, "would write the same output files"),
    ],
)
def test_bad_folders_are_refused(
    tmp_path: Path, layout: dict[str, Path], match: str, ocr_fake: FakeVLLM
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for name, source in layout.items():
        shutil.copy(source, folder / name)
    with pytest.raises(vt.InvalidInputError, match=match) as info:
        vt.ocr_dir(ocr_fake.url, folder, tmp_path / "out")
    assert info.value.field == "source" and not (tmp_path / "out").exists()


def test_bad_arguments_are_refused(scans: Path, tmp_path: Path, ocr_fake: FakeVLLM) -> None:
    with pytest.raises(vt.InvalidInputError, match="is not a folder"):
        vt.ocr_dir(ocr_fake.url, PAGE, tmp_path / "out")
    with pytest.raises(vt.InvalidInputError) as info:
        vt.ocr_dir(ocr_fake.url, scans, tmp_path / "out", concurrency=0)
    assert info.value.field == "concurrency"
    with pytest.raises(vt.InvalidInputError, match="has 'docx'") as info:
        vt.transcribe_dir(ocr_fake.url, scans, tmp_path / "out", formats=["srt", "docx"])
    assert info.value.field == "formats"
    with pytest.raises(vt.InvalidInputError, match="names a server twice"):
        vt.ocr_dir([ocr_fake.url, ocr_fake.url], scans, tmp_path / "out")


def test_an_output_folder_inside_the_input_is_not_read(scans: Path, ocr_fake: FakeVLLM) -> None:
    report = vt.ocr_dir(ocr_fake.url, scans, scans / "md")
    shutil.copy(PAGE, scans / "md" / "dropped-here.png")
    again = vt.ocr_dir(ocr_fake.url, scans, scans / "md")
    assert report.documents == again.documents == 3 and again.units_sent == 0


# --- nothing overwritten that the job did not write ------------------------------------------------------


def test_a_recording_whose_output_is_a_job_file_is_refused_before_any_request(
    recordings: Path, tmp_path: Path, stt_fake: FakeVLLM
) -> None:
    """manifest.wav's transcript would be manifest.json, the job's own manifest (either would overwrite
    the other): refused at the start, naming the recording, the output and the fix; nothing is written."""
    shutil.copy(FOX, recordings / "Manifest.wav")  # the case does not matter (macOS, Windows)
    out = tmp_path / "text"
    with pytest.raises(vt.InvalidInputError, match=r"job's own manifest\.json") as info:
        vt.transcribe_dir(stt_fake.url, recordings, out)
    assert info.value.field == "source" and "Manifest.wav" in str(info.value)
    assert "Manifest.json" in str(info.value) and "Rename" in info.value.fix
    assert stt_fake.received() == [] and not out.exists()
    report = vt.transcribe_dir(stt_fake.url, recordings, out, formats=["srt", "txt"])  # no .json: fine
    assert report.complete and (out / "Manifest.srt").exists()


@pytest.mark.parametrize("name", ["page.md", "manifest.json", "errors.jsonl", "pages.jsonl"])
def test_a_file_the_job_did_not_write_is_never_overwritten(
    scans: Path, tmp_path: Path, ocr_fake: FakeVLLM, name: str
) -> None:
    """A user's own file where the job would write (page.png's page.md, the job's own files) is refused
    at the start, before any request; the file is untouched."""
    out = tmp_path / "md"
    out.mkdir()
    (out / name).write_text("my own notes")
    with pytest.raises(vt.InvalidInputError, match="was not written by this job") as info:
        vt.ocr_dir(ocr_fake.url, scans, out)
    assert info.value.field == "out" and f"holds {name}" in str(info.value)
    assert info.value.fix == f"Move {out / name} out of the output folder, or choose another out folder."
    assert (out / name).read_text() == "my own notes" and ocr_fake.received() == []
    assert sorted(path.name for path in out.iterdir()) == [name]
    (out / name).unlink()
    assert vt.ocr_dir(ocr_fake.url, scans, out).complete


def test_an_output_edited_after_the_job_wrote_it_is_not_overwritten(
    scans: Path, tmp_path: Path, ocr_fake: FakeVLLM
) -> None:
    out = tmp_path / "md"
    vt.ocr_dir(ocr_fake.url, scans, out)
    vt.ocr_dir(ocr_fake.url, scans, out)  # its own outputs are rewritten freely
    vt.ocr_dir(ocr_fake.url, scans, out, resume=False)  # --restart too
    (out / "sub" / "report.md").write_text("corrected by hand")
    ocr_fake.clear_requests()
    with pytest.raises(vt.InvalidInputError, match="was not written by this job"):
        vt.ocr_dir(ocr_fake.url, scans, out, resume=False)
    assert (out / "sub" / "report.md").read_text() == "corrected by hand" and ocr_fake.received() == []


def test_files_next_to_the_outputs_are_not_used_as_temporary_files(
    scans: Path, tmp_path: Path, ocr_fake: FakeVLLM
) -> None:
    """Each output is written to a temporary file in the work folder, then renamed: a user's
    ``page.md.tmp`` or ``manifest.json.tmp`` is not the job's temporary file."""
    out = tmp_path / "md"
    out.mkdir()
    for name in ("page.md.tmp", "manifest.json.tmp", "pages.jsonl.tmp"):
        (out / name).write_text("mine")
    assert vt.ocr_dir(ocr_fake.url, scans, out).complete
    assert all((out / name).read_text() == "mine" for name in ("page.md.tmp", "manifest.json.tmp"))
    assert (out / "pages.jsonl.tmp").read_text() == "mine"
    assert list((out / ".vllm-tasks" / "tmp").iterdir()) == []
    fresh = tmp_path / "umask-default"
    fresh.write_text("")
    assert (out / "page.md").stat().st_mode & 0o777 == fresh.stat().st_mode & 0o777  # as any new file


def test_outputs_of_a_format_left_out_for_a_run_stay_the_jobs_own(
    recordings: Path, tmp_path: Path, stt_fake: FakeVLLM
) -> None:
    out = tmp_path / "text"
    vt.transcribe_dir(stt_fake.url, recordings, out, formats=["txt"])
    vt.transcribe_dir(stt_fake.url, recordings, out, formats=["srt"])
    assert vt.transcribe_dir(stt_fake.url, recordings, out, formats=["txt", "srt"]).complete


def test_a_folder_where_an_output_would_go_is_refused(
    scans: Path, tmp_path: Path, ocr_fake: FakeVLLM
) -> None:
    out = tmp_path / "md"
    (out / "page.md").mkdir(parents=True)
    with pytest.raises(vt.InvalidInputError, match="was not written by this job"):
        vt.ocr_dir(ocr_fake.url, scans, out)
    assert ocr_fake.received() == []


def test_an_out_that_is_the_source_or_not_a_folder_is_refused(
    scans: Path, tmp_path: Path, ocr_fake: FakeVLLM
) -> None:
    with pytest.raises(vt.InvalidInputError, match="is the input folder") as info:
        vt.ocr_dir(ocr_fake.url, scans, scans / "." / "sub" / "..")
    assert info.value.field == "out" and "another folder" in info.value.fix
    taken = tmp_path / "md"
    taken.write_text("a file")
    with pytest.raises(vt.InvalidInputError, match="is not a folder") as info:
        vt.ocr_dir(ocr_fake.url, scans, taken)
    assert info.value.field == "out" and taken.read_text() == "a file"
    assert ocr_fake.received() == [] and sorted(p.name for p in tmp_path.iterdir()) == ["md", "scans"]


def test_a_work_folder_of_an_earlier_version_keeps_its_outputs(
    scans: Path, tmp_path: Path, ocr_fake: FakeVLLM
) -> None:
    """An output folder written before the job kept its list of written files: the outputs of documents
    it holds records for, and its own files, are taken as its own."""
    out = tmp_path / "md"
    vt.ocr_dir(ocr_fake.url, scans, out)
    (out / ".vllm-tasks" / "written.jsonl").unlink()
    ocr_fake.clear_requests()
    report = vt.ocr_dir(ocr_fake.url, scans, out)
    assert report.complete and report.units_sent == 0 and page_requests(ocr_fake) == []


# --- several servers, progress ---------------------------------------------------------------------------


def test_pages_go_to_every_server_and_a_failing_one_is_set_aside(scans: Path, tmp_path: Path) -> None:
    for index in range(5):
        shutil.copy(PAGE, scans / f"extra{index}.png")
    with (
        FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, latency=0.02) as good,
        FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, latency=0.02) as bad,
    ):
        bad.fail(503, path=CHAT, after=2, times=None)  # the check and one page, then every request fails
        with vt.Client(bad.url, max_retries=0) as flaky:
            report = vt.ocr_dir([good.url, flaky], scans, tmp_path / "md", concurrency=2, **FAST)
        urls = (good.url, bad.url)
    by_url = {r.url: r for r in report.replicas}
    good_url, bad_url = urls
    assert report.complete and report.units_sent == 9
    assert by_url[bad_url].failures >= 1 and by_url[bad_url].rows + by_url[good_url].rows == 9
    manifest = json.loads(report.manifest.read_text())
    assert {s["url"] for s in manifest["servers"]} == set(urls)


@pytest.mark.parametrize(
    "fault",
    [
        {"status": 200, "body": b"<html>maintenance</html>"},  # a proxy's page: UnexpectedResponse
        {"status": 404, "message": "The model `deepseek-ocr` does not exist."},  # redeploying
    ],
    ids=["html", "404"],
)
def test_a_server_answering_what_vllm_does_not_is_set_aside(
    scans: Path, tmp_path: Path, fault: dict[str, object]
) -> None:
    # was: the first such answer stopped the whole job (only a 5xx or a connection error set a server
    # aside); the scope of each error class now decides it, as for embed_file
    with (
        FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, latency=0.02) as good,
        FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, latency=0.02) as bad,
    ):
        bad.fail(path=CHAT, after=2, times=None, **fault)  # type: ignore[arg-type]
        report = vt.ocr_dir([good.url, bad.url], scans, tmp_path / "md", concurrency=2, **FAST)
        urls = (good.url, bad.url)
    by_url = {r.url: r for r in report.replicas}
    assert report.complete and report.units_sent == 4
    assert by_url[urls[1]].failures >= 1


def test_a_server_down_at_the_start_is_left_out_with_a_warning(
    scans: Path, tmp_path: Path, ocr_fake: FakeVLLM, caplog: pytest.LogCaptureFixture
) -> None:
    # was: one server that could not be reached refused the whole job (APIConnectionError); the job
    # scaffold starts folder jobs, like embed_file, on the servers that answer
    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS) as down:
        down_url = down.url
    caplog.set_level("WARNING", logger="vllm_tasks.jobs")
    with vt.Client(down_url, max_retries=0) as unreachable:
        report = vt.ocr_dir([ocr_fake.url, unreachable], scans, tmp_path / "md", **FAST)
    assert report.complete and report.units_sent == 4
    assert f"{down_url} cannot be reached" in caplog.text
    assert {r.url: r.rows for r in report.replicas} == {ocr_fake.url: 4, down_url: 0}


def test_a_server_back_on_other_weights_gets_no_page(scans: Path, tmp_path: Path) -> None:
    # A server set aside is checked again before its next page (recheck_model): one restarted on other
    # weights under the same name stops the job (was: it went on answering pages with the new model).
    for index in range(6):
        shutil.copy(PAGE, scans / f"extra{index}.png")
    with (
        FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, latency=0.3) as good,
        FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS) as restarted,
    ):
        restarted.fail(503, path=CHAT, times=1)  # its first page: down for a moment...

        def swap_weights() -> None:
            while not restarted.received(CHAT):
                time.sleep(0.005)
            restarted.settings.root = "another/checkpoint"  # ...and back on other weights

        swapper = threading.Thread(target=swap_weights, daemon=True)
        swapper.start()
        with (
            vt.Client(restarted.url, max_retries=0) as flaky,
            pytest.raises(vt.jobs.JobMismatch, match="another/checkpoint") as refused,
        ):
            vt.ocr_dir(
                [good.url, flaky],
                scans,
                tmp_path / "md",
                concurrency=1,
                retry_replica_after=0.3,
                give_up_after=5,
            )
        swapper.join(5)
        assert page_requests(restarted) == page_requests(restarted)[:1]  # only the page that failed
        assert f"the model served by {restarted.url} changed during the run" in str(refused.value)


def test_servers_of_different_models_are_refused(scans: Path, tmp_path: Path, ocr_fake: FakeVLLM) -> None:
    with (
        FakeVLLM(model="other", tasks=OCR_TASKS) as other,
        pytest.raises(vt.jobs.ReplicaMismatch, match="'other'"),
    ):
        vt.ocr_dir([ocr_fake.url, other.url], scans, tmp_path / "md")


def test_progress_is_a_log_line_without_a_terminal(
    scans: Path, tmp_path: Path, ocr_fake: FakeVLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="vllm_tasks.jobs")
    vt.ocr_dir(ocr_fake.url, scans, tmp_path / "md", show_progress=True, progress_interval=0.0001)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ocr-dir: ")]
    assert lines and "4/4 pages (100.0%)" in lines[-1] and "pages/s" in lines[-1]


def test_progress_is_a_bar_on_a_terminal(
    recordings: Path,
    tmp_path: Path,
    stt_fake: FakeVLLM,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    vt.transcribe_dir(stt_fake.url, recordings, tmp_path / "text", show_progress=True)
    bar = capsys.readouterr().err
    assert "transcribe-dir: 100%" in bar and "2/2" in bar and "file" in bar


def test_the_job_shares_an_event_loop(scans: Path, tmp_path: Path, ocr_fake: FakeVLLM) -> None:
    async def main() -> tuple[vt.jobs.FolderJobReport, int]:
        async with Ticker() as ticker, vt.AsyncClient(ocr_fake.url) as client:
            report = await vt.aocr_dir(client, scans, tmp_path / "md")
        return report, ticker.ticks

    report, ticks = asyncio.run(main())
    assert report.complete and ticks > 1


# --- transcribe_dir --------------------------------------------------------------------------------------


def test_transcribe_dir_writes_srt_json_and_txt_per_file(
    recordings: Path, tmp_path: Path, stt_fake: FakeVLLM
) -> None:
    out = tmp_path / "text"
    report = vt.transcribe_dir(stt_fake.url, recordings, out, params=vt.TranscribeParams(language="en"))
    assert report.complete and (report.documents, report.units, report.unit) == (2, 2, "file")
    assert sorted(outputs(out)) == [
        "day2/numbers.json",
        "day2/numbers.srt",
        "day2/numbers.txt",
        "fox.json",
        "fox.srt",
        "fox.txt",
    ]
    with vt.Client(stt_fake.url) as client:
        direct = client.transcribe(FOX, language="en", response_format="verbose_json")
    assert (out / "fox.srt").read_text() == direct.to_srt().rstrip("\n") + "\n"
    assert (out / "fox.txt").read_text() == direct.to_text() + "\n"
    assert json.loads((out / "fox.json").read_text()) == json.loads(direct.to_json())
    assert all(r.form["response_format"] == "verbose_json" for r in stt_fake.received(AUDIO))
    assert all(r.form["language"] == "en" for r in stt_fake.received(AUDIO))


def test_formats_added_later_are_rendered_without_a_request(
    recordings: Path, tmp_path: Path, stt_fake: FakeVLLM
) -> None:
    out = tmp_path / "text"
    vt.transcribe_dir(stt_fake.url, recordings, out, formats=["txt"])
    assert sorted(outputs(out)) == ["day2/numbers.txt", "fox.txt"]
    stt_fake.clear_requests()
    vt.transcribe_dir(stt_fake.url, recordings, out, formats=["vtt", "srt"])
    assert stt_fake.received(AUDIO) == []
    assert (out / "fox.vtt").read_text().startswith("WEBVTT") and (out / "day2/numbers.srt").exists()


def test_a_file_that_fails_is_recorded_and_retried(
    recordings: Path, tmp_path: Path, stt_fake: FakeVLLM
) -> None:
    stt_fake.fail(400, path=AUDIO, message="bad audio")
    out = tmp_path / "text"
    report = vt.transcribe_dir(stt_fake.url, recordings, out, concurrency=1)
    assert report.failed == (("day2/numbers.wav", None, "bad audio"),) and report.documents_done == 1
    assert json.loads((out / "errors.jsonl").read_text())["document"] == "day2/numbers.wav"
    stt_fake.clear_requests()
    assert (
        cli.main(["transcribe-dir", str(recordings), "--out", str(out), "--url", stt_fake.url]) == cli.EXIT_OK
    )
    assert [r.files["file"].filename for r in stt_fake.received(AUDIO)] == ["numbers.wav"]
    assert (out / "day2/numbers.srt").exists() and not (out / "errors.jsonl").exists()


def test_transcribe_dir_cli_formats_and_translate(
    recordings: Path, tmp_path: Path, stt_fake: FakeVLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "text"
    argv = ["transcribe-dir", str(recordings), "--out", str(out), "--url", stt_fake.url]
    assert cli.main([*argv, "--format", "vtt", "--translate"]) == cli.EXIT_OK
    assert sorted(outputs(out)) == ["day2/numbers.vtt", "fox.vtt"]
    assert len(stt_fake.received("/v1/audio/translations")) == 2
    assert "2/2 file(s) done" in capsys.readouterr().err
    assert cli.main(argv) == cli.EXIT_JOB_REFUSED  # translate is in the fingerprint
    assert "option translate: True -> False" in capsys.readouterr().err
    assert cli.main([*argv, "--restart"]) == cli.EXIT_OK


def test_ocr_dir_cli_passes_its_options(
    scans: Path, tmp_path: Path, ocr_fake: FakeVLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ocr-dir", str(scans), "--out", str(tmp_path / "md"), "--url", ocr_fake.url]
    options = ["--max-tokens", "32", "--dpi", "72", "--prompt", "free", "--concurrency", "2", "--one-try"]
    assert cli.main([*argv, *options]) == 0
    assert {r.json["max_tokens"] for r in page_requests(ocr_fake)} == {32}
    assert "3/3 file(s) done, 4 page(s)" in capsys.readouterr().err
    assert cli.main(
        ["ocr-dir", str(tmp_path / "nothing"), "--out", str(tmp_path / "x"), "--url", ocr_fake.url]
    ) == (cli.EXIT_USAGE)
    assert "is not a folder" in capsys.readouterr().err


def test_ctrl_c_stops_promptly_and_the_job_resumes(scans: Path, tmp_path: Path) -> None:
    for index in range(8):
        shutil.copy(PAGE, scans / f"extra{index}.png")
    out = tmp_path / "md"
    argv = ["ocr-dir", str(scans), "--out", str(out), "--concurrency", "1"]
    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, latency=0.2) as fake:
        child = start_cli_for_ctrl_c([*argv, "--url", fake.url])
        records = out / ".vllm-tasks" / "records"
        deadline = time.monotonic() + 30
        while len(list(records.rglob("*.json"))) < 2:
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.02)
        child.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, err = child.communicate(timeout=10)
        assert child.returncode == cli.EXIT_INTERRUPTED and time.monotonic() - sent < 3
        assert "run the same command again to resume" in err
        saved = len(list(records.rglob("*.json")))
        fake.clear_requests()
        assert 2 <= saved < 12
        assert cli.main([*argv, "--url", fake.url]) == cli.EXIT_OK
        assert len(page_requests(fake)) == 12 - saved


def test_every_server_down_stops_the_job_with_its_own_error(
    scans: Path, tmp_path: Path, ocr_fake: FakeVLLM
) -> None:
    ocr_fake.fail(500, path=CHAT, after=1, times=None)  # the processor check passes, every page fails
    with vt.Client(ocr_fake.url, max_retries=0) as client, pytest.raises(vt.InternalServerError):
        vt.ocr_dir(client, scans, tmp_path / "md", **FAST)
    ocr_fake.clear_faults()
    assert vt.ocr_dir(ocr_fake.url, scans, tmp_path / "md").complete


def test_an_audio_file_that_does_not_decode_is_recorded(
    recordings: Path, tmp_path: Path, stt_fake: FakeVLLM
) -> None:
    (recordings / "broken.wav").write_bytes(b"RIFF not really a wav file at all")
    report = vt.transcribe_dir(stt_fake.url, recordings, tmp_path / "text")
    assert [document for document, _, _ in report.failed] == ["broken.wav"] and report.documents_done == 2
    assert sorted(outputs(tmp_path / "text"))[:3] == [
        "day2/numbers.json",
        "day2/numbers.srt",
        "day2/numbers.txt",
    ]


# --- the CLI killed -9 at random points, then resumed ----------------------------------------------------


def job_command(kind: str, source: Path, out: Path, url: str) -> list[str]:
    extra = ["--max-tokens", "64", "--one-try"] if kind == "ocr-dir" else ["--language", "en"]
    return [sys.executable, "-m", "vllm_tasks.cli", "--timeout", "600", kind, str(source), "--out", str(out),
            "--url", url, "--concurrency", "1", *extra]  # fmt: skip


def records(out: Path) -> dict[str, tuple[bytes, int]]:
    """The saved units (pages, files): bytes and mtime of each record."""
    folder = out / ".vllm-tasks" / "records"
    return {
        p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in folder.rglob("*.json")
    }


def resume_and_compare(
    kind: str, source: Path, server: FakeFixture, path: str, delay: float, tmp: Path, total: int, seed: str
) -> None:
    """An uninterrupted run, then a run killed twice at seeded points and resumed: the same outputs, and
    no finished unit redone. The killed runs' answers on ``path`` come ``delay`` seconds late, so that a
    kill lands mid-job."""
    url = server.base_url
    reference = tmp / "reference"
    uninterrupted = job_command(kind, source, reference, url)
    done = subprocess.run(
        uninterrupted, env=cli_env(), capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stderr
    server.fake.slow(delay, path=path, times=None)
    out = tmp / "resumed"
    argv = job_command(kind, source, out, url)
    seen: list[dict[str, tuple[bytes, int]]] = []
    for _ in kill_at_random_progress(argv, lambda: len(records(out)), total, random.Random(seed), kills=2):
        seen.append(records(out))
    assert any(0 < len(saved) < total for saved in seen), [len(s) for s in seen]  # a kill mid-job
    for earlier, later in itertools.pairwise(seen):
        assert all(later[name] == record for name, record in earlier.items())  # nothing redone
    last = seen[-1]
    finished = subprocess.run(argv, env=cli_env(), capture_output=True, text=True, timeout=900, check=False)
    assert finished.returncode == 0, finished.stderr
    said = "already complete; nothing to do" if len(last) == total else f"{len(last)} resumed"
    assert said in finished.stderr, finished.stderr
    after = records(out)
    assert all(after[name] == record for name, record in last.items())  # not one finished unit redone
    assert len(after) == total
    resumed, expected = outputs(out), outputs(reference)
    assert resumed.keys() == expected.keys()
    for name, data in expected.items():
        assert resumed[name] == data, name
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] and manifest["documents_done"] == manifest["documents"]


def scan_text(request: ReceivedRequest) -> str:
    """DeepSeek-OCR-style output that names the image it answers (a digest of the image sent), longer than
    64 tokens."""
    messages = request.json.get("messages", []) if isinstance(request.json, dict) else []
    parts = [part for m in messages if isinstance(m.get("content"), list) for part in m["content"]]
    urls = [part["image_url"]["url"] for part in parts if part.get("type") == "image_url"]
    digest = hashlib.sha256("".join(urls).encode()).hexdigest()[:12]
    return grounding_output(
        [("title", (40, 30, 960, 120), f"# Scan {digest}"), ("text", (40, 150, 960, 900), "word " * 100)]
    )


def test_ocr_dir_killed_and_resumed(tmp_path: Path) -> None:
    source = tmp_path / "scans"
    (source / "sub").mkdir(parents=True)
    shutil.copy(PAGE, source / "page.png")
    shutil.copy(REPORT, source / "sub" / "report.pdf")  # 2 pages
    for index in range(3):
        image = Image.new("RGB", (320, 240), "white")
        ImageDraw.Draw(image).text((20, 20), f"Page {index}: hello OCR", fill="black")
        image.save(source / "sub" / f"note{index}.png")
    with fake_like("ocr", ocr_output=scan_text) as ocr:
        # A page takes longer than the 0.43 s the seeded first kill waits past its target (page 5 of 6).
        resume_and_compare("ocr-dir", source, ocr, CHAT, 0.6, tmp_path, total=6, seed="ocr-dir")
    pages = [json.loads(line) for line in (tmp_path / "resumed" / "pages.jsonl").read_text().splitlines()]
    assert [(p["document"], p["page"]) for p in pages] == [
        ("page.png", 1),
        ("sub/note0.png", 1),
        ("sub/note1.png", 1),
        ("sub/note2.png", 1),
        ("sub/report.pdf", 1),
        ("sub/report.pdf", 2),
    ]
    assert all(p["usage"]["completion_tokens"] <= 64 for p in pages)
    scans = [p["markdown"].splitlines()[0] for p in pages]  # "# Scan <digest of the page's image>"
    assert all(scan.startswith("# Scan ") for scan in scans) and len(set(scans)) == 6  # each its own page


def heard(request: ReceivedRequest) -> str:
    """A transcript of two sentences that names the upload it answers (a file, or a chunk of a long one)."""
    upload = request.files["file"]
    return f" Heard {(upload.filename or '').replace('.', ' ')}, {len(upload.content)} bytes. Then silence."


def test_transcribe_dir_killed_and_resumed(tmp_path: Path) -> None:
    source = tmp_path / "calls"
    (source / "day2").mkdir(parents=True)
    for name in ("fox.wav", "numbers.wav", "french.wav"):
        shutil.copy(DATA / "tests/data/audio" / name, source / name)
        shutil.copy(DATA / "tests/data/audio" / name, source / "day2" / f"again-{name}")
    shutil.copy(DATA / "tests/data/audio/long45.wav", source / "day2" / "long45.wav")
    with fake_like("stt", transcript=heard) as stt:
        resume_and_compare(
            "transcribe-dir", source, stt, AUDIO, 0.3, tmp_path, total=7, seed="transcribe-dir"
        )
        chunks = sorted(
            {r.files["file"].filename or "" for r in stt.fake.received(AUDIO)}
            - {path.name for path in source.rglob("*.wav")}
        )
    out = tmp_path / "resumed"
    for path in source.rglob("*.wav"):
        if path.name != "long45.wav":
            text = (out / path.relative_to(source)).with_suffix(".txt").read_text()
            assert text.startswith(f"Heard {path.name.replace('.', ' ')}, {path.stat().st_size} bytes."), text
    srt = (out / "day2" / "long45.srt").read_text()
    assert len(chunks) >= 2 and all(chunk.startswith("long45") for chunk in chunks)  # sent in chunks
    found = [srt.index(chunk.replace(".", " ")) for chunk in chunks]
    assert found == sorted(found) and srt.count("-->") == 2 * len(chunks)  # every chunk's, in order
