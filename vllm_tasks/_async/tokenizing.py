"""The server's tokenizer: the public ``tokenize()`` / ``detokenize()``, token counts (``POST /tokenize``)
for naming an over-long input, and cutting texts to a number of tokens (``/tokenize`` + ``/detokenize``)
where the server cannot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt

from .. import defaults, tokenizing
from ..adaptive import Concurrency
from ..calls import CLIENT_DEFAULT, CallOptions, TimeoutLike, resolve_model
from ..errors import APIError, VLLMTasksError
from ..responses import json_object
from ..transport import Request
from ..types.tokens import TokenizeResult
from .base import AsyncClientBase
from .transport import AsyncTransport


async def count_longest(
    transport: AsyncTransport,
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
    """
    texts = [index for index, value in enumerate(values) if isinstance(value, str)]
    longest = sorted(texts, key=lambda index: -len(str(values[index])))[:limit]
    requests = [
        Request(
            "POST",
            "/tokenize",
            json=_tokenize_body(model, values[i]),
            raise_for_status=False,
            retry=False,
        )
        for i in longest
    ]
    try:
        responses = await transport.send_all(requests, concurrency=defaults.CONCURRENCY)
    except APIError:
        return {}
    counts: dict[int, int] = {}
    for index, response in zip(longest, responses, strict=True):
        counts[index] = _count(response)
    return counts


async def longest_fitting_prefix(
    transport: AsyncTransport, prompt_of: Callable[[int], str], count: int, limit: int, model: str | None
) -> int | None:
    """The most leading items, of ``count``, whose prompt is at most ``limit`` tokens (``/tokenize``).

    A binary search: ``prompt_of(k)`` is the prompt holding the first ``k`` items, and its token count
    grows with ``k``; ``count`` items are known not to fit. About log2(count) requests, one at a time.

    Returns:
        The number of items that fit (0 if none does), or ``None`` when ``/tokenize`` fails (it only
        explains another error, so it is not retried).
    """
    fits, over = 0, count
    while over - fits > 1:
        middle = (fits + over) // 2
        request = Request(
            "POST",
            "/tokenize",
            json=_tokenize_body(model, prompt_of(middle)),
            raise_for_status=False,
            retry=False,
        )
        try:
            tokens = _count(await transport.send(request))
        except APIError:
            return None
        if not tokens:
            return None
        fits, over = (middle, over) if tokens <= limit else (fits, middle)
    return fits


def _tokenize_body(model: str | None, prompt: object) -> dict[str, Any]:
    return {key: value for key, value in (("model", model), ("prompt", prompt)) if value is not None}


def _count(response: httpx.Response) -> int:
    """The ``count`` of a ``/tokenize`` answer; 0 for anything else (it only explains another error)."""
    if response.status_code != 200:
        return 0
    try:
        count = json_object(response, "/tokenize").get("count")
    except VLLMTasksError:
        return 0
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


async def truncate_texts(
    transport: AsyncTransport,
    texts: Sequence[str],
    limit: int,
    model: str | None,
    *,
    concurrency: Concurrency = defaults.CONCURRENCY,
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
        concurrency: requests in flight at once, or ``"auto"``.
        headers: extra headers for the requests.
        timeout: per-request timeout.

    Returns:
        The texts, truncated where needed, in order.

    Raises:
        APIStatusError: when ``/tokenize`` or ``/detokenize`` fails.
        APIError: when their answer is not a JSON object.
    """

    def request(path: str, **fields: Any) -> Request:
        body = {key: value for key, value in {"model": model, **fields}.items() if value is not None}
        return Request("POST", path, json=body, headers=headers, timeout=timeout)

    counted = await transport.send_all(
        [request("/tokenize", prompt=text, add_special_tokens=False) for text in texts], concurrency
    )
    cut = _over_limit(counted, limit)
    out = list(texts)
    if cut:
        decoded = await transport.send_all(
            [request("/detokenize", tokens=kept) for _, kept in cut], concurrency
        )
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


class AsyncTokenizerMethods(AsyncClientBase):
    """``tokenize`` and ``detokenize``: the served model's own tokenizer, over ``/tokenize`` and
    ``/detokenize`` (mounted on every vLLM server, whatever its task; not guarded by ``--api-key``)."""

    async def tokenize(
        self,
        text: str,
        *,
        add_special_tokens: bool = True,
        return_token_strs: bool = False,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> TokenizeResult:
        """Tokenize a text with the served model's tokenizer: how many tokens it is against the model's
        context, before embedding or scoring it.

        Args:
            text: the text.
            add_special_tokens: count the model's special tokens (``[CLS]``, ``[SEP]``, ...) as the
                embedding and scoring routes add them.
            return_token_strs: also return each token's text.
            model: served model name (default: the client's, else the server's first).
            extra_body: extra JSON fields merged into the request.
            extra_headers: extra headers for the request.
            timeout: request timeout (default: the client's).

        Returns:
            TokenizeResult: ``.tokens`` (int64 array), ``.count``, ``.max_model_len``, ``.token_strs``.

        Raises:
            InvalidInputError: ``text`` is not a str, before any request.
            NotFoundError: the server serves no model of that name.

        Examples:
            >>> result = await client.tokenize("hello world", return_token_strs=True)
            >>> result.count, result.token_strs
            (4, ['[CLS]', 'hello', 'world', '[SEP]'])
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        request = tokenizing.tokenize_request(
            text,
            add_special_tokens=add_special_tokens,
            return_token_strs=return_token_strs,
            model=resolve_model(await self.server_info(), model, self.model),
            call=call,
        )
        return self._counted(tokenizing.parse_tokenize(await self._transport.send(request)))

    async def detokenize(
        self,
        tokens: Sequence[int] | npt.NDArray[np.integer[Any]],
        *,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> str:
        """The text of token ids, decoded by the served model's tokenizer.

        Args:
            tokens: token ids (a list of ints >= 0, or a 1-D integer array such as ``tokenize()``'s).
            model: served model name (default: the client's, else the server's first).
            extra_body: extra JSON fields merged into the request.
            extra_headers: extra headers for the request.
            timeout: request timeout (default: the client's).

        Returns:
            The decoded text (an uncased tokenizer gives it lowercased).

        Raises:
            InvalidInputError: an empty list or a bad id (naming ``tokens[j]``), before any request.

        Examples:
            >>> await client.detokenize((await client.tokenize("Hello world")).tokens)
            '[CLS] hello world [SEP]'
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        request = tokenizing.detokenize_request(
            tokens, model=resolve_model(await self.server_info(), model, self.model), call=call
        )
        return tokenizing.parse_detokenize(await self._transport.send(request))
