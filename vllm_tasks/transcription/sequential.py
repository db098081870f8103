"""Whisper's long-form algorithm over HTTP (``chunking="sequential"``): pure code, no I/O.

Whisper (and faster-whisper) transcribe a long recording one 30 s window at a time, in order:

1. the window starting at ``seek`` is decoded with timestamps (``verbose_json``), conditioned on the text
   of the previous windows (``prompt``);
2. when the decode looks wrong -- its text compresses too well (``compression_ratio`` > 2.4: a loop) or
   its average log-probability is low (``avg_logprob`` < -1.0) -- it is decoded again at the next
   temperature of 0.0, 0.2, ..., 1.0, and the best attempt kept when none passes;
3. ``seek`` moves to the end of the last complete segment (the model's own timestamps), so a word cut
   by the window's edge is decoded whole in the next window instead of being split;
4. after a window decoded at a temperature above 0.5 the prompt starts over (a wrong text would
   otherwise steer the next windows).

:class:`SequentialDecoder` holds that state for one recording; the client's loop asks it for the next
window, sends the requests it says (see ``AsyncAudioMethods._transcribe_sequential``) and hands the
answers back. What vLLM 0.32 changes, and how this module answers it:

- vLLM computes ``avg_logprob`` and ``compression_ratio`` per segment: the window's values are
  computed here as faster-whisper does (the token-weighted mean of the segments' log-probabilities;
  ``zlib`` on the window's whole text).
- ``no_speech_prob`` is always ``null``: the no-speech rule (``no_speech_prob`` > 0.6 and
  ``avg_logprob`` < -1.0 skips the window) applies when a server sends it; besides, windows without an
  audible 20 ms frame are never sent, and the end of a recording whose rest is quiet is not decoded.
- a decode without timestamp tokens comes back with no segment and no text: that window is asked again
  as ``json`` (its text then spans the window, as Whisper does for a decode without timestamps).
"""

from __future__ import annotations

import logging
import math
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import httpx
import numpy as np

from .. import audio as audio_io
from ..types.audio import ResponseFormat, Transcription, TranscriptionSegment, TranscriptionUsage
from .merge import overlap_words
from .params import SequentialOptions, Task, TranscribeParams
from .parsing import clean_text

MIN_ADVANCE_SECONDS = 1.0
"""A window whose segments end earlier than this is treated as one without timestamps (no progress)."""
MAX_REPEAT_WORDS = 3
"""At most this many words at the start of a window that seeks inside the previous one are dropped when
they repeat that window's last words."""
_RATE = audio_io.TARGET_RATE
logger = logging.getLogger("vllm_tasks")


def compression_ratio(text: str) -> float:
    """faster-whisper's ``get_compression_ratio``: UTF-8 bytes over their zlib-compressed size.

    Examples:
        >>> round(compression_ratio("the cat " * 20), 1) > 2.4
        True
    """
    data = text.encode("utf-8")
    return len(data) / len(zlib.compress(data)) if data else 0.0


def window_logprob(segments: list[TranscriptionSegment]) -> float | None:
    """A window's average token log-probability from its segments' (vLLM averages per segment over its
    tokens and closing timestamp): the mean weighted by those counts; ``None`` when no segment has one.
    """
    total = weight = 0.0
    for segment in segments:
        if segment.avg_logprob is None:
            continue
        count = len(segment.tokens) + 1 if segment.tokens is not None else 1
        total += segment.avg_logprob * count
        weight += count
    return total / weight if weight else None


@dataclass(frozen=True)
class Window:
    """One window to decode.

    Attributes:
        index: 0-based position among the windows sent.
        start: seconds from the start of the file (segment times are offset by this).
        samples: mono float32 at 16 kHz.
        final: whether the window reaches the end of the file.
    """

    index: int
    start: float
    samples: audio_io.Samples
    final: bool

    @property
    def duration(self) -> float:
        return len(self.samples) / _RATE


@dataclass
class Attempt:
    """One decode of a window: its segments (times relative to the window), text and judgement."""

    temperature: float
    segments: list[TranscriptionSegment]
    text: str
    avg_logprob: float | None
    compression_ratio: float
    no_speech_prob: float | None = None
    timestamps: bool = True
    """False when the text came from ``json`` (the decode had no timestamp tokens)."""
    language: str | None = None


class SampleReader:
    """Forward-only random access to a stream of 16 kHz blocks: a window at any position not before
    the last one asked for (earlier samples are dropped: bounded memory for long files)."""

    def __init__(self, blocks: Iterator[audio_io.Samples]) -> None:
        self._blocks = blocks
        self._buffer: audio_io.Samples = np.zeros(0, dtype=np.float32)
        self._start = 0  # file sample index of _buffer[0]
        self._exhausted = False

    def read(self, start: int, length: int) -> audio_io.Samples:
        """Samples ``[start, start + length)`` (fewer at the end of the file)."""
        if start < self._start:
            raise ValueError(f"cannot read back: sample {start} was dropped (kept from {self._start})")
        while self._start + len(self._buffer) < start + length and not self._exhausted:
            block = next(self._blocks, None)
            if block is None:
                self._exhausted = True
            elif block.size:
                self._buffer = np.concatenate([self._buffer, block])
        drop = min(start - self._start, len(self._buffer))
        self._buffer = self._buffer[drop:]
        self._start += drop
        offset = start - self._start  # > 0 only past the end of the file
        return self._buffer[offset : offset + length].copy()

    def ends_within(self, start: int, length: int) -> bool:
        """Whether the file ends at or before ``start + length`` (call after ``read(start, length)``)."""
        return self._exhausted and self._start + len(self._buffer) <= start + length


def speech_in(samples: audio_io.Samples, reference_rms: float) -> bool:
    """Whether ``samples`` hold a frame loud enough to be speech: louder than a tenth of
    ``reference_rms`` (the loudest frame of the window it ends) and than :data:`audio_io.SILENCE_RMS`."""
    return audio_io.peak_rms(samples) > max(audio_io.SILENCE_RMS, 0.1 * reference_rms)


@dataclass
class SequentialDecoder:
    """The state of one recording's long-form transcription: where the next window starts, the
    prompt, the segments so far.

    The client's loop: ``window = decoder.next_window(reader)`` (``None``: done); for each temperature
    of ``decoder.temperatures()``, send ``decoder.params(temperature)`` with the window as
    ``verbose_json``, read it with :meth:`attempt`, and when :meth:`needs_text` ask ``json`` and read it
    with :meth:`text_attempt`; stop at the first attempt that does not :meth:`needs_fallback`; then
    :meth:`accept` the :meth:`best` of them. :meth:`result` is the whole transcription.
    """

    params: TranscribeParams
    options: SequentialOptions
    task: Task
    model: str | None
    seek: int = 0
    """Where the next window starts, in samples."""
    windows: int = 0
    requests: int = 0
    segments: list[TranscriptionSegment] = field(default_factory=list)
    language: str | None = None
    _history: list[str] = field(default_factory=list)
    _end: int | None = None
    """The file's length in samples, once read to the end."""
    _done: bool = False
    _carry: str = ""
    """The text of the previous window when the next one starts inside it (seeking to its last
    timestamp): the next window's first words that repeat its last ones are dropped."""

    def __post_init__(self) -> None:
        self.language = self.params.language
        if self.params.prompt:
            self._history.append(clean_text(self.params.prompt))

    # -- windows ------------------------------------------------------------------------------------

    def next_window(self, reader: SampleReader) -> Window | None:
        """The next window to send (CPU-bound: decodes ahead); ``None`` when the file is done.

        A window that does not reach the end of the file ends at the quietest 20 ms frame of its last
        ``search_seconds``. Windows without an audible frame are skipped unsent (Whisper invents text
        for silence).
        """
        length = int(self.options.window_seconds * _RATE)
        search = int(self.options.search_seconds * _RATE)
        while not self._done:
            samples = reader.read(self.seek, length)
            final = reader.ends_within(self.seek, length)
            if final:
                self._end = self.seek + len(samples)
            elif search:
                samples = samples[: audio_io.quietest_point(samples, length - search, length)]
            if len(samples) < audio_io.FRAME or audio_io.is_silent(samples):
                self.seek += len(samples)
                self._done = final
                continue
            return Window(self.windows, self.seek / _RATE, samples, final)
        return None

    def tail_is_quiet(self, window: Window, seek_in_window: int) -> bool:
        """Whether the window's audio after ``seek_in_window`` samples holds no speech: no 20 ms frame
        louder than a tenth of the loudest before it (and than ``SILENCE_RMS``)."""
        rest = window.samples[seek_in_window:]
        if len(rest) < audio_io.FRAME:
            return True
        return not speech_in(rest, audio_io.peak_rms(window.samples[:seek_in_window]))

    # -- requests ----------------------------------------------------------------------------------

    def temperatures(self) -> tuple[float, ...]:
        """The temperatures to try for a window: the caller's ``temperature`` alone, else the ladder."""
        if self.params.temperature is not None:
            return (self.params.temperature,)
        return self.options.temperatures

    def prompt(self) -> str | None:
        """The previous windows' text since the last reset (the caller's ``prompt`` first), at most
        ``prompt_max_words`` of the latest words."""
        if not self._history or self.options.prompt_max_words == 0:
            return None
        words = " ".join(self._history).split()
        return " ".join(words[-self.options.prompt_max_words :]) or None

    def params_for(self, temperature: float) -> TranscribeParams:
        """The form fields of one attempt: the prompt, the temperature, the detected language; beam
        search only at temperature 0 (faster-whisper samples above it)."""
        beam = self.params.use_beam_search if temperature == 0 else None
        return replace(
            self.params,
            prompt=self.prompt(),
            temperature=temperature,
            language=self.language,
            response_format="verbose_json",
            use_beam_search=beam,
            n=self.params.n if beam else None,
            length_penalty=self.params.length_penalty if beam else None,
        )

    # -- answers -----------------------------------------------------------------------------------

    def attempt(self, window: Window, result: Transcription, temperature: float) -> Attempt:
        """A ``verbose_json`` answer as an attempt: its segments clipped to the window, the window's
        compression ratio (zlib, on the segments' text) and average log-probability."""
        duration = window.duration
        segments: list[TranscriptionSegment] = []
        for segment in result.segments:
            text = clean_text(segment.text)
            if not text:
                continue
            start = min(max(0.0, segment.start), duration)
            end = min(max(start, segment.end), duration)
            segments.append(segment.model_copy(update={"start": start, "end": end, "text": text}))
        text = clean_text(" ".join(segment.text for segment in segments))
        no_speech = next((s.no_speech_prob for s in result.segments if s.no_speech_prob is not None), None)
        return Attempt(
            temperature,
            segments,
            text,
            window_logprob(segments),
            compression_ratio(text),
            no_speech,
            language=result.language,
        )

    def needs_text(self, window: Window, attempt: Attempt) -> bool:
        """Whether the decode lost its text: no segment, or segments ending before
        :data:`MIN_ADVANCE_SECONDS` in a window that goes on with speech (no progress to seek to)."""
        if not attempt.segments:
            return True
        end = attempt.segments[-1].end
        return end < MIN_ADVANCE_SECONDS and not self.tail_is_quiet(window, int(end * _RATE))

    def empty_attempt(self, temperature: float) -> Attempt:
        """An attempt whose decode produced nothing (:func:`empty_decode`): no segment."""
        return Attempt(temperature, [], "", None, 0.0)

    def text_attempt(self, window: Window, result: Transcription, temperature: float) -> Attempt:
        """A ``json`` answer (asked when the decode had no timestamps): its text spans the window."""
        text = clean_text(result.text)
        segments = [TranscriptionSegment(start=0.0, end=window.duration, text=text)] if text else []
        return Attempt(
            temperature,
            segments,
            text,
            None,
            compression_ratio(text),
            timestamps=False,
            language=result.language,
        )

    def is_silence(self, attempt: Attempt) -> bool:
        """faster-whisper's no-speech rule: ``no_speech_prob`` above its threshold and ``avg_logprob``
        not above ``log_prob_threshold`` (only when the server sends ``no_speech_prob``)."""
        threshold = self.options.no_speech_threshold
        if threshold is None or attempt.no_speech_prob is None or attempt.no_speech_prob <= threshold:
            return False
        floor = self.options.log_prob_threshold
        return not (floor is not None and attempt.avg_logprob is not None and attempt.avg_logprob > floor)

    def needs_fallback(self, attempt: Attempt) -> bool:
        """Whether to decode the window again at the next temperature: a compression ratio above the
        threshold (a loop), or an average log-probability below it (silence excepted)."""
        limit = self.options.compression_ratio_threshold
        if limit is not None and attempt.compression_ratio > limit:
            return True
        floor = self.options.log_prob_threshold
        low = floor is not None and attempt.avg_logprob is not None and attempt.avg_logprob < floor
        return low and not self.is_silence(attempt)

    def best(self, attempts: list[Attempt]) -> Attempt:
        """The attempt to keep: the last one when it passed; else, as faster-whisper, the one with the
        highest average log-probability among those under the compression threshold (all when none)."""
        last = attempts[-1]
        if not self.needs_fallback(last):
            return last
        limit = self.options.compression_ratio_threshold
        below = [a for a in attempts if limit is None or a.compression_ratio <= limit] or attempts
        return max(below, key=lambda a: a.avg_logprob if a.avg_logprob is not None else -math.inf)

    def accept(self, window: Window, attempt: Attempt) -> None:
        """Keep ``attempt``'s segments (offset to the file) and move ``seek``.

        ``seek`` moves to the end of the last segment when speech follows it in the window (Whisper's
        rule: the unfinished part is decoded again with the next window), else past the window (the
        decode had no timestamps, was silence, or nothing but quiet follows the last segment). The
        next window's first words that repeat this one's last (at most :data:`MAX_REPEAT_WORDS`) are
        dropped: the model's timestamp can end a segment before its last word does. The prompt takes
        the window's text, or starts over after a window decoded above
        ``prompt_reset_on_temperature``.
        """
        self.windows += 1
        self.language = self.language or attempt.language
        length = len(window.samples)
        segments = [] if self.is_silence(attempt) else _drop_repeat(self._carry, attempt.segments)
        for segment in segments:
            self.segments.append(
                segment.model_copy(
                    update={
                        "id": len(self.segments),
                        "start": round(window.start + segment.start, 3),
                        "end": round(window.start + segment.end, 3),
                        "seek": round(window.start * 100),
                        "temperature": attempt.temperature,
                    }
                )
            )
        advance = length
        if attempt.timestamps and segments:
            end = min(length, round(segments[-1].end * _RATE))
            if end >= MIN_ADVANCE_SECONDS * _RATE and not self.tail_is_quiet(window, end):
                advance = end
        self._carry = attempt.text if advance < length else ""
        self.seek += advance
        self._done = window.final and advance == length
        logger.debug(
            "window %d at %.2f s (%.2f s): t=%s, %d segment(s)%s, avg_logprob %s, compression %.2f; "
            "next at %.2f s",
            window.index,
            window.start,
            window.duration,
            attempt.temperature,
            len(segments),
            "" if attempt.timestamps else " from json",
            None if attempt.avg_logprob is None else round(attempt.avg_logprob, 2),
            attempt.compression_ratio,
            self.seek / _RATE,
        )
        text = " ".join(segment.text for segment in segments)
        if attempt.temperature > self.options.prompt_reset_on_temperature:
            self._history.clear()
        elif self.options.condition_on_previous_text:
            if text:
                self._history.append(text)
        else:
            self._history.clear()

    # -- the result --------------------------------------------------------------------------------

    def result(self, *, response_format: ResponseFormat, duration: float | None) -> Transcription:
        """The whole transcription: the segments in order (times from the start of the file), their
        text joined with single spaces; usage in seconds of the whole file, rounded up, as vLLM reports
        for one upload (transcriptions only: vLLM reports none for translations)."""
        total = duration if duration is not None else (self._end or self.seek) / _RATE
        # vLLM answers a transcription's json with the upload's seconds (verbose_json without) and a
        # translation without usage: one file, one usage, whichever format the windows were asked in.
        usage = None
        if self.task == "transcribe":
            usage = TranscriptionUsage(type="duration", seconds=math.ceil(total))
        return Transcription(
            text=clean_text(" ".join(segment.text for segment in self.segments)),
            language=self.language,
            duration=total,
            segments=list(self.segments),
            usage=usage,
            model=self.model,
            task=self.task,
            response_format=response_format,
            requests=self.requests,
        )


def _drop_repeat(previous: str, segments: list[TranscriptionSegment]) -> list[TranscriptionSegment]:
    """``segments`` without their first words that repeat the last words of ``previous`` (at most
    :data:`MAX_REPEAT_WORDS`, compared case- and punctuation-insensitively)."""
    if not previous or not segments:
        return segments
    text = " ".join(segment.text for segment in segments)
    drop = overlap_words(previous, text, MAX_REPEAT_WORDS)
    out: list[TranscriptionSegment] = []
    for segment in segments:
        words = segment.text.split()
        if drop >= len(words):
            drop -= len(words)
            continue
        out.append(segment.model_copy(update={"text": " ".join(words[drop:])}) if drop else segment)
        drop = 0
    return out


def empty_decode(response: httpx.Response) -> bool:
    """Whether ``response`` is vLLM's answer to a ``verbose_json`` decode that produced nothing but
    end-of-text: 500 ``tuple index out of range`` (vLLM <= 0.32 indexes the empty token list; seen with
    a ``prompt``). The window then has no segment, as a decode without timestamps."""
    return response.status_code == 500 and "index out of range" in response.text


def window_upload(source: audio_io.AudioSource, window: Window) -> audio_io.Upload:
    """The upload of one window (CPU-bound): its samples encoded (FLAC, else WAV), named
    ``<stem>-NNNN.<ext>`` (as the pieces of ``chunking="client"``)."""
    content, ext, mime = audio_io.encode(window.samples)
    stem = source.filename.rsplit(".", 1)[0] or "audio"
    return audio_io.Upload(f"{stem}-{window.index:04d}.{ext}", content, mime, window.duration)
