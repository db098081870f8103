"""chunking="sequential" (Whisper's long-form algorithm over HTTP): the decoder's seek, prompt, fallback
and no-speech rules as pure functions, and the requests the clients send for them (pytest-httpx: the
prompt, the temperature ladder, the windows' offsets)."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile as sf
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import transcription
from vllm_tasks.transcription import (
    SampleReader,
    SequentialDecoder,
    SequentialOptions,
    TranscribeParams,
    Window,
)
from vllm_tasks.types.audio import Transcription, TranscriptionSegment

from .recorded import mock_server
from .test_transcription import TRANSCRIBE, audio_requests, form, uploaded

RATE = 16_000


def speech(seconds: float, level: float = 0.3) -> np.ndarray:
    """A 220 Hz tone: loud enough to count as speech for the decoder's energy checks."""
    t = np.arange(int(seconds * RATE)) / RATE
    return (level * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def pause(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), dtype=np.float32)


def recording(*parts: np.ndarray) -> np.ndarray:
    return np.concatenate(parts)


def decoder(**options: Any) -> SequentialDecoder:
    params = TranscribeParams(language="en", prompt=options.pop("prompt", None))
    return SequentialDecoder(params, SequentialOptions(**options), task="transcribe", model="whisper")


def answer(*segments: tuple[float, float, str], logprob: float = -0.2, **extra: Any) -> Transcription:
    """A verbose_json answer with these (start, end, text) segments (times relative to the window)."""
    return Transcription(
        text=" ".join(text for _, _, text in segments),
        language="en",
        segments=[
            TranscriptionSegment(start=s, end=e, text=text, avg_logprob=logprob, tokens=[1] * 5, **extra)
            for s, e, text in segments
        ],
    )


# --------------------------------------------------------------------------------------- windows


def test_windows_end_at_the_quietest_point_and_seek_to_the_last_segment() -> None:
    audio = recording(speech(12), pause(0.4), speech(14), pause(0.3), speech(10), pause(0.5), speech(20))
    reader, dec = SampleReader(iter([audio])), decoder()
    first = dec.next_window(reader)
    assert first is not None and first.start == 0 and not first.final
    # cut in the last 5 s before 30 s, at the pause that ends at 26.7 s
    assert 26.4 <= first.duration <= 26.7
    # the last complete segment ends at 12.2 s and speech follows: seek there
    dec.accept(first, dec.attempt(first, answer((0.0, 12.2, "One.")), 0.0))
    assert dec.seek == int(12.2 * RATE)
    second = dec.next_window(reader)
    assert second is not None and second.start == pytest.approx(12.2)
    dec.accept(second, dec.attempt(second, answer((0.2, 14.2, "Two."), (14.5, 24.5, "Three.")), 0.0))
    assert dec.seek == int(12.2 * RATE) + int(24.5 * RATE)
    assert [s.start for s in dec.segments] == [0.0, pytest.approx(12.4), pytest.approx(26.7)]


def test_nothing_but_quiet_after_the_last_segment_moves_past_the_window() -> None:
    reader, dec = SampleReader(iter([recording(speech(20), pause(9), speech(10))])), decoder()
    window = dec.next_window(reader)
    assert window is not None and window.duration > 28
    dec.accept(window, dec.attempt(window, answer((0.0, 20.1, "One.")), 0.0))
    assert dec.seek == len(window.samples)


def test_a_final_window_with_quiet_after_its_last_segment_ends_the_file() -> None:
    audio = recording(speech(8), pause(3))
    reader, dec = SampleReader(iter([audio])), decoder()
    window = dec.next_window(reader)
    assert window is not None and window.final and window.duration == pytest.approx(11)
    dec.accept(window, dec.attempt(window, answer((0.0, 8.1, "Short.")), 0.0))
    assert dec.next_window(reader) is None
    result = dec.result(response_format="json", duration=None)
    assert result.text == "Short." and result.duration == pytest.approx(11) and result.requests == 0


def test_silent_windows_are_not_sent_and_the_file_ends() -> None:
    reader, dec = SampleReader(iter([pause(70), speech(5)])), decoder()
    window = dec.next_window(reader)
    assert window is not None and window.start >= 59  # two silent windows skipped unsent
    dec.accept(window, dec.attempt(window, answer((0.0, window.duration, "Hi.")), 0.0))
    assert dec.next_window(reader) is None
    reader, dec = SampleReader(iter([pause(40)])), decoder()
    assert dec.next_window(reader) is None


def test_a_decode_without_timestamps_is_read_from_json_and_spans_its_window() -> None:
    audio = recording(speech(20), pause(0.5), speech(20))
    reader, dec = SampleReader(iter([audio])), decoder()
    window = dec.next_window(reader)
    assert window is not None
    empty = dec.attempt(window, Transcription(text="", segments=[]), 0.0)
    assert dec.needs_text(window, empty)
    attempt = dec.text_attempt(window, Transcription(text=" All of it. "), 0.0)
    assert not attempt.timestamps and attempt.segments[0].end == window.duration
    dec.accept(window, attempt)
    assert dec.seek == len(window.samples)  # past the window: it ends at a pause
    # segments ending before MIN_ADVANCE_SECONDS with speech after: no progress, so json too
    early = dec.attempt(window, answer((0.0, 0.5, "Uh.")), 0.0)
    assert dec.needs_text(window, early)


def test_segments_are_clipped_to_their_window() -> None:
    dec = decoder()
    window = Window(0, 30.0, speech(10), final=True)
    attempt = dec.attempt(window, answer((9.0, 12.0, "Past the end."), (0.0, 0.0, "  ")), 0.0)
    assert [(s.start, s.end, s.text) for s in attempt.segments] == [(9.0, 10.0, "Past the end.")]
    dec.accept(window, attempt)
    assert (dec.segments[0].start, dec.segments[0].end, dec.segments[0].seek) == (39.0, 40.0, 3000)


def test_words_repeated_after_a_seek_inside_the_window_are_dropped() -> None:
    audio = recording(speech(12), pause(0.4), speech(25))
    reader, dec = SampleReader(iter([audio])), decoder()
    first = dec.next_window(reader)
    assert first is not None
    dec.accept(first, dec.attempt(first, answer((0.0, 12.0, "He carried it on his back.")), 0.0))
    second = dec.next_window(reader)
    assert second is not None
    dec.accept(second, dec.attempt(second, answer((0.0, 3.0, "back."), (3.0, 9.0, "Then he left.")), 0.0))
    assert [s.text for s in dec.segments] == ["He carried it on his back.", "Then he left."]
    assert (
        dec.result(response_format="json", duration=None).text == "He carried it on his back. Then he left."
    )


# -------------------------------------------------------------------------------- fallback, prompt


def test_compression_ratio_and_logprob_thresholds() -> None:
    dec = decoder()
    window = Window(0, 0.0, speech(10), final=True)
    loop = dec.attempt(window, answer((0.0, 9.0, "the cat sat " * 20)), 0.0)
    assert loop.compression_ratio > 2.4 and dec.needs_fallback(loop)
    unsure = dec.attempt(window, answer((0.0, 9.0, "Something."), logprob=-1.4), 0.2)
    assert dec.needs_fallback(unsure)
    fine = dec.attempt(window, answer((0.0, 9.0, "Something."), logprob=-0.4), 0.4)
    assert not dec.needs_fallback(fine)
    assert dec.best([loop, unsure, fine]) is fine
    # none passes: the best log-probability among those under the compression limit
    worse = dec.attempt(window, answer((0.0, 9.0, "Other words."), logprob=-1.8), 0.4)
    assert dec.best([loop, unsure, worse]) is unsure
    assert decoder(compression_ratio_threshold=None, log_prob_threshold=None).needs_fallback(loop) is False


def test_window_logprob_is_token_weighted_and_compression_is_zlib() -> None:
    segments = [
        TranscriptionSegment(start=0, end=1, text="a", avg_logprob=-1.0, tokens=[1, 2, 3]),
        TranscriptionSegment(start=1, end=2, text="b", avg_logprob=-0.5, tokens=[1]),
        TranscriptionSegment(start=2, end=3, text="c"),
    ]
    assert transcription.window_logprob(segments) == pytest.approx((-1.0 * 4 + -0.5 * 2) / 6)
    assert transcription.window_logprob([TranscriptionSegment(start=0, end=1, text="a")]) is None
    assert transcription.compression_ratio("") == 0.0
    assert transcription.compression_ratio("abc") < 1


def test_no_speech_rule_only_with_the_servers_probability() -> None:
    dec = decoder()
    window = Window(0, 0.0, speech(10), final=False)
    quiet = dec.attempt(window, answer((0.0, 9.0, "Thank you."), logprob=-1.5, no_speech_prob=0.9), 0.0)
    assert quiet.no_speech_prob == 0.9 and dec.is_silence(quiet) and not dec.needs_fallback(quiet)
    dec.accept(window, quiet)
    assert dec.segments == [] and dec.seek == len(window.samples)
    sure = dec.attempt(window, answer((0.0, 9.0, "Thank you."), logprob=-0.3, no_speech_prob=0.9), 0.0)
    assert not dec.is_silence(sure)
    vllm = dec.attempt(window, answer((0.0, 9.0, "Thank you."), logprob=-1.5), 0.0)  # vLLM: null
    assert not dec.is_silence(vllm) and dec.needs_fallback(vllm)


def test_prompt_conditions_on_previous_text_and_resets_above_half_temperature() -> None:
    dec = decoder(condition_on_previous_text=True, prompt_max_words=4, prompt="Glossary: Kafka.")
    window = Window(0, 0.0, speech(10), final=False)
    assert dec.prompt() == "Glossary: Kafka."
    dec.accept(window, dec.attempt(window, answer((0.0, 10.0, "First window words.")), 0.0))
    assert dec.prompt() == "Kafka. First window words."  # the latest 4 words
    assert (
        dec.params_for(0.2).prompt == "Kafka. First window words." and dec.params_for(0.2).temperature == 0.2
    )
    dec.accept(window, dec.attempt(window, answer((0.0, 10.0, "Sampled.")), 0.6))
    assert dec.prompt() is None  # decoded above prompt_reset_on_temperature
    dec.accept(window, dec.attempt(window, answer((0.0, 10.0, "Again.")), 0.0))
    assert dec.prompt() == "Again."
    plain = decoder(prompt="Glossary.")  # the default: vLLM <= 0.32 corrupts prompts (vllm#53206)
    assert plain.prompt() == "Glossary."
    plain.accept(window, plain.attempt(window, answer((0.0, 10.0, "Words.")), 0.0))
    assert plain.prompt() is None


def test_params_of_an_attempt() -> None:
    params = TranscribeParams(language=None, use_beam_search=True, n=4, temperature=None)
    dec = SequentialDecoder(params, SequentialOptions(), task="transcribe", model=None)
    assert dec.temperatures() == (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    at_zero, sampled = dec.params_for(0.0), dec.params_for(0.4)
    assert at_zero.use_beam_search and at_zero.n == 4 and at_zero.response_format == "verbose_json"
    assert sampled.use_beam_search is None and sampled.n is None
    fixed = SequentialDecoder(
        TranscribeParams(temperature=0.3), SequentialOptions(), task="transcribe", model=None
    )
    assert fixed.temperatures() == (0.3,)
    window = Window(0, 0.0, speech(5), final=True)
    dec.accept(window, dec.attempt(window, answer((0.0, 5.0, "Hola.")), 0.0))
    assert dec.params_for(0.0).language == "en"  # detected on the first window, then fixed


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"window_seconds": 31}, "window_seconds"),
        ({"window_seconds": 5}, "window_seconds"),
        ({"search_seconds": 11}, "search_seconds"),
        ({"temperatures": ()}, "temperatures"),
        ({"temperatures": (0.4, 0.2)}, "temperatures"),
        ({"temperatures": (0.0, 3.0)}, "temperatures"),
        ({"compression_ratio_threshold": 0}, "compression_ratio_threshold"),
        ({"log_prob_threshold": 0.5}, "log_prob_threshold"),
        ({"no_speech_threshold": 1.5}, "no_speech_threshold"),
        ({"prompt_max_words": -1}, "prompt_max_words"),
        ({"condition_on_previous_text": "yes"}, "condition_on_previous_text"),
    ],
)
def test_options_are_checked(options: dict[str, Any], field: str) -> None:
    with pytest.raises(vt.InvalidInputError) as caught:
        SequentialOptions(**options)
    assert caught.value.field == field


def test_chunking_modes() -> None:
    whisper, voxtral = transcription.WHISPER, transcription.VOXTRAL
    assert transcription.long_form(transcription.chunking_options("auto"), whisper) == "sequential"
    assert transcription.long_form(transcription.chunking_options("auto"), voxtral) == "client"
    assert transcription.long_form(transcription.chunking_options("client"), whisper) == "client"
    assert transcription.long_form(transcription.chunking_options("sequential"), voxtral) == "sequential"
    custom = SequentialOptions(search_seconds=0)
    options = transcription.chunking_options(custom)
    assert options.mode == "sequential" and options.sequential is custom
    with pytest.raises(vt.InvalidInputError, match="unknown mode"):
        transcription.chunking_options("whisper")  # type: ignore[arg-type]
    with pytest.raises(vt.InvalidInputError, match="sequential"):
        vt.ChunkingOptions(sequential="fast")  # type: ignore[arg-type]
    with pytest.raises(vt.InvalidInputError, match="cannot be streamed"):
        transcription.stream_chunking(options)
    with pytest.raises(vt.InvalidInputError, match="diarized_json"):
        transcription.diarized_chunking(TranscribeParams(response_format="diarized_json"), options)


def test_the_reader_reads_forward_only() -> None:
    reader = SampleReader(iter([np.arange(10, dtype=np.float32), np.arange(10, 20, dtype=np.float32)]))
    assert reader.read(5, 10).tolist() == list(range(5, 15)) and not reader.ends_within(5, 10)
    assert reader.read(15, 10).tolist() == list(range(15, 20)) and reader.ends_within(15, 10)
    with pytest.raises(ValueError, match="read back"):
        reader.read(3, 2)


# ------------------------------------------------------------------------- the requests sent


class ScriptedServer:
    """Answers each verbose_json request from a script of (segments, avg_logprob) per call, and json
    requests with a fixed text; records what each request asked."""

    def __init__(self, script: list[Any]) -> None:
        self.script = list(script)
        self.seen: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        fields = form(request)
        duration = sf.info(io.BytesIO(uploaded(request))).duration
        name = re.search(rb'filename="([^"]+)"', request.read())
        self.seen.append({**fields, "duration": duration, "name": name.group(1).decode() if name else None})
        if fields["response_format"] == "json":
            return httpx.Response(
                200, json={"text": " From json.", "usage": {"type": "duration", "seconds": 1}}
            )
        if self.script[0] == "empty":  # vLLM 0.32 on a decode of nothing but end-of-text
            self.script.pop(0)
            error = {"message": "tuple index out of range", "type": "InternalServerError", "code": 500}
            return httpx.Response(500, json={"error": error})
        segments, logprob = self.script.pop(0)
        body = [
            {"id": i, "seek": 0, "start": s, "end": min(e, duration), "text": f" {t}", "tokens": [1, 2],
             "temperature": float(fields.get("temperature", 0)), "avg_logprob": logprob,
             "compression_ratio": 1.2, "no_speech_prob": None}
            for i, (s, e, t) in enumerate(segments)
        ]  # fmt: skip
        text = "".join(seg["text"] for seg in body)
        return httpx.Response(
            200, json={"text": text, "language": "en", "duration": duration, "segments": body, "words": None}
        )


def test_requests_seek_fall_back_and_offset(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    audio = recording(speech(12), pause(0.4), speech(14), pause(0.3), speech(10), pause(2))
    server = ScriptedServer(
        [
            ([(0.0, 12.2, "First part.")], -0.3),  # window 0: seek to 12.2 s (speech follows)
            ([(0.0, 9.0, "loop " * 40)], -0.2),  # window 1 at 0.0: a loop (compression ratio)
            ([(0.0, 9.0, "Unsure.")], -1.5),  # ... at 0.2: too unsure
            ([(0.0, 14.5, "Second part."), (14.6, 24.5, "Third part.")], -0.4),  # ... at 0.4: kept
        ]
    )
    mock_server(httpx_mock, "stt")
    httpx_mock.add_callback(server, url=TRANSCRIBE, is_reusable=True)
    result = make_client().transcribe(
        (audio, RATE), language="en", chunking=SequentialOptions(condition_on_previous_text=True)
    )
    assert [s["temperature"] for s in server.seen] == ["0.0", "0.0", "0.2", "0.4"]
    assert all(s["response_format"] == "verbose_json" for s in server.seen)
    assert [s.get("prompt") for s in server.seen] == [None, "First part.", "First part.", "First part."]
    assert server.seen[0]["duration"] == pytest.approx(26.4, abs=0.35)  # ends at the 26.4-26.7 s pause
    assert server.seen[1]["duration"] == pytest.approx(len(audio) / RATE - 12.2, abs=0.01)  # the rest
    assert [s["name"] for s in server.seen] == ["audio-0000.flac", *["audio-0001.flac"] * 3]
    assert result.requests == 4 and len(audio_requests(httpx_mock)) == 4
    assert result.text == "First part. Second part. Third part."
    assert [(s.start, s.end, s.temperature) for s in result.segments] == [
        (0.0, 12.2, 0.0),
        (12.2, pytest.approx(26.7), 0.4),
        (pytest.approx(26.8), pytest.approx(36.7), 0.4),
    ]
    assert result.duration == pytest.approx(len(audio) / RATE)
    assert result.usage is not None and result.usage.seconds == 39  # the file's, rounded up, as one upload


def test_a_window_without_timestamps_is_asked_again_as_json(
    httpx_mock: HTTPXMock, make_client: Callable[..., Any]
) -> None:
    audio = recording(speech(20), pause(0.5), speech(15), pause(1))
    server = ScriptedServer([([], -0.2), ([(0.0, 15.2, "Tail.")], -0.2)])
    mock_server(httpx_mock, "stt")
    httpx_mock.add_callback(server, url=TRANSCRIBE, is_reusable=True)
    result = make_client().transcribe((audio, RATE), language="en", response_format="srt", chunking="auto")
    assert [s["response_format"] for s in server.seen] == ["verbose_json", "json", "verbose_json"]
    assert all("prompt" not in s for s in server.seen)  # the default: no prompt (vllm#53206)
    assert result.text == "From json. Tail." and result.requests == 3
    assert result.segments[0].end == pytest.approx(result.segments[1].start)
    assert result.to_srt().count("-->") == 2


def test_short_audio_in_auto_is_one_request(httpx_mock: HTTPXMock, make_client: Callable[..., Any]) -> None:
    server = ScriptedServer([])
    mock_server(httpx_mock, "stt")
    httpx_mock.add_callback(server, url=TRANSCRIBE, is_reusable=True)
    make_client().transcribe((speech(5), RATE), language="en")
    assert [s["response_format"] for s in server.seen] == ["json"] and "temperature" not in server.seen[0]


def test_sequential_streams_are_refused_before_sending(make_client: Callable[..., Any]) -> None:
    with pytest.raises(vt.InvalidInputError, match="cannot be streamed"):
        make_client().transcribe_stream((speech(5), RATE), chunking="sequential")


def test_vllms_500_for_an_empty_decode_is_a_window_without_segments(
    httpx_mock: HTTPXMock, make_client: Callable[..., Any]
) -> None:
    audio = recording(speech(20), pause(0.5), speech(15), pause(1))
    server = ScriptedServer(["empty", ([(0.0, 15.2, "Tail.")], -0.2)])
    mock_server(httpx_mock, "stt")
    httpx_mock.add_callback(server, url=TRANSCRIBE, is_reusable=True)
    result = make_client().transcribe((audio, RATE), language="en", chunking="sequential")
    # no retry of the 500: the window is asked as json, as one decoded without timestamps
    assert [s["response_format"] for s in server.seen] == ["verbose_json", "json", "verbose_json"]
    assert result.text == "From json. Tail." and result.requests == 3
