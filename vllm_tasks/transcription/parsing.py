"""Reading speech-to-text answers: a ``json`` / ``verbose_json`` / ``diarized_json`` body as a
``Transcription`` (text cleaned of vLLM's double spaces), and the result's reference to its audio for
the notebook player."""

from __future__ import annotations

import re
from typing import Any

import httpx
from pydantic import ValidationError

from .. import audio as audio_io
from .. import defaults
from ..errors import UnexpectedResponse
from ..responses import json_object, malformed, server_error
from ..types.audio import (
    ResponseFormat,
    SpeakerSegment,
    Transcription,
    TranscriptionSegment,
    TranscriptionUsage,
)
from ..views import Attachment
from .params import PATHS, TASK_NAMES, Task

_SPACES = re.compile(r"[ \t]{2,}")


def clean_text(text: str) -> str:
    """Collapse runs of spaces (vLLM joins its server-side chunks with a double space) and strip."""
    return _SPACES.sub(" ", text).strip()


def parse_body(
    body: Any,
    *,
    task: Task,
    model: str | None,
    response_format: ResponseFormat,
    language: str | None = None,
    duration: float | None = None,
) -> Transcription:
    """A ``json`` / ``verbose_json`` / ``diarized_json`` response body as a :class:`Transcription`
    (text cleaned). With ``response_format="diarized_json"`` the segments are
    :class:`~vllm_tasks.types.SpeakerSegment` objects, in ``speaker_segments``.

    Raises:
        APIStatusError: the body is vLLM's error object (the server's error, with its message).
        UnexpectedResponse: the body is not an object with a ``text`` string, or a field has the wrong
            type (``segments``, ``usage``, ``language``, ``duration``, a segment without ``speaker``, ...).

    Examples:
        >>> body = {"text": "Hi. Hello.", "segments": [{"id": "seg_0", "start": 0.0, "end": 0.8,
        ...         "text": " Hi.", "speaker": "S01"}]}
        >>> result = parse_body(body, task="transcribe", model=None, response_format="diarized_json")
        >>> result.speaker_segments[0].speaker
        'S01'
    """
    error = server_error(httpx.Response(200, json=body), body, task=TASK_NAMES[task]) if body else None
    if error is not None:
        raise error
    if not isinstance(body, dict) or not isinstance(body.get("text"), str):
        raise UnexpectedResponse(f"unexpected transcription response (no `text` string): {str(body)[:200]}")
    data = dict(body)
    raw_segments = data.pop("segments", None) or []
    usage_body = data.pop("usage", None)
    data.pop("task", None)
    try:
        if not isinstance(raw_segments, list):
            raise UnexpectedResponse(f"`segments` is not a list: {str(raw_segments)[:100]}")
        diarized = response_format == "diarized_json"
        segments = [] if diarized else [TranscriptionSegment.model_validate(s) for s in raw_segments]
        speakers = [SpeakerSegment.model_validate(s) for s in raw_segments] if diarized else []
        for segment in segments:
            segment.text = segment.text.strip()
        for speaker in speakers:
            speaker.text = speaker.text.strip()
        usage = TranscriptionUsage.model_validate(usage_body) if usage_body is not None else None
        return Transcription.model_validate(
            {
                **data,
                "text": clean_text(data.pop("text")),
                "language": data.pop("language", None) or language,
                "duration": data.pop("duration", None) or duration,
                "segments": segments,
                "speaker_segments": speakers,
                "usage": usage,
                "model": model,
                "task": task,
                "response_format": response_format,
            }
        )
    except ValidationError as invalid:
        detail = str(invalid).replace("\n", " ")[:300]
        raise UnexpectedResponse(f"unexpected transcription response: {detail}") from None


def parse_response(response: httpx.Response, **kwargs: Any) -> Transcription:
    """:func:`parse_body` of a response (its JSON body, checked with
    :func:`~vllm_tasks.responses.json_object`).

    Raises:
        UnexpectedResponse: not a JSON transcription (a redirect, an empty body, an HTML page, a
            body of the wrong shape), naming the status and URL.
        APIStatusError: the body is vLLM's error object.
    """
    task: Task = kwargs.get("task", "transcribe")
    path = PATHS[task]
    payload = json_object(response, path, task=TASK_NAMES[task])
    try:
        return parse_body(payload, **kwargs)
    except UnexpectedResponse as error:
        raise malformed(response, path, error.message) from None


def keep_audio(result: Transcription, source: audio_io.AudioSource, given: object) -> Transcription:
    """Let ``result`` refer to the audio it was made from, for its notebook player; returns ``result``.

    Kept by reference only: the path of a file (absolute, as a string), or the caller's own ``bytes``
    object when it is at most ``VIEW_MAX_MEDIA_BYTES`` (no copy; a larger one is not kept alive for a
    view that would not embed it). File objects, URLs and arrays are not kept: ``result.player(audio)``
    takes them. Never pickled nor dumped (:class:`vllm_tasks.views.Attachment`).
    """
    if source.path is not None:
        result._audio = Attachment(str(source.path.absolute()))
    elif type(given) is bytes and len(given) <= defaults.VIEW_MAX_MEDIA_BYTES:
        result._audio = Attachment(given)
    return result
