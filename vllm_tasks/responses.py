"""Reading a server's JSON answers into Python objects, with a typed error for anything else."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from .errors import APIError


def json_object(response: httpx.Response, what: str) -> dict[str, Any]:
    """The JSON object of a response body (parsed with orjson, several times faster than ``json``).

    Args:
        response: a read response.
        what: the route, for the error message (e.g. ``"/rerank"``).

    Raises:
        APIError: the body is not JSON, or not a JSON object.

    Example:
        >>> json_object(httpx.Response(200, json={"count": 3}), "/tokenize")
        {'count': 3}
    """
    try:
        payload = orjson.loads(response.content)
    except orjson.JSONDecodeError as error:
        raise APIError(f"{what}: the server's answer is not JSON: {response.text[:200]!r}") from error
    if not isinstance(payload, dict):
        raise APIError(f"{what}: unexpected answer {str(payload)[:200]!r}")
    return payload
