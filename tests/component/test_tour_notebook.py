"""The whole tour notebook on a real kernel against one FakeVLLM (it serves every task): a broken cell
fails here without any vLLM server. tests/integration/test_notebook.py runs it against the real fixtures."""

from __future__ import annotations

import pytest

from vllm_tasks.testing import FakeVLLM

from ..tour import SECTIONS, html_outputs, run_tour, url_variable


def test_the_tour_runs_against_a_fake_server(fake_vllm: FakeVLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    urls = {url_variable(section): fake_vllm.url for section in SECTIONS}
    executed = run_tour(SECTIONS, urls, monkeypatch, timeout=120)
    views = [html for html in html_outputs(executed) if "vllm-tasks-view" in html]
    assert len(views) == 6  # probe report, embeddings, ranking, scores, transcript, OCR page
    assert any("<audio" in html for html in views) and any("<svg" in html for html in views)
    assert all("<script>alert" not in html for html in views)
