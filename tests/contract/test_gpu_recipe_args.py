"""The GPU recipes as far as a CPU takes them (issue 14): each recipe's `vllm serve` command line is
parsed by vLLM's own argument parser, for each matrix version the recipe file claims to support, and
its chat templates render with sample inputs (server-fixtures/check_recipes.py, run in that version's
fixture venv). A removed or renamed flag fails here, before anyone rents a GPU to find out.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import gpu_recipes
import pytest
from fixture_pins import selected_matrix_versions, setup_missing, venv_python
from pytest_plugin import missing_component

from vllm_tasks.versions import ServerVersion

pytestmark = pytest.mark.contract

SCRIPT = Path(__file__).resolve().parents[2] / "server-fixtures" / "check_recipes.py"
CLAIMED = ServerVersion.parse(json.loads(gpu_recipes.RECIPES_FILE.read_text())["vllm_min_version"])
VERSIONS = [v for v in selected_matrix_versions() if ServerVersion.parse(v) >= CLAIMED]


OLD_RECIPE = {"name": "old", "model": "BAAI/bge-m3", "task": "embed", "args": ["--task", "embed"]}
"""A recipe with a flag vLLM removed (``--task``), checked in the same run as the real ones."""


@pytest.fixture(scope="module", params=VERSIONS)
def report(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """check_recipes.py's report on the recipes and :data:`OLD_RECIPE`, in one run of that version's vLLM
    (importing vLLM is most of a run's time)."""
    version: str = request.param
    missing = setup_missing(["embed"], version=version)
    if missing:
        missing_component(
            f"vLLM {version} venv not built (server-fixtures/setup --vllm {version}): {missing}"
        )
    recipes = json.loads(gpu_recipes.RECIPES_FILE.read_text())
    recipes["recipes"].append(OLD_RECIPE)
    recipes_file = tmp_path_factory.mktemp("recipes") / "recipes.json"
    recipes_file.write_text(json.dumps(recipes))
    command = [str(venv_python(version)), str(SCRIPT), str(recipes_file)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["vllm"] == version
    return answer


def test_every_recipe_parses_and_its_templates_render(report: dict[str, Any]) -> None:
    checked = {name: r for name, r in report["recipes"].items() if name != OLD_RECIPE["name"]}
    assert set(checked) == set(gpu_recipes.recipes())
    refused = {name: r["error"] for name, r in checked.items() if r["error"]}
    assert not refused, f"vLLM {report['vllm']} refuses these recipes' flags: {refused}"
    rendered = checked["qwen3-reranker-0.6b"]["templates"]["qwen3_reranker.jinja"]
    default, instructed, system = rendered
    assert "<Query>: capital of France?" in default and "<Document>: Paris." in default
    assert "retrieve relevant passages" in default  # the model card's default instruction
    assert "<Instruct>: Judge relevance for a geography quiz" in instructed
    assert "<Instruct>: Rank passages about cities" in system
    assert all(text.endswith("</think>\n\n") for text in rendered)


def test_a_removed_flag_is_caught(report: dict[str, Any]) -> None:
    error = report["recipes"][OLD_RECIPE["name"]]["error"]
    assert error and "--task" in error
