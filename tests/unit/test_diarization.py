"""``response_format="diarized_json"`` (issue 26, item 3): the speaker segments, their SRT/VTT labels, the
version gate and the client-side refusals (translation, streams, client-side chunking).

No diarization model can be served on the CPU fixtures, so the answer below is not recorded: it is shaped
after vLLM 0.32's ``diarized_json`` response (``../shared/reference/vllm-api.md`` §7.4; vLLM PR #48543),
with MOSS-Transcribe-Diarize's speaker labels (``S01``, ``S02``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import gates, transcription
from vllm_tasks.calls import CallOptions
from vllm_tasks.transcription import ChunkingOptions, TranscribeParams
from vllm_tasks.types import SpeakerSegment, Transcription
from vllm_tasks.types.audio import render_srt, render_vtt, transcription_html

from .conftest import BASE
from .recorded import mock_server
from .test_transcription import audio_requests, form

AUDIO = Path(__file__).resolve().parent.parent / "data" / "audio"
FOX = AUDIO / "fox.wav"
LONG = AUDIO / "long45.wav"
TRANSCRIBE = f"{BASE}/v1/audio/transcriptions"

DIARIZED_BODY: dict[str, Any] = {
    "task": "transcribe",
    "duration": 3.5,
    "text": " Good morning.  Morning, how are you?",
    "segments": [
        {
            "type": "transcript.text.segment",
            "id": "seg_0",
            "start": 0.0,
            "end": 1.2,
            "text": " Good morning.",
            "speaker": "S01",
        },
        {
            "type": "transcript.text.segment",
            "id": "seg_1",
            "start": 1.4,
            "end": 3.5,
            "text": " Morning, how are you?",
            "speaker": "S02",
        },
    ],
    "usage": {"type": "duration", "seconds": 4},
}


def diarized(**changes: Any) -> Transcription:
    body = {**copy.deepcopy(DIARIZED_BODY), **changes}
    return transcription.parse_body(body, task="transcribe", model="moss", response_format="diarized_json")


# ----------------------------------------------------------------------------------- decoding, rendering


def test_diarized_body_becomes_typed_speaker_segments() -> None:
    result = diarized()
    assert result.text == "Good morning. Morning, how are you?"
    assert result.segments == []
    assert [type(s) for s in result.speaker_segments] == [SpeakerSegment, SpeakerSegment]
    first, second = result.speaker_segments
    assert (first.id, first.speaker, first.start, first.end, first.text) == (
        "seg_0",
        "S01",
        0.0,
        1.2,
        "Good morning.",
    )
    assert (second.id, second.speaker, second.type) == ("seg_1", "S02", "transcript.text.segment")
    assert result.usage is not None and result.usage.seconds == 4
    assert (result.duration, result.task, result.response_format) == (3.5, "transcribe", "diarized_json")
    assert '"speaker_segments"' in result.to_json()
    assert "task" not in (result.model_extra or {})


def test_srt_labels_each_cue_with_its_speaker() -> None:
    assert diarized().to_srt() == (
        "1\n00:00:00,000 --> 00:00:01,200\n[S01] Good morning.\n\n"
        "2\n00:00:01,400 --> 00:00:03,500\n[S02] Morning, how are you?\n"
    )


def test_vtt_uses_the_voice_span() -> None:
    assert diarized().to_vtt() == (
        "WEBVTT\n\n"
        "00:00:00.000 --> 00:00:01.200\n<v S01>Good morning.\n\n"
        "00:00:01.400 --> 00:00:03.500\n<v S02>Morning, how are you?\n"
    )


def test_speaker_labels_cannot_break_the_markup() -> None:
    cues: list[Any] = [(0.0, 1.0, "hi", "A>B <&]\nC"), (1.0, 2.0, "   ", "S01"), (2.0, 3.0, "plain", None)]
    assert render_vtt(cues) == (
        "WEBVTT\n\n00:00:00.000 --> 00:00:01.000\n<v A)B &lt;&amp;) C>hi\n\n"
        "00:00:02.000 --> 00:00:03.000\nplain\n"
    )
    assert render_srt(cues) == (
        "1\n00:00:00,000 --> 00:00:01,000\n[A)B <&) C] hi\n\n2\n00:00:02,000 --> 00:00:03,000\nplain\n"
    )


def test_view_shows_the_speakers() -> None:
    html = transcription_html(diarized())
    assert "speaker" in html and "S01" in html and "S02" in html and "2 segments" in html
    assert "speaker_segments=<2 segments>" in repr(diarized())


def test_a_segment_without_speaker_is_an_unexpected_response() -> None:
    body = copy.deepcopy(DIARIZED_BODY)
    del body["segments"][1]["speaker"]
    with pytest.raises(vt.UnexpectedResponse, match="speaker"):
        transcription.parse_body(body, task="transcribe", model=None, response_format="diarized_json")


_segment = st.fixed_dictionaries(
    {
        "id": st.text(max_size=8),
        "speaker": st.text(max_size=12),
        "start": st.floats(min_value=0, max_value=1e5, allow_nan=False),
        "end": st.floats(min_value=0, max_value=1e5, allow_nan=False),
        "text": st.text(max_size=40),
    },
    optional={"type": st.just("transcript.text.segment"), "extra": st.integers()},
)
_junk = st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=2))


@settings(max_examples=150, deadline=None)
@given(
    segments=st.lists(st.one_of(_segment, _junk), max_size=5),
    text=st.one_of(st.text(max_size=40), _junk),
    usage=st.one_of(st.none(), st.just({"type": "duration", "seconds": 3}), _junk),
)
def test_decoder_returns_a_transcription_or_raises_unexpected_response(
    segments: list[Any], text: Any, usage: Any
) -> None:
    body = {"task": "transcribe", "duration": 3.0, "text": text, "segments": segments, "usage": usage}
    try:
        result = transcription.parse_body(
            body, task="transcribe", model=None, response_format="diarized_json"
        )
    except vt.UnexpectedResponse:
        return
    assert len(result.speaker_segments) == len(segments)
    assert all(s.text == s.text.strip() for s in result.speaker_segments)
    assert result.to_srt().count(" --> ") <= max(1, len(segments))
    assert result.to_vtt().startswith("WEBVTT\n")


# ------------------------------------------------------------------------------- requests and refusals


def test_server_format_and_form_fields() -> None:
    assert transcription.server_format("diarized_json") == "diarized_json"
    fields = transcription.form_fields(TranscribeParams(), CallOptions(), model="m", fmt="diarized_json")
    assert fields == {"model": "m", "response_format": "diarized_json"}


def test_gate_is_vllm_0_27_0() -> None:
    gate = gates.FEATURES["diarized_json"]
    assert gate.min_version == "0.27.0" and "48543" in gate.evidence


@pytest.mark.parametrize(
    ("task", "stream"), [("translate", False), ("translate", True), ("transcribe", True)]
)
def test_validate_refuses_translation_and_streams(task: Any, stream: bool) -> None:
    with pytest.raises(vt.InvalidInputError) as caught:
        transcription.validate(TranscribeParams(response_format="diarized_json"), task=task, stream=stream)
    assert caught.value.field == "response_format"


def test_chunking_for_diarized_json_is_server_side() -> None:
    params = TranscribeParams(response_format="diarized_json")
    assert transcription.diarized_chunking(params, ChunkingOptions()).mode == "server"
    assert transcription.diarized_chunking(params, ChunkingOptions(mode="server")).mode == "server"
    options = ChunkingOptions(concurrency=2)
    assert transcription.diarized_chunking(TranscribeParams(), options) is options
    with pytest.raises(vt.InvalidInputError, match="chunking='server'") as caught:
        transcription.diarized_chunking(params, ChunkingOptions(mode="client"))
    assert caught.value.field == "chunking"


def test_transcribe_diarized_json(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    mock_server(httpx_mock, "stt")
    httpx_mock.add_response(url=TRANSCRIBE, method="POST", json=DIARIZED_BODY)
    result = make_client().transcribe(FOX, response_format="diarized_json")
    (request,) = audio_requests(httpx_mock)
    assert form(request)["response_format"] == "diarized_json"
    assert isinstance(result, Transcription)
    assert [(s.speaker, s.text) for s in result.speaker_segments] == [
        ("S01", "Good morning."),
        ("S02", "Morning, how are you?"),
    ]
    assert result.formatted() == result.to_json()
    assert "[S02] Morning, how are you?" in result.to_srt()


def test_long_audio_is_sent_whole(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    mock_server(httpx_mock, "stt")
    body = {**DIARIZED_BODY, "duration": 45.9, "usage": {"type": "duration", "seconds": math.ceil(45.9)}}
    httpx_mock.add_response(url=TRANSCRIBE, method="POST", json=body)
    result = make_client().transcribe(LONG, response_format="diarized_json")  # 45 s: "auto" would split
    assert len(audio_requests(httpx_mock)) == 1
    assert result.requests == 1 and len(result.speaker_segments) == 2


def test_client_chunking_is_refused_before_any_request(
    httpx_mock: HTTPXMock, make_client: Callable[..., Any]
) -> None:
    with pytest.raises(vt.InvalidInputError, match="speaker labels hold within one request"):
        make_client().transcribe(LONG, response_format="diarized_json", chunking="client")
    assert httpx_mock.get_requests() == []


def test_translate_is_refused_before_any_request(
    httpx_mock: HTTPXMock, make_client: Callable[..., Any]
) -> None:
    with pytest.raises(vt.InvalidInputError, match="transcriptions only"):
        make_client().translate(FOX, response_format="diarized_json")
    assert httpx_mock.get_requests() == []


@pytest.mark.parametrize("method", ["transcribe_stream", "translate_stream"])
def test_streams_are_refused_before_any_request(
    httpx_mock: HTTPXMock, make_client: Callable[..., Any], method: str
) -> None:
    with pytest.raises(vt.InvalidInputError, match="response_format"):
        getattr(make_client(), method)(FOX, response_format="diarized_json")
    assert httpx_mock.get_requests() == []


def test_older_server_is_refused_naming_the_version(
    httpx_mock: HTTPXMock, make_client: Callable[..., Any]
) -> None:
    mock_server(httpx_mock, "stt", version="0.26.0")
    with pytest.raises(vt.UnsupportedByServer, match=r"vLLM >= 0\.27\.0") as caught:
        make_client().transcribe(FOX, response_format="diarized_json")
    assert (caught.value.feature, caught.value.server_version) == ("diarized_json", "0.26.0")
    assert audio_requests(httpx_mock) == []


def test_server_error_answer_is_raised(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    """A model that does not diarize: vLLM answers 400, raised as the server's error."""
    mock_server(httpx_mock, "stt")
    error = {"error": {"message": "diarization is not supported", "type": "BadRequestError", "code": 400}}
    httpx_mock.add_response(url=TRANSCRIBE, method="POST", status_code=400, json=error)
    with pytest.raises(vt.BadRequestError, match="diarization is not supported"):
        make_client().transcribe(FOX, response_format="diarized_json")
