"""The asynchronous client's core: configuration, the transport, discovery (``server_info``, ``probe``).

Source of truth: ``vllm_tasks/_sync/`` is generated from ``vllm_tasks/_async/`` by ``scripts/unasync.py``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Hashable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx

from .. import defaults
from .._backends import SETTLE_SECONDS
from ..adaptive import Concurrency
from ..config import ClientSettings, FetchLimits, TimeoutArg, TransportName
from ..discovery import NGRAM_PROCESSOR
from ..engine_metrics import EngineLoad
from ..errors import InvalidInputError
from ..progress import Progress
from ..server_state import Fact, ServerState
from ..telemetry import UsageCounter
from ..transport import Request, own_http_client
from ..types.common import ClientUsage
from ..types.server import ProbeReport, ServerInfo
from ..validation import positive_number
from . import discovery
from .transport import AsyncTransport

Result = TypeVar("Result")
Key = TypeVar("Key", bound=Hashable)
Value = TypeVar("Value")


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
        fetch_limits: bounds on downloading user-given image/audio URLs: ``FetchLimits(max_bytes=,
            deadline=, refuse_private=)``. Default: 256 MiB, 300 s, private addresses allowed.
        transport: what sends the requests when no ``http_client`` is given: ``"auto"`` (urllib3's
            pool for the sync client where installed and no proxy is set, httpx's own for the async
            one) or ``"httpx"`` (see :class:`~vllm_tasks.ClientSettings`).

    Raises:
        InvalidInputError: for an invalid argument, at construction.

    Examples:
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
        fetch_limits: FetchLimits | None = None,
        transport: TransportName = defaults.TRANSPORT,
    ) -> None:
        settings = ClientSettings(
            base_url,
            api_key=api_key,
            model=model,
            timeout=timeout,
            max_retries=max_retries,
            headers=headers,
            fetch_limits=fetch_limits,
            transport=transport,
        )
        self._start(settings, http_client)

    def _start(
        self,
        settings: ClientSettings,
        http_client: httpx.AsyncClient | None,
        usage: UsageCounter | None = None,
    ) -> None:
        """Set the client up from checked settings (what ``__init__`` and ``from_settings`` share); it
        counts into ``usage`` when given (see :meth:`_beside`)."""
        if http_client is not None and not isinstance(http_client, httpx.AsyncClient):
            raise InvalidInputError(
                "http_client",
                type(http_client).__name__,
                "must be an httpx.AsyncClient",
                "Pass a client of that type, or None to let this client make its own.",
            )
        self._settings = settings
        self._owns_http = http_client is None
        self._http = http_client or own_http_client(httpx.AsyncClient, settings.transport)
        self._usage = usage or UsageCounter()
        self._transport = AsyncTransport(self._http, settings, usage=self._usage)
        self._server_state = ServerState()
        # Held while reading the server info or probing a fact once (scorer kind, n-gram processor).
        self._discovery_lock = asyncio.Lock()
        # Held only to swap _server_state (never across an await), so threads learning facts at once
        # do not lose one another's.
        self._state_swap = threading.Lock()

    @classmethod
    def from_settings(cls, settings: ClientSettings, *, http_client: httpx.AsyncClient | None = None) -> Self:
        """A client configured by ``settings`` (e.g. another client's ``client.settings``, or a value
        unpickled in a worker process).

        Args:
            settings: the client's settings.
            http_client: your own ``httpx.AsyncClient`` (proxies, mTLS, event hooks); you close it.

        Returns:
            A new client; it makes its own connection pool unless ``http_client`` is given.

        Raises:
            InvalidInputError: ``settings`` is not a ``ClientSettings``, or ``http_client`` is of another
                type.

        Examples:
            >>> settings = vt.ClientSettings("http://localhost:8000", model="minilm")
            >>> async with vt.AsyncClient.from_settings(settings) as client:
            ...     result = await client.embed("hello")
        """
        if not isinstance(settings, ClientSettings):
            raise InvalidInputError(
                "settings",
                type(settings).__name__,
                "must be a ClientSettings",
                "Pass vllm_tasks.ClientSettings(...) or another client's client.settings.",
            )
        client = cls.__new__(cls)
        client._start(settings, http_client)
        return client

    @classmethod
    def _beside(cls, other: Any) -> Self:
        """A client of this kind for ``other``, a client of the other kind (async for sync, sync for async):
        its settings, counting into its ``usage``, knowing what it knows of the server (give back what
        this one learns with :meth:`_hand_back`). A job given a ``Client`` runs on such an ``AsyncClient``.
        """
        client = cls.__new__(cls)
        client._start(other.settings, None, usage=other._usage)
        client._server_state = other._server_state
        return client

    def _hand_back(self, other: Any) -> None:
        """Give ``other`` (the client this one is :meth:`_beside`) what this one learned of the server."""
        with other._state_swap:
            other._server_state = self._server_state

    def with_options(self, **changes: Any) -> Self:
        """A new client with some settings changed; it shares this client's ``http_client``, if one was
        given (else it makes its own connection pool, closed by its own ``close()``).

        Args:
            **changes: new values by setting name: ``base_url``, ``api_key``, ``model``, ``timeout``,
                ``max_retries``, ``headers``, ``fetch_limits``, ``transport`` (see
                :class:`~vllm_tasks.ClientSettings`).

        Returns:
            A client of the same class; this one is unchanged (its server info is not shared).

        Raises:
            InvalidInputError: a name that is not a setting (naming it), or a bad value.

        Examples:
            >>> patient = client.with_options(timeout=1800, max_retries=5)
            >>> replica = client.with_options(base_url="http://gpu2:8000")
        """
        return self.from_settings(self._settings.replace(**changes), http_client=self.http_client)

    def __repr__(self) -> str:
        key = "set" if self._settings.api_key else "none"
        name = type(self).__name__
        return f"{name}(base_url={self.base_url!r}, model={self.model!r}, api_key={key})"

    @property
    def settings(self) -> ClientSettings:
        """What this client was configured with (a frozen value: pickle it, or build another client from
        it with :meth:`from_settings`). Its ``repr`` never shows the key.

        Examples:
            >>> client.settings.max_retries
            2
        """
        return self._settings

    @property
    def http_client(self) -> httpx.AsyncClient | None:
        """The ``httpx.AsyncClient`` given as ``http_client=`` (shared by :meth:`with_options` copies), or
        ``None`` when this client made its own."""
        return None if self._owns_http else self._http

    @property
    def base_url(self) -> str:
        """The server's root URL, without any ``user:password@`` credentials it was given with."""
        return self._settings.display_url

    @property
    def model(self) -> str | None:
        """The model name given at construction (``None``: the server's default)."""
        return self._settings.model

    @property
    def usage(self) -> ClientUsage:
        """What this client has sent and used so far (a snapshot; safe to read from any thread).

        ``requests``, ``failed_requests`` and ``retries`` count every HTTP request to the server (discovery
        and probes included); ``prompt_tokens``, ``completion_tokens``, ``audio_seconds`` and ``pages`` add
        up the results returned. See ``docs/telemetry.md``.

        Examples:
            >>> client.embed(["a", "b"])
            >>> client.usage.prompt_tokens
            14
        """
        return self._usage.snapshot()

    def _counted(self, result: Result) -> Result:
        """Add a returned result's tokens, audio seconds and OCR pages to :attr:`usage`; returns it."""
        self._usage.add_result(result)
        return result

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
        """Close the HTTP connection pool, unless it was passed in as ``http_client``.

        Requests a failed call left running (the sync client's worker threads cannot be stopped) get up
        to a second to end first, so that none opens a connection the closed pool would never close;
        then the sync client's worker threads end (a later call starts new ones).
        """
        await self._transport.backend.close(SETTLE_SECONDS)
        if self._owns_http:
            await self._http.aclose()

    async def server_info(self, *, refresh: bool = False) -> ServerInfo:
        """What the server is: version, served models (``root``, ``max_model_len``), mounted routes.

        Read from ``GET /version``, ``GET /v1/models`` and ``GET /openapi.json`` once per client and
        cached; ``refresh=True`` reads them again and forgets every fact learned about the server since
        (embedding widths, scorer kinds, the n-gram processor check, a proxy's batch cap), so a server
        restarted on other weights is learned again.

        Returns:
            ServerInfo: ``version`` is ``None`` when the server hides it, ``routes`` is ``None`` when
            its docs are disabled.

        Raises:
            APIConnectionError: the server cannot be reached.
            AuthenticationError: ``/v1/models`` needs an API key.

        Examples:
            >>> (await client.server_info()).version
            '0.32.0'
        """
        info = self._server_state.info
        if info is None or refresh:
            async with self._discovery_lock:
                info = self._server_state.info
                if info is None or refresh:
                    info = await discovery.discover(self._transport, self._settings.base_url)
                    with self._state_swap:
                        # A first read keeps the facts a probe() learned before; a refresh forgets all.
                        kept = ServerState() if refresh else self._server_state
                        self._server_state = kept.with_info(info)
        return info

    async def _current_state(self) -> ServerState:
        """The server state, with the server info read if it was not yet."""
        await self.server_info()
        return self._server_state

    def _learn(self, seen: ServerState, fact: Fact[Key, Value], key: Key, value: Value) -> None:
        """Remember a fact learned from answers the server gave while ``seen`` was the state; dropped
        when ``server_info(refresh=True)`` started a new state meanwhile (the answers may be the old
        server's)."""
        with self._state_swap:
            if self._server_state.info is seen.info:
                self._server_state = self._server_state.learned(fact, key, value)

    async def wait_until_ready(
        self, timeout: float = defaults.READY_TIMEOUT, *, interval: float = defaults.HEALTH_POLL_INTERVAL
    ) -> None:
        """Wait until ``GET /health`` answers 200 (the model is loaded).

        Refused connections and 503 while the server loads are tolerated until ``timeout`` seconds.

        Raises:
            ServerNotReady: when time runs out; ``last_cause`` says what was seen last.

        Examples:
            >>> await client.wait_until_ready(timeout=120)
        """
        seconds = positive_number("timeout", timeout, "For example timeout=120 (seconds).")
        await discovery.wait_until_ready(self._transport, self._settings.base_url, seconds, interval)

    async def probe(self) -> ProbeReport:
        """Check which tasks the server serves, and which known pitfalls apply to it.

        Every task route (embed, embed_v2, score, rerank, classify, pooling, transcription,
        translation, chat) gets its cheapest request; each is reported as served, not served (404),
        inactive (501) or unauthorized (401).

        Raises:
            APIConnectionError: the server cannot be reached.

        Examples:
            >>> report = await client.probe()
            >>> report.served_tasks
            ['embed', 'embed_v2', 'score', 'rerank', 'pooling']
        """
        seen = self._server_state
        report = await discovery.probe(self._transport, self._settings.base_url)
        if report.ngram_processor is not None:  # kept, so that ocr() calls do not check again
            model = self.model or report.server.default_model or ""
            self._learn(seen, NGRAM_PROCESSOR, model, report.ngram_processor)
        return report

    async def _engine_load(self) -> EngineLoad | None:
        """One sample of the server's ``/metrics`` (for a job's ``concurrency="auto"``): ``None`` when it
        cannot be read. Never raises."""
        return await self._transport.engine_load()

    async def _send_batches(
        self,
        requests: Sequence[Request],
        *,
        concurrency: Concurrency,
        counts: Sequence[int],
        show_progress: bool,
        description: str,
    ) -> list[httpx.Response]:
        """Send a call's requests, ``concurrency`` at a time; the progress bar counts ``counts[i]`` items
        when request ``i`` is done (requests beyond ``counts``, e.g. a probe, count none).
        """
        progress = Progress(sum(counts), enabled=show_progress, description=description)

        def advance(index: int, _: httpx.Response) -> None:
            if index < len(counts):
                progress.advance(counts[index])

        try:
            return await self._transport.send_all(requests, concurrency, advance)
        finally:
            progress.close()
