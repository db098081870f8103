"""Quick start: connect to a vLLM server, see what it serves, embed and rerank.

Usage: python examples/quickstart.py [URL]     (default: env VLLM_TASKS_BASE_URL or localhost:8000)
"""

from __future__ import annotations

import sys

import numpy as np

import vllm_tasks as vt
from vllm_tasks.cli import format_probe

DOCUMENTS = [
    "Paris is the capital and largest city of France.",
    "Bananas are rich in potassium.",
    "The Eiffel Tower was completed in 1889.",
    "vLLM is a fast inference and serving engine for LLMs.",
]


def main(url: str | None) -> None:
    with vt.Client(url) as client:
        client.wait_until_ready(timeout=300)
        report = client.probe()
        print(format_probe(report))
        print()
        if "embed" in report.served_tasks:
            result = client.embed(DOCUMENTS)
            print(f"embed: {result.vectors.shape} {result.vectors.dtype} via {result.encoding_format}")
            query = client.embed("Which city is the capital of France?").vector
            best = int(np.argmax(result.vectors @ query))
            print(f"nearest document by cosine: {DOCUMENTS[best]!r}")
        if "rerank" in report.served_tasks:
            ranked = client.rerank("Which city is the capital of France?", DOCUMENTS, top_n=2)
            print(f"rerank ({ranked.scorer}):")
            for hit in ranked.results:
                print(f"  {hit.score:.4f}  [{hit.index}] {hit.document}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
