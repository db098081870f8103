"""Document OCR operations: DeepSeek-OCR over ``/v1/chat/completions``, the recipe applied per request.

The recipe (vLLM's ``recipes/models/deepseek-ai/DeepSeek-OCR.yaml``): the server runs with
``--logits-processors vllm.model_executor.models.deepseek_ocr:NGramPerReqLogitsProcessor
--no-enable-prefix-caching --mm-processor-cache-gb 0``; each request sends ``temperature: 0``,
``skip_special_tokens: false`` and ``vllm_xargs {"ngram_size": 30, "window_size": 90,
"whitelist_token_ids": [128821, 128822]}`` (``<td>``/``</td>`` may repeat in tables).

Without ``--logits-processors`` the server answers 200 and silently ignores ``vllm_xargs``, so repeated
table cells loop until ``max_tokens``. :func:`check_ngram_processor` finds out cheaply: a text-only
request with ``{"ngram_size": 0}`` gets 400 from a loaded processor and 200 from a server without it.

Operations are generators (see :mod:`vllm_tasks.steps`); the clients only run them.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from . import gates, grounding
from .calls import CallOptions, positive_int, resolve_model
from .errors import (
    APIConnectionError,
    APIError,
    BadRequestError,
    ImageFetchError,
    InvalidInputError,
    UnsupportedByServer,
)
from .images import DEFAULT_MAX_SIDE, ImageInput, PreparedImage, is_remote_url, prepare_image
from .progress import Progress
from .steps import Fetch, GetServerInfo, Operation, Parallel, Request
from .types.common import Usage
from .types.ocr import OCRBlock, OCRDocument, OCRPage, OCRResult
from .types.server import ServerInfo

CHAT_PATH = "/v1/chat/completions"
NGRAM_PROCESSOR_FLAG = (
    "--logits-processors vllm.model_executor.models.deepseek_ocr:NGramPerReqLogitsProcessor"
)
"""The server flag that loads DeepSeek-OCR's n-gram repetition guard."""

PROMPTS: dict[str, str] = {
    "markdown": "<|grounding|>Convert the document to markdown.",
    "ocr": "<|grounding|>OCR this image.",
    "free": "Free OCR.",
    "figure": "Parse the figure.",
    "describe": "Describe this image in detail.",
}
"""Prompt presets: the prompts DeepSeek-OCR was trained on. Use :func:`locate` for the locate prompt."""

DEFAULT_MAX_TOKENS = 4096
DEFAULT_NGRAM_SIZE = 30
DEFAULT_WINDOW_SIZE = 90
DEFAULT_WHITELIST = (128821, 128822)
"""``<td>`` and ``</td>`` in DeepSeek-OCR's vocabulary: tables repeat them legitimately."""
DEFAULT_PDF_DPI = 144.0
DEFAULT_PDF_CONCURRENCY = 4
IMAGE_FETCH_TIMEOUT = 30.0
PROCESSOR_CHECK_TIMEOUT = 30.0


class OCRTruncatedWarning(UserWarning):
    """An OCR output hit ``max_tokens`` (``finish_reason == "length"``): the page is incomplete."""


class NGramProcessorMissingWarning(UserWarning):
    """The server ignores ``vllm_xargs``: it was started without DeepSeek-OCR's n-gram logits processor."""


@dataclass
class OCRState:
    """Per-client cache of what the OCR methods learned about the server.

    Attributes:
        ngram_processor: True when the n-gram processor is loaded, False when the server ignores
            ``vllm_xargs``, None until checked (or when the check was inconclusive).
        checked: whether the check ran.
    """

    ngram_processor: bool | None = None
    checked: bool = False


@dataclass(frozen=True)
class OCROptions:
    """The OCR request parameters shared by :func:`ocr` and :func:`ocr_pdf`."""

    prompt: str = "markdown"
    max_tokens: int | None = DEFAULT_MAX_TOKENS
    ngram_size: int | None = DEFAULT_NGRAM_SIZE
    window_size: int | None = DEFAULT_WINDOW_SIZE
    whitelist_token_ids: Sequence[int] | None = DEFAULT_WHITELIST
    temperature: float = 0.0
    require_ngram_processor: bool = False
    fetch_urls: bool = True
    max_side: int | None = DEFAULT_MAX_SIDE
    downscale: bool = True


def locate(text: str) -> str:
    """The ``locate`` prompt: find ``text`` in the image (the result's blocks hold its boxes).

    Example:
        >>> locate("Total revenue")
        'Locate <|ref|>Total revenue<|/ref|> in the image.'
    """
    return f"Locate {grounding.REF_OPEN}{text}{grounding.REF_CLOSE} in the image."


def resolve_prompt(prompt: str) -> str:
    """A preset's text (``markdown``, ``ocr``, ``free``, ``figure``, ``describe``, ``locate:TEXT``), or
    ``prompt`` itself.

    Raises:
        InvalidInputError: for an empty or non-string prompt.
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


def validate_options(options: OCROptions) -> None:
    """Check the OCR parameters before any request.

    Raises:
        InvalidInputError: naming the first bad argument.
    """
    resolve_prompt(options.prompt)
    if options.max_tokens is not None:
        positive_int("max_tokens", options.max_tokens)
    if options.ngram_size is not None:
        positive_int("ngram_size", options.ngram_size)
    if options.window_size is not None:
        positive_int("window_size", options.window_size)
    if options.whitelist_token_ids is not None and (
        isinstance(options.whitelist_token_ids, str | bytes)
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in options.whitelist_token_ids)
    ):
        raise InvalidInputError(
            "whitelist_token_ids",
            options.whitelist_token_ids,
            "must be a sequence of ints",
            "E.g. (128821,).",
        )
    if isinstance(options.temperature, bool) or not isinstance(options.temperature, int | float):
        raise InvalidInputError("temperature", options.temperature, "must be a number", "Use 0.0 for OCR.")
    if options.max_side is not None:
        positive_int("max_side", options.max_side)


def vllm_xargs(options: OCROptions) -> dict[str, Any] | None:
    """The ``vllm_xargs`` of a request, or ``None`` when the n-gram guard is off (``ngram_size=None``)."""
    if options.ngram_size is None:
        return None
    xargs: dict[str, Any] = {"ngram_size": options.ngram_size}
    if options.window_size is not None:
        xargs["window_size"] = options.window_size
    if options.whitelist_token_ids is not None:
        xargs["whitelist_token_ids"] = list(options.whitelist_token_ids)
    return xargs


def build_body(
    image_url: str, options: OCROptions, model: str | None, extra_body: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The ``/v1/chat/completions`` body for one image: image part first, then the prompt."""
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


def check_ngram_processor(
    model: str | None = None, *, extra_headers: Mapping[str, str] | None = None
) -> Operation[bool | None]:
    """Whether the server runs DeepSeek-OCR's n-gram logits processor (one text-only request, < 0.1 s).

    Sends ``vllm_xargs {"ngram_size": 0}`` with ``max_tokens: 1``: a loaded processor rejects it with 400
    ("`ngram_size` has to be a strictly positive integer"); a server without the processor ignores
    ``vllm_xargs`` and answers 200.

    Returns:
        True (loaded), False (``vllm_xargs`` ignored), or None (another 400: inconclusive).

    Raises:
        EndpointNotServed: the server's model does not serve chat completions.
        APIError: for other failures.
    """
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": "."}],
        "max_tokens": 1,
        "vllm_xargs": {"ngram_size": 0},
    }
    if model:
        body["model"] = model
    try:
        yield Request(
            "POST",
            CHAT_PATH,
            json=body,
            headers=extra_headers,
            task="chat",
            retry=False,
            timeout=PROCESSOR_CHECK_TIMEOUT,
        )
    except BadRequestError as error:
        return True if "ngram_size" in error.message else None
    return False


def ensure_ngram_processor(
    state: OCRState,
    options: OCROptions,
    info: ServerInfo,
    model: str | None,
    extra_headers: Mapping[str, str] | None,
) -> Operation[None]:
    """Gate ``vllm_xargs`` on the server version, then check the processor once per client.

    Raises:
        UnsupportedByServer: vLLM < 0.11.1, or (``require_ngram_processor=True``) no processor.

    Warns:
        NGramProcessorMissingWarning: the first time a client finds the processor missing.
    """
    if options.ngram_size is None:
        return
    gates.require(info, ["deepseek_ocr_ngram_xargs"])
    if not state.checked:
        state.ngram_processor = yield from check_ngram_processor(model, extra_headers=extra_headers)
        state.checked = True
        if state.ngram_processor is False and not options.require_ngram_processor:
            warnings.warn(missing_processor_message(), NGramProcessorMissingWarning, stacklevel=5)
    if state.ngram_processor is False and options.require_ngram_processor:
        raise UnsupportedByServer(
            "deepseek_ocr_ngram_xargs",
            server_version=info.version,
            required_version=None,
            server_flag=NGRAM_PROCESSOR_FLAG,
            detail="The server answers 200 to vllm_xargs it ignores; restart it with the flag.",
        )


def missing_processor_message() -> str:
    """The warning text for a server without the n-gram processor."""
    return (
        "This server ignores vllm_xargs: DeepSeek-OCR's n-gram repetition guard is not loaded, so tables "
        f"and repeated lines can loop until max_tokens. Start the server with `{NGRAM_PROCESSOR_FLAG}` "
        "(and, per the recipe, --no-enable-prefix-caching --mm-processor-cache-gb 0). Pass "
        "require_ngram_processor=True to raise instead."
    )


def load_image(
    image: ImageInput, options: OCROptions, *, field: str = "image"
) -> Operation[PreparedImage | str]:
    """Check and encode an image; an ``http(s)`` URL is fetched client-side first (unless
    ``fetch_urls=False``: then the URL itself is returned, for the server to fetch).

    Raises:
        ImageFetchError: the URL cannot be fetched or does not answer 200.
        ImageError, ImageTooLarge: see :func:`vllm_tasks.images.prepare_image`.
    """
    if is_remote_url(image):
        url = str(image).strip()
        if not options.fetch_urls:
            return url
        try:
            response: httpx.Response = yield Fetch(url, timeout=IMAGE_FETCH_TIMEOUT)
        except APIConnectionError as error:
            raise ImageFetchError(
                field,
                url,
                f"could not be fetched ({error.message})",
                "Check the URL, or pass the image bytes.",
            ) from error
        if response.status_code != 200:
            raise ImageFetchError(
                field, url, f"answered HTTP {response.status_code}", "Check the URL, or pass the image bytes."
            )
        image = response.content
    return prepare_image(image, field=field, max_side=options.max_side, downscale=options.downscale)


def parse_response(
    response: httpx.Response, image: PreparedImage | str, prompt: str, *, warn: bool = True
) -> OCRResult:
    """Turn a chat-completions response into an :class:`OCRResult` (boxes in original-image pixels).

    Raises:
        APIError: the body is not a chat completion.

    Warns:
        OCRTruncatedWarning: ``finish_reason == "length"`` (when ``warn``).
    """
    try:
        payload = response.json()
        choice = payload["choices"][0]
        text = choice["message"]["content"] or ""
        finish_reason = choice.get("finish_reason")
        usage = Usage.model_validate(payload.get("usage") or {})
        model = str(payload.get("model") or "")
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise APIError(f"unexpected chat-completions response: {response.text[:200]!r}") from error
    size = image.original_size if isinstance(image, PreparedImage) else None
    sent = image.size if isinstance(image, PreparedImage) else None
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
        sent_size=sent,
    )
    if isinstance(image, PreparedImage):
        result._image = image
    if warn and result.truncated:
        warnings.warn(
            f"OCR output hit max_tokens ({usage.completion_tokens} tokens): the page is incomplete. "
            "Raise max_tokens (DeepSeek-OCR's context is 8192 tokens).",
            OCRTruncatedWarning,
            stacklevel=5,  # parse_response < operation < client._run < client method < caller
        )
    return result


def ocr(
    image: ImageInput,
    options: OCROptions,
    *,
    call: CallOptions,
    client_model: str | None,
    state: OCRState,
) -> Operation[OCRResult]:
    """OCR one image: checks, processor check (once per client), one chat-completions request."""
    validate_options(options)
    prepared = yield from load_image(image, options)
    info: ServerInfo = yield GetServerInfo()
    model = resolve_model(info, call.model, client_model)
    yield from ensure_ngram_processor(state, options, info, model, call.extra_headers)
    url = prepared.data_url if isinstance(prepared, PreparedImage) else prepared
    response = yield Request(
        "POST",
        CHAT_PATH,
        json=build_body(url, options, model, call.extra_body),
        headers=call.extra_headers,
        timeout=call.timeout,
        task="chat",
    )
    return parse_response(response, prepared, resolve_prompt(options.prompt))


def ocr_pdf(
    pdf: Any,
    options: OCROptions,
    *,
    pages: Sequence[int] | str | None,
    dpi: float,
    concurrency: int,
    show_progress: bool,
    call: CallOptions,
    client_model: str | None,
    state: OCRState,
    render: Callable[[Any, Sequence[int] | None, float], tuple[int, Iterator[tuple[int, Any]]]] | None = None,
) -> Operation[OCRDocument]:
    """OCR PDF pages: rendered with pypdfium2 a few at a time, sent with bounded concurrency, returned in
    page order with the joined markdown.

    Raises:
        InvalidInputError: bad page numbers, dpi or concurrency; an unreadable PDF.
        ImportError: pypdfium2 or pillow is missing.
    """
    from . import pdf as pdf_module

    validate_options(options)
    concurrency = positive_int("concurrency", concurrency)
    if isinstance(dpi, bool) or not isinstance(dpi, int | float) or not 18 <= dpi <= 1200:
        raise InvalidInputError("dpi", dpi, "must be a number from 18 to 1200", "Use 144 (the default).")
    selected = pdf_module.parse_pages(pages) if isinstance(pages, str) else pages
    total, rendered = (render or pdf_module.render_pages)(pdf, selected, float(dpi))
    info: ServerInfo = yield GetServerInfo()
    model = resolve_model(info, call.model, client_model)
    yield from ensure_ngram_processor(state, options, info, model, call.extra_headers)
    prompt = resolve_prompt(options.prompt)
    progress = Progress(total, enabled=show_progress, description="OCR pages")
    results: list[OCRPage] = []
    chunk = max(2 * concurrency, 4)
    try:
        while True:
            batch: list[tuple[int, PreparedImage]] = []
            for number, pil in rendered:
                prepared = prepare_image(pil, field=f"page {number}", max_side=options.max_side)
                # Keep the page as encoded PNG bytes, not as a decoded bitmap (long PDFs).
                batch.append((number, dataclasses.replace(prepared, original=prepared.data)))
                if len(batch) == chunk:
                    break
            if not batch:
                break
            requests = [
                Request(
                    "POST",
                    CHAT_PATH,
                    json=build_body(prepared.data_url, options, model, call.extra_body),
                    headers=call.extra_headers,
                    timeout=call.timeout,
                    task="chat",
                )
                for _, prepared in batch
            ]
            responses = yield Parallel(requests, concurrency, lambda _i, _r: progress.advance(1))
            for (number, prepared), response in zip(batch, responses, strict=True):
                page_result = parse_response(response, prepared, prompt, warn=False)
                results.append(OCRPage(page=number, result=page_result))
    finally:
        progress.close()
        close = getattr(rendered, "close", None)
        if close is not None:
            close()  # closes the PDF when a page failed half-way
    truncated = [page.page for page in results if page.result.truncated]
    if truncated:
        warnings.warn(
            f"OCR output hit max_tokens on page(s) {', '.join(map(str, truncated))}: those pages are "
            "incomplete. Raise max_tokens.",
            OCRTruncatedWarning,
            stacklevel=4,
        )
    usage = Usage()
    for page in results:
        usage = usage + page.result.usage
    return OCRDocument(
        pages=results,
        markdown="\n\n---\n\n".join(page.result.markdown for page in results),
        usage=usage,
        truncated_pages=truncated,
    )
