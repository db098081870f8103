"""Speech-to-text results: ``Transcription`` (with SRT/VTT rendering), its segments and stream deltas."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from .. import defaults, views

ResponseFormat = Literal["json", "text", "verbose_json", "srt", "vtt"]
"""What the caller asks for; ``srt``/``vtt``/``text`` are rendered client-side (vLLM refuses srt/vtt)."""


class TranscriptionSegment(BaseModel):
    """A stretch of speech with its start and end time in seconds (from the start of the whole file).

    vLLM's ``verbose_json`` fields (``tokens``, ``avg_logprob``, ...) are kept when the server sent them.
    """

    model_config = ConfigDict(extra="allow")

    id: int = 0
    start: float
    end: float
    text: str
    seek: int | None = None
    tokens: list[int] | None = None
    temperature: float | None = None
    avg_logprob: float | None = None
    compression_ratio: float | None = None
    no_speech_prob: float | None = None


class TranscriptionWord(BaseModel):
    """One word with timings (OpenAI servers; vLLM 0.32 always sends ``words: null``)."""

    model_config = ConfigDict(extra="allow")

    word: str
    start: float
    end: float


class TranscriptionUsage(BaseModel):
    """Usage as reported: ``{"type": "duration", "seconds": n}`` (json) or token counts (stream)."""

    model_config = ConfigDict(extra="allow")

    type: str | None = None
    seconds: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None


class Transcription(BaseModel):
    """The result of ``transcribe`` / ``translate`` / ``transcribe_stream``.

    Attributes:
        text: the whole transcript (chunk joins cleaned: no doubled spaces or words).
        language: the language the server reported (``verbose_json``) or the one asked for.
        duration: seconds of audio, when known.
        segments: timed stretches of text. With client-side chunking they cover the whole file;
            with ``response_format="json"`` each chunk is one segment.
        usage: what the server reported (summed over chunks).
        requests: how many HTTP requests produced this result (1 unless chunked client-side).

    Examples:
        >>> result = client.transcribe("talk.wav", response_format="srt")
        >>> print(result.to_srt())
    """

    model_config = ConfigDict(extra="allow")

    text: str
    language: str | None = None
    duration: float | None = None
    segments: list[TranscriptionSegment] = Field(default_factory=list)
    words: list[TranscriptionWord] | None = None
    usage: TranscriptionUsage | None = None
    model: str | None = None
    task: Literal["transcribe", "translate"] = "transcribe"
    response_format: ResponseFormat = "json"
    requests: int = 1
    finish_reasons: list[str] | None = None
    """Streams only: one ``finish_reason`` per server-side chunk (``"stop"`` or ``"length"``)."""
    _audio: views.Attachment = PrivateAttr(default_factory=views.Attachment)
    """The transcribed audio for the notebook view: the caller's path, or the caller's bytes when they
    were at most ``VIEW_MAX_MEDIA_BYTES``; by reference, never pickled or dumped."""

    def to_text(self) -> str:
        """The transcript as plain text (stripped)."""
        return self.text.strip()

    def to_srt(self) -> str:
        """The segments as SubRip subtitles (``HH:MM:SS,mmm``); one cue for the text if no segments."""
        return render_srt(self._cues())

    def to_vtt(self) -> str:
        """The segments as WebVTT (``WEBVTT`` header, ``HH:MM:SS.mmm``)."""
        return render_vtt(self._cues())

    def to_json(self) -> str:
        """The result as JSON (the ``verbose_json`` shape plus this SDK's fields)."""
        return json.dumps(self.model_dump(mode="json", exclude_none=True), ensure_ascii=False)

    def formatted(self) -> str:
        """The result rendered in the ``response_format`` it was requested in."""
        if self.response_format == "srt":
            return self.to_srt()
        if self.response_format == "vtt":
            return self.to_vtt()
        if self.response_format == "text":
            return self.to_text()
        return self.to_json()

    def player(
        self, audio: Any = None, *, max_bytes: int = defaults.VIEW_MAX_MEDIA_BYTES
    ) -> views.AudioPlayer:
        """An HTML5 audio player of the transcribed audio, for a notebook.

        Args:
            audio: a path, bytes, ``(samples, sample_rate)`` or an http(s) URL (the browser fetches it).
                Default: what this result kept: the path it was made from, or the bytes when they were
                small (a file object, a URL or an array is not kept: pass it here).
            max_bytes: refuse to embed more than this (every notebook output is saved with the notebook).

        Returns:
            AudioPlayer: displayable (``_repr_html_``); ``.html`` is the ``<audio>`` element.

        Raises:
            ValueError: no audio is at hand, a path is not a file, or the audio is over ``max_bytes``.
            TypeError: an input of another kind.

        Examples:
            >>> result = client.transcribe("talk.wav")
            >>> result.player()  # the last value of a cell: a player in the notebook
        """
        source = audio if audio is not None else self._audio.value
        if source is None:
            raise ValueError(
                "this result keeps no audio (it was not made from a path or small bytes): pass it"
            )
        return views.audio_player(source, max_bytes)

    def to_html(
        self,
        audio: Any = None,
        *,
        max_rows: int = defaults.VIEW_MAX_ROWS,
        max_chars: int = defaults.VIEW_MAX_TEXT_CHARS,
        max_media_bytes: int = defaults.VIEW_MAX_MEDIA_BYTES,
    ) -> str:
        """An HTML view for notebooks: a player (when the audio is at hand), then the segments with their
        timestamps, or the text when there are none.

        Args:
            audio: audio to embed (see :meth:`player`); default: what this result kept.
            max_rows: segments rendered; the rest are counted.
            max_chars: characters of the text shown when there are no segments.
            max_media_bytes: audio over this is not embedded (a line says so): every notebook output is
                saved with the notebook.

        Examples:
            >>> IPython.display.HTML(result.to_html(max_rows=500))
        """
        source = audio if audio is not None else self._audio.value
        return views.transcription_html(
            self, source, max_rows=max_rows, max_chars=max_chars, max_media_bytes=max_media_bytes
        )

    def _repr_html_(self) -> str:
        return self.to_html()

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        text = self.text.strip()
        shown = repr(views.clip(text, 60)) + (f" ({len(text):,} chars)" if len(text) > 60 else "")
        yield "text", views.Shown(shown)
        yield "language", self.language
        yield "duration", self.duration
        yield "segments", views.Shown(f"<{views.count(len(self.segments), 'segment')}>")
        yield "model", self.model
        yield "task", self.task
        if self.requests != 1:
            yield "requests", self.requests

    def _cues(self) -> list[tuple[float, float, str]]:
        if self.segments:
            return [(s.start, s.end, s.text) for s in self.segments]
        if self.text.strip():
            return [(0.0, self.duration or 0.0, self.text)]
        return []


class TranscriptionDelta(BaseModel):
    """One piece of streamed text.

    Attributes:
        text: the new text.
        finish_reason: set on the last delta of each server-side chunk (``"stop"`` / ``"length"``);
            vLLM splits audio over 30 s and ends each piece separately.
        chunk: the 0-based server-side chunk this delta belongs to.
    """

    model_config = ConfigDict(extra="allow")

    text: str
    finish_reason: str | None = None
    chunk: int = 0


TranscriptionStreamEvent = TranscriptionDelta | Transcription
"""What a transcription stream yields: deltas, then one final :class:`Transcription`."""


def format_timestamp(seconds: float, *, separator: str = ",") -> str:
    """``HH:MM:SS,mmm`` (SRT; ``separator="."`` gives WebVTT's ``HH:MM:SS.mmm``)."""
    millis = max(0, round(seconds * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{millis:03d}"


def _cue_text(text: str) -> str:
    # A blank line ends a cue in both formats; "-->" would be read as a timing line in WebVTT.
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines).replace("-->", "->")


def render_srt(cues: list[tuple[float, float, str]]) -> str:
    """SubRip text for ``(start, end, text)`` cues; empty cues are skipped, numbering is 1-based."""
    blocks: list[str] = []
    for start, end, text in cues:
        body = _cue_text(text)
        if not body:
            continue
        stamp = f"{format_timestamp(start)} --> {format_timestamp(max(end, start))}"
        blocks.append(f"{len(blocks) + 1}\n{stamp}\n{body}\n")
    return "\n".join(blocks)


def render_vtt(cues: list[tuple[float, float, str]]) -> str:
    """WebVTT text for ``(start, end, text)`` cues; empty cues are skipped."""
    blocks = ["WEBVTT\n"]
    for start, end, text in cues:
        body = _cue_text(text)
        if not body:
            continue
        last = max(end, start)
        stamp = f"{format_timestamp(start, separator='.')} --> {format_timestamp(last, separator='.')}"
        blocks.append(f"{stamp}\n{body}\n")
    return "\n".join(blocks)
