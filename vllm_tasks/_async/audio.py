"""Speech-to-text methods of the asynchronous client: ``transcribe``, ``translate``, ``transcribe_stream``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from .. import transcription
from ..audio import AudioInput, PrepareMode
from ..steps import CLIENT_DEFAULT, TimeoutLike
from ..transcription import Chunking, Requests, SpeechParams, StreamParser
from ..types.audio import ResponseFormat, Transcription, TranscriptionStreamEvent
from .base import AsyncClientBase, AsyncLineStream


class AsyncTranscriptionStream:
    """A transcription being streamed: iterate it for deltas, then the final :class:`Transcription`.

    ``async for event in stream`` yields a :class:`~vllm_tasks.types.audio.TranscriptionDelta` per
    piece of text, then one :class:`~vllm_tasks.types.audio.Transcription` (also kept as ``result``).
    Use it as a context manager (or call ``close()``) to release the connection if you stop early.

    Raises (while iterating):
        StreamError: the server sent an error frame after the stream had started.
        APIConnectionError: the connection broke.
    """

    def __init__(
        self,
        lines: AsyncLineStream,
        parser: StreamParser,
        *,
        client: AsyncClientBase | None = None,
        more: Requests = (),
    ) -> None:
        self._lines = lines
        self._parser = parser
        self._client = client
        self._more = iter(more)
        self.result: Transcription | None = None
        """The final result, once the stream has been read to the end."""

    async def __aiter__(self) -> AsyncIterator[TranscriptionStreamEvent]:
        try:
            while True:
                async for line in self._lines:
                    for delta in self._parser.feed(line):
                        yield delta
                await self._lines.close()
                # Long audio: the next client-side piece is decoded and sent when this one is done.
                request = next(self._more, None)
                if request is None or self._client is None:
                    break
                self._parser.new_piece()
                self._lines = await self._client._open_stream(request)
        finally:
            await self._lines.close()
        self.result = self._parser.finish()
        yield self.result

    async def until_done(self) -> Transcription:
        """Read the rest of the stream; returns the final result."""
        async for _ in self:
            pass
        if self.result is None:  # pragma: no cover - __aiter__ always sets it
            raise RuntimeError("the stream ended without a result")
        return self.result

    async def close(self) -> None:
        """Release the connection (safe to call twice)."""
        await self._lines.close()

    async def __aenter__(self: Self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


class AsyncAudioMethods(AsyncClientBase):
    """``transcribe`` / ``translate`` (``/v1/audio/*``) and ``transcribe_stream``."""

    async def transcribe(
        self,
        audio: AudioInput,
        *,
        model: str | None = None,
        language: str | None = None,
        prompt: str | None = None,
        response_format: ResponseFormat = "json",
        temperature: float | None = None,
        timestamp_granularities: Sequence[str] | None = None,
        use_beam_search: bool | None = None,
        n: int | None = None,
        length_penalty: float | None = None,
        seed: int | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        min_p: float | None = None,
        repetition_penalty: float | None = None,
        max_completion_tokens: int | None = None,
        vllm_xargs: Mapping[str, Any] | None = None,
        chunking: Chunking = "auto",
        prepare: PrepareMode = "auto",
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> Transcription:
        """Transcribe speech with ``POST /v1/audio/transcriptions``; any input form, any length.

        Audio over 30 s (or over 25 MiB) is split client-side at quiet points (``chunking="auto"``),
        the pieces are transcribed concurrently and merged: one text without doubled words or spaces,
        segment times offset to the whole file. ``srt``/``vtt`` (which vLLM refuses) are rendered from
        segments: ``result.to_srt()``, ``result.to_vtt()``, or ``result.formatted()``.

        Args:
            audio: a path, bytes, a binary file object, ``(numpy array, sample_rate)`` or an http(s) URL
                (downloaded by the client, without the API key).
            model: served model name (default: the client's, else the server's first).
            language: ISO-639-1 code; ``None`` lets Whisper detect it (one extra engine step).
            prompt: text to condition on (can cut the output short on small models).
            response_format: ``json`` (text), ``text``, ``verbose_json`` (segments), ``srt``, ``vtt``.
            temperature: sampling temperature (vLLM's default is 0).
            timestamp_granularities: ``["segment"]`` / ``["word"]``, sent as ``timestamp_granularities[]``
                (vLLM 0.32 accepts it but never returns words).
            use_beam_search: beam search (vLLM >= 0.18.0; checked before sending); ``n`` is the width.
            n: beam width, only with ``use_beam_search``.
            length_penalty: beam-search length penalty.
            seed, top_p, top_k, min_p, repetition_penalty: sampling parameters.
            max_completion_tokens: cap on generated tokens (per piece when chunked).
            vllm_xargs: extra sampling arguments for custom logits processors (sent as JSON).
            chunking: ``"auto"``, ``"client"``, ``"server"`` or a ``ChunkingOptions``.
            prepare: ``"auto"`` decodes locally (soundfile/PyAV) to catch unreadable files and sends
                mono 16 kHz FLAC when the input is anything else; ``"never"`` sends the bytes as given.
            extra_body: more form fields, sent as given (dicts as JSON).
            extra_headers: more HTTP headers.
            timeout: seconds per request (default: the client's).

        Returns:
            Transcription: ``text``, ``language``, ``duration``, ``segments``, ``usage``.

        Raises:
            AudioDecodeError: the input cannot be read or decoded (before any upload).
            UnsupportedByServer: beam search on vLLM < 0.18.0.
            ModelNotFoundError: ``model`` is not served.
            EndpointNotServed: the server's model does not transcribe.
            BadRequestError: the server refused a field (e.g. an unknown ``language``).

        Example:
            >>> result = await client.transcribe("meeting.mp3", language="en", response_format="srt")
            >>> print(result.to_srt())
        """
        params = SpeechParams(
            model=model,
            language=language,
            prompt=prompt,
            response_format=response_format,
            temperature=temperature,
            timestamp_granularities=timestamp_granularities,
            use_beam_search=use_beam_search,
            n=n,
            length_penalty=length_penalty,
            seed=seed,
            top_p=top_p,
            top_k=top_k,
            min_p=min_p,
            repetition_penalty=repetition_penalty,
            max_completion_tokens=max_completion_tokens,
            vllm_xargs=vllm_xargs,
            extra_body=extra_body,
            extra_headers=extra_headers,
            timeout=timeout,
        )
        return await self._run(
            transcription.transcribe_operation(
                audio, params, task="transcribe", client_model=self.model, chunking=chunking, prepare=prepare
            )
        )

    async def translate(
        self,
        audio: AudioInput,
        *,
        model: str | None = None,
        language: str | None = None,
        prompt: str | None = None,
        response_format: ResponseFormat = "json",
        temperature: float | None = None,
        use_beam_search: bool | None = None,
        n: int | None = None,
        length_penalty: float | None = None,
        seed: int | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        min_p: float | None = None,
        repetition_penalty: float | None = None,
        max_completion_tokens: int | None = None,
        vllm_xargs: Mapping[str, Any] | None = None,
        chunking: Chunking = "auto",
        prepare: PrepareMode = "auto",
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> Transcription:
        """Translate speech to English text with ``POST /v1/audio/translations``.

        Same inputs, chunking and formats as :meth:`transcribe`; ``language`` names the spoken
        language (``None``: detected). vLLM's translation responses carry no usage.

        Raises:
            AudioDecodeError: the input cannot be read or decoded (before any upload).
            UnsupportedByServer: beam search on vLLM < 0.18.0.
            ModelNotFoundError: ``model`` is not served.

        Example:
            >>> (await client.translate("bonjour.wav", language="fr")).text
            'Hello.'
        """
        params = SpeechParams(
            model=model,
            language=language,
            prompt=prompt,
            response_format=response_format,
            temperature=temperature,
            use_beam_search=use_beam_search,
            n=n,
            length_penalty=length_penalty,
            seed=seed,
            top_p=top_p,
            top_k=top_k,
            min_p=min_p,
            repetition_penalty=repetition_penalty,
            max_completion_tokens=max_completion_tokens,
            vllm_xargs=vllm_xargs,
            extra_body=extra_body,
            extra_headers=extra_headers,
            timeout=timeout,
        )
        return await self._run(
            transcription.transcribe_operation(
                audio, params, task="translate", client_model=self.model, chunking=chunking, prepare=prepare
            )
        )

    async def transcribe_stream(
        self,
        audio: AudioInput,
        *,
        model: str | None = None,
        language: str | None = None,
        prompt: str | None = None,
        response_format: ResponseFormat = "json",
        temperature: float | None = None,
        seed: int | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        min_p: float | None = None,
        repetition_penalty: float | None = None,
        max_completion_tokens: int | None = None,
        vllm_xargs: Mapping[str, Any] | None = None,
        use_beam_search: bool | None = None,
        include_usage: bool = True,
        translate: bool = False,
        chunking: Chunking = "auto",
        prepare: PrepareMode = "auto",
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> AsyncTranscriptionStream:
        """Stream a transcription (``stream=true``): text deltas as they are decoded, then the result.

        The request is sent (and an error status raised) when this call returns; iterate the returned
        stream for :class:`~vllm_tasks.types.audio.TranscriptionDelta` objects and, last, one
        :class:`~vllm_tasks.types.audio.Transcription`. vLLM splits audio over 30 s server-side and ends
        each piece with its own ``finish_reason``; the deltas carry the piece index and the joins are
        cleaned (no double spaces). vLLM's ``transcription.chunk`` events and OpenAI's
        ``transcript.text.*`` events are both understood.

        Args:
            audio: as for :meth:`transcribe`.
            include_usage: ask for the final usage chunk (``stream_include_usage``).
            translate: stream a translation (``/v1/audio/translations``) instead.
            chunking: ``"auto"`` sends audio up to 10 minutes (vLLM's decode limit) and 25 MiB whole and
                splits longer audio client-side into pieces streamed one after another (no overlap);
                ``"client"`` always splits, ``"server"`` never does.
            use_beam_search: refused (vLLM cannot stream beam search); raises before sending.
            (other arguments: as for :meth:`transcribe`; ``response_format`` must be json or text.)

        Returns:
            AsyncTranscriptionStream: an async iterator (and async context manager).

        Raises:
            InvalidInputError: ``use_beam_search`` or a segment format with streaming.
            AudioDecodeError: the input cannot be read or decoded (before any upload).
            StreamError: while iterating, an error frame from the server.

        Example:
            >>> async with await client.transcribe_stream("talk.wav") as stream:
            ...     async for event in stream:
            ...         print(event.text, end="", flush=True)
        """
        params = SpeechParams(
            model=model,
            language=language,
            prompt=prompt,
            response_format=response_format,
            temperature=temperature,
            seed=seed,
            top_p=top_p,
            top_k=top_k,
            min_p=min_p,
            repetition_penalty=repetition_penalty,
            max_completion_tokens=max_completion_tokens,
            vllm_xargs=vllm_xargs,
            use_beam_search=use_beam_search,
            stream_include_usage=include_usage,
            extra_body=extra_body,
            extra_headers=extra_headers,
            timeout=timeout,
        )
        task: transcription.Task = "translate" if translate else "transcribe"
        lines, parser, more = await self._run(
            transcription.stream_operation(
                audio, params, task=task, client_model=self.model, chunking=chunking, prepare=prepare
            )
        )
        return AsyncTranscriptionStream(lines, parser, client=self, more=more)
