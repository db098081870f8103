#!/usr/bin/env bash
# The test suite: lint, format check, mypy --strict, generated-code check, the docs site built strictly,
# then the tests of one tier or of all three (tests/conftest.py marks each test with its folder's tier):
#   unit       pure functions and pytest-httpx with recorded exchanges      (no server)
#   component  the SDK's glue against FakeVLLM over real HTTP, nginx, Ray  (no vLLM)
#   contract   real CPU vLLM servers from server-fixtures/ (built here on first use)
# With all three, scripts/lowest-versions.sh also runs the jobs' and decoders' tests at the lowest versions
# pyproject.toml accepts (`--tier lowest`: that run alone).
# Usage: scripts/test.sh [--tier unit|component|contract|lowest|all] [extra pytest args]   (default: all)
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
    lowest | all) ;;  # all: the three tiers, unit + component (then lowest) beside contract (below)
    *) echo "scripts/test.sh: unknown tier '$tier' (unit, component, contract, lowest or all)" >&2; exit 2 ;;
esac
start=$SECONDS
step() { echo "== $1 (at $((SECONDS - start)) s)"; }
bash scripts/dev-env.sh
PY="$ROOT/.venv/bin/python"
# The contract tier launches the next vLLM server while the current one's tests run (two at most):
# server-fixtures/pytest_plugin.py. VLLM_TASKS_FIXTURES_AHEAD=0 starts one at a time.
export VLLM_TASKS_FIXTURES_AHEAD="${VLLM_TASKS_FIXTURES_AHEAD:-1}"
# Bytecode is cached (__pycache__, ignored by git): with PYTHONDONTWRITEBYTECODE set (as some images do),
# every Python process recompiles vllm_tasks and the tests, and pytest rewrites the assertions of every
# module of each installed pytest plugin's package again: each CLI run, docs block and inner pytest
# session of the tests pays for it.
unset PYTHONDONTWRITEBYTECODE
step "ruff check"; "$PY" -m ruff check .
step "ruff format --check"; "$PY" -m ruff format --check .
step "mypy --strict vllm_tasks"; "$PY" -m mypy --strict vllm_tasks
step "unasync --check (vllm_tasks/_sync/ is generated from vllm_tasks/_async/)"; "$PY" scripts/unasync.py --check
step "mkdocs build --strict (into site/, ignored by git; a warning fails it)"
VLLM_TASKS_PYTHON="$PY" bash scripts/docs-build.sh
case "$tier" in
    unit | lowest) ;;
    component) step "nginx, Java (server-fixtures/setup --system-only)"; server-fixtures/setup --system-only ;;
    *) step "fixture setup"; server-fixtures/setup ;;
esac
status=0
if [ "$tier" = all ]; then
    # The unit and component tiers, then the lowest-versions run, go beside the contract tier: a vLLM
    # server starting (most of the contract tier's time) keeps one core busy importing, the other would
    # idle. The background job's output follows the contract tier's. Any of them failing (exit 5, no
    # tests, included) fails the run.
    step "pytest (unit + component, then lowest versions, in the background; contract in the foreground)"
    fast_log="$(mktemp "${TMPDIR:-/tmp}/vllm-tasks-fast-tiers.XXXXXX")"
    # --durations: the slowest tests, to keep the run within its budget. The contract tier is the longer: the background job runs at a lower priority (nice), so that it
    # takes the CPU the contract tier leaves rather than slowing it down.
    background() {
        local tiers=0 lowest=0
        nice -n 10 "$PY" -m pytest tests/unit tests/component -p no:cacheprovider --durations=20 "$@" || tiers=$?
        step "lowest versions (scripts/lowest-versions.sh)"
        nice -n 10 bash scripts/lowest-versions.sh || lowest=$?
        echo "== pytest exit: unit + component $tiers, lowest versions $lowest"
        return $((tiers != 0 ? tiers : lowest))
    }
    background "$@" >"$fast_log" 2>&1 &
    fast_pid=$!
    # Ctrl-C or a failed step: no pytest left behind (the background job's children, then the job)
    # (each command may fail, none may end the trap: under set -e a failing one would be the exit status)
    trap 'pkill -P "$fast_pid" 2>/dev/null || true; kill "$fast_pid" 2>/dev/null || true' EXIT
    contract_status=0
    "$PY" -m pytest tests/contract --durations=10 "$@" || contract_status=$?
    fast_status=0
    wait "$fast_pid" || fast_status=$?
    echo "== unit + component tiers and lowest versions (run beside the contract tier):"
    cat "$fast_log"
    rm -f "$fast_log"
    echo "== pytest exit: unit + component + lowest versions $fast_status, contract $contract_status"
    status=$((fast_status != 0 ? fast_status : contract_status))
elif [ "$tier" = lowest ]; then
    step "lowest versions (scripts/lowest-versions.sh)"
    bash scripts/lowest-versions.sh "$@" || status=$?
else
    step "pytest (tier: $tier)"
    "$PY" -m pytest "${paths[@]}" "$@" || status=$?
fi
echo "== done in $((SECONDS - start)) s (tier: $tier, pytest exit $status)"
exit "$status"
