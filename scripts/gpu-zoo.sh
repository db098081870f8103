#!/usr/bin/env bash
# The model-family zoo on a CUDA vLLM (issue 23, "GPU ready"): the same tiny seeded checkpoints, served with
# the same flags, checked by the same reference tests as on CPU.
#
#   scripts/gpu-zoo.sh                      # VLLM_PYTHON: a Python whose vllm is a CUDA build
#   VLLM_PYTHON=/opt/vllm/bin/python scripts/gpu-zoo.sh -k colpali
#
# server-fixtures/setup builds the models and the CPU fixture venv, which computes the references
# (transformers on the CPU); $VLLM_TASKS_FIXTURE_PYTHON makes the fixture launcher start each server
# with VLLM_PYTHON instead. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_PYTHON="${VLLM_PYTHON:-python3}"
if ! "$VLLM_PYTHON" -c "import torch, vllm; assert torch.cuda.is_available(), 'no CUDA device'" 2>/dev/null; then
    echo "scripts/gpu-zoo.sh: $VLLM_PYTHON has no CUDA vLLM (set VLLM_PYTHON to a Python that has one)" >&2
    exit 2
fi
bash scripts/dev-env.sh
server-fixtures/setup
export VLLM_TASKS_FIXTURE_PYTHON="$(command -v "$VLLM_PYTHON")"
export VLLM_TASKS_REQUIRE_FIXTURES=1
echo "== the zoo on $("$VLLM_PYTHON" -c 'import torch, vllm; print("vLLM", vllm.__version__, "on", torch.cuda.get_device_name(0))')"
exec .venv/bin/python -m pytest -p no:cacheprovider \
    tests/contract/test_listwise.py tests/contract/test_qwen3_embedding.py tests/contract/test_qwen3_reranker.py \
    tests/contract/test_clip.py tests/contract/test_colpali.py tests/contract/test_sparse.py \
    tests/contract/test_per_token.py tests/contract/test_verify.py "$@"
