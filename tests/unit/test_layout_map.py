"""docs/contributing.md's layout table is the map of vllm_tasks/: checked against the modules, so it cannot
drift (issue 22, item 7). Every module is listed -- in the first column, or, for a folder row (`jobs/`), named
in that row -- and nothing listed is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "vllm_tasks"
CONTRIBUTING = ROOT / "docs" / "contributing.md"
GENERATED = "_sync"  # generated from _async/ (one row says so); its modules mirror _async/'s
NAME = re.compile(r"`([\w/.*]+)`")


def layout_rows() -> list[tuple[list[str], str]]:
    """The table under '## Layout': each row's first-column names and the whole row's text."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            rows.append(([name.removeprefix("vllm_tasks/") for name in NAME.findall(first)], line))
    return rows


def modules() -> set[str]:
    """Every module of the package, relative to it (``_async/base.py``, ``cli.py``), __init__ files and
    the generated ``_sync/`` left out."""
    return {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" and not path.relative_to(PACKAGE).as_posix().startswith(GENERATED + "/")
    }


def listed() -> tuple[set[str], set[str]]:
    """(modules the table names, folder rows it has): a folder row names its modules anywhere in the row."""
    names: set[str] = set()
    folders: set[str] = set()
    for firsts, line in layout_rows():
        for first in firsts:
            if first.endswith("/"):
                folders.add(first)
                names.update(first + found for found in NAME.findall(line) if found.endswith(".py"))
            elif not first.endswith("/*"):
                names.add(first)
    return names, folders


def test_every_module_is_on_the_map() -> None:
    names, _ = listed()
    missing = sorted(modules() - names - {"__init__.py"})
    assert not missing, f"docs/contributing.md's layout table does not list: {', '.join(missing)}"


def test_nothing_on_the_map_is_gone() -> None:
    names, folders = listed()
    gone = sorted(name for name in names if not (PACKAGE / name).exists())
    gone += sorted(folder for folder in folders if not (PACKAGE / folder).is_dir())
    assert not gone, f"docs/contributing.md's layout table lists what vllm_tasks/ no longer has: {gone}"


def test_the_generated_folder_mirrors_its_source() -> None:
    source = {p.name for p in (PACKAGE / "_async").glob("*.py")}
    generated = {p.name for p in (PACKAGE / GENERATED).glob("*.py")}
    assert generated == source
