"""The speech-to-text event stream parser (pure; no I/O): vLLM's and OpenAI's stream events read line
by line into text deltas and one final ``Transcription``."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..errors import StreamError
from ..types.audio import ResponseFormat, Transcription, TranscriptionDelta, TranscriptionUsage
from .merge import merge_texts
from .params import Task
from .parsing import clean_text


@dataclass
class StreamParser:
    """Parses a transcription event stream line by line (pure; no I/O).

    Understands vLLM's ``transcription.chunk`` / ``translation.chunk`` objects (``choices[0].delta
    .content``, one ``finish_reason`` per server-side chunk, a final usage chunk with ``choices: []``)
    and OpenAI's ``transcript.text.delta`` / ``transcript.text.done`` events, so the same code reads
    both. A ``data: {"error": ...}`` frame raises :class:`~vllm_tasks.errors.StreamError`.
    """

    task: Task = "transcribe"
    model: str | None = None
    language: str | None = None
    duration: float | None = None
    response_format: ResponseFormat = "json"
    text: str = ""
    chunk: int = 0
    finish_reasons: list[str] = field(default_factory=list)
    usage: TranscriptionUsage | None = None
    done: bool = False
    _data: list[str] = field(default_factory=list)
    _final_texts: list[str] = field(default_factory=list)
    events: int = 0
    """JSON events read so far (a body with none was not an event stream)."""
    _piece_usage: TranscriptionUsage | None = None
    _starts_chunk: bool = False

    def feed(self, line: str) -> list[TranscriptionDelta]:
        """One line of the body (without its newline); returns the deltas it completes."""
        line = line.rstrip("\r")
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return []  # SSE comment / keep-alive
        name, _, value = line.partition(":")
        if name == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
        return []

    def feed_all(self, lines: Iterator[str] | Sequence[str]) -> list[TranscriptionDelta]:
        """Feed many lines (a whole recorded body); returns every delta."""
        out: list[TranscriptionDelta] = []
        for line in lines:
            out.extend(self.feed(line))
        return out

    def _dispatch(self) -> list[TranscriptionDelta]:
        if not self._data:
            return []
        payload = "\n".join(self._data)
        self._data = []
        if payload.strip() == "[DONE]":
            self.done = True
            return []
        try:
            event = json.loads(payload)
        except ValueError as error:
            raise StreamError(f"undecodable stream frame: {payload[:200]!r}", body=payload) from error
        if not isinstance(event, dict):
            raise StreamError(f"a stream frame that is not a JSON object: {payload[:200]!r}", body=payload)
        self.events += 1
        if "error" in event or event.get("object") == "error":
            raise _stream_error(event if "error" in event else {"error": event})
        usage = event.get("usage")
        if usage is not None:
            try:
                self._piece_usage = TranscriptionUsage.model_validate(usage)
            except ValidationError:
                message = f"a stream frame with invalid usage: {payload[:200]!r}"
                raise StreamError(message, body=event) from None
        kind = event.get("type")
        if kind == "transcript.text.delta":
            return self._delta(_text_field(event, "delta", payload), None)
        if kind == "transcript.text.done":
            self._final_texts.append(_text_field(event, "text", payload))
            self.done = True
            return []
        if isinstance(kind, str) and kind.startswith("error"):
            raise _stream_error({"error": event})
        return self._choices(event, payload)

    def _choices(self, event: Mapping[str, Any], payload: str) -> list[TranscriptionDelta]:
        choices = event.get("choices", [])
        if not isinstance(choices, list):
            raise StreamError(f"a stream frame whose `choices` is not a list: {payload[:200]!r}", body=event)
        deltas: list[TranscriptionDelta] = []
        for choice in choices:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            content = delta.get("content") if isinstance(delta, dict) else None
            finish = choice.get("finish_reason") if isinstance(choice, dict) else None
            if not isinstance(delta, dict) or not isinstance(content, str | None):
                raise StreamError(f"a stream frame without a text delta: {payload[:200]!r}", body=event)
            if not isinstance(finish, str | None):
                raise StreamError(f"a stream frame with finish_reason={finish!r}", body=event)
            deltas.extend(self._delta(content or "", finish))
        return deltas

    def _delta(self, content: str, finish_reason: str | None) -> list[TranscriptionDelta]:
        chunk = self.chunk
        if content:
            if self.text and self._starts_chunk:
                content = " " + content.lstrip()  # vLLM starts each later chunk with a double space
            elif not self.text:
                content = content.lstrip()
            self.text += content
            self._starts_chunk = False
        if finish_reason:
            self.finish_reasons.append(str(finish_reason))
            self.chunk += 1
            self._starts_chunk = True
        if not content and not finish_reason:
            return []
        return [TranscriptionDelta(text=content, finish_reason=finish_reason, chunk=chunk)]

    def new_piece(self) -> None:
        """Start the stream of the next client-side piece (long audio): usage is summed over pieces,
        and the next piece's text is joined with one space.

        Raises:
            StreamError: the previous piece's stream ended before ``[DONE]``.
        """
        self._dispatch()
        self._check_complete()
        self._fold_usage()
        self.done = False
        if self.text:
            self._starts_chunk = True

    def _fold_usage(self) -> None:
        piece, self._piece_usage = self._piece_usage, None
        if piece is None:
            return
        if self.usage is None:
            self.usage = piece
            return
        summed = {}
        for name in ("seconds", "prompt_tokens", "completion_tokens", "total_tokens"):
            a, b = getattr(self.usage, name), getattr(piece, name)
            summed[name] = None if a is None and b is None else (a or 0) + (b or 0)
        self.usage = self.usage.model_copy(update=summed)

    def _check_complete(self) -> None:
        if self.done:
            return
        if not self.events:
            message = (
                "the transcription stream ended without any event: not an event stream (a proxy or "
                "load balancer answered instead of vLLM?)"
            )
        else:
            message = (
                f"the transcription stream ended before [DONE]: the text is truncated after "
                f"{len(self.text)} characters (the connection was closed early)"
            )
        raise StreamError(message, body={"text": self.text})

    def finish(self) -> Transcription:
        """The final result (call after the last line).

        Raises:
            StreamError: the stream ended before ``[DONE]`` (or OpenAI's ``transcript.text.done``):
                the text would be truncated. ``body["text"]`` holds the text received.
        """
        self._dispatch()
        self._check_complete()
        self._fold_usage()
        text = merge_texts(self._final_texts, dedupe=False) if self._final_texts else self.text
        return Transcription(
            text=clean_text(text),
            language=self.language,
            duration=self.duration,
            usage=self.usage,
            model=self.model,
            task=self.task,
            response_format=self.response_format,
            finish_reasons=list(self.finish_reasons),
        )


def _stream_error(event: Mapping[str, Any]) -> StreamError:
    error = event.get("error")
    if isinstance(error, dict):
        message = str(error.get("message") or error)
        code = error.get("code")
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        return StreamError(message, body=dict(event), code=code)
    return StreamError(str(error), body=dict(event))


def _text_field(event: Mapping[str, Any], key: str, payload: str) -> str:
    value = event.get(key)
    if not isinstance(value, str | None):
        raise StreamError(f"a stream frame whose `{key}` is not text: {payload[:200]!r}", body=dict(event))
    return value or ""
