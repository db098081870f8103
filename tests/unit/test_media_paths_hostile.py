"""Media paths that are not media files, given to the audio reader, the notebook's audio player, the PDF
opener, ``embed_file`` and the command line: a FIFO, ``/dev/zero``, a folder, a NUL byte, a name over
``NAME_MAX``, a (sparse) file over the cap. Each is refused with an ``InvalidInputError`` naming the path
(the command line: its usage exit code and one line), within a stated time, never read."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import vllm_tasks as vt
from vllm_tasks import audio, cli, defaults, media_files
from vllm_tasks.pdf import open_pdf
from vllm_tasks.types.audio import audio_player

from ..hostile.inputs import release
from ..hostile.run import bounded

SECONDS = 5.0
"""The most a refusal may take (each takes milliseconds; a FIFO read would wait forever)."""

UNREACHABLE = "http://127.0.0.1:9"
"""No server: every refusal comes before any request."""


def refused(call: Callable[[], Any], tmp: Path) -> vt.InvalidInputError:
    outcome = bounded(call, SECONDS)
    release(tmp)  # a call stuck on a FIFO ends, and its thread with it
    assert not outcome.hung, f"no answer within {SECONDS} s"
    assert isinstance(outcome.error, vt.InvalidInputError), outcome.trace or outcome.value
    return outcome.error


def fifo(tmp: Path) -> str:
    os.mkfifo(tmp / "pipe.wav")
    return str(tmp / "pipe.wav")


def folder(tmp: Path) -> str:
    (tmp / "folder.wav").mkdir()
    return str(tmp / "folder.wav")


def over_cap(tmp: Path) -> str:
    path = tmp / "huge.wav"
    path.write_bytes(b"RIFF")
    os.truncate(path, defaults.AUDIO_MAX_FILE_BYTES + 1)  # sparse: no disk used, nothing may read it
    return str(path)


PATHS: dict[str, Callable[[Path], str]] = {
    "fifo": fifo,
    "dev-zero": lambda tmp: "/dev/zero",
    "folder": folder,
    "nul-byte": lambda tmp: str(tmp / "a\0b.wav"),
    "over-name-max": lambda tmp: str(tmp / ("n" * 300 + ".wav")),
}
PROBLEMS = {
    "fifo": "is a FIFO (named pipe), not a regular file",
    "dev-zero": "is a device, not a regular file",
    "folder": "is a folder, not a regular file",
    "nul-byte": "cannot be read (embedded null byte)",
    "over-name-max": "cannot be read (File name too long)",
}


@pytest.mark.parametrize("case", [*PATHS, "over-cap"])
def test_audio_paths_are_refused_naming_the_path(case: str, tmp_path: Path) -> None:
    path = {**PATHS, "over-cap": over_cap}[case](tmp_path)
    error = refused(lambda: audio.resolve(path), tmp_path)
    assert error.field == "audio" and error.value == path
    if case == "over-cap":
        assert error.kind == "argument" and "defaults.AUDIO_MAX_FILE_BYTES" in str(error)
    else:
        assert error.kind == "audio_decode" and error.source == path and PROBLEMS[case] in str(error)


def test_an_audio_file_swapped_for_a_fifo_after_it_was_checked_is_not_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "a.wav"
    path.write_bytes(b"RIFF....WAVE")
    source = audio.resolve(path)
    path.unlink()
    os.mkfifo(path)
    error = refused(source.read_bytes, tmp_path)
    assert error.kind == "audio_decode" and PROBLEMS["fifo"] in str(error)


@pytest.mark.parametrize("case", PATHS)
def test_the_audio_player_refuses_them_naming_the_path(case: str, tmp_path: Path) -> None:
    path = PATHS[case](tmp_path)
    error = refused(lambda: audio_player(path), tmp_path)
    assert error.field == "audio" and error.value == path and PROBLEMS[case] in str(error)


def test_the_audio_player_refuses_a_file_over_its_cap_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.wav"
    path.write_bytes(b"RIFF")
    os.truncate(path, defaults.VIEW_MAX_MEDIA_BYTES + 1)
    error = refused(lambda: audio_player(path), tmp_path)
    assert f"over max_bytes={defaults.VIEW_MAX_MEDIA_BYTES:,}" in str(error)


@pytest.mark.parametrize("case", PATHS)
def test_a_pdf_path_is_checked_before_pdfium_opens_it(case: str, tmp_path: Path) -> None:
    path = PATHS[case](tmp_path)
    error = refused(lambda: open_pdf(path), tmp_path)
    assert error.field == "pdf" and error.value == path and PROBLEMS[case] in str(error)


@pytest.mark.parametrize("case", PATHS)
def test_embed_file_refuses_its_input_naming_it(case: str, tmp_path: Path) -> None:
    path = PATHS[case](tmp_path)
    error = refused(lambda: vt.embed_file(UNREACHABLE, path, tmp_path / "o.npy"), tmp_path)
    assert error.field == "source" and error.value == path and PROBLEMS[case] in str(error)


def test_the_helper_reads_a_regular_file_within_its_cap(tmp_path: Path) -> None:
    path = tmp_path / "a.bin"
    path.write_bytes(b"abc")
    assert media_files.read_regular_file(path, "f", max_bytes=3) == b"abc"
    error = refused(lambda: media_files.read_regular_file(path, "f", max_bytes=2), tmp_path)
    assert error.kind == "argument" and "cap of 2 bytes" in str(error)


COMMANDS: dict[str, Callable[[str, Path], list[str]]] = {
    "ocr": lambda path, tmp: ["ocr", "--url", UNREACHABLE, path],
    "embed": lambda path, tmp: ["embed", "--url", UNREACHABLE, "--file", path],
    "rerank": lambda path, tmp: ["rerank", "--url", UNREACHABLE, "--file", path, "q"],
    "ocr-dir": lambda path, tmp: ["ocr-dir", "--url", UNREACHABLE, path, "--out", str(tmp / "out")],
    "transcribe-dir": lambda path, tmp: [
        "transcribe-dir",
        "--url",
        UNREACHABLE,
        path,
        "--out",
        str(tmp / "o"),
    ],
}


@pytest.mark.parametrize(
    ("command", "case"),
    [("ocr", "fifo"), ("ocr", "over-name-max"), *((command, "nul-byte") for command in COMMANDS)],
)
def test_the_cli_answers_a_bad_path_with_its_usage_code_and_one_line(
    command: str, case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = PATHS[case](tmp_path)
    outcome = bounded(lambda: cli.main(COMMANDS[command](path, tmp_path)), SECONDS)
    release(tmp_path)
    assert not outcome.hung and outcome.error is None, outcome.trace
    assert outcome.value == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("vllm-tasks: ") and "Traceback" not in err
