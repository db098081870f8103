"""Word timestamps from a forced aligner served on vLLM's ``/pooling``: pure code, no I/O.

Qwen3-ForcedAligner (vLLM 0.32: ``Qwen3ASRForcedAlignerForTokenClassification``, ``--runner pooling``) reads
the audio and the words of a known text in one prompt,
``<|audio_start|><|audio_pad|><|audio_end|>word1<timestamp><timestamp>word2<timestamp><timestamp>...``, and
classifies every prompt token into one of ``classify_num`` time bins; at each ``<timestamp>`` the argmax bin
times ``timestamp_segment_time`` (80 ms) is a word's start (the first of its two markers) or end (the
second). This is vLLM's recipe (``examples/pooling/token_classify/forced_alignment_online.py``: the prompt
sent as the request's raw chat template, which needs ``--trust-request-chat-template``) and transformers'
(``Qwen3ASRProcessor.split_words_for_alignment`` / ``decode_forced_alignment``, whose out-of-order repair
:func:`repair_timestamps` reproduces).

``/pooling`` answers one row of class scores per prompt token, audio tokens included, and no token ids. The
words' part of the prompt follows the audio, so the client tokenizes that part alone (``/tokenize``) and
reads the ``<timestamp>`` rows counted from the end of the answer.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..calls import CallOptions
from ..errors import InvalidInputError, UnexpectedResponse
from ..transport import Request
from ..types.audio import Alignment, Transcription, TranscriptionWord

POOLING_PATH = "/pooling"
AUDIO_PLACEHOLDER = "<|audio_start|><|audio_pad|><|audio_end|>"
"""Qwen3-ASR's audio placeholder; vLLM expands ``<|audio_pad|>`` to one token per encoder frame."""
TIMESTAMP = "<timestamp>"
RAW_CHAT_TEMPLATE = "{{ messages[0]['content'] }}"
"""The chat template sent with each request: the prompt exactly as written (vLLM's recipe)."""
SEGMENT_MS = 80.0
"""Qwen3-ForcedAligner's ``timestamp_segment_time``: milliseconds per time class."""
WINDOW_SECONDS = 30.0
"""``transcribe(..., aligner=)`` aligns at most this much audio per request (whole segments)."""

LANGUAGES: dict[str, str] = {
    "zh": "Chinese",
    "en": "English",
    "yue": "Cantonese",
    "fr": "French",
    "de": "German",
    "it": "Italian",
    "ja": "Japanese",
    "ko": "Korean",
    "pt": "Portuguese",
    "ru": "Russian",
    "es": "Spanish",
}
"""The languages Qwen3-ForcedAligner aligns (transformers' ``FORCED_ALIGNER_LANGUAGES``), by ISO code."""
_SEGMENTED = {"Japanese": "nagisa", "Korean": "soynlp"}
"""Languages whose words transformers finds with a morphological splitter (not a dependency here)."""


def aligner_language(language: str | None) -> str | None:
    """The aligner's name of ``language`` (an ISO code or an English name, any case), or ``None``.

    Raises:
        InvalidInputError: a language the aligner does not support.

    Examples:
        >>> aligner_language("en"), aligner_language("french")
        ('English', 'French')
    """
    if language is None:
        return None
    if not isinstance(language, str):
        raise InvalidInputError("language", language, "must be a str", "Pass an ISO code such as 'en'.")
    key = language.strip().lower()
    names = {name.lower(): name for name in LANGUAGES.values()}
    name = LANGUAGES.get(key) or names.get(key)
    if name is None:
        codes = ", ".join(sorted(LANGUAGES))
        raise InvalidInputError(
            "language", language, "is not a language the aligner supports", f"Use {codes}."
        )
    return name


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2B73F
        or 0x2B740 <= code <= 0x2B81F
        or 0x2B820 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


def _is_kept(char: str) -> bool:
    """Letters, digits, apostrophes and CJK ideographs: what the aligner's words are made of."""
    return char == "'" or unicodedata.category(char)[0] in "LN" or _is_cjk(char)


def split_words(text: str | Sequence[str], language: str | None = None) -> list[str]:
    """The words the aligner times: a text split as transformers' ``split_words_for_alignment`` does
    (each CJK ideograph on its own, other words at whitespace, punctuation dropped), or a list of words
    used as given (their punctuation dropped).

    Japanese and Korean text has no spaces between words and transformers splits it with nagisa / soynlp:
    pass such text as a list of words (split by the tool of your choice).

    Raises:
        InvalidInputError: not a str or a list of str; no word to align; a listed word with no letter or
            digit; Japanese or Korean given as one string; an unsupported language.

    Examples:
        >>> split_words("Hello, world! 你好")
        ['Hello', 'world', '你', '好']
    """
    name = aligner_language(language)
    if isinstance(text, str):
        if name in _SEGMENTED:
            raise InvalidInputError(
                "text",
                text,
                f"is {name} in one string: its words have no spaces between them",
                f"Pass a list of words (transformers splits {name} with {_SEGMENTED[name]}).",
            )
        words = _split_text(text)
    elif isinstance(text, Sequence) and all(isinstance(word, str) for word in text):
        words = []
        for index, word in enumerate(text):
            kept = "".join(char for char in word if _is_kept(char))
            if not kept:
                raise InvalidInputError(
                    f"text[{index}]", word, "has no letter or digit to align", "Leave it out of the list."
                )
            words.append(kept)
    else:
        raise InvalidInputError("text", text, "must be a str or a list of str", "Pass the transcript.")
    if not words:
        raise InvalidInputError("text", text, "has no word to align", "Pass the text spoken in the audio.")
    return words


def _split_text(text: str) -> list[str]:
    words: list[str] = []
    current: list[str] = []
    for char in text.strip():
        if _is_cjk(char) or char.isspace():
            if current:
                words.append("".join(current))
                current.clear()
            if _is_cjk(char):
                words.append(char)
        elif _is_kept(char):
            current.append(char)
    if current:
        words.append("".join(current))
    return words


def timestamp_text(words: Sequence[str]) -> str:
    """The words' part of the prompt: each word followed by its start and end markers.

    Examples:
        >>> timestamp_text(["hi", "there"])
        'hi<timestamp><timestamp>there<timestamp><timestamp>'
    """
    return "".join(f"{word}{TIMESTAMP}{TIMESTAMP}" for word in words)


def align_request(
    words: Sequence[str], audio_url: str, *, model: str | None, encoding_format: str | None, call: CallOptions
) -> Request:
    """The ``POST /pooling`` request that aligns ``words`` with the audio at ``audio_url`` (a data URL).

    Examples:
        >>> request = align_request(["hi"], "data:audio/flac;base64,AA==", model="m", encoding_format=None,
        ...                         call=CallOptions())
        >>> request.json["messages"][0]["content"][0]["text"]
        '<|audio_start|><|audio_pad|><|audio_end|>hi<timestamp><timestamp>'
    """
    content = [
        {"type": "text", "text": AUDIO_PLACEHOLDER + timestamp_text(words)},
        {"type": "audio_url", "audio_url": {"url": audio_url}},
    ]
    body: dict[str, Any] = {
        **({"model": model} if model else {}),
        "messages": [{"role": "user", "content": content}],
        "task": "token_classify",
        "chat_template": RAW_CHAT_TEMPLATE,
        **({"encoding_format": encoding_format} if encoding_format else {}),
        **(call.extra_body or {}),
    }
    return Request("POST", POOLING_PATH, json=body, headers=call.extra_headers, timeout=call.timeout)


def timestamp_rows(text_ids: Sequence[int], words: int, rows: int) -> list[int]:
    """Where the ``<timestamp>`` rows are in a ``/pooling`` answer of ``rows`` rows, given the token ids of
    the words' part of the prompt (:func:`timestamp_text`, tokenized alone): that part ends the prompt,
    and its last token is a ``<timestamp>`` (words never hold one: ``<`` and ``>`` are dropped).

    Raises:
        UnexpectedResponse: the ids do not hold two markers per word, or the answer is shorter than them.

    Examples:
        >>> timestamp_rows([7, 9, 9, 8, 9, 9], 2, 10)
        [5, 6, 8, 9]
    """
    if not text_ids:
        raise UnexpectedResponse("/tokenize: no token ids for the aligner's words", kind="decode")
    marker = text_ids[-1]
    found = [index for index, token in enumerate(text_ids) if token == marker]
    if len(found) != 2 * words:
        raise UnexpectedResponse(
            f"/tokenize: {len(found)} {TIMESTAMP} tokens for {words} words (two per word expected): the "
            "served model's tokenizer does not know the aligner's marker",
            kind="decode",
        )
    shift = rows - len(text_ids)
    if shift < 0:
        raise UnexpectedResponse(
            f"/pooling: {rows} rows of time classes for a prompt of at least {len(text_ids)} tokens",
            kind="decode",
        )
    return [index + shift for index in found]


def repair_timestamps(values: Sequence[float]) -> list[int]:
    """Times (ms) made non-decreasing as transformers' ``_fix_timestamps`` does: the longest non-decreasing
    run is kept, each other block of up to two values takes its nearer kept neighbour, a longer block is
    interpolated between its kept neighbours (or takes the one it has); results are truncated to ints.

    Examples:
        >>> repair_timestamps([80, 4000, 160, 240])
        [80, 80, 160, 240]
        >>> repair_timestamps([80, 160, 240, 320, 0, 0, 0, 800])
        [80, 160, 240, 320, 440, 560, 680, 800]
    """
    data = [float(value) for value in values]
    count = len(data)
    if count == 0:
        return []
    array = np.asarray(data)
    lengths = np.ones(count, dtype=np.int64)
    parents = np.full(count, -1, dtype=np.int64)
    for current in range(1, count):
        before = np.flatnonzero(array[:current] <= array[current])
        if before.size:
            best = before[int(np.argmax(lengths[before]))]  # the first of the longest, as the loop picks
            lengths[current] = lengths[best] + 1
            parents[current] = best
    kept = np.zeros(count, dtype=bool)
    index = int(np.argmax(lengths))
    while index != -1:
        kept[index] = True
        index = int(parents[index])
    result = list(data)
    start = 0
    while start < count:
        if kept[start]:
            start += 1
            continue
        end = start
        while end < count and not kept[end]:
            end += 1
        left = next((result[i] for i in range(start - 1, -1, -1) if kept[i]), None)
        right = next((result[i] for i in range(end, count) if kept[i]), None)
        for position in range(start, end):
            result[position] = _filled(position, start, end, left, right)
        start = end
    return [int(value) for value in result]


def _filled(position: int, start: int, end: int, left: float | None, right: float | None) -> float:
    """The repaired value at ``position`` of the outlier block ``[start, end)``."""
    if left is None or right is None:
        value = left if right is None else right
        return value if value is not None else 0.0
    if end - start <= 2:
        return left if position - (start - 1) <= end - position else right
    return left + (right - left) / (end - start + 1) * (position - start + 1)


def decode_alignment(
    scores: npt.NDArray[Any],
    rows: Sequence[int],
    words: Sequence[str],
    *,
    segment_ms: float,
    duration: float,
    offset: float = 0.0,
) -> list[TranscriptionWord]:
    """The words' times from a ``/pooling`` answer: the argmax class at each ``<timestamp>`` row times
    ``segment_ms``, repaired to be non-decreasing (:func:`repair_timestamps`), in seconds rounded to the
    millisecond as transformers rounds them, capped at ``duration`` (down to the millisecond; a random or
    confused model can name a bin past the end of the audio), then shifted by ``offset``.

    Args:
        scores: ``[tokens, classes]`` finite class scores (probabilities or logits).
        rows: the ``<timestamp>`` rows (:func:`timestamp_rows`), two per word.
        words: the words aligned.
        segment_ms: milliseconds per class.
        duration: seconds of audio aligned.
        offset: seconds added to every time (the window's start in the whole file).

    Raises:
        UnexpectedResponse: not a 2-D matrix, a row outside it, or not two rows per word.

    Examples:
        >>> decode_alignment(np.eye(4), [0, 1, 2, 3], ["a", "b"], segment_ms=80, duration=1.0)[1]
        TranscriptionWord(word='b', start=0.16, end=0.24)
    """
    matrix = np.asarray(scores)
    if matrix.ndim != 2 or matrix.shape[1] == 0:
        raise UnexpectedResponse(
            f"/pooling: time classes of shape {matrix.shape}, not [tokens, classes]", kind="decode"
        )
    if len(rows) != 2 * len(words) or any(not 0 <= row < matrix.shape[0] for row in rows):
        raise UnexpectedResponse(
            f"/pooling: {matrix.shape[0]} rows do not hold two {TIMESTAMP} rows for each of "
            f"{len(words)} words",
            kind="decode",
        )
    classes = np.argmax(matrix[list(rows)], axis=1)
    times = repair_timestamps([float(np.float32(value) * np.float32(segment_ms)) for value in classes])
    end_of_audio = math.floor(max(0.0, float(duration)) * 1000) / 1000  # whole milliseconds, as the times
    out = []
    for index, word in enumerate(words):
        start = min(round(times[2 * index] / 1000.0, 3), end_of_audio)
        end = min(round(times[2 * index + 1] / 1000.0, 3), end_of_audio)
        out.append(TranscriptionWord(word=word, start=offset + start, end=offset + max(start, end)))
    return out


@dataclass(frozen=True)
class AlignWindow:
    """A stretch of a transcription aligned in one request: its audio span and its words."""

    start: float
    end: float
    text: str


def align_windows(
    result: Transcription, duration: float, max_seconds: float = WINDOW_SECONDS
) -> list[AlignWindow]:
    """The requests that give a transcription's words their times: consecutive segments grouped while
    they span at most ``max_seconds`` (a longer segment alone), or the whole audio and text when there
    are no segments. Stretches without a word to align are left out.

    Examples:
        >>> result = Transcription(text="a b", duration=4.0)
        >>> align_windows(result, 4.0)
        [AlignWindow(start=0.0, end=4.0, text='a b')]
    """
    if not result.segments:
        return [AlignWindow(0.0, duration, result.text)] if _has_words(result.text) else []
    windows: list[AlignWindow] = []
    group: list[Any] = []
    for segment in result.segments:
        if group and segment.end - group[0].start > max_seconds:
            windows.append(_window(group, duration))
            group = []
        group.append(segment)
    if group:
        windows.append(_window(group, duration))
    return [window for window in windows if _has_words(window.text) and window.end > window.start]


def _window(segments: Sequence[Any], duration: float) -> AlignWindow:
    start = min(segment.start for segment in segments)
    end = min(max(segment.end for segment in segments), duration)
    return AlignWindow(start, end, " ".join(segment.text.strip() for segment in segments))


def _has_words(text: str) -> bool:
    return any(_is_kept(char) for char in text)


def with_words(result: Transcription, words: list[TranscriptionWord]) -> Transcription:
    """``result`` with its ``words`` set (a copy)."""
    return result.model_copy(update={"words": words})


def alignment_result(
    words: list[TranscriptionWord], text: str, *, language: str | None, duration: float, model: str | None
) -> Alignment:
    """The :class:`~vllm_tasks.types.audio.Alignment` of one ``align`` call."""
    return Alignment(words=words, text=text, language=language, duration=duration, model=model)


def check_segment_ms(value: float) -> float:
    """``timestamp_segment_time`` checked: a finite number of milliseconds > 0.

    Raises:
        InvalidInputError: anything else.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise InvalidInputError(
            "segment_ms", value, "must be a finite number of milliseconds > 0", "Pass the model's value (80)."
        )
    return float(value)
