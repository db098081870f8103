"""The fake server's speech-to-text routes: ``/v1/audio/transcriptions`` and ``/v1/audio/translations``
(multipart uploads; ``json``, ``text``, ``verbose_json``, ``diarized_json`` and server-sent-event
streams)."""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Iterator
from typing import Any

from . import content
from .inputs import Call, form_text
from .wire import Reply, bad_request, json_reply, sse_frame, validation_error

# fmt: off
WHISPER_LANGUAGES = (
    "af", "ar", "hy", "az", "be", "bs", "bg", "ca", "zh", "hr", "cs", "da", "nl", "en", "et", "fi", "fr",
    "gl", "de", "el", "he", "hi", "hu", "is", "id", "it", "ja", "kn", "kk", "ko", "lv", "lt", "mk", "ms",
    "mr", "mi", "ne", "no", "fa", "pl", "pt", "ro", "ru", "sr", "sk", "sl", "es", "sw", "sv", "tl", "ta",
    "th", "tr", "uk", "ur", "vi", "cy",
)
# fmt: on
"""The languages whisper accepts (vLLM 0.32's list); others get 400 ``Unsupported language``."""

SERVER_FORMATS = ("json", "text", "verbose_json", "diarized_json")
TRANSLATION_FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
"""The formats vLLM's translation request model allows (no ``diarized_json``)."""
SPEAKERS = ("S01", "S02")
"""The fake's diarization: sentences alternate between these labels (MOSS-Transcribe-Diarize's style)."""
WINDOW_SECONDS = 30
"""The longest audio Whisper reads at once: vLLM cuts longer files into windows of at most this."""
MAX_AUDIO_SECONDS = 600
"""vLLM's ``VLLM_MAX_AUDIO_DECODE_DURATION_S`` default: a longer upload is refused before decoding."""


def transcription(call: Call) -> Reply:
    """``POST /v1/audio/transcriptions``."""
    return speech(call, "transcribe")


def translation(call: Call) -> Reply:
    """``POST /v1/audio/translations``."""
    return speech(call, "translate")


def speech(call: Call, task: str) -> Reply:
    """Answer an upload with the configured transcript, in the requested format."""
    upload = call.request.files.get("file")
    if upload is None:
        kind = "missing" if "file" not in call.body else "value_error"
        raise validation_error("file", kind, "Field required" if kind == "missing" else "Expected UploadFile")
    fmt = form_text(call.body.get("response_format")) or "json"
    stream = call.flag("stream")
    _check_options(call, fmt, stream, task)
    duration = content.audio_seconds(upload.content)
    if duration is None:
        raise bad_request(
            "Invalid or corrupted audio data. Ensure the input is a valid audio or video file "
            "(e.g. a complete WAV, MP3, or MP4)."
        )
    if duration > MAX_AUDIO_SECONDS:
        # vLLM words it by decoder: soundfile (WAV, FLAC) counts the file's frames, PyAV reads metadata.
        rate = content.header_sample_rate(upload.content)
        found = f"file contains {duration:.1f}s at {rate}Hz" if rate else f"metadata reports {duration:.1f}s"
        raise bad_request(
            f"Audio exceeds maximum allowed duration of {MAX_AUDIO_SECONDS}s ({found}). "
            "Set VLLM_MAX_AUDIO_DECODE_DURATION_S to increase this limit."
        )
    text = call.settings.text_of(call.settings.transcript, call.request)
    if stream:
        return Reply(200, headers={"content-type": "text/event-stream; charset=utf-8"},
                     stream=_events(call, task, text, duration))  # fmt: skip
    if fmt == "verbose_json":
        language = form_text(call.body.get("language")) or call.settings.language
        return json_reply({"duration": duration, "language": language, "text": text,
                           "segments": content.segments(text, duration), "words": None})  # fmt: skip
    if fmt == "diarized_json":
        return json_reply(diarized(text, duration))
    if task == "translate":
        return json_reply({"text": text})
    return json_reply({"text": text, "usage": {"type": "duration", "seconds": math.ceil(duration)}})


def diarized(text: str, duration: float) -> dict[str, Any]:
    """A ``diarized_json`` answer: one segment per sentence (timed as ``verbose_json``'s), the speakers
    alternating ``S01``, ``S02``; ids ``seg_<i>``; usage in seconds as for ``json``."""
    segments = [
        {"type": "transcript.text.segment", "id": f"seg_{index}", "start": part["start"],
         "end": part["end"], "text": part["text"], "speaker": SPEAKERS[index % len(SPEAKERS)]}
        for index, part in enumerate(content.segments(text, duration))
    ]  # fmt: skip
    return {"task": "transcribe", "duration": duration, "text": text, "segments": segments,
            "usage": {"type": "duration", "seconds": math.ceil(duration)}}  # fmt: skip


def _check_options(call: Call, fmt: str, stream: bool, task: str) -> None:
    """vLLM's refusals: srt/vtt, diarized_json on translations or in a stream, beam search with
    streaming, stream options without ``stream``, an unknown language."""
    if task == "translate" and fmt not in TRANSLATION_FORMATS:
        expected = ", ".join(f"'{f}'" for f in TRANSLATION_FORMATS[:-1]) + f" or '{TRANSLATION_FORMATS[-1]}'"
        raise validation_error("response_format", "literal_error", f"Input should be {expected}", fmt)
    if stream and fmt == "diarized_json":
        raise bad_request("diarized_json does not support streaming")  # the fake's wording
    if fmt not in SERVER_FORMATS:
        raise bad_request(
            "Currently only support response_format: `text`, `json`, `verbose_json` or `diarized_json`"
        )
    if fmt == "verbose_json" and not call.settings.segments:
        model = form_text(call.body.get("model")) or call.settings.model
        raise bad_request(f"Currently do not support verbose_json for {model}")
    if stream and call.flag("use_beam_search"):
        raise bad_request("Streaming is not currently supported with beam search")
    for option in ("stream_include_usage", "stream_continuous_usage_stats"):
        if call.flag(option) and not stream:
            raise bad_request(
                f"Stream options can only be defined when `stream=True`. (parameter={option})", option
            )
    language = form_text(call.body.get("language"))
    if language is not None and language not in WHISPER_LANGUAGES:
        raise bad_request(f"Unsupported language: '{language}'.  Must be one of {list(WHISPER_LANGUAGES)}.")


def _events(call: Call, task: str, text: str, duration: float) -> Iterator[bytes]:
    """The stream: one chunk per word and a chunk with ``finish_reason`` per 30-s window of the audio (vLLM
    transcribes a long file window by window, each one finished), usage if asked, ``[DONE]``."""
    head: dict[str, Any] = {
        "id": f"{task}-{call.request.headers.get('x-request-id') or secrets.token_hex(8)}",
        "object": "transcription.chunk" if task == "transcribe" else "translation.chunk",
        "created": int(time.time()),
        "model": call.settings.model,
    }
    pieces = content.stream_pieces(text)
    windows = max(1, math.ceil(duration / WINDOW_SECONDS))
    for window in range(windows):
        for piece in pieces[window * len(pieces) // windows : (window + 1) * len(pieces) // windows]:
            yield sse_frame({**head, "choices": [{"delta": {"content": piece}}]})
        finish = {"delta": {"content": ""}, "finish_reason": "stop", "stop_reason": None}
        yield sse_frame({**head, "choices": [finish]})
    if call.flag("stream_include_usage"):
        completion = len(pieces)
        prompt = 10 + content.count_tokens(text, special=False)
        tokens = {
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
            "completion_tokens": completion,
        }
        yield sse_frame({**head, "choices": [], "usage": tokens})
    yield sse_frame("[DONE]")
