"""OCR output formats: how a model's answer becomes markdown, blocks with boxes and metadata.

A format is data plus two pure functions: ``parse`` (the answer text and the image sizes to a
:class:`ParsedAnswer`; never raises, whatever the text) and ``check`` (the reason an answer is unusable, or
``None``; the page-quality ladder retries a page whose answer has one). A preset names its format in
``OCRPreset.output``; :data:`FORMATS` holds them by name. Adding a model whose output is new: write its
``parse`` (and ``check``), add it to :data:`FORMATS`, and test it on outputs the model's authors published.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from .. import grounding
from ..types.ocr import OCRBlock
from . import layouts

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


BoxSpace = Literal["none", "sent", "smart-resized", "grid-1000"]
"""Where a layout parser's boxes live: none written; pixels of the sent image; pixels of the image a
Qwen2-VL-style processor makes of it (dots.ocr: :func:`~vllm_tasks.ocr.layouts.smart_resize`); 0-1000 of
the image's width and height (PaddleOCR-VL and HunyuanOCR spotting)."""


def layout_block(block: layouts.LayoutBlock, space: BoxSpace, sizes: PageSizes) -> OCRBlock:
    """An :class:`OCRBlock` of a layout parser's block: its box in pixels of the caller's image and in
    0-999 (without the sizes needed, as written).

    Examples:
        >>> block = layouts.LayoutBlock("Text", "Hi", (28.0, 56.0, 280.0, 560.0))
        >>> layout_block(block, "smart-resized", PageSizes((700, 1008), (1400, 2016))).boxes
        [(56, 112, 560, 1120)]
        >>> layout_block(layouts.LayoutBlock("text", "Hi", (0, 500, 1000, 1000)), "grid-1000",
        ...     PageSizes((100, 100), (200, 400))).boxes
        [(0, 200, 200, 400)]
    """
    if block.box is None or space == "none":
        return OCRBlock(
            label=block.label, text=block.text, boxes=[], boxes_normalized=[], complete=block.complete
        )
    if space == "grid-1000":
        top = layouts.GRID_MAX
        grid = layouts.whole_box(block.box)
        x1, y1, x2, y2 = (round(min(top, max(0, v)) * grounding.COORD_MAX / top) for v in grid)
        norm = (x1, y1, x2, y2)
        size = sizes.original
        pixels = layouts.scale_box(grid, (top, top), size) if size else norm
        return OCRBlock(
            label=block.label,
            text=block.text,
            boxes=[pixels],
            boxes_normalized=[norm],
            complete=block.complete,
        )
    seen = sizes.sent
    if space == "smart-resized" and sizes.sent is not None:
        resized = layouts.smart_resize(sizes.sent[1], sizes.sent[0])
        seen = (resized[1], resized[0]) if resized else None
    if seen is None or sizes.sent is None:
        box = layouts.whole_box(block.box)
        return OCRBlock(
            label=block.label, text=block.text, boxes=[box], boxes_normalized=[box], complete=block.complete
        )
    target = sizes.original or sizes.sent
    pixels = layouts.scale_box(block.box, seen, target)
    return OCRBlock(
        label=block.label,
        text=block.text,
        boxes=[pixels],
        boxes_normalized=[normalized(pixels, target)],
        complete=block.complete,
    )


def grid_polygon(points: Sequence[layouts.Point], sizes: PageSizes) -> list[list[int]]:
    """Corner points on the 0-1000 grid (PaddleOCR-VL's spotting quadrilaterals) in pixels of the caller's
    image, ``[[x, y], ...]``; on the grid when its size is not known.

    Examples:
        >>> grid_polygon([(0.0, 500.0), (1000.0, 250.0)], PageSizes((10, 10), (200, 400)))
        [[0, 200], [200, 100]]
    """
    width, height = sizes.original or (layouts.GRID_MAX, layouts.GRID_MAX)
    return [[round(x / layouts.GRID_MAX * width), round(y / layouts.GRID_MAX * height)] for x, y in points]


def layout_format(name: str, read: Callable[[str], layouts.ParsedLayout], space: BoxSpace) -> OutputFormat:
    """The format of a parser in :mod:`vllm_tasks.ocr.layouts`: its markdown, its blocks (boxes from
    ``space``), its metadata; ``check`` is the parser's ``problem``.

    Examples:
        >>> FORMATS["olmocr"].check("Hello")
        "no front matter: the answer does not start with '---'"
    """

    def parse(text: str, sizes: PageSizes) -> ParsedAnswer:
        layout = read(text)
        blocks = [layout_block(block, space, sizes) for block in layout.blocks]
        metadata = dict(layout.metadata)
        polygons = [grid_polygon(block.polygon, sizes) for block in layout.blocks if block.polygon]
        if polygons and space == "grid-1000":
            metadata["polygons"] = polygons
        return ParsedAnswer(markdown=layout.markdown, blocks=blocks, metadata=metadata)

    def check(text: str) -> str | None:
        return read(text).problem

    return OutputFormat(name, parse, check)


FORMATS: dict[str, OutputFormat] = {
    "deepseek-grounding": OutputFormat("deepseek-grounding", parse_deepseek_grounding),
    "markdown": OutputFormat("markdown", parse_markdown),
    "olmocr": layout_format("olmocr", layouts.parse_olmocr, "sent"),
    "dots-ocr-layout": layout_format("dots-ocr-layout", layouts.parse_dots_layout, "smart-resized"),
    "dots-ocr-text": layout_format("dots-ocr-text", layouts.parse_dots_text, "none"),
    "paddleocr-vl": layout_format("paddleocr-vl", layouts.parse_paddleocr_vl, "grid-1000"),
    "nanonets": layout_format("nanonets", layouts.parse_nanonets, "none"),
    "markdown-html": layout_format("markdown-html", layouts.parse_markdown_html, "none"),
    "hunyuan-spotting": layout_format("hunyuan-spotting", layouts.parse_hunyuan_spotting, "grid-1000"),
}
"""Every output format by name (one entry per format; presets name theirs in ``OCRPreset.output``)."""
