"""transcribe_realtime against FakeVLLM's /v1/realtime: every source form, the events, the errors, the gate,
the API key, cancellation and timeouts (the fake's session is held to vLLM's in test_fake_realtime.py)."""

from __future__ import annotations

import asyncio
import base64
import io
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import vllm_tasks as vt
from vllm_tasks.testing import REALTIME_TASKS, SPEECH_TASKS, FakeVLLM, ReceivedRequest, Reply
from vllm_tasks.testing import content as fake_content
from vllm_tasks.testing.realtime import CloseFrame, RealtimeSession
from vllm_tasks.types.audio import Transcription, TranscriptionDelta

AUDIO = Path(__file__).resolve().parents[1] / "data" / "audio"
FOX = AUDIO / "fox.wav"
MODEL = "qwen3-asr-realtime"


def by_duration(request: ReceivedRequest) -> str:
    """A transcript that depends on the audio: its length in tenths of a second, as words."""
    seconds = fake_content.audio_seconds(request.files["file"].content) or 0.0
    return f" It lasts {round(seconds * 10)} tenths."


@pytest.fixture
def fake() -> Iterator[FakeVLLM]:
    with FakeVLLM(model=MODEL, tasks=REALTIME_TASKS, transcript=by_duration) as server:
        yield server


def run_sync(fake: FakeVLLM, source: Any, api_key: str | None = None, **options: Any) -> list[Any]:
    with vt.Client(fake.url, api_key=api_key) as client:
        return list(client.transcribe_realtime(source, **options))


def run_async(fake: FakeVLLM, source: Any, api_key: str | None = None, **options: Any) -> list[Any]:
    async def go() -> list[Any]:
        async with vt.AsyncClient(fake.url, api_key=api_key) as client:
            return [event async for event in await client.transcribe_realtime(source, **options)]

    return asyncio.run(go())


RUNS = [pytest.param(run_sync, id="sync"), pytest.param(run_async, id="async")]


def tone(seconds: float, rate: int) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def check_session(events: list[Any], fake: FakeVLLM, source: Any) -> Transcription:
    """The deltas joined equal the final text, which equals FakeVLLM's offline transcription of the audio."""
    *deltas, done = events
    assert deltas and all(isinstance(event, TranscriptionDelta) for event in deltas)
    assert isinstance(done, Transcription)
    assert "".join(delta.text for delta in deltas) == done.text
    with vt.Client(fake.url) as client:
        offline = client.transcribe(source).text
    assert done.text == offline
    assert done.model == MODEL
    return done


@pytest.mark.parametrize("run", RUNS)
def test_file_sources_give_the_offline_transcription(run: Callable[..., list[Any]], fake: FakeVLLM) -> None:
    data = FOX.read_bytes()
    texts = set()
    for source in (FOX, str(FOX), data, io.BytesIO(data)):
        done = check_session(run(fake, source), fake, data)
        texts.add(done.text)
    assert texts == {" It lasts 38 tenths.".strip()}
    numbers = check_session(run(fake, AUDIO / "numbers.wav"), fake, AUDIO / "numbers.wav")
    assert numbers.text != done.text  # another input, another answer


@pytest.mark.parametrize("run", RUNS)
def test_an_array_is_resampled_to_16k_pcm16(run: Callable[..., list[Any]], fake: FakeVLLM) -> None:
    done = check_session(run(fake, (tone(2.0, 44100), 44100)), fake, (tone(2.0, 44100), 44100))
    assert done.text == "It lasts 20 tenths."
    assert done.duration == pytest.approx(2.0, abs=1e-3)
    session = fake.realtime_sessions[0]
    assert len(session.audio) == pytest.approx(2 * 32000, abs=4)  # 16 kHz, 2 bytes a sample


def test_16k_audio_arrives_exactly(fake: FakeVLLM) -> None:
    samples = (np.arange(16000 * 3) % 2000 - 1000).astype(np.int16)
    run_sync(fake, (samples, 16000), chunk_seconds=0.25)
    session = fake.realtime_sessions[0]
    assert bytes(session.audio) == samples.astype("<i2").tobytes()
    appends = [e for e in session.events if e["type"] == "input_audio_buffer.append"]
    assert [len(base64.b64decode(e["audio"])) for e in appends] == [8000] * 12  # 0.25 s each


def test_the_session_is_vllms_sequence(fake: FakeVLLM) -> None:
    run_sync(fake, FOX)
    session = fake.realtime_sessions[0]
    kinds = [event["type"] for event in session.events]
    assert kinds[:2] == ["session.update", "input_audio_buffer.commit"]
    assert session.events[0]["model"] == MODEL
    assert "final" not in session.events[1]
    assert set(kinds[2:-1]) == {"input_audio_buffer.append"}
    assert session.events[-1] == {"type": "input_audio_buffer.commit", "final": True}
    assert session.ended.wait(5) and session.close_code == 1000


def chunks_float(seconds: float, rate: int, size: int) -> Iterator[np.ndarray]:
    audio = tone(seconds, rate)
    for start in range(0, len(audio), size):
        yield audio[start : start + size]


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize(
    ("make", "rate"),
    [
        pytest.param(lambda: chunks_float(1.5, 48000, 4800), 48000, id="float32-48k"),
        pytest.param(
            lambda: ((c * 32767).astype(np.int16) for c in chunks_float(1.5, 16000, 999)),
            None,
            id="int16-16k",
        ),
        pytest.param(
            lambda: ((c * 32767).astype("<i2").tobytes() for c in chunks_float(1.5, 8000, 333)),
            8000,
            id="pcm16-bytes-8k",
        ),
    ],
)
def test_iterators_of_chunks(
    run: Callable[..., list[Any]], fake: FakeVLLM, make: Callable[[], Any], rate: int | None
) -> None:
    done = run(fake, make(), sample_rate=rate)[-1]
    assert done.text == "It lasts 15 tenths."
    assert done.duration == pytest.approx(1.5, abs=2e-3)


def test_an_async_iterator_of_chunks(fake: FakeVLLM) -> None:
    async def chunks() -> AsyncIterator[np.ndarray]:
        for chunk in chunks_float(1.0, 16000, 1600):
            await asyncio.sleep(0)
            yield chunk

    events = run_async(fake, chunks())
    assert events[-1].text == "It lasts 10 tenths."


def test_the_sync_client_refuses_an_async_iterator_before_connecting(fake: FakeVLLM) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"\0\0"

    with vt.Client(fake.url) as client, pytest.raises(vt.InvalidInputError, match="async iterable"):
        client.transcribe_realtime(chunks())
    assert not fake.received("/v1/realtime")


@pytest.mark.parametrize(
    ("source", "options", "field"),
    [
        (np.zeros(100, np.float32), {}, "source"),
        (FOX, {"sample_rate": 16000}, "sample_rate"),
        (FOX, {"chunk_seconds": 0}, "chunk_seconds"),
        (FOX, {"pace": -1.0}, "pace"),
        (b"not audio at all", {}, "audio"),
        (iter([np.zeros(10, np.complex64)]), {}, "source[0]"),
        (iter([b"\0\0\0"]), {}, "source[0]"),
    ],
)
def test_bad_inputs_are_refused(fake: FakeVLLM, source: Any, options: dict[str, Any], field: str) -> None:
    with vt.Client(fake.url) as client, pytest.raises(vt.InvalidInputError) as refused:
        list(client.transcribe_realtime(source, **options))
    assert refused.value.field == field


def test_model_not_served_is_not_found(fake: FakeVLLM) -> None:
    with vt.Client(fake.url) as client, pytest.raises(vt.NotFoundError) as error:
        client.transcribe_realtime(FOX, model="other").until_done()
    assert error.value.kind == "model_not_found"
    assert error.value.status_code == 404 and error.value.param == "model"
    assert "`other` does not exist" in error.value.message


def rewrite_done(event: dict[str, Any]) -> Callable[[Any], Any]:
    import json

    def mutation(reply: Any) -> Any:
        assert isinstance(reply.upgrade, RealtimeSession)
        reply.upgrade.rewrite = lambda m: [json.dumps(event)] if "transcription.done" in m else [m]
        return reply

    return mutation


@pytest.mark.parametrize(
    ("code", "error", "status"),
    [
        ("invalid_audio", vt.BadRequestError, 400),
        ("invalid_json", vt.BadRequestError, 400),
        ("unknown_event", vt.BadRequestError, 400),
        ("model_not_validated", vt.BadRequestError, 400),
        ("processing_error", vt.InternalServerError, 500),
        ("something_new", vt.InternalServerError, 500),
    ],
)
def test_error_events_are_typed(fake: FakeVLLM, code: str, error: type[Exception], status: int) -> None:
    fake.mutate(
        rewrite_done({"type": "error", "error": f"it failed ({code})", "code": code}), path="/v1/realtime"
    )
    with vt.Client(fake.url) as client, pytest.raises(error) as raised:
        client.transcribe_realtime(FOX).until_done()
    assert type(raised.value) is error
    assert raised.value.status_code == status  # type: ignore[attr-defined]
    assert raised.value.body["code"] == code  # type: ignore[attr-defined]
    assert fake.realtime_sessions[0].ended.wait(5)  # the socket was closed


def test_a_server_without_the_route(fake: FakeVLLM) -> None:
    fake.settings.tasks = SPEECH_TASKS
    with vt.Client(fake.url) as client, pytest.raises(vt.EndpointNotServed) as raised:
        client.transcribe_realtime(FOX)
    assert raised.value.task == "realtime" and raised.value.status_code == 403
    assert "realtime" in str(raised.value)
    assert len(fake.received("/v1/realtime")) == 1  # refused: not retried


def test_the_version_gate_comes_before_connecting(fake: FakeVLLM) -> None:
    fake.settings.version = "0.14.1"
    with vt.Client(fake.url) as client, pytest.raises(vt.UnsupportedByServer) as raised:
        client.transcribe_realtime(FOX)
    assert raised.value.required_version == "0.16.0"
    assert not fake.received("/v1/realtime")
    fake.settings.version = "0.16.0"
    with vt.Client(fake.url) as client:
        assert client.transcribe_realtime(FOX).until_done().text


def test_the_api_key_is_sent(fake: FakeVLLM) -> None:
    fake.settings.api_key = "sk-realtime"
    with vt.Client(fake.url, api_key="sk-realtime", headers={"x-team": "a"}) as client:
        client.transcribe_realtime(FOX, extra_headers={"x-call": "b"}).until_done()
    handshake = fake.received("/v1/realtime")[-1]
    assert handshake.headers["authorization"] == "Bearer sk-realtime"
    assert handshake.headers["x-team"] == "a" and handshake.headers["x-call"] == "b"
    assert handshake.headers["user-agent"].startswith("vllm-tasks/")
    with vt.Client(fake.url, api_key="wrong") as client, pytest.raises(vt.AuthenticationError):
        client.transcribe_realtime(FOX)


def test_transient_handshake_failures_are_retried(fake: FakeVLLM) -> None:
    fake.fail(503, path="/v1/realtime", times=2, retry_after=0)
    with vt.Client(fake.url) as client:
        assert client.transcribe_realtime(FOX).until_done().text == "It lasts 38 tenths."
    assert len(fake.received("/v1/realtime")) == 3


def test_no_answer_in_time_is_a_timeout(fake: FakeVLLM) -> None:
    def no_done(reply: Any) -> Any:
        reply.upgrade.rewrite = lambda m: [] if "transcription.done" in m else [m]
        return reply

    fake.mutate(no_done, path="/v1/realtime")
    with vt.Client(fake.url, timeout=0.5) as client, pytest.raises(vt.APITimeoutError):
        client.transcribe_realtime(FOX).until_done()


def test_a_session_closed_before_done(fake: FakeVLLM) -> None:
    def closes(reply: Any) -> Any:
        reply.upgrade.rewrite = lambda m: [CloseFrame(1000)] if "transcription.done" in m else [m]
        return reply

    fake.mutate(closes, path="/v1/realtime")
    with vt.Client(fake.url) as client, pytest.raises(vt.StreamError, match=r"before transcription\.done"):
        client.transcribe_realtime(FOX).until_done()


def test_stopping_early_closes_the_socket(fake: FakeVLLM) -> None:
    fake.settings.transcript = fake_content.DEFAULT_TRANSCRIPT  # words go out as the audio arrives
    with (
        vt.Client(fake.url) as client,
        client.transcribe_realtime(FOX, chunk_seconds=0.1, pace=4.0) as session,
    ):
        first = next(iter(session))
        assert isinstance(first, TranscriptionDelta) and first.text == "The"
    server = fake.realtime_sessions[0]
    assert server.ended.wait(5) and server.close_code == 1000
    assert not any(e.get("final") for e in server.events)  # stopped before the audio's end


def test_cancelling_the_task_closes_the_socket(fake: FakeVLLM) -> None:
    fake.settings.transcript = fake_content.DEFAULT_TRANSCRIPT
    first_delta = asyncio.Event()

    async def go() -> None:
        async with vt.AsyncClient(fake.url) as client:
            session = await client.transcribe_realtime(FOX, chunk_seconds=0.1, pace=1.0)

            async def read() -> None:
                async for _ in session:
                    first_delta.set()

            task = asyncio.create_task(read())
            await first_delta.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(go())
    server = fake.realtime_sessions[0]
    assert server.ended.wait(5) and server.close_code == 1000
    assert len(server.audio) < FOX.stat().st_size / 2  # paced: cancelled well before the end


def test_usage_is_counted(fake: FakeVLLM) -> None:
    with vt.Client(fake.url) as client:
        done = client.transcribe_realtime(FOX).until_done()
        assert done.usage is not None and done.usage.completion_tokens == 4  # four words
        assert client.usage.completion_tokens == 4
        assert client.usage.prompt_tokens == done.usage.prompt_tokens


def test_an_http_client_is_refused(fake: FakeVLLM) -> None:
    import httpx

    with (
        httpx.Client() as http,
        vt.Client(fake.url, http_client=http) as client,
        pytest.raises(vt.InvalidInputError, match="http_client"),
    ):
        client.transcribe_realtime(FOX)


def test_without_websockets_the_extra_is_named(fake: FakeVLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "websockets", None)
    monkeypatch.setitem(sys.modules, "websockets.sync", None)
    monkeypatch.setitem(sys.modules, "websockets.sync.client", None)
    with vt.Client(fake.url) as client, pytest.raises(vt.MissingDependency) as missing:
        client.transcribe_realtime(FOX)
    assert missing.value.extra == "realtime"


@pytest.mark.parametrize("run", RUNS)
def test_a_redirect_never_carries_the_key_to_another_origin(
    run: Callable[..., list[Any]], fake: FakeVLLM
) -> None:
    """The reason for websockets >= 17.0: 16.0's asyncio client sent Authorization on a cross-origin
    redirect."""
    with FakeVLLM(model=MODEL, tasks=REALTIME_TASKS, api_key="other-key") as other:
        target = other.url.replace("http", "ws") + "/v1/realtime"

        def redirect(reply: Any) -> Any:
            return Reply(307, b"", {"location": target})

        fake.mutate(redirect, path="/v1/realtime", times=None)
        with pytest.raises((vt.AuthenticationError, vt.UnexpectedResponse)):
            run(fake, FOX, api_key="sk-mine")
        assert all("authorization" not in r.headers for r in other.received("/v1/realtime"))
