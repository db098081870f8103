"""scripts/unasync.py's guard rails: --check fails on a stale twin, and a rule that matches nothing fails."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def unasync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The script, pointed at a copy of vllm_tasks/_async and _sync under tmp_path."""
    spec = importlib.util.spec_from_file_location("unasync_under_test", ROOT / "scripts" / "unasync.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source, target = tmp_path / "_async", tmp_path / "_sync"
    for name, folder in (("_async", source), ("_sync", target)):
        folder.mkdir()
        for path in (ROOT / "vllm_tasks" / name).glob("*.py"):
            (folder / path.name).write_text(path.read_text())
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())  # ruff's settings
    monkeypatch.setattr(module, "SOURCE", source)
    monkeypatch.setattr(module, "TARGET", target)
    monkeypatch.setattr(module, "ROOT", tmp_path)
    return module


def test_check_passes_on_the_committed_twin(unasync: ModuleType) -> None:
    assert unasync.main(["--check"]) == 0


def test_check_fails_when_the_twin_is_stale(unasync: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    base = unasync.SOURCE / "base.py"
    base.write_text(base.read_text() + "\n\nasync def added() -> None:\n    await added()\n")
    assert unasync.main(["--check"]) == 1
    assert "base.py" in capsys.readouterr().out
    assert unasync.main([]) == 0  # regenerating fixes it
    assert "def added() -> None:\n    added()" in (unasync.TARGET / "base.py").read_text()
    assert unasync.main(["--check"]) == 0


def test_a_generated_file_without_a_source_is_stale(unasync: ModuleType) -> None:
    (unasync.TARGET / "leftover.py").write_text("x = 1\n")
    assert unasync.main(["--check"]) == 1
    assert unasync.main([]) == 0
    assert not (unasync.TARGET / "leftover.py").exists()


def test_a_rule_that_matches_nothing_fails(
    unasync: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(unasync, "REPLACEMENTS", [*unasync.REPLACEMENTS, (r"\bnever_used_name\b", "x")])
    assert unasync.main(["--check"]) == 1
    assert "never_used_name" in capsys.readouterr().err
