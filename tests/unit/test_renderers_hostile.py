"""Subtitles from what a hostile server or a caller can put in a transcription: WebVTT cue text that looks
like markup, and times that are NaN, infinite or negative (refused when the answer is parsed, and by the
renderers themselves)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import vllm_tasks as vt
from vllm_tasks.transcription.parsing import parse_response
from vllm_tasks.types.audio import (
    SpeakerSegment,
    Transcription,
    TranscriptionSegment,
    format_timestamp,
    render_srt,
    render_vtt,
)


def test_vtt_cue_text_escapes_markup_characters() -> None:
    vtt = render_vtt([(0.0, 1.0, "a <b>bold</b> claim & 1 < 2 > 0 --> done", "S<1>&")])
    cue = vtt.split("\n")[3]
    assert cue == "<v S&lt;1)&amp;>a &lt;b&gt;bold&lt;/b&gt; claim &amp; 1 &lt; 2 &gt; 0 --&gt; done"
    srt = render_srt([(0.0, 1.0, "1 < 2 & 3")])
    assert srt.endswith("\n1 < 2 & 3\n")  # SubRip has no escapes: the text as said


@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_vtt_cue_text_never_holds_a_tag_or_timing_the_text_did_not(text: str) -> None:
    lines = render_vtt([(0.0, 1.0, text)]).split("\n")[3:]
    body = "\n".join(lines)
    assert "<" not in body and "-->" not in body
    unescaped = body.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    assert unescaped.split() == text.split()


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), float("-inf"), -0.5])
def test_a_time_no_subtitle_can_say_is_refused(seconds: float) -> None:
    with pytest.raises(vt.InvalidInputError, match="finite, >= 0"):
        format_timestamp(seconds)
    for render in (render_srt, render_vtt):
        with pytest.raises(vt.InvalidInputError):
            render([(0.0, seconds, "hi")] if seconds > 0 else [(seconds, 1.0, "hi")])


@pytest.mark.parametrize(
    "segment",
    [
        {"start": "NaN", "end": 1.0, "text": "hi"},
        {"start": 0.0, "end": "inf", "text": "hi"},
        {"start": -1.0, "end": 1.0, "text": "hi"},
        {"start": 0.0, "end": "-Infinity", "text": "hi"},
    ],
)
@pytest.mark.parametrize("response_format", ["verbose_json", "diarized_json"])
def test_a_segment_time_that_is_not_a_time_is_an_unexpected_answer(
    segment: dict[str, Any], response_format: str
) -> None:
    body = {"text": "hi", "segments": [{**segment, "speaker": "S01"}]}
    with pytest.raises(vt.UnexpectedResponse, match="segments"):
        parse_response(
            httpx.Response(200, json=body), task="transcribe", model="m", response_format=response_format
        )


def test_a_duration_that_is_not_a_time_is_an_unexpected_answer() -> None:
    body = {"text": "hi", "duration": "nan"}
    with pytest.raises(vt.UnexpectedResponse, match="duration"):
        parse_response(httpx.Response(200, json=body), task="transcribe", model="m", response_format="json")


def test_results_made_by_hand_refuse_such_times_too() -> None:
    for model in (TranscriptionSegment, SpeakerSegment):
        with pytest.raises(ValueError, match="finite"):
            model(start=float("nan"), end=1.0, text="hi", speaker="S01")
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        Transcription(text="hi", duration=-1.0)
