"""``response_format="diarized_json"`` against FakeVLLM over real HTTP, on both clients: the fake answers
as vLLM does for a diarization model (one segment per sentence, speakers alternating ``S01``/``S02``);
the SDK returns typed speaker segments, labels SRT/VTT cues, and refuses what vLLM cannot do before
sending. No diarization model runs on the CPU fixtures: this and the recorded-shaped unit tests
(tests/unit/test_diarization.py) are the proof."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import vllm_tasks as vt
from vllm_tasks.testing import SPEECH_TASKS, FakeVLLM
from vllm_tasks.types import SpeakerSegment

from ..fakes import FakeFixture

AUDIO = Path(__file__).resolve().parents[1] / "data" / "audio"
FOX = AUDIO / "fox.wav"
LONG = AUDIO / "long45.wav"
TRANSCRIPT = " Good morning. Morning, how are you? Fine."


@pytest.fixture
def diarizer() -> Iterator[FakeVLLM]:
    with FakeVLLM(model="moss-diarize", tasks=SPEECH_TASKS, transcript=TRANSCRIPT) as fake:
        yield fake


def test_speaker_segments_on_both_clients(diarizer: FakeVLLM, make_client: Callable[..., Any]) -> None:
    result = make_client(diarizer.url).transcribe(FOX, response_format="diarized_json")
    assert result.text == TRANSCRIPT.strip()
    assert all(isinstance(s, SpeakerSegment) for s in result.speaker_segments)
    assert [(s.id, s.speaker, s.text) for s in result.speaker_segments] == [
        ("seg_0", "S01", "Good morning."),
        ("seg_1", "S02", "Morning, how are you?"),
        ("seg_2", "S01", "Fine."),
    ]
    starts = [s.start for s in result.speaker_segments]
    assert starts == sorted(starts)
    assert result.speaker_segments[-1].end == pytest.approx(result.duration, abs=1e-3)
    assert result.usage is not None and result.usage.seconds is not None
    (request,) = diarizer.received("/v1/audio/transcriptions")
    assert request.form["response_format"] == "diarized_json"


def test_srt_and_vtt_carry_the_speakers(diarizer: FakeVLLM, make_client: Callable[..., Any]) -> None:
    result = make_client(diarizer.url).transcribe(FOX, response_format="diarized_json")
    srt, vtt = result.to_srt(), result.to_vtt()
    assert "[S01] Good morning." in srt and "[S02] Morning, how are you?" in srt and "\n3\n" in srt
    assert vtt.startswith("WEBVTT\n") and "<v S02>Morning, how are you?" in vtt and "<v S01>Fine." in vtt


def test_long_audio_goes_out_in_one_request(diarizer: FakeVLLM, make_client: Callable[..., Any]) -> None:
    result = make_client(diarizer.url).transcribe(LONG, response_format="diarized_json")
    assert len(diarizer.received("/v1/audio/transcriptions")) == 1
    assert result.requests == 1 and result.duration == pytest.approx(45.9, abs=0.5)
    with pytest.raises(vt.InvalidInputError, match="chunking"):
        make_client(diarizer.url).transcribe(LONG, response_format="diarized_json", chunking="client")
    assert len(diarizer.received("/v1/audio/transcriptions")) == 1


def test_refusals_send_nothing(diarizer: FakeVLLM, make_client: Callable[..., Any]) -> None:
    client = make_client(diarizer.url)
    with pytest.raises(vt.InvalidInputError, match="transcriptions only"):
        client.translate(FOX, response_format="diarized_json")
    with pytest.raises(vt.InvalidInputError, match="stream only carries text"):
        client.transcribe_stream(FOX, response_format="diarized_json")
    assert diarizer.received("/v1/audio/transcriptions") == []
    assert diarizer.received("/v1/audio/translations") == []


def test_older_server_is_refused(make_client: Callable[..., Any]) -> None:
    with FakeVLLM(model="moss-diarize", tasks=SPEECH_TASKS, version="0.26.0") as old:
        with pytest.raises(vt.UnsupportedByServer, match=r"vLLM >= 0\.27\.0"):
            make_client(old.url).transcribe(FOX, response_format="diarized_json")
        assert old.received("/v1/audio/transcriptions") == []


def test_fake_refuses_what_vllm_refuses(fake_stt: FakeFixture) -> None:
    """The fake itself, spoken to directly: translations allow no diarized_json, nor can it stream."""
    audio = {"file": ("fox.wav", FOX.read_bytes(), "audio/wav")}
    url = fake_stt.base_url
    diarized = {"response_format": "diarized_json"}
    translated = httpx.post(f"{url}/v1/audio/translations", data=diarized, files=audio)
    assert translated.status_code == 400 and "literal_error" in translated.text
    streamed = httpx.post(f"{url}/v1/audio/transcriptions", data={**diarized, "stream": "true"}, files=audio)
    assert streamed.status_code == 400 and "streaming" in streamed.text
    answered = httpx.post(f"{url}/v1/audio/transcriptions", data=diarized, files=audio).json()
    assert answered["task"] == "transcribe" and answered["usage"]["type"] == "duration"
    assert {s["type"] for s in answered["segments"]} == {"transcript.text.segment"}
