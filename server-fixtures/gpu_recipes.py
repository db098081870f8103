"""GPU recipes: the production models of gpu-recipes.json and the `vllm serve` command line for each.

Unlike the CPU fixtures these need a GPU host with `vllm` on PATH (or ``$VLLM_TASKS_VLLM``) and the
Hugging Face hub. ``GpuRecipeServer(name)`` starts one through the launcher. Standard library only.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from launcher import Server, free_port

HERE = Path(__file__).resolve().parent

RECIPES_FILE = HERE / "gpu-recipes.json"
TEMPLATES_DIR = HERE / "templates"


def recipes() -> dict[str, dict]:
    data = json.loads(RECIPES_FILE.read_text())
    return {r["name"]: r for r in data["recipes"]}


def recipe_command(recipe: Mapping, *, host: str, port: int, vllm: str | None = None) -> list[str]:
    """`vllm serve MODEL ...flags` for a recipe; `{templates}` in a flag is this folder's templates/ path."""
    exe = vllm or os.environ.get("VLLM_TASKS_VLLM", "vllm")
    args = [a.replace("{templates}", str(TEMPLATES_DIR)) for a in recipe.get("args", [])]
    served = recipe.get("served_model_name", recipe["model"])
    return [
        exe,
        "serve",
        recipe["model"],
        "--served-model-name",
        served,
        "--host",
        host,
        "--port",
        str(port),
        *args,
    ]


class GpuRecipeServer(Server):
    """A production model from gpu-recipes.json served with `vllm serve` (needs a GPU host and the hub)."""

    def __init__(
        self, name: str, port: int | None = None, *, host: str = "127.0.0.1", vllm: str | None = None
    ):
        table = recipes()
        if name not in table:
            raise KeyError(f"unknown GPU recipe {name!r}; known: {', '.join(table)}")
        self.recipe = table[name]
        port = port or free_port(host)
        super().__init__(
            name,
            recipe_command(self.recipe, host=host, port=port, vllm=vllm),
            port=port,
            host=host,
            env=self.recipe.get("env", {}),
            model=self.recipe.get("served_model_name", self.recipe["model"]),
            start_timeout=float(self.recipe.get("start_timeout", 1200)),
        )


def have_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None
