#!/usr/bin/env bash
# The whole test suite: lint, format check, mypy --strict, generated-code check, the docs site built
# strictly, fixture setup, unit + integration tests.
# Usage: scripts/test.sh [extra pytest args]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/dev-env.sh
PY="$ROOT/.venv/bin/python"
echo "== ruff check"; "$PY" -m ruff check .
echo "== ruff format --check"; "$PY" -m ruff format --check .
echo "== mypy --strict vllm_tasks"; "$PY" -m mypy --strict vllm_tasks
echo "== unasync --check (vllm_tasks/_sync/ is generated from vllm_tasks/_async/)"; "$PY" scripts/unasync.py --check
echo "== mkdocs build --strict (into site/, ignored by git)"; NO_MKDOCS_2_WARNING=1 "$PY" -m mkdocs build --strict --quiet
echo "== fixture setup"; server-fixtures/setup
echo "== pytest"; "$PY" -m pytest "$@"
