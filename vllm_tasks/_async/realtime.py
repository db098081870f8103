"""Realtime transcription of the asynchronous client: ``transcribe_realtime`` over vLLM's WebSocket route
``/v1/realtime`` (the protocol and the pure parts: :mod:`vllm_tasks.realtime`; the socket:
:mod:`vllm_tasks._realtime_io`).

One task does all the work, without a background task or thread: it sends a piece of audio, then reads
what the server has sent meanwhile (and, with ``pace``, waits for the next piece's time while reading),
so that stopping the iteration, ``close()`` or a cancellation leaves nothing running.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping

from .. import audio as audio_io
from .. import gates, realtime
from .._realtime_io import AsyncWebSocket, Closed, Message, async_pieces_of
from ..calls import CLIENT_DEFAULT, CallOptions, TimeoutLike, resolve_model
from ..errors import APIError, APITimeoutError, InvalidInputError
from ..offload import async_offload
from ..retries import is_retryable
from ..types.audio import Transcription, TranscriptionStreamEvent
from .audio import AsyncAudioMethods, AsyncTranscriptionEvents


class AsyncRealtimeTranscription(AsyncTranscriptionEvents):
    """A realtime transcription session: iterate it to send the audio and read the text as it comes.

    ``async for event in session`` sends the audio piece by piece and yields a
    :class:`~vllm_tasks.types.audio.TranscriptionDelta` per piece of text the server decodes (while audio
    is still being sent), then one :class:`~vllm_tasks.types.audio.Transcription` (also kept as
    ``result``). Iterate it once. Use it as a context manager (or call ``close()``) to end the session
    if you stop early; the WebSocket is closed when the iteration ends, however it ends.

    Args:
        socket: the open WebSocket, the session started (``session.update`` and the first commit sent).
        pieces: the PCM16 pieces to send.
        parser: reads the server's events.
        pace: send audio at most this many times faster than real time (``None``: as fast as the socket
            takes it).
        read_timeout: seconds to wait for each event once all the audio is sent (``None``: no limit).
        on_result: called with the final result (the client counts its usage); its return is ``result``.

    Raises (while iterating):
        NotFoundError: (``kind="model_not_found"``) the model is not served.
        BadRequestError: the server refused the audio or an event.
        InternalServerError: the server failed while transcribing.
        StreamError: the server closed the session before ``transcription.done``.
        APIConnectionError: the connection broke; ``APITimeoutError`` when no event came in time.
        UnexpectedResponse: a message that is not one of vLLM's events.
        InvalidInputError: a chunk of an iterable source is not audio.
    """

    def __init__(
        self,
        socket: AsyncWebSocket,
        pieces: AsyncIterator[bytes],
        parser: realtime.RealtimeParser,
        *,
        pace: float | None = None,
        read_timeout: float | None = None,
        on_result: Callable[[Transcription], Transcription] | None = None,
    ) -> None:
        self._socket = socket
        self._pieces = pieces
        self._parser = parser
        self._pace = pace
        self._read_timeout = read_timeout
        self._on_result = on_result
        self._iterated = False
        self.result: Transcription | None = None
        """The final result, once the session has been read to the end."""

    @property
    def session_id(self) -> str | None:
        """The server's id of the session (``session.created``), once read."""
        return self._parser.session_id

    async def __aiter__(self) -> AsyncIterator[TranscriptionStreamEvent]:
        if self._iterated:
            raise InvalidInputError(
                "session", "<iterated>", "was iterated already", "Iterate a session once."
            )
        self._iterated = True
        parser = self._parser
        try:
            started = time.monotonic()
            async for piece in self._pieces:
                await self._socket.send(realtime.append(piece))
                parser.seconds += len(piece) / (2 * realtime.RATE)
                wait = realtime.pace_wait(self._pace, parser.seconds, time.monotonic() - started)
                deadline = time.monotonic() + wait
                while not parser.done:
                    message = await self._socket.receive(max(0.0, deadline - time.monotonic()))
                    if message is None:
                        break
                    for event in self._events(message):
                        yield event
                if parser.done:
                    break
            if not parser.done:
                await self._socket.send(realtime.commit(final=True))
            while not parser.done:
                message = await self._socket.receive(self._read_timeout)
                if message is None:
                    raise APITimeoutError(
                        f"no realtime event came in {self._read_timeout} s after the audio ended",
                        method="GET",
                        url=self._socket.url.replace("ws", "http", 1),
                    )
                for event in self._events(message):
                    yield event
        finally:
            await self.close()

    def _events(self, message: Message) -> list[TranscriptionStreamEvent]:
        if isinstance(message, Closed):
            raise self._parser.ended(message.code, message.reason)
        assert message is not None
        events: list[TranscriptionStreamEvent] = []
        for event in self._parser.feed(message):
            if isinstance(event, Transcription):
                self.result = self._on_result(event) if self._on_result is not None else event
                events.append(self.result)
            else:
                events.append(event)
        return events

    async def close(self) -> None:
        """End the session and close the WebSocket (safe to call twice)."""
        await self._socket.close()


class AsyncRealtimeMethods(AsyncAudioMethods):
    """``transcribe_realtime`` (``/v1/realtime``)."""

    async def transcribe_realtime(
        self,
        source: realtime.RealtimeSource,
        *,
        sample_rate: int | None = None,
        chunk_seconds: float = realtime.CHUNK_SECONDS,
        pace: float | None = None,
        model: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> AsyncRealtimeTranscription:
        """Transcribe audio as it is sent, over vLLM's WebSocket route ``/v1/realtime`` (vLLM >= 0.16.0, a
        realtime model: Voxtral Realtime, Qwen3-ASR served as ``Qwen3ASRRealtimeGeneration``).

        The socket is opened and the session started when this call returns; iterate the returned session
        to send the audio (resampled client-side to 16 kHz mono PCM16, in messages of ``chunk_seconds``)
        and read :class:`~vllm_tasks.types.audio.TranscriptionDelta` objects as the server decodes them,
        then one :class:`~vllm_tasks.types.audio.Transcription` (its ``text`` equals the deltas joined).
        vLLM decodes greedily and takes no language, prompt or sampling option on this route.

        Sources:

        - anything :meth:`transcribe` takes (a path, bytes, a binary file object, ``(array, sample_rate)``,
          an http(s) URL): decoded block by block, so a long file is never held whole;
        - an iterable, or (``AsyncClient`` only) an async iterable, of chunks at ``sample_rate`` (default
          16000): numpy arrays (float in -1..1, or int16; 1-D, or 2-D frames x channels, mixed to mono) or
          bytes (PCM16 little-endian mono). A microphone's callback queue works as such a source. A sync
          iterable is read in a worker thread by ``AsyncClient``.

        Flow control: each message carries at most ``chunk_seconds`` of audio, and a send waits while the
        socket's buffer is full; ``pace`` caps the rate (1.0: real time). Events are read between pieces.

        Args:
            source: the audio (see above).
            sample_rate: the rate of an iterable's chunks (default 16000); not for other sources.
            chunk_seconds: audio per ``input_audio_buffer.append`` message (above 0, at most 60).
            pace: send at most this many seconds of audio per second (``None``: as fast as the server
                reads it).
            model: served model name (default: the client's, else the server's first).
            extra_headers: more headers for the WebSocket handshake.
            timeout: seconds to open the socket (at most 10 of a number, as for HTTP connections) and to
                wait for each event once all audio is sent (default: the client's).

        Returns:
            AsyncRealtimeTranscription: iterate it for the events; also a context manager.

        Raises:
            InvalidInputError: the source cannot be read or decoded (before connecting), ``sample_rate``
                with a source that carries its own, an ``http_client`` given to the client (the WebSocket
                cannot go through it).
            UnsupportedByServer: vLLM < 0.16.0 (checked before connecting).
            EndpointNotServed: the server has no ``/v1/realtime`` (its model is not a realtime one).
            AuthenticationError: the API key is missing or wrong.
            MissingDependency: ``websockets`` is not installed (``pip install "vllm-tasks[realtime]"``).
            APIConnectionError: the server cannot be reached.

        Examples:
            >>> async with await client.transcribe_realtime("call.wav") as session:
            ...     async for event in session:
            ...         print(event.text, end="", flush=True)
        """
        call = CallOptions(model, None, extra_headers, timeout)
        if self.http_client is not None:
            raise InvalidInputError(
                "http_client",
                type(self.http_client).__name__,
                "cannot carry the WebSocket of transcribe_realtime (its proxies, TLS settings and hooks "
                "would not apply)",
                "Use a client without http_client= (environment proxies apply), or transcribe_stream().",
            )
        pace = realtime.pace_value(pace)
        pieces = async_pieces_of(await self._realtime_pieces(source, sample_rate, chunk_seconds, call))
        info = await self.server_info()
        gates.require(info, ["realtime"])
        name = resolve_model(info, call.model, self.model)
        if name is None:
            raise InvalidInputError("model", None, "is not known: the server lists none", "Pass model=.")
        open_timeout, read_timeout = realtime.timeouts(
            self._settings.timeout if call.timeout is CLIENT_DEFAULT else call.timeout
        )
        url = realtime.url(self._settings)
        socket = await self._open_realtime(
            url, realtime.headers(self._settings, call.extra_headers), open_timeout
        )
        try:
            await socket.send(realtime.session_update(name))
            await socket.send(realtime.commit(final=False))
        except BaseException:
            await socket.close()
            raise
        parser = realtime.RealtimeParser(model=name, url=url)
        return AsyncRealtimeTranscription(
            socket, pieces, parser, pace=pace, read_timeout=read_timeout, on_result=self._counted
        )

    async def _realtime_pieces(
        self,
        source: realtime.RealtimeSource,
        sample_rate: int | None,
        chunk_seconds: float,
        call: CallOptions,
    ) -> realtime.Pieces:
        """The source as PCM16 pieces (lazily); a file's header is read now, so that a bad input fails
        before the socket is opened."""
        seconds = realtime.chunk_seconds(chunk_seconds)
        kind = realtime.source_kind(source)
        if kind == "audio":
            if sample_rate is not None:
                raise InvalidInputError(
                    "sample_rate",
                    sample_rate,
                    "is for an iterable of chunks",
                    "Leave it out: the audio has its own.",
                )
            audio = await self._audio_source(source, call)  # type: ignore[arg-type]
            await async_offload(audio_io.info, audio)
            return realtime.audio_pieces(audio, seconds)
        reader = realtime.ChunkReader(realtime.RATE if sample_rate is None else sample_rate, seconds)
        if kind == "chunks":
            return reader.pieces(source)  # type: ignore[arg-type]
        return reader.async_pieces(source)  # type: ignore[arg-type]

    async def _open_realtime(
        self, url: str, headers: Mapping[str, str], open_timeout: float | None
    ) -> AsyncWebSocket:
        """Open the socket, retried as an HTTP request is (connection errors, 408/409/429/5xx, with backoff
        and ``Retry-After``): nothing has been sent yet."""
        backoff = self._transport.backoff
        attempt = 0
        while True:
            attempt += 1
            try:
                return await AsyncWebSocket.open(
                    url, headers, open_timeout=open_timeout, close_timeout=open_timeout
                )
            except APIError as error:
                final = attempt > self._settings.max_retries
                if final or not is_retryable(error) or backoff.refuses_wait(error):
                    raise
                await self._transport.sleep(backoff.delay(attempt, error))
