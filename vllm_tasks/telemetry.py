"""Telemetry: a DEBUG log line and an optional OpenTelemetry span for every HTTP request, and usage totals.

The sealed transport (:mod:`vllm_tasks.transport`) opens an :class:`Observation` for every attempt it
sends to the vLLM server (``send``, ``send_all``, ``open_stream``; not ``fetch``, which downloads
user-given URLs from other hosts) and closes it with the answer or the failure. That one place logs the
request on the ``vllm_tasks`` logger at DEBUG (route, model, inputs in the request, status, request id,
elapsed time), counts it in the client's :class:`UsageCounter`, and, when ``opentelemetry-api`` is
installed, records it as a client span. Nothing here logs or records the API key, headers, bodies or URL
credentials: the route is the path alone and ``url.full`` is the URL without ``user:password@``.

``opentelemetry-api`` is optional and imported lazily, once: without it the spans cost nothing; with the
API but no SDK configured, spans are non-recording and no attribute is computed.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Protocol, Self, cast

import httpx

from .errors import APIStatusError
from .redaction import route_url
from .tasks import task_for_path
from .types.audio import Transcription
from .types.common import ClientUsage, Usage
from .types.embeddings import EmbedV2Result
from .types.ocr import OCRDocument, OCRResult
from .version import __version__

logger = logging.getLogger("vllm_tasks")

OPERATIONS: dict[str, str] = {
    "embed": "embeddings",
    "embed_v2": "embeddings",
    "chat": "chat",
    "score": "score",
    "rerank": "rerank",
    "classify": "classify",
    "pooling": "pooling",
    "transcription": "transcription",
    "translation": "translation",
}
"""``gen_ai.operation.name`` of each task (the GenAI conventions' ``embeddings`` and ``chat``; vLLM's task
names for the operations those conventions do not name)."""

_INPUT_KEYS = ("documents", "text_2", "input", "texts", "images", "inputs", "messages")
_BODY_ID = re.compile(rb'\A\s*\{\s*"id"\s*:\s*"([^"\\]{1,200})"')
_HEADER_ID = re.compile(r'\A\s*\{\s*"id"\s*:\s*"([^"\\]{1,200})"')


class RequestLike(Protocol):
    """What an observation reads from a request (:class:`vllm_tasks.transport.Request`)."""

    @property
    def method(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def json(self) -> Any: ...
    @property
    def data(self) -> Mapping[str, Any] | None: ...
    @property
    def files(self) -> Any: ...


# --------------------------------------------------------------------------------------------------
# What a request and its answer say
# --------------------------------------------------------------------------------------------------


def request_model(request: RequestLike) -> str | None:
    """The ``model`` a request names (JSON body or multipart form), or ``None``."""
    for source in (request.json, request.data):
        if isinstance(source, Mapping):
            model = source.get("model")
            if isinstance(model, str):
                return model
    return None


def request_inputs(request: RequestLike) -> int | None:
    """How many inputs a request carries (its batch size): texts, documents, pairs, images, audio files,
    conversations; ``None`` for a request without any (discovery, probes with an empty body).
    """
    if request.files is not None:
        return 1  # one audio file per multipart request
    body = request.json
    if not isinstance(body, Mapping):
        return None
    for key in _INPUT_KEYS:
        if key in body:
            return _count(key, body[key])
    return None


def _count(key: str, value: Any) -> int:
    if not isinstance(value, list | tuple):
        return 1
    if not value:
        return 0
    first = value[0]
    if (key == "input" and isinstance(first, int)) or (key == "messages" and isinstance(first, Mapping)):
        return 1  # one prompt of token ids; one conversation
    return len(value)


def response_request_id(response: httpx.Response) -> str | None:
    """vLLM's id for an answer: the ``X-Request-Id`` header, else the body's leading ``"id"`` (vLLM
    writes it first), else the ``metadata`` header of a ``bytes`` embeddings answer. Reads at most the
    first bytes of the body: never a parse of a large answer.

    Examples:
        >>> response_request_id(httpx.Response(200, content=b'{"id":"embd-1","data":[]}'))
        'embd-1'
    """
    header: str | None = response.headers.get("x-request-id")
    if header:
        return header
    try:
        head = response.content[:256]
    except httpx.ResponseNotRead:
        head = b""
    found = _BODY_ID.match(head)
    if found:
        return found.group(1).decode("utf-8", "replace")
    metadata = response.headers.get("metadata")
    matched = _HEADER_ID.match(metadata) if metadata else None
    return str(matched.group(1)) if matched else None


# --------------------------------------------------------------------------------------------------
# Usage totals
# --------------------------------------------------------------------------------------------------


class UsageCounter:
    """A client's running totals (thread-safe: a sync client's ``send_all`` threads update it at once).

    Examples:
        >>> counter = UsageCounter(); counter.request_done(failed=False, retry=False)
        >>> counter.snapshot().requests
        1
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._totals: dict[str, float] = dict.fromkeys(ClientUsage.model_fields, 0)
        del self._totals["concurrency_limit"]
        self._limit: int | None = None

    def limit_now(self, allowed: int) -> None:
        """Note the requests in flight a ``concurrency="auto"`` call allows now."""
        self._limit = allowed  # one int store: atomic, no lock needed

    def request_done(self, *, failed: bool, retry: bool) -> None:
        """Count one HTTP request (an attempt) and whether it failed or was a retry."""
        with self._lock:
            self._totals["requests"] += 1
            self._totals["failed_requests"] += failed
            self._totals["retries"] += retry

    def add_result(self, result: object) -> None:
        """Add what a returned result used: tokens, seconds of audio, OCR pages."""
        added = result_usage(result)
        if not any(added.values()):
            return
        with self._lock:
            for name, value in added.items():
                self._totals[name] += value

    def snapshot(self) -> ClientUsage:
        """The totals so far."""
        with self._lock:
            totals = dict(self._totals)
        return ClientUsage(
            audio_seconds=float(totals.pop("audio_seconds")),
            concurrency_limit=self._limit,
            **{k: int(v) for k, v in totals.items()},
        )


def result_usage(result: object) -> dict[str, float]:
    """``{"prompt_tokens", "completion_tokens", "audio_seconds", "pages"}`` a result reports."""
    added = {"prompt_tokens": 0.0, "completion_tokens": 0.0, "audio_seconds": 0.0, "pages": 0.0}
    usage = getattr(result, "usage", None)
    if isinstance(usage, Usage):
        added["prompt_tokens"] = usage.prompt_tokens
        added["completion_tokens"] = usage.completion_tokens or 0
    if isinstance(result, EmbedV2Result):
        units = result.billed_units
        added["prompt_tokens"] = units.get("input_tokens", 0) + units.get("image_tokens", 0)
    elif isinstance(result, Transcription):
        spoken = result.usage
        added["prompt_tokens"] = (spoken.prompt_tokens or 0) if spoken else 0
        added["completion_tokens"] = (spoken.completion_tokens or 0) if spoken else 0
        added["audio_seconds"] = result.duration or (spoken.seconds if spoken and spoken.seconds else 0.0)
    elif isinstance(result, OCRResult):
        added["pages"] = 1
    elif isinstance(result, OCRDocument):
        added["pages"] = len(result.pages)
    return added


# --------------------------------------------------------------------------------------------------
# OpenTelemetry (optional)
# --------------------------------------------------------------------------------------------------

_UNSET: Any = object()
_tracer: Any = _UNSET


def tracer() -> Any | None:
    """The ``vllm_tasks`` tracer of ``opentelemetry-api``, or ``None`` when it is not installed.

    Looked up once (a proxy tracer: a provider set later is still used).
    """
    global _tracer  # noqa: PLW0603 - one lazy import for the process
    if _tracer is _UNSET:
        try:
            from opentelemetry import trace
        except ImportError:
            _tracer = None
        else:
            _tracer = trace.get_tracer("vllm_tasks", __version__)
    return cast(Any, _tracer)


def _inject(span: Any, headers: httpx.Headers) -> None:
    """Add W3C trace-context headers for ``span`` (vLLM joins its own spans to the caller's trace)."""
    from opentelemetry import propagate, trace

    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    for name, value in carrier.items():
        headers[name] = value


# --------------------------------------------------------------------------------------------------
# One request, observed
# --------------------------------------------------------------------------------------------------


class Observation:
    """One HTTP attempt being observed; a context manager around sending it.

    Opened before the request is built (its span's trace context goes into the headers); the transport
    sets ``response`` once an answer came; leaving the ``with`` block finishes the observation with that
    answer and whatever exception is propagating (a connection error, the mapped error of an error
    status, a cancellation).

    Args:
        counter: the client's totals (``None``: count nothing).
        request: what is sent.
        display_url: the server's root URL without credentials (for ``url.full``).
        attempt: 1 for the first attempt, 2 for the first retry, ...
        stream: a streamed answer (the elapsed time is then the time to its headers).
    """

    __slots__ = ("attempt", "counter", "display_url", "request", "response", "span", "started", "stream")

    def __init__(
        self,
        counter: UsageCounter | None,
        request: RequestLike,
        display_url: str,
        *,
        attempt: int = 1,
        stream: bool = False,
    ) -> None:
        self.counter = counter
        self.request = request
        self.display_url = display_url
        self.attempt = attempt
        self.stream = stream
        self.response: httpx.Response | None = None
        self.span = self._start_span()
        self.started = time.perf_counter()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.finish(self.response, exc)

    def _start_span(self) -> Any | None:
        otel = tracer()
        if otel is None:
            return None
        request = self.request
        route = task_for_path(request.path)
        model = request_model(request)
        operation = OPERATIONS.get(route.task) if route else None
        name = (
            f"{operation} {model}" if operation and model else operation or f"{request.method} {request.path}"
        )
        from opentelemetry.trace import SpanKind

        span = otel.start_span(name, kind=SpanKind.CLIENT)
        if not span.is_recording():
            return None
        url = httpx.URL(route_url(self.display_url, request.path))
        attributes: dict[str, Any] = {
            "http.request.method": request.method,
            "url.full": str(url),
            "server.address": url.host,
            "server.port": url.port or (443 if url.scheme == "https" else 80),
        }
        if self.attempt > 1:
            attributes["http.request.resend_count"] = self.attempt - 1
        if operation:
            attributes |= {"gen_ai.operation.name": operation, "gen_ai.provider.name": "vllm"}
        if model:
            attributes["gen_ai.request.model"] = model
        inputs = request_inputs(request)
        if inputs is not None:
            attributes["vllm_tasks.request.inputs"] = inputs
        if self.stream:
            attributes["vllm_tasks.stream"] = True
        span.set_attributes(attributes)
        return span

    def set_attribute(self, name: str, value: Any) -> None:
        """Add an attribute to the span (only while one is recorded)."""
        if self.span is not None:
            self.span.set_attribute(name, value)

    def inject(self, headers: httpx.Headers) -> None:
        """Add trace-context headers to the request being sent (only while a span is recorded)."""
        if self.span is not None:
            _inject(self.span, headers)

    def finish(self, response: httpx.Response | None = None, error: BaseException | None = None) -> None:
        """Close the observation: count, log and end the span. ``error`` is what the caller will see."""
        elapsed = time.perf_counter() - self.started
        cancelled = isinstance(error, asyncio.CancelledError | KeyboardInterrupt)
        status = response.status_code if response is not None else None
        failed = not cancelled and (error is not None or (status is not None and status >= 400))
        if self.counter is not None:
            self.counter.request_done(failed=failed, retry=self.attempt > 1)
        log = logger.isEnabledFor(logging.DEBUG)
        if not log and self.span is None:
            return
        request_id = response_request_id(response) if response is not None else None
        if request_id is None and isinstance(error, APIStatusError):
            request_id = error.request_id
        error_type = None if error is None else ("cancelled" if cancelled else type(error).__name__)
        if error_type is None and failed:
            error_type = str(status)
        if log:
            self._log(status, request_id, error_type, elapsed)
        if self.span is not None:
            self._end_span(status, request_id, error_type, failed)

    def _log(
        self, status: int | None, request_id: str | None, error_type: str | None, elapsed: float
    ) -> None:
        request = self.request
        fields: dict[str, Any] = {
            "method": request.method,
            "route": request.path,
            "model": request_model(request),
            "inputs": request_inputs(request),
            "status": status,
            "request_id": request_id,
            "elapsed_ms": round(elapsed * 1000, 1),
            "attempt": self.attempt,
            "stream": self.stream,
            "error": error_type,
        }
        shown = " ".join(
            f"{name}={fields[name]}"
            for name in ("model", "inputs", "status", "request_id", "error")
            if fields[name] is not None
        )
        extra = (f" attempt={self.attempt}" if self.attempt > 1 else "") + (" stream" if self.stream else "")
        logger.debug(
            "%s %s %s elapsed=%.1fms%s",
            request.method,
            request.path,
            shown,
            elapsed * 1000,
            extra,
            extra={"vllm_tasks": fields},
        )

    def _end_span(
        self, status: int | None, request_id: str | None, error_type: str | None, failed: bool
    ) -> None:
        span: Any = self.span
        if status is not None:
            span.set_attribute("http.response.status_code", status)
        if request_id:
            span.set_attribute("gen_ai.response.id", request_id)
        if error_type is not None:
            span.set_attribute("error.type", error_type)
        if failed:
            from opentelemetry.trace import Status, StatusCode

            span.set_status(Status(StatusCode.ERROR, error_type))
        span.end()
