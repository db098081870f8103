"""The pure parts of transcribe_realtime (vllm_tasks/realtime.py): the server's events parsed, its errors and
refused handshakes mapped, the audio cut into PCM16 pieces, pacing, the URL and headers."""

from __future__ import annotations

import json
from typing import Any

import httpx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vllm_tasks as vt
from vllm_tasks import realtime
from vllm_tasks.types.audio import Transcription, TranscriptionDelta

URL = "ws://127.0.0.1:8000/v1/realtime"


def parser() -> realtime.RealtimeParser:
    return realtime.RealtimeParser(model="m", url=URL)


@given(st.lists(st.text(max_size=8), max_size=12))
def test_the_deltas_joined_are_the_result(deltas: list[str]) -> None:
    """vLLM's done text is its deltas joined; the SDK's deltas joined equal the result's text (stripped)."""
    read = parser()
    events: list[Any] = []
    for delta in deltas:
        events += read.feed(json.dumps({"type": "transcription.delta", "delta": delta}))
    raw = "".join(deltas)
    (done,) = read.feed(json.dumps({"type": "transcription.done", "text": raw, "usage": None}))
    assert isinstance(done, Transcription) and done.text == raw.strip()
    assert all(isinstance(event, TranscriptionDelta) and event.text for event in events)
    assert "".join(event.text for event in events).rstrip() == done.text
    assert read.done and done.model == "m"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
EVENT = st.fixed_dictionaries(
    {"type": st.sampled_from(["transcription.delta", "transcription.done", "error", "session.created", "x"])},
    optional={"delta": JSON, "text": JSON, "usage": JSON, "error": JSON, "code": JSON, "id": JSON},
)


@settings(max_examples=300)
@given(st.one_of(EVENT.map(json.dumps), JSON.map(json.dumps), st.text(max_size=30), st.binary(max_size=8)))
def test_any_message_is_an_event_or_a_typed_error(message: str | bytes) -> None:
    try:
        events = parser().feed(message)
    except vt.VLLMTasksError:
        return
    assert all(isinstance(event, TranscriptionDelta | Transcription) for event in events)


def test_unknown_events_and_session_created() -> None:
    read = parser()
    assert read.feed('{"type": "session.created", "id": "sess-1", "created": 1}') == []
    assert read.session_id == "sess-1"
    assert read.feed('{"type": "rate_limits.updated", "x": 1}') == []  # a newer server's: skipped


@pytest.mark.parametrize(
    ("code", "cls", "status"),
    [
        ("model_not_found", vt.NotFoundError, 404),
        ("invalid_audio", vt.BadRequestError, 400),
        ("invalid_json", vt.BadRequestError, 400),
        ("invalid_event", vt.BadRequestError, 400),
        ("unknown_event", vt.BadRequestError, 400),
        ("model_not_validated", vt.BadRequestError, 400),
        ("processing_error", vt.InternalServerError, 500),
        (None, vt.InternalServerError, 500),
        (7, vt.InternalServerError, 500),
    ],
)
def test_error_codes(code: object, cls: type[vt.APIStatusError], status: int) -> None:
    with pytest.raises(cls) as raised:
        parser().feed(json.dumps({"type": "error", "error": "it failed", "code": code}))
    assert type(raised.value) is cls and raised.value.status_code == status
    assert raised.value.message == "it failed" and raised.value.url == "http://127.0.0.1:8000/v1/realtime"
    if code == "model_not_found":
        assert raised.value.kind == "model_not_found" and raised.value.param == "model"


def test_malformed_events() -> None:
    for message in ('{"type": "transcription.delta"}', '{"type": "transcription.done", "usage": {}}', "[1]",
                    "{oops", b"\x00", '{"type": "transcription.done", "text": "a", "usage": 5}'):  # fmt: skip
        with pytest.raises(vt.UnexpectedResponse):
            parser().feed(message)


def test_a_session_ended_early() -> None:
    read = parser()
    read.feed('{"type": "transcription.delta", "delta": " Hello"}')
    error = read.ended(1000, "bye")
    assert isinstance(error, vt.StreamError) and error.body == {"text": "Hello"}
    assert "close code 1000: bye" in str(error)


@pytest.mark.parametrize(
    ("status", "headers", "body", "cls"),
    [
        (403, {}, b"", vt.EndpointNotServed),
        (404, {"content-type": "application/json"}, b'{"detail":"Not Found"}', vt.EndpointNotServed),
        (401, {"content-type": "application/json"}, b'{"error":"Unauthorized"}', vt.AuthenticationError),
        (403, {"content-type": "text/plain"}, b"blocked by policy", vt.PermissionDeniedError),
        (503, {"retry-after": "3", "content-encoding": "gzip"}, b"busy", vt.ServiceUnavailableError),
        (302, {"location": "http://elsewhere/"}, b"", vt.UnexpectedResponse),
    ],
)
def test_refused_handshakes(status: int, headers: dict[str, str], body: bytes, cls: type[Exception]) -> None:
    error = realtime.handshake_error(status, headers, body, URL)
    assert type(error) is cls
    if isinstance(error, vt.EndpointNotServed):
        assert error.task == "realtime" and "realtime" in str(error)
    if isinstance(error, vt.ServiceUnavailableError):
        assert error.headers["retry-after"] == "3"


def test_url_and_headers() -> None:
    settings = vt.ClientSettings("https://user:pw@gpu:8443/vllm", headers={"x-a": "1"})
    assert realtime.url(settings) == "wss://gpu:8443/vllm/v1/realtime"
    sent = realtime.headers(settings, {"x-b": "2"})
    assert sent["Authorization"].startswith("Basic ") and sent["x-a"] == "1" and sent["x-b"] == "2"
    keyed = vt.ClientSettings("http://gpu:8000/v1", api_key="sk-1")
    assert realtime.url(keyed) == "ws://gpu:8000/v1/realtime"
    assert realtime.headers(keyed, None)["Authorization"] == "Bearer sk-1"


def test_events_sent() -> None:
    assert json.loads(realtime.session_update("m")) == {"type": "session.update", "model": "m"}
    assert json.loads(realtime.commit(final=False)) == {"type": "input_audio_buffer.commit"}
    assert json.loads(realtime.commit(final=True)) == {"type": "input_audio_buffer.commit", "final": True}
    assert json.loads(realtime.append(b"\x01\x00")) == {"type": "input_audio_buffer.append", "audio": "AQA="}


@given(st.lists(st.integers(1, 5000), min_size=1, max_size=12), st.sampled_from([0.05, 0.1, 0.5]))
def test_pieces_are_bounded_and_lose_nothing(sizes: list[int], seconds: float) -> None:
    reader = realtime.ChunkReader(16000, seconds)
    rng = np.random.default_rng(len(sizes))
    chunks = [rng.integers(-32768, 32767, size, dtype=np.int16) for size in sizes]
    pieces = list(reader.pieces(iter(chunks)))
    limit = round(seconds * 16000) * 2
    assert all(len(piece) == limit for piece in pieces[:-1]) and 0 < len(pieces[-1]) <= limit
    assert b"".join(pieces) == np.concatenate(chunks).astype("<i2").tobytes()  # 16 kHz int16: exact


def test_chunks_are_mixed_and_resampled() -> None:
    stereo = np.full((48000, 2), [0.5, -0.5], dtype=np.float32)
    mixed = b"".join(realtime.ChunkReader(16000, 0.5).pieces([stereo]))
    assert set(np.frombuffer(mixed, "<i2")) == {0}
    resampled = b"".join(realtime.ChunkReader(48000, 0.5).pieces([np.zeros(48000, np.float32)] * 2))
    assert len(resampled) == pytest.approx(2 * 32000, abs=4)
    pcm = b"".join(realtime.ChunkReader(16000, 0.5).pieces([np.array([1, -1, 7], "<i2").tobytes()]))
    assert np.frombuffer(pcm, "<i2").tolist() == [1, -1, 7]


def test_pacing_and_timeouts() -> None:
    assert realtime.pace_wait(None, 10.0, 0.0) == 0.0
    assert realtime.pace_wait(1.0, 2.0, 0.5) == 1.5
    assert realtime.pace_wait(2.0, 2.0, 5.0) == 0.0
    assert realtime.timeouts(30.0) == (10.0, 30.0)
    assert realtime.timeouts(None) == (None, None)
    assert realtime.timeouts(httpx.Timeout(5.0, connect=2.0)) == (2.0, 5.0)


def test_source_kinds() -> None:
    async def chunks() -> Any:
        yield b""

    assert realtime.source_kind("a.wav") == realtime.source_kind(b"RIFF") == "audio"
    assert realtime.source_kind((np.zeros(3), 16000)) == "audio"
    assert realtime.source_kind([np.zeros(3)]) == realtime.source_kind(iter([])) == "chunks"
    assert realtime.source_kind(chunks()) == "async_chunks"
    with pytest.raises(vt.InvalidInputError, match="sample rate"):
        realtime.source_kind(np.zeros(3))
