#!/usr/bin/env bash
# The test suite: lint, format check, mypy --strict, generated-code check, the docs site built strictly,
# then the tests of one tier or of all three (tests/conftest.py marks each test with its folder's tier):
#   unit       pure functions and pytest-httpx with recorded exchanges      (no server)
#   component  the SDK's glue against FakeVLLM over real HTTP, nginx, Ray  (no vLLM)
#   contract   real CPU vLLM servers from server-fixtures/ (built here on first use)
# Usage: scripts/test.sh [--tier unit|component|contract|all] [extra pytest args]   (default: all)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
tier=all
if [ "${1:-}" = "--tier" ]; then
    tier="${2:?--tier needs unit, component, contract or all}"
    shift 2
fi
case "$tier" in
    unit | component | contract) paths=("tests/$tier") ;;
    all) paths=() ;;  # pyproject's testpaths: the three tiers, cheapest first
    *) echo "scripts/test.sh: unknown tier '$tier' (unit, component, contract or all)" >&2; exit 2 ;;
esac
start=$SECONDS
step() { echo "== $1 (at $((SECONDS - start)) s)"; }
bash scripts/dev-env.sh
PY="$ROOT/.venv/bin/python"
step "ruff check"; "$PY" -m ruff check .
step "ruff format --check"; "$PY" -m ruff format --check .
step "mypy --strict vllm_tasks"; "$PY" -m mypy --strict vllm_tasks
step "unasync --check (vllm_tasks/_sync/ is generated from vllm_tasks/_async/)"; "$PY" scripts/unasync.py --check
step "mkdocs build --strict (into site/, ignored by git)"; NO_MKDOCS_2_WARNING=1 "$PY" -m mkdocs build --strict --quiet
case "$tier" in
    unit) ;;
    component) step "nginx (server-fixtures/setup --nginx-only)"; server-fixtures/setup --nginx-only ;;
    *) step "fixture setup"; server-fixtures/setup ;;
esac
step "pytest (tier: $tier)"
status=0
"$PY" -m pytest "${paths[@]}" "$@" || status=$?
echo "== done in $((SECONDS - start)) s (tier: $tier, pytest exit $status)"
exit "$status"
