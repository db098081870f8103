"""What both transports share: the ``Request`` value, request building, answer checks and error mapping.

The transport itself is written once, in ``vllm_tasks/_async/transport.py`` (``AsyncTransport``), and
generated into ``vllm_tasks/_sync/transport.py`` (``SyncTransport``) by ``scripts/unasync.py``; how each
waits (sleeps, its worker group, deadlines) is its backend's (``vllm_tasks/_backends.py``).
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, overload

import httpcore
import httpx
import orjson
from tenacity import RetryCallState

from .adaptive import OVERLOAD_STATUSES, AdaptiveLimit
from .calls import CLIENT_DEFAULT, TimeoutLike
from .config import ClientSettings, TransportName
from .engine_metrics import EngineLoad, EngineSampler
from .errors import APIConnectionError, APITimeoutError, MissingDependency, UnexpectedResponse
from .redaction import route_url
from .responses import check_status
from .retries import RETRYABLE_STATUSES, TRANSIENT_STATUSES, Backoff, is_retryable, retry_after_seconds
from .server_errors import error_from_response
from .tasks import TaskName
from .telemetry import Observation, UsageCounter

logger = logging.getLogger("vllm_tasks")

OnResponse = Callable[[int, httpx.Response], None]
"""Called as ``on_response(index, response)`` as each of ``send_all``'s requests completes."""

overload_listener: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "vllm_tasks_overload_listener", default=None
)
"""Called, in the thread that got it, on each 429 or 503 answer to a request sent in this context, retried
ones included: how a job's per-server ``concurrency="auto"`` limit and the Ray callables' limit on rows
in flight hear the overloads that the client's retries absorb. A worker thread runs its job in a copy of
its caller's context, so the requests of a row's audio chunks or PDF pages are heard too."""


@dataclass(frozen=True)
class Request:
    """One HTTP request to the vLLM server (``path`` relative to the client's base URL).

    An error status raises the mapped :class:`~vllm_tasks.errors.APIStatusError`, unless
    ``raise_for_status`` is False: then a retryable status is still retried, and the last answer is
    returned (read it through :func:`answered` before keeping what it says). ``retry=False`` makes a
    single attempt.
    """

    method: str
    path: str
    json: Any = None
    data: Mapping[str, Any] | None = None
    files: Any = None
    params: Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = None
    timeout: TimeoutLike = CLIENT_DEFAULT
    task: TaskName | None = None
    raise_for_status: bool = True
    retry: bool = True


class RouteLimit:
    """One route's ``concurrency="auto"`` limit on one client: its :class:`AdaptiveLimit`, the client's
    requests in flight under it (every call's, sync threads and async tasks alike), and the time before
    which none starts (a ``Retry-After`` within the retry cap). Each attempt takes a slot and gives it
    back with its answer: a retry waits its backoff holding none, then takes one under the limit as it is
    then. Thread-safe.

    Attributes:
        limit: the adaptive limit (its ``allowed`` bounds :attr:`in_flight`).
        in_flight: the requests sent and not yet answered.

    Examples:
        >>> route = RouteLimit()
        >>> route.take(lambda: None), route.take(lambda: None)  # START allows one request
        (True, False)
        >>> route.release()
    """

    def __init__(self) -> None:
        self.limit = AdaptiveLimit()
        self.in_flight = 0
        self._resume_at = 0.0  # time.monotonic() before which no request starts (a Retry-After)
        self._lock = threading.Lock()
        self._waiters: list[Callable[[], None]] = []

    def paused(self) -> float:
        """Seconds before the next request may start (a ``Retry-After`` asked); 0 or less: none."""
        return self._resume_at - time.monotonic()

    def take(self, wake: Callable[[], None]) -> bool:
        """Take a slot when fewer than the limit allows are in flight; else keep ``wake``, called once
        when a slot may have come free (the caller then tries again), and return False."""
        with self._lock:
            if self.in_flight < self.limit.allowed:
                self.in_flight += 1
                return True
            self._waiters.append(wake)
            return False

    def release(self) -> None:
        """Give a slot back; every waiter tries again (the limit may have grown or shrunk meanwhile)."""
        with self._lock:
            self.in_flight -= 1
            waiters, self._waiters = self._waiters, []
        for wake in waiters:
            wake()

    def learn(self, seconds: float, response: httpx.Response, retry_after_cap: float) -> int:
        """Feed the limit one answer: its ``seconds`` when it succeeded; a back-off on 429/503, and with
        a ``Retry-After`` of at most ``retry_after_cap`` no new request before it (a longer one ends
        the call that got it, and holds nothing). Returns the settled limit."""
        status = response.status_code
        with self._lock:
            if status in OVERLOAD_STATUSES:
                self.limit.overloaded()
                asked = retry_after_seconds(response.headers)
                if asked is not None and asked <= retry_after_cap:
                    self._resume_at = max(self._resume_at, time.monotonic() + asked)
            elif status < 400:
                self.limit.answered(seconds)
            return self.limit.settled

    def sampled(self, load: EngineLoad | None) -> int:
        """Feed the limit one sample of the server's ``/metrics``, taken now (``None``: none can be read,
        the limit is steered by latencies again). Returns the settled limit."""
        with self._lock:
            if load is None:
                self.limit.engine = False
            else:
                self.limit.sampled(load, time.monotonic())
            return self.limit.settled


class TransportBase:
    """The parts of a transport that do not wait: settings, URLs, headers, building and checking."""

    def __init__(
        self, settings: ClientSettings, backoff: Backoff | None = None, usage: UsageCounter | None = None
    ) -> None:
        self.settings = settings
        self.backoff = backoff or Backoff()
        self.usage = usage if usage is not None else UsageCounter()
        """Requests, failures and retries counted here; the client adds its results' tokens."""
        self._urls: dict[str, httpx.URL] = {}
        self._routes: dict[str, RouteLimit] = {}
        self._routes_lock = threading.Lock()
        self.engine = EngineSampler()
        """When ``auto`` samples the server's ``/metrics``, and whether it serves them."""
        self._headers = merge_headers(settings.request_headers)
        self._json_headers = merge_headers(self._headers, {"Content-Type": "application/json"})

    def route_limit(self, path: str) -> RouteLimit:
        """The ``concurrency="auto"`` limit of the requests to ``path`` (one per route: an embedding
        batch and a rerank take different times), shared by every call on this client and kept for its
        life, so that concurrent calls stay under one limit and the next call starts from what this one
        learned."""
        with self._routes_lock:
            route = self._routes.get(path)
            if route is None:
                route = self._routes[path] = RouteLimit()
            return route

    def _learn(self, route: RouteLimit, seconds: float, response: httpx.Response) -> None:
        """Feed ``route`` one answer (see :meth:`RouteLimit.learn`); ``usage`` shows where it settled."""
        self.usage.limit_now(route.learn(seconds, response, self.backoff.retry_after_cap))

    def _attempts(self, request: Request) -> int:
        return self.settings.max_retries + 1 if request.retry else 1

    def _url(self, path: str) -> httpx.URL:
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = httpx.URL(route_url(self.settings.base_url, path))
        return url

    def _observe(self, request: Request, attempt: int = 1, *, stream: bool = False) -> Observation:
        """Log, count and (with OpenTelemetry) trace one attempt: ``with self._observe(...) as seen``."""
        return Observation(self.usage, request, self.settings.display_url, attempt=attempt, stream=stream)

    def _build(
        self, http: httpx.Client | httpx.AsyncClient, request: Request, observation: Observation | None = None
    ) -> httpx.Request:
        # URL, headers and timeout are applied per request so that an injected client is not mutated.
        timeout = self.settings.timeout if request.timeout is CLIENT_DEFAULT else request.timeout
        content = None if request.json is None else json_bytes(request.json)
        headers = self._headers if content is None else self._json_headers
        built = http.build_request(
            request.method,
            self._url(request.path),
            content=content,
            data=request.data,
            files=request.files,
            params=request.params,
            headers=merge_headers(headers, request.headers) if request.headers else headers,
            timeout=timeout,
        )
        if observation is not None:
            observation.inject(built.headers)
        return built

    def _check(self, request: Request, response: httpx.Response, *, final: bool) -> httpx.Response:
        """``response``, or the mapped error when it is an error status (with ``raise_for_status=False``:
        only a retryable one that another attempt follows, ``final`` False)."""
        if response.status_code in OVERLOAD_STATUSES:
            listener = overload_listener.get()
            if listener is not None:
                listener()
        # An answer that is not vLLM's (a proxy's redirect, a 204, an empty 200) is refused here, so
        # that no parser reads it as an empty result; a request with raise_for_status=False sees it.
        if request.raise_for_status:
            if response.status_code >= 400:
                raise error_from_response(response, task=request.task)
            check_status(response, request.path)
        elif response.status_code in RETRYABLE_STATUSES and not final:
            # A probe that reads error statuses is retried like any request: its last answer is returned.
            error = error_from_response(response, task=request.task)
            if self._retryable(error):
                raise error
        return response

    def _retryable(self, error: BaseException) -> bool:
        # A Retry-After over the cap ends the retries (the error then names the wait asked for).
        return is_retryable(error) and not self.backoff.refuses_wait(error)


def answered(response: httpx.Response, task: TaskName | None = None) -> httpx.Response:
    """``response`` when it is the server's answer to its request (a probe may keep what it says); the
    mapped error when its status only says that no answer came now (overloaded, a gateway's, a timeout:
    :data:`~vllm_tasks.retries.TRANSIENT_STATUSES`), after the request's retries.

    Raises:
        APIStatusError: the mapped error (``RateLimitError``, ``ServiceUnavailableError``, ...).

    Examples:
        >>> answered(httpx.Response(400)).status_code
        400
    """
    if response.status_code in TRANSIENT_STATUSES:
        raise error_from_response(response, task=task)
    return response


def streamed(response: httpx.Response) -> bool:
    """Whether a streamed ``response`` is one to read as it arrives (a 2xx with a body to come); any
    other answer is read whole and checked as an unstreamed one is."""
    return 200 <= response.status_code < 300 and response.status_code != 204


def connection_error(method: str, url: httpx.URL | str, error: httpx.TransportError) -> APIConnectionError:
    """The SDK's error for an httpx transport error (``APITimeoutError`` for a timeout)."""
    kind = APITimeoutError if isinstance(error, httpx.TimeoutException) else APIConnectionError
    detail = str(error) or type(error).__name__
    return kind(f"{method} {url} {_what_failed(error)}: {detail}", method=method, url=str(url))


def undecodable(method: str, url: httpx.URL | str, error: httpx.DecodingError) -> UnexpectedResponse:
    """The SDK's error for a body that does not decode as its ``Content-Encoding`` says (a broken gzip
    from a proxy): not vLLM's answer, so not retried."""
    return UnexpectedResponse(
        f"{method} {url}: the answer's body does not decode as its Content-Encoding says: {error}",
        method=method,
        url=str(url),
    )


def stream_broke(response: httpx.Response, error: httpx.TransportError) -> APIConnectionError:
    """The SDK's error for a streamed body whose connection broke after its headers came."""
    detail = str(error) or type(error).__name__
    request = response.request
    message = f"{request.method} {request.url}: the stream broke: {detail}"
    return APIConnectionError(message, method=request.method, url=str(request.url))


def log_retry(state: RetryCallState) -> None:
    """tenacity's ``before_sleep``: one WARNING line per retry."""
    error = state.outcome.exception() if state.outcome else None
    delay = state.next_action.sleep if state.next_action else 0.0
    logger.warning("retrying in %.2fs after attempt %d failed: %s", delay, state.attempt_number, error)


def _what_failed(error: httpx.TransportError) -> str:
    """What a transport error says happened, by the phase it happened in (a connection reset while
    reading the answer is not "could not connect": the request may have been processed)."""
    phases: list[tuple[type[httpx.TransportError] | tuple[type[httpx.TransportError], ...], str]] = [
        (httpx.ConnectTimeout, "timed out connecting"),
        (httpx.PoolTimeout, "timed out waiting for a free connection"),
        (httpx.WriteTimeout, "timed out sending the request"),
        (httpx.ReadTimeout, "timed out waiting for the answer"),
        (httpx.TimeoutException, "timed out"),
        (httpx.WriteError, "the connection broke while sending the request"),
        ((httpx.ReadError, httpx.RemoteProtocolError), "the connection broke while reading the answer"),
        ((httpx.ConnectError, httpx.ProxyError, httpx.UnsupportedProtocol), "could not connect"),
    ]
    return next((what for kind, what in phases if isinstance(error, kind)), "failed")


def headerless(error: httpx.RequestError) -> httpx.RequestError:
    """The same httpx error without its request: an exception chain must not carry the API key (a
    request's headers) to a log or a traceback.

    Raise the SDK's error ``from`` it *after* the ``except`` block (``__context__`` would otherwise
    hold the original error, request and all).

    Examples:
        >>> error = httpx.ConnectError("refused", request=httpx.Request("GET", "http://h/"))
        >>> bare = headerless(error)
        >>> str(bare), bare._request is None, bare.__context__ is None
        ('refused', True, True)
    """
    return type(error)(str(error))


def json_bytes(value: Any) -> bytes:
    """A request's JSON body: orjson (tens of times faster than ``json`` on large bodies such as OCR's
    data-URL images), with the stdlib as the fallback for what orjson refuses (e.g. non-string keys).
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def merge_headers(*layers: Mapping[str, str] | None) -> dict[str, str]:
    """Merge header mappings, later layers winning (case-insensitively)."""
    merged = httpx.Headers()
    for layer in layers:
        if layer:
            merged.update(layer)
    return dict(merged)


@overload
def own_http_client(kind: type[httpx.Client], transport: TransportName) -> httpx.Client: ...
@overload
def own_http_client(kind: type[httpx.AsyncClient], transport: TransportName) -> httpx.AsyncClient: ...
def own_http_client(
    kind: type[httpx.Client] | type[httpx.AsyncClient], transport: TransportName
) -> httpx.Client | httpx.AsyncClient:
    """The ``httpx`` client a client makes for itself (no ``http_client`` given), over the transport
    ``transport`` names (``ClientSettings.transport``).

    ``"auto"``: :class:`~vllm_tasks.Urllib3Transport` under an ``httpx.Client``; httpx's own transport
    where urllib3 is missing, where the environment names a proxy (httpx then reads it, ``NO_PROXY``
    included, as it always does), where httpx's transport is mocked (pytest-httpx, respx: the mocks
    see requests only through it), and under an ``httpx.AsyncClient`` (aiohttp, the fast async
    choice, drops the bytes that came before a connection broke: ``AiohttpTransport`` is opt-in).
    ``"httpx"``: httpx's own.

    Examples:
        >>> type(own_http_client(httpx.Client, "httpx")._transport).__name__
        'HTTPTransport'
    """
    if kind is httpx.Client and transport == "auto" and not _proxied() and not _mocked():
        from .urllib3_transport import Urllib3Transport

        try:
            return httpx.Client(transport=Urllib3Transport())
        except MissingDependency:
            pass
    return kind()


def _proxied() -> bool:
    """Whether the environment names a proxy, as httpx reads it (``HTTP_PROXY``, ``HTTPS_PROXY``,
    ``ALL_PROXY``, any case)."""
    found = urllib.request.getproxies()
    return any(found.get(scheme) for scheme in ("http", "https", "all"))


def _mocked() -> bool:
    """Whether httpx's transport or httpcore's pool is patched by a test (pytest-httpx, respx)."""
    sending = [
        httpx.HTTPTransport.handle_request,
        httpx.AsyncHTTPTransport.handle_async_request,
        httpcore.ConnectionPool.handle_request,
        httpcore.AsyncConnectionPool.handle_async_request,
    ]
    return not all(
        getattr(method, "__module__", "").startswith(("httpx.", "httpcore.")) for method in sending
    )
