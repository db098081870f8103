"""The sealed transport: everything that touches the network goes through its public methods.

``SyncTransport`` and ``AsyncTransport`` have the same methods (``send``, ``send_all``, ``open_stream``,
``fetch``, ``sleep``), so the async client code in ``vllm_tasks/_async/`` turns into the sync client by
token replacement (``scripts/unasync.py``). They share request building, error mapping and the retry
policy (``vllm_tasks.retries``); only the waiting differs (threads or asyncio tasks).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import itertools
import json
import logging
import queue
import socket
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import httpx
import orjson
from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from .calls import CLIENT_DEFAULT, TimeoutLike
from .config import ClientSettings
from .errors import (
    APIConnectionError,
    APITimeoutError,
    InputFetchError,
    error_from_response,
)
from .responses import check_status
from .retries import Backoff, is_retryable
from .tasks import TaskName
from .telemetry import Observation, UsageCounter
from .version import __version__

logger = logging.getLogger("vllm_tasks")

sync_sleep: Callable[[float], None] = time.sleep
_REAL_SLEEP = time.sleep
async_sleep: Callable[[float], Any] = asyncio.sleep

OnResponse = Callable[[int, httpx.Response], None]
"""Called as ``on_response(index, response)`` as each of ``send_all``'s requests completes."""


class _Cancelled(Exception):
    """Internal: ``send_all`` was abandoned (a failure or Ctrl-C); no further attempt is made."""


@dataclass(frozen=True)
class Request:
    """One HTTP request to the vLLM server (``path`` relative to the client's base URL).

    An error status raises the mapped :class:`~vllm_tasks.errors.APIStatusError`, unless
    ``raise_for_status`` is False. ``retry=False`` makes a single attempt.
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


class _TransportBase:
    def __init__(
        self, settings: ClientSettings, backoff: Backoff | None = None, usage: UsageCounter | None = None
    ) -> None:
        self.settings = settings
        self.backoff = backoff or Backoff()
        self.usage = usage if usage is not None else UsageCounter()
        """Requests, failures and retries counted here; the client adds its results' tokens."""
        self._urls: dict[str, httpx.URL] = {}
        self._headers = merge_headers(settings.request_headers)
        self._json_headers = merge_headers(self._headers, {"Content-Type": "application/json"})

    def _attempts(self, request: Request) -> int:
        return self.settings.max_retries + 1 if request.retry else 1

    def _url(self, path: str) -> httpx.URL:
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = httpx.URL(self.settings.base_url + path)
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

    @staticmethod
    def _fetch_request(url: str, timeout: float) -> httpx.Request:
        # Built without the client: none of its headers, cookies or auth go to a third-party host.
        return httpx.Request(
            "GET",
            url,
            headers={"User-Agent": f"vllm-tasks/{__version__}"},
            extensions={"timeout": httpx.Timeout(timeout).as_dict()},
        )

    @staticmethod
    def _check(request: Request, response: httpx.Response) -> httpx.Response:
        # An answer that is not vLLM's (a proxy's redirect, a 204, an empty 200) is refused here, so
        # that no parser reads it as an empty result; a request with raise_for_status=False sees it.
        if request.raise_for_status:
            if response.status_code >= 400:
                raise error_from_response(response, task=request.task)
            check_status(response, request.path)
        return response

    @staticmethod
    def _connection_error(
        method: str, url: httpx.URL | str, error: httpx.TransportError
    ) -> APIConnectionError:
        kind = APITimeoutError if isinstance(error, httpx.TimeoutException) else APIConnectionError
        detail = str(error) or type(error).__name__
        return kind(f"{method} {url} {_what_failed(error)}: {detail}", method=method, url=str(url))

    def _retryable(self, error: BaseException) -> bool:
        # A Retry-After over the cap ends the retries (the error then names the wait asked for).
        return is_retryable(error) and not self.backoff.refuses_wait(error)

    def _fetch_request_within(self, url: str, timeout: float, deadline: float) -> httpx.Request:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise self._past_deadline(url)
        try:
            return self._fetch_request(url, min(timeout, remaining))
        except httpx.InvalidURL as error:
            raise InputFetchError("url", url, f"not a valid URL ({error})") from None

    def _past_deadline(self, url: str) -> InputFetchError:
        seconds = self.settings.fetch_limits.deadline
        return InputFetchError("url", url, f"the download took over the {seconds:g} s deadline (FetchLimits)")

    def _next_hop(self, url: str, response: httpx.Response, hops: int) -> str:
        """The target of a redirect, checked (http(s) only, at most ``max_redirects`` of them)."""
        limit = self.settings.fetch_limits.max_redirects
        if hops >= limit:
            raise InputFetchError("url", url, f"more than {limit} redirects")
        target = response.url.join(response.headers["location"])
        if target.scheme not in ("http", "https"):
            raise InputFetchError("url", url, f"redirected to a {target.scheme}: URL, not http(s)")
        return str(target)

    @staticmethod
    def _log_retry(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        delay = state.next_action.sleep if state.next_action else 0.0
        logger.warning("retrying in %.2fs after attempt %d failed: %s", delay, state.attempt_number, error)


class SyncTransport(_TransportBase):
    """Sends requests with an ``httpx.Client``; concurrency on a thread pool."""

    def __init__(
        self,
        http: httpx.Client,
        settings: ClientSettings,
        backoff: Backoff | None = None,
        usage: UsageCounter | None = None,
    ) -> None:
        super().__init__(settings, backoff, usage)
        self.http = http

    def send(self, request: Request) -> httpx.Response:
        """Send with retries; the body is read. Raises the mapped error for an error status."""
        return self._send(request, None)

    def _send(self, request: Request, cancel: threading.Event | None) -> httpx.Response:
        """``send``; once ``cancel`` is set no further attempt starts (a retry's wait ends at once)."""

        def retryable(error: BaseException) -> bool:
            return not (cancel is not None and cancel.is_set()) and self._retryable(error)

        def sleep(seconds: float) -> None:
            if cancel is not None and sync_sleep is _REAL_SLEEP:
                cancel.wait(seconds)  # woken by the cancellation (tests patch sync_sleep instead)
            else:
                sync_sleep(seconds)
            if cancel is not None and cancel.is_set():
                raise _Cancelled

        retrying = Retrying(
            stop=stop_after_attempt(self._attempts(request)),
            wait=self.backoff,
            retry=retry_if_exception(retryable),
            reraise=True,
            sleep=sleep,
            before_sleep=self._log_retry,
        )
        return retrying(self._attempt, request, cancel, itertools.count(1))

    def _attempt(
        self, request: Request, cancel: threading.Event | None = None, attempts: Iterator[int] | None = None
    ) -> httpx.Response:
        if cancel is not None and cancel.is_set():
            raise _Cancelled
        with self._observe(request, next(attempts) if attempts is not None else 1) as observation:
            built = self._build(self.http, request, observation)
            try:
                response = self.http.send(built)
            except httpx.TransportError as error:
                raise self._connection_error(request.method, built.url, error) from _headerless(error)
            observation.response = response
            return self._check(request, response)

    def send_all(
        self, requests: Sequence[Request], concurrency: int, on_response: OnResponse | None = None
    ) -> list[httpx.Response]:
        """Send ``requests``, at most ``concurrency`` at once; the responses in request order.

        The first failure, or anything raised while waiting (Ctrl-C's ``KeyboardInterrupt``, an
        exception from ``on_response``), returns at once: requests not yet started are never sent,
        those in flight are not retried, and their daemon threads end when their answers come.
        """
        if concurrency <= 1 or len(requests) <= 1:
            responses = []
            for index, request in enumerate(requests):
                responses.append(self.send(request))
                if on_response is not None:
                    on_response(index, responses[-1])
            return responses
        cancel = threading.Event()
        answers: queue.SimpleQueue[tuple[int, httpx.Response | None, BaseException | None]]
        answers = queue.SimpleQueue()
        order = iter(range(len(requests)))
        order_lock = threading.Lock()

        def worker() -> None:
            while not cancel.is_set():
                with order_lock:
                    index = next(order, None)
                if index is None:
                    return
                try:
                    answers.put((index, self._send(requests[index], cancel), None))
                except BaseException as error:  # raised in the caller's thread
                    answers.put((index, None, error))
                    return

        results: list[httpx.Response | None] = [None] * len(requests)
        try:
            for _ in range(min(concurrency, len(requests))):
                threading.Thread(target=worker, name="vllm-tasks-send", daemon=True).start()
            for _ in requests:
                index, response, error = answers.get()
                if error is not None:
                    raise error
                results[index] = response
                if on_response is not None and response is not None:
                    on_response(index, response)
        finally:
            cancel.set()
        return [response for response in results if response is not None]

    def open_stream(self, request: Request) -> LineStream:
        """Send once (a retry after output began would repeat it) and return the body's lines as they
        arrive. An error status is read in full and raised as the mapped error.
        """
        with self._observe(request, stream=True) as observation:
            built = self._build(self.http, request, observation)
            try:
                response = self.http.send(built, stream=True)
            except httpx.TransportError as error:
                raise self._connection_error(request.method, built.url, error) from _headerless(error)
            observation.response = response
            if not 200 <= response.status_code < 300 or response.status_code == 204:
                try:
                    response.read()
                finally:
                    response.close()
                self._check(request, response)
        return LineStream(response)

    def fetch(self, url: str, *, timeout: float) -> httpx.Response:
        """GET a user-given absolute URL (an image or audio file), following redirects, one attempt.

        None of the client's headers, API key, auth or cookies are sent (to the first host or any it
        redirects to). ``timeout`` bounds each read; :class:`FetchLimits` bound the whole download (size,
        deadline) and, opted in, refuse private addresses. An error status is returned as is (its body
        read within the same limits).

        Raises:
            InputFetchError: (``field="url"``) a limit was passed or an address refused.
            APIConnectionError: the host cannot be reached or the connection broke.
        """
        deadline = time.monotonic() + self.settings.fetch_limits.deadline
        target = url
        for hops in range(self.settings.fetch_limits.max_redirects + 1):
            if self.settings.fetch_limits.refuse_private:
                host, port = _host_and_port(url, target)
                try:
                    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                except OSError as error:
                    raise InputFetchError(
                        "url", url, f"the host {host} cannot be resolved ({error})"
                    ) from None
                _refuse_private(url, host, infos)
            response = self._fetch_once(url, target, timeout, deadline)
            if not response.has_redirect_location:
                return response
            target = self._next_hop(url, response, hops)
        raise AssertionError("unreachable")  # pragma: no cover (_next_hop raises past the limit)

    def _fetch_once(self, url: str, target: str, timeout: float, deadline: float) -> httpx.Response:
        """One GET, streamed: a redirect is returned unread; any other body is read within the limits."""
        request = self._fetch_request_within(target, timeout, deadline)
        try:
            response = self.http.send(request, auth=None, follow_redirects=False, stream=True)
            try:
                if response.has_redirect_location:
                    return response
                body = _CappedBody(url, self.settings.fetch_limits.max_bytes, response)
                for chunk in response.iter_bytes():
                    body.add(chunk)
                    if time.monotonic() > deadline:
                        raise self._past_deadline(url)
                return body.response()
            finally:
                response.close()
        except httpx.TransportError as error:
            raise self._connection_error("GET", target, error) from _headerless(error)
        except httpx.DecodingError as error:
            raise InputFetchError("url", url, f"the body does not decode ({error})") from None

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (between polls)."""
        sync_sleep(seconds)


class AsyncTransport(_TransportBase):
    """Sends requests with an ``httpx.AsyncClient``; concurrency as asyncio tasks."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        settings: ClientSettings,
        backoff: Backoff | None = None,
        usage: UsageCounter | None = None,
    ) -> None:
        super().__init__(settings, backoff, usage)
        self.http = http

    async def send(self, request: Request) -> httpx.Response:
        """Send with retries; the body is read. Raises the mapped error for an error status."""
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._attempts(request)),
            wait=self.backoff,
            retry=retry_if_exception(self._retryable),
            reraise=True,
            sleep=lambda seconds: async_sleep(seconds),  # noqa: PLW0108
            before_sleep=self._log_retry,
        )
        response: httpx.Response = await retrying(self._attempt, request, itertools.count(1))
        return response

    async def _attempt(self, request: Request, attempts: Iterator[int] | None = None) -> httpx.Response:
        with self._observe(request, next(attempts) if attempts is not None else 1) as observation:
            built = self._build(self.http, request, observation)
            try:
                response = await self.http.send(built)
            except httpx.TransportError as error:
                raise self._connection_error(request.method, built.url, error) from _headerless(error)
            observation.response = response
            return self._check(request, response)

    async def send_all(
        self, requests: Sequence[Request], concurrency: int, on_response: OnResponse | None = None
    ) -> list[httpx.Response]:
        """Send ``requests``, at most ``concurrency`` at once; the responses in request order.

        The first failure cancels the other requests and is raised.
        """
        # A few workers pull the next request from one shared iterator: no task (and no semaphore
        # waiter) per request, so 1,000 requests do not mean 1,000 callbacks in one loop iteration.
        results: list[httpx.Response | None] = [None] * len(requests)
        pending = iter(range(len(requests)))

        async def worker() -> None:
            for index in pending:
                results[index] = response = await self.send(requests[index])
                if on_response is not None:
                    on_response(index, response)
                await asyncio.sleep(0)  # let the loop run others even when the answer came without I/O

        workers = [asyncio.ensure_future(worker()) for _ in range(min(max(1, concurrency), len(requests)))]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        return [response for response in results if response is not None]

    async def open_stream(self, request: Request) -> AsyncLineStream:
        """Send once (a retry after output began would repeat it) and return the body's lines as they
        arrive. An error status is read in full and raised as the mapped error.
        """
        with self._observe(request, stream=True) as observation:
            built = self._build(self.http, request, observation)
            try:
                response = await self.http.send(built, stream=True)
            except httpx.TransportError as error:
                raise self._connection_error(request.method, built.url, error) from _headerless(error)
            observation.response = response
            if not 200 <= response.status_code < 300 or response.status_code == 204:
                try:
                    await response.aread()
                finally:
                    await response.aclose()
                self._check(request, response)
        return AsyncLineStream(response)

    async def fetch(self, url: str, *, timeout: float) -> httpx.Response:
        """GET a user-given absolute URL (an image or audio file), following redirects, one attempt.

        None of the client's headers, API key, auth or cookies are sent (to the first host or any it
        redirects to). ``timeout`` bounds each read; :class:`FetchLimits` bound the whole download (size,
        deadline) and, opted in, refuse private addresses. An error status is returned as is (its body
        read within the same limits).

        Raises:
            InputFetchError: (``field="url"``) a limit was passed or an address refused.
            APIConnectionError: the host cannot be reached or the connection broke.
        """
        deadline = time.monotonic() + self.settings.fetch_limits.deadline
        try:
            async with asyncio.timeout(self.settings.fetch_limits.deadline):
                return await self._fetch_following(url, timeout, deadline)
        except TimeoutError:
            raise self._past_deadline(url) from None

    async def _fetch_following(self, url: str, timeout: float, deadline: float) -> httpx.Response:
        target = url
        for hops in range(self.settings.fetch_limits.max_redirects + 1):
            if self.settings.fetch_limits.refuse_private:
                host, port = _host_and_port(url, target)
                try:
                    loop = asyncio.get_running_loop()
                    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                except OSError as error:
                    raise InputFetchError(
                        "url", url, f"the host {host} cannot be resolved ({error})"
                    ) from None
                _refuse_private(url, host, infos)
            response = await self._fetch_once(url, target, timeout, deadline)
            if not response.has_redirect_location:
                return response
            target = self._next_hop(url, response, hops)
        raise AssertionError("unreachable")  # pragma: no cover (_next_hop raises past the limit)

    async def _fetch_once(self, url: str, target: str, timeout: float, deadline: float) -> httpx.Response:
        """One GET, streamed: a redirect is returned unread; any other body is read within the limits."""
        request = self._fetch_request_within(target, timeout, deadline)
        try:
            response = await self.http.send(request, auth=None, follow_redirects=False, stream=True)
            try:
                if response.has_redirect_location:
                    return response
                body = _CappedBody(url, self.settings.fetch_limits.max_bytes, response)
                chunks = cast(AsyncGenerator[bytes, None], response.aiter_bytes())  # closed on any exit
                async with contextlib.aclosing(chunks):
                    async for chunk in chunks:
                        body.add(chunk)
                return body.response()
            finally:
                await response.aclose()
        except httpx.TransportError as error:
            raise self._connection_error("GET", target, error) from _headerless(error)
        except httpx.DecodingError as error:
            raise InputFetchError("url", url, f"the body does not decode ({error})") from None

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (between polls)."""
        await async_sleep(seconds)


class _LineStreamBase:
    def __init__(self, response: httpx.Response) -> None:
        self.response = response

    def _broken(self, error: httpx.TransportError) -> APIConnectionError:
        detail = str(error) or type(error).__name__
        request = self.response.request
        message = f"{request.method} {request.url}: the stream broke: {detail}"
        return APIConnectionError(message, method=request.method, url=str(request.url))


class LineStream(_LineStreamBase):
    """The lines of a streamed response body; iterate it once. Closes the response when done.

    A connection that breaks mid-stream raises :class:`~vllm_tasks.errors.APIConnectionError`.
    """

    def __iter__(self) -> Iterator[str]:
        try:
            yield from self.response.iter_lines()
        except httpx.TransportError as error:
            raise self._broken(error) from _headerless(error)
        finally:
            self.response.close()

    def close(self) -> None:
        """Release the connection (safe to call twice)."""
        self.response.close()


class AsyncLineStream(_LineStreamBase):
    """The lines of a streamed response body; iterate it once. Closes the response when done.

    A connection that breaks mid-stream raises :class:`~vllm_tasks.errors.APIConnectionError`.
    """

    async def __aiter__(self) -> AsyncIterator[str]:
        try:
            async for line in self.response.aiter_lines():
                yield line
        except httpx.TransportError as error:
            raise self._broken(error) from _headerless(error)
        finally:
            await self.response.aclose()

    async def close(self) -> None:
        """Release the connection (safe to call twice)."""
        await self.response.aclose()


class _CappedBody:
    """A fetched body, collected chunk by chunk, refused as soon as it passes ``max_bytes``."""

    def __init__(self, url: str, max_bytes: int, response: httpx.Response) -> None:
        self.url = url
        self.max_bytes = max_bytes
        self.response_head = response
        self.chunks: list[bytes] = []
        self.size = 0
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise self._too_large(f"it declares {int(declared)} bytes")

    def _too_large(self, detail: str) -> InputFetchError:
        return InputFetchError(
            "url",
            self.url,
            f"the body is over the {self.max_bytes}-byte cap of FetchLimits.max_bytes ({detail})",
        )

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise self._too_large(f"{self.size} bytes read so far")
        self.chunks.append(chunk)

    def response(self) -> httpx.Response:
        """The response with its (decoded) body in memory."""
        head = self.response_head
        framing = {"content-encoding", "content-length", "transfer-encoding"}
        headers = [(k, v) for k, v in head.headers.multi_items() if k.lower() not in framing]
        return httpx.Response(
            head.status_code, headers=headers, content=b"".join(self.chunks), request=head.request
        )


def _host_and_port(url: str, target: str) -> tuple[str, int]:
    try:
        parsed = httpx.URL(target)
    except httpx.InvalidURL as error:
        raise InputFetchError("url", url, f"not a valid URL ({error})") from None
    if not parsed.host:
        raise InputFetchError("url", url, f"{target} has no host")
    return parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80)


def _refuse_private(url: str, host: str, infos: Sequence[tuple[Any, ...]]) -> None:
    """Refuse a host that resolves to any non-public address (FetchLimits.refuse_private)."""
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not address.is_global or address.is_multicast:
            raise InputFetchError(
                "url",
                url,
                f"the host {host} resolves to {address}, a private, loopback or otherwise non-public "
                "address, refused by FetchLimits(refuse_private=True)",
            )


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


def _headerless(error: httpx.TransportError) -> httpx.TransportError:
    """The same httpx error without its request: an exception chain must not carry the API key (a
    request's headers) to a log or a traceback."""
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
