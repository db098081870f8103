"""Parse DeepSeek-OCR's grounding output into blocks with boxes. Pure functions: no I/O, never raise.

With a ``<|grounding|>`` prompt DeepSeek-OCR writes each layout block as::

    <|ref|>LABEL<|/ref|><|det|>[[x1, y1, x2, y2], [x1, y1, x2, y2]]<|/det|>
    content (markdown, an HTML <table>, LaTeX) up to the next <|ref|>

Coordinates are normalised to 0-999 of the image's width and height; a ``det`` may hold several boxes.
Layout labels include ``title``, ``sub_title``, ``text``, ``table``, ``table_caption``, ``image``,
``image_caption`` and ``equation``. With ``<|grounding|>OCR this image.`` (and ``locate``) the ``ref``
holds the recognised text itself and no content follows; such a block's ``text`` is its label.

Output cut at ``max_tokens`` ends anywhere, even inside a tag: the parser keeps every complete box, marks
the last block incomplete, and never raises, whatever the input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

REF_OPEN = "<|ref|>"
REF_CLOSE = "<|/ref|>"
DET_OPEN = "<|det|>"
DET_CLOSE = "<|/det|>"
COORD_MAX = 999
"""Coordinates run from 0 to 999 of the image's width and height."""

LAYOUT_LABELS = frozenset(
    {
        "title",
        "sub_title",
        "text",
        "table",
        "table_caption",
        "table_footnote",
        "image",
        "image_caption",
        "figure",
        "figure_caption",
        "figure_title",
        "equation",
        "formula",
        "list",
        "header",
        "footer",
        "page_header",
        "page_footer",
        "page_number",
        "footnote",
        "reference",
        "code",
        "abstract",
        "author",
        "caption",
        "chart",
    }
)
"""Labels DeepSeek-OCR uses for layout blocks (a ``ref`` holding anything else is recognised text)."""

Box = tuple[int, int, int, int]

_NUMBER = r"\s*(-?\d+(?:\.\d+)?)\s*"
_BOX_RE = re.compile(r"\[" + ",".join([_NUMBER] * 4) + r"\]")
_TAG_RE = re.compile(
    re.escape(DET_OPEN) + r".*?(?:" + re.escape(DET_CLOSE) + r"|$)"
    r"|" + re.escape(REF_OPEN) + r"|" + re.escape(REF_CLOSE) + r"|<\|grounding\|>"
    r"|<｜end▁of▁sentence｜>",  # DeepSeek EOS (full-width bars)
    re.DOTALL,
)


@dataclass(frozen=True)
class GroundedBlock:
    """One block of grounding output.

    Attributes:
        label: the ``ref`` text (a layout label such as ``title``, or recognised text); ``None`` for
            text outside any ``ref``.
        boxes: the ``det`` boxes, normalised to 0-999 (clamped, with x1 <= x2 and y1 <= y2).
        content: the text after the ``det``, up to the next ``ref`` (tags removed, whitespace kept).
        complete: False when the output ends inside this block's ``ref`` or ``det`` tag.
    """

    label: str | None
    boxes: tuple[Box, ...]
    content: str
    complete: bool = True

    @property
    def is_layout(self) -> bool:
        """Whether ``label`` is a layout label (else the ``ref`` holds recognised text)."""
        return self.label is not None and self.label.strip() in LAYOUT_LABELS

    @property
    def text(self) -> str:
        """The block's text: its content, or the ``ref`` text for recognised-text blocks.

        Empty for a block cut inside its tags (its ``ref`` text may be a partial label).
        """
        if not self.complete:
            return self.content.strip()
        if self.label is not None and not self.is_layout and not self.content.strip():
            return self.label.strip()
        return self.content.strip()


def parse_grounding(text: str) -> list[GroundedBlock]:
    """Split DeepSeek-OCR output into blocks; never raises.

    Args:
        text: the raw model output, special tokens kept (``skip_special_tokens: false``).

    Returns:
        The blocks in output order. Text before the first ``ref`` (or all of it, for output without
        grounding) is a block with ``label=None`` and no boxes, when it is not blank.

    Examples:
        >>> parse_grounding("<|ref|>title<|/ref|><|det|>[[10, 20, 500, 60]]<|/det|>\\n# Report\\n")
        [GroundedBlock(label='title', boxes=((10, 20, 500, 60),), content='\\n# Report\\n', complete=True)]
    """
    if not isinstance(text, str):
        return []
    pieces = text.split(REF_OPEN)
    blocks: list[GroundedBlock] = []
    head = strip_tags(pieces[0])
    if head.strip():
        blocks.append(GroundedBlock(None, (), head))
    for piece in pieces[1:]:
        blocks.append(_parse_ref(piece))
    return blocks


def _parse_ref(piece: str) -> GroundedBlock:
    """``piece`` is what follows one ``<|ref|>``, up to the next one."""
    label, closed, rest = piece.partition(REF_CLOSE)
    if not closed:
        return GroundedBlock(strip_tags(label), (), "", complete=False)
    label = strip_tags(label)
    stripped = rest.lstrip(" \t")
    if not stripped.startswith(DET_OPEN):
        return GroundedBlock(label, (), strip_tags(rest))
    body, closed, content = stripped[len(DET_OPEN) :].partition(DET_CLOSE)
    boxes = parse_boxes(body)
    if not closed:
        return GroundedBlock(label, boxes, "", complete=False)
    return GroundedBlock(label, boxes, strip_tags(content))


def parse_boxes(body: str) -> tuple[Box, ...]:
    """The complete ``[x1, y1, x2, y2]`` boxes in a ``det`` body (``[[...], [...]]`` or ``[...]``).

    Values are rounded, clamped to 0-999 and ordered so that x1 <= x2 and y1 <= y2; an incomplete
    trailing box (output cut mid-box) is dropped.
    """
    boxes: list[Box] = []
    for match in _BOX_RE.finditer(body):
        try:
            x1, y1, x2, y2 = (min(COORD_MAX, max(0, round(float(value)))) for value in match.groups())
        except (ValueError, OverflowError):
            continue
        boxes.append((min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)))
    return tuple(boxes)


def strip_tags(text: str) -> str:
    """Remove grounding tags (``ref``/``det`` and their coordinates), ``<|grounding|>`` and the EOS token."""
    return _TAG_RE.sub("", text)


def to_markdown(blocks: Iterable[GroundedBlock], *, skip_labels: Sequence[str] = ("image",)) -> str:
    """Clean markdown from parsed blocks: tags removed, one blank line between blocks.

    Consecutive recognised-text blocks (``OCR this image.`` output, one per line) are joined with a
    single newline. Blocks whose label is in ``skip_labels`` (figures: they have no text) are left out.

    Examples:
        >>> to_markdown(parse_grounding("<|ref|>title<|/ref|><|det|>[[0,0,9,9]]<|/det|>\\n# A\\n"))
        '# A'
    """
    out: list[str] = []
    previous_line = False
    for block in blocks:
        if block.label is not None and block.label.strip() in skip_labels:
            continue
        text = block.text.strip("\n")
        if not text.strip():
            continue
        is_line = block.label is not None and not block.is_layout and not block.content.strip()
        if out:
            out.append("\n" if is_line and previous_line else "\n\n")
        out.append(text)
        previous_line = is_line
    return "".join(out)


def to_pixels(box: Box, size: tuple[int, int]) -> Box:
    """A normalised 0-999 box in pixels of an image of ``size`` ``(width, height)``."""
    width, height = size
    x1, y1, x2, y2 = box
    return (
        round(x1 / COORD_MAX * width),
        round(y1 / COORD_MAX * height),
        round(x2 / COORD_MAX * width),
        round(y2 / COORD_MAX * height),
    )
