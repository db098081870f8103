"""Speech-to-text (``/v1/audio/transcriptions`` and ``/v1/audio/translations``): pure code.

Request building, chunk planning, response parsing, merging and the stream parser; no I/O. The
client's flows (``vllm_tasks/_async/audio.py``) call these and run the CPU-bound ones (decoding,
resampling, encoding) through :func:`~vllm_tasks.offload.async_offload`.

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

import itertools
import json
import logging
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import httpx
import numpy as np
from pydantic import ValidationError

from . import audio as audio_io
from . import defaults, gates
from .calls import CallOptions
from .errors import InvalidInputError, StreamError, UnexpectedResponse
from .responses import json_object, malformed, server_error
from .tasks import TaskName
from .transport import Request
from .types.audio import (
    ResponseFormat,
    Transcription,
    TranscriptionDelta,
    TranscriptionSegment,
    TranscriptionUsage,
)
from .types.server import ServerInfo
from .validation import positive_int
from .views import Attachment

logger = logging.getLogger("vllm_tasks")

Task = Literal["transcribe", "translate"]
PATHS: dict[Task, str] = {"transcribe": "/v1/audio/transcriptions", "translate": "/v1/audio/translations"}
TASK_NAMES: dict[Task, TaskName] = {"transcribe": "transcription", "translate": "translation"}
RESPONSE_FORMATS = ("json", "text", "verbose_json", "srt", "vtt")
SERVER_CHUNK_SECONDS = 30.0
"""Whisper's window: vLLM splits anything longer server-side."""

ChunkingMode = Literal["auto", "server", "client"]
ServerFormat = Literal["json", "verbose_json"]
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

    Raises:
        InvalidInputError: an unknown mode, a limit outside (0, 30], a negative overlap, a
            non-positive search window or concurrency.

    Examples:
        >>> await client.transcribe("talk.mp3", chunking=ChunkingOptions(concurrency=4))
    """

    mode: ChunkingMode = "auto"
    max_seconds: float = defaults.AUDIO_CHUNK_SECONDS
    segment_max_seconds: float = defaults.AUDIO_SEGMENT_CHUNK_SECONDS
    search_seconds: float = defaults.AUDIO_CUT_SEARCH_SECONDS
    overlap_seconds: float = defaults.AUDIO_CHUNK_OVERLAP_SECONDS
    concurrency: int = defaults.AUDIO_CONCURRENCY
    size_limit: int = defaults.AUDIO_SIZE_LIMIT

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
        positive_int("concurrency", self.concurrency)


Chunking = ChunkingMode | ChunkingOptions


def chunking_options(chunking: Chunking) -> ChunkingOptions:
    """The options for a ``chunking`` argument (a mode name or the options themselves).

    Raises:
        InvalidInputError: an unknown mode.

    Examples:
        >>> chunking_options("server").mode
        'server'
    """
    if isinstance(chunking, ChunkingOptions):
        return chunking
    if chunking not in ("auto", "server", "client"):
        raise InvalidInputError("chunking", chunking, "unknown mode", "Use 'auto', 'server' or 'client'.")
    return ChunkingOptions(mode=chunking)


@dataclass(frozen=True)
class SpeechParams:
    """The task's form fields of one transcription/translation request, as the caller gave them.

    The call's model, ``extra_body``, ``extra_headers`` and ``timeout`` travel apart, in
    :class:`~vllm_tasks.calls.CallOptions`.
    """

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
    stream_include_usage: bool | None = None


# --------------------------------------------------------------------------------------------------
# Request building
# --------------------------------------------------------------------------------------------------


def validate(params: SpeechParams, *, task: Task, stream: bool) -> None:
    """Client-side checks that need no server.

    Raises:
        InvalidInputError: unknown ``response_format``, beam search with streaming, ``n`` without beam
            search, a format a stream cannot produce, bad ``timestamp_granularities``.

    Examples:
        >>> validate(SpeechParams(response_format="srt"), task="transcribe", stream=False)
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
        _validate_granularities(params.timestamp_granularities, task)
    if params.stream_include_usage and not stream:
        raise InvalidInputError("stream_include_usage", True, "needs a stream (vLLM answers 400)", "")


def _validate_granularities(granularities: Sequence[str], task: Task) -> None:
    if isinstance(granularities, str):
        raise InvalidInputError("timestamp_granularities", granularities, "must be a list", "")
    if task == "translate":
        raise InvalidInputError("timestamp_granularities", granularities, "translations have none", "")
    for item in granularities:
        if item not in ("word", "segment"):
            raise InvalidInputError("timestamp_granularities", item, "unknown", "Use 'word' or 'segment'.")


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


def server_format(response_format: ResponseFormat) -> ServerFormat:
    """What to ask vLLM for: segments for verbose_json/srt/vtt, else json (``text`` also answers JSON).

    Examples:
        >>> server_format("srt")
        'verbose_json'
    """
    return "verbose_json" if response_format in ("verbose_json", "srt", "vtt") else "json"


def form_fields(
    params: SpeechParams,
    call: CallOptions,
    *,
    model: str | None,
    fmt: ServerFormat,
    stream: bool = False,
) -> dict[str, str | list[str]]:
    """The multipart form fields (strings; ``timestamp_granularities[]`` with its brackets).

    ``call.extra_body`` is merged last (dicts sent as JSON).

    Examples:
        >>> form_fields(SpeechParams(language="en"), CallOptions(), model="whisper", fmt="json")
        {'model': 'whisper', 'language': 'en', 'response_format': 'json'}
    """
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
    if call.extra_body:
        fields.update(call.extra_body)
    return {key: _form_value(value) for key, value in fields.items() if value is not None}


def build_request(
    params: SpeechParams,
    call: CallOptions,
    upload: audio_io.Upload,
    *,
    task: Task,
    model: str | None,
    fmt: ServerFormat,
    stream: bool = False,
) -> Request:
    """The multipart ``Request`` for one upload.

    Examples:
        >>> params, call = SpeechParams(language="en"), CallOptions()
        >>> build_request(params, call, upload, task="transcribe", model="w", fmt="json").path
        '/v1/audio/transcriptions'
    """
    return Request(
        "POST",
        PATHS[task],
        data=form_fields(params, call, model=model, fmt=fmt, stream=stream),
        files={"file": (upload.filename, upload.content, upload.content_type)},
        headers=call.extra_headers,
        timeout=call.timeout,
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
        APIStatusError: the body is vLLM's error object (the server's error, with its message).
        UnexpectedResponse: the body is not an object with a ``text`` string, or a field has the wrong
            type (``segments``, ``usage``, ``language``, ``duration``, ...).
    """
    error = server_error(httpx.Response(200, json=body), body, task=TASK_NAMES[task]) if body else None
    if error is not None:
        raise error
    if not isinstance(body, dict) or not isinstance(body.get("text"), str):
        raise UnexpectedResponse(f"unexpected transcription response (no `text` string): {str(body)[:200]}")
    data = dict(body)
    raw_segments = data.pop("segments", None) or []
    usage_body = data.pop("usage", None)
    data.pop("task", None)
    try:
        if not isinstance(raw_segments, list):
            raise UnexpectedResponse(f"`segments` is not a list: {str(raw_segments)[:100]}")
        segments = [TranscriptionSegment.model_validate(s) for s in raw_segments]
        for segment in segments:
            segment.text = segment.text.strip()
        usage = TranscriptionUsage.model_validate(usage_body) if usage_body is not None else None
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
    except ValidationError as invalid:
        detail = str(invalid).replace("\n", " ")[:300]
        raise UnexpectedResponse(f"unexpected transcription response: {detail}") from None


def parse_response(response: httpx.Response, **kwargs: Any) -> Transcription:
    """:func:`parse_body` of a response (its JSON body, checked with
    :func:`~vllm_tasks.responses.json_object`).

    Raises:
        UnexpectedResponse: not a JSON transcription (a redirect, an empty body, an HTML page, a
            body of the wrong shape), naming the status and URL.
        APIStatusError: the body is vLLM's error object.
    """
    task: Task = kwargs.get("task", "transcribe")
    path = PATHS[task]
    payload = json_object(response, path, task=TASK_NAMES[task])
    try:
        return parse_body(payload, **kwargs)
    except UnexpectedResponse as error:
        raise malformed(response, path, error.message) from None


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
    timestamps) becomes one segment spanning the chunk. Usage seconds are those of the whole audio,
    rounded up, as vLLM reports for one file (the pieces overlap, and the server rounds each one up).
    """
    # At most the words the overlap can hold (~3 words/s, at least 1): identical phrases that really
    # follow each other ("Thank you. Thank you.") are kept.
    max_overlap = math.ceil(overlap_seconds * 3) if overlap_seconds > 0 else 0
    text = ""
    segments: list[TranscriptionSegment] = []
    reported = False
    detected: str | None = None
    for part in parts:
        chunk, result = part.chunk, part.result
        if result is None:
            continue
        detected = detected or result.language
        reported = reported or (result.usage is not None and result.usage.seconds is not None)
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
        usage=TranscriptionUsage(type="duration", seconds=math.ceil(duration)) if reported else None,
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
    events: int = 0
    """JSON events read so far (a body with none was not an event stream)."""
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
            raise StreamError(f"a stream frame that is not a JSON object: {payload[:200]!r}", body=payload)
        self.events += 1
        if "error" in event or event.get("object") == "error":
            raise _stream_error(event if "error" in event else {"error": event})
        usage = event.get("usage")
        if usage is not None:
            try:
                self._piece_usage = TranscriptionUsage.model_validate(usage)
            except ValidationError:
                message = f"a stream frame with invalid usage: {payload[:200]!r}"
                raise StreamError(message, body=event) from None
        kind = event.get("type")
        if kind == "transcript.text.delta":
            return self._delta(_text_field(event, "delta", payload), None)
        if kind == "transcript.text.done":
            self._final_texts.append(_text_field(event, "text", payload))
            self.done = True
            return []
        if isinstance(kind, str) and kind.startswith("error"):
            raise _stream_error({"error": event})
        return self._choices(event, payload)

    def _choices(self, event: Mapping[str, Any], payload: str) -> list[TranscriptionDelta]:
        choices = event.get("choices", [])
        if not isinstance(choices, list):
            raise StreamError(f"a stream frame whose `choices` is not a list: {payload[:200]!r}", body=event)
        deltas: list[TranscriptionDelta] = []
        for choice in choices:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            content = delta.get("content") if isinstance(delta, dict) else None
            finish = choice.get("finish_reason") if isinstance(choice, dict) else None
            if not isinstance(delta, dict) or not isinstance(content, str | None):
                raise StreamError(f"a stream frame without a text delta: {payload[:200]!r}", body=event)
            if not isinstance(finish, str | None):
                raise StreamError(f"a stream frame with finish_reason={finish!r}", body=event)
            deltas.extend(self._delta(content or "", finish))
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
        and the next piece's text is joined with one space.

        Raises:
            StreamError: the previous piece's stream ended before ``[DONE]``.
        """
        self._dispatch()
        self._check_complete()
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

    def _check_complete(self) -> None:
        if self.done:
            return
        if not self.events:
            message = (
                "the transcription stream ended without any event: not an event stream (a proxy or "
                "load balancer answered instead of vLLM?)"
            )
        else:
            message = (
                f"the transcription stream ended before [DONE]: the text is truncated after "
                f"{len(self.text)} characters (the connection was closed early)"
            )
        raise StreamError(message, body={"text": self.text})

    def finish(self) -> Transcription:
        """The final result (call after the last line).

        Raises:
            StreamError: the stream ended before ``[DONE]`` (or OpenAI's ``transcript.text.done``):
                the text would be truncated. ``body["text"]`` holds the text received.
        """
        self._dispatch()
        self._check_complete()
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
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        return StreamError(message, body=dict(event), code=code)
    return StreamError(str(error), body=dict(event))


def _text_field(event: Mapping[str, Any], key: str, payload: str) -> str:
    value = event.get(key)
    if not isinstance(value, str | None):
        raise StreamError(f"a stream frame whose `{key}` is not text: {payload[:200]!r}", body=dict(event))
    return value or ""


# --------------------------------------------------------------------------------------------------
# Planning client-side chunks (CPU-bound helpers: the async client offloads them)
# --------------------------------------------------------------------------------------------------


def should_split(
    source: audio_io.AudioSource, options: ChunkingOptions, prepare: str, *, limit_seconds: float
) -> bool:
    """Whether to split ``source`` client-side: longer than ``limit_seconds`` or over the size limit.

    Reads the header (``chunking="client"`` too, so that an undecodable input fails here, before any
    request). Undecodable without a decoder installed: sent whole (the server decides).

    Raises:
        AudioDecodeError: the input cannot be decoded.

    Examples:
        >>> should_split(source, ChunkingOptions(), "auto", limit_seconds=SERVER_CHUNK_SECONDS)
        True
    """
    if options.mode == "server" or prepare == "never":
        return False
    if options.mode == "client":
        audio_io.info(source)  # raises for undecodable input
        return True
    if source.samples is None and not audio_io.have_decoder():
        return False  # cannot measure it: the server decides (and splits)
    meta = audio_io.info(source)
    size = source.size()
    return meta.duration > limit_seconds or (size is not None and size > options.size_limit)


def plan_chunks(
    source: audio_io.AudioSource, options: ChunkingOptions, *, max_seconds: float, overlap_seconds: float
) -> Iterator[audio_io.AudioChunk]:
    """The client-side pieces of ``source``, lazily: decoding happens as the iterator is advanced
    (advance it off the event loop, e.g. with :func:`next_wave`).

    Examples:
        >>> chunks = plan_chunks(source, ChunkingOptions(), max_seconds=30.0, overlap_seconds=0.5)
    """
    return audio_io.iter_chunks(
        audio_io.iter_samples(source),
        max_seconds=max_seconds,
        search_seconds=min(options.search_seconds, max_seconds / 3),
        overlap_seconds=min(overlap_seconds, max_seconds / 4),
    )


def chunk_seconds(options: ChunkingOptions, fmt: ServerFormat) -> float:
    """The longest piece for this server format (shorter when segments are wanted)."""
    return options.segment_max_seconds if fmt == "verbose_json" else options.max_seconds


def chunk_upload(source: audio_io.AudioSource, chunk: audio_io.AudioChunk) -> audio_io.Upload:
    """The upload of one piece: its samples encoded (FLAC, else WAV), named ``<stem>-NNNN.<ext>``."""
    content, ext, mime = audio_io.encode(chunk.samples)
    stem = source.filename.rsplit(".", 1)[0] or "audio"
    rate = audio_io.TARGET_RATE
    return audio_io.Upload(f"{stem}-{chunk.index:04d}.{ext}", content, mime, len(chunk.samples) / rate)


@dataclass(frozen=True)
class ChunkUpload:
    """A piece and what to upload for it (``None``: silent, not sent)."""

    chunk: audio_io.AudioChunk
    upload: audio_io.Upload | None


def next_wave(
    source: audio_io.AudioSource, chunks: Iterator[audio_io.AudioChunk], size: int
) -> list[ChunkUpload]:
    """Decode the next ``size`` pieces and encode the uploads of the audible ones (CPU-bound).

    Waves bound memory for very long files; an empty list means the input is done.

    Examples:
        >>> wave = await async_offload(next_wave, source, chunks, 16)
    """
    return [
        ChunkUpload(chunk, None if chunk.silent else chunk_upload(source, chunk))
        for chunk in itertools.islice(chunks, size)
    ]


def audible(wave: Sequence[ChunkUpload]) -> list[tuple[audio_io.AudioChunk, audio_io.Upload]]:
    """The pieces of a wave that are sent, with their uploads."""
    return [(item.chunk, item.upload) for item in wave if item.upload is not None]


def parse_pieces(
    sent: Sequence[tuple[audio_io.AudioChunk, audio_io.Upload]],
    responses: Sequence[httpx.Response],
    params: SpeechParams,
    *,
    task: Task,
    model: str | None,
) -> dict[int, Transcription]:
    """The transcriptions of sent pieces, by piece index (each piece's duration filled in)."""
    return {
        chunk.index: parse_response(
            response,
            task=task,
            model=model,
            response_format=params.response_format,
            language=params.language,
            duration=chunk.end - chunk.start,
        )
        for (chunk, _), response in zip(sent, responses, strict=True)
    }


def pieces_missing_text(
    sent: Sequence[tuple[audio_io.AudioChunk, audio_io.Upload]], results: Mapping[int, Transcription]
) -> list[tuple[audio_io.AudioChunk, audio_io.Upload]]:
    """The ``verbose_json`` pieces whose segments lost text (:func:`text_missing`; CPU-bound).

    whisper-base sometimes stops emitting timestamp tokens: vLLM's verbose_json then drops the text
    after the last timestamp pair (or all of it). Such pieces are asked again with json.
    """
    return [(chunk, upload) for chunk, upload in sent if text_missing(chunk, results[chunk.index])]


def complete_pieces(
    results: dict[int, Transcription],
    missing: Sequence[tuple[audio_io.AudioChunk, audio_io.Upload]],
    responses: Sequence[httpx.Response],
    params: SpeechParams,
    *,
    task: Task,
    model: str | None,
) -> None:
    """Give each piece in ``missing`` the whole text of its json answer (:func:`complete_segments`)."""
    for (chunk, _), response in zip(missing, responses, strict=True):
        full = parse_response(response, task=task, model=model, response_format=params.response_format)
        results[chunk.index] = complete_segments(results[chunk.index], full.text, chunk.end - chunk.start)


def wave_results(wave: Sequence[ChunkUpload], results: Mapping[int, Transcription]) -> list[ChunkResult]:
    """The wave's pieces with their transcriptions; only the timings are kept (samples dropped)."""
    return [
        ChunkResult(replace(item.chunk, samples=_NO_SAMPLES), results.get(item.chunk.index)) for item in wave
    ]


def log_server_chunking(name: str, fmt: ServerFormat, duration: float | None) -> None:
    """Warn (log) that vLLM drops segments of long audio it splits itself."""
    if fmt == "verbose_json" and (duration or 0) > SERVER_CHUNK_SECONDS:
        logger.warning(
            "%s: verbose_json on %.0f s of audio with server-side chunking: vLLM drops the pieces in "
            "which the model emitted no timestamps; use chunking='auto' for complete segments",
            name,
            duration,
        )


# --------------------------------------------------------------------------------------------------
# Streams of client-side pieces
# --------------------------------------------------------------------------------------------------


def stream_requests(
    source: audio_io.AudioSource,
    options: ChunkingOptions,
    params: SpeechParams,
    call: CallOptions,
    *,
    task: Task,
    model: str | None,
) -> Iterator[Request]:
    """The streamed requests of ``source``'s audible pieces, without overlap (streamed text cannot be
    taken back), built lazily: advancing the iterator decodes and encodes the next piece (CPU-bound:
    advance it with :func:`next_request` off the event loop).

    Examples:
        >>> requests = stream_requests(source, ChunkingOptions(), SpeechParams(), CallOptions(),
        ...                            task="transcribe", model="whisper-base")
    """
    chunks = plan_chunks(source, options, max_seconds=options.max_seconds, overlap_seconds=0.0)
    for chunk in chunks:
        if not chunk.silent:
            upload = chunk_upload(source, chunk)
            yield build_request(params, call, upload, task=task, model=model, fmt="json", stream=True)


def next_request(requests: Iterator[Request]) -> Request | None:
    """The next request of a lazy iterator (``None`` when done); building it may decode and encode.

    Examples:
        >>> request = await async_offload(next_request, requests)
    """
    return next(requests, None)


def keep_audio(result: Transcription, source: audio_io.AudioSource, given: object) -> Transcription:
    """Let ``result`` refer to the audio it was made from, for its notebook player; returns ``result``.

    Kept by reference only: the path of a file (absolute, as a string), or the caller's own ``bytes``
    object when it is at most ``VIEW_MAX_MEDIA_BYTES`` (no copy; a larger one is not kept alive for a
    view that would not embed it). File objects, URLs and arrays are not kept: ``result.player(audio)``
    takes them. Never pickled nor dumped (:class:`vllm_tasks.views.Attachment`).

    Examples:
        >>> keep_audio(result, audio_io.resolve("talk.wav"), "talk.wav").player()
    """
    if source.path is not None:
        result._audio = Attachment(str(source.path.absolute()))
    elif type(given) is bytes and len(given) <= defaults.VIEW_MAX_MEDIA_BYTES:
        result._audio = Attachment(given)
    return result
