"""transcribe / translate / transcribe_stream and the CLI against the real `stt` fixture (Whisper base)."""

from __future__ import annotations

import asyncio
import functools
import http.server
import io
import itertools
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

import vllm_tasks as vt
from vllm_tasks.jobs import JobMismatch
from vllm_tasks.types.server import ServerInfo

pytestmark = pytest.mark.contract

AUDIO = Path(__file__).resolve().parent.parent / "data" / "audio"
REFERENCE: dict[str, str] = json.loads((AUDIO / "transcripts.json").read_text())
FOX, NUMBERS, FRENCH, LONG = (AUDIO / n for n in ("fox.wav", "numbers.wav", "french.wav", "long45.wav"))
NUMBER_WORDS = dict(
    enumerate(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"])
)


def words(text: str) -> list[str]:
    """Lower-case words without punctuation; digits 0-10 spelled out (Whisper writes "1, 2, 3")."""
    out = []
    for word in re.findall(r"[\w']+", text.lower()):
        out.append(NUMBER_WORDS.get(int(word), word) if word.isdigit() else word)
    return out


def words_recovered(reference: str, hypothesis: str) -> float:
    """Share of the reference's words found, in order, in the hypothesis (longest common subsequence)."""
    ref, hyp = words(reference), words(hypothesis)
    previous = [0] * (len(hyp) + 1)
    for word in ref:
        current = [0]
        for j, other in enumerate(hyp):
            current.append(previous[j] + 1 if word == other else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1] / max(1, len(ref))


@pytest.fixture(scope="module")
def client(vllm_stt: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_stt.base_url, timeout=300) as stt_client:
        yield stt_client


@pytest.fixture(scope="module")
def audio_url() -> Iterator[str]:
    """tests/data/audio served over http on localhost (the URL input form)."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(AUDIO))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


# --------------------------------------------------------------------------------------- accuracy


@pytest.mark.parametrize("name", ["fox.wav", "numbers.wav", "long45.wav"])
def test_words_recovered(client: vt.Client, name: str) -> None:
    result = client.transcribe(AUDIO / name, language="en")
    score = words_recovered(REFERENCE[name], result.text)
    print(f"\n{name}: {score:.0%} of {len(words(REFERENCE[name]))} words: {result.text!r}")
    assert score >= 0.85


def test_fox_says_fox(client: vt.Client) -> None:
    text = client.transcribe(FOX, language="en").text.lower()
    assert "fox" in text and "lazy dog" in text


# ------------------------------------------------------------------------------------ input forms


def test_every_input_form(client: vt.Client, audio_url: str) -> None:
    data = FOX.read_bytes()
    samples, rate = sf.read(FOX, dtype="float32")
    stereo_44k = np.stack(
        [np.interp(np.arange(0, len(samples), rate / 44100), np.arange(len(samples)), samples)] * 2, 1
    )
    with FOX.open("rb") as handle:
        inputs: dict[str, Any] = {
            "path": FOX,
            "str path": str(FOX),
            "bytes": data,
            "file object": handle,
            "array 16k mono": (samples, rate),
            "array 44.1k stereo": (stereo_44k.astype(np.float32), 44100),
            "url": f"{audio_url}/fox.wav",
        }
        for form, value in inputs.items():
            text = client.transcribe(value, language="en").text.lower()
            assert "fox" in text and "dog" in text, form


@pytest.mark.parametrize(("fmt", "rate"), [("OGG", 22050), ("FLAC", 48000), ("WAV", 8000)])
def test_other_containers_and_rates(client: vt.Client, fmt: str, rate: int) -> None:
    samples, source_rate = sf.read(FOX, dtype="float32")
    resampled = np.interp(np.arange(0, len(samples), source_rate / rate), np.arange(len(samples)), samples)
    buffer = io.BytesIO()
    sf.write(buffer, resampled.astype(np.float32), rate, format=fmt)
    for prepare in ("auto", "never"):  # normalised client-side, or decoded by the server
        text = client.transcribe(buffer.getvalue(), language="en", prepare=prepare).text.lower()  # type: ignore[arg-type]
        assert "fox" in text, (fmt, prepare)


def test_m4a(client: vt.Client) -> None:
    import av

    samples, rate = sf.read(FOX, dtype="float32")
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as container:
        stream = container.add_stream("aac", rate=rate)
        stream.layout = "mono"
        for start in range(0, len(samples), 1024):
            block = samples[start : start + 1024].reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(block, format="fltp", layout="mono")
            frame.sample_rate, frame.pts = rate, start
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    for prepare in ("auto", "never"):  # decoded by PyAV here, or by the server's av
        text = client.transcribe(buffer.getvalue(), language="en", prepare=prepare).text.lower()  # type: ignore[arg-type]
        assert "fox" in text, prepare


# -------------------------------------------------------------------------------------- formats


# vLLM's test(s):
# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_basic_audio
# (text format answers JSON; usage.seconds)
# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_audio_with_timestamp
def test_json_text_verbose_srt_vtt(client: vt.Client) -> None:
    plain = client.transcribe(NUMBERS, language="en")
    assert plain.segments == [] and plain.usage is not None and plain.usage.seconds == 7
    text = client.transcribe(NUMBERS, language="en", response_format="text")
    assert text.formatted() == plain.text
    verbose = client.transcribe(NUMBERS, language="en", response_format="verbose_json")
    assert verbose.language == "en" and 6 < (verbose.duration or 0) < 7
    assert verbose.segments and verbose.segments[0].start == 0.0 and verbose.segments[-1].end <= 7
    srt = client.transcribe(NUMBERS, language="en", response_format="srt").formatted()
    assert re.match(r"1\n00:00:00,000 --> 00:00:0\d,\d{3}\n\S", srt)
    vtt = client.transcribe(NUMBERS, language="en", response_format="vtt").formatted()
    assert vtt.startswith("WEBVTT\n\n00:00:00.000 --> 00:00:0")
    assert json.loads(verbose.formatted())["segments"][0]["tokens"]


# vLLM's test(s):
# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_language_auto_detect
def test_language_detection_and_timestamp_granularities(client: vt.Client) -> None:
    detected = client.transcribe(FOX)
    assert "fox" in detected.text.lower()
    result = client.transcribe(
        FOX, response_format="verbose_json", timestamp_granularities=["word", "segment"]
    )
    assert result.segments and result.words is None  # vLLM 0.32 never fills words


# ------------------------------------------------------------------------------------- streaming


# vLLM's test(s):
# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_streaming_response
# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_stream_options
def test_stream_sync(client: vt.Client) -> None:
    with client.transcribe_stream(FOX, language="en") as stream:
        events = list(stream)
    *deltas, final = events
    assert len(deltas) > 3 and all(isinstance(d, vt.types.TranscriptionDelta) for d in deltas)
    assert isinstance(final, vt.types.Transcription) and "".join(d.text for d in deltas) == final.text
    assert final.finish_reasons == ["stop"]
    assert final.usage is not None and (final.usage.completion_tokens or 0) > 3
    assert final.text == client.transcribe(FOX, language="en").text


def test_stream_async(vllm_stt: Any) -> None:
    async def run() -> list[Any]:
        async with vt.AsyncClient(vllm_stt.base_url, timeout=300) as aclient:
            stream = await aclient.transcribe_stream(FOX, language="en")
            return [event async for event in stream]

    events = asyncio.run(run())
    assert "fox" in events[-1].text.lower()


def test_stream_long_audio_ends_once_per_server_chunk(client: vt.Client) -> None:
    with client.transcribe_stream(LONG, language="en") as stream:
        result = stream.until_done()
    assert result.finish_reasons == ["stop", "stop"]
    assert "  " not in result.text and words_recovered(REFERENCE["long45.wav"], result.text) >= 0.85


# vLLM's test(s):
# tests/entrypoints/openai/speech_to_text/test_translation_validation.py::test_basic_audio
# tests/entrypoints/openai/speech_to_text/test_translation_validation.py::test_streaming_response
def test_translate_and_translate_stream(client: vt.Client) -> None:
    result = client.translate(FRENCH, language="fr")
    assert result.task == "translate" and result.text and result.text.isascii()
    with client.translate_stream(FRENCH, language="fr") as stream:
        streamed = stream.until_done()
    assert streamed.text == result.text


# ---------------------------------------------------------------------------------- long audio


# vLLM's test(s):
# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_long_audio_request
def test_long_audio_server_chunking(client: vt.Client) -> None:
    result = client.transcribe(LONG, language="en", chunking="server")
    assert result.requests == 1 and "  " not in result.text  # vLLM's double-space join is cleaned
    assert words_recovered(REFERENCE["long45.wav"], result.text) >= 0.85
    verbose = client.transcribe(LONG, language="en", chunking="server", response_format="verbose_json")
    # What vLLM 0.32 does: the first ~29 s come back without segments or text.
    assert words_recovered(REFERENCE["long45.wav"], verbose.text) < 0.7


@pytest.mark.parametrize("fmt", ["json", "srt"])
def test_long_audio_client_chunking_covers_the_whole_file(client: vt.Client, fmt: str) -> None:
    result = client.transcribe(LONG, language="en", response_format=fmt, chunking="client")  # type: ignore[arg-type]
    duration = sf.info(LONG).duration
    assert result.requests >= 2 and result.duration == pytest.approx(duration, abs=0.01)
    assert "  " not in result.text
    assert words_recovered(REFERENCE["long45.wav"], result.text) >= 0.85
    segments = result.segments
    assert segments[0].start < 1.0 and segments[-1].end > duration - 2.0
    for before, after in itertools.pairwise(segments):
        assert before.end <= after.start + 1e-6  # ordered, no overlap
        assert after.start - before.end < 3.0  # no hole where a piece went missing
    text_words = words(result.text)
    assert all(a != b or a in {"the", "had"} for a, b in itertools.pairwise(text_words))
    if fmt == "srt":
        assert result.formatted().count(" --> ") == len(segments)


def test_client_chunking_with_small_pieces_and_overlap(client: vt.Client) -> None:
    options = vt.ChunkingOptions(mode="client", max_seconds=12, overlap_seconds=1.0, concurrency=3)
    result = client.transcribe(LONG, language="en", chunking=options)
    assert result.requests >= 4
    assert words_recovered(REFERENCE["long45.wav"], result.text) >= 0.8


def test_stream_long_audio_client_chunked(client: vt.Client) -> None:
    with client.transcribe_stream(LONG, language="en", chunking="client") as stream:
        events = list(stream)
    result = events[-1]
    assert len(result.finish_reasons or []) == 2 and "  " not in result.text
    assert "".join(e.text for e in events[:-1]) == result.text
    assert words_recovered(REFERENCE["long45.wav"], result.text) >= 0.85


TOO_LONG = (
    r"exceeds maximum allowed duration of 600s \(file contains 696\.1s at 16000Hz\)"  # soundfile's count
)


# --------------------------------------------------------------- sequential (Whisper's long form)

SEQUENTIAL_CLIPS = ("numbers.wav", "long45.wav", "fox.wav", "numbers.wav")


@pytest.fixture(scope="module")
def minute_recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """About 63 s: numbers, the 46-s story, fox, numbers, 0.6 s apart (three 30-s windows or so); the
    known text."""
    pause = np.zeros(int(0.6 * 16000), dtype=np.float32)
    parts: list[np.ndarray] = []
    for name in SEQUENTIAL_CLIPS:
        parts += [sf.read(AUDIO / name, dtype="float32")[0], pause]
    path = tmp_path_factory.mktemp("sequential") / "minute.wav"
    sf.write(path, np.concatenate(parts), 16000, subtype="PCM_16")
    return path, " ".join(REFERENCE[name] for name in SEQUENTIAL_CLIPS)


def boundary_faults(reference: str, hypothesis: str) -> tuple[list[str], list[str]]:
    """(words doubled, runs of two or more reference words missing) in the word alignment of the
    hypothesis against the known text: what a bad seek at a window's edge leaves (a substituted word,
    whisper-base's "maker" for "baker", is neither)."""
    ref, hyp = words(reference), words(hypothesis)
    doubled = [a for a, b in itertools.pairwise(hyp) if a == b and f"{a} {a}" not in " ".join(ref)]
    cost = [[0] * (len(hyp) + 1) for _ in range(len(ref) + 1)]
    for i in range(len(ref) + 1):
        cost[i][0] = i
    for j in range(len(hyp) + 1):
        cost[0][j] = j
    for i in range(1, len(ref) + 1):
        for j in range(1, len(hyp) + 1):
            cost[i][j] = min(
                cost[i - 1][j] + 1, cost[i][j - 1] + 1, cost[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1])
            )
    missing: list[str] = []
    run: list[str] = []
    i, j = len(ref), len(hyp)
    while i or j:
        if i and j and cost[i][j] == cost[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]):
            i, j = i - 1, j - 1
            run = []
        elif i and cost[i][j] == cost[i - 1][j] + 1:
            run.insert(0, ref[i - 1])
            i -= 1
            if len(run) == 2:
                missing.append(" ".join(run))
        else:
            j -= 1
    return doubled, missing


def test_sequential_windows_on_a_minute_of_speech(
    client: vt.Client, minute_recording: tuple[Path, str]
) -> None:
    path, reference = minute_recording
    duration = sf.info(path).duration
    result = client.transcribe(path, language="en", response_format="verbose_json")  # auto: sequential
    assert result.requests >= 3 and result.duration == pytest.approx(duration, abs=0.01)
    windows = sorted({s.seek for s in result.segments if s.seek is not None})
    assert len(windows) >= 2 and windows[0] == 0  # segments from several windows, in order
    assert [s.id for s in result.segments] == list(range(len(result.segments)))
    for before, after in itertools.pairwise(result.segments):
        assert before.start <= before.end <= after.start + 1e-6  # monotonic across windows
        assert (before.seek or 0) <= (after.seek or 0)
    assert result.segments[-1].end <= duration + 1e-6 and result.segments[-1].end > duration - 3
    assert all(s.temperature is not None for s in result.segments)
    doubled, missing = boundary_faults(reference, result.text)
    assert doubled == [] and missing == [], (doubled, missing, result.text)
    assert words_recovered(reference, result.text) >= 0.9
    assert abs(len(words(result.text)) - len(words(reference))) <= 3


def test_sequential_transcribe_dir_resumes(
    vllm_stt: Any, minute_recording: tuple[Path, str], tmp_path: Path
) -> None:
    path, reference = minute_recording
    source, out = tmp_path / "calls", tmp_path / "text"
    source.mkdir()
    (source / "minute.wav").write_bytes(path.read_bytes())
    first = vt.transcribe_dir(vllm_stt.base_url, source, out, chunking="sequential", formats=["json", "txt"])
    assert first.complete and first.units_sent == 1
    saved = (out / "minute.json").read_bytes()
    (source / "fox.wav").write_bytes(FOX.read_bytes())
    second = vt.transcribe_dir(vllm_stt.base_url, source, out, chunking="sequential", formats=["json", "txt"])
    assert second.complete and second.units_resumed == 1 and second.units_sent == 1
    assert (out / "minute.json").read_bytes() == saved  # not transcribed again
    record = json.loads(saved)
    assert record["requests"] >= 3 and words_recovered(reference, record["text"]) >= 0.9
    assert "fox" in (out / "fox.txt").read_text().lower()
    with pytest.raises(JobMismatch):  # other chunking: other options, no silent mix
        vt.transcribe_dir(vllm_stt.base_url, source, out, chunking="client", formats=["json", "txt"])


def test_over_ten_minutes_is_refused_by_the_server(client: vt.Client, tmp_path: Path) -> None:
    """vLLM refuses uploads over 600 s (VLLM_MAX_AUDIO_DECODE_DURATION_S), in the words FakeVLLM imitates;
    the client's split of such a recording into pieces is tested against it
    (tests/component/test_long_audio.py), its word accuracy across pieces here on long45.wav."""
    samples, rate = sf.read(LONG, dtype="float32")
    pause = np.zeros(rate // 2, dtype=np.float32)
    path = tmp_path / "eleven-minutes.flac"
    sf.write(path, np.concatenate([samples, pause] * 15), rate)  # 15 x 46.4 s = 11.6 minutes
    with pytest.raises(
        vt.BadRequestError,
        match=TOO_LONG,
    ):
        client.transcribe(path, language="en", chunking="server")


# -------------------------------------------------------------------------------------- errors


# vLLM's test(s):
# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_invalid_audio_file
# (vLLM 0.32 words it "Invalid or corrupted audio data")
def test_corrupt_file(client: vt.Client, tmp_path: Path) -> None:
    broken = tmp_path / "broken.mp3"
    broken.write_bytes(b"\x00\x01garbage" * 512)
    with pytest.raises(vt.InvalidInputError) as caught:
        client.transcribe(broken)
    assert caught.value.source == str(broken) and "soundfile" in caught.value.reason
    with pytest.raises(vt.BadRequestError, match="Invalid or corrupted audio"):
        client.transcribe(broken, prepare="never")  # the server's own answer


def test_wrong_model_name(vllm_stt: Any) -> None:
    with (
        vt.Client(vllm_stt.base_url, model="no-such-model") as wrong,
        pytest.raises(vt.NotFoundError, match="Valid aliases: whisper-base") as caught,
    ):
        wrong.transcribe(FOX)
    assert caught.value.status_code == 404 and caught.value.param == "model"


# vLLM's test(s):
# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_bad_requests
def test_unsupported_language_is_a_bad_request(client: vt.Client) -> None:
    with pytest.raises(vt.BadRequestError, match="Unsupported language"):
        client.transcribe(FOX, language="xx")


# vLLM's test(s):
# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_whisper_beam_search_multibeam  # noqa: E501
# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_stream_with_beams_raises  # noqa: E501
def test_beam_search_gate_and_stream_refusal(client: vt.Client, vllm_stt: Any) -> None:
    result = client.transcribe(FOX, language="en", use_beam_search=True, n=2, max_completion_tokens=4)
    assert result.text.lower().startswith("the quick")
    with vt.Client(vllm_stt.base_url) as old:
        info = old.server_info()
        old._server_state = old._server_state.with_info(
            ServerInfo(base_url=info.base_url, version="0.17.0", models=info.models, routes=info.routes)
        )
        with pytest.raises(vt.UnsupportedByServer, match=r"0\.18\.0"):
            old.transcribe(FOX, use_beam_search=True)
    with pytest.raises(vt.InvalidInputError, match="streaming"):
        client.transcribe_stream(FOX, use_beam_search=True)


# ------------------------------------------------------------------------------------------ CLI
