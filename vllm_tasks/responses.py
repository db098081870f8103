"""Checking a server's answers before they are read: status, body, content type, vLLM's error object.

Every parser of a vLLM answer goes through these helpers, so that only :class:`~vllm_tasks.errors.
VLLMTasksError` subclasses escape for any answer: a proxy's redirect, an empty body, an HTML page or a
body of the wrong shape is an :class:`~vllm_tasks.errors.UnexpectedResponse` naming the status, the URL
and what to check; a 200 whose body is vLLM's error object is raised as the server's error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import httpx
import orjson
from pydantic import BaseModel, ValidationError

from .errors import APIStatusError, UnexpectedResponse
from .server_errors import error_from_response
from .tasks import TaskName
from .types.common import Usage

PROXY_HINT = (
    "a proxy or load balancer answered instead of vLLM? Check the base URL (scheme, host, port, path "
    "prefix) and the proxy's configuration"
)
_JSON_TYPES = ("", "text/plain")
"""Media types besides ``*json*`` whose body is read as JSON (a mock or a minimal server)."""


def media_type(response: httpx.Response) -> str:
    """The response's media type, lower case, without parameters (``""`` when absent).

    Examples:
        >>> media_type(httpx.Response(200, headers={"content-type": "Text/HTML; charset=utf-8"}))
        'text/html'
    """
    value: str = response.headers.get("content-type", "")
    return value.split(";", 1)[0].strip().lower()


def request_of(response: httpx.Response) -> httpx.Request | None:
    """The request ``response`` answers, or ``None`` for a response built by hand.

    Examples:
        >>> request_of(httpx.Response(200)) is None
        True
    """
    try:
        return response.request
    except RuntimeError:  # a response built by hand has no request
        return None


def unexpected(response: httpx.Response, what: str, problem: str, *, hint: bool = True) -> UnexpectedResponse:
    """An :class:`UnexpectedResponse` for ``response``: ``what`` (the route), the problem, the status,
    the request's method and URL and the content type, plus the proxy hint when ``hint``.

    Examples:
        >>> str(unexpected(httpx.Response(204), "/v1/embeddings", "an empty body"))[:40]
        '/v1/embeddings: an empty body (HTTP 204 '
    """
    request = request_of(response)
    method = request.method if request is not None else None
    url = str(request.url) if request is not None else None
    content_type = response.headers.get("content-type", "")
    where = f"HTTP {response.status_code}"
    if response.reason_phrase:
        where += f" {response.reason_phrase}"
    if request is not None:
        where += f" from {method} {url}"
    if content_type:
        where += f", Content-Type {content_type}"
    message = f"{what}: {problem} ({where})"
    if hint:
        message += f"; {PROXY_HINT}."
    return UnexpectedResponse(
        message, status_code=response.status_code, content_type=content_type, method=method, url=url
    )


def check_status(response: httpx.Response, what: str) -> None:
    """Refuse a status vLLM does not answer with success: 1xx, 3xx (the client does not follow
    redirects), 204, and an empty body with any 2xx. Error statuses (>= 400) are not checked here.

    Raises:
        UnexpectedResponse: naming the status, the URL and (for a redirect) where it points.

    Examples:
        >>> check_status(httpx.Response(200, json={}), "/v1/models")
    """
    status = response.status_code
    if status >= 400:
        return
    if 300 <= status < 400:
        location = response.headers.get("location")
        target = f" to {location}" if location else ""
        raise unexpected(
            response,
            what,
            f"a redirect{target}, which the client does not follow (use the final URL as base_url)",
        )
    if status < 200 or status >= 300:
        raise unexpected(response, what, "a status vLLM does not answer with")
    if status == 204 or not response.content:
        raise unexpected(response, what, "an empty body")


def server_error(
    response: httpx.Response, payload: object, *, task: TaskName | None = None
) -> APIStatusError | None:
    """The server's error when a 2xx body is vLLM's error object, else ``None``.

    vLLM's error bodies are ``{"object": "error", "message", "type", "param", "code"}`` (before 0.10.1)
    and ``{"error": {"message", "type", "param", "code"}}``; ``code`` (else 500) picks the error class
    as :func:`~vllm_tasks.server_errors.error_from_response` does for an error status.

    Examples:
        >>> body = {"object": "error", "message": "bad", "code": 400}
        >>> type(server_error(httpx.Response(200, json=body), body)).__name__
        'BadRequestError'
    """
    if not isinstance(payload, Mapping):
        return None
    nested = payload.get("error")
    if payload.get("object") == "error":
        code = payload.get("code")
    elif isinstance(nested, Mapping) and "message" in nested:
        code = nested.get("code")
    else:
        return None
    status = code if isinstance(code, int) and not isinstance(code, bool) and 400 <= code < 600 else 500
    request = request_of(response)
    as_error = httpx.Response(status, headers=response.headers, content=response.content, request=request)
    return error_from_response(as_error, task=task)


def json_value(response: httpx.Response, what: str, *, task: TaskName | None = None) -> Any:
    """The JSON value of a checked response body (parsed with orjson).

    Raises:
        UnexpectedResponse: a status :func:`check_status` refuses, a body that is not JSON, or a
            content type that is not JSON (an HTML page).
        APIStatusError: the body is vLLM's error object (see :func:`server_error`).

    Examples:
        >>> json_value(httpx.Response(200, json=[1, 2]), "/x")
        [1, 2]
    """
    check_status(response, what)
    kind = media_type(response)
    if "json" not in kind and kind not in _JSON_TYPES:
        raise unexpected(response, what, f"a {kind} body where JSON was expected: {_head(response)}")
    try:
        payload = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        raise unexpected(response, what, f"the server's answer is not JSON: {_head(response)}") from None
    error = server_error(response, payload, task=task)
    if error is not None:
        raise error
    return payload


def json_object(response: httpx.Response, what: str, *, task: TaskName | None = None) -> dict[str, Any]:
    """The JSON object of a response body (parsed with orjson, several times faster than ``json``).

    Args:
        response: a read response.
        what: the route, for the error message (e.g. ``"/rerank"``).
        task: the task asked for, to name it in the error of a 200 error object.

    Raises:
        UnexpectedResponse: not a 2xx with a body, not JSON, or not a JSON object.
        APIStatusError: the body is vLLM's error object.

    Examples:
        >>> json_object(httpx.Response(200, json={"count": 3}), "/tokenize")
        {'count': 3}
    """
    payload = json_value(response, what, task=task)
    if not isinstance(payload, dict):
        kind = type(payload).__name__
        raise unexpected(response, what, f"unexpected answer: a JSON {kind} where an object was expected")
    return payload


def malformed(response: httpx.Response, what: str, problem: str) -> UnexpectedResponse:
    """An :class:`UnexpectedResponse` for a JSON body of the wrong shape (no proxy hint: it is JSON).

    Examples:
        >>> malformed(httpx.Response(200, json={}), "/score", "no 'data' list").status_code
        200
    """
    return unexpected(response, what, f"{problem}: {_head(response)}", hint=False)


def _head(response: httpx.Response, limit: int = 200) -> str:
    """The first ``limit`` characters of the body, for a message."""
    return repr(response.content[:limit].decode("utf-8", "replace"))


def index_problem(items: Sequence[Any]) -> str | None:
    """Why ``items`` are not objects whose integer ``index`` values are exactly ``0..n-1`` (any order),
    or ``None`` when they are.

    Examples:
        >>> index_problem([{"index": 0}, {"index": 0}])
        'indices must be exactly 0..1, got [0, 0]'
    """
    if not all(isinstance(item, dict) for item in items):
        return "an item is not a JSON object"
    indices = [item.get("index") for item in items]
    if any(type(index) is not int for index in indices) or sorted(indices) != list(range(len(items))):
        return f"indices must be exactly 0..{len(items) - 1}, got {indices[:20]}"
    return None


def in_index_order(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``items`` placed by their ``index`` (checked first with :func:`index_problem`).

    Examples:
        >>> in_index_order([{"index": 1}, {"index": 0}])
        [{'index': 0}, {'index': 1}]
    """
    ordered: list[dict[str, Any]] = list(items)
    for item in items:
        ordered[item["index"]] = item
    return ordered


Model = TypeVar("Model", bound=BaseModel)


def validated(response: httpx.Response, what: str, cls: type[Model], value: object) -> Model:
    """``cls.model_validate(value)``, a body field of the wrong shape being an :class:`UnexpectedResponse`.

    Examples:
        >>> validated(httpx.Response(200, json={}), "/x", Usage, {"prompt_tokens": 3}).prompt_tokens
        3
    """
    try:
        return cls.model_validate(value)
    except ValidationError as error:
        detail = str(error).replace("\n", " ")[:300]
        raise malformed(response, what, f"an invalid {cls.__name__} ({detail})") from None


def usage_of(response: httpx.Response, what: str, value: object) -> Usage:
    """The ``usage`` field of a body as :class:`Usage` (absent or ``null``: zeros).

    Raises:
        UnexpectedResponse: ``usage`` is not an object of token counts.
    """
    return Usage() if value is None else validated(response, what, Usage, value)


def text_or_none(value: object) -> str | None:
    """``value`` when it is a string, else ``None`` (e.g. a body's ``model`` field).

    Examples:
        >>> text_or_none(3) is None
        True
    """
    return value if isinstance(value, str) else None
