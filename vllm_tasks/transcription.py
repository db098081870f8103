"""Speech-to-text operations (``/v1/audio/transcriptions`` and ``/v1/audio/translations``) and parsing.

Everything here is shared by ``Client`` and ``AsyncClient``: the operations are generators over
:mod:`vllm_tasks.steps`, the parsers and mergers are pure functions.

What vLLM 0.32 does and this module corrects (measured with whisper-base on the CPU fixture):

- audio over 30 s is split server-side; ``json`` joins the pieces with a double space, a stream ends
  once per piece, and ``verbose_json`` silently drops every piece in which the model emitted no
  timestamp tokens. ``chunking="auto"`` therefore splits such audio client-side at quiet points,
  transcribes the pieces concurrently and merges them (no doubled words or spaces, segment times offset,
  segments covering the whole file).
- ``srt`` / ``vtt`` are refused (400): they are rendered here from ``verbose_json`` segments.
- uploads over ``VLLM_MAX_AUDIO_CLIP_FILESIZE_MB`` (25 MiB) are refused: chunking keeps every upload small.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import httpx
import numpy as np

from . import audio as audio_io
from . import gates
from .calls import resolve_model
from .errors import AudioDecodeError, InvalidInputError, StreamError
from .steps import CLIENT_DEFAULT, Fetch, GetServerInfo, Operation, Parallel, Request, Stream, TimeoutLike
from .tasks import TaskName
from .types.audio import (
    ResponseFormat,
    Transcription,
    TranscriptionDelta,
    TranscriptionSegment,
    TranscriptionUsage,
)
from .types.server import ServerInfo

logger = logging.getLogger("vllm_tasks")

Task = Literal["transcribe", "translate"]
PATHS: dict[Task, str] = {"transcribe": "/v1/audio/transcriptions", "translate": "/v1/audio/translations"}
TASK_NAMES: dict[Task, TaskName] = {"transcribe": "transcription", "translate": "translation"}
RESPONSE_FORMATS = ("json", "text", "verbose_json", "srt", "vtt")
SERVER_CHUNK_SECONDS = 30.0
"""Whisper's window: vLLM splits anything longer server-side."""
DEFAULT_SIZE_LIMIT = 25 * 1024 * 1024
"""vLLM's default ``VLLM_MAX_AUDIO_CLIP_FILESIZE_MB`` (25 MiB)."""

ChunkingMode = Literal["auto", "server", "client"]
Requests = Iterable[Request]
"""Requests still to send (a stream's further pieces), built lazily."""
_NO_SAMPLES = np.zeros(0, dtype=np.float32)


@dataclass(frozen=True)
class ChunkingOptions:
    """How long audio is split client-side.

    Attributes:
        mode: ``auto`` splits audio over 30 s (or over ``size_limit`` bytes) client-side; ``client``
            always splits; ``server`` sends the file whole and lets vLLM split it.
        max_seconds: longest piece sent, overlap included (at most 30, Whisper's window).
        segment_max_seconds: the limit when segments are wanted (``verbose_json``/``srt``/``vtt``):
            whisper-base emits no timestamps for many 25-30 s pieces, so they are kept shorter.
        search_seconds: the cut goes at the quietest 20 ms in this many seconds before the limit.
        overlap_seconds: each piece starts this much before the previous cut; doubled words at the
            join are removed when merging.
        concurrency: pieces in flight at once.
        size_limit: an upload larger than this (bytes) is split even when short.
    """

    mode: ChunkingMode = "auto"
    max_seconds: float = 30.0
    segment_max_seconds: float = 20.0
    search_seconds: float = 5.0
    overlap_seconds: float = 0.5
    concurrency: int = 8
    size_limit: int = DEFAULT_SIZE_LIMIT

    def __post_init__(self) -> None:
        if self.mode not in ("auto", "server", "client"):
            raise InvalidInputError(
                "chunking", self.mode, "unknown mode", "Use 'auto', 'server' or 'client'."
            )
        for name in ("max_seconds", "segment_max_seconds"):
            value = getattr(self, name)
            if not 0 < value <= SERVER_CHUNK_SECONDS:
                raise InvalidInputError(name, value, "must be in (0, 30]", "Whisper sees 30 s at a time.")
        if self.overlap_seconds < 0 or self.search_seconds <= 0:
            raise InvalidInputError("overlap_seconds", self.overlap_seconds, "must be >= 0", "")
        if self.concurrency < 1:
            raise InvalidInputError("concurrency", self.concurrency, "must be >= 1", "")


Chunking = ChunkingMode | ChunkingOptions


@dataclass(frozen=True)
class SpeechParams:
    """The form fields of one transcription/translation request, as the caller gave them."""

    model: str | None = None
    language: str | None = None
    prompt: str | None = None
    response_format: ResponseFormat = "json"
    temperature: float | None = None
    timestamp_granularities: Sequence[str] | None = None
    use_beam_search: bool | None = None
    n: int | None = None
    length_penalty: float | None = None
    seed: int | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    max_completion_tokens: int | None = None
    vllm_xargs: Mapping[str, Any] | None = None
    to_language: str | None = None
    extra_body: Mapping[str, Any] | None = None
    extra_headers: Mapping[str, str] | None = None
    timeout: TimeoutLike = CLIENT_DEFAULT
    stream_include_usage: bool | None = None


# --------------------------------------------------------------------------------------------------
# Request building
# --------------------------------------------------------------------------------------------------


def validate(params: SpeechParams, *, task: Task, stream: bool) -> None:
    """Client-side checks that need no server.

    Raises:
        InvalidInputError: unknown ``response_format``, beam search with streaming, ``n`` without beam
            search, a format a stream cannot produce, bad ``timestamp_granularities``.
    """
    if params.response_format not in RESPONSE_FORMATS:
        raise InvalidInputError(
            "response_format", params.response_format, "unknown format", f"Use one of {RESPONSE_FORMATS}."
        )
    if stream and params.use_beam_search:
        raise InvalidInputError(
            "use_beam_search",
            True,
            "cannot be combined with streaming (vLLM answers 400)",
            "Use transcribe() for beam search, or drop use_beam_search.",
        )
    if stream and params.response_format not in ("json", "text"):
        raise InvalidInputError(
            "response_format",
            params.response_format,
            "a stream only carries text",
            "Stream with 'json'/'text', or use transcribe() for segments, SRT and VTT.",
        )
    if params.n is not None and params.n != 1 and not params.use_beam_search:
        raise InvalidInputError("n", params.n, "is the beam width; vLLM ignores it without beam search", "")
    if params.timestamp_granularities is not None:
        if isinstance(params.timestamp_granularities, str):
            raise InvalidInputError(
                "timestamp_granularities", params.timestamp_granularities, "must be a list", ""
            )
        if task == "translate":
            raise InvalidInputError(
                "timestamp_granularities", params.timestamp_granularities, "translations have none", ""
            )
        for item in params.timestamp_granularities:
            if item not in ("word", "segment"):
                raise InvalidInputError(
                    "timestamp_granularities", item, "unknown", "Use 'word' or 'segment'."
                )
    if params.stream_include_usage and not stream:
        raise InvalidInputError("stream_include_usage", True, "needs a stream (vLLM answers 400)", "")


def check_server(params: SpeechParams, info: ServerInfo) -> None:
    """Version gates for the request's features.

    Raises:
        UnsupportedByServer: beam search on vLLM < 0.18.0.
    """
    features = []
    if params.use_beam_search:
        features.append("transcription_beam_search")
    gates.require(info, features)


def _form_value(value: Any) -> str | list[str]:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return json.dumps(dict(value))
    if isinstance(value, list | tuple):
        return [str(_form_value(item)) for item in value]
    return str(value)


def server_format(response_format: ResponseFormat) -> Literal["json", "verbose_json"]:
    """What to ask vLLM for: segments for verbose_json/srt/vtt, else json (``text`` also answers JSON)."""
    return "verbose_json" if response_format in ("verbose_json", "srt", "vtt") else "json"


def form_fields(
    params: SpeechParams,
    *,
    model: str | None,
    fmt: Literal["json", "verbose_json"],
    stream: bool = False,
) -> dict[str, str | list[str]]:
    """The multipart form fields (strings; ``timestamp_granularities[]`` with its brackets)."""
    fields: dict[str, Any] = {
        "model": model,
        "language": params.language,
        "prompt": params.prompt,
        "response_format": fmt,
        "temperature": params.temperature,
        "use_beam_search": params.use_beam_search,
        "n": params.n,
        "length_penalty": params.length_penalty,
        "seed": params.seed,
        "top_p": params.top_p,
        "top_k": params.top_k,
        "min_p": params.min_p,
        "repetition_penalty": params.repetition_penalty,
        "max_completion_tokens": params.max_completion_tokens,
        "vllm_xargs": params.vllm_xargs,
        "to_language": params.to_language,
    }
    if params.timestamp_granularities:
        fields["timestamp_granularities[]"] = list(params.timestamp_granularities)
    if stream:
        fields["stream"] = True
        if params.stream_include_usage:
            fields["stream_include_usage"] = True
    if params.extra_body:
        fields.update(params.extra_body)
    return {key: _form_value(value) for key, value in fields.items() if value is not None}


def build_request(
    params: SpeechParams,
    upload: audio_io.Upload,
    *,
    task: Task,
    model: str | None,
    fmt: Literal["json", "verbose_json"],
    stream: bool = False,
) -> Request:
    """The ``Request`` step for one upload."""
    return Request(
        "POST",
        PATHS[task],
        data=form_fields(params, model=model, fmt=fmt, stream=stream),
        files={"file": (upload.filename, upload.content, upload.content_type)},
        headers=params.extra_headers,
        timeout=params.timeout,
        task=TASK_NAMES[task],
    )


# --------------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------------

_SPACES = re.compile(r"[ \t]{2,}")


def clean_text(text: str) -> str:
    """Collapse runs of spaces (vLLM joins its server-side chunks with a double space) and strip."""
    return _SPACES.sub(" ", text).strip()


def parse_body(
    body: Any,
    *,
    task: Task,
    model: str | None,
    response_format: ResponseFormat,
    language: str | None = None,
    duration: float | None = None,
) -> Transcription:
    """A ``json`` / ``verbose_json`` response body as a :class:`Transcription` (text cleaned).

    Raises:
        ValueError: the body is not an object with a ``text`` string.
    """
    if not isinstance(body, dict) or not isinstance(body.get("text"), str):
        raise ValueError(f"unexpected transcription response: {str(body)[:200]}")
    data = dict(body)
    segments = [TranscriptionSegment.model_validate(s) for s in data.pop("segments", None) or []]
    for segment in segments:
        segment.text = segment.text.strip()
    usage_body = data.pop("usage", None)
    usage = TranscriptionUsage.model_validate(usage_body) if isinstance(usage_body, dict) else None
    data.pop("task", None)
    return Transcription.model_validate(
        {
            **data,
            "text": clean_text(data.pop("text")),
            "language": data.pop("language", None) or language,
            "duration": data.pop("duration", None) or duration,
            "segments": segments,
            "usage": usage,
            "model": model,
            "task": task,
            "response_format": response_format,
        }
    )


def parse_response(response: httpx.Response, **kwargs: Any) -> Transcription:
    """:func:`parse_body` of a response (its JSON body)."""
    return parse_body(response.json(), **kwargs)


_WORD = re.compile(r"[^\w']+")


def _norm(word: str) -> str:
    return _WORD.sub("", word.lower())


def overlap_words(previous: str, following: str, max_words: int = 8) -> int:
    """How many leading words of ``following`` repeat the trailing words of ``previous``.

    Compared case- and punctuation-insensitively; the longest repeat (up to ``max_words``) wins.
    """
    tail = [_norm(w) for w in previous.split()[-max_words:]]
    head = [_norm(w) for w in following.split()[:max_words]]
    for k in range(min(len(tail), len(head)), 0, -1):
        if tail[-k:] == head[:k] and any(tail[-k:]):
            return k
    return 0


def _drop_words(text: str, count: int) -> str:
    return " ".join(text.split()[count:]) if count else text


def merge_texts(texts: Sequence[str], *, dedupe: bool = True) -> str:
    """Join chunk texts with single spaces, dropping words repeated across each join."""
    merged = ""
    for raw in texts:
        text = clean_text(raw)
        if merged and dedupe:
            text = _drop_words(text, overlap_words(merged, text))
        if text:
            merged = f"{merged} {text}".strip()
    return merged


@dataclass
class ChunkResult:
    """One chunk's transcription (``None`` for a silent chunk, which is not sent)."""

    chunk: audio_io.AudioChunk
    result: Transcription | None


def text_missing(chunk: audio_io.AudioChunk, result: Transcription) -> bool:
    """Whether a ``verbose_json`` piece lost text: no segments, or speech after the last segment's end.

    "Speech" is a 20 ms frame louder than a tenth of the piece's loudest frame in the remaining audio
    (at least 1 s of it).
    """
    if not result.segments:
        return not audio_io.is_silent(chunk.samples)
    last_end = max(segment.end for segment in result.segments)
    tail = chunk.samples[int(last_end * audio_io.TARGET_RATE) :]
    if len(tail) < audio_io.TARGET_RATE:
        return False
    return audio_io.peak_rms(tail) > max(audio_io.SILENCE_RMS, 0.1 * audio_io.peak_rms(chunk.samples))


def complete_segments(result: Transcription, full_text: str, duration: float) -> Transcription:
    """Add the words of ``full_text`` (a piece's json text) that its ``verbose_json`` segments lack.

    When the segments' words begin ``full_text`` (80% of them matching), the rest becomes one more
    segment from the last segment's end to ``duration``; otherwise one segment spanning the piece
    replaces them. Times are relative to the piece.
    """
    full_words = clean_text(full_text).split()
    segment_words = " ".join(s.text for s in result.segments).split()
    base = result.model_copy(update={"text": clean_text(full_text)})
    if not full_words:
        return base
    k = len(segment_words)
    head = [_norm(w) for w in full_words[:k]]
    matched = sum(a == b for a, b in zip(head, (_norm(w) for w in segment_words), strict=False))
    if k and len(head) == k and matched >= 0.8 * k:
        rest = " ".join(full_words[k:])
        segments = list(result.segments)
        if rest:
            start = max(s.end for s in segments)
            segments.append(
                TranscriptionSegment(id=len(segments), start=start, end=max(start, duration), text=rest)
            )
        return base.model_copy(update={"segments": segments})
    whole = TranscriptionSegment(start=0.0, end=duration, text=clean_text(full_text))
    return base.model_copy(update={"segments": [whole]})


def merge_chunks(
    parts: Sequence[ChunkResult],
    *,
    task: Task,
    model: str | None,
    response_format: ResponseFormat,
    language: str | None,
    overlap_seconds: float = 0.5,
) -> Transcription:
    """One :class:`Transcription` from client-side chunks.

    Segment times are offset by each chunk's start and clipped to its own span, so segments never
    overlap; a chunk without segments (``json`` requests, or a piece in which the model emitted no
    timestamps) becomes one segment spanning the chunk. Usage seconds are summed.
    """
    # At most the words the overlap can hold (~3 words/s, at least 1): identical phrases that really
    # follow each other ("Thank you. Thank you.") are kept.
    max_overlap = math.ceil(overlap_seconds * 3) if overlap_seconds > 0 else 0
    text = ""
    segments: list[TranscriptionSegment] = []
    seconds = 0.0
    detected: str | None = None
    for part in parts:
        chunk, result = part.chunk, part.result
        if result is None:
            continue
        detected = detected or result.language
        if result.usage is not None and result.usage.seconds is not None:
            seconds += result.usage.seconds
        chunk_text = clean_text(result.text)
        drop = overlap_words(text, chunk_text, max_overlap) if (max_overlap and text) else 0
        chunk_text = _drop_words(chunk_text, drop)
        if chunk_text:
            text = f"{text} {chunk_text}".strip()
        own: list[TranscriptionSegment] = []
        for segment in result.segments:
            start = max(chunk.own_start, min(chunk.end, chunk.start + segment.start))
            end = max(start, min(chunk.end, chunk.start + segment.end))
            words = segment.text
            if drop:
                kept = _drop_words(words, drop)
                drop = max(0, drop - len(words.split()))
                words = kept
            if words.strip():
                own.append(segment.model_copy(update={"start": start, "end": end, "text": words.strip()}))
        if not own and chunk_text:
            own = [TranscriptionSegment(start=chunk.own_start, end=chunk.end, text=chunk_text)]
        segments.extend(own)
    for index, segment in enumerate(segments):
        segment.id = index
    duration = parts[-1].chunk.end if parts else 0.0
    return Transcription(
        text=text,
        language=detected or language,
        duration=duration,
        segments=segments,
        usage=TranscriptionUsage(type="duration", seconds=seconds) if seconds else None,
        model=model,
        task=task,
        response_format=response_format,
        requests=sum(1 for part in parts if part.result is not None),
    )


# --------------------------------------------------------------------------------------------------
# Streaming
# --------------------------------------------------------------------------------------------------


@dataclass
class StreamParser:
    """Parses a transcription event stream line by line (pure; no I/O).

    Understands vLLM's ``transcription.chunk`` / ``translation.chunk`` objects (``choices[0].delta
    .content``, one ``finish_reason`` per server-side chunk, a final usage chunk with ``choices: []``)
    and OpenAI's ``transcript.text.delta`` / ``transcript.text.done`` events, so the same code reads
    both. A ``data: {"error": ...}`` frame raises :class:`~vllm_tasks.errors.StreamError`.
    """

    task: Task = "transcribe"
    model: str | None = None
    language: str | None = None
    duration: float | None = None
    response_format: ResponseFormat = "json"
    text: str = ""
    chunk: int = 0
    finish_reasons: list[str] = field(default_factory=list)
    usage: TranscriptionUsage | None = None
    done: bool = False
    _data: list[str] = field(default_factory=list)
    _final_texts: list[str] = field(default_factory=list)
    _piece_usage: TranscriptionUsage | None = None
    _starts_chunk: bool = False

    def feed(self, line: str) -> list[TranscriptionDelta]:
        """One line of the body (without its newline); returns the deltas it completes."""
        line = line.rstrip("\r")
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return []  # SSE comment / keep-alive
        name, _, value = line.partition(":")
        if name == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
        return []

    def feed_all(self, lines: Iterator[str] | Sequence[str]) -> list[TranscriptionDelta]:
        """Feed many lines (a whole recorded body); returns every delta."""
        out: list[TranscriptionDelta] = []
        for line in lines:
            out.extend(self.feed(line))
        return out

    def _dispatch(self) -> list[TranscriptionDelta]:
        if not self._data:
            return []
        payload = "\n".join(self._data)
        self._data = []
        if payload.strip() == "[DONE]":
            self.done = True
            return []
        try:
            event = json.loads(payload)
        except ValueError as error:
            raise StreamError(f"undecodable stream frame: {payload[:200]!r}", body=payload) from error
        if not isinstance(event, dict):
            return []
        if "error" in event:
            raise _stream_error(event)
        if isinstance(event.get("usage"), dict):
            self._piece_usage = TranscriptionUsage.model_validate(event["usage"])
        kind = event.get("type")
        if kind == "transcript.text.delta":
            return self._delta(str(event.get("delta") or ""), None)
        if kind == "transcript.text.done":
            self._final_texts.append(str(event.get("text") or ""))
            self.done = True
            return []
        if isinstance(kind, str) and kind.startswith("error"):
            raise _stream_error({"error": event})
        deltas: list[TranscriptionDelta] = []
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or {}
            content = delta.get("content") if isinstance(delta, dict) else None
            deltas.extend(self._delta(str(content or ""), choice.get("finish_reason")))
        return deltas

    def _delta(self, content: str, finish_reason: str | None) -> list[TranscriptionDelta]:
        chunk = self.chunk
        if content:
            if self.text and self._starts_chunk:
                content = " " + content.lstrip()  # vLLM starts each later chunk with a double space
            elif not self.text:
                content = content.lstrip()
            self.text += content
            self._starts_chunk = False
        if finish_reason:
            self.finish_reasons.append(str(finish_reason))
            self.chunk += 1
            self._starts_chunk = True
        if not content and not finish_reason:
            return []
        return [TranscriptionDelta(text=content, finish_reason=finish_reason, chunk=chunk)]

    def new_piece(self) -> None:
        """Start the stream of the next client-side piece (long audio): usage is summed over pieces,
        and the next piece's text is joined with one space."""
        self._dispatch()
        self._fold_usage()
        self.done = False
        if self.text:
            self._starts_chunk = True

    def _fold_usage(self) -> None:
        piece, self._piece_usage = self._piece_usage, None
        if piece is None:
            return
        if self.usage is None:
            self.usage = piece
            return
        summed = {}
        for name in ("seconds", "prompt_tokens", "completion_tokens", "total_tokens"):
            a, b = getattr(self.usage, name), getattr(piece, name)
            summed[name] = None if a is None and b is None else (a or 0) + (b or 0)
        self.usage = self.usage.model_copy(update=summed)

    def finish(self) -> Transcription:
        """The final result (call after the last line); handles a stream cut before ``[DONE]``."""
        self._dispatch()
        self._fold_usage()
        text = merge_texts(self._final_texts, dedupe=False) if self._final_texts else self.text
        return Transcription(
            text=clean_text(text),
            language=self.language,
            duration=self.duration,
            usage=self.usage,
            model=self.model,
            task=self.task,
            response_format=self.response_format,
            finish_reasons=list(self.finish_reasons),
        )


def _stream_error(event: Mapping[str, Any]) -> StreamError:
    error = event.get("error")
    if isinstance(error, dict):
        message = str(error.get("message") or error)
        code = error.get("code")
        return StreamError(message, body=dict(event), code=code if isinstance(code, int) else None)
    return StreamError(str(error), body=dict(event))


# --------------------------------------------------------------------------------------------------
# Operations
# --------------------------------------------------------------------------------------------------


def _chunking_options(chunking: Chunking) -> ChunkingOptions:
    if isinstance(chunking, ChunkingOptions):
        return chunking
    if chunking not in ("auto", "server", "client"):
        raise InvalidInputError("chunking", chunking, "unknown mode", "Use 'auto', 'server' or 'client'.")
    return ChunkingOptions(mode=chunking)


def load_source(audio: audio_io.AudioInput, timeout: TimeoutLike) -> Operation[audio_io.AudioSource]:
    """Resolve an input; an http(s) URL is downloaded (without the client's API key)."""
    if audio_io.is_url(audio):
        url = str(audio)
        seconds = timeout if isinstance(timeout, int | float) else 60.0
        response = yield Fetch(url, timeout=float(seconds))
        if not isinstance(response, httpx.Response):
            raise TypeError("Fetch must return an httpx.Response")
        if response.status_code >= 400:
            raise AudioDecodeError(url, f"download failed with HTTP {response.status_code}")
        return audio_io.from_url_bytes(url, response.content)
    return audio_io.resolve(audio)


def transcribe_operation(
    audio: audio_io.AudioInput,
    params: SpeechParams,
    *,
    task: Task = "transcribe",
    client_model: str | None = None,
    chunking: Chunking = "auto",
    prepare: audio_io.PrepareMode = "auto",
) -> Operation[Transcription]:
    """Transcribe (or translate) one input: one request, or client-side chunks sent concurrently."""
    validate(params, task=task, stream=False)
    options = _chunking_options(chunking)
    # The input is read (and decoded, unless prepare="never") first: a bad one fails before any request.
    source = yield from load_source(audio, params.timeout)
    chunked = _should_chunk(source, options, prepare)
    upload = None if chunked else audio_io.prepare_upload(source, prepare)
    info: ServerInfo = yield GetServerInfo()
    check_server(params, info)
    model = resolve_model(info, params.model, client_model)
    if upload is None:
        result = yield from _chunked(source, params, options, task=task, model=model)
        return result
    fmt = server_format(params.response_format)
    if fmt == "verbose_json" and (upload.duration or 0) > SERVER_CHUNK_SECONDS:
        logger.warning(
            "%s: verbose_json on %.0f s of audio with server-side chunking: vLLM drops the pieces in "
            "which the model emitted no timestamps; use chunking='auto' for complete segments",
            source.name,
            upload.duration,
        )
    response = yield build_request(params, upload, task=task, model=model, fmt=fmt)
    return parse_response(
        response,
        task=task,
        model=model,
        response_format=params.response_format,
        language=params.language,
        duration=upload.duration,
    )


def _should_chunk(source: audio_io.AudioSource, options: ChunkingOptions, prepare: str) -> bool:
    if options.mode == "server" or prepare == "never":
        return False
    if options.mode == "client":
        audio_io.info(source)  # raises for undecodable input
        return True
    if source.samples is None and not audio_io.have_decoder():
        return False  # cannot measure it: the server decides (and splits)
    meta = audio_io.info(source)
    size = source.size()
    return meta.duration > SERVER_CHUNK_SECONDS or (size is not None and size > options.size_limit)


def _chunked(
    source: audio_io.AudioSource,
    params: SpeechParams,
    options: ChunkingOptions,
    *,
    task: Task,
    model: str | None,
) -> Operation[Transcription]:
    fmt = server_format(params.response_format)
    limit = options.segment_max_seconds if fmt == "verbose_json" else options.max_seconds
    search = min(options.search_seconds, limit / 3)
    chunks = audio_io.iter_chunks(
        audio_io.iter_samples(source),
        max_seconds=limit,
        search_seconds=search,
        overlap_seconds=min(options.overlap_seconds, limit / 4),
    )
    parts: list[ChunkResult] = []
    sent = 0
    wave_size = options.concurrency * 2  # chunks decoded ahead: bounds memory for very long files
    while True:
        wave = [chunk for _, chunk in zip(range(wave_size), chunks, strict=False)]
        if not wave:
            break
        to_send = [chunk for chunk in wave if not chunk.silent]
        uploads = {chunk.index: _chunk_upload(source, chunk) for chunk in to_send}
        requests = [build_request(params, uploads[c.index], task=task, model=model, fmt=fmt) for c in to_send]
        responses = (yield Parallel(requests, options.concurrency)) if requests else []
        sent += len(requests)
        results: dict[int, Transcription] = {}
        for chunk, response in zip(to_send, responses, strict=True):
            results[chunk.index] = parse_response(
                response,
                task=task,
                model=model,
                response_format=params.response_format,
                language=params.language,
                duration=chunk.end - chunk.start,
            )
        # whisper-base sometimes stops emitting timestamp tokens: vLLM's verbose_json then drops the
        # text after the last timestamp pair (or all of it). Where speech goes on after the last
        # segment, ask again with json for the whole text and give the rest a segment of its own.
        missing = [c for c in to_send if fmt == "verbose_json" and text_missing(c, results[c.index])]
        if missing:
            retry = [
                build_request(params, uploads[c.index], task=task, model=model, fmt="json") for c in missing
            ]
            sent += len(retry)
            for chunk, response in zip(missing, (yield Parallel(retry, options.concurrency)), strict=True):
                full = parse_response(
                    response, task=task, model=model, response_format=params.response_format
                )
                results[chunk.index] = complete_segments(
                    results[chunk.index], full.text, chunk.end - chunk.start
                )
        # Keep the timings only: the samples of finished pieces are dropped (bounded memory).
        parts.extend(
            ChunkResult(replace(chunk, samples=_NO_SAMPLES), results.get(chunk.index)) for chunk in wave
        )
    merged = merge_chunks(
        parts,
        task=task,
        model=model,
        response_format=params.response_format,
        language=params.language,
        overlap_seconds=options.overlap_seconds,
    )
    return merged.model_copy(update={"requests": sent})


def _chunk_upload(source: audio_io.AudioSource, chunk: audio_io.AudioChunk) -> audio_io.Upload:
    content, ext, mime = audio_io.encode(chunk.samples)
    stem = source.filename.rsplit(".", 1)[0] or "audio"
    return audio_io.Upload(f"{stem}-{chunk.index:04d}.{ext}", content, mime, len(chunk.samples) / 16000)


def stream_operation(
    audio: audio_io.AudioInput,
    params: SpeechParams,
    *,
    task: Task = "transcribe",
    client_model: str | None = None,
    chunking: Chunking = "auto",
    prepare: audio_io.PrepareMode = "auto",
) -> Operation[tuple[Any, StreamParser, Iterator[Request]]]:
    """Open a transcription stream: returns ``(line iterator, parser, more requests)``.

    Audio within vLLM's limits goes in one request (vLLM splits audio over 30 s and streams each piece
    in turn). Longer audio (over 10 minutes, vLLM's decode limit, or over the upload size limit) and
    ``chunking="client"`` are split client-side without overlap (streamed text cannot be taken back);
    ``more`` then yields the request of each further piece, built (decoded, encoded) only when the
    client reaches it.
    """
    validate(params, task=task, stream=True)
    options = _chunking_options(chunking)
    source = yield from load_source(audio, params.timeout)
    pieces = _stream_pieces(source, options, prepare)  # a bad input fails before any request
    upload = None if pieces is not None else audio_io.prepare_upload(source, prepare)
    info: ServerInfo = yield GetServerInfo()
    check_server(params, info)
    model = resolve_model(info, params.model, client_model)
    duration: float | None
    if pieces is None:
        assert upload is not None
        requests: Iterator[Request] = iter(
            [build_request(params, upload, task=task, model=model, fmt="json", stream=True)]
        )
        duration = upload.duration
    else:
        requests = (
            build_request(params, _chunk_upload(source, c), task=task, model=model, fmt="json", stream=True)
            for c in pieces
            if not c.silent
        )
        duration = audio_io.info(source).duration or None
    first = next(requests, None)
    if first is None:  # nothing but silence
        first = build_request(
            params, audio_io.prepare_upload(source, prepare), task=task, model=model, fmt="json", stream=True
        )
    lines = yield Stream(first)
    parser = StreamParser(
        task=task,
        model=model,
        language=params.language,
        duration=duration,
        response_format=params.response_format,
    )
    return lines, parser, requests


STREAM_LIMIT_SECONDS = 600.0
"""vLLM's ``VLLM_MAX_AUDIO_DECODE_DURATION_S`` default: a longer upload is refused (400)."""


def _stream_pieces(
    source: audio_io.AudioSource, options: ChunkingOptions, prepare: str
) -> Iterator[audio_io.AudioChunk] | None:
    """Client-side pieces for a stream, or ``None`` to send the file whole."""
    if options.mode == "server" or prepare == "never":
        return None
    if options.mode != "client":
        if source.samples is None and not audio_io.have_decoder():
            return None
        meta = audio_io.info(source)
        size = source.size()
        if meta.duration <= STREAM_LIMIT_SECONDS and (size is None or size <= options.size_limit):
            return None
    else:
        audio_io.info(source)  # raises for undecodable input
    return audio_io.iter_chunks(
        audio_io.iter_samples(source),
        max_seconds=options.max_seconds,
        search_seconds=min(options.search_seconds, options.max_seconds / 3),
        overlap_seconds=0.0,
    )
