#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment in .venv with the SDK and its test tools.
# Run by scripts/test.sh; safe to run again (pip skips what is installed).
#   scripts/dev-env.sh          the SDK with the test and benchmark extras (what the test command needs)
#   scripts/dev-env.sh --core   the SDK and its runtime dependencies only (what scripts/demo.sh runs)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
hash="$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)"
if [ "${1:-}" = "--core" ]; then
    target="$ROOT" stamp="$VENV/.installed-core-$hash"
    # a full install of this pyproject.toml holds the core too
    [ -f "$VENV/.installed-$hash" ] && exit 0
else
    target="$ROOT[test,bench]" stamp="$VENV/.installed-$hash"
fi
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
if [ ! -f "$stamp" ]; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$target"
    if [ "${1:-}" != "--core" ]; then
        # Daft (the daft extra) pins pyarrow<26, whose Parquet reader cannot read back a null fixed-size
        # list (apache/arrow#35692: a refused row of a job's output, which the jobs' tests read); daft
        # itself runs on pyarrow 26 (tests/component/test_daft.py): installed without its pins.
        daft="$("$VENV/bin/python" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"]["daft"][0])' "$ROOT/pyproject.toml")"
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$daft"
    fi
    rm -f "$VENV"/.installed-*
    touch "$stamp"
fi
