"""Reading a request to the fake server: the call context, the texts of its inputs, field checks."""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import content
from .content import Vocabulary
from .settings import FakeSettings
from .wire import FormValue, ReceivedRequest, bad_request, validation_error


@dataclass(frozen=True)
class Call:
    """One request being answered: the request, its body, the server's settings and vocabulary.

    Attributes:
        request: the parsed request.
        body: the JSON object, or the multipart form fields.
        settings: the fake server's settings, as they were when the request arrived.
        vocabulary: the fake tokenizer (it remembers ids it produced, for ``/detokenize``).
    """

    request: ReceivedRequest
    body: dict[str, Any]
    settings: FakeSettings
    vocabulary: Vocabulary

    def response_id(self, prefix: str) -> str:
        """``<prefix>-<base>``: the ``X-Request-Id`` header, else the body's ``request_id``, else random."""
        base = self.request.headers.get("x-request-id") or self.body.get("request_id")
        return f"{prefix}-{base if isinstance(base, str) and base else secrets.token_hex(8)}"

    def created(self) -> int:
        """The ``created`` timestamp of an answer."""
        return int(time.time())

    def flag(self, name: str, default: bool = False) -> bool:
        """A boolean field: JSON ``true``, or a form value ``true``/``1``/``yes``/``on``."""
        value = self.body.get(name, default)
        if isinstance(value, str):
            return value.strip().lower() in ("true", "1", "yes", "on")
        return bool(value) if value is not None else default

    def optional_int(self, name: str, minimum: int | None = None) -> int | None:
        """An integer field (JSON int or form string), checked like pydantic would (400 ``Bad Request``)."""
        value = self.body.get(name)
        if value is None:
            return None
        try:
            number = int(value) if isinstance(value, str) else value
        except ValueError:
            number = None
        if not isinstance(number, int) or isinstance(number, bool):
            raise validation_error(name, "int_type", "Input should be a valid integer", value)
        if minimum is not None and number < minimum:
            raise validation_error(
                name, "greater_than_equal", f"Input should be greater than or equal to {minimum}",
                str(value), {"ge": minimum},
            )  # fmt: skip
        return number

    def choice(self, name: str, choices: Sequence[str], default: str) -> str:
        """A ``Literal`` field: one of ``choices`` (pydantic's ``literal_error`` otherwise)."""
        value = self.body.get(name)
        if value is None:
            return default
        if value not in choices:
            expected = " or ".join(f"'{c}'" for c in choices)
            raise validation_error(name, "literal_error", f"Input should be {expected}", value)
        return str(value)


# ---------------------------------------------------------------------------------- input texts


def part_text(part: Any) -> str:
    """The text of one content part: its text, or the URL/data of an image, audio or video part."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return str(part)
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text", ""))
    value = part.get(kind) if isinstance(kind, str) else None
    if isinstance(value, dict):
        value = value.get("url") or value.get("data") or value
    return f"<{kind}:{value}>"


def content_text(value: Any) -> str:
    """The text of a message's ``content`` or a multimodal input ``{"content": [parts]}``."""
    if isinstance(value, dict) and "content" in value:
        value = value["content"]
    if isinstance(value, list):
        return " ".join(part_text(part) for part in value)
    return part_text(value)


def conversation_text(messages: Sequence[Any]) -> str:
    """The texts of a conversation's messages, joined."""
    return " ".join(content_text(m.get("content")) if isinstance(m, dict) else str(m) for m in messages)


def item_text(item: Any, vocabulary: Vocabulary) -> str:
    """The text of one input: a string, token ids (decoded), a conversation or a multimodal input."""
    if isinstance(item, str):
        return item
    if isinstance(item, list) and item and all(isinstance(i, int) for i in item):
        return vocabulary.decode(item)
    if isinstance(item, list):
        return conversation_text(item)
    return content_text(item)


def input_texts(call: Call, field: str = "input") -> list[str]:
    """The texts of a pooling request's inputs: ``input`` (any vLLM shape) or ``messages``.

    Raises:
        Refusal: no input (400 validation error), or an empty list (``You must pass at least one prompt``).
    """
    value = call.body.get(field)
    if value is None and isinstance(call.body.get("messages"), list):
        messages = call.body["messages"]
        batched = bool(messages) and all(isinstance(m, list) for m in messages)
        return [conversation_text(m) for m in messages] if batched else [conversation_text(messages)]
    if value is None:
        raise validation_error(field, "missing", "Field required")
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise validation_error(field, "string_type", "Input should be a valid string", value)
    if not value:
        raise bad_request("You must pass at least one prompt")
    if all(isinstance(i, int) for i in value):
        return [call.vocabulary.decode(value)]
    if all(isinstance(m, dict) and "role" in m for m in value):
        return [conversation_text(value)]
    return [item_text(item, call.vocabulary) for item in value]


def fit_context(call: Call, texts: list[str]) -> list[str]:
    """Apply ``truncate_prompt_tokens``/``truncation_side``, or refuse a text over ``max_model_len``.

    Raises:
        Refusal: a truncation over ``max_model_len``, or a too-long input (vLLM's context-length 400).
    """
    limit = call.settings.max_model_len
    keep = call.optional_int("truncate_prompt_tokens", -1)
    if keep is not None and keep > limit:
        raise bad_request(
            "truncate_prompt_tokens value is greater than max_model_len. "
            "Please request a smaller truncation size."
        )
    if keep is not None:
        keep = limit if keep == -1 else keep
        side = str(call.body.get("truncation_side") or "right")
        return [content.truncate_tokens(text, max(0, keep - 2), side) for text in texts]
    for text in texts:
        check_context(text, limit)
    return texts


def check_context(text: str, limit: int) -> None:
    """Refuse ``text`` when it costs more than ``limit`` tokens, with vLLM's message (vLLM 0.32 tokenizes
    no further than ``limit + 1`` tokens, so it says "at least ``limit + 1``", whatever the length)."""
    check_token_count(content.count_tokens(text), limit)


def check_token_count(tokens: int, limit: int) -> None:
    """Refuse a prompt of ``tokens`` tokens when it is over ``limit``, with vLLM's message (see
    :func:`check_context`)."""
    count = min(tokens, limit + 1)
    if count > limit:
        raise bad_request(
            f"This model's maximum context length is {limit} tokens. However, your prompt contains at "
            f"least {count} input tokens, which exceeds this limit even without any output tokens. "
            f"Please reduce the length of the input prompt. (parameter=input_tokens, value={count})",
            "input_tokens",
        )


def usage(prompt_tokens: int, completion_tokens: int = 0) -> dict[str, Any]:
    """vLLM's ``UsageInfo`` with every key."""
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
        "completion_tokens_details": None,
    }


def form_text(value: FormValue | None) -> str | None:
    """A form field's value (the last one, when repeated)."""
    if isinstance(value, list):
        return value[-1] if value else None
    return value
