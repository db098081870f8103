"""The fake server's ``/v1/chat/completions``, answering as its OCR preset's model does (DeepSeek-OCR's
grounded markdown by default)."""

from __future__ import annotations

import base64
import json
from typing import Any

from ..grounding import parse_grounding, to_markdown
from ..ocr.presets import IMAGE_TAG, OCRPreset
from . import content
from .inputs import Call, part_text, usage
from .wire import Reply, bad_request, json_reply, validation_error

_SHAPES: dict[str, tuple[list[str], str]] = {
    "image-text": (["image", "text"], "the image then the prompt"),
    "text-image": (["text", "image"], "the prompt then the image"),
    "image": (["image"], "the image alone"),
    "image-tag": (["image", "text"], "the image then a prompt starting with <image>"),
}


def chat_completions(call: Call) -> Reply:
    """``POST /v1/chat/completions``: the configured OCR output for the prompt, cut at ``max_tokens``."""
    messages = call.body.get("messages")
    if not isinstance(messages, list):
        raise validation_error("messages", "missing", "Field required")
    preset = call.settings.preset
    if preset.ngram_guard:
        _check_xargs(call)
    max_tokens = call.optional_int("max_tokens", 1)
    prompt, media = _prompt(messages)
    if not all(_loads(url) for url in media):
        raise bad_request("Failed to load image: cannot identify image file <_io.BytesIO object>")
    if media:
        _check_shape(preset, messages)
    output = _answer(preset, call.settings.text_of(call.settings.ocr_output, call.request), prompt)
    text, completion, cut = content.cut_to_tokens(output, max_tokens)
    prompt_tokens = content.count_tokens(prompt, special=False) + content.IMAGE_TOKENS * len(media)
    token_ids = prompt_ids = None
    if call.body.get("return_token_ids") is True:
        token_ids = _ids(text)
        prompt_ids = _ids(prompt) + [content.token_id(IMAGE_TAG)] * (content.IMAGE_TOKENS * len(media))
    message = {"role": "assistant", "content": text, "refusal": None, "annotations": None, "audio": None,
               "function_call": None, "reasoning": None}  # fmt: skip
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "length" if cut else "stop",
              "stop_reason": None, "token_ids": token_ids, "routed_experts": None}  # fmt: skip
    return json_reply(
        {"id": call.response_id("chatcmpl"), "object": "chat.completion", "created": call.created(),
         "model": call.settings.model, "choices": [choice], "service_tier": None,
         "system_fingerprint": f"vllm-{call.settings.version}-fake",
         "usage": usage(prompt_tokens, completion),
         "prompt_logprobs": None, "prompt_token_ids": prompt_ids, "prompt_text": None,
         "kv_transfer_params": None, "ec_transfer_params": None, "metrics": None}
    )  # fmt: skip


def _ids(text: str) -> list[int]:
    return [content.token_id(text[start:end]) for start, end in content.token_spans(text)]


#: olmOCR's front matter for an upright page of text, before the markdown (its ``olmocr`` format).
OLMOCR_FRONT_MATTER = (
    "---\nprimary_language: en\nis_rotation_valid: True\nrotation_correction: 0\nis_table: False\n"
    "is_diagram: False\n---\n"
)
#: dots.ocr's categories for DeepSeek-OCR's layout labels (its ``dots-ocr-layout`` format).
DOTS_CATEGORIES = {
    "title": "Title",
    "sub_title": "Section-header",
    "table": "Table",
    "image": "Picture",
    "equation": "Formula",
    "table_caption": "Caption",
    "image_caption": "Caption",
}


def _answer(preset: OCRPreset, output: str, prompt: str) -> str:
    """The model's answer: DeepSeek-OCR's per prompt; another format's: grounded output written as its
    markdown (any other text as is), in the format of the prompt's task: olmOCR's front matter first,
    dots.ocr's layout as its JSON list of cells, HunyuanOCR's spotting as lines with their corners."""
    task = next((name for name, text in preset.tasks.items() if text and text in prompt), None)
    answer_format = preset.output_of(task)
    if answer_format == "deepseek-grounding":
        return content.ocr_answer(output, prompt)
    if answer_format == "dots-ocr-layout":
        return _dots_layout(output)
    if answer_format == "hunyuan-spotting":
        return _spotting(output)
    markdown = to_markdown(parse_grounding(output)) if "<|ref|>" in output else output
    return OLMOCR_FRONT_MATTER + markdown if answer_format == "olmocr" else markdown


def _spotting(output: str) -> str:
    """HunyuanOCR's spotting answer: each grounded block's text then its box's corners
    ``(x1,y1),(x2,y2)`` (its 0-999 box taken as the 0-1000 grid); text without boxes as it is."""
    if "<|ref|>" not in output:
        return output
    lines = [
        f"{' '.join(block.text.split())}({x1},{y1}),({x2},{y2})"
        for block in parse_grounding(output)
        for x1, y1, x2, y2 in block.boxes[:1]
        if block.text.strip()
    ]
    return "\n".join(lines)


def _dots_layout(output: str) -> str:
    """dots.ocr's layout answer: a configured JSON list as it is, else one ``{bbox, category, text}`` cell
    per grounded block (its 0-999 box taken as the pixels of the image the model saw), or one ``Text`` cell
    holding plain text."""
    if output.lstrip().startswith("["):
        return output  # already dots.ocr's cells
    blocks = [block for block in parse_grounding(output) if block.boxes] if "<|ref|>" in output else []
    cells = [
        {
            "bbox": list(block.boxes[0]),
            "category": DOTS_CATEGORIES.get((block.label or "").strip(), "Text"),
            "text": block.text.strip(),
        }
        for block in blocks
    ] or [{"bbox": [0, 0, 28, 28], "category": "Text", "text": output.strip()}]
    return json.dumps(cells, ensure_ascii=False)


def _check_shape(preset: OCRPreset, messages: list[Any]) -> None:
    """Refuse a message with an image that is not shaped as the preset's model takes it."""
    parts = messages[-1].get("content") if isinstance(messages[-1], dict) else None
    parts = parts if isinstance(parts, list) else [parts]
    kinds = ["text" if isinstance(part, str) or _is_text(part) else "image" for part in parts]
    expected, said = _SHAPES[preset.content]
    tagged = preset.content != "image-tag" or part_text(parts[-1]).startswith(IMAGE_TAG)
    if kinds != expected or not tagged:
        raise bad_request(
            f"FakeVLLM as {preset.name}: the model takes {said}; this message's parts are {kinds} "
            "(vLLM would answer, with output of no use)."
        )


def _is_text(part: object) -> bool:
    return isinstance(part, dict) and part.get("type") == "text"


def _check_xargs(call: Call) -> None:
    """With the n-gram processor "loaded", refuse what DeepSeek-OCR's processor refuses."""
    xargs = call.body.get("vllm_xargs")
    if not call.settings.ngram_processor or not isinstance(xargs, dict):
        return
    for key in ("ngram_size", "window_size"):
        value = xargs.get(key)
        if key in xargs and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
            raise bad_request(f"`{key}` has to be a strictly positive integer, got {value}.")


def _prompt(messages: list[Any]) -> tuple[str, list[str]]:
    """The text of the conversation's prompts, and per media part its image URL (``""`` for other media)."""
    texts: list[str] = []
    media: list[str] = []
    for message in messages:
        parts = message.get("content") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else [parts]:
            if isinstance(part, dict) and part.get("type") != "text":
                image = part.get("image_url") if part.get("type") == "image_url" else None
                media.append(str(image.get("url", "")) if isinstance(image, dict) else "")
            elif part is not None:
                texts.append(part_text(part))
    return "\n".join(texts), media


def _loads(url: str) -> bool:
    """Whether an image opens: a ``data:`` URL must hold an image file; other URLs are not fetched (and
    ``""``, another medium, is not checked)."""
    if not url.startswith("data:"):
        return True
    try:
        data = base64.b64decode(url.partition(",")[2], validate=True)
    except ValueError:
        return False
    return content.is_image(data)
