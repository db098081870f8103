"""Pure parts of ``tokenize()`` / ``detokenize()``: the requests to ``POST /tokenize`` and
``POST /detokenize``, and their answers read into results. Sending lives in ``_async/tokenizing.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from .calls import CallOptions
from .errors import InvalidInputError
from .responses import json_object, malformed
from .transport import Request
from .types.tokens import TokenizeResult
from .validation import token_ids

TOKENIZE_PATH = "/tokenize"
DETOKENIZE_PATH = "/detokenize"


def tokenize_request(
    text: str, *, add_special_tokens: bool, return_token_strs: bool, model: str | None, call: CallOptions
) -> Request:
    """The ``POST /tokenize`` request for one text.

    Raises:
        InvalidInputError: ``text`` is not a str.

    Examples:
        >>> tokenize_request("hi", add_special_tokens=True, return_token_strs=False, model="m",
        ...                  call=CallOptions()).json
        {'model': 'm', 'prompt': 'hi', 'add_special_tokens': True}
    """
    if not isinstance(text, str):
        raise InvalidInputError("text", text, "must be a str", "Tokenize one text per call.")
    body: dict[str, Any] = {"prompt": text, "add_special_tokens": add_special_tokens}
    if return_token_strs:
        body["return_token_strs"] = True
    return _request(TOKENIZE_PATH, body, model, call)


def detokenize_request(tokens: Sequence[int] | Any, *, model: str | None, call: CallOptions) -> Request:
    """The ``POST /detokenize`` request for token ids (a list or a 1-D integer array).

    Raises:
        InvalidInputError: ``tokens`` is not a sequence of ints >= 0.

    Examples:
        >>> detokenize_request([101, 7592], model=None, call=CallOptions()).json
        {'tokens': [101, 7592]}
    """
    if isinstance(tokens, np.ndarray):
        tokens = tokens.tolist()
    ids = token_ids("tokens", tokens)
    return _request(DETOKENIZE_PATH, {"tokens": ids}, model, call)


def _request(path: str, body: dict[str, Any], model: str | None, call: CallOptions) -> Request:
    body = {**({"model": model} if model else {}), **body, **(call.extra_body or {})}
    return Request("POST", path, json=body, headers=call.extra_headers, timeout=call.timeout)


def parse_tokenize(response: httpx.Response) -> TokenizeResult:
    """A ``/tokenize`` answer as a :class:`~vllm_tasks.types.tokens.TokenizeResult`.

    Raises:
        UnexpectedResponse: the answer has no list of token ids (ints >= 0) as ``tokens``.
    """
    payload = json_object(response, TOKENIZE_PATH)
    tokens = payload.get("tokens")
    if not isinstance(tokens, list) or not all(_is_token_id(token) for token in tokens):
        raise malformed(response, TOKENIZE_PATH, "`tokens` is not a list of token ids (ints >= 0)")
    strings = payload.get("token_strs")
    limit = payload.get("max_model_len")
    return TokenizeResult(
        tokens=np.asarray(tokens, dtype=np.int64),
        max_model_len=limit if isinstance(limit, int) else None,
        token_strs=[str(s) for s in strings] if isinstance(strings, list) else None,
    )


def _is_token_id(value: object) -> bool:
    return type(value) is int and 0 <= value <= np.iinfo(np.int64).max


def parse_detokenize(response: httpx.Response) -> str:
    """The text of a ``/detokenize`` answer.

    Raises:
        UnexpectedResponse: the answer has no string ``prompt``.
    """
    prompt = json_object(response, DETOKENIZE_PATH).get("prompt")
    if not isinstance(prompt, str):
        raise malformed(response, DETOKENIZE_PATH, "`prompt` is not a string")
    return prompt
