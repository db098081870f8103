"""The sealed transport: everything that touches the network goes through its public methods.

``SyncTransport`` and ``AsyncTransport`` have the same methods (``send``, ``send_all``, ``open_stream``,
``fetch``, ``sleep``), so the async client code in ``vllm_tasks/_async/`` turns into the sync client by
token replacement (``scripts/unasync.py``). They share request building, error mapping and the retry
policy (``vllm_tasks.retries``); only the waiting differs (threads or asyncio tasks).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from .calls import CLIENT_DEFAULT, TimeoutLike
from .config import ClientConfig
from .errors import APIConnectionError, APITimeoutError, error_from_response
from .retries import Backoff, is_retryable
from .tasks import TaskName
from .version import __version__

logger = logging.getLogger("vllm_tasks")

sync_sleep: Callable[[float], None] = time.sleep
async_sleep: Callable[[float], Any] = asyncio.sleep

OnResponse = Callable[[int, httpx.Response], None]
"""Called as ``on_response(index, response)`` as each of ``send_all``'s requests completes."""


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
    def __init__(self, config: ClientConfig, backoff: Backoff | None = None) -> None:
        self.config = config
        self.backoff = backoff or Backoff()
        self._urls: dict[str, httpx.URL] = {}
        self._headers = merge_headers(config.headers)
        self._json_headers = merge_headers(self._headers, {"Content-Type": "application/json"})

    def _attempts(self, request: Request) -> int:
        return self.config.max_retries + 1 if request.retry else 1

    def _url(self, path: str) -> httpx.URL:
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = httpx.URL(self.config.base_url + path)
        return url

    def _build(self, http: httpx.Client | httpx.AsyncClient, request: Request) -> httpx.Request:
        # URL, headers and timeout are applied per request so that an injected client is not mutated.
        timeout = self.config.timeout if request.timeout is CLIENT_DEFAULT else request.timeout
        content = None if request.json is None else json_bytes(request.json)
        headers = self._headers if content is None else self._json_headers
        return http.build_request(
            request.method,
            self._url(request.path),
            content=content,
            data=request.data,
            files=request.files,
            params=request.params,
            headers=merge_headers(headers, request.headers) if request.headers else headers,
            timeout=timeout,
        )

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
        if response.status_code >= 400 and request.raise_for_status:
            raise error_from_response(response, task=request.task)
        return response

    @staticmethod
    def _connection_error(
        method: str, url: httpx.URL | str, error: httpx.TransportError
    ) -> APIConnectionError:
        kind = APITimeoutError if isinstance(error, httpx.TimeoutException) else APIConnectionError
        what = "timed out" if kind is APITimeoutError else "could not connect"
        detail = str(error) or type(error).__name__
        return kind(f"{method} {url} {what}: {detail}", method=method, url=str(url))

    @staticmethod
    def _log_retry(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        delay = state.next_action.sleep if state.next_action else 0.0
        logger.warning("retrying in %.2fs after attempt %d failed: %s", delay, state.attempt_number, error)


class SyncTransport(_TransportBase):
    """Sends requests with an ``httpx.Client``; concurrency on a thread pool."""

    def __init__(self, http: httpx.Client, config: ClientConfig, backoff: Backoff | None = None) -> None:
        super().__init__(config, backoff)
        self.http = http

    def send(self, request: Request) -> httpx.Response:
        """Send with retries; the body is read. Raises the mapped error for an error status."""
        retrying = Retrying(
            stop=stop_after_attempt(self._attempts(request)),
            wait=self.backoff,
            retry=retry_if_exception(is_retryable),
            reraise=True,
            sleep=lambda seconds: sync_sleep(seconds),  # noqa: PLW0108 (tests patch sync_sleep)
            before_sleep=self._log_retry,
        )
        return retrying(self._attempt, request)

    def _attempt(self, request: Request) -> httpx.Response:
        built = self._build(self.http, request)
        try:
            response = self.http.send(built)
        except httpx.TransportError as error:
            raise self._connection_error(request.method, built.url, error) from _headerless(error)
        return self._check(request, response)

    def send_all(
        self, requests: Sequence[Request], concurrency: int, on_response: OnResponse | None = None
    ) -> list[httpx.Response]:
        """Send ``requests``, at most ``concurrency`` at once; the responses in request order.

        The first failure cancels the requests not yet started and is raised.
        """
        if concurrency <= 1 or len(requests) <= 1:
            responses = []
            for index, request in enumerate(requests):
                responses.append(self.send(request))
                if on_response is not None:
                    on_response(index, responses[-1])
            return responses
        results: list[httpx.Response | None] = [None] * len(requests)
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="vllm-tasks") as pool:
            futures: dict[Future[httpx.Response], int] = {
                pool.submit(self.send, request): index for index, request in enumerate(requests)
            }
            pending = set(futures)
            try:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                    for future in done:
                        index = futures[future]
                        results[index] = future.result()
                        if on_response is not None:
                            on_response(index, future.result())
            finally:
                for future in pending:
                    future.cancel()
        return [response for response in results if response is not None]

    def open_stream(self, request: Request) -> LineStream:
        """Send once (a retry after output began would repeat it) and return the body's lines as they
        arrive. An error status is read in full and raised as the mapped error.
        """
        built = self._build(self.http, request)
        try:
            response = self.http.send(built, stream=True)
        except httpx.TransportError as error:
            raise self._connection_error(request.method, built.url, error) from _headerless(error)
        if response.status_code >= 400:
            try:
                response.read()
            finally:
                response.close()
            raise error_from_response(response, task=request.task)
        return LineStream(response)

    def fetch(self, url: str, *, timeout: float) -> httpx.Response:
        """GET a user-given absolute URL (an image or audio file), following redirects, one attempt.

        None of the client's headers, API key, auth or cookies are sent. An error status is returned
        as is; a connection failure raises :class:`~vllm_tasks.errors.APIConnectionError`.
        """
        try:
            return self.http.send(self._fetch_request(url, timeout), auth=None, follow_redirects=True)
        except httpx.TransportError as error:
            raise self._connection_error("GET", url, error) from _headerless(error)

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (between polls)."""
        sync_sleep(seconds)


class AsyncTransport(_TransportBase):
    """Sends requests with an ``httpx.AsyncClient``; concurrency as asyncio tasks."""

    def __init__(self, http: httpx.AsyncClient, config: ClientConfig, backoff: Backoff | None = None) -> None:
        super().__init__(config, backoff)
        self.http = http

    async def send(self, request: Request) -> httpx.Response:
        """Send with retries; the body is read. Raises the mapped error for an error status."""
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._attempts(request)),
            wait=self.backoff,
            retry=retry_if_exception(is_retryable),
            reraise=True,
            sleep=lambda seconds: async_sleep(seconds),  # noqa: PLW0108
            before_sleep=self._log_retry,
        )
        response: httpx.Response = await retrying(self._attempt, request)
        return response

    async def _attempt(self, request: Request) -> httpx.Response:
        built = self._build(self.http, request)
        try:
            response = await self.http.send(built)
        except httpx.TransportError as error:
            raise self._connection_error(request.method, built.url, error) from _headerless(error)
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
        built = self._build(self.http, request)
        try:
            response = await self.http.send(built, stream=True)
        except httpx.TransportError as error:
            raise self._connection_error(request.method, built.url, error) from _headerless(error)
        if response.status_code >= 400:
            try:
                await response.aread()
            finally:
                await response.aclose()
            raise error_from_response(response, task=request.task)
        return AsyncLineStream(response)

    async def fetch(self, url: str, *, timeout: float) -> httpx.Response:
        """GET a user-given absolute URL (an image or audio file), following redirects, one attempt.

        None of the client's headers, API key, auth or cookies are sent. An error status is returned
        as is; a connection failure raises :class:`~vllm_tasks.errors.APIConnectionError`.
        """
        try:
            return await self.http.send(self._fetch_request(url, timeout), auth=None, follow_redirects=True)
        except httpx.TransportError as error:
            raise self._connection_error("GET", url, error) from _headerless(error)

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
