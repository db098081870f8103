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
        task_outputs: task name -> the format of that task's answer where it is not ``output`` (e.g.
            ``{"spotting": "hunyuan-spotting"}``).
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
    task_outputs: Mapping[str, str] = field(default_factory=dict)

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
        for name in ("task_fields", "task_outputs"):
            unknown = sorted(set(getattr(self, name)) - set(self.tasks))
            if unknown:
                raise InvalidInputError(f"preset.{name}", unknown, "are not tasks of the preset", "")
        for output in (self.output, *self.task_outputs.values()):
            if output not in FORMATS:
                raise InvalidInputError(
                    "preset.output", output, "is not a format", f"Use one of {', '.join(FORMATS)}."
                )
        for name in ("max_side", "side_multiple", "max_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise InvalidInputError(f"preset.{name}", value, "must be a positive int or None", "")

    def output_of(self, task: str | None) -> str:
        """The format of the answer to ``task`` (``None``: a prompt of the caller's own): its entry in
        :attr:`task_outputs`, else :attr:`output`.

        Examples:
            >>> HUNYUAN_OCR.output_of("spotting"), HUNYUAN_OCR.output_of(None)
            ('hunyuan-spotting', 'markdown-html')
        """
        return self.task_outputs.get(task or "", self.output)

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

DEEPSEEK_OCR2 = OCRPreset(
    name="deepseek-ocr2",
    pattern=r"deepseek[-_ ]?ocr[-_ ]?2",
    tasks={
        "markdown": "<|grounding|>Convert the document to markdown.",
        "free": "Free OCR.",
    },
    sampling=DEEPSEEK_OCR.sampling,
    extra_body=DEEPSEEK_OCR.extra_body,
    output="deepseek-grounding",
    server_check=NGRAM_PROCESSOR_FLAG,
    serve_flags=DEEPSEEK_OCR.serve_flags,
)
"""DeepSeek-OCR-2 (deepseek-ai/DeepSeek-OCR-2's model card: its two prompts, each after the image): served
and sent as DeepSeek-OCR is, the same n-gram guard per request, the same grounding tags back."""

UNLIMITED_OCR_PROCESSOR_FLAG = (
    "--logits-processors vllm.model_executor.models.unlimited_ocr:NGramPerReqLogitsProcessor"
)

UNLIMITED_OCR = OCRPreset(
    name="unlimited-ocr",
    pattern=r"unlimited[-_ ]?ocr",
    tasks={"parse": "<image>document parsing."},
    content="image-tag",
    sampling={"temperature": 0.0, "skip_special_tokens": False},
    # Its guard: a longer n-gram and window than DeepSeek-OCR's, no whitelist.
    extra_body={"vllm_xargs": {"ngram_size": 35, "window_size": 128}},
    output="deepseek-grounding",
    server_check=UNLIMITED_OCR_PROCESSOR_FLAG,
    serve_flags=f"{UNLIMITED_OCR_PROCESSOR_FLAG} --no-enable-prefix-caching --mm-processor-cache-gb 0",
    max_tokens=8192,
)
"""Unlimited-OCR (baidu/Unlimited-OCR; vLLM's ``unlimited_ocr.py``: DeepSeek-OCR's vision stack and
processor): the prompt written after a literal ``<image>`` (``<image>document parsing.``, as its
``model.infer`` examples send it), greedy, special tokens kept, the n-gram guard with ``ngram_size`` 35 and
``window_size`` 128 and 8,192 output tokens from vLLM's Unlimited-OCR module (which re-exports DeepSeek-OCR's
processor)."""

DOTS_IMAGE_PLACEHOLDER = "<|img|><|imgpad|><|endofimg|>"
"""dots.ocr's image placeholder, written before each prompt (without it vLLM puts it there with a newline,
which dots.ocr's client avoids)."""

DOTS_OCR = OCRPreset(
    name="dots-ocr",
    pattern=r"dots[-_. ]?ocr",
    tasks={
        "layout": DOTS_IMAGE_PLACEHOLDER
        + "Please output the layout information from the PDF image, including each layout element's bbox, "
        "its category, and the corresponding text content within the bbox.\n\n1. Bbox format: [x1, y1, x2, "
        "y2]\n\n2. Layout Categories: The possible categories are ['Caption', 'Footnote', 'Formula', "
        "'List-item', 'Page-footer', 'Page-header', 'Picture', 'Section-header', 'Table', 'Text', "
        "'Title'].\n\n3. Text Extraction & Formatting Rules:\n    - Picture: For the 'Picture' category, "
        "the text field should be omitted.\n    - Formula: Format its text as LaTeX.\n    - Table: Format "
        "its text as HTML.\n    - All Others (Text, Title, etc.): Format their text as Markdown.\n\n4. "
        "Constraints:\n    - The output text must be the original text from the image, with no "
        "translation.\n    - All layout elements must be sorted according to human reading order.\n\n5. "
        "Final Output: The entire output must be a single JSON object.\n",
        "layout-only": DOTS_IMAGE_PLACEHOLDER
        + "Please output the layout information from this PDF image, including each layout's bbox and its "
        "category. The bbox should be in the format [x1, y1, x2, y2]. The layout categories for the PDF "
        "document include ['Caption', 'Footnote', 'Formula', 'List-item', 'Page-footer', 'Page-header', "
        "'Picture', 'Section-header', 'Table', 'Text', 'Title']. Do not output the corresponding text. The "
        "layout result should be in JSON format.",
    },
    sampling={"temperature": 0.1, "top_p": 1.0},
    max_side=3360,
    side_multiple=28,
    output="dots-ocr-layout",
    serve_flags="--trust-remote-code",
    max_tokens=16384,
)
"""dots.ocr (rednote-hilab/dots.ocr: ``dots_ocr/utils/prompts.py`` and the request of
``dots_ocr/model/inference.py``): its layout prompts after its image placeholder, the answer a JSON list of
``{bbox, category, text}``; its parser's temperature 0.1, top_p 1.0 and 16,384 output tokens; sides
multiples of 28 and at most 3360 px (its processor's 11,289,600-pixel cap), so the processor keeps the sent
size and the boxes are in its pixels."""

DOTS_OCR_TEXT = OCRPreset(
    name="dots-ocr-text",
    pattern=r"(?!)",
    tasks={"ocr": DOTS_IMAGE_PLACEHOLDER + "Extract the text content from this image."},
    sampling=DOTS_OCR.sampling,
    max_side=DOTS_OCR.max_side,
    side_multiple=DOTS_OCR.side_multiple,
    output="dots-ocr-text",
    serve_flags=DOTS_OCR.serve_flags,
    max_tokens=DOTS_OCR.max_tokens,
)
"""dots.ocr's plain-text prompt (``prompt_ocr``), the answer read as text: a model served as dots.ocr picks
:data:`DOTS_OCR`; name this one (``preset="dots-ocr-text"``) for text."""

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

OLMOCR = OCRPreset(
    name="olmocr",
    pattern=r"olmocr",
    tasks={
        "markdown": "Attached is one page of a document that you must process. Just return the plain text "
        "representation of this document as if you were reading it naturally. Convert equations to LateX "
        "and tables to HTML.\nIf there are any figures or charts, label them with the following markdown "
        "syntax ![Alt text describing the contents of the figure](page_startx_starty_width_height.png)\n"
        "Return your output as markdown, with a front matter section on top specifying values for the "
        "primary_language, is_rotation_valid, rotation_correction, is_table, and is_diagram parameters."
    },
    content="text-image",
    sampling={"temperature": 0.1},
    max_tokens=8000,
    max_side=1288,
    output="olmocr",
    serve_flags="--limit-mm-per-prompt '{\"video\": 0}'",
)
"""olmOCR-2 (``allenai/olmOCR-2-7B-1025``, a Qwen2.5-VL fine-tune; its pipeline serves it as ``olmocr``):
allenai/olmocr's ``build_no_anchoring_v4_yaml_prompt`` before the page (``pipeline.py``
``build_page_query``), the page rendered at 1288 px on its longest side, the first temperature of its
retry ladder (0.1), at most 8000 tokens. The answer is YAML front matter (language, rotation, table,
diagram) then markdown."""

NANONETS_OCR2 = OCRPreset(
    name="nanonets-ocr2",
    pattern=r"nanonets[-_ ]?ocr",
    tasks={
        "markdown": "Extract the text from the above document as if you were reading it naturally. Return "
        "the tables in html format. Return the equations in LaTeX representation. If there is an image in "
        "the document and image caption is not present, add a small description of the image inside the "
        "<img></img> tag; otherwise, add the image caption inside <img></img>. Watermarks should be wrapped "
        "in brackets. Ex: <watermark>OFFICIAL COPY</watermark>. Page numbers should be wrapped in brackets. "
        "Ex: <page_number>14</page_number> or <page_number>9/22</page_number>. Prefer using \u2610 and "
        "\u2611 for check boxes."
    },
    system="You are a helpful assistant.",
    output="nanonets",
)
"""Nanonets-OCR2 (``nanonets/Nanonets-OCR2-3B``, a Qwen2.5-VL fine-tune; also Nanonets-OCR-s): the page then
its prompt after Qwen2.5-VL's default system turn (Nanonets' image2md cookbook, as allenai/olmocr's
``run_nanonetsocr_2.py`` sends it), greedy. The answer is markdown with
HTML tables, LaTeX, ``<img>``, ``<watermark>``, ``<page_number>`` and check boxes."""

HUNYUAN_OCR = OCRPreset(
    name="hunyuan-ocr",
    pattern=r"hunyuan[-_ ]?ocr",
    tasks={
        "markdown": "Extract all information from the main body of the document image and represent it in "
        "markdown format, ignoring headers and footers. Tables should be expressed in HTML format, formulas "
        "in the document should be represented using LaTeX format, and the parsing should be organized "
        "according to the reading order.",
        "text": "Extract the text in the image.",
        "table": "Parse the table in the image into HTML.",
        "formula": "Identify the formula in the image and represent it using LaTeX format.",
        "chart": "Parse the chart in the image; use Mermaid format for flowcharts and Markdown for other "
        "charts.",
        "spotting": "Detect and recognize text in the image, and output the text coordinates in a "
        "formatted manner.",
    },
    sampling={"temperature": 0.0, "top_k": 1, "repetition_penalty": 1.0},
    system="",
    output="markdown-html",
    task_outputs={"spotting": "hunyuan-spotting"},
    serve_flags="--no-enable-prefix-caching --mm-processor-cache-gb 0",
)
"""HunyuanOCR (``tencent/HunyuanOCR``; vLLM's recipe ``models/tencent/HunyuanOCR.yaml``): an empty system
turn, then the page and the document-parsing prompt of its README (other tasks: the README's application
prompts), greedy with ``top_k=1`` and ``repetition_penalty=1.0``. The answer is markdown with HTML tables
and LaTeX; ``task="spotting"``'s is each line of text with its corners (the ``hunyuan-spotting`` format:
blocks with boxes)."""

QIANFAN_OCR = OCRPreset(
    name="qianfan-ocr",
    pattern=r"qianfan[-_ ]?ocr",
    tasks={"markdown": "Parse this document to Markdown."},
    output="markdown-html",
)
"""Qianfan-OCR (``baidu/Qianfan-OCR``, InternVL with a Qwen3 LM): the page then the prompt of transformers'
``qianfan_ocr`` usage example, greedy. The answer is markdown."""
PADDLEOCR_VL = OCRPreset(
    name="paddleocr-vl",
    pattern=r"paddle[-_ ]?ocr[-_ ]?vl",
    tasks={
        "ocr": "OCR:",
        "table": "Table Recognition:",
        "formula": "Formula Recognition:",
        "chart": "Chart Recognition:",
        "spotting": "Spotting:",
        "seal": "Seal Recognition:",
    },
    # the spotting answer's <|LOC_n|> location tokens are special tokens (PaddleX keeps them for it alone)
    task_fields={"spotting": {"skip_special_tokens": False}},
    output="paddleocr-vl",
    serve_flags="--max-num-batched-tokens 16384 --no-enable-prefix-caching --mm-processor-cache-gb 0",
)
"""PaddleOCR-VL (vLLM's ``recipes/models/PaddlePaddle/PaddleOCR-VL.yaml``, ``-1.5.yaml``): the image then a
task prompt, greedy. ``spotting`` and ``seal`` are PaddleOCR-VL-1.5's tasks. The recipe also passes
``--trust-remote-code`` (the release's own processor code); transformers >= 5 implements the model without
it. The server's processor resizes the image (28-pixel steps, at most 2,822,400 pixels)."""

GLM_OCR = OCRPreset(
    name="glm-ocr",
    pattern=r"glm[-_ ]?ocr",
    tasks={
        "text": "Text Recognition:",
        "table": "Table Recognition:",
        "formula": "Formula Recognition:",
    },
    output="markdown-html",
)
"""GLM-OCR (vLLM's ``recipes/models/zai-org/GLM-OCR.yaml``; the tasks of zai-org/GLM-OCR's
``glmocr/config.yaml``): the image then a task prompt, greedy as the recipe sends it (the authors' ``glmocr``
tool adds ``repetition_penalty`` 1.1: ``extra_body``). The recipe's MTP speculative decoding is a server
option (``--speculative-config.method mtp --speculative-config.num_speculative_tokens 1``)."""

LIGHTON_OCR = OCRPreset(
    name="lighton-ocr",
    pattern=r"lighton[-_ ]?ocr",
    tasks={"markdown": ""},
    content="image",
    sampling={"temperature": 0.2, "top_p": 0.9},
    max_side=1540,
    output="markdown-html",
    serve_flags="--limit-mm-per-prompt '{\"image\": 1}' --no-enable-prefix-caching --mm-processor-cache-gb 0",
)
"""LightOnOCR-2 (lightonai/LightOnOCR-2-1B's model card): the image alone (a prompt makes the model repeat
it), pages rendered at most 1540 px long, temperature 0.2, top_p 0.9; the answer is markdown."""

PRESETS: dict[str, OCRPreset] = {
    "deepseek-ocr": DEEPSEEK_OCR,
    "generic": GENERIC,
    "olmocr": OLMOCR,
    "nanonets-ocr2": NANONETS_OCR2,
    "hunyuan-ocr": HUNYUAN_OCR,
    "qianfan-ocr": QIANFAN_OCR,
    "deepseek-ocr2": DEEPSEEK_OCR2,
    "unlimited-ocr": UNLIMITED_OCR,
    "dots-ocr": DOTS_OCR,
    "dots-ocr-text": DOTS_OCR_TEXT,
    "paddleocr-vl": PADDLEOCR_VL,
    "glm-ocr": GLM_OCR,
    "lighton-ocr": LIGHTON_OCR,
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
