"""Notebook views of results: bounded, escaped HTML for ``_repr_html_`` and short ``__repr__`` parts.

Every function here is pure and renders from a result's fields. User text (documents, transcripts, OCR
markdown, server messages, model names) is always escaped. Every view is bounded: a table shows at most
``max_rows`` rows and counts the rest, cells and long texts are cut with an ellipsis, and media (audio, a
page image) larger than ``defaults.VIEW_MAX_MEDIA_BYTES`` are not embedded. The result types call these
from their ``to_html()`` / ``_repr_html_()``; nothing here is needed outside a notebook.

What a result keeps only for its view (the caller's audio path, the texts of a ``score`` call) is held in
an :class:`Attachment`: by reference, never copied, left out of pickles, comparisons and ``model_dump``.
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
import reprlib
import wave
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from . import defaults

if TYPE_CHECKING:  # annotations only: the types modules import this one
    from .types.audio import Transcription
    from .types.embeddings import EmbeddingResult
    from .types.ocr import OCRResult
    from .types.scoring import RerankResult, ScoreResult
    from .types.server import ProbeReport

COLORS = ("#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#9a6324")
"""Box colours, one per label in order of appearance (``OCRResult.draw`` and the OCR view share them)."""

_STYLE = (  # one scoped style sheet per view (as pandas does), not a style attribute on every cell
    "<style>"
    ".vllm-tasks-view{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;font-size:13px;"
    "line-height:1.45;max-width:100%;overflow-x:auto}"
    ".vllm-tasks-view table{border-collapse:collapse;margin:6px 0}"
    ".vllm-tasks-view th,.vllm-tasks-view td{border-bottom:1px solid rgba(128,128,128,.3);padding:3px 8px;"
    "text-align:left;vertical-align:top;max-width:48em;overflow-wrap:anywhere}"
    ".vllm-tasks-view th{font-weight:600;border-bottom-color:rgba(128,128,128,.6)}"
    ".vllm-tasks-view .n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    ".vllm-tasks-view .m{opacity:.72}"
    ".vllm-tasks-view pre{white-space:pre-wrap;word-break:break-word;margin:6px 0;padding:8px;"
    "max-height:560px;overflow:auto;border:1px solid rgba(128,128,128,.35);border-radius:4px;font-size:12px}"
    "</style>"
)
_NUMERIC = ' class="n"'
_STATUS_COLORS = {
    "served": "#2e7d32",
    "not_served": "#757575",
    "inactive": "#ef6c00",
    "unauthorized": "#c62828",
    "error": "#c62828",
}


class Attachment:
    """Something a result keeps for its notebook view only (e.g. the path of the transcribed audio).

    Held by reference (never copied). It is not part of the model: ``model_dump`` and JSON leave it out,
    it pickles as empty (a pickled result carries no audio and no inputs) and it never makes two results
    unequal.

    Examples:
        >>> pickle.loads(pickle.dumps(Attachment("talk.wav"))).value is None
        True
    """

    __slots__ = ("value",)

    def __init__(self, value: Any = None) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Attachment)

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[type[Attachment], tuple[()]]:
        return (Attachment, ())

    def __deepcopy__(self, memo: dict[int, Any]) -> Attachment:
        return Attachment(self.value)  # a deep copy of a result still refers to the same audio

    def __repr__(self) -> str:
        return "Attachment()" if self.value is None else f"Attachment(<{type(self.value).__name__}>)"


class Shown:
    """A value whose ``repr`` is the given text: how a result's ``__repr__`` shows a summary."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


# --------------------------------------------------------------------------------------------------
# Text helpers
# --------------------------------------------------------------------------------------------------

_REPR = reprlib.Repr()
_REPR.maxstring = 80
_REPR.maxother = 80
_REPR.maxdict = 6
_REPR.maxlist = 6
_REPR.maxlevel = 3


def esc(value: object) -> str:
    """``value`` as text, HTML-escaped (quotes too: safe in attributes).

    Examples:
        >>> esc("<b>\"x\"</b>")
        '&lt;b&gt;&quot;x&quot;&lt;/b&gt;'
    """
    return html.escape(str(value), quote=True)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last one an ellipsis when it was longer.

    Examples:
        >>> clip("abcdef", 4)
        'abc…'
    """
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + "…"


def describe(value: Any, limit: int = defaults.VIEW_MAX_CELL_CHARS) -> str:
    """A short plain-text description of a document or input, for one table cell (not escaped).

    Strings are cut to ``limit``; a mapping shows its ``text``, or its content parts; images, bytes and
    arrays are named with their size; anything else is a bounded ``repr``.

    Examples:
        >>> describe({"text": "Paris", "id": 7})
        'Paris'
    """
    if isinstance(value, str):
        return clip(value, limit)
    if isinstance(value, Mapping):
        text = value.get("text")
        if isinstance(text, str):
            return clip(text, limit)
        if "content" in value:
            return describe(value["content"], limit)
        if "type" in value:
            return clip(_part(value), limit)
    if isinstance(value, list | tuple) and value and all(isinstance(v, str | Mapping) for v in value[:50]):
        parts = [v if isinstance(v, str) else _part(v) for v in value[:50]]
        return clip(" ".join(parts) + (" …" if len(value) > 50 else ""), limit)
    return clip(_object(value), limit)


def _part(part: Mapping[str, Any]) -> str:
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        return str(part["text"])
    return f"[{kind if isinstance(kind, str) else 'part'}]"


def _object(value: Any) -> str:
    size = getattr(value, "size", None)
    if type(value).__module__.startswith("PIL.") and isinstance(size, tuple) and len(size) == 2:
        return f"[image {size[0]}×{size[1]}]"
    if isinstance(value, bytes | bytearray | memoryview):
        return f"[{len(value):,} bytes]"
    if isinstance(value, np.ndarray):
        return f"[array {value.dtype}{list(value.shape)}]"
    if isinstance(value, Path):
        return str(value)
    return _REPR.repr(value)


def count(n: int, noun: str) -> str:
    """``"1 hit"``, ``"12,000 hits"``."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def seconds_text(seconds: float) -> str:
    """``"1:02:03.4"``, ``"2:03.4"`` or ``"3.4 s"``."""
    if not math.isfinite(seconds):
        return str(seconds)
    minutes, secs = divmod(max(0.0, seconds), 60.0)
    if minutes < 1:
        return f"{secs:.1f} s"
    hours, minutes = divmod(int(minutes), 60)
    return f"{hours}:{minutes:02d}:{secs:04.1f}" if hours else f"{minutes}:{secs:04.1f}"


def timestamp(seconds: float) -> str:
    """``"00:01:02.500"`` (a segment's start or end)."""
    millis = max(0, round(seconds * 1000)) if math.isfinite(seconds) else 0
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}.{millis:03d}"


# --------------------------------------------------------------------------------------------------
# HTML building blocks
# --------------------------------------------------------------------------------------------------


def card(title: str, facts: Iterable[tuple[str, object]], *body: str) -> str:
    """One view: a bold title, a line of ``label: value`` facts (both escaped), then ``body`` (HTML)."""
    line = " · ".join(f"{esc(label)}: <b>{esc(value)}</b>" for label, value in facts if value is not None)
    head = f"<div><b>{esc(title)}</b></div>" + (f'<div class="m">{line}</div>' if line else "")
    return f'<div class="vllm-tasks-view">{_STYLE}{head}{"".join(body)}</div>'


def table(
    columns: Sequence[tuple[str, bool]], rows: Iterable[Sequence[str]], *, total: int, noun: str = "row"
) -> str:
    """An HTML table; ``columns`` are ``(title, numeric)``, each row's cells are HTML already.

    ``total`` is how many rows exist: when more than were rendered, a line says how many are hidden.
    """
    head = "".join(f"<th{_NUMERIC if numeric else ''}>{esc(title)}</th>" for title, numeric in columns)
    body = []
    for row in rows:
        cells = (
            f"<td{_NUMERIC if numeric else ''}>{cell}</td>"
            for (_, numeric), cell in zip(columns, row, strict=False)
        )
        body.append(f"<tr>{''.join(cells)}</tr>")
    hidden = total - len(body)
    more = (
        f'<div class="m">… {hidden:,} more {noun}{"" if hidden == 1 else "s"} not shown '
        "(<code>to_html(max_rows=…)</code> shows more)</div>"
        if hidden > 0
        else ""
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}"


def note(text: str) -> str:
    """A muted line of plain text (escaped)."""
    return f'<div class="m">{esc(text)}</div>'


def pre(text: str, limit: int) -> str:
    """``text`` in a scrolling pre-formatted box, cut to ``limit`` characters (the cut is said)."""
    shown = clip(text, limit)
    cut = note(f"showing {limit:,} of {len(text):,} characters") if len(text) > limit else ""
    return f"<pre>{esc(shown)}</pre>{cut}"


def bar(value: float, low: float, high: float) -> str:
    """A thin horizontal bar for a score between ``low`` and ``high``."""
    span = high - low
    share = 0.0 if span <= 0 or not math.isfinite(value) else min(1.0, max(0.0, (value - low) / span))
    return (
        '<div style="width:80px;height:6px;background:rgba(128,128,128,.2);border-radius:3px">'
        f'<div style="width:{share * 100:.0f}%;height:6px;background:#4c8bf5;border-radius:3px"></div></div>'
    )


def _score_range(scores: Iterable[float]) -> tuple[float, float]:
    values = [s for s in scores if math.isfinite(s)]
    if not values:
        return 0.0, 1.0
    return min(0.0, *values), max(values)


# --------------------------------------------------------------------------------------------------
# Embeddings
# --------------------------------------------------------------------------------------------------


def norm_stats(vectors: Any, limit: int = defaults.VIEW_MAX_NORM_ROWS) -> dict[str, float] | None:
    """``{"min", "mean", "max", "rows", "nonfinite"}`` of the L2 norms of the first ``limit`` rows.

    Computed in blocks (bounded memory); ``None`` for an array that is not a 2-D numeric matrix.

    Examples:
        >>> norm_stats(np.array([[3.0, 4.0]]))["max"]
        5.0
    """
    array = np.asarray(vectors)
    if array.ndim != 2 or array.shape[0] == 0 or array.dtype.kind not in "fiubV":  # V: bfloat16, fp8
        return None
    rows = min(limit, array.shape[0])
    norms: list[np.ndarray[Any, Any]] = []
    nonfinite = 0
    try:
        for start in range(0, rows, 1024):
            block = np.asarray(array[start : min(rows, start + 1024)]).astype(np.float64)
            finite = np.isfinite(block).all(axis=1)
            nonfinite += int((~finite).sum())
            norms.append(np.sqrt(np.einsum("ij,ij->i", block[finite], block[finite])))
    except (TypeError, ValueError):  # a dtype numpy cannot widen
        return None
    joined = np.concatenate(norms) if norms else np.zeros(0)
    if joined.size == 0:
        return {"rows": float(rows), "nonfinite": float(nonfinite)}
    return {
        "min": float(joined.min()),
        "mean": float(joined.mean()),
        "max": float(joined.max()),
        "rows": float(rows),
        "nonfinite": float(nonfinite),
    }


def shape_text(array: Any) -> str:
    """``"float32[2, 384]"``."""
    value = np.asarray(array)
    return f"{value.dtype}[{', '.join(str(n) for n in value.shape)}]"


def embedding_html(result: EmbeddingResult, *, max_rows: int = 5, max_columns: int = 8) -> str:
    """The view of an :class:`~vllm_tasks.EmbeddingResult`: shape, dtype, norms, model, usage, transport."""
    vectors = np.asarray(result.vectors)
    facts: list[tuple[str, object]] = [
        ("model", result.model or "?"),
        ("transport", result.encoding_format),
        ("prompt tokens", f"{result.usage.prompt_tokens:,}"),
    ]
    stats = norm_stats(vectors)
    lines = []
    if stats is not None and "min" in stats:
        unit = abs(stats["min"] - 1) < 1e-3 and abs(stats["max"] - 1) < 1e-3
        of = "" if stats["rows"] >= vectors.shape[0] else f" (first {int(stats['rows']):,} vectors)"
        lines.append(
            f"L2 norms{of}: min {stats['min']:.4g} · mean {stats['mean']:.4g} · max {stats['max']:.4g}"
            + (" — unit length (normalized)" if unit else "")
        )
    if stats is not None and stats["nonfinite"]:
        lines.append(f"{count(int(stats['nonfinite']), 'vector')} with NaN or infinite values")
    summary = "".join(note(line) for line in lines)
    title = f"EmbeddingResult — {shape_text(vectors)}"
    if vectors.ndim == 2 and vectors.shape[0]:
        title += f" ({count(vectors.shape[0], 'vector')} × {vectors.shape[1]:,} dims)"
    return card(title, facts, summary, _preview(vectors, max_rows, max_columns))


def _preview(vectors: np.ndarray[Any, Any], max_rows: int, max_columns: int) -> str:
    if vectors.ndim != 2 or not vectors.shape[0] or max_rows <= 0:
        return ""
    shown = vectors[:max_rows, :max_columns]
    more_columns = vectors.shape[1] > max_columns
    columns = [("#", True)] + [(str(j), True) for j in range(shown.shape[1])]
    if more_columns:
        columns.append(("…", False))
    rows = []
    for i, row in enumerate(shown):
        cells = [str(i)] + [esc(_number(value)) for value in row]
        rows.append(cells + (["…"] if more_columns else []))
    return table(columns, rows, total=vectors.shape[0], noun="vector")


def _number(value: Any) -> str:
    try:
        return f"{float(value):.4g}"
    except (TypeError, ValueError):
        return str(value)


# --------------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------------


def _scoring_facts(result: RerankResult | ScoreResult) -> list[tuple[str, object]]:
    return [
        ("model", result.model or "?"),
        ("scorer", str(result.scorer)),
        ("prompt tokens", f"{result.usage.prompt_tokens:,}"),
    ]


def rerank_html(
    result: RerankResult,
    *,
    max_rows: int = defaults.VIEW_MAX_ROWS,
    max_chars: int = defaults.VIEW_MAX_CELL_CHARS,
) -> str:
    """The view of a :class:`~vllm_tasks.RerankResult`: the ranked documents, best first."""
    hits = result.results
    low, high = _score_range(hit.score for hit in hits)
    rows = [
        [
            str(rank),
            str(hit.index),
            f"{hit.score:.4f}",
            bar(hit.score, low, high),
            esc(describe(hit.document, max_chars)),
        ]
        for rank, hit in enumerate(hits[: max(0, max_rows)], start=1)
    ]
    columns = [("rank", True), ("index", True), ("score", True), ("", False), ("document", False)]
    facts = [*_scoring_facts(result), ("requests", result.num_requests)]
    title = f"RerankResult — {count(len(hits), 'hit')}"
    return card(title, facts, table(columns, rows, total=len(hits), noun="hit"))


def top_indices(scores: np.ndarray[Any, Any], k: int) -> list[int]:
    """Positions of the ``k`` highest scores, highest first (ties: lower position first); O(n) for large n.

    Examples:
        >>> top_indices(np.array([0.1, 0.9, 0.5]), 2)
        [1, 2]
    """
    n = scores.shape[0]
    if k <= 0 or n == 0:
        return []
    candidates = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
    order = sorted(candidates.tolist(), key=lambda i: (-float(scores[i]), i))
    return order[:k]


def score_html(
    result: ScoreResult,
    inputs: tuple[Sequence[Any], Sequence[Any], str] | None,
    *,
    max_rows: int = defaults.VIEW_MAX_ROWS,
    max_chars: int = defaults.VIEW_MAX_CELL_CHARS,
) -> str:
    """The view of a :class:`~vllm_tasks.ScoreResult`: pairs ranked by score, with their texts when the
    result kept them (``inputs`` = ``(text_1 side, text_2 side, mode)``)."""
    scores = np.asarray(result.scores, dtype=np.float64).reshape(-1)
    order = top_indices(scores, max_rows)
    low, high = _score_range(scores[order].tolist())
    firsts, seconds, mode = inputs if inputs is not None else ((), (), "")
    zipped = mode == "N:N"
    columns = [("rank", True), ("pair", True), ("score", True), ("", False)]
    if seconds:
        columns += [("text_1", False)] if zipped else []
        columns.append(("text_2", False))
    rows = []
    for rank, i in enumerate(order, start=1):
        cells = [str(rank), str(i), f"{scores[i]:.4f}", bar(float(scores[i]), low, high)]
        if seconds and i < len(seconds):
            if zipped:
                cells.append(esc(describe(firsts[i], max_chars)))
            cells.append(esc(describe(seconds[i], max_chars)))
        rows.append(cells)
    body = []
    if firsts and not zipped:
        body.append(note("text_1: " + describe(firsts[0], max_chars)))
    if not seconds:
        body.append(note("texts not kept by this result (made elsewhere, unpickled, or not all strings)"))
    body.append(table(columns, rows, total=scores.shape[0], noun="pair"))
    title = f"ScoreResult — {count(scores.shape[0], 'score')}, ranked"
    return card(title, _scoring_facts(result), *body)


# --------------------------------------------------------------------------------------------------
# Speech to text
# --------------------------------------------------------------------------------------------------


def sniff_audio(data: bytes, name: str = "") -> str:
    """The MIME type of encoded audio, from its first bytes (else from ``name``'s extension).

    Examples:
        >>> sniff_audio(Path("talk.wav").read_bytes())
        'audio/wav'
    """
    head = data[:16]
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "audio/wav"
    signatures = ((b"fLaC", "audio/flac"), (b"OggS", "audio/ogg"), (b"ID3", "audio/mpeg"))
    for magic, mime in signatures:
        if head.startswith(magic):
            return mime
    if head[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"):
        return "audio/mpeg"
    if head[4:8] == b"ftyp":
        return "audio/mp4"
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "audio/webm"
    extensions = {".wav": "audio/wav", ".flac": "audio/flac", ".mp3": "audio/mpeg", ".ogg": "audio/ogg"}
    return extensions.get(os.path.splitext(name)[1].lower(), "application/octet-stream")


def wav_bytes(samples: Any, rate: int) -> bytes:
    """16-bit PCM WAV of ``samples`` (1-D mono, or 2-D frames × channels; floats in -1..1 or integers).

    Raises:
        ValueError: an empty array, or one of another shape.

    Examples:
        >>> wav_bytes(np.zeros(16000, np.float32), 16000)[:4]
        b'RIFF'
    """
    array = np.asarray(samples)
    if array.ndim == 2 and array.shape[0] < array.shape[1] and array.shape[0] <= 8:
        array = array.T  # (channels, frames) given
    if array.ndim not in (1, 2) or array.size == 0:
        raise ValueError(f"audio samples must be a non-empty 1-D or 2-D array, not shape {array.shape}")
    if np.issubdtype(array.dtype, np.integer):
        floats = array.astype(np.float64) / (float(np.iinfo(array.dtype).max) + 1.0)
    else:
        floats = array.astype(np.float64)
    pcm = (np.clip(np.nan_to_num(floats), -1.0, 1.0) * 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1 if pcm.ndim == 1 else pcm.shape[1])
        out.setsampwidth(2)
        out.setframerate(int(rate))
        out.writeframes(pcm.tobytes())
    return buffer.getvalue()


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
    (left to the browser to fetch, by reference).

    Raises:
        ValueError: the audio is over ``max_bytes`` (it would be embedded in the notebook), or a path is
            not a readable file.
        TypeError: for another kind of input (a file object: pass its bytes).

    Examples:
        >>> audio_player("talk.wav")  # the last value of a notebook cell shows the player
        AudioPlayer(120,758 bytes of audio/wav)
    """
    if isinstance(audio, str) and audio.strip().lower().startswith(("http://", "https://")):
        return AudioPlayer(f'<audio controls preload="none" src="{esc(audio.strip())}"></audio>')
    if isinstance(audio, str | os.PathLike):
        path = Path(audio)
        if not path.is_file():
            raise ValueError(f"no audio file at {path}")
        _check_size(path.stat().st_size, max_bytes, str(path))
        data, name = path.read_bytes(), path.name
    elif isinstance(audio, bytes | bytearray | memoryview):
        _check_size(len(audio), max_bytes, "the audio")
        data, name = bytes(audio), ""
    elif isinstance(audio, tuple) and len(audio) == 2:
        samples, rate = audio
        frames = np.asarray(samples)
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
        raise ValueError(
            f"{what} is {size:,} bytes, over max_bytes={max_bytes:,}: a notebook keeps every output it shows "
            "(pass a larger max_bytes to embed it anyway)"
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
    if result.segments:
        cell_limit = max(defaults.VIEW_MAX_CELL_CHARS, 1000)
        rows = [
            [timestamp(s.start), timestamp(s.end), esc(clip(s.text.strip(), cell_limit))]
            for s in result.segments[: max(0, max_rows)]
        ]
        columns = [("start", True), ("end", True), ("text", False)]
        body.append(table(columns, rows, total=len(result.segments), noun="segment"))
    else:
        body.append(pre(result.text.strip(), max_chars))
    title = ("Translation" if result.task == "translate" else "Transcription") + (
        f" — {count(len(result.segments), 'segment')}"
        if result.segments
        else f" — {len(result.text):,} chars"
    )
    return card(title, facts, *body)


# --------------------------------------------------------------------------------------------------
# OCR
# --------------------------------------------------------------------------------------------------


def image_data_url(prepared: Any, max_bytes: int = defaults.VIEW_MAX_MEDIA_BYTES) -> str | None:
    """The data URL of an OCR'd page for display: the uploaded bytes when small enough, else a copy at most
    ``VIEW_IMAGE_MAX_SIDE`` pixels long as JPEG; ``None`` when no image is at hand or it cannot be shrunk.
    """
    data_url = getattr(prepared, "data_url", None)
    data = getattr(prepared, "data", None)
    if not isinstance(data_url, str) or not isinstance(data, bytes):
        return None
    if len(data) <= max_bytes and data_url.startswith("data:image/"):
        return data_url
    try:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as image:
            image.thumbnail((defaults.VIEW_IMAGE_MAX_SIDE, defaults.VIEW_IMAGE_MAX_SIDE))
            buffer = io.BytesIO()
            image.convert("RGB").save(buffer, format="JPEG", quality=85)
    except Exception:
        return None
    if buffer.tell() > max_bytes:
        return None
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def label_colors(labels: Iterable[str | None]) -> dict[str, str]:
    """A colour per label, in order of first appearance."""
    colors: dict[str, str] = {}
    for label in labels:
        colors.setdefault(label or "", COLORS[len(colors) % len(COLORS)])
    return colors


def page_svg(result: OCRResult, data_url: str, colors: Mapping[str, str]) -> str:
    """The page image with every block's boxes drawn over it, as inline SVG (boxes in image pixels)."""
    width, height = result.image_size or result.sent_size or (999, 999)
    stroke = max(2.0, max(width, height) / 400)
    rects = []
    for block in result.blocks:
        color = colors.get(block.label or "", COLORS[0])
        tip = esc(f"{block.label or 'text'}: {clip(block.text, 160)}")
        for x1, y1, x2, y2 in block.boxes if result.image_size else []:
            rects.append(
                f'<rect x="{x1}" y="{y1}" width="{max(0, x2 - x1)}" height="{max(0, y2 - y1)}" '
                f'fill="{color}" fill-opacity="0.08" stroke="{color}" stroke-width="{stroke:.1f}">'
                f"<title>{tip}</title></rect>"
            )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        'style="width:100%;height:auto;max-height:800px;border:1px solid rgba(128,128,128,.35)">'
        f'<image href="{esc(data_url)}" x="0" y="0" width="{width}" height="{height}" '
        f'preserveAspectRatio="none"/>{"".join(rects)}</svg>'
    )


def _legend(colors: Mapping[str, str]) -> str:
    swatches = (
        f'<span style="display:inline-block;margin-right:10px"><span style="display:inline-block;width:10px;'
        f'height:10px;background:{color};margin-right:4px"></span>{esc(label or "text")}</span>'
        for label, color in list(colors.items())[:40]
    )
    return f"<div>{''.join(swatches)}</div>"


def ocr_html(
    result: OCRResult,
    prepared: Any = None,
    *,
    max_rows: int = defaults.VIEW_MAX_ROWS,
    max_chars: int = defaults.VIEW_MAX_TEXT_CHARS,
    max_media_bytes: int = defaults.VIEW_MAX_MEDIA_BYTES,
) -> str:
    """The view of an :class:`~vllm_tasks.OCRResult`: the page with its boxes beside the markdown when the
    image is at hand (``prepared``), else the markdown; then the block list."""
    facts: list[tuple[str, object]] = [
        ("model", result.model),
        ("image", "×".join(map(str, result.image_size)) if result.image_size else None),
        ("finish", result.finish_reason),
        ("prompt tokens", f"{result.usage.prompt_tokens:,}"),
        ("completion tokens", f"{result.usage.completion_tokens or 0:,}"),
    ]
    colors = label_colors(block.label for block in result.blocks if block.boxes)
    data_url = image_data_url(prepared, max_media_bytes) if prepared is not None else None
    markdown = pre(result.markdown, max_chars)
    body = []
    if result.truncated:
        body.append('<div style="color:#c62828">cut short by max_tokens: the page is incomplete</div>')
    if data_url is not None:
        side = "flex:1 1 340px;min-width:0"
        body.append(
            '<div style="display:flex;gap:12px;flex-wrap:wrap;align-items:flex-start">'
            f'<div style="{side}">{page_svg(result, data_url, colors)}{_legend(colors)}</div>'
            f'<div style="{side}">{markdown}</div></div>'
        )
    else:
        if prepared is not None:
            body.append(note("page image too large to embed"))
        body.append(markdown)
    body.append(_blocks_table(result, max_rows))
    title = f"OCRResult — {count(len(result.blocks), 'block')}"
    return card(title, facts, *body)


def _blocks_table(result: OCRResult, max_rows: int) -> str:
    rows = []
    for i, block in enumerate(result.blocks[: max(0, max_rows)]):
        boxes = block.boxes[:2]
        box_text = "; ".join(f"[{x1}, {y1}, {x2}, {y2}]" for x1, y1, x2, y2 in boxes)
        if len(block.boxes) > 2:
            box_text += f" +{len(block.boxes) - 2}"
        label = esc(block.label or "") + ("" if block.complete else " (cut)")
        rows.append(
            [str(i), label, esc(box_text), esc(clip(block.text.strip(), defaults.VIEW_MAX_CELL_CHARS))]
        )
    columns = [("#", True), ("label", False), ("boxes (px)", False), ("text", False)]
    return table(columns, rows, total=len(result.blocks), noun="block")


# --------------------------------------------------------------------------------------------------
# Probe reports
# --------------------------------------------------------------------------------------------------


def _status(status: str) -> str:
    color = _STATUS_COLORS.get(status, "#757575")
    return f'<span style="color:{color};font-weight:600">{esc(status)}</span>'


def _reference(reference: str | None) -> str:
    if not reference:
        return ""
    if reference.lower().startswith(("https://", "http://")):
        return f' <a href="{esc(reference)}" target="_blank" rel="noopener noreferrer">reference</a>'
    return f" ({esc(reference)})"


def probe_html(report: ProbeReport, *, max_chars: int = defaults.VIEW_MAX_CELL_CHARS) -> str:
    """The view of a :class:`~vllm_tasks.ProbeReport`: the served-task table, the models and advisories."""
    server = report.server
    facts: list[tuple[str, object]] = [
        ("server", server.base_url),
        ("vLLM", server.version or "hidden"),
        ("served", f"{len(report.served_tasks)} of {len(report.tasks)} tasks"),
        (
            "n-gram processor",
            None if report.ngram_processor is None else ("loaded" if report.ngram_processor else "MISSING"),
        ),
    ]
    rows = [
        [
            esc(probe.task),
            f"<code>{esc(probe.path)}</code>",
            _status(str(probe.status)),
            esc(probe.http_status if probe.http_status is not None else ""),
            esc(clip(probe.detail or "", max_chars)),
        ]
        for probe in report.tasks
    ]
    columns = [("task", False), ("route", False), ("status", False), ("HTTP", True), ("detail", False)]
    models = [
        [esc(card.id), esc(card.root or ""), esc(card.parent or ""), esc(card.max_model_len or "")]
        for card in server.models[: defaults.VIEW_MAX_ROWS]
    ]
    model_columns = [("model", False), ("root", False), ("parent", False), ("max_model_len", True)]
    advisories = "".join(
        f"<li><b>{esc(a.id)}</b>: {esc(clip(a.message, 2000))}{_reference(a.reference)}</li>"
        for a in report.advisories
    )
    body = [
        table(columns, rows, total=len(report.tasks), noun="task"),
        table(model_columns, models, total=len(server.models), noun="model"),
        f'<div><b>Advisories</b><ul style="margin:4px 0">{advisories}</ul></div>'
        if advisories
        else note("no advisories for this server"),
    ]
    return card("ProbeReport", facts, *body)
