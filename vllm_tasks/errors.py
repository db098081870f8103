"""The exception tree of vllm_tasks and the mapping from a server's error response to it.

Every exception raised by the SDK derives from :class:`VLLMTasksError`::

    VLLMTasksError
    ├── InvalidInputError (also ValueError)   bad argument, caught before any request
    │   ├── AudioDecodeError                  unreadable audio input (names the file and the reason)
    │   │   └── AudioFetchError               an audio URL could not be fetched client-side
    │   ├── InputFetchError                   a user-given URL could not be fetched client-side
    │   └── ImageError                        image not decodable / not fetchable (client-side)
    │       ├── ImageTooLarge                 over PIL's bomb limit or the size limit
    │       └── ImageFetchError               an image URL could not be fetched client-side
    ├── MissingDependency (also ImportError)  an optional package is not installed (names the extra)
    ├── UnsupportedByServer                   feature needs a newer vLLM or a server flag
    ├── ServerNotReady                        wait_until_ready() ran out of time
    ├── JobError                              a batch job (vllm_tasks.jobs) cannot start or go on
    │   ├── JobMismatch                       a checkpoint or finished output belongs to another job
    │   ├── ReplicaMismatch                   the servers of one job serve different models
    │   ├── RowFailed                         a row the server refused, with fail_fast
    │   └── InsufficientDiskSpace (also OSError)  the output does not fit on its disk
    └── APIError
        ├── APIConnectionError
        │   └── APITimeoutError
        ├── StreamError                       an error frame inside a 200 event stream
        ├── DimensionsNotApplied              vectors came back wider than `dimensions`
        └── APIStatusError                    the server answered >= 400
            ├── BadRequestError (400)
            │   ├── ContextLengthExceeded
            │   ├── MatryoshkaNotSupported
            │   ├── InputTypeNotSupported
            │   └── AudioTooLarge
            ├── AuthenticationError (401)
            ├── PermissionDeniedError (403)
            ├── NotFoundError (404)
            │   └── ModelNotFoundError
            ├── EndpointNotServed (404 route not mounted / 501 task inactive)
            ├── ConflictError (409)
            ├── RequestTooLargeError (413)
            ├── UnprocessableEntityError (422)
            ├── RateLimitError (429)
            └── InternalServerError (>= 500)
                ├── ServiceUnavailableError (503)
                └── GatewayTimeoutError (504)         a proxy in front stopped waiting

No exception stores request headers, so the API key can never surface in a message, a repr, a log
line or an exception chain.
"""

from __future__ import annotations

import json
import pickle
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from .tasks import TASK_ROUTES, TaskName, TaskRoute, task_for_path


class VLLMTasksError(Exception):
    """Base class of every exception raised by vllm_tasks.

    Credentials in URLs (``http://user:KEY@host``) are removed from the message. Every subclass pickles
    (for ``multiprocessing``, ``concurrent.futures.ProcessPoolExecutor``, Ray, Spark): a round trip keeps
    the type, the message and every attribute (a value that cannot be pickled comes back as its repr).
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact_text(arg) if isinstance(arg, str) else arg for arg in args))

    def __reduce__(self) -> tuple[Any, ...]:
        # The default rebuilds through cls(*self.args), which fails for any __init__ with another
        # signature; restore args and attributes without calling __init__ instead.
        return (_restore_error, (type(self), self.args), _picklable_state(self))


class InvalidInputError(VLLMTasksError, ValueError):
    """An argument is invalid; raised before any request is sent.

    Attributes:
        field: the argument's name (dotted for nested values, e.g. ``input[3]``).
        value: the offending value (shortened in the message).
        fix: what to do instead.
    """

    def __init__(self, field: str, value: object, problem: str, fix: str) -> None:
        self.field = field
        self.value = value
        self.fix = fix
        super().__init__(f"{field}={_short(value)}: {problem}. {fix}")


class ImageError(InvalidInputError):
    """An image cannot be sent: it does not decode, or it is not an image; found before upload."""


class ImageTooLarge(ImageError):
    """An image is over PIL's decompression-bomb limit (the server would answer 500) or over the size
    limit with downscaling turned off.

    Attributes:
        size: ``(width, height)`` in pixels, when known.
    """

    size: tuple[int, int] | None = None


class InputFetchError(InvalidInputError):
    """A user-given URL (an image or audio file) could not be fetched client-side.

    Attributes:
        source: the URL.
        reason: what went wrong (unreachable host, error status).
    """

    def __init__(self, field: str, url: str, reason: str) -> None:
        url = redact_url(url)
        self.source = url
        self.reason = redact_text(reason)
        # Called directly: subclasses also derive from errors whose __init__ takes other arguments.
        InvalidInputError.__init__(
            self, field, url, f"could not be fetched ({reason})", "Check the URL, or pass the file's bytes."
        )


class ImageFetchError(ImageError, InputFetchError):
    """An image URL could not be fetched client-side (unreachable host, error status)."""


class AudioDecodeError(InvalidInputError):
    """An audio input cannot be read or decoded; raised before any upload.

    Attributes:
        source: the file path, URL, or ``<bytes>`` / ``<file object>`` / ``<array>``.
        reason: what the decoders said.
    """

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        super().__init__(
            "audio",
            source,
            f"cannot be decoded: {reason}",
            "Check that it is a complete audio or video file (WAV, FLAC, MP3, OGG, M4A, ...).",
        )


class AudioFetchError(InputFetchError, AudioDecodeError):
    """An audio URL could not be fetched client-side (unreachable host, error status)."""


class MissingDependency(VLLMTasksError, ImportError):
    """An optional package a feature needs is not installed; the message names the extra to install.

    Attributes:
        package: the missing package's import name.
        extra: the ``vllm-tasks`` extra that installs it.
    """

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(f'{purpose} needs {package}: pip install "vllm-tasks[{extra}]"')


class UnsupportedByServer(VLLMTasksError):
    """The request uses a feature the connected server's vLLM version (or configuration) lacks.

    Attributes:
        feature: the feature's name in the gate table (``vllm_tasks.gates.FEATURES``).
        server_version: the server's version string, or ``None`` when unknown.
        required_version: the first vLLM version with the feature, or ``None``.
        server_flag: the server flag that enables it, when one is needed.
    """

    def __init__(
        self,
        feature: str,
        *,
        server_version: str | None,
        required_version: str | None,
        server_flag: str | None = None,
        detail: str | None = None,
    ) -> None:
        self.feature = feature
        self.server_version = server_version
        self.required_version = required_version
        self.server_flag = server_flag
        needs = []
        if required_version:
            needs.append(f"vLLM >= {required_version}")
        if server_flag:
            needs.append(f"the server flag `{server_flag}`")
        message = f"{feature} is not supported by this server (vLLM {server_version or 'unknown'})"
        if needs:
            message += f"; it needs {' and '.join(needs)}"
        if detail:
            message += f". {detail}"
        super().__init__(message)


class ServerNotReady(VLLMTasksError):
    """The server did not answer ``/health`` with 200 in time.

    Attributes:
        last_cause: the last thing seen (an exception or a status description).
    """

    def __init__(self, message: str, last_cause: str | None) -> None:
        self.last_cause = redact_text(last_cause) if last_cause else last_cause
        super().__init__(f"{message}; last seen: {last_cause}" if last_cause else message)


class JobError(VLLMTasksError):
    """A batch job (``vllm_tasks.jobs``) cannot start or go on; its checkpoint is kept."""


class JobMismatch(JobError):
    """A checkpoint (or a finished output) was made by another job: the input, the served model or an
    option that changes vectors differs, so resuming would mix two jobs' rows in one output.

    Attributes:
        out: the output path.
        changes: one line per difference (``"input content: ... -> ..."``).
    """

    def __init__(self, out: str, changes: list[str]) -> None:
        self.out = out
        self.changes = changes
        super().__init__(
            f"{out}: the earlier run of this job differs, refusing to mix them: {'; '.join(changes)}. "
            "Restore what changed, or start over with resume=False (vllm-tasks: --restart)."
        )


class ReplicaMismatch(JobError):
    """The servers given to one job do not serve the same model (name, weights or vectors differ).

    Attributes:
        urls: the two servers compared.
        detail: what differs.
    """

    def __init__(self, urls: tuple[str, str], detail: str) -> None:
        self.urls = urls
        self.detail = detail
        super().__init__(
            f"{urls[0]} and {urls[1]} serve different models ({detail}); every server of a job must serve "
            "the same one. Drop the odd server, or point them all at one deployment."
        )


class RowFailed(JobError):
    """With ``fail_fast``: the server refused one row (isolated by splitting its batch).

    Attributes:
        row: the row number in the input (0-based, in input order).
        row_id: the row's id (the ``id_field`` value, else the row number).
        message: the server's message.
    """

    def __init__(self, row: int, row_id: object, message: str) -> None:
        self.row = row
        self.row_id = row_id
        self.message = message
        super().__init__(
            f"row {row} (id {row_id!r}) was refused: {message}. Fix or drop that row and run again (the "
            "job resumes), or leave out fail_fast to record refused rows in the errors file and go on."
        )


class InsufficientDiskSpace(JobError, OSError):
    """The job's output does not fit in the free space of its disk; found before writing any row.

    Attributes:
        path: the file that was being allocated.
        needed: bytes it needs.
        free: bytes free on its filesystem.
    """

    def __init__(self, path: str, needed: int, free: int) -> None:
        self.path = path
        self.needed = needed
        self.free = free
        super().__init__(
            f"{path}: needs {needed:,} bytes but its disk has {free:,} free. Free {needed - free:,} bytes "
            "or more, or write the output to another disk (the job resumes where it stopped)."
        )


class APIError(VLLMTasksError):
    """A request to the server failed. ``method`` and ``url`` describe it (credentials removed)."""

    def __init__(self, message: str, *, method: str | None = None, url: str | None = None) -> None:
        self.message = redact_text(message)
        self.method = method
        self.url = redact_url(url) if url else None
        super().__init__(message)


class APIConnectionError(APIError):
    """The server could not be reached (refused, reset, DNS, TLS)."""


class APITimeoutError(APIConnectionError):
    """The request timed out."""


class StreamError(APIError):
    """The server reported an error inside an event stream that had already started with 200."""

    def __init__(self, message: str, *, body: object = None, code: int | None = None) -> None:
        self.body = body
        self.code = code
        super().__init__(message)


class APIStatusError(APIError):
    """The server answered with an HTTP error status.

    Attributes:
        status_code: the HTTP status.
        message: the server's message, parsed from any of vLLM's error body shapes.
        param: the offending parameter when the server names one (else ``None``).
        request_id: the ``X-Request-Id`` response header, when present.
        body: the parsed JSON body (or the raw text, or ``None`` for an empty body).
        headers: the response headers.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        param: str | None = None,
        request_id: str | None = None,
        body: object = None,
        headers: httpx.Headers | None = None,
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        self.status_code = status_code
        self.param = param
        self.request_id = request_id
        self.body = body
        self.headers = headers if headers is not None else httpx.Headers()
        super().__init__(message, method=method, url=url)

    def __str__(self) -> str:
        where = f" ({self.method} {self.url})" if self.method and self.url else ""
        return f"{self.status_code}{where}: {self.message}"


class BadRequestError(APIStatusError):
    """400: the server refused the request's content."""


class ContextLengthExceeded(BadRequestError):
    """An input is longer than the model's context.

    Attributes:
        max_model_len: the model's maximum, when the message states it.
        prompt_tokens: the input's token count, when the message states it.
        input_index: the position of the offending input in the caller's list, when known.
    """

    max_model_len: int | None = None
    prompt_tokens: int | None = None
    input_index: int | None = None


class MatryoshkaNotSupported(BadRequestError):
    """``dimensions`` / ``output_dimension`` is not allowed for this model or value."""


class InputTypeNotSupported(BadRequestError):
    """``/v2/embed`` ``input_type`` that the model defines no instruction for; the message lists them."""


class DimensionsNotApplied(APIError):
    """The server returned vectors of another width than the ``dimensions`` asked for.

    vLLM < 0.24.0 silently ignores an unsupported ``dimensions``; the client checks instead of handing
    back vectors of the wrong width.
    """


class AudioTooLarge(BadRequestError):
    """The audio upload is over the server's ``VLLM_MAX_AUDIO_CLIP_FILESIZE_MB``."""


class AuthenticationError(APIStatusError):
    """401: missing or wrong API key."""


class PermissionDeniedError(APIStatusError):
    """403."""


class NotFoundError(APIStatusError):
    """404."""


class ModelNotFoundError(NotFoundError):
    """404: the ``model`` named in the request is not served."""


class EndpointNotServed(APIStatusError):
    """The server's model does not serve this task.

    A 404 ``{"detail": "Not Found"}`` means the route is not mounted (the model lacks the task); a 501
    "does not support ... API" means it is mounted but the model's active pooling task is another one.

    Attributes:
        task: the task asked for (``embed``, ``rerank``, ``transcription``, ...), when known.
        reason: ``"not_mounted"`` or ``"inactive"``.
    """

    task: str | None = None
    reason: str = "not_mounted"


class ConflictError(APIStatusError):
    """409."""


class RequestTooLargeError(APIStatusError):
    """413."""


class UnprocessableEntityError(APIStatusError):
    """422 (e.g. a remote media URL the server could not fetch)."""


class RateLimitError(APIStatusError):
    """429."""


class InternalServerError(APIStatusError):
    """500 and other 5xx."""


class ServiceUnavailableError(InternalServerError):
    """503: the engine is overloaded, still loading, or hit a retryable failure."""


class GatewayTimeoutError(InternalServerError):
    """504: a proxy or load balancer in front of vLLM stopped waiting for its answer (retried)."""


GATEWAY_TIMEOUT_FIX = (
    "A proxy in front of vLLM gave up waiting for the answer: raise its read timeout (nginx: "
    "proxy_read_timeout) or send less per request (a smaller batch_size)."
)


class UnexpectedResponse(APIError):
    """The answer is not one vLLM gives: a redirect or other non-2xx status that is not an error, an
    empty or 204 body, a content type the request does not produce (an HTML page), or a body of the
    wrong shape. Often a proxy or load balancer answered instead of vLLM.

    Attributes:
        status_code: the HTTP status, when known.
        content_type: the response's ``Content-Type`` (``""`` when absent).
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        content_type: str = "",
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        self.status_code = status_code
        self.content_type = content_type
        super().__init__(message, method=method, url=url)


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
# "only supports [128, 256, 384] matryoshka dimensions" (up to 0.25) and the 0.26+ wordings.
_MATRYOSHKA_RE = re.compile(
    r"does not support matryoshka|only supports .*matryoshka dimensions|only supports dimensions in range"
    r"|dimensions must be less than or equal",
    re.IGNORECASE,
)
MATRYOSHKA_FIX = (
    "The operator can serve the model as Matryoshka with `--hf-overrides '{\"is_matryoshka\": true}'` "
    "or `--hf-overrides '{\"matryoshka_dimensions\": [...]}'`; otherwise leave `dimensions` unset."
)


def parse_error_body(response: httpx.Response) -> tuple[str, str | None, object]:
    """Extract ``(message, param, body)`` from any error body shape vLLM has used.

    Handles the nested body (``{"error": {"message", "type", "param", "code"}}``, vLLM >= 0.10.1), the
    flat body of older servers (``{"object": "error", "message", ...}``), ``{"error": "Unauthorized"}``,
    FastAPI's ``{"detail": ...}`` (a string or a list of validation errors), plain text and empty bodies.
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
    """Build the most specific :class:`APIStatusError` for an error response.

    Args:
        response: the server's response (status >= 400), body already read.
        task: the task the request was for; sharpens :class:`EndpointNotServed` messages.
        method: the request method, for the message.
        url: the request URL, for the message (credentials are removed).

    Returns:
        The exception to raise.
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
    if status == 404 and "does not exist" in lowered and "model" in lowered:
        return ModelNotFoundError(message, **kwargs)
    if status == 400:
        limit = _CONTEXT_MAX_RE.search(message)
        if limit or "maximum context length" in lowered:
            exceeded = ContextLengthExceeded(message, **kwargs)
            tokens = _CONTEXT_TOKENS_RE.search(message)
            exceeded.max_model_len = int(limit["max"]) if limit else None
            exceeded.prompt_tokens = int(tokens["n"]) if tokens else None
            return exceeded
        if _MATRYOSHKA_RE.search(message):
            return MatryoshkaNotSupported(f"{message} {MATRYOSHKA_FIX}", **kwargs)
        if "unsupported input_type" in lowered:
            return InputTypeNotSupported(message, **kwargs)
        if "maximum file size exceeded" in lowered:
            return AudioTooLarge(
                f"{message} Split the audio client-side (chunking='auto') or raise the server's "
                "VLLM_MAX_AUDIO_CLIP_FILESIZE_MB.",
                **kwargs,
            )
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


def redact_url(url: str) -> str:
    """``url`` without its credentials (``http://user:KEY@host:8000/x`` -> ``http://host:8000/x``).

    Examples:
        >>> redact_url("http://user:KEY@host:8000/v1")
        'http://host:8000/v1'
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # not parseable as a URL: remove anything that looks like userinfo
        return redact_text(url)
    if parts.username is not None or parts.password is not None:
        host = parts.hostname or ""
        if ":" in host:  # IPv6
            host = f"[{host}]"
        if port is not None:
            host = f"{host}:{port}"
        return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return url


# scheme://userinfo@ : the greedy run stops at the end of the authority, so a password holding an
# unescaped "@" is removed whole.
_USERINFO_RE = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#'\"<>]*@")


def redact_text(text: str) -> str:
    """``text`` with the credentials of every URL in it removed.

    Examples:
        >>> redact_text("GET http://user:KEY@host:8000/health failed")
        'GET http://host:8000/health failed'
    """
    return _USERINFO_RE.sub(r"\1", text) if "@" in text else text


def _restore_error(cls: type[BaseException], args: tuple[object, ...]) -> BaseException:
    error = cls.__new__(cls, *args)
    error.args = args  # OSError.__new__ leaves args empty for a subclass with its own __init__
    return error


def _picklable_state(error: BaseException) -> dict[str, object]:
    state: dict[str, object] = {}
    for name, value in vars(error).items():
        state[name] = value
        if not isinstance(value, str | int | float | bool | type(None)):
            try:
                pickle.dumps(value)
            except Exception:  # any object may fail to pickle in its own way
                state[name] = _short(value)
    if isinstance(error, ImportError):  # C-level attributes, not in vars()
        state.update(msg=error.msg, name=error.name, path=error.path)
    return state


def _as_text(value: object) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
