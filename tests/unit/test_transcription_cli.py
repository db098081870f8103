"""`vllm-tasks transcribe FILE [--format] [--language] ...` with the server mocked from recorded answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytest_httpx import HTTPXMock

from vllm_tasks import cli

from .conftest import BASE
from .recorded import add_recorded, exchange, mock_server

AUDIO = Path(__file__).resolve().parent.parent / "data" / "audio"


def run(*args: str) -> int:
    return cli.main(["transcribe", *args, "--url", BASE])


def test_text(httpx_mock: HTTPXMock, capsys: pytest.CaptureFixture[str]) -> None:
    mock_server(httpx_mock, "stt")
    add_recorded(httpx_mock, "stt", "transcription_json")
    assert run(str(AUDIO / "fox.wav"), "--language", "en") == 0
    assert capsys.readouterr().out == "The quick brown fox jump over the lazy dog.\n"


def test_srt_to_file(httpx_mock: HTTPXMock, tmp_path: Path) -> None:
    mock_server(httpx_mock, "stt")
    add_recorded(httpx_mock, "stt", "transcription_verbose_json")
    out = tmp_path / "numbers.srt"
    assert run(str(AUDIO / "numbers.wav"), "--format", "srt", "--out", str(out)) == 0
    assert out.read_text().startswith("1\n00:00:00,000 --> 00:00:06,160\n1, 2, 3, 4, 5.")


def test_json(httpx_mock: HTTPXMock, capsys: pytest.CaptureFixture[str]) -> None:
    mock_server(httpx_mock, "stt")
    add_recorded(httpx_mock, "stt", "translation_json")
    assert run(str(AUDIO / "french.wav"), "--translate", "--format", "json") == 0
    assert json.loads(capsys.readouterr().out)["task"] == "translate"


def test_stream(httpx_mock: HTTPXMock, capsys: pytest.CaptureFixture[str]) -> None:
    mock_server(httpx_mock, "stt")
    response = exchange("stt", "transcription_stream")["response"]
    httpx_mock.add_response(
        url=f"{BASE}/v1/audio/transcriptions",
        headers={"content-type": "text/event-stream"},
        content=response["body_text"].encode(),
    )
    assert run(str(AUDIO / "fox.wav"), "--stream") == 0
    assert capsys.readouterr().out == "The quick brown fox jump over the lazy dog.\n"


def test_usage_errors(httpx_mock: HTTPXMock, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run(str(tmp_path / "missing.wav")) == cli.EXIT_USAGE
    assert "missing.wav" in capsys.readouterr().err
    assert run(str(AUDIO / "fox.wav"), "--stream", "--format", "srt") == cli.EXIT_USAGE
    mock_server(httpx_mock, "stt")
    add_recorded(httpx_mock, "stt", "error_unsupported_language")
    assert run(str(AUDIO / "fox.wav"), "--language", "xx") == cli.EXIT_SERVER_ERROR
    assert "Unsupported language" in capsys.readouterr().err
