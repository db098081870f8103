"""Rerank retrieved passages, sentence-transformers ``rank()`` style: sorted hits with your documents.

Works against any vLLM server that serves /rerank: a cross-encoder (e.g. BAAI/bge-reranker-v2-m3, or the
`rerank` CPU fixture), an embedding model (cosine), or a ColBERT-style late-interaction model. The result
says which kind of scorer produced the scores.

Usage: python examples/rank.py [URL] [--top-k 3]     (default URL: env VLLM_TASKS_BASE_URL or localhost:8000)
"""

from __future__ import annotations

import argparse
from typing import Any

import vllm_tasks as vt

PASSAGES: list[dict[str, Any]] = [
    {"id": "wiki/paris", "text": "Paris is the capital and largest city of France."},
    {"id": "wiki/banana", "text": "Bananas are yellow when ripe and grow in tropical climates."},
    {"id": "wiki/europe", "text": "France is a country in Western Europe."},
    {"id": "wiki/berlin", "text": "Berlin is the capital of Germany."},
    {"id": "wiki/eiffel", "text": "The Eiffel Tower stands in Paris, the French capital."},
    {"id": "docs/vllm", "text": "vLLM serves embedding, reranking and transcription models."},
]


def rank(
    client: vt.Client, query: str, passages: list[dict[str, Any]], top_k: int = 3
) -> list[tuple[float, dict[str, Any]]]:
    """The ``top_k`` passages most relevant to ``query``, best first, as ``(score, passage)`` pairs."""
    result = client.rerank(query, passages, top_n=top_k, text_field="text")
    return [(hit.score, hit.document) for hit in result.results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", default=None)
    parser.add_argument("--top-k", type=int, default=3)
    parser.add_argument("--query", default="What is the capital of France?")
    args = parser.parse_args()
    with vt.Client(args.url) as client:
        client.wait_until_ready(timeout=300)
        kind = client.scorer_kind()
        print(f"query: {args.query!r}   scorer: {kind.value}")
        for score, passage in rank(client, args.query, PASSAGES, args.top_k):
            print(f"  {score:8.4f}  {passage['id']:<12} {passage['text']}")


if __name__ == "__main__":
    main()
