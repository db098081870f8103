# GENERATED from vllm_tasks/_async/transport.py by scripts/unasync.py: do not edit.
"""The sealed transport: everything the client sends to the vLLM server goes through its public methods.

Written once, in ``vllm_tasks/_async/transport.py``; ``scripts/unasync.py`` generates
``vllm_tasks/_sync/transport.py`` (``SyncTransport`` over the threads backend). Request building, answer
checks and error mapping are shared in ``vllm_tasks/transport.py``; the waiting (sleeps, the worker group)
is the backend's (``vllm_tasks/_backends.py``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator, Sequence

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt

from .._backends import SyncBackend
from ..adaptive import Concurrency
from ..config import ClientSettings
from ..engine_metrics import METRICS_MAX_BYTES, METRICS_TIMEOUT, EngineLoad, parse_metrics
from ..errors import APIError
from ..fetching import third_party_request
from ..retries import Backoff
from ..telemetry import UsageCounter
from ..transport import (
    OnResponse,
    Request,
    RouteLimit,
    TransportBase,
    connection_error,
    headerless,
    log_retry,
    stream_broke,
    streamed,
    undecodable,
)


class SyncTransport(TransportBase):
    """Sends requests with an ``httpx.Client``; its backend runs the waits and the concurrency."""

    def __init__(
        self,
        http: httpx.Client,
        settings: ClientSettings,
        backoff: Backoff | None = None,
        usage: UsageCounter | None = None,
    ) -> None:
        super().__init__(settings, backoff, usage)
        self.http = http
        self.backend = SyncBackend()

    def send(self, request: Request, route: RouteLimit | None = None) -> httpx.Response:
        """Send with retries; the body is read. Raises the mapped error for an error status.

        A request with ``raise_for_status=False`` is retried on a retryable status too; its last answer
        is returned. With ``route`` (a ``concurrency="auto"`` call), each attempt waits out a
        ``Retry-After`` another answer asked for, takes one of the route's slots, and feeds its answer
        to the route's limit.
        """
        response: httpx.Response = self._retrying(request)(self._attempt, request, itertools.count(1), route)
        return response

    def _retrying(self, request: Request) -> Retrying:
        return Retrying(
            stop=stop_after_attempt(self._attempts(request)),
            wait=self.backoff,
            retry=retry_if_exception(self._should_retry),
            reraise=True,
            sleep=self.backend.sleep,
            before_sleep=log_retry,
        )

    def _should_retry(self, error: BaseException) -> bool:
        # Work given up on (a failed send_all, Ctrl-C) starts no further attempt.
        return not self.backend.cancelled() and self._retryable(error)

    def _attempt(
        self,
        request: Request,
        attempts: itertools.count[int],
        route: RouteLimit | None = None,
        *,
        stream: bool = False,
    ) -> httpx.Response:
        self.backend.check_cancelled()
        if route is None:
            return self._exchange(request, next(attempts), stream=stream)
        if route.paused() > 0:
            self.backend.sleep(route.paused())
        self.backend.take_slot(route)
        try:
            response = self._exchange(request, next(attempts), route, stream=stream)
        finally:
            route.release()
        self._sample_engine(route)
        return response

    def _sample_engine(self, route: RouteLimit) -> None:
        """Feed ``route`` a sample of the server's ``/metrics`` when one is due (see
        :mod:`vllm_tasks.engine_metrics`); one that fails leaves the limit to the latencies."""
        if not self.engine.due(time.monotonic()):
            return
        load = self.engine_load()
        self.engine.read(load)
        self.usage.limit_now(route.sampled(load))

    def engine_load(self) -> EngineLoad | None:
        """One sample of the server's ``GET /metrics``: ``None`` when it is not served, fails, or answers
        anything but vLLM's metrics (never raises: the caller goes on without them)."""
        body = bytearray()
        try:
            built = self._build(self.http, Request("GET", "/metrics", timeout=METRICS_TIMEOUT))
            response = self.http.send(built, stream=True)
            try:
                if response.status_code != 200:
                    return None
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > METRICS_MAX_BYTES:  # not vLLM's metrics (a proxy's page, a stream)
                        return None
            finally:
                response.close()
        except httpx.HTTPError:
            return None
        return parse_metrics(body.decode("utf-8", "replace"))

    def _exchange(
        self, request: Request, attempt: int, route: RouteLimit | None = None, *, stream: bool = False
    ) -> httpx.Response:
        """One attempt. ``stream``: the body of a successful answer is left unread (the caller reads and
        closes it); any other answer is read whole and closed."""
        with self._observe(request, attempt, stream=stream) as observation:
            built = self._build(self.http, request, observation)
            if route is not None:
                observation.set_attribute("vllm_tasks.concurrency.limit", route.limit.allowed)
            failure: APIError
            sent = time.perf_counter()
            try:
                response = self.http.send(built, stream=stream)
                observation.response = response
                if stream and not streamed(response):
                    try:
                        response.read()
                    finally:
                        response.close()
            except httpx.TransportError as error:
                failure, cause = connection_error(request.method, built.url, error), headerless(error)
            except httpx.DecodingError as error:
                failure, cause = undecodable(request.method, built.url, error), headerless(error)
            else:
                if route is not None:
                    self._learn(route, time.perf_counter() - sent, response)
                if stream and streamed(response):
                    return response
                return self._check(request, response, final=attempt >= self._attempts(request))
            # Raised after the except block: its __context__ would hold httpx's error, request and all.
            raise failure from cause

    def send_all(
        self, requests: Sequence[Request], concurrency: Concurrency, on_response: OnResponse | None = None
    ) -> list[httpx.Response]:
        """Send ``requests``, at most ``concurrency`` at once; the responses in request order.

        ``concurrency="auto"``: the route's :meth:`route_limit`, shared with every other call on this
        client, bounds the requests in flight (retries included), and every answer feeds it.
        The first failure, or anything raised while waiting (a cancellation, Ctrl-C, an exception from
        ``on_response``), returns at once: requests not yet started are never sent and those in flight
        are not retried.
        """
        if concurrency == "auto":
            if not requests:
                return []
            route = self.route_limit(requests[0].path)
            return self.backend.map_bounded(
                len(requests),
                lambda: route.limit.allowed,
                lambda index: self.send(requests[index], route),
                on_response,
            )
        return self.backend.map_bounded(
            len(requests), concurrency, lambda index: self.send(requests[index]), on_response
        )

    def open_stream(self, request: Request) -> LineStream:
        """Open a streamed answer with the retries of :meth:`send` and return the body's lines as they
        arrive. An error status is read in full and raised as the mapped error (after the retries).

        Only the opening is retried (an error status, a connection that fails before the answer): once
        output has been read, a stream that breaks raises, since another attempt would repeat the output.
        """
        response: httpx.Response = self._retrying(request)(
            self._attempt, request, itertools.count(1), stream=True
        )
        return LineStream(response)

    def open_third_party(self, url: str, timeout: float, address: str | None = None) -> httpx.Response:
        """Start a GET of a user-given URL (an image or audio file) on another host; the caller reads
        and closes the streamed response (``_async/fetching.py`` does, within ``FetchLimits``).

        None of the client's headers, API key, auth or cookies are sent, no redirect is followed, and no
        retry is made; it is not counted in ``usage`` (it is not a request to the vLLM server). ``address``:
        connect to this (checked) IP address of the host rather than look the name up again (see
        :func:`~vllm_tasks.fetching.third_party_request`).

        Raises:
            APIConnectionError: the host cannot be reached.
        """
        request = third_party_request(url, timeout, address)
        try:
            return self.http.send(request, auth=None, follow_redirects=False, stream=True)
        except httpx.TransportError as error:
            failure, cause = connection_error("GET", url, error), headerless(error)
        raise failure from cause  # after the except block: no __context__ (see _attempt)

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (between polls)."""
        self.backend.sleep(seconds)


class LineStream:
    """The lines of a streamed response body; iterate it once. Closes the response when done.

    A connection that breaks mid-stream raises :class:`~vllm_tasks.errors.APIConnectionError`.
    """

    def __init__(self, response: httpx.Response) -> None:
        self.response = response

    def __iter__(self) -> Iterator[str]:
        failure: APIError
        try:
            for line in self.response.iter_lines():
                yield line
        except httpx.TransportError as error:
            failure, cause = stream_broke(self.response, error), headerless(error)
        except httpx.DecodingError as error:
            request = self.response.request
            failure, cause = undecodable(request.method, request.url, error), headerless(error)
        else:
            return
        finally:
            self.response.close()
        raise failure from cause  # after the except block: no __context__ (see _attempt)

    def close(self) -> None:
        """Release the connection (safe to call twice)."""
        self.response.close()
