"""FakeVLLM's /v1/realtime held to real sessions: every session recorded from vLLM 0.32's Qwen3-ASR realtime
fixture (tests/data/realtime/, record.py there) is replayed against FakeVLLM, and the events must agree on
what a client reads:

- the same kinds of events in the same order (a run of deltas counts as one: how many tokens a delta holds
  depends on the model and the timing), the connection dropped where the real one dropped;
- each kind's fields, in the same order, with values of the same types; ``session.created``'s id as long;
- error events equal (message and code), pydantic's wording included;
- ``transcription.done``'s text equal to its deltas joined, its usage with the same fields.

The text itself is not compared: no model runs in the fake (the recorded words are noise from random
weights)."""

from __future__ import annotations

import base64
import json
import re
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from vllm_tasks.testing import REALTIME_TASKS, FakeVLLM

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "data" / "realtime"
AUDIO = ROOT / "data" / "audio"
MODEL = "qwen3-asr-tiny"
QUIET = 0.3
"""Seconds without an event after which a replayed session is taken as answered in full."""


def sessions() -> Iterator[Any]:
    for path in sorted(RECORDED.glob("*.json")):
        recorded = json.loads(path.read_text())
        if path.name == "probes.json":
            for name, probe in recorded.items():
                yield pytest.param(probe, id=f"probes-{name}")
        else:
            yield pytest.param(recorded, id=path.stem)


def pcm(reference: str) -> str:
    """The base64 PCM16 a recorded append names (``"fox.wav[0:8000]"``)."""
    match = re.fullmatch(r"(.+)\[(\d+):(\d+)\]", reference)
    assert match, reference
    with wave.open(str(AUDIO / match[1])) as audio:
        audio.setpos(int(match[2]))
        return base64.b64encode(audio.readframes(int(match[3]) - int(match[2]))).decode()


def replay(fake: FakeVLLM, client: list[Any], expected: int) -> list[dict[str, Any]]:
    """Send a recorded session's client events; the server's events, read until ``expected`` kinds came and
    the server went quiet (or the connection dropped)."""
    url = fake.url.replace("http", "ws") + "/v1/realtime"
    received: list[dict[str, Any]] = []
    with connect(url, max_size=None, open_timeout=5) as connection:
        for event in client:
            send(connection, event)
        while True:
            try:
                message = connection.recv(timeout=QUIET if len(kinds(received)) >= expected else 5)
            except TimeoutError:
                return received
            except ConnectionClosed as closed:
                received.append({"closed": {"close_code": closed.rcvd.code if closed.rcvd else None}})
                return received
            received.append(json.loads(message))


def send(connection: ClientConnection, event: Any) -> None:
    if isinstance(event, str):
        connection.send(event)
    elif "binary_frame" in event:
        connection.send(bytes.fromhex(event["binary_frame"]))
    elif (
        event.get("type") == "input_audio_buffer.append"
        and isinstance(event.get("audio"), str)
        and "[" in event["audio"]
    ):
        connection.send(json.dumps({**event, "audio": pcm(event["audio"])}))
    else:
        connection.send(json.dumps(event))


def kinds(events: list[dict[str, Any]]) -> list[str]:
    """The events' kinds, a run of deltas as one."""
    out: list[str] = []
    for event in events:
        kind = event.get("type", "closed" if "closed" in event else "?")
        if not (out and out[-1] == kind == "transcription.delta"):
            out.append(kind)
    return out


def shape(value: Any) -> Any:
    """Keys in order and value types, recursively."""
    if isinstance(value, dict):
        return [(key, shape(item)) for key, item in value.items()]
    return type(value).__name__


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeVLLM]:
    with FakeVLLM(model=MODEL, tasks=REALTIME_TASKS) as server:
        yield server


def test_there_are_recordings() -> None:
    assert len(list(sessions())) >= 17


@pytest.mark.parametrize("recorded", list(sessions()))
def test_the_fake_answers_as_the_recorded_server(fake: FakeVLLM, recorded: dict[str, Any]) -> None:
    real = recorded["server"]
    ours = replay(fake, recorded["client"], len(kinds(real)))
    assert kinds(ours) == kinds(real)
    first_of = {event.get("type"): event for event in reversed(real)}
    for event in ours:
        kind = event.get("type")
        if kind is None:  # the dropped connection
            assert event == next(e for e in real if "closed" in e)
            continue
        twin = first_of[kind]
        if kind == "session.created":
            assert shape(event) == shape(twin) and len(event["id"]) == len(twin["id"])
        elif kind == "error":
            assert event == next(e for e in real if e.get("type") == "error")
        elif kind == "transcription.done":
            assert shape(event) == shape(twin)
        else:
            assert shape(event) == shape(twin)
    for events in (real, ours):  # in both: done's text is its deltas joined, per utterance
        text = ""
        for event in events:
            if event.get("type") == "transcription.delta":
                text += event["delta"]
            elif event.get("type") == "transcription.done":
                assert event["text"] == text
                text = ""
