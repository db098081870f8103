#!/usr/bin/env bash
# The version matrix: for each vLLM version, build its fixture venv (server-fixtures/setup --vllm V), then
# run the version-sensitive contract modules with the normal fixtures AND the matrix fixture on that
# version (VLLM_TASKS_FIXTURE_VLLM=V VLLM_TASKS_MATRIX=V). One server at a time, one version at a time.
#
# Usage: scripts/test-versions.sh [extra pytest args]
#   VLLM_TASKS_MATRIX=all (default) | default | 0.11.0,0.16.0   which versions (fixture_pins.MATRIX_VERSIONS)
#   VLLM_TASKS_PYTHON=/path/to/python                             the test python (default: .venv via dev-env.sh)
# Exit status: 0 when every version passed; the summary lists each version's setup and pytest times.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [ -n "${VLLM_TASKS_PYTHON:-}" ]; then
    PY="$VLLM_TASKS_PYTHON"
else
    bash scripts/dev-env.sh || exit 1
    PY="$ROOT/.venv/bin/python"
fi

# The versions, in fixture_pins' order, validated there ("all" when unset).
VERSIONS=$(VLLM_TASKS_MATRIX="${VLLM_TASKS_MATRIX:-all}" "$PY" -c '
import sys; sys.path.insert(0, "server-fixtures")
from fixture_pins import selected_matrix_versions
print(" ".join(selected_matrix_versions()))') || exit 2

MODULES=()
for m in tests/contract/test_version_gates.py tests/contract/test_matrix_smoke.py \
         tests/contract/test_embeddings.py tests/contract/test_scoring.py; do
    if [ -f "$m" ]; then MODULES+=("$m"); else echo "[test-versions] $m not found; left out"; fi
done

summary=()
failed=0
t_all=$SECONDS
for v in $VERSIONS; do
    echo "== vLLM $v: server-fixtures/setup --vllm $v"
    t0=$SECONDS
    if ! server-fixtures/setup --vllm "$v"; then
        summary+=("$v: setup FAILED after $((SECONDS - t0)) s")
        failed=1
        continue
    fi
    t1=$SECONDS
    echo "== vLLM $v: pytest -m contract ${MODULES[*]}"
    VLLM_TASKS_MATRIX="$v" VLLM_TASKS_FIXTURE_VLLM="$v" \
        "$PY" -m pytest -p no:cacheprovider -m contract "${MODULES[@]}" "$@"
    rc=$?
    result=$([ $rc -eq 0 ] && echo "passed" || echo "FAILED (pytest exit $rc)")
    [ $rc -eq 0 ] || failed=1
    summary+=("$v: setup $((t1 - t0)) s, pytest $((SECONDS - t1)) s: $result")
done
echo "== version matrix summary ($((SECONDS - t_all)) s in all)"
printf '  %s\n' "${summary[@]}"
exit $failed
