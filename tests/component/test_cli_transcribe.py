"""`vllm-tasks transcribe` as a user runs it (``python -m vllm_tasks.cli`` in its own process) against a
FakeVLLM configured like the `stt` fixture: text, SRT and JSON on stdout, a long file's VTT (chunked
client-side) to a file, and exit code 64 for a missing file. (tests/unit/test_transcription_cli.py runs
`cli.main` in-process on the recorded answers.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

AUDIO = Path(__file__).resolve().parents[1] / "data" / "audio"
FOX, NUMBERS, LONG = (AUDIO / n for n in ("fox.wav", "numbers.wav", "long45.wav"))


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vllm_tasks.cli", "--timeout", "300", "transcribe", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_cli_transcribe(fake_stt: Any, tmp_path: Path) -> None:
    url = ["--url", fake_stt.base_url]
    text = cli(str(FOX), *url, "--language", "en")
    assert text.returncode == 0 and "fox" in text.stdout.lower()
    srt = cli(str(NUMBERS), *url, "--format", "srt", "--language", "en")
    assert srt.returncode == 0 and srt.stdout.startswith("1\n00:00:00,000 --> ")
    out = tmp_path / "long.vtt"
    vtt = cli(str(LONG), *url, "--format", "vtt", "--out", str(out))
    assert vtt.returncode == 0 and out.read_text().startswith("WEBVTT") and out.read_text().count("-->") >= 3
    as_json = cli(str(FOX), *url, "--format", "json", "--language", "en")
    assert json.loads(as_json.stdout)["text"].lower().startswith("the quick")
    missing = cli(str(tmp_path / "missing.wav"), *url)
    assert missing.returncode == 64 and "missing.wav" in missing.stderr
