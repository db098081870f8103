"""The building blocks of the notebook views: bounded, escaped HTML and short ``__repr__`` parts.

Each result type renders its own ``to_html()`` / ``_repr_html_()`` beside its model in ``vllm_tasks/types/``
(``types/embeddings.py``, ``types/scoring.py``, ``types/audio.py`` with the audio player, ``types/ocr.py``,
``types/server.py``) from these pieces; this module knows no result type. Every function here is pure.
User text (documents, transcripts, OCR markdown, server messages, model names) is always escaped. Every
view is bounded: a table shows at most ``max_rows`` rows and counts the rest, cells and long texts are cut
with an ellipsis, and media (audio, a page image) larger than ``defaults.VIEW_MAX_MEDIA_BYTES`` are not
embedded.

What a result keeps only for its view (the caller's audio path, the texts of a ``score`` call) is held in
an :class:`Attachment`: by reference, never copied, left out of pickles, comparisons and ``model_dump``.
"""

from __future__ import annotations

import html
import math
import reprlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import defaults

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


class Attachment:
    """Something a result keeps for its notebook view only (e.g. the path of the transcribed audio).

    Held by reference (never copied). It is not part of the model: ``model_dump`` and JSON leave it out,
    it pickles as empty (a pickled result carries no audio and no inputs) and it never makes two results
    unequal.
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
    """``value`` as text, HTML-escaped (quotes too: safe in attributes)."""
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


def shape_text(array: Any) -> str:
    """``"float32[2, 384]"``."""
    value = np.asarray(array)
    return f"{value.dtype}[{', '.join(str(n) for n in value.shape)}]"
