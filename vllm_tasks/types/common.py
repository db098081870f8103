"""Models shared by several endpoint families."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Usage(BaseModel):
    """Token counts a response reports (summed over every request a call made)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    prompt_tokens: int = 0
    total_tokens: int = 0
    completion_tokens: int | None = None

    def __add__(self, other: Usage) -> Usage:
        completion = (
            None
            if self.completion_tokens is None and other.completion_tokens is None
            else (self.completion_tokens or 0) + (other.completion_tokens or 0)
        )
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            completion_tokens=completion,
        )


class ClientUsage(BaseModel):
    """What one client has sent and used so far: ``client.usage`` (a snapshot; totals keep growing).

    Request counts come from the transport (every HTTP request to the vLLM server, discovery and probes
    included; downloads of user-given URLs are not counted). Token, audio and page totals come from the
    results returned (a call that failed adds none).

    Attributes:
        requests: HTTP requests sent, every retry included (a stream counts once).
        failed_requests: requests that got an error status (>= 400), an answer that is not vLLM's, or no
            answer at all (connection error, timeout). Requests cancelled by the client are not counted.
        retries: requests that were retries of a failed one.
        prompt_tokens: prompt tokens the server reported (``embed_v2``: billed input and image tokens).
        completion_tokens: generated tokens (OCR; transcription streams with usage).
        audio_seconds: seconds of audio transcribed or translated.
        pages: images or PDF pages OCR'd.
        concurrency_limit: with ``concurrency="auto"``, the requests in flight its limit allowed at the
            latest answer (where it settled); ``None`` before any ``auto`` call.

    Examples:
        >>> client.embed(["a", "b"]); client.usage.requests
        4
    """

    model_config = ConfigDict(frozen=True)

    requests: int = 0
    failed_requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    audio_seconds: float = 0.0
    pages: int = 0
    concurrency_limit: int | None = None
