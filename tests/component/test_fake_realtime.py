"""FakeVLLM's /v1/realtime held to vLLM 0.32's session (vllm/entrypoints/speech_to_text/realtime/:
protocol.py's event models, connection.py's handling and error codes, uvicorn's handshake refusals), with a
plain WebSocket client; test_fake_realtime_recorded.py holds it to the sessions recorded from a real
server."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosedError, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from vllm_tasks.testing import REALTIME_TASKS, SPEECH_TASKS, FakeVLLM

MODEL = "qwen3-asr-realtime"


@pytest.fixture
def fake() -> Iterator[FakeVLLM]:
    with FakeVLLM(model=MODEL, tasks=REALTIME_TASKS) as server:
        yield server


def ws(fake: FakeVLLM, **headers: str) -> ClientConnection:
    return connect(
        fake.url.replace("http", "ws") + "/v1/realtime", additional_headers=headers, open_timeout=5
    )


def event(connection: ClientConnection) -> dict[str, Any]:
    message = connection.recv(timeout=5)
    assert isinstance(message, str)
    parsed: dict[str, Any] = json.loads(message)
    return parsed


def send(connection: ClientConnection, payload: Any) -> None:
    connection.send(payload if isinstance(payload, str) else json.dumps(payload))


def pcm(seconds: float) -> str:
    samples = (np.sin(np.arange(int(16000 * seconds)) / 10) * 8000).astype("<i2")
    return base64.b64encode(samples.tobytes()).decode()


def test_a_whole_session(fake: FakeVLLM) -> None:
    with ws(fake) as connection:
        created = event(connection)
        assert list(created) == ["type", "id", "created"]  # SessionCreated's fields, in order
        assert created["type"] == "session.created" and len(created["id"]) == len("sess-") + 16
        assert isinstance(created["created"], int)
        send(connection, {"type": "session.update", "model": MODEL})
        send(connection, {"type": "input_audio_buffer.commit"})
        for _ in range(4):
            send(connection, {"type": "input_audio_buffer.append", "audio": pcm(0.5)})
        send(connection, {"type": "input_audio_buffer.commit", "final": True})
        deltas = []
        while (received := event(connection))["type"] == "transcription.delta":
            assert list(received) == ["type", "delta"]
            deltas.append(received["delta"])
        assert list(received) == ["type", "text", "usage"]
        assert received["type"] == "transcription.done"
        assert received["text"] == "".join(deltas) and len(deltas) > 1
        usage = received["usage"]  # vLLM's UsageInfo, every field written
        assert list(usage) == [
            "prompt_tokens", "total_tokens", "completion_tokens", "prompt_tokens_details",
            "completion_tokens_details",
        ]  # fmt: skip
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] == 9 + len(deltas)
        # the session stays open for another utterance
        send(connection, {"type": "input_audio_buffer.commit"})
        send(connection, {"type": "input_audio_buffer.append", "audio": pcm(0.2)})
        send(connection, {"type": "input_audio_buffer.commit", "final": True})
        while event(connection)["type"] != "transcription.done":
            pass


@pytest.mark.parametrize(
    ("messages", "error", "code"),
    [
        (["{not json"], "Invalid JSON", "invalid_json"),
        ([{"type": "session.update"}], "Missing required field: model", "invalid_event"),
        (
            [{"type": "session.update", "model": "other"}],
            "The model `other` does not exist.",
            "model_not_found",
        ),
        (
            [{"type": "input_audio_buffer.commit"}],
            "Model not validated. Make sure to validate the model by sending a session.update event.",
            "model_not_validated",
        ),
        ([{"type": "response.create"}], "Unknown event type: response.create", "unknown_event"),
        ([{"type": "input_audio_buffer.append", "audio": "@@@"}], "Invalid audio data", "invalid_audio"),
        ([{"type": "input_audio_buffer.append", "audio": ""}], "Invalid audio data", "invalid_audio"),
        ([{"type": "input_audio_buffer.append", "audio": "AAAA"}], "Invalid audio data", "invalid_audio"),
    ],
)
def test_errors_are_vllms_events(fake: FakeVLLM, messages: list[Any], error: str, code: str) -> None:
    with ws(fake) as connection:
        assert event(connection)["type"] == "session.created"
        for message in messages:
            send(connection, message)
        received = event(connection)
        assert received == {"type": "error", "error": error, "code": code}
        # an error does not end the session
        send(connection, {"type": "session.update", "model": MODEL})
        send(connection, {"type": "input_audio_buffer.commit"})
        send(connection, {"type": "input_audio_buffer.append", "audio": pcm(0.1)})
        send(connection, {"type": "input_audio_buffer.commit", "final": True})
        while event(connection)["type"] != "transcription.done":
            pass


def test_an_append_without_audio_is_a_processing_error(fake: FakeVLLM) -> None:
    with ws(fake) as connection:
        event(connection)
        send(connection, {"type": "input_audio_buffer.append"})
        received = event(connection)
        assert received["code"] == "processing_error"
        assert received["error"].startswith(
            "1 validation error for InputAudioBufferAppend\naudio\n  Field required"
        )


def test_the_end_of_the_audio_before_the_first_commit_waits_for_it(fake: FakeVLLM) -> None:
    with ws(fake) as connection:
        event(connection)
        send(connection, {"type": "session.update", "model": MODEL})
        send(connection, {"type": "input_audio_buffer.append", "audio": pcm(0.5)})
        send(connection, {"type": "input_audio_buffer.commit", "final": True})
        with pytest.raises(TimeoutError):
            connection.recv(timeout=0.2)  # nothing until a plain commit
        send(connection, {"type": "input_audio_buffer.commit"})
        while event(connection)["type"] != "transcription.done":
            pass


def test_a_binary_frame_drops_the_connection(fake: FakeVLLM) -> None:
    with ws(fake) as connection:
        event(connection)
        connection.send(b"\x00\x01")
        with pytest.raises(ConnectionClosedError) as dropped:
            connection.recv(timeout=5)
    assert dropped.value.rcvd is None  # no close frame, as vLLM's handler failing on receive_text()


def handshake(fake: FakeVLLM, path: str = "/v1/realtime", key: str | None = None) -> bytes:
    """The raw answer to a WebSocket handshake (status line, headers, body)."""
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    request = (
        f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{auth}\r\n"
    )
    with socket.create_connection(("127.0.0.1", fake.port), timeout=5) as sock:
        sock.sendall(request.encode())
        return sock.recv(65536)


def test_the_handshake(fake: FakeVLLM) -> None:
    answer = handshake(fake)
    assert answer.startswith(b"HTTP/1.1 101 ")
    assert b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in answer  # RFC 6455's example key and accept
    fake.settings.tasks = SPEECH_TASKS  # uvicorn answers a route that is not mounted with a bare 403
    refused = handshake(fake)
    assert refused.startswith(b"HTTP/1.1 403 ") and refused.endswith(b"\r\n\r\n")
    fake.settings.tasks = REALTIME_TASKS
    assert handshake(fake, "/v1/embeddings").startswith(b"HTTP/1.1 403 ")


def test_the_api_key_guards_the_route(fake: FakeVLLM) -> None:
    fake.settings.api_key = "sk-1"
    with pytest.raises(InvalidStatus) as refused:
        ws(fake)
    assert refused.value.response.status_code == 401
    assert json.loads(refused.value.response.body) == {"error": "Unauthorized"}
    with ws(fake, Authorization="Bearer sk-1") as connection:
        assert event(connection)["type"] == "session.created"


def test_plain_http_to_the_route_is_not_found(fake: FakeVLLM) -> None:
    answer = httpx.get(fake.url + "/v1/realtime")
    assert answer.status_code == 404 and answer.json() == {"detail": "Not Found"}
    assert "/v1/realtime" not in httpx.get(fake.url + "/openapi.json").json()["paths"]  # as FastAPI's


def test_the_session_is_recorded(fake: FakeVLLM) -> None:
    with ws(fake) as connection:
        event(connection)
        send(connection, {"type": "session.update", "model": MODEL})
        send(connection, {"type": "input_audio_buffer.append", "audio": pcm(0.25)})
        event_sent = {"type": "session.update", "model": MODEL}
    session = fake.realtime_sessions[0]
    assert session.ended.wait(5)
    assert session.events[0] == event_sent and session.close_code == 1000
    assert len(session.audio) == 8000
