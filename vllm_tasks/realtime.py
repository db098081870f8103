"""Realtime transcription over vLLM's WebSocket route ``/v1/realtime``: pure code, no I/O.

The protocol (vLLM >= 0.16.0, ``vllm/entrypoints/speech_to_text/realtime/`` in 0.32):

1. the server sends ``{"type": "session.created", "id", "created"}`` once the socket is open;
2. the client sends ``{"type": "session.update", "model"}`` (the model must be named: a commit before it
   is refused with ``model_not_validated``), then ``{"type": "input_audio_buffer.commit"}``, which starts
   the transcription;
3. the client sends the audio as ``{"type": "input_audio_buffer.append", "audio": <base64 PCM16>}``
   messages (16 kHz, mono, little-endian), then ``{"type": "input_audio_buffer.commit", "final": true}``;
4. the server sends ``{"type": "transcription.delta", "delta"}`` as text is decoded (while audio still
   arrives) and ``{"type": "transcription.done", "text", "usage"}`` once the audio has ended; the socket
   stays open (the client closes it).

An error arrives as ``{"type": "error", "error": <message>, "code": <code>}`` and does not close the
session. Here: the events the client sends, the audio cut into PCM16 pieces, the server's events parsed
(:class:`RealtimeParser`) and its errors mapped to the SDK's tree as the HTTP routes' errors are.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
import numpy as np
import numpy.typing as npt

from . import audio as audio_io
from .config import ClientSettings
from .errors import (
    APIError,
    APIStatusError,
    BadRequestError,
    EndpointNotServed,
    InternalServerError,
    InvalidInputError,
    NotFoundError,
    StreamError,
    UnexpectedResponse,
)
from .server_errors import error_from_response
from .types.audio import Transcription, TranscriptionDelta, TranscriptionUsage

PATH = "/v1/realtime"
RATE = audio_io.TARGET_RATE
"""The sample rate vLLM reads the appended PCM16 at."""
CHUNK_SECONDS = 0.5
"""Audio per ``input_audio_buffer.append`` message by default (16,000 bytes of PCM16)."""
MAX_CHUNK_SECONDS = 60.0
"""The most audio one message may carry: uvicorn refuses WebSocket messages over 16 MiB (about 6 minutes
of PCM16 in base64)."""
HOW_TO_SERVE = (
    "serve a realtime speech model on vLLM >= 0.16.0 (e.g. `vllm serve "
    "mistralai/Voxtral-Mini-4B-Realtime-2602 "
    '--tokenizer-mode mistral`, or Qwen3-ASR with `--hf-overrides \'{"architectures": '
    '["Qwen3ASRRealtimeGeneration"]}\'`); use transcribe_stream() with other speech models'
)

SourceKind = Literal["audio", "chunks", "async_chunks"]
Event = TranscriptionDelta | Transcription
RealtimeSource = audio_io.AudioInput | Iterable[Any] | AsyncIterable[Any]
"""What ``transcribe_realtime`` reads: anything ``transcribe`` takes, or an (async) iterable of chunks."""
Pieces = Iterator[bytes] | AsyncIterator[bytes]
"""The PCM16 pieces of a source, read lazily."""


# ------------------------------------------------------------------------------------------ requests


def url(settings: ClientSettings) -> str:
    """The route's ``ws://`` (``wss://`` for https) URL, without the base URL's credentials (they go in the
    ``Authorization`` header, as for HTTP requests)."""
    base = httpx.URL(settings.display_url)
    scheme = "wss" if base.scheme == "https" else "ws"
    return str(base.copy_with(scheme=scheme, path=base.path.rstrip("/") + PATH))


def headers(settings: ClientSettings, extra: Mapping[str, str] | None) -> dict[str, str]:
    """The handshake's headers: the client's (``User-Agent``, its headers, the API key as a Bearer token or
    the URL's credentials as Basic auth) and the call's ``extra_headers``."""
    return {**settings.request_headers, **(extra or {})}


def session_update(model: str) -> str:
    """The ``session.update`` event that names the model."""
    return json.dumps({"type": "session.update", "model": model})


def commit(*, final: bool) -> str:
    """``input_audio_buffer.commit``: starts the transcription; ``final=True`` ends the audio."""
    event: dict[str, Any] = {"type": "input_audio_buffer.commit"}
    if final:
        event["final"] = True
    return json.dumps(event)


def append(pcm: bytes) -> str:
    """``input_audio_buffer.append`` with ``pcm`` (PCM16 mono at 16 kHz) in base64."""
    return json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode("ascii")})


def timeouts(timeout: float | httpx.Timeout | None) -> tuple[float | None, float | None]:
    """``(open, read)`` seconds from a call's timeout: opening the socket (the connect part of an
    ``httpx.Timeout``, at most 10 s of a number), and each wait for the server once the audio is sent."""
    if isinstance(timeout, httpx.Timeout):
        return timeout.connect, timeout.read
    if timeout is None:
        return None, None
    return min(float(timeout), 10.0), float(timeout)


def pace_wait(pace: float | None, sent_seconds: float, elapsed: float) -> float:
    """Seconds to wait before the next piece, so that audio goes out at most ``pace`` times faster than
    real time (``None``: no wait).

    Examples:
        >>> pace_wait(2.0, sent_seconds=3.0, elapsed=1.0)
        0.5
    """
    if pace is None:
        return 0.0
    return max(0.0, sent_seconds / pace - elapsed)


# ----------------------------------------------------------------------------------------- the audio


def source_kind(source: object) -> SourceKind:
    """Whether ``source`` is audio ``transcribe`` reads (a path, bytes, a file object, ``(array, rate)``,
    an http(s) URL), an iterable of PCM chunks, or an async iterable of them.

    Raises:
        InvalidInputError: a bare numpy array (its sample rate is unknown) or a string or bytes-like value
            in an iterable's place.
    """
    if isinstance(source, np.ndarray):
        raise InvalidInputError(
            "source",
            f"<array {source.shape}>",
            "is an array without its sample rate",
            "Pass (array, sample_rate), or an iterable of chunks with sample_rate=.",
        )
    if isinstance(source, str | bytes | bytearray | memoryview | tuple) or hasattr(source, "read"):
        return "audio"
    if hasattr(source, "__fspath__"):
        return "audio"
    if isinstance(source, AsyncIterable):
        return "async_chunks"
    if isinstance(source, Iterable):
        return "chunks"
    return "audio"  # refused by audio.resolve, naming the types it takes


def chunk_seconds(value: float) -> float:
    """``value`` checked as the audio per message: a number of seconds above 0 and at most 60."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_CHUNK_SECONDS:
        raise InvalidInputError(
            "chunk_seconds", value, f"must be seconds above 0 and at most {MAX_CHUNK_SECONDS:g}", "E.g. 0.5."
        )
    return float(value)


def pace_value(value: float | None) -> float | None:
    """``value`` checked as a pace: ``None``, or a positive finite number (1.0: real time)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise InvalidInputError(
            "pace", value, "must be a positive number or None", "E.g. pace=1.0 (real time)."
        )
    return float(value)


def pcm16(samples: npt.NDArray[np.float32]) -> bytes:
    """Mono float samples in -1..1 as PCM16 little-endian bytes: the inverse of vLLM's ``int16 / 32768``, so
    int16 audio arrives unchanged (rounded, clipped to the int16 range)."""
    return np.clip(np.round(samples * np.float32(32768.0)), -32768, 32767).astype("<i2").tobytes()


class ChunkReader:
    """Turns chunks of audio (as an iterator source gives them) into PCM16 pieces at 16 kHz, each at most
    ``chunk_seconds`` long; pure, with the resampler's state carried from chunk to chunk.

    A chunk is a numpy array (float in -1..1, or integers such as int16; 1-D mono, or 2-D frames x channels,
    mixed to mono) or bytes (PCM16 little-endian mono), at ``sample_rate``.

    Raises (from :meth:`feed`):
        InvalidInputError: a chunk of another type, shape or dtype, non-finite samples, bytes of an odd
            length.
    """

    def __init__(self, sample_rate: int, seconds: float) -> None:
        if isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate <= 0:
            raise InvalidInputError("sample_rate", sample_rate, "must be a positive int", "E.g. 16000.")
        audio_io.check_sample_rate("sample_rate", sample_rate)
        self.resampler = audio_io.Resampler(sample_rate)
        self.piece = max(1, round(chunk_seconds(seconds) * RATE))
        self.pending: npt.NDArray[np.float32] = np.zeros(0, dtype=np.float32)
        self.chunks = 0

    def feed(self, chunk: object) -> list[bytes]:
        """The whole pieces that ``chunk`` completes (the rest waits for the next chunk or :meth:`flush`)."""
        samples = self._samples(chunk)
        self.chunks += 1
        self.pending = np.concatenate([self.pending, self.resampler.process(samples)])
        count = len(self.pending) // self.piece
        pieces = [pcm16(self.pending[i * self.piece : (i + 1) * self.piece]) for i in range(count)]
        self.pending = self.pending[count * self.piece :]
        return pieces

    def flush(self) -> list[bytes]:
        """What is left, after the last chunk (an empty list when nothing is)."""
        rest = np.concatenate([self.pending, self.resampler.process(np.zeros(0, np.float32), final=True)])
        self.pending = np.zeros(0, dtype=np.float32)
        return [pcm16(rest[i : i + self.piece]) for i in range(0, len(rest), self.piece)]

    def pieces(self, chunks: Iterable[object]) -> Iterator[bytes]:
        """Every piece of an iterable of chunks, read lazily."""
        for chunk in chunks:
            yield from self.feed(chunk)
        yield from self.flush()

    async def async_pieces(self, chunks: AsyncIterable[object]) -> AsyncIterator[bytes]:
        """Every piece of an async iterable of chunks, read lazily."""
        async for chunk in chunks:
            for piece in self.feed(chunk):
                yield piece
        for piece in self.flush():
            yield piece

    def _samples(self, chunk: object) -> npt.NDArray[np.float32]:
        field_name = f"source[{self.chunks}]"
        if isinstance(chunk, bytes | bytearray | memoryview):
            data = bytes(chunk)
            if len(data) % 2:
                raise InvalidInputError(
                    field_name,
                    f"<{len(data)} bytes>",
                    "is not PCM16 (an odd number of bytes)",
                    "Send whole samples.",
                )
            return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
        if not isinstance(chunk, np.ndarray):
            raise InvalidInputError(
                field_name,
                type(chunk).__name__,
                "is not an audio chunk",
                "Yield numpy arrays (float32 in -1..1 or int16) or PCM16 bytes.",
            )
        if chunk.ndim not in (1, 2):
            raise InvalidInputError(
                field_name, chunk.shape, "must be 1-D (mono) or 2-D (frames, channels)", ""
            )
        if np.issubdtype(chunk.dtype, np.integer):
            floats = chunk.astype(np.float32) / (float(np.iinfo(chunk.dtype).max) + 1.0)
        elif np.issubdtype(chunk.dtype, np.floating):
            floats = chunk.astype(np.float32)
        else:
            raise InvalidInputError(field_name, chunk.dtype, "must hold integer or float samples", "")
        if not np.all(np.isfinite(floats)):
            raise InvalidInputError(field_name, "NaN/inf", "samples must be finite", "")
        return audio_io.to_mono(floats)


def audio_pieces(source: audio_io.AudioSource, seconds: float) -> Iterator[bytes]:
    """A whole input (decoded block by block, mono 16 kHz) as PCM16 pieces of ``seconds``; lazily, so a
    long file holds one decoded block in memory at a time.

    Raises:
        InvalidInputError: (``kind="audio_decode"``) the input cannot be decoded, or holds no samples.
    """
    reader = ChunkReader(RATE, seconds)
    count = 0
    for block in audio_io.iter_samples(source):
        for piece in reader.feed(block):
            count += 1
            yield piece
    for piece in reader.flush():
        count += 1
        yield piece
    if not count:
        raise InvalidInputError.audio_decode(source.name, "no audio samples")


# ------------------------------------------------------------------------------------------- answers


def handshake_error(status: int, response_headers: Mapping[str, str], body: bytes, ws_url: str) -> APIError:
    """The error for a refused handshake (the server answered HTTP instead of switching protocols).

    vLLM (uvicorn) answers 403 with an empty body when the route is not mounted (the model has no
    ``realtime`` task, or vLLM < 0.16.0), 401 ``{"error": "Unauthorized"}`` for a missing or wrong key;
    a proxy may answer 404 or anything else: mapped as the HTTP routes' answers are (a redirect is
    :class:`UnexpectedResponse`).
    """
    http_url = ws_url.replace("ws", "http", 1)
    if status == 403 and not body.strip():
        error = EndpointNotServed(
            f"This server does not serve realtime transcription ({PATH} refused the WebSocket handshake "
            f"with 403: the model has no `realtime` task). To serve it, {HOW_TO_SERVE}.",
            status_code=403,
            headers=httpx.Headers(dict(response_headers)),
            method="GET",
            url=http_url,
        )
        error.task = "realtime"
        return error
    if status < 400:
        return UnexpectedResponse(
            f"the WebSocket handshake was answered {status}, not 101 Switching Protocols (a redirect is not "
            "followed; point base_url at the server itself)",
            status_code=status,
            content_type=response_headers.get("content-type", ""),
            method="GET",
            url=http_url,
        )
    framing = ("content-encoding", "content-length", "transfer-encoding")  # the body is already decoded
    response = httpx.Response(
        status,
        headers={name: value for name, value in response_headers.items() if name.lower() not in framing},
        content=bytes(body),
        request=httpx.Request("GET", http_url),
    )
    response.read()
    mapped = error_from_response(response)
    if isinstance(mapped, EndpointNotServed):
        mapped = EndpointNotServed(
            f"This server does not serve realtime transcription ({PATH} answered {status}). To serve it, "
            f"{HOW_TO_SERVE}.",
            status_code=status,
            body=mapped.body,
            headers=mapped.headers,
            method="GET",
            url=http_url,
        )
        mapped.task = "realtime"
    return mapped


_BY_CODE: dict[str, tuple[type[APIStatusError], int]] = {
    "model_not_found": (NotFoundError, 404),
    "invalid_audio": (BadRequestError, 400),
    "invalid_json": (BadRequestError, 400),
    "invalid_event": (BadRequestError, 400),
    "unknown_event": (BadRequestError, 400),
    "model_not_validated": (BadRequestError, 400),
    "processing_error": (InternalServerError, 500),
}
"""vLLM 0.32's error codes (``connection.py``), as the error an HTTP route answers for the same fault:
the model not served is a 404 (``kind="model_not_found"``), what the server refuses in the client's events
a 400, a failure while transcribing a 500 (``InternalServerError``)."""


def event_error(event: Mapping[str, Any], ws_url: str) -> APIError:
    """The SDK error for a server ``error`` event (``{"type": "error", "error", "code"}``).

    The status code is the one the HTTP routes answer for the same fault (the event carries none); the
    event is kept in ``body``. An unknown code is an :class:`InternalServerError` (500).
    """
    message = event.get("error")
    text = message if isinstance(message, str) and message else json.dumps(dict(event))[:500]
    code = event.get("code")
    cls, status = _BY_CODE.get(code if isinstance(code, str) else "", (InternalServerError, 500))
    http_url = ws_url.replace("ws", "http", 1)
    if "maximum file size exceeded" in text.lower():
        return BadRequestError(
            text, status_code=status, kind="audio_too_large", body=dict(event), url=http_url
        )
    if cls is NotFoundError:
        return NotFoundError(
            text, status_code=status, kind="model_not_found", param="model", body=dict(event), url=http_url
        )
    return cls(text, status_code=status, body=dict(event), url=http_url)


@dataclass
class RealtimeParser:
    """Reads the server's events (pure; no I/O): text deltas, then one :class:`Transcription`.

    The first delta's leading whitespace is dropped (vLLM's text starts with a space), so that the deltas
    joined equal the result's text; an event of a type it does not know is skipped.

    Attributes:
        model: the model named in ``session.update`` (kept in the result).
        url: the route's URL (for errors).
        session_id: the ``id`` of ``session.created``, once read.
        text: the text of the deltas so far.
        done: whether ``transcription.done`` was read.
    """

    model: str | None
    url: str
    session_id: str | None = None
    text: str = ""
    done: bool = False
    seconds: float = 0.0
    """Seconds of audio sent (the result's ``duration``)."""
    result: Transcription | None = None
    events: int = field(default=0, repr=False)

    def feed(self, message: str | bytes) -> list[Event]:
        """One message from the server; returns the events it gives.

        Raises:
            UnexpectedResponse: a binary message, not JSON, not an object, a known event of another shape.
            APIStatusError: an ``error`` event (see :func:`event_error`).
        """
        if isinstance(message, bytes):
            raise self._unexpected(f"a binary message of {len(message)} bytes, not a JSON event")
        try:
            event = json.loads(message)
        except ValueError:
            raise self._unexpected(f"a message that is not JSON: {message[:200]!r}") from None
        if not isinstance(event, dict):
            raise self._unexpected(f"a message that is not a JSON object: {message[:200]!r}")
        self.events += 1
        kind = event.get("type")
        if kind == "error":
            raise event_error(event, self.url)
        if kind == "session.created":
            session = event.get("id")
            self.session_id = session if isinstance(session, str) else None
            return []
        if kind == "transcription.delta":
            delta = event.get("delta")
            if not isinstance(delta, str):
                raise self._unexpected(f"a transcription.delta without text: {message[:200]!r}")
            if not self.text:
                delta = delta.lstrip()
            if not delta:
                return []
            self.text += delta
            return [TranscriptionDelta(text=delta)]
        if kind == "transcription.done":
            return [self._done(event, message)]
        return []  # an event this client does not know (a newer server's)

    def _done(self, event: Mapping[str, Any], message: str) -> Transcription:
        text = event.get("text")
        if not isinstance(text, str):
            raise self._unexpected(f"a transcription.done without text: {message[:200]!r}")
        usage = event.get("usage")
        try:
            parsed = TranscriptionUsage.model_validate(usage) if usage is not None else None
        except ValueError:
            raise self._unexpected(f"a transcription.done with invalid usage: {message[:200]!r}") from None
        self.done = True
        self.result = Transcription(
            text=text.strip(),
            duration=self.seconds,
            usage=parsed,
            model=self.model,
            task="transcribe",
        )
        return self.result

    def ended(self, code: int | None, reason: str) -> StreamError:
        """The error for a session the server closed before ``transcription.done``."""
        said = f" (close code {code}{': ' + reason if reason else ''})" if code is not None else ""
        return StreamError(
            f"the realtime session ended before transcription.done{said}: the text is truncated after "
            f"{len(self.text)} characters",
            body={"text": self.text},
        )

    def _unexpected(self, what: str) -> UnexpectedResponse:
        return UnexpectedResponse(
            f"the realtime server sent {what}", method="GET", url=self.url.replace("ws", "http", 1)
        )
