"""Reference answers for the model-family zoo: server-fixtures/references.py run with the fixture venv's
python (transformers and torch on the same weights, no vLLM), for the contract tests to compare with.

An answer is kept in ``<fixture cache>/references/``, keyed by what it depends on: references.py itself,
the model directory's build stamp, the family and the request. A later run with all three unchanged reads
it instead of loading torch again (7-10 s a reference on 2 cores); any change computes it afresh.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

from fixture_pins import cache_dir, model_stamp, models_dir, venv_python
from fixture_table import FIXTURES

REFERENCES = Path(__file__).resolve().parents[1] / "server-fixtures" / "references.py"


def reference(family: str, fixture: str, request: Any) -> Any:
    """What ``references.py FAMILY`` computes for ``request`` (or a list of requests: the list of answers,
    in one process) from the model directory ``fixture`` serves."""
    model = FIXTURES[fixture].model_dir
    stamp = model_stamp(model)
    key = hashlib.sha256(
        REFERENCES.read_bytes()
        + (stamp.read_bytes() if stamp.exists() else b"")
        + json.dumps([family, model, request], sort_keys=True).encode()
    ).hexdigest()[:32]
    kept = cache_dir() / "references" / f"{family}-{key}.json"
    if kept.exists():
        return json.loads(kept.read_text())
    done = subprocess.run(
        [str(venv_python()), str(REFERENCES), family, str(models_dir() / model)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"references.py {family} failed:\n{done.stderr[-3000:]}")
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.with_suffix(".tmp").write_text(done.stdout)
    kept.with_suffix(".tmp").replace(kept)
    return json.loads(done.stdout)
