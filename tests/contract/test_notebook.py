"""examples/notebooks/tour.ipynb executed on a real kernel against the real CPU fixtures.

Only one vLLM server runs at a time (server-fixtures/pytest_plugin.py), so the tour runs section by
section: each test starts its own kernel with the setup cells and one section's cells, pointed at that
section's fixture. Every code cell belongs to exactly one section (checked without a server), so every
cell runs in some test, and any cell that raises fails it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.tour import NOTEBOOK, SECTIONS, html_outputs, run_tour, section_of, url_variable

pytestmark = pytest.mark.contract


def test_every_code_cell_belongs_to_one_section() -> None:
    import nbformat

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    sections = [section_of(cell) for cell in notebook.cells if cell.cell_type == "code"]
    assert set(sections) == {"setup", *SECTIONS}
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), (
        "commit the tour without outputs (they embed audio and images)"
    )


def check_section(section: str, server: Any, monkeypatch: pytest.MonkeyPatch, views: int) -> None:
    executed = run_tour([section], {url_variable(section): server.base_url}, monkeypatch)
    shown = [html for html in html_outputs(executed) if "vllm-tasks-view" in html]
    assert len(shown) >= views, f"{section}: {len(shown)} result views rendered, expected {views}"


def test_embed_section(vllm_embed: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    check_section("embed", vllm_embed, monkeypatch, views=2)  # the probe report, the embeddings


def test_rerank_section(vllm_rerank: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    check_section("rerank", vllm_rerank, monkeypatch, views=2)  # the ranking, the scores


def test_stt_section(vllm_stt: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    check_section("stt", vllm_stt, monkeypatch, views=1)  # the transcript with its player


def test_ocr_section(vllm_ocr: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    check_section("ocr", vllm_ocr, monkeypatch, views=1)  # the page with its boxes
