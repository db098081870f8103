"""The docs site (mkdocs.yml): every public name has an API reference entry, every page is in the nav, and
the docs step (scripts/docs-build.sh, run by scripts/test.sh) fails on a warning."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import vllm_tasks
import vllm_tasks.testing

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"
DOCS_BUILD = ROOT / "scripts" / "docs-build.sh"


def documented() -> set[str]:
    """The objects the reference pages render (``::: dotted.name`` lines)."""
    names = set()
    for page in REFERENCE.glob("*.md"):
        names.update(re.findall(r"^::: ([\w.]+)$", page.read_text(), re.MULTILINE))
    return names


def test_every_public_name_has_a_reference_entry() -> None:
    public = {f"vllm_tasks.{name}" for name in vllm_tasks.__all__ if name != "__version__"}
    public |= {f"vllm_tasks.testing.{name}" for name in vllm_tasks.testing.__all__}
    missing = sorted(public - documented())
    assert missing == [], f"add `::: NAME` to a page of docs/reference/ for {missing}"


def test_every_adapter_has_a_reference_entry() -> None:
    for module in ("vllm_tasks.integrations.langchain", "vllm_tasks.integrations.llama_index"):
        source = (ROOT / (module.replace(".", "/") + ".py")).read_text()
        classes = {name for name in re.findall(r"^class (\w+)\(", source, re.MULTILINE) if name[0] != "_"}
        assert len(classes) >= 2
        assert {f"{module}.{name}" for name in classes} <= documented()


def test_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text().split("\nnav:\n", 1)[1]
    pages = {path.relative_to(ROOT / "docs").as_posix() for path in (ROOT / "docs").rglob("*.md")}
    listed = set(re.findall(r":\s*([\w/.-]+\.md)\s*$", nav, re.MULTILINE))
    assert pages == listed


# A module for the tiny site's reference page: its docstring's Args match the signature.
PLANTED_MODULE = '''
def scale(value: float, factor: float = 2.0) -> float:
    """Scale a value.

    Args:
        value: the value.
        factor: the factor.

    Returns:
        value times factor.
    """
    return value * factor
'''

# Each breaks the tiny site in a way the strict build logs as a WARNING (and nothing worse).
PLANTED_WARNINGS = {
    "docstring parameter not in the signature": (
        "module",
        ("        factor: the factor.", "        factor: the factor.\n        offset: not a parameter."),
        "does not appear in the function signature",
    ),
    "link to a page that is not there": (
        "page",
        ("# Tiny", "# Tiny\n\nSee [the missing page](missing.md)."),
        "missing.md",
    ),
}


def build_tiny_site(tmp_path: Path, plant: tuple[str, tuple[str, str], str] | None) -> tuple[int, str]:
    """Build a one-page copy of the site with the project's mkdocs.yml settings (theme, plugins,
    validation) through scripts/docs-build.sh; ``plant``: the warning to put in. Returns (exit, output)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config.update(docs_dir="docs", site_dir=str(tmp_path / "site"), nav=[{"Home": "index.md"}])
    module, page = PLANTED_MODULE, "# Tiny\n\n::: planted.scale\n"
    if plant is not None:
        where, (old, new), _ = plant
        if where == "module":
            module = module.replace(old, new)
        else:
            page = page.replace(old, new)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text(page)
    (tmp_path / "planted.py").write_text(module)
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "VLLM_TASKS_PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(DOCS_BUILD), "-f", str(tmp_path / "mkdocs.yml")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def test_the_docs_step_passes_a_clean_site_and_leaves_out_the_info_lines(tmp_path: Path) -> None:
    status, output = build_tiny_site(tmp_path, None)
    assert status == 0, output
    assert "INFO" not in output
    assert (tmp_path / "site" / "index.html").read_text().count("Scale a value.") == 1


@pytest.mark.parametrize("plant", PLANTED_WARNINGS.values(), ids=PLANTED_WARNINGS.keys())
def test_the_docs_step_fails_on_a_planted_warning(
    tmp_path: Path, plant: tuple[str, tuple[str, str], str]
) -> None:
    status, output = build_tiny_site(tmp_path, plant)
    assert status != 0, output
    assert re.search(rf"^WARNING .*{re.escape(plant[2])}", output, re.MULTILINE), output


def test_the_test_command_builds_the_docs_through_the_strict_step() -> None:
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert "bash scripts/docs-build.sh" in script
    assert "--quiet" not in script
