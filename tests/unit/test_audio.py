"""vllm_tasks.audio: input forms, decoding (soundfile, PyAV fallback), resampling, uploads, chunking."""

from __future__ import annotations

import io
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from vllm_tasks import audio
from vllm_tasks.errors import InvalidInputError, MissingDependency

AUDIO = Path(__file__).resolve().parent.parent / "data" / "audio"
RATE = audio.TARGET_RATE


def tone(seconds: float, rate: int = RATE, freq: float = 440.0, amp: float = 0.3) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def silence(seconds: float, rate: int = RATE) -> np.ndarray:
    return np.zeros(int(seconds * rate), dtype=np.float32)


def wav_bytes(samples: np.ndarray, rate: int, fmt: str = "WAV") -> bytes:
    buffer = io.BytesIO()
    sf.write(buffer, samples, rate, format=fmt)
    return buffer.getvalue()


# ------------------------------------------------------------------------------------------ inputs


def test_resolve_path_bytes_file_object_and_array() -> None:
    path = AUDIO / "fox.wav"
    assert audio.resolve(path).path == path
    assert audio.resolve(str(path)).filename == "fox.wav"
    data = path.read_bytes()
    assert audio.resolve(data).data == data
    assert audio.resolve(bytearray(data)).data == data
    with path.open("rb") as handle:
        source = audio.resolve(handle)
    assert source.data == data and source.name == str(path)
    source = audio.resolve((np.zeros(1600, dtype=np.int16), 8000))
    assert source.samples is not None and source.samples.dtype == np.float32 and source.sample_rate == 8000


def test_array_layouts_are_mixed_to_mono() -> None:
    stereo = np.stack([np.ones(100), -np.ones(100)], axis=1)  # (frames, channels)
    assert np.allclose(audio.resolve((stereo, 16000)).samples, 0.0)  # type: ignore[arg-type]
    channels_first = np.stack([np.ones(100), np.ones(100) * 0.5])  # (channels, frames)
    samples = audio.resolve((channels_first, 16000)).samples
    assert samples is not None and samples.shape == (100,) and np.allclose(samples, 0.75)
    int16 = np.array([16384, -16384], dtype=np.int16)
    assert np.allclose(audio.resolve((int16, 16000)).samples, [0.5, -0.5])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ((np.zeros(10), 0), "audio[1]"),
        ((np.zeros(10), 16000.0), "audio[1]"),
        ((np.zeros((2, 2, 2)), 16000), "audio[0]"),
        ((np.array([np.nan]), 16000), "audio[0]"),
        ((np.array(["a"]), 16000), "audio[0]"),
        (12345, "audio"),
    ],
)
def test_invalid_inputs_name_the_field(value: Any, field: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        audio.resolve(value)
    assert caught.value.field == field


def test_missing_empty_and_directory_paths_raise_decode_errors_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="No such file") as caught:
        audio.resolve(tmp_path / "missing.wav")
    assert caught.value.kind == "audio_decode" and str(caught.value.source).endswith("missing.wav")
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    with pytest.raises(InvalidInputError, match="empty"):
        audio.resolve(empty)
    with pytest.raises(InvalidInputError, match="is a folder"):
        audio.resolve(tmp_path)
    with pytest.raises(InvalidInputError, match="empty"):
        audio.resolve(b"")


def test_text_mode_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("hello")
    with path.open() as handle, pytest.raises(InvalidInputError, match="'rb'"):
        audio.resolve(handle)  # type: ignore[arg-type]


def test_corrupt_file_names_file_and_both_decoders(tmp_path: Path) -> None:
    path = tmp_path / "broken.wav"
    path.write_bytes(b"RIFF" + b"\x00garbage" * 100)
    with pytest.raises(InvalidInputError) as caught:
        audio.prepare_upload(audio.resolve(path))
    assert caught.value.source == str(path)
    assert "soundfile:" in caught.value.reason and "PyAV:" in caught.value.reason
    assert "BytesIO object at" not in str(caught.value)


def test_is_url() -> None:
    assert audio.is_url("https://example.com/a.wav") and audio.is_url("HTTP://x/y")
    assert not audio.is_url("a.wav") and not audio.is_url(b"https://x")


# ---------------------------------------------------------------------------------------- decoding


def test_info_and_decode_of_the_fixture() -> None:
    source = audio.resolve(AUDIO / "long45.wav")
    meta = audio.info(source)
    assert (meta.sample_rate, meta.channels, meta.format) == (16000, 1, "WAV")
    assert 45 < meta.duration < 47
    assert len(audio.decode(source)) == round(meta.duration * RATE)


def test_stereo_44k_is_mono_16k_after_decoding() -> None:
    left = tone(2.0, 44100, 440)
    source = audio.resolve(wav_bytes(np.stack([left, left], axis=1), 44100))
    samples = audio.decode(source)
    assert abs(len(samples) - 2 * RATE) <= 2
    spectrum = np.abs(np.fft.rfft(samples))
    assert abs(np.argmax(spectrum) * RATE / len(samples) - 440) < 2


def test_resampler_is_block_invariant_and_filters_above_nyquist() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(48000 * 2).astype(np.float32)
    one = audio.Resampler(48000)
    whole = np.concatenate([one.process(x), one.process(np.zeros(0, np.float32), final=True)])
    many = audio.Resampler(48000)
    parts = [many.process(x[i : i + 777]) for i in range(0, len(x), 777)]
    blocks = np.concatenate([*parts, many.process(np.zeros(0, np.float32), final=True)])
    assert len(whole) == len(blocks) and np.allclose(whole, blocks, atol=1e-5)
    assert abs(len(whole) - 2 * RATE) <= 2
    # 12 kHz is above the 8 kHz Nyquist of 16 kHz: the low-pass removes most of it (no alias at 4 kHz).
    high = audio.Resampler(48000)
    out = high.process(tone(1.0, 48000, 12000), final=True)
    assert np.sqrt(np.mean(out[100:-100] ** 2)) < 0.03


def test_pyav_fallback_when_soundfile_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audio, "_soundfile", lambda: None)
    source = audio.resolve(AUDIO / "fox.wav")
    assert audio.info(source).sample_rate == 16000
    samples = audio.decode(source)
    assert abs(len(samples) - 3.77 * RATE) < 0.05 * RATE
    content, ext, mime = audio.encode(samples)  # stdlib WAV without soundfile
    assert (ext, mime) == ("wav", "audio/wav") and content[:4] == b"RIFF"


def test_no_decoder_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audio, "_soundfile", lambda: None)
    monkeypatch.setattr(audio, "_pyav", lambda: None)
    source = audio.resolve(AUDIO / "fox.wav")
    upload = audio.prepare_upload(source, "auto")  # sent untouched: the server decodes
    assert upload.content == (AUDIO / "fox.wav").read_bytes()
    with pytest.raises(MissingDependency, match=r"vllm-tasks\[audio\]"):
        audio.prepare_upload(source, "always")
    # Arrays need no decoder.
    upload = audio.prepare_upload(audio.resolve((tone(0.5), RATE)))
    assert upload.filename.endswith(".wav")


# ----------------------------------------------------------------------------------------- uploads


def test_mono_16k_wav_is_uploaded_as_is() -> None:
    upload = audio.prepare_upload(audio.resolve(AUDIO / "fox.wav"))
    assert upload.content == (AUDIO / "fox.wav").read_bytes()
    assert upload.filename == "fox.wav" and upload.content_type == "audio/wav"
    assert upload.duration is not None and 3.7 < upload.duration < 3.8


def test_other_audio_is_normalised_to_16k_mono_flac() -> None:
    data = wav_bytes(np.stack([tone(1.0, 22050)] * 2, axis=1), 22050, "OGG")
    upload = audio.prepare_upload(audio.resolve(data))
    assert upload.content_type == "audio/flac" and upload.filename == "audio.flac"
    decoded, rate = sf.read(io.BytesIO(upload.content))
    assert rate == 16000 and decoded.ndim == 1 and abs(len(decoded) - RATE) <= 2


def test_prepare_never_sends_bytes_untouched() -> None:
    upload = audio.prepare_upload(audio.resolve(b"not audio at all"), "never")
    assert upload.content == b"not audio at all" and upload.filename == "audio"


# ---------------------------------------------------------------------------------------- chunking


def test_quietest_point_and_silence() -> None:
    signal = np.concatenate([tone(1.0), silence(0.2), tone(1.0)])
    point = audio.quietest_point(signal, 0, len(signal))
    assert RATE <= point <= int(1.2 * RATE)
    assert audio.is_silent(silence(1.0)) and not audio.is_silent(signal)
    assert audio.is_silent(np.zeros(0, dtype=np.float32))


def blocks_of(signal: np.ndarray, size: int = 12345) -> Any:
    return iter([signal[i : i + size] for i in range(0, len(signal), size)])


def test_chunks_cut_in_pauses_cover_everything_and_overlap() -> None:
    # 9 s of sound then 0.4 s of silence, repeated: 94 s in all.
    period = np.concatenate([tone(9.0), silence(0.4)])
    signal = np.tile(period, 10)
    chunks = list(audio.iter_chunks(blocks_of(signal), max_seconds=30, search_seconds=6, overlap_seconds=0.5))
    assert len(chunks) >= 4
    assert chunks[0].start == 0 and chunks[0].own_start == 0
    assert chunks[-1].end == pytest.approx(len(signal) / RATE)
    for before, after in itertools.pairwise(chunks):
        assert after.own_start == pytest.approx(before.end)  # spans are contiguous
        assert after.start == pytest.approx(after.own_start - 0.5)  # 0.5 s overlap
        # each cut lies in a pause: 9.0-9.4 s into a period
        assert 8.99 <= before.end % 9.4 <= 9.41
    for chunk in chunks:
        assert len(chunk.samples) <= 30 * RATE
        assert len(chunk.samples) == pytest.approx((chunk.end - chunk.start) * RATE, abs=1)
        assert not chunk.silent


def test_silent_chunks_are_flagged_and_short_tails_merged() -> None:
    signal = np.concatenate([tone(10.0), silence(25.0), tone(0.1, amp=0.0)])
    chunks = list(audio.iter_chunks(blocks_of(signal), max_seconds=20, search_seconds=5, overlap_seconds=0))
    assert [c.silent for c in chunks] == [False, True]
    assert chunks[-1].end == pytest.approx(len(signal) / RATE)
    # A tail of a few samples after the last cut is not a chunk of its own.
    signal = np.concatenate([tone(19.99), silence(0.05)])
    chunks = list(audio.iter_chunks(blocks_of(signal), max_seconds=20, search_seconds=5, overlap_seconds=0))
    assert chunks[-1].end == pytest.approx(len(signal) / RATE)


def test_short_audio_is_one_chunk() -> None:
    chunks = list(audio.iter_chunks(blocks_of(tone(3.0)), max_seconds=30))
    assert len(chunks) == 1 and chunks[0].end == pytest.approx(3.0)


def test_chunking_streams_long_inputs() -> None:
    # Two hours of audio as a lazy block stream: chunks come out before the input is read to the end.
    minute = np.concatenate([tone(29.0), silence(1.0)])
    consumed = 0

    def blocks() -> Any:
        nonlocal consumed
        for _ in range(120):
            consumed += 1
            yield minute

    chunks = audio.iter_chunks(blocks(), max_seconds=30, search_seconds=5, overlap_seconds=0.5)
    first = next(chunks)
    assert first.index == 0 and consumed <= 2
    assert sum(1 for _ in chunks) >= 119


def test_invalid_chunk_settings() -> None:
    with pytest.raises(InvalidInputError):
        list(audio.iter_chunks(blocks_of(tone(1.0)), max_seconds=5, search_seconds=5, overlap_seconds=1))


def m4a_bytes(samples: np.ndarray, rate: int) -> bytes:
    """AAC in an MP4 container (what phones record), written with PyAV."""
    import av

    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as container:
        stream = container.add_stream("aac", rate=rate)
        stream.layout = "mono"
        frame_size = 1024
        pcm = samples.astype(np.float32)
        for start in range(0, len(pcm), frame_size):
            block = pcm[start : start + frame_size].reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(block, format="fltp", layout="mono")
            frame.sample_rate = rate
            frame.pts = start
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buffer.getvalue()


def test_m4a_is_decoded_with_pyav() -> None:
    data = m4a_bytes(tone(2.0, 44100, 440), 44100)
    source = audio.resolve(data)
    assert "mp4" in audio.info(source).format
    samples = audio.decode(source)
    assert abs(len(samples) - 2 * RATE) < 0.1 * RATE
    spectrum = np.abs(np.fft.rfft(samples))
    assert abs(np.argmax(spectrum) * RATE / len(samples) - 440) < 3
    upload = audio.prepare_upload(source)
    assert upload.content_type == "audio/flac"
