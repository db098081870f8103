#!/usr/bin/env bash
# The docs site built strictly (scripts/test.sh's docs step): any warning fails it.
# `mkdocs build --quiet` would hide the warnings from --strict's count (it logs errors only), so the build
# runs at its normal level and only the INFO lines (and their indented continuations) are left out of the
# output. A WARNING line that mkdocs did not count fails the step too.
# Usage: scripts/docs-build.sh [mkdocs build args, e.g. -f other/mkdocs.yml -d /tmp/site]
#   VLLM_TASKS_PYTHON=/path/to/python   the python with mkdocs (default: .venv)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${VLLM_TASKS_PYTHON:-$ROOT/.venv/bin/python}"
log="$(mktemp "${TMPDIR:-/tmp}/vllm-tasks-docs-build.XXXXXX")"
trap 'rm -f "$log"' EXIT
status=0
NO_MKDOCS_2_WARNING=1 "$PY" -m mkdocs build --strict "$@" >"$log" 2>&1 || status=$?
awk '/^INFO/ { info = 1; next } info && /^[ \t]/ { next } { info = 0; print }' "$log"
if [ "$status" -eq 0 ] && grep -q '^WARNING' "$log"; then
    echo "scripts/docs-build.sh: the build logged warnings (above); each one fails the docs step" >&2
    status=1
fi
exit "$status"
