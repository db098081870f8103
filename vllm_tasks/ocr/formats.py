"""OCR output formats: how a model's answer becomes markdown, blocks with boxes and metadata.

A format is data plus two pure functions: ``parse`` (the answer text and the image sizes to a
:class:`ParsedAnswer`; never raises, whatever the text) and ``check`` (the reason an answer is unusable, or
``None``; the page-quality ladder retries a page whose answer has one). A preset names its format in
``OCRPreset.output``; :data:`FORMATS` holds them by name. Adding a model whose output is new: write its
``parse`` (and ``check``), add it to :data:`FORMATS`, and test it on outputs the model's authors published.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .. import grounding
from ..types.ocr import OCRBlock

Size = tuple[int, int]


class PageSizes(NamedTuple):
    """The sizes of one page's image, ``(width, height)`` in pixels, or ``None`` when not known (a URL
    left to the server).

    Attributes:
        sent: the image as uploaded (after a downscale or a rounding of its sides): the pixels the model
            saw, in which a format that writes pixel boxes writes them.
        original: the caller's image, in whose pixels :attr:`OCRBlock.boxes` are given.
    """

    sent: Size | None
    original: Size | None


@dataclass(frozen=True)
class ParsedAnswer:
    """What a format reads from one answer.

    Attributes:
        markdown: clean markdown of the page.
        blocks: layout blocks; ``boxes`` in pixels of the caller's image, ``boxes_normalized`` in 0-999 of
            its width and height.
        metadata: what else the model reported (olmOCR's rotation, a language, ...), JSON values.
    """

    markdown: str
    blocks: list[OCRBlock] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


def no_problem(text: str) -> str | None:
    """The ``check`` of a format that accepts any answer.

    Examples:
        >>> no_problem("anything") is None
        True
    """
    return None


@dataclass(frozen=True)
class OutputFormat:
    """One model output format.

    Attributes:
        name: its key in :data:`FORMATS` (``OCRPreset.output``).
        parse: ``(answer text, PageSizes) -> ParsedAnswer``; never raises.
        check: ``answer text -> reason`` the answer is unusable (unparseable front matter, broken JSON),
            or ``None``; never raises. A page cut by ``max_tokens`` is caught by ``finish_reason``, not here.

    Examples:
        >>> FORMATS["markdown"].parse("# Title", PageSizes(None, None)).markdown
        '# Title'
    """

    name: str
    parse: Callable[[str, PageSizes], ParsedAnswer]
    check: Callable[[str], str | None] = no_problem


def normalized(box: grounding.Box, size: Size) -> grounding.Box:
    """A pixel box of an image of ``size`` in 0-999 of its width and height (as DeepSeek-OCR writes them).

    Examples:
        >>> normalized((0, 0, 50, 100), (100, 200))
        (0, 0, 500, 500)
    """
    width, height = max(size[0], 1), max(size[1], 1)
    x1, y1, x2, y2 = box
    top = grounding.COORD_MAX
    return (
        round(x1 / width * top),
        round(y1 / height * top),
        round(x2 / width * top),
        round(y2 / height * top),
    )


def block_from_pixels(
    label: str | None, text: str, boxes: list[grounding.Box], sizes: PageSizes, *, complete: bool = True
) -> OCRBlock:
    """An :class:`OCRBlock` from boxes in pixels of the SENT image (what layout models such as dots.ocr
    write): rescaled to the caller's image, and normalised to 0-999. Without a sent size the boxes are
    kept as written.

    Examples:
        >>> block_from_pixels("text", "Hi", [(0, 0, 50, 100)], PageSizes((100, 200), (200, 400))).boxes
        [(0, 0, 100, 200)]
    """
    if sizes.sent is None:
        return OCRBlock(label=label, text=text, boxes=boxes, boxes_normalized=boxes, complete=complete)
    norm = [normalized(box, sizes.sent) for box in boxes]
    target = sizes.original or sizes.sent
    pixels = [grounding.to_pixels(box, target) for box in norm]
    return OCRBlock(label=label, text=text, boxes=pixels, boxes_normalized=norm, complete=complete)


def parse_deepseek_grounding(text: str, sizes: PageSizes) -> ParsedAnswer:
    """DeepSeek-OCR's grounding tags (``<|ref|>label<|/ref|><|det|>[[x1, y1, x2, y2]]<|/det|>`` then the
    content; boxes in 0-999 of the image), see :mod:`vllm_tasks.grounding`.

    Examples:
        >>> answer = "<|ref|>title<|/ref|><|det|>[[0, 0, 999, 499]]<|/det|>\\n# Report"
        >>> parsed = parse_deepseek_grounding(answer, PageSizes((100, 100), (200, 100)))
        >>> parsed.markdown, parsed.blocks[0].boxes
        ('# Report', [(0, 0, 200, 50)])
    """
    blocks = grounding.parse_grounding(text)
    size = sizes.original
    return ParsedAnswer(
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
    )


def parse_markdown(text: str, sizes: PageSizes) -> ParsedAnswer:
    """Plain markdown (any vision-chat model): the answer is the page, no blocks, no metadata.

    Examples:
        >>> parse_markdown("  # A\\n\\ntext\\n", PageSizes(None, None)).markdown
        '# A\\n\\ntext'
    """
    return ParsedAnswer(markdown=text.strip() if isinstance(text, str) else "")


FORMATS: dict[str, OutputFormat] = {
    "deepseek-grounding": OutputFormat("deepseek-grounding", parse_deepseek_grounding),
    "markdown": OutputFormat("markdown", parse_markdown),
}
"""Every output format by name (one entry per format; presets name theirs in ``OCRPreset.output``)."""
