"""transcribe / translate / transcribe_stream, replayed from responses recorded on the real `stt` fixture."""

from __future__ import annotations

import asyncio
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile as sf
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import audio, transcription
from vllm_tasks.calls import CallOptions
from vllm_tasks.transcription import ChunkResult, StreamParser, TranscribeParams
from vllm_tasks.types.audio import Transcription, TranscriptionSegment, format_timestamp

from .conftest import BASE
from .recorded import add_recorded, exchange, mock_server, recorded_json

AUDIO = Path(__file__).resolve().parent.parent / "data" / "audio"
FOX = AUDIO / "fox.wav"
TRANSCRIBE = f"{BASE}/v1/audio/transcriptions"
TRANSLATE = f"{BASE}/v1/audio/translations"


def form(request: httpx.Request) -> dict[str, Any]:
    """The non-file fields of a multipart request (repeated keys become lists)."""
    body = request.read().decode("latin-1")
    fields: dict[str, Any] = {}
    for match in re.finditer(r'name="([^"]+)"\r\n\r\n(.*?)\r\n--', body, re.DOTALL):
        key, value = match.group(1), match.group(2)
        if key in fields:
            fields[key] = [*([fields[key]] if isinstance(fields[key], str) else fields[key]), value]
        else:
            fields[key] = value
    return fields


def uploaded(request: httpx.Request) -> bytes:
    body = request.read()
    start = body.index(b'name="file"')
    start = body.index(b"\r\n\r\n", start) + 4
    return body[start : body.index(b"\r\n--", start)]


def audio_requests(httpx_mock: HTTPXMock) -> list[httpx.Request]:
    return [r for r in httpx_mock.get_requests() if r.url.path.startswith("/v1/audio/")]


def stream_lines(name: str) -> list[str]:
    return str(exchange("stt", name)["response"]["body_text"]).split("\n")


def collect(client: Any, stream: Any) -> list[Any]:
    """Iterate a TranscriptionStream, or an AsyncTranscriptionStream on the wrapped client's loop."""
    if hasattr(stream, "__aiter__"):

        async def run() -> list[Any]:
            return [event async for event in stream]

        loop: asyncio.AbstractEventLoop = client._loop
        return loop.run_until_complete(run())
    return list(stream)


# ------------------------------------------------------------------------------- types and rendering


def test_timestamps_srt_and_vtt() -> None:
    assert format_timestamp(0) == "00:00:00,000"
    assert format_timestamp(3723.4567) == "01:02:03,457"
    assert format_timestamp(59.9996, separator=".") == "00:01:00.000"
    result = Transcription(
        text="Hello there. General Kenobi.",
        duration=5.0,
        segments=[
            TranscriptionSegment(start=0.0, end=1.5, text=" Hello there."),
            TranscriptionSegment(start=1.5, end=1.5, text="  "),
            TranscriptionSegment(start=2.0, end=4.25, text="General --> Kenobi.\n\nYes"),
        ],
    )
    assert result.to_srt() == (
        "1\n00:00:00,000 --> 00:00:01,500\nHello there.\n\n"
        "2\n00:00:02,000 --> 00:00:04,250\nGeneral -> Kenobi.\nYes\n"
    )
    assert result.to_vtt() == (
        "WEBVTT\n\n00:00:00.000 --> 00:00:01.500\nHello there.\n\n"
        "00:00:02.000 --> 00:00:04.250\nGeneral --&gt; Kenobi.\nYes\n"
    )
    assert result.to_text() == "Hello there. General Kenobi."
    no_segments = Transcription(text=" Hi.", duration=2.0)
    assert no_segments.to_srt() == "1\n00:00:00,000 --> 00:00:02,000\nHi.\n"
    assert Transcription(text="").to_vtt() == "WEBVTT\n"
    assert json.loads(no_segments.to_json())["text"] == " Hi."
    assert no_segments.model_copy(update={"response_format": "text"}).formatted() == "Hi."


# ------------------------------------------------------------------------------------- text merging


def test_clean_text_and_word_overlap() -> None:
    assert transcription.clean_text(" a  b\t\tc ") == "a b c"
    assert transcription.overlap_words("the lazy dog.", "Dog, jumped") == 1
    assert transcription.overlap_words("over the lazy", "the lazy dog") == 2
    assert transcription.overlap_words("abc", "def") == 0
    assert (
        transcription.merge_texts([" one two  three", "three four", "", "four five."])
        == "one two three four five."
    )
    assert transcription.merge_texts(["a b", "b c"], dedupe=False) == "a b b c"


def chunk(index: int, start: float, own: float, end: float) -> audio.AudioChunk:
    return audio.AudioChunk(index, start, own, end, np.zeros(int((end - start) * 16000), np.float32))


def test_merge_chunks_offsets_clips_and_fills_segments() -> None:
    first = Transcription(
        text="Once upon a time.",
        segments=[TranscriptionSegment(start=0.0, end=2.0, text="Once upon a time.")],
        usage={"type": "duration", "seconds": 20},
    )
    second = Transcription(
        text="time. There was a river.",
        segments=[
            TranscriptionSegment(start=0.0, end=1.0, text="time. There"),
            TranscriptionSegment(start=1.0, end=30.0, text="was a river."),
        ],
        usage={"type": "duration", "seconds": 15},
    )
    third = Transcription(text="  The end. ")  # json request: no segments
    merged = transcription.merge_chunks(
        [
            ChunkResult(chunk(0, 0, 0, 19.5), first),
            ChunkResult(chunk(1, 19.0, 19.5, 34.0), second),
            ChunkResult(chunk(2, 33.5, 34.0, 40.0), None),  # silent
            ChunkResult(chunk(3, 39.5, 40.0, 45.0), third),
        ],
        task="transcribe",
        model="whisper-base",
        response_format="srt",
        language="en",
    )
    assert merged.text == "Once upon a time. There was a river. The end."
    assert [(s.id, s.start, s.end, s.text) for s in merged.segments] == [
        (0, 0.0, 2.0, "Once upon a time."),
        (1, 19.5, 20.0, "There"),  # starts inside the overlap: clipped to the chunk's own span
        (2, 20.0, 34.0, "was a river."),  # ends past the chunk: clipped
        (3, 40.0, 45.0, "The end."),
    ]
    assert merged.duration == 45.0 and merged.requests == 3
    assert merged.usage is not None and merged.usage.seconds == 45  # ceil(45.0): the whole file
    assert "  " not in merged.text


def test_merge_chunks_usage_is_the_whole_audio_rounded_up() -> None:
    # vLLM reports usage.seconds = ceil(duration) for a whole file (tests/entrypoints/openai/
    # test_transcription_validation.py::test_long_audio_request); client-side pieces that overlap are
    # each rounded up by the server, so their sum (30 + 17 = 47 here) overstates a 45.9 s file.
    parts = [
        ChunkResult(
            chunk(0, 0.0, 0.0, 29.3), Transcription(text="a", usage={"type": "duration", "seconds": 30})
        ),
        ChunkResult(
            chunk(1, 28.8, 29.3, 45.9), Transcription(text="b", usage={"type": "duration", "seconds": 17})
        ),
    ]
    merged = transcription.merge_chunks(
        parts, task="transcribe", model="whisper-base", response_format="json", language="en"
    )
    assert merged.usage is not None and merged.usage.type == "duration" and merged.usage.seconds == 46


def test_complete_segments_adds_the_lost_tail() -> None:
    verbose = Transcription(
        text="Once upon a time.",
        segments=[TranscriptionSegment(start=0.0, end=4.0, text="Once upon a time.")],
    )
    done = transcription.complete_segments(verbose, " Once upon a time. There was a river.", 20.0)
    assert done.text == "Once upon a time. There was a river."
    assert [(s.start, s.end, s.text) for s in done.segments] == [
        (0.0, 4.0, "Once upon a time."),
        (4.0, 20.0, "There was a river."),
    ]
    different = transcription.complete_segments(verbose, "Something else entirely here.", 20.0)
    assert [(s.start, s.end, s.text) for s in different.segments] == [
        (0.0, 20.0, "Something else entirely here.")
    ]
    empty = transcription.complete_segments(Transcription(text=""), "All of it.", 9.0)
    assert [(s.start, s.end) for s in empty.segments] == [(0.0, 9.0)]


def test_text_missing_looks_for_speech_after_the_last_segment() -> None:
    rate = audio.TARGET_RATE
    speech = (0.3 * np.sin(np.arange(3 * rate) / 3)).astype(np.float32)
    samples = np.concatenate([speech, np.zeros(2 * rate, np.float32), speech])
    piece = audio.AudioChunk(0, 0.0, 0.0, 8.0, samples)
    at = [TranscriptionSegment(start=0.0, end=3.0, text="a")]
    assert transcription.text_missing(piece, Transcription(text="a", segments=at))  # speech at 5-8 s
    whole = [TranscriptionSegment(start=0.0, end=7.8, text="a")]
    assert not transcription.text_missing(piece, Transcription(text="a", segments=whole))
    assert transcription.text_missing(piece, Transcription(text=""))
    quiet = audio.AudioChunk(0, 0.0, 0.0, 2.0, np.zeros(2 * rate, np.float32))
    assert not transcription.text_missing(quiet, Transcription(text=""))


# ------------------------------------------------------------------------------------------ streams


def test_stream_parser_on_recorded_vllm_stream_with_usage() -> None:
    parser = StreamParser(model="whisper-base")
    deltas = parser.feed_all(stream_lines("transcription_stream_usage"))
    result = parser.finish()
    assert "".join(d.text for d in deltas) == result.text == "The quick brown fox jump over the lazy dog."
    assert deltas[-1].finish_reason == "stop" and result.finish_reasons == ["stop"]
    assert result.usage is not None and result.usage.completion_tokens == 11
    assert parser.done


def test_stream_parser_long_audio_one_finish_per_server_chunk_and_no_double_space() -> None:
    parser = StreamParser()
    deltas = parser.feed_all(stream_lines("transcription_stream_long"))
    result = parser.finish()
    assert result.finish_reasons == ["stop", "stop"]
    assert {d.chunk for d in deltas} == {0, 1}
    text = "".join(d.text for d in deltas)
    assert text == result.text and "  " not in text
    assert "song. The whole village came" in text or "village came" in text
    server_json = recorded_json("stt", "transcription_json_long")["text"]
    assert "  " in server_json  # what vLLM's json join looks like
    assert transcription.clean_text(server_json) == result.text


def test_stream_parser_translation_stream() -> None:
    parser = StreamParser(task="translate")
    parser.feed_all(stream_lines("translation_stream"))
    assert parser.finish().text == transcription.clean_text(recorded_json("stt", "translation_json")["text"])


def test_stream_parser_openai_events() -> None:
    parser = StreamParser()
    lines = [
        'data: {"type": "transcript.text.delta", "delta": "Hello"}',
        "",
        ": keep-alive",
        'data: {"type": "transcript.text.delta", "delta": " world"}',
        "",
        'data: {"type": "transcript.text.done", "text": "Hello world.", "usage": {"type": "tokens",',
        'data: "total_tokens": 5}}',
        "",
    ]
    deltas = parser.feed_all(lines)
    assert [d.text for d in deltas] == ["Hello", " world"]
    result = parser.finish()
    assert result.text == "Hello world." and result.usage is not None and result.usage.total_tokens == 5


def test_stream_parser_error_frames_raise_stream_error() -> None:
    parser = StreamParser()
    parser.feed('data: {"choices": [{"delta": {"content": " Hi"}}]}')
    parser.feed("")
    parser.feed('data: {"error": {"message": "engine died", "type": "InternalServerError", "code": 500}}')
    with pytest.raises(vt.StreamError, match="engine died") as caught:
        parser.feed("")
    assert caught.value.code == 500
    with pytest.raises(vt.StreamError, match="undecodable"):
        StreamParser().feed_all(["data: {oops", ""])
    with pytest.raises(vt.StreamError, match="bad audio"):
        StreamParser().feed_all(['data: {"type": "error", "message": "bad audio"}', ""])


def test_stream_parser_handles_a_cut_stream() -> None:
    # Issue 11: a stream closed before [DONE] is truncated text, raised (not returned as a success).
    parser = StreamParser()
    parser.feed_all(['data: {"choices": [{"delta": {"content": " partial"}}]}'])  # no blank line, no [DONE]
    with pytest.raises(vt.StreamError, match="before \\[DONE\\]") as caught:
        parser.finish()
    assert caught.value.body == {"text": "partial"} and not parser.done


# ------------------------------------------------------------------------------------- form fields


def test_form_fields() -> None:
    params = TranscribeParams(
        language="en",
        temperature=0.0,
        timestamp_granularities=["segment", "word"],
        use_beam_search=True,
        n=2,
        vllm_xargs={"a": 1},
    )
    call = CallOptions(extra_body={"hotwords": "vLLM", "priority": 3, "flag": False})
    fields = transcription.form_fields(params, call, model="m", fmt="verbose_json")
    assert fields == {
        "model": "m",
        "language": "en",
        "response_format": "verbose_json",
        "temperature": "0.0",
        "use_beam_search": "true",
        "n": "2",
        "vllm_xargs": '{"a": 1}',
        "timestamp_granularities[]": ["segment", "word"],
        "hotwords": "vLLM",
        "priority": "3",
        "flag": "false",
    }
    streamed = transcription.form_fields(
        TranscribeParams(), CallOptions(), model=None, fmt="json", stream=True, include_usage=True
    )
    assert streamed == {"response_format": "json", "stream": "true", "stream_include_usage": "true"}


@pytest.mark.parametrize(
    ("params", "task", "stream", "field"),
    [
        (TranscribeParams(response_format="xml"), "transcribe", False, "response_format"),  # type: ignore[arg-type]
        (TranscribeParams(use_beam_search=True), "transcribe", True, "use_beam_search"),
        (TranscribeParams(response_format="srt"), "transcribe", True, "response_format"),
        (TranscribeParams(n=3), "transcribe", False, "n"),
        (TranscribeParams(timestamp_granularities="word"), "transcribe", False, "timestamp_granularities"),
        (TranscribeParams(timestamp_granularities=["char"]), "transcribe", False, "timestamp_granularities"),
        (TranscribeParams(timestamp_granularities=["word"]), "translate", False, "timestamp_granularities"),
    ],
)
def test_validate(params: TranscribeParams, task: Any, stream: bool, field: str) -> None:
    with pytest.raises(vt.InvalidInputError) as caught:
        transcription.validate(params, task=task, stream=stream)
    assert caught.value.field == field


def test_chunking_options_validation() -> None:
    with pytest.raises(vt.InvalidInputError):
        transcription.ChunkingOptions(max_seconds=45)
    with pytest.raises(vt.InvalidInputError):
        transcription.ChunkingOptions(concurrency=0)
    with pytest.raises(vt.InvalidInputError):
        transcription.ChunkingOptions(mode="sometimes")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------- through the client


def test_transcribe_json_defaults_model_to_served_name(
    httpx_mock: HTTPXMock, make_client: Callable[..., Any]
) -> None:
    mock_server(httpx_mock, "stt")
    add_recorded(httpx_mock, "stt", "transcription_json")
    result = make_client().transcribe(FOX, language="en")
    assert result.text == "The quick brown fox jump over the lazy dog."
    assert result.usage is not None and result.usage.seconds == 4
    assert result.model == "whisper-base" and result.duration == pytest.approx(3.77, abs=0.01)
    (request,) = audio_requests(httpx_mock)
    assert form(request) == {"model": "whisper-base", "language": "en", "response_format": "json"}
    assert uploaded(request) == FOX.read_bytes()


def test_client_model_wins_over_served_name(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    mock_server(httpx_mock, "stt")
    add_recorded(httpx_mock, "stt", "error_unknown_model")
    with pytest.raises(vt.NotFoundError, match="Valid aliases: whisper-base"):
        make_client(model="no-such-model").transcribe(FOX)
    assert form(audio_requests(httpx_mock)[0])["model"] == "no-such-model"


def test_srt_asks_for_verbose_json_and_renders_locally(
    httpx_mock: HTTPXMock, make_client: Callable[..., Any]
) -> None:
    mock_server(httpx_mock, "stt")
    add_recorded(httpx_mock, "stt", "transcription_verbose_json")
    result = make_client().transcribe(AUDIO / "numbers.wav", language="en", response_format="srt")
    assert form(audio_requests(httpx_mock)[0])["response_format"] == "verbose_json"
    assert result.formatted() == result.to_srt()
    assert result.to_srt().startswith("1\n00:00:00,000 --> 00:00:06,160\n1, 2, 3, 4, 5.")
    assert result.language == "en" and result.segments[0].tokens


def test_timestamp_granularities_use_the_bracket_key(
    httpx_mock: HTTPXMock, make_client: Callable[..., Any]
) -> None:
    mock_server(httpx_mock, "stt")
    add_recorded(httpx_mock, "stt", "transcription_granularities")
    make_client().transcribe(FOX, response_format="verbose_json", timestamp_granularities=["segment", "word"])
    fields = form(audio_requests(httpx_mock)[0])
    assert fields["timestamp_granularities[]"] == ["segment", "word"]


def test_translate(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    mock_server(httpx_mock, "stt")
    add_recorded(httpx_mock, "stt", "translation_json")
    result = make_client().translate(AUDIO / "french.wav", language="fr")
    assert result.task == "translate" and result.text and result.usage is None
    assert audio_requests(httpx_mock)[0].url.path == "/v1/audio/translations"


def test_unreadable_audio_fails_before_any_request(
    httpx_mock: HTTPXMock, make_client: Callable[..., Any]
) -> None:
    with pytest.raises(vt.InvalidInputError, match="cannot be decoded"):
        make_client().transcribe(b"\x00not audio" * 100)
    assert httpx_mock.get_requests() == []


def test_server_decodes_with_prepare_never(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    mock_server(httpx_mock, "stt")
    add_recorded(httpx_mock, "stt", "error_corrupt_audio")
    with pytest.raises(vt.BadRequestError, match="Invalid or corrupted audio"):
        make_client().transcribe(b"\x00not audio" * 100, prepare="never")


def test_srt_is_refused_by_the_server_so_we_never_send_it() -> None:
    body = recorded_json("stt", "error_srt")
    assert "only support response_format" in body["error"]["message"]
    assert transcription.server_format("srt") == transcription.server_format("vtt") == "verbose_json"


def test_beam_search_gate(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    mock_server(httpx_mock, "stt", version="0.17.0")
    with pytest.raises(vt.UnsupportedByServer, match=r"0\.18\.0"):
        make_client().transcribe(FOX, use_beam_search=True, n=2)
    assert audio_requests(httpx_mock) == []


def test_beam_search_on_a_new_server(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    mock_server(httpx_mock, "stt")
    add_recorded(httpx_mock, "stt", "transcription_beam_search")
    result = make_client().transcribe(FOX, use_beam_search=True, n=2, max_completion_tokens=4)
    fields = form(audio_requests(httpx_mock)[0])
    assert (fields["use_beam_search"], fields["n"], fields["max_completion_tokens"]) == ("true", "2", "4")
    assert result.text == "The quick brown fox"


def test_beam_search_with_stream_is_refused_before_sending(
    httpx_mock: HTTPXMock, make_client: Callable[..., Any]
) -> None:
    with pytest.raises(vt.InvalidInputError, match="streaming"):
        make_client().transcribe_stream(FOX, use_beam_search=True)
    assert httpx_mock.get_requests() == []
    assert "not currently supported" in recorded_json("stt", "error_beam_search_stream")["error"]["message"]


def test_url_input_is_fetched_without_the_api_key(
    httpx_mock: HTTPXMock, make_client: Callable[..., Any]
) -> None:
    mock_server(httpx_mock, "stt")
    httpx_mock.add_response(url="https://files.example/fox.wav", content=FOX.read_bytes())
    add_recorded(httpx_mock, "stt", "transcription_json")
    result = make_client(api_key="secret").transcribe("https://files.example/fox.wav", language="en")
    assert result.text.startswith("The quick brown fox")
    fetch = next(r for r in httpx_mock.get_requests() if r.url.host == "files.example")
    assert "authorization" not in fetch.headers
    request = audio_requests(httpx_mock)[0]
    assert request.headers["authorization"] == "Bearer secret"
    assert b'filename="fox.wav"' in request.read()


def test_url_input_error_status(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    httpx_mock.add_response(url="https://files.example/gone.wav", status_code=404)
    with pytest.raises(vt.InvalidInputError, match="HTTP 404") as caught:
        make_client().transcribe("https://files.example/gone.wav")
    assert caught.value.source == "https://files.example/gone.wav"


def test_array_input_is_uploaded_as_16k_flac(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    mock_server(httpx_mock, "stt")
    add_recorded(httpx_mock, "stt", "transcription_json")
    samples = np.sin(np.arange(44100) / 7).astype(np.float32)
    make_client().transcribe((np.stack([samples, samples], axis=1), 44100))
    content = uploaded(audio_requests(httpx_mock)[0])
    assert content[:4] == b"fLaC"


def long_audio_callback(request: httpx.Request) -> httpx.Response:
    """A fake server for client chunks: echoes the chunk's file name as text, one segment per chunk."""
    body = request.read()
    name = re.search(rb'filename="([^"]+)"', body)
    assert name is not None
    label = name.group(1).decode().rsplit("-", 1)[1].split(".")[0]
    verbose = b'name="response_format"\r\n\r\nverbose_json' in body
    payload: dict[str, Any] = {"text": f" part {label}.", "usage": {"type": "duration", "seconds": 20}}
    if verbose:
        start = body.index(b"fLaC")
        duration = sf.info(io.BytesIO(body[start : body.rindex(b"\r\n--")])).duration
        segment = {"id": 0, "start": 0.0, "end": duration, "text": f" part {label}."}
        segments = [segment] if label != "0001" else []
        payload = {"text": f" part {label}." if segments else "", "language": "en", "segments": segments}
    return httpx.Response(200, json=payload)


def test_long_audio_is_chunked_client_side(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    mock_server(httpx_mock, "stt")
    httpx_mock.add_callback(long_audio_callback, url=TRANSCRIBE, is_reusable=True)
    result = make_client().transcribe(AUDIO / "long45.wav", language="en", chunking="client")
    requests = audio_requests(httpx_mock)
    assert len(requests) == result.requests == 2
    assert result.text == "part 0000. part 0001."
    assert result.segments[0].start == 0 and result.segments[-1].end == pytest.approx(45.909, abs=0.01)
    assert all(form(r)["response_format"] == "json" for r in requests)
    for request in requests:
        content = uploaded(request)
        assert content[:4] == b"fLaC" and len(content) < 1_000_000


def test_chunk_without_timestamps_is_asked_again_as_json(
    httpx_mock: HTTPXMock, make_client: Callable[..., Any]
) -> None:
    mock_server(httpx_mock, "stt")
    httpx_mock.add_callback(long_audio_callback, url=TRANSCRIBE, is_reusable=True)
    result = make_client().transcribe(
        AUDIO / "long45.wav", language="en", response_format="vtt", chunking="client"
    )
    formats = [form(r)["response_format"] for r in audio_requests(httpx_mock)]
    assert formats.count("verbose_json") == 3 and formats.count("json") == 1  # chunk 0001 had no segments
    assert result.requests == 4
    assert result.text == "part 0000. part 0001. part 0002."
    second = result.segments[1]
    assert second.text == "part 0001." and second.end - second.start > 10  # spans its chunk
    assert result.to_vtt().count("-->") == 3


def test_server_chunking_keeps_one_request(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    mock_server(httpx_mock, "stt")
    add_recorded(httpx_mock, "stt", "transcription_json_long")
    result = make_client().transcribe(AUDIO / "long45.wav", language="en", chunking="server")
    assert result.requests == 1 and "  " not in result.text
    assert uploaded(audio_requests(httpx_mock)[0]) == (AUDIO / "long45.wav").read_bytes()


def add_stream(httpx_mock: HTTPXMock, name: str, url: str = TRANSCRIBE) -> None:
    response = exchange("stt", name)["response"]
    httpx_mock.add_response(
        url=url,
        status_code=response["status"],
        headers={"content-type": response["headers"]["content-type"]},
        content=response["body_text"].encode(),
    )


def test_transcribe_stream(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    mock_server(httpx_mock, "stt")
    add_stream(httpx_mock, "transcription_stream_usage")
    client = make_client()
    stream = client.transcribe_stream(FOX, language="en")
    events = collect(client, stream)
    *deltas, final = events
    assert all(isinstance(d, vt.types.TranscriptionDelta) for d in deltas)
    assert isinstance(final, vt.types.Transcription) and stream.result is final
    assert final.text == "The quick brown fox jump over the lazy dog." == "".join(d.text for d in deltas)
    assert final.usage is not None and final.usage.prompt_tokens == 382
    fields = form(audio_requests(httpx_mock)[0])
    assert fields["stream"] == "true" and fields["stream_include_usage"] == "true"


def test_translate_stream(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    mock_server(httpx_mock, "stt")
    add_stream(httpx_mock, "translation_stream", TRANSLATE)
    client = make_client()
    events = collect(client, client.translate_stream(AUDIO / "french.wav", include_usage=False))
    assert events[-1].task == "translate" and events[-1].text
    assert "stream_include_usage" not in form(audio_requests(httpx_mock)[0])


def test_stream_error_status_raises_at_the_call(
    httpx_mock: HTTPXMock, make_client: Callable[..., Any]
) -> None:
    mock_server(httpx_mock, "stt")
    add_stream(httpx_mock, "error_unsupported_language")
    with pytest.raises(vt.BadRequestError, match="Unsupported language"):
        make_client().transcribe_stream(FOX, language="xx")


def test_stream_error_frame_mid_stream(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    mock_server(httpx_mock, "stt")
    body = (
        'data: {"object":"transcription.chunk","choices":[{"delta":{"content":" The"}}]}\n\n'
        'data: {"error": {"message": "engine crashed", "type": "InternalServerError", "code": 500}}\n\n'
        "data: [DONE]\n\n"
    )
    httpx_mock.add_response(
        url=TRANSCRIBE, headers={"content-type": "text/event-stream"}, content=body.encode()
    )
    client = make_client()
    stream = client.transcribe_stream(FOX)
    with pytest.raises(vt.StreamError, match="engine crashed"):
        collect(client, stream)


def sse_piece(request: httpx.Request) -> httpx.Response:
    """A fake streaming server: each piece answers ' piece NNNN.' then a usage chunk."""
    name = re.search(rb'filename="([^"]+)"', request.read())
    assert name is not None
    label = name.group(1).decode().rsplit("-", 1)[1].split(".")[0]
    frames = [
        {"choices": [{"delta": {"content": f"  piece {label}"}}]},
        {"choices": [{"delta": {"content": "."}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}},
    ]
    body = "".join(f"data: {json.dumps(f)}\n\n" for f in frames) + "data: [DONE]\n\n"
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body.encode())


def test_long_stream_is_split_client_side_and_streamed_piece_after_piece(
    httpx_mock: HTTPXMock, make_client: Callable[..., Any]
) -> None:
    mock_server(httpx_mock, "stt")
    httpx_mock.add_callback(sse_piece, url=TRANSCRIBE, is_reusable=True)
    client = make_client()
    stream = client.transcribe_stream(AUDIO / "long45.wav", chunking="client")
    assert len(audio_requests(httpx_mock)) == 1  # the next piece is sent when the first is read
    events = collect(client, stream)
    final = events[-1]
    assert final.text == "piece 0000. piece 0001."
    assert "".join(e.text for e in events[:-1]) == final.text
    assert final.finish_reasons == ["stop", "stop"] and [e.chunk for e in events[:-1]] == [0, 0, 1, 1]
    assert final.usage is not None and final.usage.total_tokens == 26
    assert len(audio_requests(httpx_mock)) == 2
    assert all(uploaded(r)[:4] == b"fLaC" for r in audio_requests(httpx_mock))


def test_stream_of_short_audio_is_one_request(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    mock_server(httpx_mock, "stt")
    add_stream(httpx_mock, "transcription_stream_long")
    client = make_client()
    events = collect(client, client.transcribe_stream(AUDIO / "long45.wav"))  # 46 s: vLLM splits it
    assert events[-1].finish_reasons == ["stop", "stop"]
    assert uploaded(audio_requests(httpx_mock)[0]) == (AUDIO / "long45.wav").read_bytes()


@pytest.mark.parametrize("status", [204, 301, 307])
def test_a_stream_answered_by_a_redirect_or_nothing_is_a_typed_error(
    status: int, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "stt")
    headers = {"location": "https://vllm.example/v1/audio/transcriptions"} if status != 204 else {}
    httpx_mock.add_response(
        url=f"{BASE}/v1/audio/transcriptions", method="POST", status_code=status, headers=headers
    )
    with pytest.raises(vt.UnexpectedResponse, match=str(status)):
        make_client().transcribe_stream(FOX, language="en")
