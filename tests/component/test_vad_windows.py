"""``ChunkingOptions(vad=VadOptions(...))`` against FakeVLLM: a recording with a minute of noise between
two utterances sends less audio with voice activity detection than without (the noise is not sent),
and the segments come back on the recording's own timeline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import vllm_tasks as vt
from vllm_tasks.testing import FakeVLLM
from vllm_tasks.testing.content import audio_seconds
from vllm_tasks.transcription import ChunkingOptions, VadOptions

AUDIO = Path(__file__).resolve().parents[1] / "data" / "audio"
RATE = 16_000
NOISE_SECONDS = 60.0
ENERGY = VadOptions(detector="energy")


@pytest.fixture(scope="module")
def noisy_gap(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float, float]:
    """fox.wav (3.8 s), a minute of low noise (audible: above the SDK's silence level), numbers.wav
    (6.6 s), 2 s of noise; returns the file, when numbers.wav starts and ends."""
    fox, _ = sf.read(AUDIO / "fox.wav", dtype="float32")
    numbers, _ = sf.read(AUDIO / "numbers.wav", dtype="float32")
    gap = np.zeros(int(NOISE_SECONDS * RATE), np.float32)
    audio = np.concatenate([fox, gap, numbers, np.zeros(2 * RATE, np.float32)])
    audio += (np.random.default_rng(3).standard_normal(len(audio)) * 0.004).astype(np.float32)
    path = tmp_path_factory.mktemp("vad") / "noisy-gap.wav"
    sf.write(path, audio, RATE)
    start = (len(fox) + len(gap)) / RATE
    return path, start, start + len(numbers) / RATE


def _uploaded_seconds(fake: FakeVLLM) -> list[float]:
    return [audio_seconds(r.files["file"].content) or 0.0 for r in fake.received("/v1/audio/transcriptions")]


@pytest.mark.parametrize("mode", ["sequential", "client"])
def test_vad_sends_the_speech_alone_and_times_stay_on_the_recording(
    stt_fake: FakeVLLM, noisy_gap: tuple[Path, float, float], mode: str
) -> None:
    path, numbers_start, numbers_end = noisy_gap
    duration = sf.info(path).duration
    with vt.Client(stt_fake.url) as client:
        plain = client.transcribe(path, chunking=mode, response_format="verbose_json")
        without = _uploaded_seconds(stt_fake)
        stt_fake.clear_requests()
        filtered = client.transcribe(
            path, chunking=ChunkingOptions(mode=mode, vad=ENERGY), response_format="verbose_json"
        )
        with_vad = _uploaded_seconds(stt_fake)
    assert sum(without) > NOISE_SECONDS and len(without) >= 3
    # fox and numbers (10.4 s with their own quiet ends), up to 0.4 s of padding on both sides: one upload
    assert len(with_vad) == 1 and 8 < sum(with_vad) < 12
    assert plain.duration == pytest.approx(duration, abs=0.01)
    assert filtered.duration == pytest.approx(duration, abs=0.01)
    # the fake times its segments over the upload: mapped back, the last one ends after numbers.wav
    # starts, near its end (not at the 8-12 s of the kept audio)
    assert filtered.segments[0].start == 0.0
    assert numbers_start < filtered.segments[-1].end <= numbers_end + 0.5
    starts = [s.start for s in filtered.segments]
    assert starts == sorted(starts)


def test_auto_with_vad_filters_a_short_recording(stt_fake: FakeVLLM, tmp_path: Path) -> None:
    """Under 30 s, ``auto`` sends a file whole; with ``vad`` it finds the speech first."""
    fox, _ = sf.read(AUDIO / "fox.wav", dtype="float32")
    audio = np.concatenate([np.zeros(20 * RATE, np.float32), fox])
    audio += (np.random.default_rng(4).standard_normal(len(audio)) * 0.004).astype(np.float32)
    path = tmp_path / "late-fox.wav"
    sf.write(path, audio, RATE)
    with vt.Client(stt_fake.url) as client:
        client.transcribe(path)
        whole = _uploaded_seconds(stt_fake)
        stt_fake.clear_requests()
        result = client.transcribe(path, chunking=ChunkingOptions(vad=ENERGY), response_format="verbose_json")
        filtered = _uploaded_seconds(stt_fake)
    assert whole == [pytest.approx(len(audio) / RATE, abs=0.01)]
    assert len(filtered) == 1 and filtered[0] < len(fox) / RATE + 0.8
    # where fox.wav starts, less the padding (0.4 s) at most; not at the kept audio's 0
    assert 20 - 0.4 <= result.segments[0].start < 20.5


def test_a_stream_with_vad_sends_the_speech_alone(
    stt_fake: FakeVLLM, noisy_gap: tuple[Path, float, float]
) -> None:
    path, _, _ = noisy_gap
    with (
        vt.Client(stt_fake.url) as client,
        client.transcribe_stream(path, chunking=ChunkingOptions(vad=ENERGY)) as stream,
    ):
        stream.until_done()
    sent = _uploaded_seconds(stt_fake)
    assert len(sent) == 1 and 8 < sent[0] < 12
