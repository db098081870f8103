"""Merging the transcriptions of client-side pieces of long audio into one: words repeated across each
join (the pieces overlap) dropped, segment times offset to the whole file, and the text a
``verbose_json`` piece lost restored from its ``json`` answer."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .. import audio as audio_io
from ..types.audio import ResponseFormat, Transcription, TranscriptionSegment, TranscriptionUsage
from .params import Task
from .parsing import clean_text

_WORD = re.compile(r"[^\w']+")


def _norm(word: str) -> str:
    return _WORD.sub("", word.lower())


def overlap_words(previous: str, following: str, max_words: int = 8) -> int:
    """How many leading words of ``following`` repeat the trailing words of ``previous``.

    Compared case- and punctuation-insensitively; the longest repeat (up to ``max_words``) wins.
    """
    tail = [_norm(w) for w in previous.split()[-max_words:]]
    head = [_norm(w) for w in following.split()[:max_words]]
    for k in range(min(len(tail), len(head)), 0, -1):
        if tail[-k:] == head[:k] and any(tail[-k:]):
            return k
    return 0


def _drop_words(text: str, count: int) -> str:
    return " ".join(text.split()[count:]) if count else text


def merge_texts(texts: Sequence[str], *, dedupe: bool = True) -> str:
    """Join chunk texts with single spaces, dropping words repeated across each join."""
    merged = ""
    for raw in texts:
        text = clean_text(raw)
        if merged and dedupe:
            text = _drop_words(text, overlap_words(merged, text))
        if text:
            merged = f"{merged} {text}".strip()
    return merged


@dataclass
class ChunkResult:
    """One chunk's transcription (``None`` for a silent chunk, which is not sent)."""

    chunk: audio_io.AudioChunk
    result: Transcription | None


def text_missing(chunk: audio_io.AudioChunk, result: Transcription) -> bool:
    """Whether a ``verbose_json`` piece lost text: no segments, or speech after the last segment's end.

    "Speech" is a 20 ms frame louder than a tenth of the piece's loudest frame in the remaining audio
    (at least 1 s of it).
    """
    if not result.segments:
        return not audio_io.is_silent(chunk.samples)
    last_end = max(segment.end for segment in result.segments)
    tail = chunk.samples[int(last_end * audio_io.TARGET_RATE) :]
    if len(tail) < audio_io.TARGET_RATE:
        return False
    return audio_io.peak_rms(tail) > max(audio_io.SILENCE_RMS, 0.1 * audio_io.peak_rms(chunk.samples))


def complete_segments(result: Transcription, full_text: str, duration: float) -> Transcription:
    """Add the words of ``full_text`` (a piece's json text) that its ``verbose_json`` segments lack.

    When the segments' words begin ``full_text`` (80% of them matching), the rest becomes one more
    segment from the last segment's end to ``duration``; otherwise one segment spanning the piece
    replaces them. Times are relative to the piece.
    """
    full_words = clean_text(full_text).split()
    segment_words = " ".join(s.text for s in result.segments).split()
    base = result.model_copy(update={"text": clean_text(full_text)})
    if not full_words:
        return base
    k = len(segment_words)
    head = [_norm(w) for w in full_words[:k]]
    matched = sum(a == b for a, b in zip(head, (_norm(w) for w in segment_words), strict=False))
    if k and len(head) == k and matched >= 0.8 * k:
        rest = " ".join(full_words[k:])
        segments = list(result.segments)
        if rest:
            start = max(s.end for s in segments)
            segments.append(
                TranscriptionSegment(id=len(segments), start=start, end=max(start, duration), text=rest)
            )
        return base.model_copy(update={"segments": segments})
    whole = TranscriptionSegment(start=0.0, end=duration, text=clean_text(full_text))
    return base.model_copy(update={"segments": [whole]})


def merge_chunks(
    parts: Sequence[ChunkResult],
    *,
    task: Task,
    model: str | None,
    response_format: ResponseFormat,
    language: str | None,
    overlap_seconds: float = 0.5,
) -> Transcription:
    """One :class:`Transcription` from client-side chunks.

    Segment times are offset by each chunk's start and clipped to its own span, so segments never
    overlap; a chunk without segments (``json`` requests, or a piece in which the model emitted no
    timestamps) becomes one segment spanning the chunk. Usage seconds are those of the whole audio,
    rounded up, as vLLM reports for one file (the pieces overlap, and the server rounds each one up).
    """
    # At most the words the overlap can hold (~3 words/s, at least 1): identical phrases that really
    # follow each other ("Thank you. Thank you.") are kept.
    max_overlap = math.ceil(overlap_seconds * 3) if overlap_seconds > 0 else 0
    text = ""
    segments: list[TranscriptionSegment] = []
    reported = False
    detected: str | None = None
    for part in parts:
        chunk, result = part.chunk, part.result
        if result is None:
            continue
        detected = detected or result.language
        reported = reported or (result.usage is not None and result.usage.seconds is not None)
        chunk_text = clean_text(result.text)
        drop = overlap_words(text, chunk_text, max_overlap) if (max_overlap and text) else 0
        chunk_text = _drop_words(chunk_text, drop)
        if chunk_text:
            text = f"{text} {chunk_text}".strip()
        own: list[TranscriptionSegment] = []
        for segment in result.segments:
            start = max(chunk.own_start, min(chunk.end, chunk.start + segment.start))
            end = max(start, min(chunk.end, chunk.start + segment.end))
            words = segment.text
            if drop:
                kept = _drop_words(words, drop)
                drop = max(0, drop - len(words.split()))
                words = kept
            if words.strip():
                own.append(segment.model_copy(update={"start": start, "end": end, "text": words.strip()}))
        if not own and chunk_text:
            own = [TranscriptionSegment(start=chunk.own_start, end=chunk.end, text=chunk_text)]
        segments.extend(own)
    for index, segment in enumerate(segments):
        segment.id = index
    duration = parts[-1].chunk.end if parts else 0.0
    return Transcription(
        text=text,
        language=detected or language,
        duration=duration,
        segments=segments,
        usage=TranscriptionUsage(type="duration", seconds=math.ceil(duration)) if reported else None,
        model=model,
        task=task,
        response_format=response_format,
        requests=sum(1 for part in parts if part.result is not None),
    )
