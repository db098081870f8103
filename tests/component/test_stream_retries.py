"""Opening ``transcribe_stream`` / ``translate_stream`` is retried as any request is (an error status or a
connection that fails before the answer); a stream that breaks once output was read is not retried."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import vllm_tasks as vt
from vllm_tasks.testing import FakeVLLM, Reply

FOX = Path(__file__).resolve().parents[1] / "data" / "audio" / "fox.wav"


@dataclass(frozen=True)
class Call:
    """A streamed method, its unstreamed twin and the path both post to."""

    method: str
    whole: str
    path: str


@pytest.fixture(
    params=[
        Call("transcribe_stream", "transcribe", "/v1/audio/transcriptions"),
        Call("translate_stream", "translate", "/v1/audio/translations"),
    ],
    ids=["transcribe_stream", "translate_stream"],
)
def call(request: pytest.FixtureRequest) -> Call:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def client(stt_fake: FakeVLLM, make_client: Callable[..., Any]) -> Any:
    return make_client(stt_fake.url, max_retries=2)


def _read(client: Any, method: str, received: list[Any] | None = None) -> list[Any]:
    """The events of ``client.METHOD(FOX)`` (an async stream read on the wrapper's loop), each appended to
    ``received`` as it arrives."""
    events = [] if received is None else received
    stream = getattr(client, method)(FOX)
    if not hasattr(stream, "__aiter__"):
        events.extend(stream)
        return events

    async def read() -> None:
        async for event in stream:
            events.append(event)

    client._loop.run_until_complete(read())
    return events


def test_a_503_before_the_stream_is_retried(
    stt_fake: FakeVLLM, client: Any, call: Call, no_sleep: list[float]
) -> None:
    expected = getattr(client, call.whole)(FOX).text
    stt_fake.clear_requests()
    stt_fake.fail(503, path=call.path, retry_after=1)
    events = _read(client, call.method)
    assert "".join(event.text for event in events[:-1]) == events[-1].text == expected
    assert len(stt_fake.received(call.path)) == 2 and no_sleep == [1.0]


def test_a_persistent_503_raises_after_the_retries(
    stt_fake: FakeVLLM, client: Any, call: Call, no_sleep: list[float]
) -> None:
    stt_fake.fail(503, path=call.path, times=None)
    with pytest.raises(vt.ServiceUnavailableError):
        _read(client, call.method)
    assert len(stt_fake.received(call.path)) == 3 and len(no_sleep) == 2


def _broken_after_first_event(reply: Reply) -> Reply:
    assert reply.stream is not None

    def events() -> Iterator[bytes]:
        pieces = iter(reply.stream or ())
        yield next(pieces)
        raise ConnectionAbortedError("the server went away mid-stream")  # no last chunk is written

    return Reply(reply.status, reply.body, dict(reply.headers), stream=events())


def test_a_stream_that_breaks_after_the_first_delta_is_not_retried(
    stt_fake: FakeVLLM, client: Any, call: Call, no_sleep: list[float]
) -> None:
    stt_fake.mutate(_broken_after_first_event, path=call.path)
    received: list[Any] = []
    with pytest.raises(vt.APIConnectionError):
        _read(client, call.method, received)
    assert len(received) == 1 and received[0].text
    assert len(stt_fake.received(call.path)) == 1 and no_sleep == []


def test_a_connection_reset_before_the_answer_is_retried(
    stt_fake: FakeVLLM, client: Any, call: Call, no_sleep: list[float]
) -> None:
    expected = getattr(client, call.whole)(FOX).text
    stt_fake.clear_requests()
    stt_fake.drop(path=call.path)
    assert _read(client, call.method)[-1].text == expected
    assert len(stt_fake.received(call.path)) == 2 and len(no_sleep) == 1
