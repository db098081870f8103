"""Every docstring example of an internal function runs, as a doctest (issue 22: examples that never run
drift). Public objects' examples (what docs/reference renders: the clients' methods, results, params,
jobs, adapters) show calls against a server and are read, not run; the docs' code blocks run instead
(tests/component/test_docs_blocks.py). An internal example that needs a server is removed, not kept."""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vllm_tasks

ROOT = Path(__file__).resolve().parents[2]
#: Modules whose own docstring is public (what ``help()`` shows a user), so not run.
PUBLIC_MODULES = {
    "vllm_tasks",
    "vllm_tasks.jobs",
    "vllm_tasks.testing",
    "vllm_tasks.types",
    "vllm_tasks.integrations.langchain",
    "vllm_tasks.integrations.lancedb",
    "vllm_tasks.integrations.llama_index",
    "vllm_tasks.integrations.ray",
    "vllm_tasks.integrations.daft",
    "vllm_tasks.integrations.spark",
}


def documented() -> tuple[set[int], set[str]]:
    """The ids of the objects docs/reference renders (and their public members), and the public
    method names of the clients (the ``_async`` mixins' methods are the clients')."""
    objects: set[int] = set()
    for page in sorted((ROOT / "docs" / "reference").glob("*.md")):
        for target in re.findall(r"^:::\s+([\w.]+)", page.read_text(), re.M):
            obj = _resolve(target)
            objects.add(id(obj))
            if inspect.isclass(obj):
                for name, member in inspect.getmembers(obj):
                    if not name.startswith("_"):
                        objects.add(id(getattr(member, "fget", member)))
    methods = {name for name in dir(vllm_tasks.Client) if not name.startswith("_")}
    return objects, methods


def _resolve(target: str) -> Any:
    parts = target.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for part in parts[split:]:
            obj = getattr(obj, part)
        return obj
    raise LookupError(target)


def internal_examples() -> Iterator[doctest.DocTest]:
    objects, client_methods = documented()
    finder = doctest.DocTestFinder(exclude_empty=True)
    for info in pkgutil.walk_packages(vllm_tasks.__path__, "vllm_tasks."):
        if info.name.startswith("vllm_tasks._sync") or info.name.endswith(
            ("langchain", "lancedb", "llama_index", "ray", "daft", "spark")
        ):
            continue  # generated twins; the framework adapters import their frameworks (component tier)
        module = importlib.import_module(info.name)
        for test in finder.find(module, info.name):
            if not test.examples or (test.name == info.name and info.name in PUBLIC_MODULES):
                continue
            obj: Any = module
            for part in test.name.split(".")[len(info.name.split(".")) :]:
                obj = getattr(obj, part)
            if id(getattr(obj, "fget", obj)) in objects:
                continue
            last = test.name.rsplit(".", 1)[-1]
            if info.name.startswith("vllm_tasks._async") and (last in client_methods or "Base" in test.name):
                continue
            yield test


EXAMPLES = sorted(internal_examples(), key=lambda test: test.name)


@pytest.mark.parametrize("test", EXAMPLES, ids=[test.name for test in EXAMPLES])
def test_internal_example_runs(
    test: doctest.DocTest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # an example may write a file (jobs.state.write_json)
    test.globs.update({"vt": vllm_tasks, "np": np})
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    result = runner.run(test, out=report.append)
    assert result.failed == 0, "".join(report)


def test_some_internal_examples_are_found() -> None:
    assert len(EXAMPLES) > 50
