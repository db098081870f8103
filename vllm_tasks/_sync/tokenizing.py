# GENERATED from vllm_tasks/_async/tokenizing.py by scripts/unasync.py: do not edit.
"""The server's tokenizer: token counts (``POST /tokenize``) for naming an over-long input, and cutting
texts to a number of tokens (``/tokenize`` + ``/detokenize``) where the server cannot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from .. import defaults
from ..calls import CLIENT_DEFAULT, TimeoutLike
from ..errors import APIError, VLLMTasksError
from ..responses import json_object
from ..transport import Request
from .transport import SyncTransport


def count_longest(
    transport: SyncTransport,
    values: Sequence[object],
    model: str | None,
    *,
    limit: int = defaults.LOCATE_MAX_TOKENIZE,
) -> dict[int, int]:
    """Token counts of the longest string ``values`` (at most ``limit`` of them), by index.

    Used after a context-length error to name the input that caused it; a ``/tokenize`` that fails
    counts as 0 and is not retried (the error being explained is what the caller raises). vLLM 0.19.1's
    ``/tokenize`` drops the connection for a text over the model's length instead of answering; then no
    counts come back.

    Examples:
        >>> count_longest(transport, ["short", "a much longer text"], "minilm")
        {1: 6, 0: 3}
    """
    texts = [index for index, value in enumerate(values) if isinstance(value, str)]
    longest = sorted(texts, key=lambda index: -len(str(values[index])))[:limit]
    requests = [
        Request(
            "POST",
            "/tokenize",
            json={
                key: value for key, value in (("model", model), ("prompt", values[i])) if value is not None
            },
            raise_for_status=False,
            retry=False,
        )
        for i in longest
    ]
    try:
        responses = transport.send_all(requests, concurrency=defaults.CONCURRENCY)
    except APIError:
        return {}
    counts: dict[int, int] = {}
    for index, response in zip(longest, responses, strict=True):
        counts[index] = _count(response)
    return counts


def _count(response: httpx.Response) -> int:
    """The ``count`` of a ``/tokenize`` answer; 0 for anything else (it only explains another error)."""
    if response.status_code != 200:
        return 0
    try:
        count = json_object(response, "/tokenize").get("count")
    except VLLMTasksError:
        return 0
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


def truncate_texts(
    transport: SyncTransport,
    texts: Sequence[str],
    limit: int,
    model: str | None,
    *,
    concurrency: int = defaults.CONCURRENCY,
    headers: Mapping[str, str] | None = None,
    timeout: TimeoutLike = CLIENT_DEFAULT,
) -> list[str]:
    """Cut each text to its first ``limit`` tokens with the server's tokenizer.

    ``POST /tokenize`` (without special tokens) counts each text; texts over the limit are rebuilt from
    their first ``limit`` tokens with ``POST /detokenize``. This is the client-side stand-in for
    ``max_tokens_per_doc`` on vLLM < 0.20.0; decoding may normalise the text (an uncased tokenizer
    lowercases it), which the model would have done anyway.

    Args:
        transport: the client's transport.
        texts: the texts to cut.
        limit: the most tokens each may keep.
        model: the served model whose tokenizer counts.
        concurrency: requests in flight at once.
        headers: extra headers for the requests.
        timeout: per-request timeout.

    Returns:
        The texts, truncated where needed, in order.

    Raises:
        APIStatusError: when ``/tokenize`` or ``/detokenize`` fails.
        APIError: when their answer is not a JSON object.

    Examples:
        >>> truncate_texts(transport, ["a very long text ..."], 3, "minilm")
        ['a very long']
    """

    def request(path: str, **fields: Any) -> Request:
        body = {key: value for key, value in {"model": model, **fields}.items() if value is not None}
        return Request("POST", path, json=body, headers=headers, timeout=timeout)

    counted = transport.send_all(
        [request("/tokenize", prompt=text, add_special_tokens=False) for text in texts], concurrency
    )
    cut = _over_limit(counted, limit)
    out = list(texts)
    if cut:
        decoded = transport.send_all([request("/detokenize", tokens=kept) for _, kept in cut], concurrency)
        for (index, _), response in zip(cut, decoded, strict=True):
            prompt = json_object(response, "/detokenize").get("prompt")
            if isinstance(prompt, str):
                out[index] = prompt
    return out


def _over_limit(responses: Sequence[httpx.Response], limit: int) -> list[tuple[int, list[int]]]:
    """(index, first ``limit`` tokens) of each ``/tokenize`` answer with more than ``limit`` tokens."""
    cut = []
    for index, response in enumerate(responses):
        tokens = json_object(response, "/tokenize").get("tokens")
        if isinstance(tokens, list) and len(tokens) > limit:
            cut.append((index, tokens[:limit]))
    return cut
