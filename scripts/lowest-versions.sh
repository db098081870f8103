#!/usr/bin/env bash
# The declared lower bounds, exercised: the decoders', transports' and jobs' tests on a separate venv that
# holds the LOWEST version each `>=` in pyproject.toml allows, for the runtime dependencies and the parquet,
# sparse, progress, image, realtime and tokenizer extras (pyarrow, scipy, tqdm, pillow, pypdfium2, websockets,
# tokenizers), with
# the test tools at what pip picks beside them. The venv is made once per set of requirements, under
# $VLLM_TASKS_FIXTURE_CACHE (default ~/.cache/vllm-tasks-fixtures). scripts/test.sh runs it (the whole
# suite, or --tier lowest).
# Usage: scripts/lowest-versions.sh [extra pytest args]
#   VLLM_TASKS_PYTHON=/path/to/python   the python the venv is made from (default: python3)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BASE_PY="${VLLM_TASKS_PYTHON:-python3}"
CACHE="${VLLM_TASKS_FIXTURE_CACHE:-$HOME/.cache/vllm-tasks-fixtures}"

# The test files that run on these dependencies alone: decoders and results (numpy, scipy), the clients'
# transports (httpx, pydantic, orjson, tenacity), the embed_file jobs (pyarrow, pillow). Files that need
# another extra (soundfile, av, the frameworks) are left out.
TESTS=(
    tests/unit/test_decoding.py
    tests/unit/test_sparse.py
    tests/unit/test_pooling_result.py
    tests/unit/test_embeddings.py
    tests/component/test_jobs.py
    tests/component/test_sparse_jobs.py
    tests/component/test_multi_vector_jobs.py
    tests/component/test_image_jobs.py
    tests/unit/test_realtime_protocol.py
    tests/component/test_fake_realtime.py
    tests/unit/test_token_classification.py
)

# One requirement a line: each bound pinned to its lowest version (a dependency without a `>=` bound stops
# the run), then the test tools with the test extra's bounds. The venv is named after them.
requirements="$("$BASE_PY" - <<'EOF'
import re
import sys
import tomllib

project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
tested_extras = ("parquet", "sparse", "progress", "image", "realtime", "tokenizer")
for spec in project["dependencies"] + [spec for name in tested_extras for spec in extras[name]]:
    bound = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*>=\s*([^,;\s]+).*", spec)
    if bound is None:
        sys.exit(f"scripts/lowest-versions.sh: {spec!r} has no lower bound (>=) to test")
    print(f"{bound[1]}=={bound[2]}")
for spec in extras["test"]:
    if re.split(r"[<>=!~\[\s]", spec, maxsplit=1)[0] in ("pytest", "pytest-httpx", "hypothesis", "anyio"):
        print(spec)
EOF
)"
VENV="$CACHE/lowest-versions-$(sha256sum <<<"$requirements" | cut -c1-16)"
if [ ! -f "$VENV/.installed" ]; then
    echo "== lowest versions: a venv in $VENV with ${requirements//$'\n'/ }"
    rm -rf "$VENV"  # what a run stopped while installing left
    "$BASE_PY" -m venv "$VENV"
    mapfile -t pins <<<"$requirements"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}"
    touch "$VENV/.installed"
fi
echo "== lowest versions: $("$VENV/bin/python" -m pip freeze --disable-pip-version-check |
    grep -i -E '^(httpx|pydantic|numpy|orjson|tenacity|pyarrow|scipy|tqdm|pillow|pypdfium2|websockets|tokenizers)==' |
    tr '\n' ' ')"
# From the checkout (python -m puts it first on sys.path): the SDK is not installed in this venv.
# pytest-asyncio is not either (the full venv has it from langchain-tests): its ini option is unknown here.
# The jobs' kill -9 and Ctrl-C tests (half of these files' time, in CLI subprocesses) test the process's
# life, not the versions: left out.
exec "$VENV/bin/python" -m pytest -p no:cacheprovider -q \
    -W "ignore:Unknown config option:pytest.PytestConfigWarning" -k "not kill_9 and not ctrl_c" \
    "${TESTS[@]}" "$@"
