"""HTTP transport: httpx underneath, tenacity retries, vLLM error mapping.

``SyncTransport`` and ``AsyncTransport`` share everything but the waiting: request building, error
mapping and the retry policy (``vllm_tasks.retries``) are common code.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any

import httpx
from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from .config import ClientConfig
from .errors import APIConnectionError, APITimeoutError, error_from_response
from .retries import Backoff, is_retryable
from .steps import CLIENT_DEFAULT, Request

logger = logging.getLogger("vllm_tasks")

sync_sleep: Callable[[float], None] = time.sleep
async_sleep: Callable[[float], Any] = asyncio.sleep


class _TransportBase:
    def __init__(self, config: ClientConfig, backoff: Backoff | None = None) -> None:
        self.config = config
        self.max_retries = config.max_retries
        self.backoff = backoff or Backoff()

    def _attempts(self, request: Request) -> int:
        return self.max_retries + 1 if request.retry else 1

    def _build(self, http: httpx.Client | httpx.AsyncClient, request: Request) -> httpx.Request:
        # URL, headers and timeout are applied per request so that an injected client is not mutated.
        timeout = self.config.timeout if request.timeout is CLIENT_DEFAULT else request.timeout
        return http.build_request(
            request.method,
            self.config.base_url + request.path,
            json=request.json,
            data=request.data,
            files=request.files,
            params=request.params,
            headers=merge_headers(self.config.headers, request.headers),
            timeout=timeout,
        )

    @staticmethod
    def _check(request: Request, response: httpx.Response) -> httpx.Response:
        if response.status_code >= 400 and request.raise_for_status:
            raise error_from_response(response, task=request.task)
        return response

    @staticmethod
    def _transport_error(request: Request, url: httpx.URL, error: httpx.TransportError) -> APIConnectionError:
        kind = APITimeoutError if isinstance(error, httpx.TimeoutException) else APIConnectionError
        what = "timed out" if kind is APITimeoutError else "could not connect"
        detail = str(error) or type(error).__name__
        return kind(f"{request.method} {url} {what}: {detail}", method=request.method, url=str(url))

    @staticmethod
    def _log_retry(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        delay = state.next_action.sleep if state.next_action else 0.0
        logger.warning("retrying in %.2fs after attempt %d failed: %s", delay, state.attempt_number, error)


class SyncTransport(_TransportBase):
    """Sends :class:`~vllm_tasks.steps.Request` steps with an ``httpx.Client``."""

    def __init__(self, http: httpx.Client, config: ClientConfig, backoff: Backoff | None = None) -> None:
        super().__init__(config, backoff)
        self.http = http

    def send(self, request: Request) -> httpx.Response:
        """Send with retries; raise the mapped error for an error status (see ``Request``)."""
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
            raise self._transport_error(request, built.url, error) from error
        return self._check(request, response)

    def send_all(
        self,
        requests: Sequence[Request],
        concurrency: int,
        on_response: Callable[[int, httpx.Response], None] | None = None,
    ) -> list[httpx.Response]:
        """Send ``requests`` on a thread pool, at most ``concurrency`` at once; responses in order."""
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


class AsyncTransport(_TransportBase):
    """Sends :class:`~vllm_tasks.steps.Request` steps with an ``httpx.AsyncClient``."""

    def __init__(self, http: httpx.AsyncClient, config: ClientConfig, backoff: Backoff | None = None) -> None:
        super().__init__(config, backoff)
        self.http = http

    async def send(self, request: Request) -> httpx.Response:
        """Send with retries; raise the mapped error for an error status (see ``Request``)."""
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
            raise self._transport_error(request, built.url, error) from error
        return self._check(request, response)

    async def send_all(
        self,
        requests: Sequence[Request],
        concurrency: int,
        on_response: Callable[[int, httpx.Response], None] | None = None,
    ) -> list[httpx.Response]:
        """Send ``requests`` as asyncio tasks, at most ``concurrency`` at once; responses in order."""
        semaphore = asyncio.Semaphore(max(1, concurrency))

        async def one(index: int, request: Request) -> httpx.Response:
            async with semaphore:
                response = await self.send(request)
            if on_response is not None:
                on_response(index, response)
            return response

        tasks = [asyncio.ensure_future(one(index, request)) for index, request in enumerate(requests)]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise


def merge_headers(*layers: Mapping[str, str] | None) -> dict[str, str]:
    """Merge header mappings, later layers winning (case-insensitively)."""
    merged = httpx.Headers()
    for layer in layers:
        if layer:
            merged.update(layer)
    return dict(merged)
