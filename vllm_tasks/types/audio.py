"""Speech-to-text results: ``Transcription`` (with SRT/VTT rendering), its segments and stream deltas."""

from __future__ import annotations

import base64
import html
import json
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from .. import defaults, media_files
from ..audio import sniff_audio, wav_bytes
from ..errors import InvalidInputError
from ..redaction import redact_url
from ..views import Attachment, Shown, card, clip, count, esc, note, pre, seconds_text, table, timestamp

ResponseFormat = Literal["json", "text", "verbose_json", "srt", "vtt", "diarized_json"]
"""What the caller asks for; ``srt``/``vtt``/``text`` are rendered client-side (vLLM refuses srt/vtt);
``diarized_json`` (speaker segments) needs a diarization model and vLLM >= 0.27.0."""

Seconds = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
"""A time in seconds from the start of the audio: finite and >= 0 (an answer with a NaN, infinite or
negative time is refused when it is parsed, so subtitles and chunk merging never see one)."""


class TranscriptionSegment(BaseModel):
    """A stretch of speech with its start and end time in seconds (from the start of the whole file).

    vLLM's ``verbose_json`` fields (``tokens``, ``avg_logprob``, ...) are kept when the server sent them.
    """

    model_config = ConfigDict(extra="allow")

    id: int = 0
    start: Seconds
    end: Seconds
    text: str
    seek: int | None = None
    tokens: list[int] | None = None
    temperature: float | None = None
    avg_logprob: float | None = None
    compression_ratio: float | None = None
    no_speech_prob: float | None = None


class SpeakerSegment(BaseModel):
    """A stretch of speech attributed to one speaker (``response_format="diarized_json"``).

    vLLM answers ``{"type": "transcript.text.segment", "id": "seg_0", "start", "end", "text",
    "speaker"}`` per segment, OpenAI's diarized shape; fields it may add later are kept.

    Attributes:
        id: the server's id, ``seg_<i>``.
        speaker: the model's label (MOSS-Transcribe-Diarize says ``S01``, ``S02``, ...). Labels are
            anonymous and hold within one request only.
        start: seconds from the start of the file.
        end: seconds from the start of the file.
        text: what was said (stripped).
        type: always ``transcript.text.segment``.

    Examples:
        >>> for seg in client.transcribe("meeting.wav", response_format="diarized_json").speaker_segments:
        ...     print(f"{seg.start:6.1f} {seg.speaker}: {seg.text}")
    """

    model_config = ConfigDict(extra="allow")

    id: str = ""
    speaker: str
    start: Seconds
    end: Seconds
    text: str
    type: str = "transcript.text.segment"


class TranscriptionWord(BaseModel):
    """One word with its start and end in seconds: from ``client.align`` or ``transcribe(...,
    aligner=...)`` (a forced aligner), or from an OpenAI server (vLLM 0.32 always sends ``words: null``)."""

    model_config = ConfigDict(extra="allow")

    word: str
    start: Seconds
    end: Seconds


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
            with ``response_format="json"`` each chunk is one segment. Empty for ``diarized_json``.
        speaker_segments: ``diarized_json`` only: the stretches of text with their speaker label
            (:class:`SpeakerSegment`); ``to_srt()``/``to_vtt()`` then label each cue.
        usage: what the server reported (summed over chunks).
        requests: how many HTTP requests produced this result (1 unless chunked client-side).

    Examples:
        >>> result = client.transcribe("talk.wav", response_format="srt")
        >>> print(result.to_srt())
    """

    model_config = ConfigDict(extra="allow")

    text: str
    language: str | None = None
    duration: Seconds | None = None
    segments: list[TranscriptionSegment] = Field(default_factory=list)
    words: list[TranscriptionWord] | None = None
    speaker_segments: list[SpeakerSegment] = Field(default_factory=list)
    usage: TranscriptionUsage | None = None
    model: str | None = None
    task: Literal["transcribe", "translate"] = "transcribe"
    response_format: ResponseFormat = "json"
    requests: int = 1
    finish_reasons: list[str] | None = None
    """Streams only: one ``finish_reason`` per server-side chunk (``"stop"`` or ``"length"``)."""
    _audio: Attachment = PrivateAttr(default_factory=Attachment)
    """The transcribed audio for the notebook view: the caller's path, or the caller's bytes when they
    were at most ``VIEW_MAX_MEDIA_BYTES``; by reference, never pickled or dumped."""

    def to_text(self) -> str:
        """The transcript as plain text (stripped)."""
        return self.text.strip()

    def to_srt(self, *, words: bool = False) -> str:
        """The segments as SubRip subtitles (``HH:MM:SS,mmm``); one cue for the text if no segments.
        Speaker segments (``diarized_json``) start each cue with the label: ``[S01] Hello.``.

        Args:
            words: one cue per word (``words`` filled by ``transcribe(..., aligner=...)``); the segments'
                cues when there are no words.

        Examples:
            >>> print(result.to_srt(words=True))  # doctest: +SKIP
            1
            00:00:00,320 --> 00:00:00,560
            Hello
        """
        return render_srt(self._cues(words=words))

    def to_vtt(self, *, words: bool = False) -> str:
        """The segments as WebVTT (``WEBVTT`` header, ``HH:MM:SS.mmm``). Speaker segments
        (``diarized_json``) carry WebVTT's voice span: ``<v S01>Hello.``.

        Args:
            words: one cue per word (``words`` filled by ``transcribe(..., aligner=...)``); the segments'
                cues when there are no words.
        """
        return render_vtt(self._cues(words=words))

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

    def player(self, audio: Any = None, *, max_bytes: int = defaults.VIEW_MAX_MEDIA_BYTES) -> AudioPlayer:
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
        return audio_player(source, max_bytes)

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
        return transcription_html(
            self, source, max_rows=max_rows, max_chars=max_chars, max_media_bytes=max_media_bytes
        )

    def _repr_html_(self) -> str:
        return self.to_html()

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        text = self.text.strip()
        shown = repr(clip(text, 60)) + (f" ({len(text):,} chars)" if len(text) > 60 else "")
        yield "text", Shown(shown)
        yield "language", self.language
        yield "duration", self.duration
        yield "segments", Shown(f"<{count(len(self.segments), 'segment')}>")
        if self.speaker_segments:
            yield "speaker_segments", Shown(f"<{count(len(self.speaker_segments), 'segment')}>")
        yield "model", self.model
        yield "task", self.task
        if self.requests != 1:
            yield "requests", self.requests

    def _cues(self, *, words: bool = False) -> list[Cue]:
        if words and self.words:
            return [(w.start, w.end, w.word) for w in self.words]
        if self.speaker_segments:
            return [(s.start, s.end, s.text, s.speaker) for s in self.speaker_segments]
        if self.segments:
            return [(s.start, s.end, s.text) for s in self.segments]
        if self.text.strip():
            return [(0.0, self.duration or 0.0, self.text)]
        return []


class Alignment(BaseModel):
    """What :meth:`Client.align` returns: each word of a known text with its time in the audio.

    Attributes:
        words: one :class:`TranscriptionWord` per word aligned, in order; times are non-decreasing and
            within ``[0, duration]``.
        text: the text as given.
        language: the aligner's name of the language given (``"English"``), or ``None``.
        duration: seconds of audio.
        model: the aligner model.

    Examples:
        >>> alignment = client.align("fox.wav", "the quick brown fox")
        >>> [(w.word, w.start, w.end) for w in alignment.words][:1]
        [('the', 0.24, 0.4)]
    """

    model_config = ConfigDict(extra="allow")

    words: list[TranscriptionWord]
    text: str
    language: str | None = None
    duration: Seconds | None = None
    model: str | None = None

    def to_srt(self) -> str:
        """One SubRip cue per word (``HH:MM:SS,mmm``).

        Examples:
            >>> print(alignment.to_srt())  # doctest: +SKIP
            1
            00:00:00,240 --> 00:00:00,400
            the
        """
        return render_srt([(w.start, w.end, w.word) for w in self.words])

    def to_vtt(self) -> str:
        """One WebVTT cue per word (``WEBVTT`` header, ``HH:MM:SS.mmm``)."""
        return render_vtt([(w.start, w.end, w.word) for w in self.words])


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


Cue = tuple[float, float, str] | tuple[float, float, str, str | None]
"""A subtitle cue: ``(start, end, text)``, or with a speaker label as its fourth item."""


def format_timestamp(seconds: float, *, separator: str = ",") -> str:
    """``HH:MM:SS,mmm`` (SRT; ``separator="."`` gives WebVTT's ``HH:MM:SS.mmm``).

    Raises:
        InvalidInputError: ``seconds`` is NaN, infinite or negative (no subtitle time says it).

    Examples:
        >>> format_timestamp(3725.5)
        '01:02:05,500'
    """
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidInputError(
            "seconds", seconds, "is not a time in a subtitle (finite, >= 0)", "Check the segments' times."
        )
    millis = round(seconds * 1000)
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{separator}{millis:03d}"


def _cue_text(text: str) -> str:
    # A blank line ends a cue in both formats; "-->" would be read as a timing line in WebVTT.
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines).replace("-->", "->")


def _vtt_text(text: str) -> str:
    """``text`` as WebVTT cue text: ``&``, ``<`` and ``>`` escaped (``<`` opens a tag, ``&`` an entity)."""
    return html.escape(text, quote=False)


def _speaker(cue: Cue) -> str:
    """The cue's speaker label on one line, without the characters that end a label ('', if none)."""
    label = cue[3] if len(cue) == 4 else None
    return " ".join(str(label or "").replace("[", "(").replace("]", ")").replace(">", ")").split())


def render_srt(cues: Sequence[Cue]) -> str:
    """SubRip text for ``(start, end, text)`` cues; empty cues are skipped, numbering is 1-based.

    Args:
        cues: ``(start, end, text)``, or ``(start, end, text, speaker)``: a speaker label starts the
            cue's text in brackets (SubRip has no speaker markup): ``[S01] Hello.``.

    Returns:
        str: the SubRip document.

    Raises:
        InvalidInputError: a cue's time is NaN, infinite or negative.

    Examples:
        >>> render_srt([(0.0, 1.5, "Hello.", "S01")])
        '1\\n00:00:00,000 --> 00:00:01,500\\n[S01] Hello.\\n'
    """
    blocks: list[str] = []
    for cue in cues:
        start, end, text = cue[0], cue[1], cue[2]
        body = _cue_text(text)
        if not body:
            continue
        if speaker := _speaker(cue):
            body = f"[{speaker}] {body}"
        stamp = f"{format_timestamp(start)} --> {format_timestamp(max(end, start))}"
        blocks.append(f"{len(blocks) + 1}\n{stamp}\n{body}\n")
    return "\n".join(blocks)


def render_vtt(cues: Sequence[Cue]) -> str:
    """WebVTT text for ``(start, end, text)`` cues; empty cues are skipped, ``&``, ``<`` and ``>`` in the
    text are escaped (``&amp;``, ``&lt;``, ``&gt;``) so players show them rather than read markup.

    Args:
        cues: ``(start, end, text)``, or ``(start, end, text, speaker)``: a speaker label opens
            WebVTT's voice span, ``<v S01>Hello.``, which players show as the speaker's name.

    Returns:
        str: the WebVTT document (``WEBVTT`` header first).

    Raises:
        InvalidInputError: a cue's time is NaN, infinite or negative.

    Examples:
        >>> render_vtt([(0.0, 1.5, "Hello.", "S01")])
        'WEBVTT\\n\\n00:00:00.000 --> 00:00:01.500\\n<v S01>Hello.\\n'
    """
    blocks = ["WEBVTT\n"]
    for cue in cues:
        start, end, text = cue[0], cue[1], cue[2]
        body = _cue_text(_vtt_text(text))
        if not body:
            continue
        if speaker := _speaker(cue):
            body = f"<v {_vtt_text(speaker)}>{body}"
        last = max(end, start)
        stamp = f"{format_timestamp(start, separator='.')} --> {format_timestamp(last, separator='.')}"
        blocks.append(f"{stamp}\n{body}\n")
    return "\n".join(blocks)


# --------------------------------------------------------------------------------------------------
# Notebook view
# --------------------------------------------------------------------------------------------------


class AudioPlayer:
    """An HTML5 audio player; a notebook shows it (``display(player)``, or as a cell's last value).

    Attributes:
        html: the ``<audio>`` element (the audio embedded as a data URL, or an http(s) ``src``).
        mime: the audio's MIME type (``None`` for a URL).
        size: bytes embedded (``None`` for a URL).
    """

    def __init__(self, html_text: str, mime: str | None = None, size: int | None = None) -> None:
        self.html = html_text
        self.mime = mime
        self.size = size

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        what = "a URL" if self.size is None else f"{self.size:,} bytes of {self.mime}"
        return f"AudioPlayer({what})"


def audio_player(audio: Any, max_bytes: int = defaults.VIEW_MAX_MEDIA_BYTES) -> AudioPlayer:
    """An :class:`AudioPlayer` for ``audio``: a path, bytes, ``(samples, sample_rate)`` or an http(s) URL
    (left to the browser to fetch, by reference; any ``user:password@`` in it is removed, as the view
    is saved with the notebook).

    Raises:
        InvalidInputError: naming the audio (a ``ValueError``): it is over ``max_bytes`` (it would be
            embedded in the notebook), or a path names no readable regular file (a FIFO, a device and a
            folder are never read; see :mod:`vllm_tasks.media_files`).
        ValueError: samples are empty or not 1-D/2-D.
        TypeError: for another kind of input (a file object: pass its bytes).
    """
    if isinstance(audio, str) and audio.strip().lower().startswith(("http://", "https://")):
        # Without user:password@: the view is saved into the .ipynb (and browsers refuse such a src).
        return AudioPlayer(
            f'<audio controls preload="none" src="{esc(redact_url(audio.strip(), query=False))}"></audio>'
        )
    if isinstance(audio, str | os.PathLike):
        path = Path(audio)
        data = media_files.read_regular_file(path, "audio", max_bytes=max_bytes, too_large=_over_view_cap)
        name = path.name
    elif isinstance(audio, bytes | bytearray | memoryview):
        _check_size(len(audio), max_bytes, "the audio")
        data, name = bytes(audio), ""
    elif isinstance(audio, tuple) and len(audio) == 2:
        samples, rate = audio
        frames = np.asarray(samples)
        if frames.size == 0:
            raise ValueError("cannot play an empty array of samples")
        _check_size(frames.size * 2 + 44, max_bytes, "the audio as 16-bit WAV")
        data, name = wav_bytes(frames, int(rate)), ".wav"
    else:
        raise TypeError(f"cannot play a {type(audio).__name__}: pass a path, bytes, (samples, rate) or a URL")
    mime = sniff_audio(data, name)
    encoded = base64.b64encode(data).decode("ascii")
    player = f'<audio controls preload="metadata" src="data:{esc(mime)};base64,{encoded}"></audio>'
    return AudioPlayer(player, mime, len(data))


def _check_size(size: int, max_bytes: int, what: str) -> None:
    if size > max_bytes:
        raise _over_view_cap("audio", what, max_bytes, f"{size:,} bytes")


def _over_view_cap(field: str, value: object, max_bytes: int, size: str) -> InvalidInputError:
    return InvalidInputError(
        field,
        value,
        f"is {size}, over max_bytes={max_bytes:,}: a notebook keeps every output it shows",
        "Pass a larger max_bytes to embed it anyway.",
    )


def _player_or_note(audio: Any, max_bytes: int) -> str:
    if audio is None:
        return ""
    try:
        return audio_player(audio, max_bytes).html
    except (ValueError, TypeError, OSError) as error:
        return note(f"audio not shown: {error}")


def transcription_html(
    result: Transcription,
    audio: Any = None,
    *,
    max_rows: int = defaults.VIEW_MAX_ROWS,
    max_chars: int = defaults.VIEW_MAX_TEXT_CHARS,
    max_media_bytes: int = defaults.VIEW_MAX_MEDIA_BYTES,
) -> str:
    """The view of a :class:`~vllm_tasks.Transcription`: a player when ``audio`` is at hand (and at most
    ``max_media_bytes``), then the timed segments (or the text when there are none)."""
    facts: list[tuple[str, object]] = [
        ("model", result.model),
        ("language", result.language),
        ("duration", seconds_text(result.duration) if result.duration is not None else None),
        ("requests", result.requests if result.requests != 1 else None),
    ]
    body = [_player_or_note(audio, max_media_bytes)]
    cell_limit = max(defaults.VIEW_MAX_CELL_CHARS, 1000)
    if result.speaker_segments:
        rows = [
            [timestamp(s.start), timestamp(s.end), esc(s.speaker), esc(clip(s.text.strip(), cell_limit))]
            for s in result.speaker_segments[: max(0, max_rows)]
        ]
        columns = [("start", True), ("end", True), ("speaker", False), ("text", False)]
        body.append(table(columns, rows, total=len(result.speaker_segments), noun="segment"))
    elif result.segments:
        rows = [
            [timestamp(s.start), timestamp(s.end), esc(clip(s.text.strip(), cell_limit))]
            for s in result.segments[: max(0, max_rows)]
        ]
        columns = [("start", True), ("end", True), ("text", False)]
        body.append(table(columns, rows, total=len(result.segments), noun="segment"))
    else:
        body.append(pre(result.text.strip(), max_chars))
    shown = len(result.speaker_segments or result.segments)
    title = ("Translation" if result.task == "translate" else "Transcription") + (
        f" — {count(shown, 'segment')}" if shown else f" — {len(result.text):,} chars"
    )
    return card(title, facts, *body)
