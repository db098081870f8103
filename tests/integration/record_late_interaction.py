"""Record a late-interaction (token_embed) vLLM server's answers into tests/recorded/late-interaction/.

No CPU fixture serves late interaction, so this starts one the way tests/integration/test_scoring.py
does (the `embed` fixture's MiniLM with `--pooler-config '{"task": "token_embed"}'`) and records, with
server-fixtures/record.py's `call`, the exchanges the unit tests replay.

    .venv/bin/python tests/integration/record_late_interaction.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "server-fixtures"))

import fixture_servers as fs  # noqa: E402
import record  # noqa: E402

NAME = "late-interaction"
MODEL = "minilm-colbert"
QUERY = "What is the capital of France?"
DOCS = ["Paris is the capital of France.", "Bananas are yellow.", "France is in Europe."]


def server_command(port: int) -> list[str]:
    """The command line of the late-interaction server (MiniLM, token_embed pooling task)."""
    fixture = fs.FIXTURES["embed"]
    return [
        str(fs.venv_python()),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(fs.models_dir() / fixture.model_dir),
        "--served-model-name",
        MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *fixture.args,
        "--pooler-config",
        json.dumps({"task": "token_embed"}),
    ]


def server_env() -> dict[str, str]:
    return {**fs.BASE_ENV, "VLLM_CACHE_ROOT": str(fs.cache_dir() / "vllm-cache"), **fs.FIXTURES["embed"].env}


def exchanges() -> list[dict[str, object]]:
    def post(name: str, path: str, body: dict[str, object]) -> dict[str, object]:
        return {"name": name, "method": "POST", "path": path, "json": {"model": MODEL, **body}, "headers": {}}

    def get(name: str, path: str) -> dict[str, object]:
        return {"name": name, "method": "GET", "path": path, "json": None, "headers": {}}

    return [
        get("version", "/version"),
        get("models", "/v1/models"),
        get("openapi", "/openapi.json"),
        post("pooling_probe", "/pooling", {"input": "a"}),
        post("pooling", "/pooling", {"input": [QUERY, *DOCS]}),
        post("score", "/score", {"queries": QUERY, "documents": DOCS}),
        post("rerank", "/rerank", {"query": QUERY, "documents": DOCS}),
        post("error_embeddings", "/v1/embeddings", {"input": ["hello"]}),
    ]


def main() -> int:
    port = fs.free_port("127.0.0.1")
    out = ROOT / "tests" / "recorded" / NAME
    out.mkdir(parents=True, exist_ok=True)
    server = fs.Server(NAME, server_command(port), port=port, env=server_env(), model=MODEL)
    server.start()
    try:
        version = json.loads(record.call(server.base_url, exchanges()[0])["response"]["body_text"])["version"]
        for ex in exchanges():
            rec = {"fixture": NAME, "vllm_version": version, **record.call(server.base_url, ex)}
            (out / f"{ex['name']}.json").write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")
            print(f"  {NAME}/{ex['name']}: {rec['response']['status']}", flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
