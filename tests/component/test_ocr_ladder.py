"""The page-quality ladder through FakeVLLM: ``ocr_pdf``, ``ocr_dir`` (resumed, killed) and Ray's ``OCR``.

The fake answers each page by its image (the test PDFs' pages differ in width) and by the request's
temperature: a page scripted "bad below T" writes past ``max_tokens`` (``finish_reason == "length"``)
until it is sent at a temperature of at least T.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import vllm_tasks as vt
from vllm_tasks.ocr import OCRDocumentFailed, PageQuality
from vllm_tasks.ocr.formats import FORMATS, OutputFormat, PageSizes, ParsedAnswer
from vllm_tasks.ocr.presets import GENERIC, OCRPreset
from vllm_tasks.testing import OCR_TASKS, FakeVLLM, ReceivedRequest, grounding_output

from ..clients import cli_env, kill_at_random_progress
from ..pdfs import text_pdf

CHAT = "/v1/chat/completions"
TEXTS = ["First page text", "Second page text", "Third page text", "Fourth page text"]
NEVER = 9.0
"""A temperature no try reaches: the page is bad every time."""


def image_of(request: ReceivedRequest) -> Image.Image:
    parts = [p for m in request.json["messages"] for p in m["content"] if isinstance(p, dict)]
    url = next(p["image_url"]["url"] for p in parts if p.get("type") == "image_url")
    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))


def width_of(request: ReceivedRequest) -> int:
    return int(image_of(request).width)


def page_number(request: ReceivedRequest) -> int:
    """The page a request carries: page ``n`` of :func:`document` is ``190 + 10 n`` pixels wide."""
    return (width_of(request) - 190) // 10


def document(pages: int = 3) -> bytes:
    return text_pdf(TEXTS[:pages], [(190 + 10 * n, 100) for n in range(1, pages + 1)])


class Script:
    """The fake model's answers: page ``n`` is bad (too long) below temperature ``bad[n]``."""

    def __init__(self, bad: dict[int, float] | None = None) -> None:
        self.bad = dict(bad or {})

    def __call__(self, request: ReceivedRequest) -> str:
        page = page_number(request)
        if request.json.get("temperature", 0.0) < self.bad.get(page, 0.0):
            return grounding_output([("text", (0, 0, 999, 999), "loop " * 100)])
        return grounding_output([("title", (0, 0, 999, 500), f"# Page {page}")])


def page_requests(fake: FakeVLLM, page: int | None = None) -> list[ReceivedRequest]:
    sent = [r for r in fake.received(CHAT) if "image_url" in json.dumps(r.json)]
    return [r for r in sent if page is None or page_number(r) == page]


def temperatures(fake: FakeVLLM, page: int) -> list[float | None]:
    return [r.json.get("temperature") for r in page_requests(fake, page)]


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def fake(script: Script) -> Iterator[FakeVLLM]:
    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, ocr_output=script) as server:
        yield server


def test_a_truncated_page_is_tried_at_rising_temperatures_until_kept(fake: FakeVLLM, script: Script) -> None:
    script.bad = {2: 0.3}
    with vt.Client(fake.url) as client:
        doc = client.ocr_pdf(document(), dpi=72, max_tokens=64)
    assert temperatures(fake, 2) == [0.0, 0.1, 0.2, 0.3]  # the recipe's own, then olmOCR's
    assert temperatures(fake, 1) == temperatures(fake, 3) == [0.0]
    assert [(p.page, p.tries, p.failure) for p in doc.pages] == [(1, 1, None), (2, 4, None), (3, 1, None)]
    assert doc.markdown == "# Page 1\n\n---\n\n# Page 2\n\n---\n\n# Page 3"
    assert doc.failed_pages == [] and doc.truncated_pages == []
    kept, cut = doc.pages[0].result.usage.completion_tokens or 0, 64  # a kept answer's tokens; max_tokens
    assert (
        doc.pages[1].tries_usage is not None and doc.pages[1].tries_usage.completion_tokens == 3 * cut + kept
    )
    assert doc.usage.completion_tokens == 3 * kept + 3 * cut  # every try is counted


def test_without_the_ladder_the_truncated_page_is_kept(fake: FakeVLLM, script: Script) -> None:
    script.bad = {2: 0.3}
    with vt.Client(fake.url) as client, pytest.warns(vt.ocr.OCRTruncatedWarning):
        doc = client.ocr_pdf(document(), dpi=72, max_tokens=64, quality=None)
    assert temperatures(fake, 2) == [0.0] and doc.truncated_pages == [2] and doc.failed_pages == []


def test_a_page_bad_every_time_fails_the_document(fake: FakeVLLM, script: Script) -> None:
    script.bad = {2: NEVER}
    with vt.Client(fake.url) as client, pytest.raises(OCRDocumentFailed) as caught:
        client.ocr_pdf(document(), dpi=72, max_tokens=64)
    assert temperatures(fake, 2) == [0.0, 0.1, 0.2, 0.3, 0.5, 0.8, 0.9, 1.0]
    error = caught.value
    assert error.failed_pages == [(2, "truncated")] and error.pages == 3
    assert "1 of 3 page(s) failed every try (page 2: truncated), over max_page_error_rate=0.004" in str(error)
    failed = error.document.pages[1]
    assert (failed.tries, failed.failure, failed.fallback) == (8, "truncated", True)
    assert failed.result.markdown == "Second page text"  # the PDF's own text for that page


def test_a_document_under_the_rate_keeps_its_failed_page_as_the_text_layer(
    fake: FakeVLLM, script: Script
) -> None:
    script.bad = {2: NEVER}
    with vt.Client(fake.url) as client:
        quality = PageQuality(max_page_error_rate=0.5, retry_temperatures=(0.5,))
        doc = client.ocr_pdf(io.BytesIO(document()), dpi=72, max_tokens=64, quality=quality)  # read once
        bare = client.ocr_pdf(
            document(),
            dpi=72,
            max_tokens=64,
            quality=PageQuality(max_page_error_rate=0.5, text_layer_fallback=False),
        )
    assert (
        doc.failed_pages == [2] and doc.markdown == "# Page 1\n\n---\n\nSecond page text\n\n---\n\n# Page 3"
    )
    assert [p.failure for p in bare.pages] == [None, "truncated", None] and bare.pages[
        1
    ].result.markdown == ""


def test_a_prompt_over_the_context_fails_its_page_without_retries(fake: FakeVLLM) -> None:
    with vt.Client(fake.url, max_retries=0) as client:
        client.check_ngram_processor()
        fake.fail(400, path=CHAT, times=1, message="This model's maximum context length is 64 tokens. "
                  "However, your prompt contains 300 input tokens, which exceeds this limit.")  # fmt: skip
        doc = client.ocr_pdf(document(1), dpi=72, quality=PageQuality(max_page_error_rate=1.0))
        assert len(page_requests(fake)) == 1
        assert (doc.pages[0].failure, doc.pages[0].tries, doc.markdown) == (
            "context_length",
            1,
            "First page text",
        )
        fake.fail(400, path=CHAT, times=1, message="This model's maximum context length is 64 tokens.")
        with pytest.raises(OCRDocumentFailed, match="page 1: context_length"):
            client.ocr_pdf(document(1), dpi=72)
        fake.fail(400, path=CHAT, times=1, message="temperature must be non-negative")
        with pytest.raises(vt.BadRequestError, match="temperature"):  # the call's error, not the page's
            client.ocr_pdf(document(1), dpi=72)


def front_matter_preset(monkeypatch: pytest.MonkeyPatch) -> OCRPreset:
    """A preset whose format works as olmOCR's front matter does, in miniature: ``TURN`` asks for a 90
    degree rotation (its metadata), ``BROKEN`` is refused by its check."""

    def parse(text: str, sizes: PageSizes) -> ParsedAnswer:
        turn = text.startswith("TURN")
        return ParsedAnswer(text, metadata={"is_rotation_valid": not turn, "rotation_correction": 90 * turn})

    def check(text: str) -> str | None:
        return "no front matter" if text.startswith("BROKEN") else None

    monkeypatch.setitem(FORMATS, "test-front-matter", OutputFormat("test-front-matter", parse, check))
    return dataclasses.replace(GENERIC, name="test-front-matter", output="test-front-matter")


def test_a_page_the_model_says_is_turned_is_sent_again_rotated(monkeypatch: pytest.MonkeyPatch) -> None:
    preset = front_matter_preset(monkeypatch)

    def answer(request: ReceivedRequest) -> str:
        image = image_of(request)
        return "TURN" if image.height > image.width else "# Upright"

    with FakeVLLM(model="m", tasks=OCR_TASKS, ocr_preset=preset, ocr_output=answer) as fake:
        with vt.Client(fake.url) as client:
            doc = client.ocr_pdf(text_pdf(["Sideways"], [(100, 200)]), dpi=72, preset=preset)
        sent = page_requests(fake)
    assert [image_of(r).size for r in sent] == [(100, 200), (200, 100)]  # turned 90 degrees
    assert [r.json.get("temperature") for r in sent] == [preset.sampling.get("temperature"), 0.1]
    page = doc.pages[0]
    assert (page.rotation, page.tries, page.result.image_size) == (90, 2, (200, 100))
    assert page.result.markdown == "# Upright"
    first, turned = (image_of(r).convert("RGB") for r in sent)
    assert turned.tobytes() == first.transpose(Image.Transpose.ROTATE_90).tobytes()


def test_an_answer_the_format_refuses_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    preset = front_matter_preset(monkeypatch)
    bad_below = {1: 0.2, 2: NEVER}

    def answer(request: ReceivedRequest) -> str:
        low = (request.json.get("temperature") or 0.0) < bad_below[page_number(request)]
        return "BROKEN" if low else f"# Page {page_number(request)}"

    quality = PageQuality(max_page_error_rate=0.5)
    with FakeVLLM(model="m", tasks=OCR_TASKS, ocr_preset=preset, ocr_output=answer) as fake:
        with vt.Client(fake.url) as client:
            doc = client.ocr_pdf(document(2), dpi=72, preset=preset, quality=quality)
        assert temperatures(fake, 1)[1:] == [0.1, 0.2] and len(temperatures(fake, 2)) == 8
    assert [(p.tries, p.failure) for p in doc.pages] == [(3, None), (8, "invalid")]
    assert doc.markdown == "# Page 1\n\n---\n\nSecond page text"


# --- ocr_dir -------------------------------------------------------------------------------------------


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    source = tmp_path / "scans"
    source.mkdir()
    (source / "doc.pdf").write_bytes(document(3))
    Image.new("RGB", (190 + 10 * 4, 80), "white").save(source / "photo.png")  # "page 4" to the fake
    return source


def errors_of(out: Path) -> list[tuple[str, int | None, str]]:
    lines = (out / "errors.jsonl").read_text().splitlines()
    return [(e["document"], e["page"], e["error"]) for e in map(json.loads, lines)]


def test_ocr_dir_does_not_write_a_failed_document_and_retries_its_page_next_run(
    fake: FakeVLLM, script: Script, folder: Path, tmp_path: Path
) -> None:
    out = tmp_path / "md"
    script.bad = {2: NEVER}
    params = vt.OCRParams(max_tokens=64)
    report = vt.ocr_dir(fake.url, folder, out, params=params, dpi=72)
    assert not report.complete and report.documents_done == 1 and report.units_sent == 4
    assert sorted(p.name for p in out.iterdir()) == [
        ".vllm-tasks",
        "errors.jsonl",
        "manifest.json",
        "pages.jsonl",
        "photo.md",
    ]
    assert errors_of(out) == [
        (
            "doc.pdf",
            None,
            "1 of 3 page(s) failed every try (page 2: truncated), over max_page_error_rate=0.004",
        ),
        ("doc.pdf", 2, "failed every try: truncated"),
    ]
    assert len(page_requests(fake, 2)) == 8
    assert not json.loads((out / "manifest.json").read_text())["complete"]

    script.bad = {}  # the model does better now
    fake.clear_requests()
    again = vt.ocr_dir(fake.url, folder, out, params=params, dpi=72)
    assert [page_number(r) for r in page_requests(fake)] == [2]  # only the failed page is sent again
    assert again.complete and again.units_resumed == 3 and again.units_sent == 1
    assert (out / "doc.md").read_text() == "# Page 1\n\n---\n\n# Page 2\n\n---\n\n# Page 3\n"
    assert not (out / "errors.jsonl").exists()


def test_ocr_dir_writes_a_document_under_the_rate_with_its_fallback_page(
    fake: FakeVLLM, script: Script, folder: Path, tmp_path: Path
) -> None:
    out = tmp_path / "md"
    script.bad = {2: NEVER}
    quality = PageQuality(max_page_error_rate=0.5)
    report = vt.ocr_dir(fake.url, folder, out, params=vt.OCRParams(max_tokens=64), quality=quality, dpi=72)
    assert report.documents_done == 2 and report.failed == (("doc.pdf", 2, "failed every try: truncated"),)
    assert (out / "doc.md").read_text() == "# Page 1\n\n---\n\nSecond page text\n\n---\n\n# Page 3\n"
    pages = {
        (p["document"], p["page"]): p for p in map(json.loads, (out / "pages.jsonl").read_text().splitlines())
    }
    failed = pages["doc.pdf", 2]
    assert (failed["failure"], failed["fallback"], failed["tries"], failed["markdown"]) == (
        "truncated", True, 8, "Second page text"
    )  # fmt: skip
    assert (pages["doc.pdf", 1]["failure"], pages["doc.pdf", 1]["tries"]) == (None, 1)


def test_ocr_dir_with_the_ladder_resumes_after_kill_9(tmp_path: Path) -> None:
    """Every page needs two tries (too long at the recipe's temperature 0, fine at 0.1); kill -9 mid-job
    twice, then finish: no saved page is redone, and the outputs equal an uninterrupted run's."""
    source = tmp_path / "scans"
    source.mkdir()
    (source / "doc.pdf").write_bytes(document(4))
    script = Script(dict.fromkeys(range(1, 5), 0.1))
    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, ocr_output=script) as fake:

        def argv(out: Path) -> list[str]:
            options = ["--concurrency", "1", "--max-tokens", "64", "--dpi", "72"]
            command = ["ocr-dir", str(source), "--out", str(out), "--url", fake.url, *options]
            return [sys.executable, "-m", "vllm_tasks.cli", "--timeout", "600", *command]

        reference = subprocess.run(
            argv(tmp_path / "reference"), env=cli_env(), capture_output=True, check=False
        )
        assert reference.returncode == 0, reference.stderr
        fake.slow(0.25, path=CHAT, times=None)  # the killed runs: a kill lands mid-job
        out = tmp_path / "resumed"
        seen = []
        for _ in kill_at_random_progress(argv(out), lambda: len(saved(out)), 4, random.Random(7), 2):
            seen.append(saved(out))
        assert any(0 < len(s) < 4 for s in seen)
        finished = subprocess.run(argv(out), env=cli_env(), capture_output=True, text=True, check=False)
        assert finished.returncode == 0, finished.stderr
    after = saved(out)
    assert all(after[name] == record for name, record in seen[-1].items())  # not one saved page redone
    assert (out / "doc.md").read_bytes() == (tmp_path / "reference" / "doc.md").read_bytes()
    pages = [json.loads(line) for line in (out / "pages.jsonl").read_text().splitlines()]
    assert [(p["page"], p["tries"], p["failure"]) for p in pages] == [(n, 2, None) for n in range(1, 5)]


def saved(out: Path) -> dict[str, bytes]:
    folder = out / ".vllm-tasks" / "records"
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*.json")}


# --- Ray's OCR -----------------------------------------------------------------------------------------


def ray_ocr(fake: FakeVLLM, **options: Any) -> Callable[[list[Any]], dict[str, Any]]:
    import numpy as np

    from vllm_tasks.integrations.ray import OCR

    ocr = OCR(settings=vt.ClientSettings(fake.url), params={"max_tokens": 64}, on_error="column",
              error_column="error", **options)  # fmt: skip
    return lambda cells: ocr({"image": np.array(cells, dtype=object)})


def png(width: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, 80), "white").save(buffer, format="PNG")
    return buffer.getvalue()


def test_ray_ocr_rows_go_through_the_ladder(fake: FakeVLLM, script: Script) -> None:
    script.bad = {1: 0.2, 2: NEVER}
    out = ray_ocr(fake)([png(200), png(210), document(1)])
    assert list(out["markdown"][:1]) == ["# Page 1"] and temperatures(fake, 1)[:3] == [0.0, 0.1, 0.2]
    assert out["error"][0] == out["error"][2] == ""
    assert out["markdown"][2] == "# Page 21"  # the PDF row's page, rendered at 144 dpi: 400 px wide
    assert "1 of 1 page(s) failed every try (page 1: truncated)" in out["error"][1]
    lenient = ray_ocr(fake, quality={"max_page_error_rate": 1.0})([png(210)])
    assert lenient["error"][0] == "" and lenient["markdown"][0] == ""


# --- the CLI ---------------------------------------------------------------------------------------------


def test_the_ocr_command_fails_a_document_over_the_rate(
    fake: FakeVLLM, script: Script, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from vllm_tasks import cli

    script.bad = {2: NEVER}
    path = tmp_path / "doc.pdf"
    path.write_bytes(document(2))
    argv = ["ocr", str(path), "--url", fake.url, "--max-tokens", "64", "--dpi", "72"]
    assert cli.main(argv) == cli.EXIT_SERVER_ERROR
    assert "1 of 2 page(s) failed every try (page 2: truncated)" in capsys.readouterr().err
    assert cli.main([*argv, "--max-page-error-rate", "0.5"]) == cli.EXIT_OK
    assert capsys.readouterr().out == "# Page 1\n\n---\n\nSecond page text\n"
    fake.clear_requests()
    assert cli.main([*argv, "--one-try"]) == cli.EXIT_OK
    assert len(page_requests(fake)) == 2 and "hit --max-tokens on page(s) 2" in capsys.readouterr().err
