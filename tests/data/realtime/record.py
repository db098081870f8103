"""Record real vLLM ``/v1/realtime`` sessions into this folder (see README.md).

    server-fixtures/serve qwen3-asr --port 8000 &
    /work/main/.venv/bin/python tests/data/realtime/record.py http://127.0.0.1:8000 qwen3-asr-tiny

Each session is the list of client events sent and the list of server events received, each in its order,
and for each server event how many client events had been sent when it was read (``read_after``).
An ``input_audio_buffer.append`` is recorded with ``audio`` naming the samples it carried
(``"fox.wav[0:8000]"``: PCM16 little-endian mono 16 kHz, base64) instead of the base64 itself.
tests/contract/test_speech_qwen3_asr.py replays the transcription sessions against the live fixture.
"""

from __future__ import annotations

import base64
import contextlib
import json
import sys
import wave
from pathlib import Path
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

HERE = Path(__file__).resolve().parent
AUDIO = HERE.parent / "audio"
#: Samples per append: 0.5 s at 16 kHz.
CHUNK = 8000
#: Seconds to wait for an event that may never come (a session left open, an ignored event).
QUIET = 5.0


def pcm16(name: str) -> bytes:
    """The PCM16 frames of a 16 kHz mono 16-bit WAV in tests/data/audio."""
    with wave.open(str(AUDIO / name)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2), name
        return w.readframes(w.getnframes())


def appends(name: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(sent, recorded)`` append events for a recording in CHUNK-sample pieces."""
    data = pcm16(name)
    out = []
    for start in range(0, len(data) // 2, CHUNK):
        piece = data[2 * start : 2 * (start + CHUNK)]
        end = start + len(piece) // 2
        sent = {"type": "input_audio_buffer.append", "audio": base64.b64encode(piece).decode()}
        out.append((sent, {**sent, "audio": f"{name}[{start}:{end}]"}))
    return out


class Session(contextlib.AbstractContextManager["Session"]):
    """One WebSocket connection that remembers what it sent and what it received (a context manager)."""

    def __init__(self, url: str) -> None:
        self._stack = contextlib.ExitStack()
        self.ws: ClientConnection = self._stack.enter_context(
            connect(url.replace("http", "ws", 1) + "/v1/realtime", max_size=None)
        )
        self.client: list[Any] = []
        self.server: list[Any] = []
        #: for each server event, how many client events had been sent when it was read (timing-dependent)
        self.read_after: list[int] = []

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def send(self, event: Any, recorded: Any = None) -> None:
        """Send a JSON event (or a raw text or binary frame; a binary one is recorded as its hex)."""
        self.ws.send(event if isinstance(event, str | bytes) else json.dumps(event))
        shown = event if recorded is None else recorded
        self.client.append({"binary_frame": shown.hex()} if isinstance(shown, bytes) else shown)

    def receive(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next server event, or None when none came within ``timeout`` or the server closed."""
        try:
            event: dict[str, Any] = json.loads(self.ws.recv(timeout=timeout))
        except TimeoutError:
            return None
        except ConnectionClosed as closed:
            # the server's close frame, or null when it dropped the connection without one
            self.server.append({"closed": {"close_code": closed.rcvd.code if closed.rcvd else None}})
            self.read_after.append(len(self.client))
            return None
        self.server.append(event)
        self.read_after.append(len(self.client))
        return event

    def until(self, kind: str) -> None:
        """Receive until an event of this type (or an error) arrives."""
        while (event := self.receive(timeout=300)) is not None and event["type"] not in (kind, "error"):
            pass

    def drain(self) -> None:
        """Receive whatever comes within QUIET seconds."""
        while self.receive(timeout=QUIET) is not None:
            pass

    def record(self, **extra: Any) -> dict[str, Any]:
        return {**extra, "client": self.client, "server": self.server, "read_after": self.read_after}


def transcribe(url: str, model: str, names: list[str], *, first_commit: int = 1) -> dict[str, Any]:
    """session.update, ``first_commit`` plain commits, the recording's appends, commit final, until done;
    again per further recording on the same connection."""
    with Session(url) as s:
        s.receive()
        s.send({"type": "session.update", "model": model})
        for name in names:
            for _ in range(first_commit):
                s.send({"type": "input_audio_buffer.commit"})
            for sent, shown in appends(name):
                s.send(sent, shown)
            s.send({"type": "input_audio_buffer.commit", "final": True})
            s.until("transcription.done")
        return s.record(audio=names)


def probes(url: str, model: str) -> dict[str, Any]:
    """Each odd client behaviour in its own connection."""
    out: dict[str, Any] = {}

    with Session(url) as s:  # commit without final: generation starts, no done while the audio is open
        s.receive()
        s.send({"type": "session.update", "model": model})
        s.send({"type": "input_audio_buffer.commit"})
        for sent, shown in appends("numbers.wav"):
            s.send(sent, shown)
        s.drain()
        out["commit_without_final"] = s.record()

    with Session(url) as s:  # the audio and its final commit before any plain commit
        s.receive()
        s.send({"type": "session.update", "model": model})
        for sent, shown in appends("fox.wav"):
            s.send(sent, shown)
        s.send({"type": "input_audio_buffer.commit", "final": True})
        s.drain()
        s.send({"type": "input_audio_buffer.commit"})
        s.until("transcription.done")
        out["final_commit_before_commit"] = s.record()

    with Session(url) as s:  # audio before session.update, then a commit before it
        s.receive()
        for sent, shown in appends("fox.wav"):
            s.send(sent, shown)
        s.send({"type": "input_audio_buffer.commit"})
        s.receive(timeout=QUIET)
        s.send({"type": "session.update", "model": model})
        s.send({"type": "input_audio_buffer.commit"})
        s.send({"type": "input_audio_buffer.commit", "final": True})
        s.until("transcription.done")
        out["audio_before_session_update"] = s.record()

    singles: dict[str, list[Any]] = {
        "unknown_model": [{"type": "session.update", "model": "no-such-model"}],
        "session_update_without_model": [{"type": "session.update"}],
        "bad_base64": [{"type": "input_audio_buffer.append", "audio": "%%% not base64 %%%"}],
        "odd_byte_count": [{"type": "input_audio_buffer.append", "audio": base64.b64encode(b"abc").decode()}],
        "empty_audio": [{"type": "input_audio_buffer.append", "audio": ""}],
        "append_without_audio": [{"type": "input_audio_buffer.append"}],
        "non_json_frame": ["this is not json"],
        "unknown_event": [{"type": "response.create"}],
        "no_type": [{"model": model}],
        "binary_frame": [b"\x00\x01"],
    }
    for name, events in singles.items():
        with Session(url) as s:
            s.receive()
            for event in events:
                s.send(event)
            s.drain()
            out[name] = s.record()
    return out


def main(argv: list[str]) -> int:
    url, model = argv[1], argv[2]
    for name in ("fox.wav", "numbers.wav"):
        session = transcribe(url, model, [name])
        (HERE / f"{Path(name).stem}.json").write_text(json.dumps(session, indent=1) + "\n")
    twice = transcribe(url, model, ["fox.wav"], first_commit=2)
    (HERE / "fox-two-commits.json").write_text(json.dumps(twice, indent=1) + "\n")
    two = transcribe(url, model, ["fox.wav", "numbers.wav"])
    (HERE / "two-utterances.json").write_text(json.dumps(two, indent=1) + "\n")
    (HERE / "probes.json").write_text(json.dumps(probes(url, model), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
