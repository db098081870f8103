"""docs/contributing.md, "Add a speech model": the files it names exist, every speech preset has its row in
docs/speech-to-text.md, and every fixture of a speech model family has a contract module that uses it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from vllm_tasks import transcription
from vllm_tasks.types.server import ModelCard, ServerInfo

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "server-fixtures"))

from fixture_table import FIXTURES  # noqa: E402


def section(path: Path, heading: str) -> str:
    text = path.read_text()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


WALKTHROUGH = section(ROOT / "docs" / "contributing.md", "## Add a speech model: a walk-through")
PRESET_TABLE = section(ROOT / "docs" / "speech-to-text.md", "## Models: one preset per family")


def test_every_file_the_walkthrough_names_exists() -> None:
    rows = [line for line in WALKTHROUGH.splitlines() if line.startswith("| `")]
    named = [path for row in rows for path in re.findall(r"`([\w./-]+\.(?:py|md))`", row.split("|")[1])]
    assert len(named) >= 10
    missing = [path for path in named if not (ROOT / path).is_file()]
    assert missing == []


@pytest.mark.parametrize("preset", transcription.PRESETS, ids=lambda p: p.name)
def test_every_preset_has_its_row_in_the_guide(preset: transcription.SpeechPreset) -> None:
    assert f"\n| `{preset.name}` |" in PRESET_TABLE


def speech_fixtures() -> dict[str, str]:
    """Fixture name -> the preset its served model is recognised as (speech families only)."""
    found = {}
    for name, fixture in FIXTURES.items():
        card = ModelCard(id=fixture.served_model_name)
        info = ServerInfo(base_url="http://h", version=None, models=(card,), routes=None)
        preset = transcription.speech_preset(info, None)
        if preset is not transcription.GENERIC:
            found[name] = preset.name
    return found


def test_every_speech_fixture_has_a_contract_module() -> None:
    fixtures = speech_fixtures()
    assert {"stt", "voxtral", "qwen3-asr"} <= set(fixtures)
    modules = [path.read_text() for path in (ROOT / "tests" / "contract").glob("test_*.py")]
    unused = [name for name in fixtures if not any(f"vllm_{name.replace('-', '_')}" in m for m in modules)]
    assert unused == []
