"""OCR model presets: what each OCR model served by vLLM is sent and how its answer is read. Data, chosen
once per call from the served model's name (or named by the caller with ``preset=``).

A preset holds the model's tasks and their prompts, how the user message is shaped, the sampling and
per-request extras of its recipe, image sizing, the name of its output format (:data:`.formats.FORMATS`),
the server flag the client checks once, and the flags ``vllm serve`` needs. Adding a model is one entry in
:data:`PRESETS` (and a format in ``formats.FORMATS`` when its output is new): docs/contributing.md, "Add an
OCR model".
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from .. import defaults
from ..discovery import NGRAM_PROCESSOR_FLAG, model_matches
from ..errors import InvalidInputError
from ..types.server import ServerInfo
from .formats import FORMATS

Content = Literal["image-text", "text-image", "image", "image-tag"]
"""How the user message is shaped: the image then the prompt (``image-text``), the prompt then the image
(``text-image``), the image alone (``image``), or the image then a prompt that starts with a literal
``<image>`` (``image-tag``: the model's template places the image there)."""

CONTENTS: tuple[Content, ...] = ("image-text", "text-image", "image", "image-tag")

IMAGE_TAG = "<image>"


class PresetDefault(enum.Enum):
    """The type of :data:`PRESET_DEFAULT`: an OCR argument's "what the model's preset says"."""

    PRESET_DEFAULT = "PRESET_DEFAULT"

    def __repr__(self) -> str:
        return "PRESET_DEFAULT"


PRESET_DEFAULT: Final = PresetDefault.PRESET_DEFAULT
"""The default of OCR arguments whose value comes from the model's preset (``max_side``, and DeepSeek's
n-gram guard ``ngram_size``/``window_size``/``whitelist_token_ids``)."""

PresetDefaultType: TypeAlias = Literal[PresetDefault.PRESET_DEFAULT]


@dataclass(frozen=True)
class OCRPreset:
    """How one OCR model is sent an image and how its answer is read.

    Attributes:
        name: the preset's name (``ocr(..., preset="deepseek-ocr")``).
        pattern: a regular expression (case-insensitive) searched in the served model's name and its
            ``/v1/models`` root, e.g. ``deepseek-ai/DeepSeek-OCR``; ``(?!)`` matches nothing (a preset
            chosen only by name).
        tasks: task name -> prompt text, the first the default (``ocr(..., task="free")``). A prompt
            holding ``{text}`` takes an argument: ``task="locate:Total"``.
        content: how the user message is shaped (:data:`Content`).
        sampling: request fields of the recipe (``temperature``, ``top_p``, ``top_k``,
            ``repetition_penalty``, ``skip_special_tokens``); ``temperature=`` overrides its temperature.
        extra_body: other per-request fields of the recipe (DeepSeek's ``vllm_xargs``; the n-gram
            arguments of ``ocr`` override its ``ngram_size``/``window_size``/``whitelist_token_ids``).
        max_tokens: the output limit the recipe sends (``None``: none); ``max_tokens=`` overrides it.
        system: a system message sent before the user's (``None``: none).
        task_fields: task name -> request fields of that task only, merged over the others (e.g.
            ``{"spotting": {"skip_special_tokens": False}}``).
        max_side: the longest side sent, in pixels (``None``: no limit); ``max_side=`` overrides it.
        side_multiple: sides are rounded to a multiple of this before upload (``None``: as they are).
        output: the name of the answer's format in :data:`vllm_tasks.ocr.formats.FORMATS`.
        server_check: the ``--logits-processors`` flag of an n-gram processor the client checks once per
            model (a server without it ignores ``vllm_xargs``), or ``None``.
        serve_flags: the ``vllm serve`` flags of the recipe (shown in docs and errors).

    Raises:
        InvalidInputError: a field that cannot work (an unknown content shape or format, a bad pattern,
            no tasks).

    Examples:
        >>> DEEPSEEK_OCR.output, GENERIC.content
        ('deepseek-grounding', 'image-text')
    """

    name: str
    pattern: str
    tasks: Mapping[str, str]
    content: Content = "image-text"
    sampling: Mapping[str, Any] = field(default_factory=lambda: {"temperature": 0.0})
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    max_side: int | None = defaults.IMAGE_MAX_SIDE
    side_multiple: int | None = None
    output: str = "markdown"
    server_check: str | None = None
    serve_flags: str = ""
    max_tokens: int | None = defaults.OCR_MAX_TOKENS
    system: str | None = None
    task_fields: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise InvalidInputError("preset.name", self.name, "must be a non-empty string", "")
        try:
            re.compile(self.pattern)
        except (re.error, TypeError) as error:
            raise InvalidInputError(
                "preset.pattern", self.pattern, f"is not a regular expression: {error}", ""
            ) from error
        if not isinstance(self.tasks, Mapping) or not self.tasks:
            raise InvalidInputError("preset.tasks", self.tasks, "must map task names to prompts", "")
        if self.content not in CONTENTS:
            raise InvalidInputError("preset.content", self.content, "unknown", f"Use one of {CONTENTS}.")
        if self.output not in FORMATS:
            raise InvalidInputError(
                "preset.output", self.output, "is not a format", f"Use one of {', '.join(FORMATS)}."
            )
        unknown = sorted(set(self.task_fields) - set(self.tasks))
        if unknown:
            raise InvalidInputError("preset.task_fields", unknown, "are not tasks of the preset", "")
        for name in ("max_side", "side_multiple", "max_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise InvalidInputError(f"preset.{name}", value, "must be a positive int or None", "")

    @property
    def default_task(self) -> str:
        """The first task: what ``ocr`` does when neither ``task`` nor ``prompt`` is given."""
        return next(iter(self.tasks))

    @property
    def ngram_guard(self) -> bool:
        """Whether the recipe sends an n-gram guard in ``vllm_xargs`` (``ngram_size`` and its kin apply)."""
        xargs = self.extra_body.get("vllm_xargs")
        return isinstance(xargs, Mapping) and "ngram_size" in xargs


DEEPSEEK_OCR = OCRPreset(
    name="deepseek-ocr",
    pattern=r"deepseek[-_ ]?ocr(?![-_ ]?2)",
    tasks={
        "markdown": "<|grounding|>Convert the document to markdown.",
        "ocr": "<|grounding|>OCR this image.",
        "free": "Free OCR.",
        "figure": "Parse the figure.",
        "describe": "Describe this image in detail.",
        "locate": "Locate <|ref|>{text}<|/ref|> in the image.",
    },
    sampling={"temperature": 0.0, "skip_special_tokens": False},
    # The values the model's n-gram guard was published with; <td> and </td> may repeat in tables.
    extra_body={"vllm_xargs": {"ngram_size": 30, "window_size": 90, "whitelist_token_ids": [128821, 128822]}},
    output="deepseek-grounding",
    server_check=NGRAM_PROCESSOR_FLAG,
    serve_flags=f"{NGRAM_PROCESSOR_FLAG} --no-enable-prefix-caching --mm-processor-cache-gb 0",
)
"""DeepSeek-OCR (vLLM's ``recipes/models/deepseek-ai/DeepSeek-OCR.yaml``): the prompts it was trained on,
greedy, special tokens kept (its grounding tags), the n-gram repetition guard per request."""

GENERIC = OCRPreset(
    name="generic",
    pattern=r"(?!)",
    tasks={
        "markdown": "Convert this page to markdown. Keep the reading order; write tables as markdown "
        "tables and formulas as LaTeX. Answer with the markdown only."
    },
)
"""Any vision-chat model: the image then an instruction, greedy, the answer read as plain markdown. Chosen
only by name (``preset="generic"``)."""

PRESETS: dict[str, OCRPreset] = {
    "deepseek-ocr": DEEPSEEK_OCR,
    "generic": GENERIC,
}
"""Every OCR preset by name, in the order a served model is matched against them."""

PresetChoice: TypeAlias = "str | OCRPreset | None"
"""A call's ``preset=``: a preset, a preset's name, or ``None`` (recognised from the served model)."""


def _names() -> str:
    return ", ".join(repr(name) for name in PRESETS)


def preset_named(choice: str | OCRPreset) -> OCRPreset:
    """The preset a caller named (a name in :data:`PRESETS`, or an :class:`OCRPreset` as is).

    Raises:
        InvalidInputError: no preset has that name (the message lists them), or another type.

    Examples:
        >>> preset_named("generic").name
        'generic'
    """
    if isinstance(choice, OCRPreset):
        return choice
    if isinstance(choice, str) and choice in PRESETS:
        return PRESETS[choice]
    if isinstance(choice, str):
        raise InvalidInputError("preset", choice, "is not an OCR preset", f"Use one of {_names()}.")
    raise InvalidInputError(
        "preset", choice, "must be a preset name or an OCRPreset", "Pass e.g. preset='deepseek-ocr'."
    )


def recognised(info: ServerInfo, model: str | None) -> OCRPreset | None:
    """The first preset whose pattern matches the served model's name or root (``model=None``: any
    served model), or ``None``.

    Examples:
        >>> from vllm_tasks.types.server import ModelCard
        >>> info = ServerInfo(base_url="http://h", version=None, models=(ModelCard(id="qwen"),), routes=None)
        >>> recognised(info, None) is None
        True
    """
    for preset in PRESETS.values():
        if model_matches(info, preset.pattern, model):
            return preset
    return None


def ocr_preset(info: ServerInfo, model: str | None, choice: PresetChoice = None) -> OCRPreset:
    """The preset of a call: ``choice`` when given, else the first whose pattern matches the served
    model's name or root.

    Args:
        info: the server's description (its model cards).
        model: the served model the call names (``None``: the server's first).
        choice: the caller's ``preset=``.

    Raises:
        InvalidInputError: (``field="preset"``) ``choice`` names no preset, or no preset recognises the
            served model (the message lists the presets and how to name one).

    Examples:
        >>> from vllm_tasks.types.server import ModelCard
        >>> card = ModelCard(id="ocr", root="deepseek-ai/DeepSeek-OCR")
        >>> info = ServerInfo(base_url="http://h", version=None, models=(card,), routes=None)
        >>> ocr_preset(info, None).name, ocr_preset(info, None, "generic").name
        ('deepseek-ocr', 'generic')
    """
    if choice is not None:
        return preset_named(choice)
    name = model or info.default_model
    found = recognised(info, name)
    if found is not None:
        return found
    raise InvalidInputError(
        "preset",
        name,
        "no OCR preset recognises the served model",
        f"Name one with preset= ({_names()}; 'generic' for any vision-chat model), or pass an OCRPreset.",
    )
