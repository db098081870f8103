#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment in .venv with the SDK and its test tools.
# Sourced by scripts/test.sh and scripts/demo.sh; safe to run again (pip skips what is installed).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
stamp="$VENV/.installed-$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
if [ ! -f "$stamp" ]; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT[test,bench]"
    rm -f "$VENV"/.installed-*
    touch "$stamp"
fi
