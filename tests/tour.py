"""Running examples/notebooks/tour.ipynb on a real Jupyter kernel (nbclient + ipykernel), section by section.

Every cell of the tour is tagged with one section: ``setup`` (always run) or the server it needs
(``embed``, ``rerank``, ``stt``, ``ocr``). A section runs as the setup cells plus its own cells, in order;
a cell that raises fails the run (``nbclient.exceptions.CellExecutionError``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "notebooks" / "tour.ipynb"
SECTIONS = ("embed", "rerank", "stt", "ocr")
"""The sections, in notebook order; each reads its server from ``VLLM_<SECTION>_URL``."""


def section_of(cell: Any) -> str:
    """A cell's section: its one tag among ``setup`` and :data:`SECTIONS`."""
    tags = [tag for tag in cell.get("metadata", {}).get("tags", []) if tag in ("setup", *SECTIONS)]
    if len(tags) != 1:
        raise AssertionError(f"cell {cell.get('source', '')[:60]!r} has sections {tags}, not exactly one")
    return str(tags[0])


def url_variable(section: str) -> str:
    """``VLLM_EMBED_URL``, ..."""
    return f"VLLM_{section.upper()}_URL"


def run_tour(
    sections: Iterable[str], urls: Mapping[str, str], monkeypatch: pytest.MonkeyPatch, timeout: int = 900
) -> Any:
    """Execute the setup cells and ``sections``' cells on a fresh ``python3`` kernel; returns the executed
    notebook. The kernel imports this checkout's ``vllm_tasks`` (``PYTHONPATH``) and gets ``urls`` as
    environment variables; its working directory is the notebook's folder.
    """
    import nbclient  # the test extra installs nbclient, nbformat and ipykernel: missing is a failure
    import nbformat

    wanted = {"setup", *sections}
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    notebook.cells = [cell for cell in notebook.cells if section_of(cell) in wanted]
    for name, value in urls.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    client = nbclient.NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()
    return notebook


def html_outputs(notebook: Any) -> list[str]:
    """The ``text/html`` outputs of every executed code cell."""
    found = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            html = output.get("data", {}).get("text/html")
            if html:
                found.append(html if isinstance(html, str) else "".join(html))
    return found
