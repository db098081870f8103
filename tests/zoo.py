"""Reference answers for the model-family zoo: server-fixtures/references.py run with the fixture venv's
python (transformers and torch on the same weights, no vLLM), for the contract tests to compare with."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from fixture_pins import models_dir, venv_python
from fixture_table import FIXTURES

REFERENCES = Path(__file__).resolve().parents[1] / "server-fixtures" / "references.py"


def reference(family: str, fixture: str, request: Any) -> Any:
    """What ``references.py FAMILY`` computes for ``request`` (or a list of requests: the list of answers,
    in one process) from the model directory ``fixture`` serves."""
    model = models_dir() / FIXTURES[fixture].model_dir
    done = subprocess.run(
        [str(venv_python()), str(REFERENCES), family, str(model)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"references.py {family} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)
