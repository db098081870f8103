"""The fake server's ``/v1/chat/completions``, answering as DeepSeek-OCR does (grounded markdown)."""

from __future__ import annotations

from typing import Any

from . import content
from .inputs import Call, part_text, usage
from .wire import Reply, bad_request, json_reply, validation_error


def chat_completions(call: Call) -> Reply:
    """``POST /v1/chat/completions``: the configured OCR output for the prompt, cut at ``max_tokens``."""
    messages = call.body.get("messages")
    if not isinstance(messages, list):
        raise validation_error("messages", "missing", "Field required")
    _check_xargs(call)
    max_tokens = call.optional_int("max_tokens", 1)
    prompt, images = _prompt(messages)
    output = content.ocr_answer(call.settings.text_of(call.settings.ocr_output, call.request), prompt)
    text, completion, cut = content.cut_to_tokens(output, max_tokens)
    prompt_tokens = content.count_tokens(prompt, special=False) + content.IMAGE_TOKENS * images
    message = {"role": "assistant", "content": text, "refusal": None, "annotations": None, "audio": None,
               "function_call": None, "reasoning": None}  # fmt: skip
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "length" if cut else "stop",
              "stop_reason": None, "token_ids": None, "routed_experts": None}  # fmt: skip
    return json_reply(
        {"id": call.response_id("chatcmpl"), "object": "chat.completion", "created": call.created(),
         "model": call.settings.model, "choices": [choice], "service_tier": None,
         "system_fingerprint": f"vllm-{call.settings.version}-fake",
         "usage": usage(prompt_tokens, completion),
         "prompt_logprobs": None, "prompt_token_ids": None, "prompt_text": None, "kv_transfer_params": None,
         "ec_transfer_params": None, "metrics": None}
    )  # fmt: skip


def _check_xargs(call: Call) -> None:
    """With the n-gram processor "loaded", refuse what DeepSeek-OCR's processor refuses."""
    xargs = call.body.get("vllm_xargs")
    if not call.settings.ngram_processor or not isinstance(xargs, dict):
        return
    for key in ("ngram_size", "window_size"):
        value = xargs.get(key)
        if key in xargs and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
            raise bad_request(f"`{key}` has to be a strictly positive integer, got {value}.")


def _prompt(messages: list[Any]) -> tuple[str, int]:
    """The text of the conversation's prompts and its number of images."""
    texts: list[str] = []
    images = 0
    for message in messages:
        parts = message.get("content") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else [parts]:
            if isinstance(part, dict) and part.get("type") != "text":
                images += 1
            elif part is not None:
                texts.append(part_text(part))
    return "\n".join(texts), images
