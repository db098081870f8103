"""``FakeVLLM``: a real HTTP server on localhost, in background threads, that answers like vLLM.

Standard library only (``http.server``) plus numpy and orjson, which ``vllm-tasks`` already needs: the
kit works with a plain ``pip install vllm-tasks``.
"""

from __future__ import annotations

import contextlib
import io
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import TCPServer
from types import TracebackType
from typing import Any, Self, cast

import numpy as np
import numpy.typing as npt

from ..errors import InvalidInputError
from ..ocr.presets import OCRPreset
from ..telemetry import request_inputs
from ..validation import positive_int
from . import content, routes
from .content import Vocabulary
from .realtime import RealtimeSession
from .settings import ALL_TASKS, FakeSettings, RewardModel, Scorer, TextSource
from .wire import ReceivedRequest, Reply, error_reply, json_reply, parse_request

JOIN_TIMEOUT = 5.0
"""Seconds ``stop()`` waits for each request thread (it wakes every delayed answer first)."""


@dataclass
class Fault:
    """A failure the fake server injects into matching requests; made by :meth:`FakeVLLM.fail`,
    :meth:`FakeVLLM.slow`, :meth:`FakeVLLM.drop` and :meth:`FakeVLLM.mutate`. Faults are checked in the
    order they were added; the first that takes a request applies to it alone.

    Attributes:
        paths: the paths it applies to (empty: every path, discovery and ``/health`` included).
        times: how many requests it hits (``None``: every matching request until cleared).
        after: how many matching requests pass untouched first.
        status: the status answered (``None``: the normal answer, after ``delay``).
        delay: seconds to wait before answering (or before resetting the connection).
        reset: close the connection with a TCP reset instead of answering.
        retry_after: the ``Retry-After`` header's value, if any.
        message: the error message (default: the status's phrase).
        body: a raw body (bytes) instead of vLLM's error object, e.g. a proxy's HTML page.
        content_type: the raw body's content type.
        mutation: rewrites the normal answer (status, body, headers) before it is sent.
        hits: how many requests it has hit so far.
    """

    paths: frozenset[str] = frozenset()
    times: int | None = 1
    after: int = 0
    status: int | None = None
    delay: float = 0.0
    reset: bool = False
    retry_after: str | None = None
    message: str | None = None
    body: bytes | None = None
    content_type: str = "text/html"
    mutation: Callable[[Reply], Reply] | None = None
    hits: int = 0
    _passed: int = field(default=0, repr=False)

    @property
    def exhausted(self) -> bool:
        """Whether it will hit no more requests."""
        return self.times is not None and self.hits >= self.times

    def take(self, path: str) -> bool:
        """Count a request to ``path``; True when this fault hits it (not thread-safe: hold the lock)."""
        if (self.paths and path not in self.paths) or self.exhausted:
            return False
        if self._passed < self.after:
            self._passed += 1
            return False
        self.hits += 1
        return True

    def reply(self) -> Reply | None:
        """The error answer, or ``None`` for a latency-only fault."""
        if self.status is None:
            return None
        if self.body is not None:
            reply = Reply(self.status, self.body, {"content-type": self.content_type})
        elif self.status == 401:
            reply = json_reply({"error": "Unauthorized"}, 401)
        else:
            reply = error_reply(self.status, self.message or _phrase(self.status) + " (injected by FakeVLLM)")
        if self.retry_after is not None:
            reply.headers["retry-after"] = self.retry_after
        return reply


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"


class _Capacity:
    """``slots`` requests served at once, each for its service time; the rest wait (up to ``queue_limit``).

    The service time is the server's ``latency`` plus ``cost_per_input`` per input row of the request: a
    server at its capacity (a queueing model of vLLM's ``--max-num-seqs`` batch). Below ``slots`` requests
    in flight the latency stays flat and the throughput grows with them; above, the throughput stays at
    ``slots`` / service time and the latency grows with the queue.
    """

    def __init__(
        self, slots: int, queue_limit: int | None, cost_per_input: float, retry_after: float | None
    ) -> None:
        self._slots = threading.Semaphore(slots)
        self._queue_limit = queue_limit
        self.cost_per_input = cost_per_input
        self.retry_after = retry_after
        self._lock = threading.Lock()
        self.waiting = self.rejected = self.served = self.in_server = self.most_in_server = 0
        self.running_prompts = self.waiting_prompts = self.finished_prompts = 0
        self.queue_seconds = self.inference_seconds = 0.0

    def serve(self, seconds: float, stopping: threading.Event, prompts: int = 1) -> bool:
        """Wait for a slot and hold it ``seconds``; False (no wait) when the queue is full. ``prompts``:
        the engine requests it counts as in vLLM's metrics (one per input row)."""
        arrived = time.monotonic()
        with self._lock:
            if not self._slots.acquire(blocking=False):
                if self._queue_limit is not None and self.waiting >= self._queue_limit:
                    self.rejected += 1
                    return False
                self.waiting += 1
                self.waiting_prompts += prompts
                queued = True
            else:
                queued = False
            self.in_server += 1
            self.most_in_server = max(self.most_in_server, self.in_server)
        try:
            if queued:
                while not self._slots.acquire(timeout=0.05):
                    if stopping.is_set():  # stop() wakes every delayed answer
                        with self._lock:
                            self.waiting -= 1
                            self.waiting_prompts -= prompts
                        return True
                with self._lock:
                    self.waiting -= 1
                    self.waiting_prompts -= prompts
            started = time.monotonic()
            with self._lock:
                self.running_prompts += prompts
            try:
                stopping.wait(seconds)
            finally:
                self._slots.release()
            with self._lock:
                self.served += 1
                self.running_prompts -= prompts
                self.finished_prompts += prompts
                self.queue_seconds += prompts * (started - arrived)
                self.inference_seconds += prompts * (time.monotonic() - started)
            return True
        finally:
            with self._lock:
                self.in_server -= 1

    def engine(self) -> tuple[int, int, int, float, float]:
        """vLLM's view, in engine requests (prompts): running, waiting, finished, and the seconds the
        finished ones waited and ran (summed)."""
        with self._lock:
            return (
                self.running_prompts, self.waiting_prompts, self.finished_prompts,
                self.queue_seconds, self.inference_seconds,
            )  # fmt: skip

    def refusal(self) -> Reply:
        """vLLM's 503 when its queue is full (with ``Retry-After`` when set)."""
        reply = error_reply(503, "The server's request queue is full (injected by FakeVLLM)")
        if self.retry_after is not None:
            reply.headers["retry-after"] = f"{self.retry_after:g}"
        return reply


@dataclass(frozen=True)
class CapacityLoad:
    """What a :class:`FakeVLLM` with ``slots`` counted (:attr:`FakeVLLM.load`).

    Attributes:
        served: POST requests served in a slot.
        rejected: POST requests answered 503 because the queue was full.
        most_in_server: the most POST requests in the server at once (in slots and waiting).
        waiting: requests waiting for a slot now.

    Examples:
        >>> with FakeVLLM(slots=2) as fake:
        ...     fake.load.served
        0
    """

    served: int = 0
    rejected: int = 0
    most_in_server: int = 0
    waiting: int = 0


@dataclass(frozen=True)
class _Counted:
    """A received request as telemetry's ``request_inputs`` reads it."""

    method: str
    path: str
    json: Any
    data: None = None
    files: Any = None


def _inputs(request: ReceivedRequest) -> int:
    """The input rows ``request`` carries (texts, documents, images; 1 for an audio upload)."""
    counted = _Counted(request.method, request.path, request.json, files=request.files or None)
    return request_inputs(counted) or 1


@dataclass(frozen=True)
class _Outcome:
    reply: Reply | None
    delay: float = 0.0
    reset: bool = False


class FakeVLLM:
    """A fake vLLM server for tests: real HTTP on ``127.0.0.1``, vLLM's routes, shapes and errors.

    Answers are deterministic (embeddings hashed from the words of the text, scores from their cosine,
    transcripts and OCR output from the settings), every request is recorded for assertions, and faults
    (error statuses with ``Retry-After``, latency, connection resets) can be injected per route.

    Args:
        model: the served model name.
        tasks: the tasks served (default: all); see :class:`FakeSettings` for the names and presets.
        version: what ``/version`` answers.
        width: the embedding width.
        max_model_len: the context length.
        matryoshka: which ``dimensions`` are accepted (True: any, a list: those, False: none).
        scorer: ``"bi-encoder"``, ``"cross-encoder"``, ``"late-interaction"`` or ``"listwise"`` (default:
            cross-encoder if ``classify`` is served).
        sparse: a SPLADE model: ``/v1/embeddings`` answers vocabulary-wide rows of non-negative weights,
            mostly zeros (``embed_sparse``); use ``width`` as the vocabulary size.
        lexical: BGE-M3 with ``token_classify`` active: ``/pooling`` answers one weight per token
            (``embed_sparse`` reads them), ``/v1/embeddings`` answers 501.
        aligner: a forced aligner (Qwen3-ForcedAligner, ``token_classify``): ``/pooling`` answers the
            time-class rows ``align`` reads; use ``width`` as the number of classes.
        reward: a reward model (``client.reward``): ``"sequence"`` (``classify`` active, one value per
            conversation) or ``"token"`` (``token_classify`` active, one row per token).
        labels: the classifier's labels.
        multi_label: a multi-label classifier (a sigmoid per label).
        token_classifier: a token classifier (``/pooling`` answers ``token_classify``).
        input_types: accepted ``/v2/embed`` ``input_type`` values.
        transcript: the text of every transcription (or a function of the :class:`ReceivedRequest`).
        language: the language ``verbose_json`` reports by default.
        segments: False answers ``verbose_json`` with vLLM's 400, as a speech model without timed segments
            (Voxtral, Qwen3-ASR) does.
        ocr_output: the OCR model's page (or a function of the request): DeepSeek-OCR's grounded output,
            or text in the format of ``ocr_preset`` (see :class:`FakeSettings`).
        ocr_preset: the OCR model the chat route answers as (``"deepseek-ocr"``, ``"generic"``, a preset
            name or an ``OCRPreset``): requests with an image shaped otherwise are answered 400.
        ngram_processor: whether DeepSeek-OCR's n-gram processor is loaded.
        api_key: require ``Authorization: Bearer <key>`` on ``/v1`` and ``/v2`` routes.
        openapi: serve ``/openapi.json`` (False: 404, as with ``--disable-fastapi-docs``).
        metrics: serve ``GET /metrics`` as vLLM 0.32 does (Prometheus text, from the capacity model: the
            prompts in slots are running, those queued waiting, and the seconds the finished ones waited
            and ran summed as vLLM's histograms sum them; zeros without ``slots``); False: 404, a server
            (or proxy) without them.
        latency: seconds added to every answer.
        slots: serve at most this many requests at once, each for ``latency`` seconds plus
            ``cost_per_input`` per input row (a server at its capacity: the others wait in a queue, their
            latency grows with the load; see :attr:`load`); ``None``: no limit.
        queue_limit: with ``slots``, a request arriving when this many already wait is answered 503 at once
            (vLLM's queue full, its error body); ``None``: the queue has no limit.
        cost_per_input: with ``slots``, seconds a slot is held per input row of a request (texts,
            documents, images), on top of ``latency``.
        retry_after: with ``queue_limit``, the ``Retry-After`` seconds sent with its 503s (``None``: none).
        host: the address to bind (default ``127.0.0.1``).
        port: the port (default 0: a free one, see :attr:`url`).

    Raises:
        InvalidInputError: a bad setting (an unknown task, a width below 1, ...).

    Examples:
        >>> with FakeVLLM(model="my-embedder", tasks=EMBEDDING_TASKS) as fake:
        ...     client = vllm_tasks.Client(fake.url)
        ...     client.embed(["hello"]).vectors.shape
        (1, 384)
    """

    def __init__(
        self,
        *,
        model: str = "fake-model",
        tasks: Iterable[str] = ALL_TASKS,
        version: str = "0.32.0",
        width: int = 384,
        max_model_len: int = 512,
        matryoshka: bool | Sequence[int] = True,
        scorer: Scorer | None = None,
        sparse: bool = False,
        lexical: bool = False,
        aligner: bool = False,
        reward: RewardModel | None = None,
        labels: Sequence[str] = ("negative", "positive"),
        multi_label: bool = False,
        token_classifier: bool = False,
        input_types: Sequence[str] = (),
        transcript: TextSource = content.DEFAULT_TRANSCRIPT,
        language: str = "en",
        segments: bool = True,
        ocr_output: TextSource = content.DEFAULT_OCR_OUTPUT,
        ocr_preset: str | OCRPreset = "deepseek-ocr",
        ngram_processor: bool = True,
        score_template: bool = True,
        api_key: str | None = None,
        openapi: bool = True,
        metrics: bool = True,
        latency: float = 0.0,
        slots: int | None = None,
        queue_limit: int | None = None,
        cost_per_input: float = 0.0,
        retry_after: float | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.settings = FakeSettings(
            model=model, tasks=frozenset(tasks), version=version, width=width, max_model_len=max_model_len,
            matryoshka=matryoshka, scorer=scorer, sparse=sparse, lexical=lexical, aligner=aligner,
            reward=reward, labels=labels, multi_label=multi_label, token_classifier=token_classifier,
            input_types=input_types,
            transcript=transcript, language=language, segments=segments, ocr_output=ocr_output,
            ocr_preset=ocr_preset, ngram_processor=ngram_processor,
            score_template=score_template, api_key=api_key, openapi=openapi, latency=latency,
        )  # fmt: skip
        self.vocabulary = Vocabulary()
        self._capacity = None
        if slots is not None:
            self._capacity = _Capacity(positive_int("slots", slots), queue_limit, cost_per_input, retry_after)
            if queue_limit is not None and queue_limit < 0:
                raise InvalidInputError("queue_limit", queue_limit, "is negative", "Pass 0 or more, or None.")
            if cost_per_input < 0:
                raise InvalidInputError(
                    "cost_per_input", cost_per_input, "is negative", "Pass seconds per input row, 0 or more."
                )
        self.metrics = metrics
        self._address = (host, port)
        self._lock = threading.Lock()
        self._requests: list[ReceivedRequest] = []
        self._sessions: list[RealtimeSession] = []
        self._faults: list[Fault] = []
        self._stopping = threading.Event()
        self._server: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------------------ lifecycle

    def start(self) -> Self:
        """Bind the port and serve in a background thread (a no-op when already started).

        Returns:
            The server itself, started.

        Raises:
            OSError: the address cannot be bound.

        Examples:
            >>> fake = FakeVLLM().start()
            >>> fake.url
            'http://127.0.0.1:43117'
        """
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _HTTPServer(self._address, self._answer, self._stopping)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="FakeVLLM-serve", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: end the accept loop, wake delayed answers, close every connection and the port,
        and join every thread (a no-op when not started). Recorded requests are kept.

        Examples:
            >>> fake.stop()
        """
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self._stopping.set()
        server.shutdown()
        server.close_connections()
        server.join_requests(JOIN_TIMEOUT)
        server.server_close()
        thread.join(JOIN_TIMEOUT)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """Whether the server is started."""
        return self._server is not None

    @property
    def port(self) -> int:
        """The bound port.

        Raises:
            RuntimeError: the server is not started.
        """
        if self._server is None:
            raise RuntimeError("FakeVLLM is not started: use `with FakeVLLM() as fake:` or fake.start()")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base URL to give a client, e.g. ``http://127.0.0.1:43117``.

        Raises:
            RuntimeError: the server is not started.
        """
        return f"http://{self._address[0]}:{self.port}"

    # ------------------------------------------------------------------------------ recorded requests

    @property
    def requests(self) -> list[ReceivedRequest]:
        """Every request received so far, oldest first (a copy)."""
        with self._lock:
            return list(self._requests)

    def received(self, path: str | None = None, method: str | None = None) -> list[ReceivedRequest]:
        """The requests received for ``path`` (and ``method``), oldest first.

        Args:
            path: only requests to this path (e.g. ``"/v1/embeddings"``); ``None``: every path.
            method: only requests with this method (``"POST"``); ``None``: every method.

        Returns:
            The matching :class:`ReceivedRequest` objects (a new list).

        Examples:
            >>> [r.json["input"] for r in fake.received("/v1/embeddings")]
            [['hello', 'world']]
        """
        return [
            r
            for r in self.requests
            if (path is None or r.path == path) and (method is None or r.method == method)
        ]

    @property
    def realtime_sessions(self) -> list[RealtimeSession]:
        """Every ``/v1/realtime`` WebSocket session accepted so far, oldest first (a copy): the events the
        client sent (``events``), the audio (``audio``), how it ended (``close_code``, ``ended``).

        Examples:
            >>> session = fake.realtime_sessions[-1]
            >>> session.ended.wait(5); session.close_code
            1000
        """
        with self._lock:
            return list(self._sessions)

    def clear_requests(self) -> None:
        """Forget the recorded requests.

        Examples:
            >>> fake.clear_requests(); client.embed("hi"); len(fake.requests)
            1
        """
        with self._lock:
            self._requests.clear()

    # ----------------------------------------------------------------------------------------- faults

    def fail(
        self,
        status: int,
        *,
        path: str | Sequence[str] | None = None,
        times: int | None = 1,
        after: int = 0,
        retry_after: float | str | None = None,
        message: str | None = None,
        delay: float = 0.0,
        body: bytes | None = None,
        content_type: str = "text/html",
    ) -> Fault:
        """Answer the next matching requests with an error status and vLLM's error body.

        Args:
            status: the HTTP status (401 answers vLLM's ``{"error": "Unauthorized"}``).
            path: the path(s) it applies to, e.g. ``"/v1/embeddings"`` (default: every request,
                discovery included).
            times: how many requests fail (``None``: all of them until :meth:`clear_faults`).
            after: let this many matching requests through first.
            retry_after: the ``Retry-After`` header (seconds, or an HTTP date string).
            message: the error message.
            delay: seconds to wait before answering.
            body: a raw body instead of vLLM's error object (e.g. a proxy's HTML error page).
            content_type: the raw body's content type.

        Returns:
            The :class:`Fault`; its ``hits`` counts the requests it failed.

        Raises:
            InvalidInputError: a status outside 100-599, or negative counts.

        Examples:
            >>> fake.fail(503, path="/v1/embeddings", times=2, retry_after=1)
        """
        if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
            raise InvalidInputError("status", status, "must be an HTTP status from 100 to 599", "E.g. 503.")
        wait = None if retry_after is None else str(retry_after)
        return self._add(Fault(status=status, retry_after=wait, message=message, body=body,
                               content_type=content_type), path, times, after, delay)  # fmt: skip

    def slow(
        self,
        seconds: float,
        *,
        path: str | Sequence[str] | None = None,
        times: int | None = 1,
        after: int = 0,
    ) -> Fault:
        """Delay the answers to the next matching requests by ``seconds`` (they then answer normally).

        Args:
            seconds: the added latency (``stop()`` cuts it short).
            path: the path(s) it applies to (default: every request).
            times: how many requests are delayed (``None``: all of them until :meth:`clear_faults`).
            after: let this many matching requests through first.

        Returns:
            The :class:`Fault`.

        Raises:
            InvalidInputError: a negative delay or count.

        Examples:
            >>> fake.slow(2.0, path="/rerank")  # a client with timeout=1 raises APITimeoutError
        """
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise InvalidInputError("seconds", seconds, "must be a number of seconds >= 0", "E.g. 0.5.")
        return self._add(Fault(), path, times, after, seconds)

    def drop(
        self,
        *,
        path: str | Sequence[str] | None = None,
        times: int | None = 1,
        after: int = 0,
        delay: float = 0.0,
    ) -> Fault:
        """Reset the connection (TCP RST, no answer) of the next matching requests.

        Args:
            path: the path(s) it applies to (default: every request).
            times: how many requests are dropped (``None``: all of them until :meth:`clear_faults`).
            after: let this many matching requests through first.
            delay: seconds to wait before resetting (a connection that breaks mid-request).

        Returns:
            The :class:`Fault`.

        Raises:
            InvalidInputError: a negative delay or count.

        Examples:
            >>> fake.drop(path="/v1/embeddings")  # the client sees APIConnectionError, then retries
        """
        return self._add(Fault(reset=True), path, times, after, delay)

    def mutate(
        self,
        mutation: Callable[[Reply], Reply],
        *,
        path: str | Sequence[str] | None = None,
        times: int | None = 1,
        after: int = 0,
    ) -> Fault:
        """Rewrite the normal answers to the next matching requests before they are sent: a hostile server
        or proxy (NaN in a vector, a row missing, a truncated body, a wrong content type, a false
        ``Content-Encoding``).

        Args:
            mutation: takes the answer the fake would send (a :class:`Reply`: ``status``, ``body``,
                ``headers``, and ``stream`` for server-sent events) and returns the one to send instead.
                An exception it raises is answered as a 500 naming it.
            path: the path(s) it applies to (default: every request, discovery included).
            times: how many answers are rewritten (``None``: all of them until :meth:`clear_faults`).
            after: let this many matching requests through first.

        Returns:
            The :class:`Fault`; its ``hits`` counts the answers it rewrote.

        Raises:
            InvalidInputError: ``mutation`` is not callable, or negative counts.

        Examples:
            >>> def html(reply: Reply) -> Reply:
            ...     return Reply(200, b"<html>Sign in</html>", {"content-type": "text/html"})
            >>> fake.mutate(html, path="/v1/embeddings")  # a captive portal's page, with 200
        """
        if not callable(mutation):
            raise InvalidInputError("mutation", mutation, "is not callable", "Pass a function of a Reply.")
        return self._add(Fault(mutation=mutation), path, times, after, 0.0)

    def clear_faults(self) -> None:
        """Remove every injected fault (those still pending included).

        Examples:
            >>> fake.fail(500, times=None); fake.clear_faults()
        """
        with self._lock:
            self._faults.clear()

    def _add(
        self, fault: Fault, path: str | Sequence[str] | None, times: int | None, after: int, delay: float
    ) -> Fault:
        for name, value in (("times", times), ("after", after)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise InvalidInputError(name, value, "must be an int >= 0", f"E.g. {name}=1.")
        if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
            raise InvalidInputError("delay", delay, "must be a number of seconds >= 0", "E.g. 0.5.")
        fault.paths = frozenset([path] if isinstance(path, str) else path or ())
        fault.times, fault.after, fault.delay = times, after, float(delay)
        with self._lock:
            self._faults.append(fault)
        return fault

    # ----------------------------------------------------------------------------------- answers

    def vector(self, text: str, *, dimensions: int | None = None) -> npt.NDArray[np.float32]:
        """The embedding this server answers for ``text`` (to compare with what a client got).

        Args:
            text: the input's text.
            dimensions: the Matryoshka width asked for, if any.

        Returns:
            A float32 unit vector, ``dimensions`` or ``settings.width`` wide (with ``sparse``: the
            vocabulary-wide SPLADE row, mostly zeros).

        Examples:
            >>> np.testing.assert_array_equal(client.embed("hi").vector, fake.vector("hi"))
        """
        if self.settings.sparse:
            return content.sparse_vector(text, self.settings.width)
        return content.text_vector(text, self.settings.width, dimensions=dimensions)

    def score(self, query: str, document: str) -> float:
        """The score this server answers for a (query, document) pair on ``/score`` and ``/rerank``.

        Returns:
            The cosine of the two texts' vectors (bi-encoder), ``sigmoid(8 * cosine - 2)``
            (cross-encoder), or MaxSim over their per-token vectors (late-interaction), as
            ``settings.scorer_kind`` says; for a listwise model, the document's score alone in its list
            (see :meth:`rank`).

        Examples:
            >>> fake.score("capital of France", "Paris is the capital of France.") > 0.5
            True
        """
        settings = self.settings
        return content.relevance(query, document, settings.width, scorer=settings.scorer_kind)

    def rank(self, query: str, documents: Sequence[str]) -> list[float]:
        """The scores this server answers for ``documents`` sent with ``query`` in one request.

        The same as :meth:`score` per document, except for a listwise model (``scorer="listwise"``), whose
        scores depend on the whole list.

        Examples:
            >>> scores = fake.rank("capital of France", ["Paris is the capital.", "Bananas."])
            >>> scores[0] > scores[1]
            True
        """
        settings = self.settings
        return content.list_relevance(query, documents, settings.width, scorer=settings.scorer_kind)

    def _answer(self, request: ReceivedRequest) -> _Outcome:
        """Record ``request`` and decide its answer (called by the HTTP handler's thread)."""
        with self._lock:
            self._requests.append(request)
            fault = next((f for f in self._faults if f.take(request.path)), None)
        latency = self.settings.latency
        if fault is not None and (fault.reset or fault.status is not None):
            return _Outcome(fault.reply(), latency + fault.delay, fault.reset)
        if request.path == "/metrics" and request.method == "GET" and self.metrics:
            reply = self._metrics()  # the API server answers it at once, without the engine
            return _Outcome(fault.mutation(reply) if fault is not None and fault.mutation else reply)
        if self._capacity is not None and request.method == "POST":
            cost = latency + self._capacity.cost_per_input * _inputs(request)
            if not self._capacity.serve(cost, self._stopping, _inputs(request)):
                return _Outcome(self._capacity.refusal())
            latency = 0.0  # spent in a slot
        try:
            reply = routes.answer(request, self.settings, self.vocabulary)
            if fault is not None and fault.mutation is not None:
                reply = fault.mutation(reply)
        except Exception as error:  # a bug here or in a user's callable: say so instead of hanging up
            reply = error_reply(500, f"FakeVLLM failed to answer {request.path}: {error!r}")
        if isinstance(reply.upgrade, RealtimeSession):
            with self._lock:
                self._sessions.append(reply.upgrade)
        return _Outcome(reply, latency + (fault.delay if fault else 0.0))

    def _metrics(self) -> Reply:
        """``GET /metrics``: vLLM 0.32's Prometheus text (its process metrics left out), from the capacity
        model. As vLLM counts them, the engine requests are prompts (a batch of 8 texts is 8)."""
        capacity = self._capacity
        running, waiting, finished, queued, ran = (
            (0, 0, 0, 0.0, 0.0) if capacity is None else capacity.engine()
        )
        labels = f'engine="0",model_name="{self.settings.model}"'
        lines = [
            "# HELP python_gc_objects_collected_total Objects collected during gc",
            "# TYPE python_gc_objects_collected_total counter",
            'python_gc_objects_collected_total{generation="0"} 1234.0',
        ]
        for name, kind, help_text, value in (
            ("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", running),
            ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", waiting),
            ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", 0.0),
            (
                "vllm:request_queue_time_seconds",
                "histogram",
                "Histogram of time spent in WAITING phase.",
                queued,
            ),
            (
                "vllm:request_inference_time_seconds",
                "histogram",
                "Histogram of time spent in RUNNING phase.",
                ran,
            ),
        ):
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
            if kind == "gauge":
                lines.append(f"{name}{{{labels}}} {float(value)!r}")
            else:
                lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {float(finished)!r}')
                lines.append(f"{name}_count{{{labels}}} {float(finished)!r}")
                lines.append(f"{name}_sum{{{labels}}} {float(value)!r}")
        body = ("\n".join(lines) + "\n").encode()
        return Reply(200, body, {"content-type": "text/plain; version=0.0.4; charset=utf-8"})

    @property
    def rejected(self) -> int:
        """Requests answered 503 because the queue was full (``slots`` with ``queue_limit``)."""
        return 0 if self._capacity is None else self._capacity.rejected

    @property
    def load(self) -> CapacityLoad:
        """What the capacity model counted so far (all zeros without ``slots``).

        Examples:
            >>> with FakeVLLM(slots=4, queue_limit=8, cost_per_input=0.001) as fake:
            ...     vllm_tasks.Client(fake.url).embed(["a", "b"]).vectors.shape
            ...     fake.load.served, fake.load.rejected
            (2, 384)
            (1, 0)
        """
        capacity = self._capacity
        if capacity is None:
            return CapacityLoad()
        with capacity._lock:
            return CapacityLoad(capacity.served, capacity.rejected, capacity.most_in_server, capacity.waiting)

    def __repr__(self) -> str:
        where = self.url if self.running else "stopped"
        return f"FakeVLLM({where}, model={self.settings.model!r}, tasks={sorted(self.settings.tasks)})"


# ------------------------------------------------------------------------------------- HTTP plumbing


class _HTTPServer(HTTPServer):
    """A threading HTTP server that knows its connections and threads, so that stopping is clean."""

    # socketserver's default backlog of 5 overflows when a test opens dozens of connections at once: the
    # kernel then answers with SYN cookies, and a cookie that fails its check resets the connection
    # (ECONNRESET mid-request, seen as spurious retries under load).
    request_queue_size = socket.SOMAXCONN

    def __init__(self, address: tuple[str, int], answer: Any, stopping: threading.Event) -> None:
        self.answer = answer
        self.stopping = stopping
        self.connections: set[socket.socket] = set()
        self.resets: set[socket.socket] = set()
        self.threads: list[threading.Thread] = []
        self.guard = threading.Lock()
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        """Bind without ``HTTPServer``'s reverse DNS lookup of the host (slow on some machines)."""
        TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        """Answer each connection in its own thread (tracked, to be joined by ``stop()``)."""
        thread = threading.Thread(
            target=self._process, args=(request, client_address), name="FakeVLLM-request", daemon=True
        )
        with self.guard:
            self.threads = [t for t in self.threads if t.is_alive()]
            self.threads.append(thread)
            self.connections.add(request)
        thread.start()

    def _process(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    def shutdown_request(self, request: Any) -> None:
        """Close a connection; one marked for reset is closed without a FIN (SO_LINGER 0: a TCP RST)."""
        with self.guard:
            self.connections.discard(request)
            reset = request in self.resets
            self.resets.discard(request)
        if reset:
            self.close_request(request)
        else:
            super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet: clients that time out or hang up are part of the tests."""

    def close_connections(self) -> None:
        """Shut every open connection, waking handlers that wait for a next keep-alive request."""
        with self.guard:
            connections = list(self.connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def join_requests(self, timeout: float) -> None:
        """Wait for every request thread to end."""
        with self.guard:
            threads = list(self.threads)
        for thread in threads:
            thread.join(timeout)


INVALID_REQUEST = (
    b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 30\r\n"
    b"connection: close\r\n\r\nInvalid HTTP request received."
)
"""What uvicorn (vLLM's HTTP server) answers to bytes its parser refuses, before closing the connection."""

_TOKEN_START = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ\r\n")
"""The bytes an HTTP/1.1 request may start with (a method's first letter, or a stray line end)."""

_DIGITS = {10: frozenset(b"0123456789"), 16: frozenset(b"0123456789abcdefABCDEF")}
"""The digits of a Content-Length (base 10) and of a chunk size (base 16)."""


class _Malformed(Exception):
    """The request is not HTTP/1.1: its body's framing (Content-Length, chunk sizes) does not parse."""


def _framing_number(raw: bytes, base: int) -> int:
    """A Content-Length (``base`` 10) or chunk size (16), as strictly as uvicorn's parser reads it.

    Raises:
        _Malformed: not a number (a sign, spaces inside, letters, nothing).
    """
    if not raw or not set(raw) <= _DIGITS[base]:
        raise _Malformed(raw)
    return int(raw, base)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The status line and headers go out in one write and the body in another: with Nagle's algorithm
    # the body waited for the client's delayed ACK, 40 ms per answer on Linux loopback (a 13 ms request
    # took 58 ms, and concurrency="auto" read the stall as a queue).
    disable_nagle_algorithm = True
    server: _HTTPServer
    raw_requestline: bytes  # set by handle_one_request (typeshed does not declare it)

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet (the requests are recorded instead)."""

    def handle_one_request(self) -> None:
        """Answer one request; bytes that cannot start one (a TLS hello sent to the plain port) get uvicorn's
        400."""
        first = cast(io.BufferedReader, self.rfile).peek(1)[:1]
        if first and first[0] not in _TOKEN_START:
            self._refuse_malformed()
            return
        super().handle_one_request()

    def parse_request(self) -> bool:
        """Read the request line and headers as uvicorn's parser does: a line without a version
        (``POST /path``) is a request of HTTP/1.0 (answered, then the connection closed), not an error."""
        words = self.raw_requestline.split()
        if len(words) == 2:
            self.raw_requestline = b" ".join([*words, b"HTTP/1.0"]) + b"\r\n"
        return super().parse_request()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's 400 for a malformed request line is uvicorn's 400; other errors as is."""
        if code == HTTPStatus.BAD_REQUEST:
            self._refuse_malformed()
            return
        super().send_error(code, message, explain)

    def _refuse_malformed(self) -> None:
        """Answer uvicorn's 400 and close the connection."""
        self.close_connection = True
        self.wfile.write(INVALID_REQUEST)

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def _serve(self) -> None:
        try:
            body = self._read_body()
        except _Malformed:
            self._refuse_malformed()
            return
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        request = parse_request(self.command, self.path, headers, body, time.monotonic())
        outcome: _Outcome = self.server.answer(request)
        if outcome.delay and self.server.stopping.wait(outcome.delay):
            self.close_connection = True
            return
        if outcome.reset or outcome.reply is None:
            self._reset()
            return
        self._write(outcome.reply)

    def _read_body(self) -> bytes:
        """The body, by chunked transfer encoding or Content-Length.

        Raises:
            _Malformed: a Content-Length or chunk size that is not a number, a chunk not ended by a line end.
        """
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = _framing_number(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                if self.rfile.readline().strip():
                    raise _Malformed("chunk longer than its size")
        length = self.headers.get("content-length")
        if length is None:
            return b""
        return self.rfile.read(_framing_number(length.strip().encode("latin-1"), 10))

    def _reset(self) -> None:
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with self.server.guard:
            self.server.resets.add(self.connection)
        self.close_connection = True

    def _write(self, reply: Reply) -> None:
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if self.close_connection and "connection" not in reply.headers:  # an HTTP/1.0 request, as uvicorn
            self.send_header("connection", "close")
        if reply.upgrade is not None:  # 101: the connection is the WebSocket's from here on
            self.end_headers()
            self.close_connection = True
            reply.upgrade(self.rfile, self.wfile)
            return
        if reply.stream is None:
            self.send_header("content-length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)
            return
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for chunk in reply.stream:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        self.wfile.write(b"0\r\n\r\n")
