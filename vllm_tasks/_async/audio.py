"""Speech-to-text methods of the asynchronous client: ``transcribe``, ``translate``, ``transcribe_stream``.

CPU-bound audio work (reading, decoding, resampling, encoding) goes through :mod:`vllm_tasks.offload`:
a worker thread in the async client, so that its event loop keeps serving while a long file is prepared.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from .. import audio as audio_io
from .. import transcription
from ..audio import AudioInput, PrepareMode
from ..calls import CLIENT_DEFAULT, CallOptions, TimeoutLike, max_model_len, resolve_model
from ..offload import async_offload
from ..transcription import (
    Chunking,
    ChunkingOptions,
    Prepared,
    PresetChoice,
    Requests,
    SequentialOptions,
    StreamParser,
    Task,
    TranscribeParams,
)
from ..types.audio import ResponseFormat, Transcription, TranscriptionStreamEvent
from .alignment import checked_aligner
from .base import AsyncClientBase
from .fetching import fetch_input
from .transport import AsyncLineStream, AsyncTransport

if TYPE_CHECKING:
    from .client import AsyncClient


class AsyncTranscriptionEvents(ABC):
    """What a streamed transcription and a realtime session share: iterated for events, the last one the
    final :class:`Transcription` (kept as ``result``); a context manager that closes the connection."""

    result: Transcription | None

    @abstractmethod
    def __aiter__(self) -> AsyncIterator[TranscriptionStreamEvent]:
        """The events, then the final result."""

    @abstractmethod
    async def close(self) -> None:
        """Release the connection (safe to call twice)."""

    async def until_done(self) -> Transcription:
        """Read the rest to the end; returns the final result."""
        async for _ in self:
            pass
        if self.result is None:  # pragma: no cover - __aiter__ sets it or raises
            raise RuntimeError("the stream ended without a result")
        return self.result

    async def __aenter__(self: Self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


class AsyncTranscriptionStream(AsyncTranscriptionEvents):
    """A transcription being streamed: iterate it for deltas, then the final :class:`Transcription`.

    ``async for event in stream`` yields a :class:`~vllm_tasks.types.audio.TranscriptionDelta` per
    piece of text, then one :class:`~vllm_tasks.types.audio.Transcription` (also kept as ``result``).
    Use it as a context manager (or call ``close()``) to release the connection if you stop early.

    Args:
        lines: the open stream of the first piece.
        parser: the parser that turns lines into events.
        transport: where further pieces are sent (``transport.open_stream``); ``None`` for one piece.
        more: the requests of further client-side pieces (long audio), built lazily: each piece is
            decoded and encoded when the previous one is done (off the event loop in the async client).
        on_result: called with the final result (the client counts its usage and keeps the audio
            path for the notebook view); what it returns becomes ``result``.

    Raises (while iterating):
        StreamError: the server sent an error frame after the stream had started.
        APIConnectionError: the connection broke.
    """

    def __init__(
        self,
        lines: AsyncLineStream,
        parser: StreamParser,
        *,
        transport: AsyncTransport | None = None,
        more: Requests = (),
        on_result: Callable[[Transcription], Transcription] | None = None,
    ) -> None:
        self._lines = lines
        self._parser = parser
        self._transport = transport
        self._more = iter(more)
        self._on_result = on_result
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
                if self._transport is None:
                    break
                request = await async_offload(transcription.next_request, self._more)
                if request is None:
                    break
                self._parser.new_piece()
                self._lines = await self._transport.open_stream(request)
        finally:
            await self._lines.close()
        result = self._parser.finish()
        self.result = self._on_result(result) if self._on_result is not None else result
        yield self.result

    async def close(self) -> None:
        """Release the connection (safe to call twice)."""
        await self._lines.close()


class AsyncAudioMethods(AsyncClientBase):
    """``transcribe`` / ``translate`` (``/v1/audio/*``) and ``transcribe_stream``."""

    async def transcribe(
        self,
        audio: AudioInput,
        *,
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
        preset: PresetChoice = None,
        aligner: AsyncClient | None = None,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> Transcription:
        """Transcribe speech with ``POST /v1/audio/transcriptions``; any input form, any length.

        Long audio goes as the model's preset says (``chunking="auto"``; ``preset``): Whisper's audio over
        30 s (or over 25 MiB) with Whisper's long-form algorithm (``"sequential"``): 30 s windows one
        after another, each starting at the end of the previous one's last complete segment, decoded
        again at a higher temperature when its text loops or its log-probability is low; segment times
        offset to the whole file. Other models' audio is sent whole while vLLM takes it (10 minutes, the
        served context), then in pieces.
        ``chunking="client"`` cuts at quiet points up front and sends the pieces concurrently (faster,
        less accurate); ``"server"`` lets vLLM split. ``srt``/``vtt`` (which vLLM refuses) are rendered from
        segments: ``result.to_srt()``, ``result.to_vtt()``, or ``result.formatted()``.

        ``response_format="diarized_json"`` (a diarization model such as MOSS-Transcribe-Diarize, vLLM
        >= 0.27.0) returns who spoke when in ``result.speaker_segments``; ``to_srt()``/``to_vtt()`` then
        label each cue with its speaker. Speaker labels hold within one request only, so such audio is
        always sent whole (``chunking="auto"`` acts as ``"server"``; ``"client"`` is refused).

        Args:
            audio: a path, bytes, a binary file object, ``(numpy array, sample_rate)`` or an http(s) URL
                (downloaded by the client, without the API key).
            language: ISO-639-1 code; ``None`` lets Whisper detect it (one extra engine step).
            prompt: text to condition on (can cut the output short on small models).
            response_format: ``json`` (text), ``text``, ``verbose_json`` (segments), ``srt``, ``vtt``,
                ``diarized_json`` (speaker segments: ``result.speaker_segments``).
            temperature: sampling temperature (vLLM's default is 0).
            timestamp_granularities: ``["segment"]`` / ``["word"]``, sent as ``timestamp_granularities[]``
                (vLLM 0.32 accepts it but never returns words).
            use_beam_search: beam search (vLLM >= 0.18.0; checked before sending); ``n`` is the width.
            n: beam width, only with ``use_beam_search``.
            length_penalty: beam-search length penalty.
            seed: sampling seed.
            top_p: nucleus sampling threshold.
            top_k: top-k sampling cut.
            min_p: minimum-probability sampling cut.
            repetition_penalty: penalty on repeated tokens.
            max_completion_tokens: cap on generated tokens (per piece when chunked).
            vllm_xargs: extra sampling arguments for custom logits processors (sent as JSON).
            chunking: ``"auto"``, ``"sequential"``, ``"client"``, ``"server"``, a ``ChunkingOptions`` or a
                ``SequentialOptions`` (``diarized_json``: always sent whole).
            prepare: ``"auto"`` decodes locally (soundfile/PyAV) to catch unreadable files and sends
                mono 16 kHz FLAC when the input is anything else; ``"never"`` sends the bytes as given.
            preset: the model family's :class:`~vllm_tasks.transcription.SpeechPreset` or its name
                (``"whisper"``, ``"voxtral"``, ``"qwen3-asr"``, ...); ``None`` recognises it from the served
                model's name. It says what the model accepts (checked before sending) and how its long
                audio is transcribed.
            aligner: a client of a forced-aligner server (:meth:`align`): ``result.words`` is filled by
                aligning the text with the audio, one aligner request per window of segments (up to 30 s;
                the whole audio when there are no segments), and ``to_srt(words=True)`` writes a cue
                per word. ``language`` must be one the aligner supports.
            model: served model name (default: the client's, else the server's first).
            extra_body: more form fields, sent as given (dicts as JSON).
            extra_headers: more HTTP headers.
            timeout: seconds per request (default: the client's).

        Returns:
            Transcription: ``text``, ``language``, ``duration``, ``segments``, ``usage``
            (``speaker_segments`` for ``diarized_json``; ``words`` with ``aligner``).

        Raises:
            InvalidInputError: (``kind="audio_decode"``) the input cannot be read or decoded (before any
                upload); (``kind="audio_fetch"``, an ``InputFetchError``) an audio URL cannot be fetched;
                ``chunking="client"`` or ``"sequential"`` with ``diarized_json``; what the model's preset
                refuses (``prompt`` for a model that drops it, ``verbose_json``/``srt``/``vtt`` or
                ``chunking="sequential"`` for a model without timed segments), checked before sending.
            UnsupportedByServer: beam search on vLLM < 0.18.0; ``diarized_json`` on vLLM < 0.27.0
                (checked before sending).
            NotFoundError: (``kind="model_not_found"``) ``model`` is not served.
            EndpointNotServed: the server's model does not transcribe.
            BadRequestError: the server refused a field (e.g. an unknown ``language``).

        Examples:
            >>> result = await client.transcribe("meeting.mp3", language="en", response_format="srt")
            >>> print(result.to_srt())
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        params = TranscribeParams(
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
        )
        checked = None if aligner is None else checked_aligner(aligner, language)
        result = self._counted(
            await self._transcribe(
                audio, params, call, task="transcribe", chunking=chunking, prepare=prepare, preset=preset
            )
        )
        if checked is None:
            return result
        return await checked._word_times(audio, result, language=language, call=CallOptions(timeout=timeout))

    async def translate(
        self,
        audio: AudioInput,
        *,
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
        preset: PresetChoice = None,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> Transcription:
        """Translate speech to English text with ``POST /v1/audio/translations``.

        Same inputs, chunking and formats as :meth:`transcribe`, but for ``diarized_json`` (vLLM
        diarizes transcriptions only); ``language`` names the spoken language (``None``: detected).
        vLLM's translation responses carry no usage.

        Raises:
            InvalidInputError: (``kind="audio_decode"``) the input cannot be read or decoded (before any
                upload); (``kind="audio_fetch"``, an ``InputFetchError``) an audio URL cannot be fetched;
                ``response_format="diarized_json"`` (before any request).
            UnsupportedByServer: beam search on vLLM < 0.18.0.
            NotFoundError: (``kind="model_not_found"``) ``model`` is not served.

        Examples:
            >>> (await client.translate("bonjour.wav", language="fr")).text
            'Hello.'
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        params = TranscribeParams(
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
        )
        return self._counted(
            await self._transcribe(
                audio, params, call, task="translate", chunking=chunking, prepare=prepare, preset=preset
            )
        )

    async def transcribe_stream(
        self,
        audio: AudioInput,
        *,
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
        chunking: Chunking = "auto",
        prepare: PrepareMode = "auto",
        preset: PresetChoice = None,
        model: str | None = None,
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
            chunking: ``"auto"`` sends audio up to 10 minutes (vLLM's decode limit) and 25 MiB whole and
                splits longer audio client-side into pieces streamed one after another (no overlap);
                ``"client"`` always splits, ``"server"`` never does; ``"sequential"`` is refused (each
                window's timestamps place the next one; a stream carries text only).
            use_beam_search: refused (vLLM cannot stream beam search); raises before sending.

        The other arguments are as for :meth:`transcribe`; ``response_format`` must be json or text
        (``verbose_json``, ``srt``, ``vtt`` and ``diarized_json`` are refused before sending).

        Returns:
            AsyncTranscriptionStream: iterate it for the events; also a context manager.

        Raises:
            InvalidInputError: ``use_beam_search`` or a segment format with streaming;
                ``chunking="sequential"``.
            InvalidInputError: (``kind="audio_decode"``) the input cannot be read or decoded (before any
                upload); (``kind="audio_fetch"``, an ``InputFetchError``) an audio URL cannot be fetched.
            StreamError: while iterating, an error frame from the server.

        Examples:
            >>> async with await client.transcribe_stream("talk.wav") as stream:
            ...     async for event in stream:
            ...         print(event.text, end="", flush=True)
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        params = TranscribeParams(
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
        )
        return await self._stream(
            audio,
            params,
            call,
            task="transcribe",
            chunking=chunking,
            prepare=prepare,
            preset=preset,
            include_usage=include_usage,
        )

    async def translate_stream(
        self,
        audio: AudioInput,
        *,
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
        chunking: Chunking = "auto",
        prepare: PrepareMode = "auto",
        preset: PresetChoice = None,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> AsyncTranscriptionStream:
        """Stream a translation into English (``/v1/audio/translations``, ``stream=true``): text deltas as
        they are decoded, then the result.

        As :meth:`transcribe_stream` in every other way (the same arguments, events and errors).

        Returns:
            AsyncTranscriptionStream: iterate it for the events; also a context manager.

        Raises:
            InvalidInputError: as for :meth:`transcribe_stream`.
            StreamError: while iterating, an error frame from the server.

        Examples:
            >>> async with await client.translate_stream("interview-de.wav") as stream:
            ...     async for event in stream:
            ...         print(event.text, end="", flush=True)
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        params = TranscribeParams(
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
        )
        return await self._stream(
            audio,
            params,
            call,
            task="translate",
            chunking=chunking,
            prepare=prepare,
            preset=preset,
            include_usage=include_usage,
        )

    async def _audio_source(self, audio: AudioInput, call: CallOptions) -> audio_io.AudioSource:
        """Resolve an input (off the event loop); an http(s) URL is downloaded without the API key."""
        if audio_io.is_url(audio):
            url = str(audio)
            data = await fetch_input(
                self._transport, url, field="audio", kind="audio_fetch", timeout=call.timeout
            )
            return audio_io.from_url_bytes(url, data)
        return await async_offload(audio_io.resolve, audio)

    async def _prepare(
        self,
        audio: AudioInput,
        params: TranscribeParams,
        call: CallOptions,
        *,
        task: Task,
        chunking: Chunking,
        prepare: PrepareMode,
        preset: PresetChoice,
        stream: bool,
    ) -> Prepared:
        """Check the call, read the input (and decode it, unless prepare="never": a bad input fails
        before any request), and check it against the server and the model's preset."""
        transcription.validate(params, task=task, stream=stream)
        options = transcription.diarized_chunking(params, transcription.chunking_options(chunking))
        if stream:
            options = transcription.stream_chunking(options)
        source = await self._audio_source(audio, call)
        duration = await async_offload(transcription.measure, source, options, prepare)
        upload = None
        if duration is None:  # sent whole whatever the model: read (and refused) before any request
            upload = await async_offload(
                audio_io.prepare_upload, source, prepare, size_limit=options.size_limit
            )
        info = await self.server_info()
        model = resolve_model(info, call.model, self.model)
        chosen = transcription.speech_preset(info, model, preset)
        transcription.check_preset(chosen, params, options, task=task)
        transcription.check_server(params, info)
        limit = transcription.split_seconds(
            chosen,
            stream=stream,
            max_model_len=max_model_len(info, model),
            max_tokens=params.max_completion_tokens,
        )
        split = transcription.should_split(source, duration, options, limit_seconds=limit)
        if not split and upload is None:
            upload = await async_offload(
                audio_io.prepare_upload, source, prepare, size_limit=options.size_limit
            )
        call = transcription.preset_call(chosen, call, task=task)
        return Prepared(source, options, upload, model, chosen, call)

    async def _transcribe(
        self,
        audio: AudioInput,
        params: TranscribeParams,
        call: CallOptions,
        *,
        task: Task,
        chunking: Chunking,
        prepare: PrepareMode,
        preset: PresetChoice,
    ) -> Transcription:
        """One request, sequential windows (Whisper's long-form algorithm), or client-side pieces sent
        concurrently and merged."""
        source, options, upload, model, chosen, call = await self._prepare(
            audio, params, call, task=task, chunking=chunking, prepare=prepare, preset=preset, stream=False
        )
        if upload is None:
            speech = await async_offload(transcription.find_speech, source, options.vad)
            if transcription.long_form(options, chosen) == "sequential":
                result = await self._transcribe_sequential(
                    source, params, call, options.sequential, task=task, model=model, speech=speech
                )
            else:
                result = await self._transcribe_pieces(
                    source, params, call, options, task=task, model=model, speech=speech
                )
            return transcription.keep_audio(transcription.on_timeline(result, speech), source, audio)
        fmt = transcription.server_format(params.response_format)
        transcription.log_server_chunking(source.name, fmt, upload.duration)
        request = transcription.build_request(params, call, upload, task=task, model=model, fmt=fmt)
        response = await self._transport.send(request)
        result = transcription.parse_response(
            response,
            task=task,
            model=model,
            response_format=params.response_format,
            language=params.language,
            duration=upload.duration,
        )
        return transcription.keep_audio(result, source, audio)

    async def _transcribe_sequential(
        self,
        source: audio_io.AudioSource,
        params: TranscribeParams,
        call: CallOptions,
        options: SequentialOptions,
        *,
        task: Task,
        model: str | None,
        speech: transcription.SpeechMap | None,
    ) -> Transcription:
        """Whisper's long-form algorithm: 30 s windows one after another, each starting at the end of
        the previous one's last complete segment, conditioned on its text, decoded again at the next
        temperature while it fails the thresholds (:class:`~vllm_tasks.transcription.SequentialDecoder`).
        Each window is decoded and encoded off the event loop; with ``speech``, over the speech alone."""
        decoder = transcription.SequentialDecoder(params, options, task=task, model=model)
        reader = transcription.SampleReader(transcription.keep_speech(audio_io.iter_samples(source), speech))
        while (window := await async_offload(decoder.next_window, reader)) is not None:
            upload = await async_offload(transcription.window_upload, source, window)
            attempts: list[transcription.Attempt] = []
            for temperature in decoder.temperatures():
                attempts.append(await self._decode_window(decoder, window, upload, temperature, call))
                if not decoder.needs_fallback(attempts[-1]):
                    break
            decoder.accept(window, decoder.best(attempts))
        return decoder.result(response_format=params.response_format, duration=None)

    async def _decode_window(
        self,
        decoder: transcription.SequentialDecoder,
        window: transcription.Window,
        upload: audio_io.Upload,
        temperature: float,
        call: CallOptions,
    ) -> transcription.Attempt:
        """One attempt at a window: ``verbose_json``, and ``json`` when the decode lost its text (no
        timestamp tokens)."""
        params = decoder.params_for(temperature)
        task, model = decoder.task, decoder.model
        request = transcription.build_request(
            params, call, upload, task=task, model=model, fmt="verbose_json"
        )
        decoder.requests += 1
        response = await self._transport.send(replace(request, raise_for_status=False))
        if transcription.empty_decode(response):
            attempt = decoder.empty_attempt(temperature)
        else:
            if response.is_error:  # sent again as any request is: retries (not counted), typed errors
                response = await self._transport.send(request)
            result = transcription.parse_response(
                response,
                task=task,
                model=model,
                response_format="verbose_json",
                language=params.language,
                duration=window.duration,
            )
            attempt = decoder.attempt(window, result, temperature)
        if not decoder.needs_text(window, attempt):
            return attempt
        request = transcription.build_request(params, call, upload, task=task, model=model, fmt="json")
        decoder.requests += 1
        response = await self._transport.send(request)
        result = transcription.parse_response(
            response, task=task, model=model, response_format="json", language=params.language
        )
        return decoder.text_attempt(window, result, temperature)

    async def _transcribe_pieces(
        self,
        source: audio_io.AudioSource,
        params: TranscribeParams,
        call: CallOptions,
        options: ChunkingOptions,
        *,
        task: Task,
        model: str | None,
        speech: transcription.SpeechMap | None,
    ) -> Transcription:
        """Split client-side (the ``speech`` alone when given); each wave of pieces is decoded and
        encoded off the event loop, then sent."""
        fmt = transcription.server_format(params.response_format)
        limit = transcription.chunk_seconds(options, fmt)
        chunks = transcription.plan_chunks(
            source, options, max_seconds=limit, overlap_seconds=options.overlap_seconds, speech=speech
        )
        wave_size = options.concurrency * 2  # pieces decoded ahead: bounds memory for very long files
        parts: list[transcription.ChunkResult] = []
        sent = 0
        while wave := await async_offload(transcription.next_wave, source, chunks, wave_size):
            results, count = await self._send_wave(wave, params, call, options, task=task, model=model)
            sent += count
            parts.extend(transcription.wave_results(wave, results))
        merged = transcription.merge_chunks(
            parts,
            task=task,
            model=model,
            response_format=params.response_format,
            language=params.language,
            overlap_seconds=options.overlap_seconds,
        )
        return merged.model_copy(update={"requests": sent})

    async def _send_wave(
        self,
        wave: list[transcription.ChunkUpload],
        params: TranscribeParams,
        call: CallOptions,
        options: ChunkingOptions,
        *,
        task: Task,
        model: str | None,
    ) -> tuple[dict[int, Transcription], int]:
        """Transcribe a wave's audible pieces; returns their results by index and the requests sent."""
        fmt = transcription.server_format(params.response_format)
        sent = transcription.audible(wave)
        requests = [
            transcription.build_request(params, call, up, task=task, model=model, fmt=fmt) for _, up in sent
        ]
        responses = await self._transport.send_all(requests, options.concurrency) if requests else []
        results = transcription.parse_pieces(sent, responses, params, task=task, model=model)
        if fmt != "verbose_json" or not sent:
            return results, len(requests)
        # Where speech goes on after the last segment, ask again with json for the whole text.
        missing = await async_offload(transcription.pieces_missing_text, sent, results)
        if not missing:
            return results, len(requests)
        retry = [
            transcription.build_request(params, call, up, task=task, model=model, fmt="json")
            for _, up in missing
        ]
        responses = await self._transport.send_all(retry, options.concurrency)
        transcription.complete_pieces(results, missing, responses, params, task=task, model=model)
        return results, len(requests) + len(retry)

    async def _stream(
        self,
        audio: AudioInput,
        params: TranscribeParams,
        call: CallOptions,
        *,
        task: Task,
        chunking: Chunking,
        prepare: PrepareMode,
        preset: PresetChoice,
        include_usage: bool,
    ) -> AsyncTranscriptionStream:
        """Open the stream of the first piece (the whole file, or its first client-side piece)."""
        source, options, upload, model, _, call = await self._prepare(
            audio, params, call, task=task, chunking=chunking, prepare=prepare, preset=preset, stream=True
        )
        split = upload is None
        duration = upload.duration if upload is not None else None
        # Long audio: the pieces' requests are built lazily, each decoded and encoded off the event loop.
        speech = await async_offload(transcription.find_speech, source, options.vad) if split else None
        pieces = transcription.stream_requests(
            source, options, params, call, task=task, model=model, include_usage=include_usage, speech=speech
        )
        more = pieces if split else iter(())
        first = await async_offload(transcription.next_request, more)
        if split:
            duration = (await async_offload(audio_io.info, source)).duration or None
        if first is None:  # sent whole, or nothing but silence
            if upload is None:
                upload = await async_offload(
                    audio_io.prepare_upload, source, prepare, size_limit=options.size_limit
                )
            first = transcription.build_request(
                params,
                call,
                upload,
                task=task,
                model=model,
                fmt="json",
                stream=True,
                include_usage=include_usage,
            )
        lines = await self._transport.open_stream(first)
        parser = StreamParser(
            task=task,
            model=model,
            language=params.language,
            duration=duration,
            response_format=params.response_format,
        )

        def finished(result: Transcription) -> Transcription:
            return self._counted(transcription.keep_audio(result, source, audio))

        return AsyncTranscriptionStream(
            lines, parser, transport=self._transport, more=more, on_result=finished
        )
