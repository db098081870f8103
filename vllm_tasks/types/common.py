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
