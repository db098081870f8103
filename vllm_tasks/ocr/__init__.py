"""Document OCR, the pure parts: DeepSeek-OCR over ``/v1/chat/completions``, the recipe applied per request.

The recipe (vLLM's ``recipes/models/deepseek-ai/DeepSeek-OCR.yaml``): the server runs with
``--logits-processors vllm.model_executor.models.deepseek_ocr:NGramPerReqLogitsProcessor
--no-enable-prefix-caching --mm-processor-cache-gb 0``; each request sends ``temperature: 0``,
``skip_special_tokens: false`` and ``vllm_xargs {"ngram_size": 30, "window_size": 90,
"whitelist_token_ids": [128821, 128822]}`` (``<td>``/``</td>`` may repeat in tables).

Without ``--logits-processors`` the server answers 200 and silently ignores ``vllm_xargs``, so repeated
table cells loop until ``max_tokens``. :func:`ngram_check_request` finds out cheaply: a text-only request
with ``{"ngram_size": 0}`` gets 400 from a loaded processor and 200 from a server without it.

This module checks options, builds requests, prepares PDF pages and parses answers; the sending is
``vllm_tasks/_async/ocr.py`` (and its generated sync twin).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from .. import defaults, gates, grounding
from ..calls import CallOptions, TaskParams
from ..discovery import NGRAM_PROCESSOR_FLAG
from ..errors import InvalidInputError, UnsupportedByServer
from ..errors import OCRDocumentFailed as OCRDocumentFailed
from ..images import PreparedImage, prepare_image
from ..pdf import parse_pages
from ..responses import json_object, malformed, text_or_none, usage_of
from ..transport import Request
from ..types.common import Usage
from ..types.ocr import OCRBlock, OCRDocument, OCRPage, OCRResult
from ..types.server import ServerInfo
from ..validation import is_number, number_in_range, positive_int
from .ladder import PageQuality as PageQuality

CHAT_PATH = "/v1/chat/completions"

PROMPTS: dict[str, str] = {
    "markdown": "<|grounding|>Convert the document to markdown.",
    "ocr": "<|grounding|>OCR this image.",
    "free": "Free OCR.",
    "figure": "Parse the figure.",
    "describe": "Describe this image in detail.",
}
"""Prompt presets: the prompts DeepSeek-OCR was trained on. Use :func:`locate` for the locate prompt."""

# DeepSeek-OCR's recipe, not tunables: the values the model's n-gram guard was published with.
RECIPE_NGRAM_SIZE = 30
RECIPE_WINDOW_SIZE = 90
RECIPE_WHITELIST = (128821, 128822)
"""``<td>`` and ``</td>`` in DeepSeek-OCR's vocabulary: tables repeat them legitimately."""

PDF_MIN_DPI, PDF_MAX_DPI = 18, 1200


class OCRTruncatedWarning(UserWarning):
    """An OCR output hit ``max_tokens`` (``finish_reason == "length"``): the page is incomplete."""


class NGramProcessorMissingWarning(UserWarning):
    """The server ignores ``vllm_xargs``: it was started without DeepSeek-OCR's n-gram logits processor."""


@dataclass(frozen=True)
class OCRParams(TaskParams):
    """The OCR options shared by ``ocr`` and ``ocr_pdf``, checked on construction; each field is their
    keyword argument of the same name (see :meth:`~vllm_tasks.Client.ocr`). ``ocr_dir``, the LangChain
    loader and Ray's ``OCR`` take one as ``params=``.

    Raises:
        InvalidInputError: naming the first bad argument.

    Examples:
        >>> params = vt.OCRParams(prompt="free", max_tokens=2048)
        >>> result = client.ocr("page.png", **params.keywords())
        >>> vt.ocr_dir(client, "scans", "scans-md", params=params)
    """

    prompt: str = "markdown"
    max_tokens: int | None = defaults.OCR_MAX_TOKENS
    ngram_size: int | None = RECIPE_NGRAM_SIZE
    window_size: int | None = RECIPE_WINDOW_SIZE
    whitelist_token_ids: Sequence[int] | None = RECIPE_WHITELIST
    temperature: float = 0.0
    require_ngram_processor: bool = False
    max_side: int | None = defaults.IMAGE_MAX_SIDE

    def __post_init__(self) -> None:
        resolve_prompt(self.prompt)
        for field in ("max_tokens", "ngram_size", "window_size", "max_side"):
            if getattr(self, field) is not None:
                positive_int(field, getattr(self, field))
        ids = self.whitelist_token_ids
        if ids is not None and (
            isinstance(ids, str | bytes)
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
        ):
            raise InvalidInputError(
                "whitelist_token_ids", ids, "must be a sequence of ints", "E.g. (128821,)."
            )
        if not is_number(self.temperature):
            raise InvalidInputError("temperature", self.temperature, "must be a number", "Use 0.0 for OCR.")


@dataclass(frozen=True)
class PDFPlan:
    """How ``ocr_pdf`` renders and sends a PDF (see :func:`plan_pdf`).

    Attributes:
        pages: 1-based page numbers (``-1`` after a number: to the end), or ``None`` for all.
        dpi: rendering resolution.
        concurrency: pages in flight.
        wave: pages rendered, encoded and sent per round (a long PDF never sits in memory).
    """

    pages: Sequence[int] | None
    dpi: float
    concurrency: int
    wave: int


def plan_pdf(pages: Sequence[int] | str | None, dpi: object, concurrency: object) -> PDFPlan:
    """Check ``ocr_pdf``'s page arguments and choose the wave size (``2 x concurrency``, at least 4).

    Raises:
        InvalidInputError: a malformed page spec, a dpi outside 18-1200, a concurrency below 1.

    Examples:
        >>> plan_pdf("1-3", 144, 4)
        PDFPlan(pages=[1, 2, 3], dpi=144.0, concurrency=4, wave=8)
    """
    workers = positive_int("concurrency", concurrency)
    resolution = number_in_range("dpi", dpi, PDF_MIN_DPI, PDF_MAX_DPI, "Use 144 (the default).")
    selected = parse_pages(pages) if isinstance(pages, str) else pages
    return PDFPlan(selected, resolution, workers, max(2 * workers, 4))


def locate(text: str) -> str:
    """The ``locate`` prompt: find ``text`` in the image (the result's blocks hold its boxes).

    Examples:
        >>> locate("Total revenue")
        'Locate <|ref|>Total revenue<|/ref|> in the image.'
    """
    return f"Locate {grounding.REF_OPEN}{text}{grounding.REF_CLOSE} in the image."


def resolve_prompt(prompt: str) -> str:
    """A preset's text (``markdown``, ``ocr``, ``free``, ``figure``, ``describe``, ``locate:TEXT``), or
    ``prompt`` itself.

    Raises:
        InvalidInputError: for an empty or non-string prompt.

    Examples:
        >>> resolve_prompt("free")
        'Free OCR.'
    """
    if not isinstance(prompt, str) or not prompt.strip():
        raise InvalidInputError(
            "prompt", prompt, "must be a non-empty string", f"Use a preset ({', '.join(PROMPTS)}) or text."
        )
    if prompt in PROMPTS:
        return PROMPTS[prompt]
    if prompt.startswith("locate:"):
        return locate(prompt[len("locate:") :].strip())
    return prompt


def vllm_xargs(options: OCRParams) -> dict[str, Any] | None:
    """The ``vllm_xargs`` of a request, or ``None`` when the n-gram guard is off (``ngram_size=None``).

    Examples:
        >>> vllm_xargs(OCRParams(window_size=None, whitelist_token_ids=None))
        {'ngram_size': 30}
    """
    if options.ngram_size is None:
        return None
    xargs: dict[str, Any] = {"ngram_size": options.ngram_size}
    if options.window_size is not None:
        xargs["window_size"] = options.window_size
    if options.whitelist_token_ids is not None:
        xargs["whitelist_token_ids"] = list(options.whitelist_token_ids)
    return xargs


def build_body(
    image_url: str, options: OCRParams, model: str | None, extra_body: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The ``/v1/chat/completions`` body for one image: image part first, then the prompt.

    Examples:
        >>> build_body("data:image/png;base64,...", OCRParams(), "ocr", None)["max_tokens"]
        4096
    """
    body: dict[str, Any] = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": image_url}},
                    {"type": "text", "text": resolve_prompt(options.prompt)},
                ],
            }
        ],
        "temperature": options.temperature,
        "skip_special_tokens": False,
    }
    if model:
        body["model"] = model
    if options.max_tokens is not None:
        body["max_tokens"] = options.max_tokens
    xargs = vllm_xargs(options)
    if xargs is not None:
        body["vllm_xargs"] = xargs
    if extra_body:
        body.update(extra_body)
    return body


def page_request(image_url: str, options: OCRParams, model: str | None, call: CallOptions) -> Request:
    """The chat-completions request for one image (a URL, or the data URL of a prepared image)."""
    body = build_body(image_url, options, model, call.extra_body)
    return Request(
        "POST", CHAT_PATH, json=body, headers=call.extra_headers, timeout=call.timeout, task="chat"
    )


def uses_ngram_processor(options: OCRParams, info: ServerInfo) -> bool:
    """Whether the call sends ``vllm_xargs`` (so the processor matters); gated on the server version.

    Raises:
        UnsupportedByServer: ``vllm_xargs`` on vLLM < 0.11.1.
    """
    if options.ngram_size is None:
        return False
    gates.require(info, ["deepseek_ocr_ngram_xargs"])
    return True


def require_ngram_processor(found: bool | None, options: OCRParams, info: ServerInfo) -> None:
    """Refuse a call that requires the processor when the check found it missing (``found`` False).

    Raises:
        UnsupportedByServer: ``require_ngram_processor=True`` and the server ignores ``vllm_xargs``.
    """
    if found is False and options.require_ngram_processor:
        raise UnsupportedByServer(
            "deepseek_ocr_ngram_xargs",
            server_version=info.version,
            required_version=None,
            server_flag=NGRAM_PROCESSOR_FLAG,
            detail="The server answers 200 to vllm_xargs it ignores; restart it with the flag.",
        )


def truncated_message(result: OCRResult) -> str:
    """The :class:`OCRTruncatedWarning` text for one image cut short by ``max_tokens``."""
    return (
        f"OCR output hit max_tokens ({result.usage.completion_tokens} tokens): the page is incomplete. "
        "Raise max_tokens (DeepSeek-OCR's context is 8192 tokens)."
    )


def truncated_pages_message(pages: Sequence[int]) -> str:
    """The :class:`OCRTruncatedWarning` text for PDF pages cut short by ``max_tokens``.

    Examples:
        >>> truncated_pages_message([3, 7])[:35]
        'OCR output hit max_tokens on page(s'
    """
    return (
        f"OCR output hit max_tokens on page(s) {', '.join(map(str, pages))}: those pages are "
        "incomplete. Raise max_tokens."
    )


def parse_response(
    response: httpx.Response, image: PreparedImage | str, prompt: str, *, warn: bool = True
) -> OCRResult:
    """Turn a chat-completions response into an :class:`OCRResult` (boxes in original-image pixels).

    Args:
        response: the server's answer.
        image: the prepared image that was sent (its sizes convert the boxes), or the URL sent as is.
        prompt: the prompt text sent, recorded in the result.
        warn: warn (pointing at the caller of this function) when the output hit ``max_tokens``.

    Raises:
        UnexpectedResponse: the body is not a chat completion (a redirect, an empty body, an HTML page,
            a field of the wrong type), naming the status and URL.
        APIStatusError: a 200 whose body is vLLM's error object (the server's error).

    Warns:
        OCRTruncatedWarning: ``finish_reason == "length"`` (when ``warn``).
    """
    payload = json_object(response, CHAT_PATH, task="chat")
    choices = payload.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    finish_reason = choice.get("finish_reason") if isinstance(choice, dict) else None
    if not isinstance(message, dict) or "content" not in message or not isinstance(content, str | None):
        raise malformed(response, CHAT_PATH, "not a chat completion with a message")
    if not isinstance(finish_reason, str | None):
        raise malformed(response, CHAT_PATH, f"finish_reason={finish_reason!r} is not a string")
    text = content or ""
    usage = usage_of(response, CHAT_PATH, payload.get("usage"))
    model = text_or_none(payload.get("model")) or ""
    prepared = image if isinstance(image, PreparedImage) else None
    size = prepared.original_size if prepared else None
    blocks = grounding.parse_grounding(text)
    result = OCRResult(
        text=text,
        markdown=grounding.to_markdown(blocks),
        blocks=[
            OCRBlock(
                label=block.label,
                text=block.text,
                boxes=[grounding.to_pixels(box, size) if size else box for box in block.boxes],
                boxes_normalized=list(block.boxes),
                complete=block.complete,
            )
            for block in blocks
        ],
        usage=usage,
        finish_reason=finish_reason,
        truncated=finish_reason == "length",
        model=model,
        prompt=prompt,
        image_size=size,
        sent_size=prepared.size if prepared else None,
    )
    result._image = prepared
    if warn and result.truncated:
        warnings.warn(truncated_message(result), OCRTruncatedWarning, stacklevel=2)
    return result


def prepare_pages(
    rendered: Iterator[tuple[int, Any]], count: int, max_side: int | None
) -> list[tuple[int, PreparedImage]]:
    """Render (advance ``rendered``) and encode the next ``count`` pages; ``[]`` when none are left.

    CPU-heavy (PDF rendering, PNG encoding): ``AsyncClient`` runs it in a worker thread. Each page keeps
    its encoded bytes, not its bitmap, as the original for ``draw()``/``crop()`` (long PDFs).

    Raises:
        InvalidInputError: (``kind="image_decode"`` or ``"image_too_large"``) a page cannot be encoded (see
            :func:`vllm_tasks.images.prepare_image`).
    """
    batch: list[tuple[int, PreparedImage]] = []
    for number, page in itertools.islice(rendered, count):
        prepared = prepare_image(page, field=f"page {number}", max_side=max_side)
        batch.append((number, dataclasses.replace(prepared, original=prepared.data)))
    return batch


def close_pages(rendered: Iterator[tuple[int, Any]]) -> None:
    """Close a page iterator (and so its PDF) that stopped half-way; a plain iterator is left alone."""
    close = getattr(rendered, "close", None)
    if close is None:
        return
    with contextlib.suppress(
        ValueError
    ):  # still advancing in a worker (a cancelled call): closed when collected
        close()


def merge_pages(pages: list[OCRPage]) -> OCRDocument:
    """The document of per-page results: markdown joined with ``---``, usage summed, truncated and failed
    pages listed."""
    usage = Usage()
    for page in pages:
        usage = usage + (page.tries_usage or page.result.usage)
    return OCRDocument(
        pages=pages,
        markdown="\n\n---\n\n".join(page.result.markdown for page in pages),
        usage=usage,
        truncated_pages=[page.page for page in pages if page.result.truncated],
        failed_pages=[page.page for page in pages if page.failure is not None],
    )
