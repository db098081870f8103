"""The docs site (mkdocs.yml): every public name has an API reference entry, every page is in the nav.
``mkdocs build --strict`` itself runs in scripts/test.sh."""

from __future__ import annotations

import re
from pathlib import Path

import vllm_tasks
import vllm_tasks.testing

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"


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
