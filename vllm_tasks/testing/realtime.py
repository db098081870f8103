"""The fake server's WebSocket route ``/v1/realtime`` (RFC 6455 over the standard library), with vLLM
0.32's session (``vllm/entrypoints/speech_to_text/realtime/connection.py``).

The handshake is answered as vLLM (uvicorn) answers it: 401 ``{"error": "Unauthorized"}`` without the API
key, 403 with an empty body when the route is not mounted (the ``realtime`` task is not served) or for a
WebSocket request to another path, 101 otherwise. The session then follows vLLM's connection:

- ``session.created`` first; ``session.update`` names the model (``invalid_event`` without one,
  ``model_not_found`` for another than the served one); a commit before it is ``model_not_validated``;
- ``input_audio_buffer.append`` takes base64 PCM16 (``invalid_audio`` for what does not decode, or no
  samples); a JSON error is ``invalid_json``, an unknown type ``unknown_event``, an append without audio
  ``processing_error``; no error ends the session;
- the first ``input_audio_buffer.commit`` starts the transcription, ``{"final": true}`` ends the audio (sent
  before that commit, it waits for it):
  the transcript (``FakeSettings.transcript``, or its function of a request whose ``file`` is the audio
  received as a 16 kHz WAV, as ``/v1/audio/transcriptions`` would get it) goes out as one
  ``transcription.delta`` per word, then ``transcription.done`` with the whole text and token usage. A fixed
  transcript's words go out as the audio arrives (one per half second), as a realtime model's do.

The session's messages can be rewritten (a hostile server): see :attr:`RealtimeSession.rewrite`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import secrets
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from io import BufferedIOBase
from typing import Any

import numpy as np

from ..audio import wav_bytes
from . import content
from .settings import FakeSettings
from .wire import ReceivedRequest, Reply, UploadedFile

PATH = "/v1/realtime"
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
RATE = 16_000
WORD_SECONDS = 0.5
"""With a fixed transcript, one word is sent per this many seconds of audio received, the rest at the end."""
PROMPT_TOKENS = 9
"""Prompt tokens counted per session (Qwen3-ASR realtime's prompt template, without the audio)."""
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""uvicorn's ``ws_max_size``: a longer message closes the session with 1009."""

TEXT, BINARY, CLOSE, PING, PONG = 0x1, 0x2, 0x8, 0x9, 0xA


@dataclass(frozen=True)
class CloseFrame:
    """In a :attr:`RealtimeSession.rewrite`'s answer: close the session cleanly with ``code`` here."""

    code: int = 1000
    reason: str = ""


Rewrite = Callable[[str], Sequence["str | CloseFrame"] | None]
"""Rewrites one message the server is about to send: the messages to send instead (none: it is dropped; a
:class:`CloseFrame`: the session closes there), or ``None`` to hang up at once (no close frame)."""


def is_upgrade(request: ReceivedRequest) -> bool:
    """Whether ``request`` asks for a WebSocket (``Upgrade: websocket``)."""
    return request.method == "GET" and "websocket" in request.headers.get("upgrade", "").lower()


def handshake(request: ReceivedRequest, settings: FakeSettings) -> Reply:
    """The answer to a WebSocket handshake (after the API key check): 101 and a session, or uvicorn's 403."""
    key = request.headers.get("sec-websocket-key", "")
    if request.path != PATH or "realtime" not in settings.tasks:
        return Reply(403, b"", {"content-type": "text/plain; charset=utf-8"})
    if request.headers.get("sec-websocket-version") != "13" or len(_b64(key)) != 16:
        return Reply(400, b"Invalid WebSocket request", {"content-type": "text/plain; charset=utf-8"})
    accept = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()
    headers = {"upgrade": "websocket", "connection": "Upgrade", "sec-websocket-accept": accept}
    return Reply(101, headers=headers, upgrade=RealtimeSession(request, settings))


def _b64(value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return b""


class _HungUp(Exception):
    """The session ends without a close frame (the peer went away, or a rewrite hung up)."""


class RealtimeSession:
    """One ``/v1/realtime`` session of a FakeVLLM (see :attr:`FakeVLLM.realtime_sessions`).

    Attributes:
        request: the handshake request.
        events: the JSON events the client sent, in order (a message that is not JSON as its text).
        audio: the PCM16 received since the last ``transcription.done``, and all of it once the session ends.
        sent: the messages the server sent.
        close_code: the code of the client's close frame (``None``: the connection dropped without one).
        ended: set when the session is over (the socket closed).
        rewrite: rewrites each message before it is sent (a hostile server; ``None``: sent as is).
    """

    def __init__(self, request: ReceivedRequest, settings: FakeSettings) -> None:
        self.request = request
        self.settings = settings
        self.events: list[Any] = []
        self.audio = bytearray()
        self.sent: list[str] = []
        self.close_code: int | None = None
        self.ended = threading.Event()
        self.rewrite: Rewrite | None = None
        self._all_audio = bytearray()
        self._validated = False
        self._model = ""
        self._generating = False
        self._ended = False
        self._words: list[str] = []
        self._said = 0
        self._wfile: BufferedIOBase | None = None

    def __call__(self, rfile: BufferedIOBase, wfile: BufferedIOBase) -> None:
        """Run the session on an upgraded connection until it closes."""
        self._wfile = wfile
        try:
            self._send(json.dumps({"type": "session.created", "id": f"sess-{secrets.token_hex(8)}",
                                   "created": int(time.time())}))  # fmt: skip
            while True:
                message = self._receive(rfile)
                if message is None:
                    break
                self._handle(message)
        except (_HungUp, OSError, ValueError):
            pass
        finally:
            self.audio = self._all_audio
            self.ended.set()

    # ------------------------------------------------------------------------------------ the events

    def _handle(self, message: str) -> None:
        try:
            event = json.loads(message)
        except ValueError:
            self.events.append(message)
            self._error("Invalid JSON", "invalid_json")
            return
        self.events.append(event)
        if not isinstance(event, dict):
            self._error(f"'{type(event).__name__}' object has no attribute 'get'", "processing_error")
            return
        kind = event.get("type")
        if kind == "session.update":
            self._session_update(event)
        elif kind == "input_audio_buffer.append":
            self._append(event)
        elif kind == "input_audio_buffer.commit":
            self._commit(event)
        else:
            self._error(f"Unknown event type: {kind}", "unknown_event")

    def _session_update(self, event: dict[str, Any]) -> None:
        model = event.get("model")
        if model is None:
            self._error("Missing required field: model", "invalid_event")
        elif model and model != self.settings.model:
            self._error(f"The model `{model}` does not exist.", "model_not_found")
        else:
            self._validated, self._model = True, model or self.settings.model

    def _append(self, event: dict[str, Any]) -> None:
        audio = event.get("audio")
        if not isinstance(audio, str):
            self._error(
                "1 validation error for InputAudioBufferAppend\naudio\n  Field required [type=missing, "
                f"input_value={event!r}, input_type=dict]\n    For further information visit "
                "https://errors.pydantic.dev/2.14/v/missing",
                "processing_error",
            )
            return
        data = _b64(audio) if audio else b""
        if not data or len(data) % 2:
            self._error("Invalid audio data", "invalid_audio")
            return
        self.audio += data
        self._all_audio += data
        if self._generating and not callable(self.settings.transcript):
            heard = len(self.audio) / 2 / RATE
            while self._said < min(len(self._words) - 1, int(heard / WORD_SECONDS)):
                self._delta()

    def _commit(self, event: dict[str, Any]) -> None:
        if not self._validated:
            self._error(
                "Model not validated. Make sure to validate the model by sending a session.update event.",
                "model_not_validated",
            )
        elif event.get("final") is True:
            if self._generating:
                self._finish()
            else:  # vLLM queues the end of the audio: the next plain commit transcribes it all at once
                self._ended = True
        elif not self._generating:
            self._generating, self._said = True, 0
            text = self.settings.transcript
            self._words = [] if callable(text) else content.stream_pieces(text)
            if self._ended:
                self._ended = False
                self._finish()

    def _finish(self) -> None:
        """The audio ended: the rest of the text, then ``transcription.done``; ready for another utterance."""
        if callable(self.settings.transcript):
            self._words = content.stream_pieces(
                self.settings.text_of(self.settings.transcript, self._as_upload())
            )
        while self._said < len(self._words):
            self._delta()
        text = "".join(self._words)
        completion = len(self._words)
        usage = {"prompt_tokens": PROMPT_TOKENS, "total_tokens": PROMPT_TOKENS + completion,
                 "completion_tokens": completion, "prompt_tokens_details": None,
                 "completion_tokens_details": None}  # fmt: skip
        self._send(json.dumps({"type": "transcription.done", "text": text, "usage": usage}))
        self._generating = False
        self.audio = bytearray()

    def _delta(self) -> None:
        self._send(json.dumps({"type": "transcription.delta", "delta": self._words[self._said]}))
        self._said += 1

    def _as_upload(self) -> ReceivedRequest:
        """The session as a transcription request: its audio as the ``file`` (a 16 kHz WAV), its model."""
        samples = np.frombuffer(bytes(self.audio), dtype="<i2")
        upload = UploadedFile("realtime.wav", "audio/wav", wav_bytes(samples, RATE))
        request = self.request
        return ReceivedRequest(request.method, request.path, request.query, request.headers, b"", None,
                               {"model": self._model}, {"file": upload}, request.received_at)  # fmt: skip

    def _error(self, message: str, code: str) -> None:
        self._send(json.dumps({"type": "error", "error": message, "code": code}))

    # ---------------------------------------------------------------------------------------- frames

    def _send(self, message: str) -> None:
        out: Sequence[str | CloseFrame] | None = [message] if self.rewrite is None else self.rewrite(message)
        if out is None:
            raise _HungUp
        for item in out:
            if isinstance(item, CloseFrame):
                self._frame(CLOSE, struct.pack("!H", item.code) + item.reason.encode())
                raise _HungUp
            self.sent.append(item)
            self._frame(TEXT, item.encode())

    def _frame(self, opcode: int, payload: bytes) -> None:
        assert self._wfile is not None
        size = len(payload)
        if size < 126:
            head = struct.pack("!BB", 0x80 | opcode, size)
        elif size < 1 << 16:
            head = struct.pack("!BBH", 0x80 | opcode, 126, size)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 127, size)
        self._wfile.write(head + payload)
        self._wfile.flush()

    def _receive(self, rfile: BufferedIOBase) -> str | None:
        """The next text message (pings answered, fragments joined); ``None`` after the client's close."""
        parts: list[bytes] = []
        while True:
            first, second = _read(rfile, 2)
            opcode, length = first & 0x0F, second & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", _read(rfile, 2))
            elif length == 127:
                (length,) = struct.unpack("!Q", _read(rfile, 8))
            if length > MAX_MESSAGE_BYTES:
                self._frame(CLOSE, struct.pack("!H", 1009))
                raise _HungUp
            mask = _read(rfile, 4) if second & 0x80 else b"\0\0\0\0"
            payload = _unmask(_read(rfile, length), mask)
            if opcode == CLOSE:
                self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                self._frame(CLOSE, payload[:2])
                return None
            if opcode == PING:
                self._frame(PONG, payload)
                continue
            if opcode == PONG:
                continue
            if (
                opcode == BINARY
            ):  # vLLM reads text only: its handler fails, the connection drops (no close frame)
                raise _HungUp
            parts.append(payload)
            if first & 0x80:
                return b"".join(parts).decode("utf-8", "replace")


def _read(rfile: BufferedIOBase, count: int) -> bytes:
    data = rfile.read(count)
    if len(data) < count:
        raise _HungUp
    return data


def _unmask(payload: bytes, mask: bytes) -> bytes:
    if not payload or mask == b"\0\0\0\0":
        return payload
    key = np.frombuffer((mask * (len(payload) // 4 + 1))[: len(payload)], dtype=np.uint8)
    return (np.frombuffer(payload, dtype=np.uint8) ^ key).tobytes()
