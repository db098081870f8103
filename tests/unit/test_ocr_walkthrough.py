"""docs/contributing.md, "Add an OCR model": the files it names exist, every OCR preset names a format and
has its row in docs/ocr.md, every format is tested, and every fixture of an OCR model has a contract
module that uses it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from vllm_tasks.ocr.formats import FORMATS
from vllm_tasks.ocr.presets import PRESETS, OCRPreset, recognised
from vllm_tasks.types.server import ModelCard, ServerInfo

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "server-fixtures"))

from fixture_table import FIXTURES  # noqa: E402


def section(path: Path, heading: str) -> str:
    text = path.read_text()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


WALKTHROUGH = section(ROOT / "docs" / "contributing.md", "## Add an OCR model: a walk-through")
PRESET_TABLE = section(ROOT / "docs" / "ocr.md", "## Models: one preset per model")


def test_every_file_the_walkthrough_names_exists() -> None:
    rows = [line for line in WALKTHROUGH.splitlines() if line.startswith("| `")]
    named = [path for row in rows for path in re.findall(r"`([\w./-]+\.(?:py|md))`", row.split("|")[1])]
    assert len(named) >= 10
    missing = [path for path in named if not (ROOT / path).is_file()]
    assert missing == []


@pytest.mark.parametrize("preset", PRESETS.values(), ids=lambda p: p.name)
def test_every_preset_has_its_row_and_a_known_format(preset: OCRPreset) -> None:
    assert PRESETS[preset.name] is preset  # the key is the preset's name
    assert preset.output in FORMATS
    assert f"\n| `{preset.name}` |" in PRESET_TABLE


@pytest.mark.parametrize("name", FORMATS)
def test_every_format_is_tested(name: str) -> None:
    assert FORMATS[name].name == name
    tests = [path.read_text() for path in (ROOT / "tests" / "unit").glob("test_ocr*.py")]
    assert any(f'"{name}"' in text for text in tests)


def ocr_fixtures() -> dict[str, str]:
    """Fixture name -> the preset its served model is recognised as."""
    found = {}
    for name, fixture in FIXTURES.items():
        card = ModelCard(id=fixture.served_model_name, root=fixture.model_dir)
        preset = recognised(ServerInfo(base_url="http://h", version=None, models=(card,), routes=None), None)
        if preset is not None:
            found[name] = preset.name
    return found


def test_every_ocr_fixture_has_a_contract_module() -> None:
    fixtures = ocr_fixtures()
    assert {"ocr", "ocr-no-processor"} <= set(fixtures)
    sources = [*(ROOT / "tests" / "contract").glob("test_*.py"), ROOT / "tests" / "conftest.py"]
    modules = [path.read_text() for path in sources]
    unused = [name for name in fixtures if not any(f"vllm_{name.replace('-', '_')}" in m for m in modules)]
    assert unused == []
