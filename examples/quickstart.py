"""Quick start: connect to a vLLM server, see what it serves, and use it.

Usage: python examples/quickstart.py [URL]     (default: env VLLM_TASKS_BASE_URL or localhost:8000)
"""

from __future__ import annotations

import sys

import vllm_tasks as vt
from vllm_tasks.cli import format_probe


def main(url: str | None) -> None:
    with vt.Client(url) as client:
        client.wait_until_ready(timeout=300)
        info = client.server_info()
        print(f"vLLM {info.version}, model {info.default_model} (max_model_len {info.max_model_len})")
        print(format_probe(client.probe()))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
