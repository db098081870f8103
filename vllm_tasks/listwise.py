"""Listwise rerankers: jina-reranker-v3 (vLLM's ``JinaForRanking``) reads a query and its whole list at once.

vLLM renders one prompt per ``/rerank`` (or 1:N ``/score``) request: every document, each followed by a
document embedding token, then the query followed by a query embedding token; a document's score is the
cosine of its projected embedding with the query's. Every document sees the others, so a list split across
requests is not ranked as the model ranks it: the SDK sends such a list whole
(:attr:`~vllm_tasks.types.scoring.ScorerKind.LISTWISE`). When the prompt is over the model's context, the
SDK counts, with the server's ``/tokenize``, how many of the documents fit (:func:`listwise_prompt` is the
prompt vLLM 0.32 renders, ``entrypoints/pooling/scoring/io_processor.py``).
"""

from __future__ import annotations

LISTWISE_SYSTEM_PROMPT = (
    "You are a search relevance expert who can determine a ranking of the passages based on how relevant "
    "they are to the query. If the query is a question, how relevant a passage is depends on how well it "
    "answers the question. If not, try to analyze the intent of the query and assess how well each passage "
    "satisfies the intent. If an instruction is provided, you should follow the instruction when determining "
    "the ranking."
)
DOCUMENT_EMBED_TOKEN = "<|embed_token|>"
QUERY_EMBED_TOKEN = "<|rerank_token|>"


def _without_embed_tokens(text: str) -> str:
    return text.replace(DOCUMENT_EMBED_TOKEN, "").replace(QUERY_EMBED_TOKEN, "")


def listwise_prompt(query: str, documents: list[str], instruction: str | None = None) -> str:
    """The one prompt vLLM renders for a listwise reranker's query and documents (to count its tokens).

    Args:
        query: the query.
        documents: the documents, in the order sent.
        instruction: the call's ``instruction`` (rendered in an ``<instruct>`` block), if any.

    Returns:
        The prompt text, chat markers included.

    Examples:
        >>> prompt = listwise_prompt("cats", ["a cat", "a dog"])
        >>> prompt.count("<|embed_token|>"), prompt.count("<|rerank_token|>")
        (2, 1)
    """
    docs = [_without_embed_tokens(doc) for doc in documents]
    query = _without_embed_tokens(query)
    body = (
        f"I will provide you with {len(docs)} passages, each indicated by a numerical identifier. "
        f"Rank the passages based on their relevance to query: {query}\n"
    )
    if instruction:
        body += f"<instruct>\n{_without_embed_tokens(instruction)}\n</instruct>\n"
    passages = (f'<passage id="{i}">\n{doc}{DOCUMENT_EMBED_TOKEN}\n</passage>' for i, doc in enumerate(docs))
    body += "\n".join(passages) + f"\n<query>\n{query}{QUERY_EMBED_TOKEN}\n</query>"
    return (
        f"<|im_start|>system\n{LISTWISE_SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n{body}<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )


def too_long_message(count: int, fitting: int | None, limit: int | None) -> str:
    """What to say when a listwise list is over the model's context.

    Args:
        count: the documents sent.
        fitting: how many of the first documents fit (``None`` if they could not be counted).
        limit: the model's context length, if known.

    Examples:
        >>> too_long_message(200, 137, 8192)[:72]
        'a listwise reranker reads the query and all 200 documents as one prompt,'
    """
    context = f" of {limit} tokens" if limit else ""
    fits = f"; the first {fitting} fit" if fitting is not None else ""
    return (
        f"a listwise reranker reads the query and all {count} documents as one prompt, which is over its "
        f"context{context}{fits}. The list is not split (each score depends on the whole list): rerank fewer "
        "or shorter documents (max_tokens_per_doc), or serve the model with a larger --max-model-len."
    )
