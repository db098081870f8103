"""Document OCR, the pure parts: one image per ``/v1/chat/completions`` request, shaped by the served
model's preset (:mod:`vllm_tasks.ocr.presets`) and read by its output format (:mod:`vllm_tasks.ocr.formats`).

DeepSeek-OCR's recipe (vLLM's ``recipes/models/deepseek-ai/DeepSeek-OCR.yaml``), its preset: the server runs
with ``--logits-processors vllm.model_executor.models.deepseek_ocr:NGramPerReqLogitsProcessor
--no-enable-prefix-caching --mm-processor-cache-gb 0``; each request sends ``temperature: 0``,
``skip_special_tokens: false`` and ``vllm_xargs {"ngram_size": 30, "window_size": 90,
"whitelist_token_ids": [128821, 128822]}`` (``<td>``/``</td>`` may repeat in tables).

Without ``--logits-processors`` the server answers 200 and silently ignores ``vllm_xargs``, so repeated
table cells loop until ``max_tokens``. :func:`~vllm_tasks.discovery.ngram_check_request` finds out
cheaply: a text-only request with ``{"ngram_size": 0}`` gets 400 from a loaded processor and 200 from a
server without it.

This module checks options, builds requests, prepares PDF pages and parses answers; the sending is
``vllm_tasks/_async/ocr.py`` (and its generated sync twin).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import io
import itertools
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from .. import gates
from ..calls import CallOptions, TaskParams, plain
from ..dependencies import require
from ..discovery import NGRAM_PROCESSOR_FLAG
from ..errors import InvalidInputError, UnsupportedByServer
from ..errors import OCRDocumentFailed as OCRDocumentFailed
from ..images import PreparedImage, prepare_image
from ..pdf import parse_pages
from ..responses import json_object, malformed, text_or_none, usage_of
from ..transport import Request
from ..types.common import Usage
from ..types.ocr import OCRDocument, OCRPage, OCRResult
from ..types.server import ServerInfo
from ..validation import is_number, number_in_range, positive_int
from .formats import FORMATS, PageSizes
from .ladder import PageQuality as PageQuality
from .presets import (
    DEEPSEEK_OCR,
    IMAGE_TAG,
    PRESET_DEFAULT,
    OCRPreset,
    PresetDefaultType,
    preset_named,
)

CHAT_PATH = "/v1/chat/completions"

PROMPTS: Mapping[str, str] = DEEPSEEK_OCR.tasks
"""DeepSeek-OCR's tasks and their prompts (the prompts it was trained on; ``locate`` takes a text)."""

RECIPE_NGRAM_SIZE = 30
RECIPE_WINDOW_SIZE = 90
RECIPE_WHITELIST = (128821, 128822)
"""``<td>`` and ``</td>`` in DeepSeek-OCR's vocabulary: tables repeat them legitimately."""

NGRAM_FIELDS = ("ngram_size", "window_size", "whitelist_token_ids")
"""The arguments of DeepSeek's n-gram guard (keys of ``vllm_xargs``)."""

PDF_MIN_DPI, PDF_MAX_DPI = 18, 1200


class OCRTruncatedWarning(UserWarning):
    """An OCR output hit ``max_tokens`` (``finish_reason == "length"``): the page is incomplete."""


class NGramProcessorMissingWarning(UserWarning):
    """The server ignores ``vllm_xargs``: it was started without DeepSeek-OCR's n-gram logits processor."""


def _text_or_none(field: str, value: object, fix: str) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise InvalidInputError(field, value, "must be a non-empty string", fix)


@dataclass(frozen=True)
class OCRParams(TaskParams):
    """The OCR options shared by ``ocr`` and ``ocr_pdf``, checked on construction; each field is their
    keyword argument of the same name (see :meth:`~vllm_tasks.Client.ocr`). ``ocr_dir``, the LangChain
    loader and Ray's ``OCR`` take one as ``params=``. What depends on the model (its tasks, whether it
    takes the n-gram guard) is checked against the preset when the call is made.

    Raises:
        InvalidInputError: naming the first bad argument.

    Examples:
        >>> params = vt.OCRParams(prompt="free", max_tokens=2048)
        >>> result = client.ocr("page.png", **params.keywords())
        >>> vt.ocr_dir(client, "scans", "scans-md", params=vt.OCRParams(preset="generic"))
    """

    prompt: str | None = None
    max_tokens: int | PresetDefaultType | None = PRESET_DEFAULT
    ngram_size: int | PresetDefaultType | None = PRESET_DEFAULT
    window_size: int | PresetDefaultType | None = PRESET_DEFAULT
    whitelist_token_ids: Sequence[int] | PresetDefaultType | None = PRESET_DEFAULT
    temperature: float | None = None
    require_ngram_processor: bool = False
    max_side: int | PresetDefaultType | None = PRESET_DEFAULT
    task: str | None = None
    preset: str | OCRPreset | None = None

    def __post_init__(self) -> None:
        _text_or_none("prompt", self.prompt, "Use task= for one of the preset's prompts, or text.")
        _text_or_none("task", self.task, "Use a task of the preset, e.g. task='markdown'.")
        if self.preset is not None:
            preset_named(self.preset)
        for field in ("max_tokens", "ngram_size", "window_size", "max_side"):
            value = getattr(self, field)
            if value is not None and value is not PRESET_DEFAULT:
                positive_int(field, value)
        ids = self.whitelist_token_ids
        if (
            ids is not None
            and ids is not PRESET_DEFAULT
            and (
                isinstance(ids, str | bytes)
                or not isinstance(ids, Sequence)
                or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
            )
        ):
            raise InvalidInputError(
                "whitelist_token_ids", ids, "must be a sequence of ints", "E.g. (128821,)."
            )
        if self.temperature is not None and not is_number(self.temperature):
            raise InvalidInputError("temperature", self.temperature, "must be a number", "Use 0.0 for OCR.")

    def using(self, preset: str | OCRPreset | None) -> OCRParams:
        """These options with ``preset`` (the ``preset=`` of ``ocr_dir``, Ray's ``OCR``, the LangChain
        loader); ``None`` changes nothing.

        Raises:
            InvalidInputError: the options already name another preset.

        Examples:
            >>> OCRParams(max_tokens=64).using("generic").preset
            'generic'
        """
        if preset is None or preset == self.preset:
            return self
        if self.preset is not None:
            raise InvalidInputError(
                "preset", preset, f"differs from params.preset={self.preset!r}", "Name the preset once."
            )
        return dataclasses.replace(self, preset=preset)

    def changed(self) -> dict[str, Any]:
        """:meth:`keywords` as JSON values; a preset object as its fields (a job's fingerprint)."""
        changed = super().changed()
        if isinstance(self.preset, OCRPreset):
            changed["preset"] = plain(dataclasses.asdict(self.preset))
        return changed


@dataclass(frozen=True)
class OCRRequest:
    """One call's requests as its preset completes its options (see :func:`plan_request`).

    Attributes:
        preset: the model's preset.
        prompt: the text sent with the image (``""`` for a model that reads the image alone).
        fields: the body's fields besides ``messages`` and ``model`` (sampling, ``max_tokens``, the
            recipe's extras).
        max_side: the longest side sent (``None``: no limit).
        side_multiple: sides rounded to a multiple of this (``None``: as they are).
        require_processor: refuse a server without the preset's n-gram processor.
        output: the format its answers are read by (:meth:`OCRPreset.output_of` the call's task).
    """

    preset: OCRPreset
    prompt: str
    fields: Mapping[str, Any]
    max_side: int | None
    side_multiple: int | None
    require_processor: bool = False
    output: str = "markdown"

    @property
    def checks_processor(self) -> bool:
        """Whether the requests send an n-gram guard whose processor the preset checks on the server."""
        xargs = self.fields.get("vllm_xargs")
        return self.preset.server_check is not None and isinstance(xargs, Mapping) and "ngram_size" in xargs


def _task_prompt(preset: OCRPreset, name: str) -> str | None:
    """The prompt of ``name`` (``"locate:Total"`` fills a prompt that takes ``{text}``), or ``None``."""
    base, colon, argument = name.partition(":")
    template = preset.tasks.get(base if colon else name)
    if template is None or ("{text}" in template) != bool(colon):
        return None
    return template.replace("{text}", argument.strip()) if colon else template


def _task_names(preset: OCRPreset) -> str:
    return ", ".join(f"{name}:TEXT" if "{text}" in text else name for name, text in preset.tasks.items())


def resolve_prompt(prompt: str, preset: OCRPreset = DEEPSEEK_OCR) -> str:
    """The prompt text of a task of ``preset`` (DeepSeek-OCR's ``markdown``, ``ocr``, ``free``,
    ``figure``, ``describe``, ``locate:TEXT``), or ``prompt`` itself.

    Raises:
        InvalidInputError: for an empty or non-string prompt.

    Examples:
        >>> resolve_prompt("free")
        'Free OCR.'
    """
    if not isinstance(prompt, str) or not prompt.strip():
        raise InvalidInputError(
            "prompt", prompt, "must be a non-empty string", f"Use a task ({_task_names(preset)}) or text."
        )
    return _task_prompt(preset, prompt) or prompt


def _call_prompt(preset: OCRPreset, options: OCRParams) -> tuple[str | None, str]:
    """The call's task (``None`` for its own prompt) and the text it sends (``""`` for the image alone)."""
    if options.task is not None and options.prompt is not None:
        raise InvalidInputError(
            "task", options.task, "is given with prompt=", "Pass one: task= names a prompt, prompt= is text."
        )
    if options.prompt is not None and preset.content == "image":
        raise InvalidInputError(
            "prompt",
            options.prompt,
            f"the model reads the image alone ({preset.name} preset)",
            "Drop prompt, or name another preset.",
        )
    task: str | None = options.task or preset.default_task
    if options.prompt is not None:
        text = resolve_prompt(options.prompt, preset)
        task = options.prompt if _task_prompt(preset, options.prompt) is not None else None
    else:
        found = _task_prompt(preset, task or "")
        if found is None:
            raise InvalidInputError(
                "task",
                options.task,
                f"is not a task of the {preset.name} preset",
                f"Use one of: {_task_names(preset)}.",
            )
        text = found
    task = task.partition(":")[0] if task is not None else None
    if preset.content == "image":
        return task, ""
    if preset.content == "image-tag" and not text.startswith(IMAGE_TAG):
        return task, f"{IMAGE_TAG}\n{text}"
    return task, text


def _recipe_extras(preset: OCRPreset, options: OCRParams) -> dict[str, Any]:
    """The preset's per-request extras, its n-gram guard as the call's arguments change it."""
    extras = dict(preset.extra_body)
    values = {name: getattr(options, name) for name in NGRAM_FIELDS}
    given = {name: value for name, value in values.items() if value is not PRESET_DEFAULT}
    if not preset.ngram_guard:
        for name, value in given.items():
            raise InvalidInputError(
                name,
                value,
                f"is DeepSeek-OCR's n-gram guard, which the {preset.name} preset does not send",
                "Drop it, or name the preset of a model that takes it.",
            )
        if options.require_ngram_processor:
            raise InvalidInputError(
                "require_ngram_processor",
                True,
                f"the {preset.name} preset sends no n-gram guard",
                "Drop it, or name the preset of a model that takes it.",
            )
        return extras
    xargs = dict(extras["vllm_xargs"])
    for name, value in given.items():
        if value is None:
            xargs.pop(name, None)
        else:
            xargs[name] = list(value) if name == "whitelist_token_ids" else value
    if given.get("ngram_size", 0) is None:  # the guard off: none of its arguments is sent
        xargs = {key: value for key, value in xargs.items() if key not in NGRAM_FIELDS}
    if xargs:
        extras["vllm_xargs"] = xargs
    else:
        del extras["vllm_xargs"]
    return extras


def plan_request(preset: OCRPreset, options: OCRParams) -> OCRRequest:
    """What a call sends, from its preset and its options.

    Raises:
        InvalidInputError: a task the preset lacks, ``task`` with ``prompt``, a prompt for a model that
            reads the image alone, an n-gram argument for a preset without the guard.

    Examples:
        >>> plan = plan_request(DEEPSEEK_OCR, OCRParams(task="free", window_size=None))
        >>> plan.prompt, plan.fields["vllm_xargs"]
        ('Free OCR.', {'ngram_size': 30, 'whitelist_token_ids': [128821, 128822]})
    """
    task, prompt = _call_prompt(preset, options)
    fields: dict[str, Any] = dict(preset.sampling)
    if options.temperature is not None:
        fields["temperature"] = options.temperature
    max_tokens = preset.max_tokens if options.max_tokens is PRESET_DEFAULT else options.max_tokens
    if max_tokens is not None:
        fields["max_tokens"] = max_tokens
    fields.update(_recipe_extras(preset, options))
    fields.update(preset.task_fields.get(task or "", {}))
    return OCRRequest(
        preset=preset,
        prompt=prompt,
        fields=fields,
        max_side=preset.max_side if options.max_side is PRESET_DEFAULT else options.max_side,
        side_multiple=preset.side_multiple,
        require_processor=options.require_ngram_processor,
        output=preset.output_of(task),
    )


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
    """DeepSeek-OCR's ``locate`` prompt: find ``text`` in the image (the result's blocks hold its boxes).

    Examples:
        >>> locate("Total revenue")
        'Locate <|ref|>Total revenue<|/ref|> in the image.'
    """
    return DEEPSEEK_OCR.tasks["locate"].replace("{text}", text)


def message_content(image_url: str, request: OCRRequest) -> list[dict[str, Any]]:
    """The user message's content parts, in the order the preset's model wants them.

    Examples:
        >>> [part["type"] for part in message_content("data:...", plan_request(DEEPSEEK_OCR, OCRParams()))]
        ['image_url', 'text']
    """
    image = {"type": "image_url", "image_url": {"url": image_url}}
    text = {"type": "text", "text": request.prompt}
    shape = request.preset.content
    if shape == "image":
        return [image]
    return [text, image] if shape == "text-image" else [image, text]


def build_body(
    image_url: str, request: OCRRequest, model: str | None, extra_body: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The ``/v1/chat/completions`` body for one image (``extra_body`` merged last).

    Examples:
        >>> build_body("data:image/png;base64,...", plan_request(DEEPSEEK_OCR, OCRParams()), "ocr", None)[
        ...     "max_tokens"
        ... ]
        4096
    """
    messages = [{"role": "user", "content": message_content(image_url, request)}]
    if request.preset.system is not None:
        messages.insert(0, {"role": "system", "content": request.preset.system})
    body: dict[str, Any] = {"messages": messages}
    body.update(request.fields)
    if model:
        body["model"] = model
    if extra_body:
        body.update(extra_body)
    return body


def page_request(image_url: str, request: OCRRequest, model: str | None, call: CallOptions) -> Request:
    """The chat-completions request for one image (a URL, or the data URL of a prepared image)."""
    body = build_body(image_url, request, model, call.extra_body)
    return Request(
        "POST", CHAT_PATH, json=body, headers=call.extra_headers, timeout=call.timeout, task="chat"
    )


def uses_ngram_processor(request: OCRRequest, info: ServerInfo) -> bool:
    """Whether the call's n-gram guard needs the preset's processor checked; ``vllm_xargs`` are gated on
    the server version.

    Raises:
        UnsupportedByServer: ``vllm_xargs`` on vLLM < 0.11.1.
    """
    if "vllm_xargs" not in request.fields:
        return False
    gates.require(info, ["deepseek_ocr_ngram_xargs"])
    return request.checks_processor


def require_ngram_processor(found: bool | None, request: OCRRequest, info: ServerInfo) -> None:
    """Refuse a call that requires the processor when the check found it missing (``found`` False).

    Raises:
        UnsupportedByServer: ``require_ngram_processor=True`` and the server ignores ``vllm_xargs``.
    """
    if found is False and request.require_processor:
        raise UnsupportedByServer(
            "deepseek_ocr_ngram_xargs",
            server_version=info.version,
            required_version=None,
            server_flag=request.preset.server_check or NGRAM_PROCESSOR_FLAG,
            detail="The server answers 200 to vllm_xargs it ignores; restart it with the flag.",
        )


def truncated_message(result: OCRResult) -> str:
    """The :class:`OCRTruncatedWarning` text for one image cut short by ``max_tokens``."""
    return (
        f"OCR output hit max_tokens ({result.usage.completion_tokens} tokens): the page is incomplete. "
        "Raise max_tokens (up to the served model's context less the image's tokens)."
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


def _token_ids(response: httpx.Response, value: object, name: str) -> list[int] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise malformed(response, CHAT_PATH, f"{name} is not a list of token ids")
    return value


def parse_response(
    response: httpx.Response,
    image: PreparedImage | str,
    prompt: str,
    *,
    preset: OCRPreset = DEEPSEEK_OCR,
    output: str | None = None,
    warn: bool = True,
) -> OCRResult:
    """Turn a chat-completions response into an :class:`OCRResult`, read by the preset's output format
    (boxes in pixels of the caller's image).

    Args:
        response: the server's answer.
        image: the prepared image that was sent (its sizes convert the boxes), or the URL sent as is.
        prompt: the prompt text sent, recorded in the result.
        preset: the model's preset.
        output: the name of the answer's format (:attr:`OCRRequest.output`; ``None``: the preset's
            ``output``).
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
    assert isinstance(choice, dict)  # message is a dict, so choice was one
    text = content or ""
    usage = usage_of(response, CHAT_PATH, payload.get("usage"))
    model = text_or_none(payload.get("model")) or ""
    prepared = image if isinstance(image, PreparedImage) else None
    size = prepared.original_size if prepared else None
    parsed = FORMATS[output or preset.output].parse(
        text, PageSizes(prepared.size if prepared else None, size)
    )
    result = OCRResult(
        text=text,
        markdown=parsed.markdown,
        blocks=parsed.blocks,
        usage=usage,
        finish_reason=finish_reason,
        truncated=finish_reason == "length",
        model=model,
        prompt=prompt,
        image_size=size,
        sent_size=prepared.size if prepared else None,
        preset=preset.name,
        metadata=parsed.metadata,
        token_ids=_token_ids(response, choice.get("token_ids"), "token_ids"),
        prompt_token_ids=_token_ids(response, payload.get("prompt_token_ids"), "prompt_token_ids"),
    )
    result._image = prepared
    if warn and result.truncated:
        warnings.warn(truncated_message(result), OCRTruncatedWarning, stacklevel=2)
    return result


def round_sides(prepared: PreparedImage, multiple: int | None) -> PreparedImage:
    """``prepared`` with each side rounded to the nearest multiple of ``multiple`` (at least one), as a
    PNG; as is when they already are (or ``multiple`` is ``None``). The caller's size is kept: boxes
    still convert to its pixels.

    Raises:
        MissingDependency: pillow is not installed.
    """
    if multiple is None:
        return prepared
    width, height = prepared.size
    target = (
        max(multiple, round(width / multiple) * multiple),
        max(multiple, round(height / multiple) * multiple),
    )
    if target == prepared.size:
        return prepared
    image_module = require("PIL.Image", "image", "resizing images for OCR")
    with image_module.open(io.BytesIO(prepared.data)) as image:
        resized = image.convert("RGB").resize(target, image_module.Resampling.LANCZOS)
    buffer = io.BytesIO()
    resized.save(buffer, format="PNG")
    data = buffer.getvalue()
    url = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    return dataclasses.replace(prepared, data_url=url, data=data, mime="image/png", size=target)


def fit_image(prepared: PreparedImage | str, request: OCRRequest, *, downscale: bool) -> PreparedImage | str:
    """An image checked before the preset was known, sized as the preset sends it: longest side at most
    ``request.max_side``, sides rounded to ``request.side_multiple``. CPU-heavy when it resizes.

    Raises:
        InvalidInputError: ``kind="image_too_large"``: over ``max_side`` with ``downscale=False``.
    """
    if not isinstance(prepared, PreparedImage):
        return prepared
    if request.max_side is not None and max(prepared.size) > request.max_side:
        resized = prepare_image(prepared.original, max_side=request.max_side, downscale=downscale)
        prepared = dataclasses.replace(resized, original=prepared.original)
    return round_sides(prepared, request.side_multiple)


def prepare_pages(
    rendered: Iterator[tuple[int, Any]], count: int, request: OCRRequest
) -> list[tuple[int, PreparedImage]]:
    """Render (advance ``rendered``) and encode the next ``count`` pages, sized as the preset sends them;
    ``[]`` when none are left.

    CPU-heavy (PDF rendering, PNG encoding): ``AsyncClient`` runs it in a worker thread. Each page keeps
    its encoded bytes, not its bitmap, as the original for ``draw()``/``crop()`` (long PDFs).

    Raises:
        InvalidInputError: (``kind="image_decode"`` or ``"image_too_large"``) a page cannot be encoded (see
            :func:`vllm_tasks.images.prepare_image`).
    """
    batch: list[tuple[int, PreparedImage]] = []
    for number, page in itertools.islice(rendered, count):
        prepared = prepare_image(page, field=f"page {number}", max_side=request.max_side)
        prepared = dataclasses.replace(prepared, original=prepared.data)
        batch.append((number, round_sides(prepared, request.side_multiple)))
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
