"""The exception tree of vllm_tasks.

Every exception raised by the SDK derives from :class:`VLLMTasksError`; no class has two bases in the
tree. Errors that differ only in vLLM's or the client's wording are one class with a ``kind``::

    VLLMTasksError
    ├── InvalidInputError (also ValueError)   bad argument, caught before any request (.kind: InputErrorKind)
    │   └── InputFetchError                   a user-given URL could not be fetched client-side
    ├── MissingDependency (also ImportError)  an optional package is not installed (names the extra)
    ├── UnsupportedByServer                   feature needs a newer vLLM or a server flag
    ├── ServerNotReady                        wait_until_ready() ran out of time
    ├── OCRDocumentFailed                     too many pages of a document failed every OCR try
    ├── JobError                              a batch job cannot start or go on (vllm_tasks.jobs)
    │   ├── JobMismatch                       a checkpoint or finished output belongs to another job
    │   ├── ReplicaMismatch                   the servers of one job serve different models
    │   ├── RowFailed                         a row the server refused, with fail_fast
    │   └── InsufficientDiskSpace (also OSError)  the output does not fit on its disk
    └── APIError
        ├── APIConnectionError
        │   └── APITimeoutError
        ├── StreamError                       an error frame inside a 200 event stream
        ├── UnexpectedResponse                not an answer vLLM gives (.kind: UnexpectedKind)
        └── APIStatusError                    the server answered >= 400 (.kind: StatusErrorKind)
            ├── BadRequestError (400)
            │   └── ContextLengthExceeded
            ├── AuthenticationError (401)
            ├── PermissionDeniedError (403)
            ├── NotFoundError (404)
            ├── EndpointNotServed (404 route not mounted / 501 task inactive)
            ├── ConflictError (409)
            ├── RequestTooLargeError (413)
            ├── UnprocessableEntityError (422)
            ├── RateLimitError (429)
            └── InternalServerError (>= 500)
                ├── ServiceUnavailableError (503)
                └── GatewayTimeoutError (504)         a proxy in front stopped waiting

The mapping from a server's error answer to this tree is :mod:`vllm_tasks.server_errors`. No exception
stores request headers, so the API key can never surface in a message, a repr, a log line or an
exception chain.
"""

from __future__ import annotations

import pickle
from typing import Any, Literal

import httpx

from .redaction import redact_text, redact_url

InputErrorKind = Literal[
    "argument", "image_decode", "image_too_large", "audio_decode", "url_fetch", "image_fetch", "audio_fetch"
]
"""What an :class:`InvalidInputError` is about:

- ``"argument"``: an argument's value or type is wrong (the default).
- ``"image_decode"``: an image does not decode, or is not an image.
- ``"image_too_large"``: an image is over PIL's decompression-bomb limit or the size limit (``size``).
- ``"audio_decode"``: an audio input cannot be read or decoded (``source``, ``reason``).
- ``"url_fetch"``: a URL could not be fetched client-side (a :class:`InputFetchError`).
- ``"image_fetch"``: an image URL could not be fetched client-side (a :class:`InputFetchError`).
- ``"audio_fetch"``: an audio URL could not be fetched client-side (a :class:`InputFetchError`).
"""

FetchKind = Literal["url_fetch", "image_fetch", "audio_fetch"]
"""The ``kind`` of an :class:`InputFetchError`: which input's URL could not be fetched."""

StatusErrorKind = Literal[
    "context_length_exceeded",
    "matryoshka_not_supported",
    "input_type_not_supported",
    "audio_too_large",
    "model_not_found",
]
"""vLLM's error wordings an :class:`APIStatusError` is recognised as (``kind``; ``None`` for others):

- ``"context_length_exceeded"`` (400): an input is longer than the model's context; always a
  :class:`ContextLengthExceeded`.
- ``"matryoshka_not_supported"`` (400): ``dimensions`` / ``output_dimension`` is not allowed for this
  model or value.
- ``"input_type_not_supported"`` (400): a ``/v2/embed`` ``input_type`` the model defines no
  instruction for; the message lists those it has.
- ``"audio_too_large"`` (400): the audio upload is over the server's ``VLLM_MAX_AUDIO_CLIP_FILESIZE_MB``.
- ``"model_not_found"`` (404): the ``model`` named in the request is not served.
"""

ErrorScope = Literal["row", "options", "replica", "job"]
"""What an error is about, for code that goes on past some errors (the batch jobs, Ray's error column).
Each class states its own (``error.scope``); a 400 about the options narrows it by its ``kind``:

- ``"row"``: the rows sent (a text over the context, a file that does not decode): those rows are
  isolated and recorded, the others go on.
- ``"options"``: the call's options (a ``dimensions`` or ``input_type`` the model refuses, a feature the
  server lacks): every row would fail the same; stop.
- ``"replica"``: the server (down, overloaded, timed out, answering what vLLM does not): another server
  may take the same request.
- ``"job"``: the job itself (the credentials, a checkpoint of another job, the disk): stop.
"""

UnexpectedKind = Literal["response", "decode", "dimensions_not_applied"]
"""What an :class:`UnexpectedResponse` is about:

- ``"response"``: a status, body or content type vLLM does not answer with (often a proxy answered).
- ``"decode"``: an embedding payload does not match what it declared (length, shape, dtype, widths).
- ``"dimensions_not_applied"``: the vectors came back of another width than the ``dimensions`` asked
  for (vLLM < 0.24.0 silently ignores an unsupported ``dimensions``).
"""


class VLLMTasksError(Exception):
    """Base class of every exception raised by vllm_tasks.

    ``scope`` (:data:`ErrorScope`) says what the error is about: ``"row"``, ``"options"``, ``"replica"``
    or ``"job"`` (each class states its own). Credentials in URLs (``http://user:KEY@host``) are removed
    from the message. Every subclass pickles
    (for ``multiprocessing``, ``concurrent.futures.ProcessPoolExecutor``, Ray, Spark): a round trip keeps
    the type, the message and every attribute (a value that cannot be pickled comes back as its repr).
    """

    scope: ErrorScope = "job"

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
        kind: what it is about (:data:`InputErrorKind`): ``"argument"``, ``"image_decode"``,
            ``"image_too_large"``, ``"audio_decode"``, or for an :class:`InputFetchError`
            ``"url_fetch"``, ``"image_fetch"``, ``"audio_fetch"``.
        size: ``(width, height)`` in pixels of an image that is too large, when known (else ``None``).
        source: for audio and fetched inputs, the file path, URL, or ``<bytes>`` / ``<file object>`` /
            ``<array>`` (else ``None``).
        reason: for audio and fetched inputs, what the decoders or the fetch said (else ``None``).

    Examples:
        >>> error = InvalidInputError("batch_size", 0, "must be >= 1", "Pass 1 or more.")
        >>> str(error), error.kind
        ('batch_size=0: must be >= 1. Pass 1 or more.', 'argument')
    """

    scope: ErrorScope = "row"

    kind: InputErrorKind = "argument"
    size: tuple[int, int] | None = None
    source: str | None = None
    reason: str | None = None

    def __init__(
        self,
        field: str,
        value: object,
        problem: str,
        fix: str,
        *,
        kind: InputErrorKind = "argument",
        size: tuple[int, int] | None = None,
    ) -> None:
        self.field = field
        self.value = value
        self.fix = fix
        self.kind = kind
        if size is not None:
            self.size = size
        super().__init__(f"{field}={_short(value)}: {problem}. {fix}")

    @classmethod
    def audio_decode(cls, source: str, reason: str) -> InvalidInputError:
        """The error for an audio input that cannot be read or decoded (``kind="audio_decode"``).

        Args:
            source: the file path, URL, or ``<bytes>`` / ``<file object>`` / ``<array>``.
            reason: what the decoders said.

        Examples:
            >>> InvalidInputError.audio_decode("a.wav", "no audio samples").reason
            'no audio samples'
        """
        error = cls(
            "audio",
            source,
            f"cannot be decoded: {reason}",
            "Check that it is a complete audio or video file (WAV, FLAC, MP3, OGG, M4A, ...).",
            kind="audio_decode",
        )
        error.source = source
        error.reason = reason
        return error


class InputFetchError(InvalidInputError):
    """A user-given URL (an image or audio file) could not be fetched client-side.

    Attributes:
        kind: ``"image_fetch"`` (an image URL), ``"audio_fetch"`` (an audio URL) or ``"url_fetch"``
            (a URL the transport refused or could not download, before knowing what it holds).
        source: the URL (credentials removed).
        reason: what went wrong (unreachable host, error status, a fetch limit passed).
    """

    source: str
    reason: str

    def __init__(self, field: str, url: str, reason: str, *, kind: FetchKind = "url_fetch") -> None:
        url = redact_url(url)
        super().__init__(
            field,
            url,
            f"could not be fetched ({reason})",
            "Check the URL, or pass the file's bytes.",
            kind=kind,
        )
        self.source = url
        self.reason = redact_text(reason)


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

    scope: ErrorScope = "options"

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

    scope: ErrorScope = "replica"

    def __init__(self, message: str, last_cause: str | None) -> None:
        self.last_cause = redact_text(last_cause) if last_cause else last_cause
        super().__init__(f"{message}; last seen: {last_cause}" if last_cause else message)


class OCRDocumentFailed(VLLMTasksError):
    """More of a document's pages failed every try of the page-quality ladder than its
    ``max_page_error_rate`` allows (:class:`~vllm_tasks.ocr.PageQuality`): the document is not complete.

    Attributes:
        pages: the document's pages OCR'd.
        failed_pages: ``(page, why)`` of each failed page (1-based; ``why`` as ``OCRPage.failure``).
        max_page_error_rate: the share allowed.
        document: the ``OCRDocument`` with every page (failed ones as their fallback), for a caller that
            keeps it anyway.
    """

    scope: ErrorScope = "row"

    def __init__(
        self, message: str, pages: int, failed_pages: list[tuple[int, str]], rate: float, document: Any
    ) -> None:
        self.pages = pages
        self.failed_pages = failed_pages
        self.max_page_error_rate = rate
        self.document = document
        super().__init__(
            f"{message}. Raise max_tokens (a truncated page), check the server's context and the page's "
            "size, raise PageQuality(max_page_error_rate=...) to accept it, or read the pages from "
            "error.document."
        )


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

    scope: ErrorScope = "row"

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
            f"{path}: needs {needed:,} bytes but its disk has {free:,} free. Free {max(needed - free, 0):,} "
            "bytes or more (a quota may hold less than the disk shows), or write the output to another "
            "disk (the job resumes where it stopped)."
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

    scope: ErrorScope = "replica"


class APITimeoutError(APIConnectionError):
    """The request timed out."""


class StreamError(APIError):
    """The server reported an error inside an event stream that had already started with 200."""

    scope: ErrorScope = "row"

    def __init__(self, message: str, *, body: object = None, code: int | None = None) -> None:
        self.body = body
        self.code = code
        super().__init__(message)


class UnexpectedResponse(APIError):
    """The answer is not one vLLM gives: a redirect or other non-2xx status that is not an error, an
    empty or 204 body, a content type the request does not produce (an HTML page), a body of the wrong
    shape (often a proxy or load balancer answered instead of vLLM), an embedding payload that does not
    match what it declared, or vectors of another width than the ``dimensions`` asked for.

    Attributes:
        kind: what it is about (:data:`UnexpectedKind`): ``"response"`` (status, body, content type),
            ``"decode"`` (an embedding payload's length, shape or dtype) or ``"dimensions_not_applied"``
            (vLLM < 0.24.0 ignored an unsupported ``dimensions``; the client checks instead of handing
            back vectors of the wrong width).
        status_code: the HTTP status, when known.
        content_type: the response's ``Content-Type`` (``""`` when absent).
    """

    scope: ErrorScope = "replica"

    def __init__(
        self,
        message: str,
        *,
        kind: UnexpectedKind = "response",
        status_code: int | None = None,
        content_type: str = "",
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        self.kind = kind
        self.status_code = status_code
        self.content_type = content_type
        super().__init__(message, method=method, url=url)


class APIStatusError(APIError):
    """The server answered with an HTTP error status.

    Attributes:
        status_code: the HTTP status.
        message: the server's message, parsed from any of vLLM's error body shapes.
        kind: the vLLM wording recognised (:data:`StatusErrorKind`: ``"context_length_exceeded"``,
            ``"matryoshka_not_supported"``, ``"input_type_not_supported"``, ``"audio_too_large"``,
            ``"model_not_found"``), else ``None``.
        param: the offending parameter when the server names one (else ``None``).
        request_id: the ``X-Request-Id`` response header, when present.
        body: the parsed JSON body (or the raw text, or ``None`` for an empty body).
        headers: the response headers.
    """

    kind: StatusErrorKind | None = None

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        kind: StatusErrorKind | None = None,
        param: str | None = None,
        request_id: str | None = None,
        body: object = None,
        headers: httpx.Headers | None = None,
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        self.status_code = status_code
        if kind is not None:
            self.kind = kind
        if kind in OPTION_ERROR_KINDS:  # a 400 about the options: any row would be refused the same
            self.scope = "options"
        self.param = param
        self.request_id = request_id
        self.body = body
        self.headers = headers if headers is not None else httpx.Headers()
        super().__init__(message, method=method, url=url)

    def __str__(self) -> str:
        where = f" ({self.method} {self.url})" if self.method and self.url else ""
        return f"{self.status_code}{where}: {self.message}"


class BadRequestError(APIStatusError):
    """400: the server refused the request's content.

    ``kind`` names the vLLM wordings users act on: ``"matryoshka_not_supported"`` (``dimensions`` /
    ``output_dimension`` not allowed for this model or value), ``"input_type_not_supported"`` (a
    ``/v2/embed`` ``input_type`` the model defines no instruction for), ``"audio_too_large"`` (over the
    server's ``VLLM_MAX_AUDIO_CLIP_FILESIZE_MB``), ``"context_length_exceeded"`` (a
    :class:`ContextLengthExceeded`).
    """

    scope: ErrorScope = "row"


class ContextLengthExceeded(BadRequestError):
    """An input is longer than the model's context (``kind == "context_length_exceeded"``).

    Attributes:
        max_model_len: the model's maximum, when the message states it.
        prompt_tokens: the input's token count, when the message states it.
        input_index: the position of the offending input in the caller's list, when known.
    """

    kind: StatusErrorKind | None = "context_length_exceeded"
    max_model_len: int | None = None
    prompt_tokens: int | None = None
    input_index: int | None = None


class AuthenticationError(APIStatusError):
    """401: missing or wrong API key."""


class PermissionDeniedError(APIStatusError):
    """403."""


class NotFoundError(APIStatusError):
    """404; ``kind == "model_not_found"`` when the ``model`` named in the request is not served."""

    scope: ErrorScope = "replica"


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

    scope: ErrorScope = "row"


class UnprocessableEntityError(APIStatusError):
    """422 (e.g. a remote media URL the server could not fetch)."""

    scope: ErrorScope = "row"


class RateLimitError(APIStatusError):
    """429."""

    scope: ErrorScope = "replica"


class InternalServerError(APIStatusError):
    """500 and other 5xx."""

    scope: ErrorScope = "replica"


class ServiceUnavailableError(InternalServerError):
    """503: the engine is overloaded, still loading, or hit a retryable failure."""


class GatewayTimeoutError(InternalServerError):
    """504: a proxy or load balancer in front of vLLM stopped waiting for its answer (retried)."""


OPTION_ERROR_KINDS: frozenset[StatusErrorKind] = frozenset(
    {"matryoshka_not_supported", "input_type_not_supported"}
)
"""The ``kind`` of a 400 about a call's options (every row would be refused the same), not its rows."""


def is_about(error: BaseException, scope: ErrorScope) -> bool:
    """Whether ``error`` is one of the SDK's errors about ``scope`` (:data:`ErrorScope`); another
    exception (a bug, ``KeyboardInterrupt``) is about nothing the caller can go on past.

    Examples:
        >>> is_about(ContextLengthExceeded("too long", status_code=400), "row")
        True
        >>> is_about(BadRequestError("no", status_code=400, kind="matryoshka_not_supported"), "row")
        False
        >>> is_about(APITimeoutError("no answer"), "replica"), is_about(ValueError("bug"), "row")
        (True, False)
    """
    return isinstance(error, VLLMTasksError) and error.scope == scope


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


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
