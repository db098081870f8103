#!/usr/bin/env bash
# Probe a vLLM server with curl alone (for hosts without Python): version, models, and which task
# routes are served. Same checks as `vllm-tasks probe URL`.
# Usage: scripts/probe-endpoint.sh URL      (API key from env VLLM_API_KEY)
# Exit: 0 reachable, 2 unreachable, 64 usage.
set -uo pipefail
url="${1:-}"
if [ -z "$url" ]; then echo "usage: $0 URL" >&2; exit 64; fi
url="${url%/}"; url="${url%/v1}"
auth=()
if [ -n "${VLLM_API_KEY:-}" ]; then auth=(-H "Authorization: Bearer ${VLLM_API_KEY}"); fi

if ! curl -s -o /dev/null --max-time 10 "$url/health"; then
    echo "unreachable: $url" >&2
    exit 2
fi
echo "server   $url"
echo "health   HTTP $(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$url/health")"
echo "version  $(curl -s --max-time 10 "$url/version")"
echo "models   $(curl -s --max-time 10 "${auth[@]}" "$url/v1/models" | head -c 600)"
echo

probe() {  # task path content-type body
    local task="$1" path="$2" ctype="$3" body="$4" code msg status
    if [ "$ctype" = form ]; then
        out=$(curl -s --max-time 30 "${auth[@]}" -w '\n%{http_code}' -F probe=1 "$url$path")
    else
        out=$(curl -s --max-time 30 "${auth[@]}" -w '\n%{http_code}' -H 'Content-Type: application/json' -d "$body" "$url$path")
    fi
    code="${out##*$'\n'}"; msg="${out%$'\n'*}"
    case "$code" in
        200|400|422) status="yes" ;;
        404) if [[ "$msg" == *'"Not Found"'* ]]; then status="no (404)"; else status="error 404: ${msg:0:120}"; fi ;;
        501) status="inactive (501)" ;;
        401) status="unauthorized (401)" ;;
        *) status="error $code: ${msg:0:120}" ;;
    esac
    printf '%-14s %-26s %s\n' "$task" "$path" "$status"
}
probe embed /v1/embeddings json '{"input":"."}'
probe embed_v2 /v2/embed json '{"texts":["."]}'
probe score /score json '{}'
probe rerank /rerank json '{}'
probe classify /classify json '{"input":"."}'
probe pooling /pooling json '{}'
probe transcription /v1/audio/transcriptions form ''
probe translation /v1/audio/translations form ''
probe chat /v1/chat/completions json '{}'
exit 0
