"""`vllm-tasks ocr FILE [--pages] [--out] [--boxes]` with the server mocked from recorded answers."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from PIL import Image
from pytest_httpx import HTTPXMock

from vllm_tasks import cli

from .conftest import BASE
from .test_ocr import CHAT, add, chat_answer, make_pdf, mock_discovery

PAGE = (
    "<|ref|>title<|/ref|><|det|>[[100, 100, 899, 300]]<|/det|>\n# Title\n\n"
    "<|ref|>text<|/ref|><|det|>[[100, 400, 899, 800]]<|/det|>\nBody.\n"
)


def png(path: Path, size: tuple[int, int] = (200, 100)) -> Path:
    Image.new("RGB", size, "white").save(path)
    return path


def server(httpx_mock: HTTPXMock, finish_reason: str = "stop") -> None:
    mock_discovery(httpx_mock)
    add(httpx_mock, "ocr", "chat_ngram_check_400")
    httpx_mock.add_response(url=CHAT, json=chat_answer(PAGE, finish_reason), is_reusable=True)


def test_image_markdown_to_stdout_and_boxes(
    httpx_mock: HTTPXMock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server(httpx_mock)
    boxes = tmp_path / "boxes.png"
    code = cli.main(["ocr", str(png(tmp_path / "p.png")), "--url", BASE, "--boxes", str(boxes)])
    assert code == cli.EXIT_OK
    assert capsys.readouterr().out == "# Title\n\nBody.\n"
    drawn = Image.open(boxes)
    assert drawn.size == (200, 100)
    assert drawn.convert("RGB").getpixel((20, 10)) != (255, 255, 255)  # the title box outline


def test_pdf_pages_out_file_and_truncation_note(
    httpx_mock: HTTPXMock, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server(httpx_mock, finish_reason="length")
    pdf = make_pdf(tmp_path / "doc.pdf", 3)
    out = tmp_path / "doc.md"
    args = [
        "ocr",
        str(pdf),
        "--url",
        BASE,
        "--pages",
        "2-3",
        "--out",
        str(out),
        "--boxes",
        str(tmp_path / "b.png"),
        "--one-try",  # a truncated page is kept as it is, with the note
    ]
    assert cli.main(args) == cli.EXIT_OK
    assert out.read_text() == "# Title\n\nBody.\n\n---\n\n# Title\n\nBody.\n"
    assert (tmp_path / "b-p2.png").exists() and (tmp_path / "b-p3.png").exists()
    assert "page(s) 2, 3" in capsys.readouterr().err
    requests = [
        json.loads(r.content) for r in httpx_mock.get_requests() if r.url.path == "/v1/chat/completions"
    ]
    assert len(requests) == 3  # processor check + 2 pages
    assert requests[1]["max_tokens"] == 4096


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["ocr", str(tmp_path / "missing.png"), "--url", BASE]) == cli.EXIT_USAGE
    assert "missing.png': cannot be read" in capsys.readouterr().err
    assert cli.main(["ocr", str(png(tmp_path / "p.png")), "--url", BASE, "--pages", "1"]) == cli.EXIT_USAGE
    garbage = tmp_path / "g.png"
    garbage.write_bytes(b"not an image at all")
    assert cli.main(["ocr", str(garbage), "--url", BASE]) == cli.EXIT_USAGE
    assert "not a decodable image" in capsys.readouterr().err


def test_unreachable_server(httpx_mock: HTTPXMock, tmp_path: Path) -> None:
    httpx_mock.add_exception(httpx.ConnectError("refused"), is_reusable=True)
    code = cli.main(["--timeout", "1", "ocr", str(png(tmp_path / "p.png")), "--url", BASE])
    assert code == cli.EXIT_UNREACHABLE
