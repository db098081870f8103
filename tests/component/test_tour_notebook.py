"""examples/notebooks/tour.ipynb on a real Jupyter kernel, every section pointed at a FakeVLLM configured like
its fixture (tests/fakes.py: embed, rerank, stt, ocr, all up at once): a broken cell fails here without any
vLLM server. Every code cell belongs to exactly one section, so every cell runs."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from ..fakes import fake_like
from ..tour import NOTEBOOK, SECTIONS, html_outputs, run_tour, section_of, url_variable


def test_every_code_cell_belongs_to_one_section() -> None:
    import nbformat

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    sections = [section_of(cell) for cell in notebook.cells if cell.cell_type == "code"]
    assert set(sections) == {"setup", *SECTIONS}
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), (
        "commit the tour without outputs (they embed audio and images)"
    )


def test_the_tour_runs_on_fakes_of_its_fixtures(monkeypatch: pytest.MonkeyPatch) -> None:
    with ExitStack() as stack:
        fakes = {section: stack.enter_context(fake_like(section)) for section in SECTIONS}
        urls = {url_variable(section): fake.base_url for section, fake in fakes.items()}
        executed = run_tour(SECTIONS, urls, monkeypatch, timeout=120)
    views = [html for html in html_outputs(executed) if "vllm-tasks-view" in html]
    # embed: the probe report and the embeddings; rerank: the ranking and the scores; stt: the transcript
    # with its player; ocr: the page with its boxes
    assert len(views) == 6
    assert any("<audio" in html for html in views) and any("<svg" in html for html in views)
    assert all("<script>alert" not in html for html in views)
