"""Reading a server's error answer: the body shapes vLLM has used, and its wordings mapped to the tree.

:func:`error_from_response` builds the most specific :class:`~vllm_tasks.APIStatusError` for a status
>= 400 (``responses.server_error`` does the same for a 2xx whose body is vLLM's error object). vLLM's
wordings that users act on set the error's ``kind`` (``ContextLengthExceeded`` is also its own class).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

import httpx

from .errors import (
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    ContextLengthExceeded,
    EndpointNotServed,
    GatewayTimeoutError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    RequestTooLargeError,
    ServiceUnavailableError,
    UnprocessableEntityError,
)
from .tasks import TASK_ROUTES, TaskName, TaskRoute, task_for_path

_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: RequestTooLargeError,
    422: UnprocessableEntityError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}

GATEWAY_TIMEOUT_FIX = (
    "A proxy in front of vLLM gave up waiting for the answer: raise its read timeout (nginx: "
    "proxy_read_timeout) or send less per request (a smaller batch_size)."
)
MATRYOSHKA_FIX = (
    "The operator can serve the model as Matryoshka with `--hf-overrides '{\"is_matryoshka\": true}'` "
    "or `--hf-overrides '{\"matryoshka_dimensions\": [...]}'`; otherwise leave `dimensions` unset."
)
AUDIO_TOO_LARGE_FIX = (
    "Split the audio client-side (chunking='auto') or raise the server's VLLM_MAX_AUDIO_CLIP_FILESIZE_MB."
)

# vLLM's wordings of an over-long input, 0.11 to 0.32 (each seen on a real server):
#   0.11-0.32  "This model's maximum context length is 256 tokens. However, your request has 602 input tokens"
#              "... However, you requested 604 tokens in the input for score"
#              "... However, your prompt contains at least 257 input tokens"
#   0.16       "You passed 257 input tokens and requested 0 output tokens. However, the model's context
#              length is only 256 tokens"
_CONTEXT_MAX_RE = re.compile(r"(?:maximum context length is|context length is only) (?P<max>\d+) tokens")
# Only a count of tokens: a bi-encoder's /score and /rerank say "contains 5130 characters (more than
# 4608 characters, ...)" for text over the character bound, which is not a token count.
_CONTEXT_TOKENS_RE = re.compile(
    r"(?:contains (?:at least )?|request has |requested |passed )(?P<n>\d+) (?:input )?tokens"
)
_PARAM_SUFFIX_RE = re.compile(r"\(parameter=(?P<param>[^,]+), value=.*\)\s*$", re.DOTALL)
# vLLM 0.11 answers a mounted route of an inactive task with 400 where later versions say 501.
_INACTIVE_TASK_RE = re.compile(r"The model does not support \w+ API")
# vLLM >= 0.33 serves /v1/embeddings of a token_embed model with a handler that takes "float" only
# (entrypoints/pooling/token_embed/protocol.py): anything else fails its validation with this.
_TOKEN_EMBED_ROUTE_PARAM = "body.encoding_format"
# Literal["float"] alone: the embed route's own literal error lists 'float', 'base64', ... after it.
_TOKEN_EMBED_ROUTE_MESSAGE = re.compile(r"Input should be 'float'(?!, '| or ')")
TOKEN_EMBED_ACTIVE = (
    "This server's model has token_embed active, which vLLM >= 0.33 serves on /v1/embeddings as one vector "
    'per token (float only): use pool(task="token_embed") for those, or serve the model with '
    '--pooler-config \'{"task": "embed"}\' for one vector per input.'
)
# "only supports [128, 256, 384] matryoshka dimensions" (up to 0.25) and the 0.26+ wordings.
_MATRYOSHKA_RE = re.compile(
    r"does not support matryoshka|only supports .*matryoshka dimensions|only supports dimensions in range"
    r"|dimensions must be less than or equal",
    re.IGNORECASE,
)


def parse_error_body(response: httpx.Response) -> tuple[str, str | None, object]:
    """Extract ``(message, param, body)`` from any error body shape vLLM has used.

    Handles the nested body (``{"error": {"message", "type", "param", "code"}}``, vLLM >= 0.10.1), the
    flat body of older servers (``{"object": "error", "message", ...}``), ``{"error": "Unauthorized"}``,
    FastAPI's ``{"detail": ...}`` (a string or a list of validation errors), plain text and empty bodies.

    Examples:
        >>> parse_error_body(httpx.Response(400, json={"error": {"message": "bad", "param": "input"}}))[:2]
        ('bad', 'input')
    """
    text = response.text
    try:
        body: object = json.loads(text) if text.strip() else None
    except ValueError:
        body = text
    message: str | None = None
    param: str | None = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            message = _as_text(error.get("message"))
            param = _as_text(error.get("param"))
        elif isinstance(error, str):
            message = error
        elif "message" in body:
            message = _as_text(body.get("message"))
            param = _as_text(body.get("param"))
        elif "detail" in body:
            detail = body["detail"]
            message = detail if isinstance(detail, str) else json.dumps(detail)
    elif isinstance(body, str):
        message = body.strip()[:2000]
    if not message:
        message = response.reason_phrase or f"HTTP {response.status_code}"
    if param is None:
        match = _PARAM_SUFFIX_RE.search(message)
        if match:
            param = match["param"].strip()
    return message, param, body


def error_from_response(
    response: httpx.Response,
    *,
    task: TaskName | None = None,
    method: str | None = None,
    url: str | None = None,
) -> APIStatusError:
    """Build the most specific :class:`~vllm_tasks.APIStatusError` for an error response.

    Args:
        response: the server's response (status >= 400), body already read.
        task: the task the request was for; sharpens :class:`~vllm_tasks.EndpointNotServed` messages.
        method: the request method, for the message.
        url: the request URL, for the message (credentials are removed).

    Returns:
        The exception to raise; vLLM's wordings users act on set its ``kind``.
    """
    status = response.status_code
    message, param, body = parse_error_body(response)
    try:
        request: httpx.Request | None = response.request
    except RuntimeError:  # a response built by hand has no request
        request = None
    if method is None and request is not None:
        method = request.method
    if url is None and request is not None:
        url = str(request.url)
    path = urlsplit(url).path if url else ""
    route = TASK_ROUTES.get(task) if task else task_for_path(path)
    kwargs: dict[str, Any] = {
        "status_code": status,
        "param": param,
        "request_id": response.headers.get("x-request-id"),
        "body": body,
        "headers": response.headers,
        "method": method,
        "url": url,
    }
    lowered = message.lower()
    if (
        (status == 404 and message == "Not Found")
        or (status == 501 and "does not support" in lowered)
        or (status == 400 and _INACTIVE_TASK_RE.search(message))
    ):
        not_served = EndpointNotServed(_not_served_message(status, route, path), **kwargs)
        not_served.task = route.task if route else None
        not_served.reason = "not_mounted" if status == 404 else "inactive"
        return not_served
    if (
        status == 400
        and path == "/v1/embeddings"
        and param == _TOKEN_EMBED_ROUTE_PARAM
        and _TOKEN_EMBED_ROUTE_MESSAGE.search(message)
    ):
        not_served = EndpointNotServed(f"{TOKEN_EMBED_ACTIVE} ({message})", **kwargs)
        not_served.task, not_served.reason = "embed", "inactive"
        return not_served
    if status == 404 and "does not exist" in lowered and "model" in lowered:
        return NotFoundError(message, kind="model_not_found", **kwargs)
    if status == 400:
        limit = _CONTEXT_MAX_RE.search(message)
        if limit or "maximum context length" in lowered:
            exceeded = ContextLengthExceeded(message, **kwargs)
            tokens = _CONTEXT_TOKENS_RE.search(message)
            exceeded.max_model_len = int(limit["max"]) if limit else None
            exceeded.prompt_tokens = int(tokens["n"]) if tokens else None
            return exceeded
        if _MATRYOSHKA_RE.search(message):
            return BadRequestError(f"{message} {MATRYOSHKA_FIX}", kind="matryoshka_not_supported", **kwargs)
        if "unsupported input_type" in lowered:
            return BadRequestError(message, kind="input_type_not_supported", **kwargs)
        if "maximum file size exceeded" in lowered:
            return BadRequestError(f"{message} {AUDIO_TOO_LARGE_FIX}", kind="audio_too_large", **kwargs)
    if status == 504:
        return GatewayTimeoutError(f"{message} {GATEWAY_TIMEOUT_FIX}", **kwargs)
    cls = _BY_STATUS.get(status, InternalServerError if status >= 500 else APIStatusError)
    return cls(message, **kwargs)


def _not_served_message(status: int, route: TaskRoute | None, path: str) -> str:
    if route is not None:
        what = "mounts the route but its active task is another one" if status == 501 else "lacks it"
        return (
            f"This server does not serve the `{route.task}` task ({route.path} answered {status}: the "
            f"model {what}). To serve it, {route.how_to_serve}."
        )
    return f"This server does not serve {path or 'this route'} (HTTP {status})."


def _as_text(value: object) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)
