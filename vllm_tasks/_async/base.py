"""The asynchronous client's core: configuration, the operation driver, discovery.

Source of truth: ``vllm_tasks/_sync/`` is generated from ``vllm_tasks/_async/`` by ``scripts/unasync.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any, Self, TypeVar, cast

import httpx

from .. import defaults, discovery
from ..config import ClientConfig, TimeoutArg
from ..errors import APIConnectionError, InvalidInputError, VLLMTasksError, error_from_response
from ..steps import Fetch, GetServerInfo, Operation, Parallel, Request, Sleep, Step, Stream
from ..transport import AsyncTransport, async_sleep
from ..types.server import ProbeReport, ServerInfo

T = TypeVar("T")


class AsyncClientBase:
    """Asynchronous client for a vLLM server's embedding, scoring, audio and OCR endpoints.

    Args:
        base_url: the server's root URL. Default: env ``VLLM_TASKS_BASE_URL``, else
            ``http://localhost:8000``. A trailing ``/v1`` is removed (vLLM serves /score at the root).
        api_key: sent as ``Authorization: Bearer``. Default: env ``VLLM_API_KEY``.
        model: the served model name to use when a call names none. Default: the server's first.
        timeout: seconds (or an ``httpx.Timeout``) per request; ``None`` waits forever.
        max_retries: retries for connection errors, timeouts, 408/409/429/5xx; 0 disables them.
        headers: extra headers sent with every request.
        http_client: your own ``httpx.AsyncClient`` (proxies, mTLS, event hooks); you close it.

    Raises:
        InvalidInputError: for an invalid argument, at construction.

    Example:
        >>> async with vllm_tasks.AsyncClient("http://localhost:8000") as client:
        ...     info = await client.server_info()
    """

    def __init__(
        self,
        base_url: str | httpx.URL | None = None,
        *,
        api_key: str | None = None,
        model: str | None = None,
        timeout: TimeoutArg = defaults.TIMEOUT,
        max_retries: int = defaults.MAX_RETRIES,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._config = ClientConfig.create(
            base_url, api_key=api_key, model=model, timeout=timeout, max_retries=max_retries, headers=headers
        )
        if http_client is not None and not isinstance(http_client, httpx.AsyncClient):
            raise InvalidInputError(
                "http_client",
                type(http_client).__name__,
                "must be an httpx.AsyncClient",
                "Pass a client of that type, or None to let this client make its own.",
            )
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient()
        self._transport = AsyncTransport(self._http, self._config)
        self._server_info: ServerInfo | None = None
        self._server_info_lock = asyncio.Lock()

    def __repr__(self) -> str:
        key = "set" if self._config.api_key else "none"
        name = type(self).__name__
        return f"{name}(base_url={self._config.base_url!r}, model={self._config.model!r}, api_key={key})"

    @property
    def base_url(self) -> str:
        """The server's root URL."""
        return self._config.base_url

    @property
    def model(self) -> str | None:
        """The model name given at construction (``None``: the server's default)."""
        return self._config.model

    async def __aenter__(self: Self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the HTTP connection pool, unless it was passed in as ``http_client``."""
        if self._owns_http:
            await self._http.aclose()

    async def server_info(self, *, refresh: bool = False) -> ServerInfo:
        """What the server is: version, served models (``root``, ``max_model_len``), mounted routes.

        Read from ``GET /version``, ``GET /v1/models`` and ``GET /openapi.json`` once per client and
        cached; ``refresh=True`` reads them again.

        Returns:
            ServerInfo: ``version`` is ``None`` when the server hides it, ``routes`` is ``None`` when
            its docs are disabled.

        Raises:
            APIConnectionError: the server cannot be reached.
            AuthenticationError: ``/v1/models`` needs an API key.

        Example:
            >>> (await client.server_info()).version
            '0.32.0'
        """
        if self._server_info is None or refresh:
            async with self._server_info_lock:
                if self._server_info is None or refresh:
                    self._server_info = await self._run(discovery.discover(self._config.base_url))
        return self._server_info

    async def wait_until_ready(
        self, timeout: float = 600.0, *, interval: float = defaults.HEALTH_POLL_INTERVAL
    ) -> None:
        """Wait until ``GET /health`` answers 200 (the model is loaded).

        Refused connections and 503 while the server loads are tolerated until ``timeout`` seconds.

        Raises:
            ServerNotReady: when time runs out; ``last_cause`` says what was seen last.

        Example:
            >>> await client.wait_until_ready(timeout=120)
        """
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise InvalidInputError("timeout", timeout, "must be a positive number of seconds", "")
        await self._run(discovery.wait_until_ready(self._config.base_url, float(timeout), interval))

    async def probe(self) -> ProbeReport:
        """Check which tasks the server serves, and which known pitfalls apply to it.

        Every task route (embed, embed_v2, score, rerank, classify, pooling, transcription,
        translation, chat) gets its cheapest request; each is reported as served, not served (404),
        inactive (501) or unauthorized (401).

        Raises:
            APIConnectionError: the server cannot be reached.

        Example:
            >>> report = await client.probe()
            >>> report.served_tasks
            ['embed', 'embed_v2', 'score', 'rerank', 'pooling']
        """
        return await self._run(discovery.probe(self._config.base_url))

    async def _run(self, operation: Operation[T]) -> T:
        """Drive an operation: perform each step it yields, send back the result or the error."""
        outcome: Any = None
        error: VLLMTasksError | None = None
        while True:
            try:
                step = operation.throw(error) if error is not None else operation.send(outcome)
            except StopIteration as stop:
                return cast(T, stop.value)
            outcome, error = None, None
            try:
                outcome = await self._perform(step)
            except VLLMTasksError as raised:
                error = raised

    async def _perform(self, step: Step) -> Any:
        if isinstance(step, Request):
            return await self._transport.send(step)
        if isinstance(step, Parallel):
            return await self._transport.send_all(step.requests, step.concurrency, step.on_response)
        if isinstance(step, Sleep):
            return await async_sleep(step.seconds)
        if isinstance(step, GetServerInfo):
            return await self.server_info(refresh=step.refresh)
        if isinstance(step, Stream):
            return await self._open_stream(step.request)
        if isinstance(step, Fetch):
            return await self._fetch(step)
        raise TypeError(f"unknown step {step!r}")

    async def _fetch(self, step: Fetch) -> httpx.Response:
        """GET a third-party URL with none of this client's headers: the API key never leaves for it."""
        request = self._http.build_request("GET", step.url, timeout=step.timeout)
        request.headers.pop("Authorization", None)  # an injected http_client may carry default headers
        try:
            return await self._http.send(request, follow_redirects=True)
        except httpx.TransportError as error:
            detail = str(error) or type(error).__name__
            message = f"GET {step.url} failed: {detail}"
            raise APIConnectionError(message, method="GET", url=step.url) from error

    async def _open_stream(self, request: Request) -> AsyncLineStream:
        """Send ``request`` and return its body's lines as they arrive; an error status raises here."""
        transport = self._transport
        built = transport._build(self._http, request)
        try:
            response = await self._http.send(built, stream=True)
        except httpx.TransportError as error:
            raise transport._transport_error(request, built.url, error) from error
        if response.status_code >= 400:
            try:
                await response.aread()
            finally:
                await response.aclose()
            raise error_from_response(response, task=request.task)
        return AsyncLineStream(response, request)


class AsyncLineStream:
    """The lines of a streamed response body (``Stream`` step); closes the response when done.

    Iterate it once; ``close()`` releases the connection early. A connection that breaks mid-stream
    raises :class:`~vllm_tasks.errors.APIConnectionError`.
    """

    def __init__(self, response: httpx.Response, request: Request) -> None:
        self.response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[str]:
        try:
            async for line in self.response.aiter_lines():
                yield line
        except httpx.TransportError as error:
            detail = str(error) or type(error).__name__
            url = str(self.response.request.url)
            message = f"{self._request.method} {url}: the stream broke: {detail}"
            raise APIConnectionError(message, method=self._request.method, url=url) from error
        finally:
            await self.response.aclose()

    async def close(self) -> None:
        """Release the connection (safe to call twice)."""
        await self.response.aclose()
