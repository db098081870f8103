"""Results of document OCR (an OCR model over ``/v1/chat/completions``, read by its preset's format)."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from .. import defaults
from ..views import Shown, card, clip, count, esc, note, pre, table
from .common import Usage

PixelBox = tuple[int, int, int, int]

COLORS = ("#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#9a6324")
"""Box colours, one per label in order of appearance (``OCRResult.draw`` and the notebook view share them)."""


class OCRBlock(BaseModel):
    """One grounded block of an OCR result.

    Attributes:
        label: the layout label (``title``, ``text``, ``table``, ``image``, ...), the recognised text for
            ``ocr``/``locate`` output, or ``None`` for text outside any grounding tag.
        text: the block's content (markdown, HTML table, LaTeX), tags removed.
        boxes: ``[x1, y1, x2, y2]`` boxes in pixels of the original image.
        boxes_normalized: the same boxes as the model wrote them, 0-999 of width and height.
        complete: False for the last block of output cut inside its tags (``max_tokens`` reached).
    """

    model_config = ConfigDict(frozen=True)

    label: str | None
    text: str
    boxes: list[PixelBox]
    boxes_normalized: list[PixelBox]
    complete: bool = True


class OCRResult(BaseModel):
    """What :meth:`Client.ocr` returns for one image.

    Attributes:
        text: the raw model output, grounding tags kept.
        markdown: clean markdown: tags removed, figure blocks left out, one blank line between blocks.
        blocks: the grounded blocks, boxes in pixels of the original image.
        usage: token counts (``prompt_tokens`` includes the image tokens).
        finish_reason: ``"stop"``, or ``"length"`` when ``max_tokens`` cut the page short.
        truncated: True when ``finish_reason == "length"``: the page is incomplete (the common silent
            failure of OCR pipelines; raise ``max_tokens``).
        model: the model that answered.
        prompt: the text prompt sent with the image.
        image_size: ``(width, height)`` of the original image; ``sent_size`` is what was uploaded (it
            differs after a downscale). Both are ``None`` for a URL left to the server
            (``fetch_urls=False``); ``boxes`` are then normalised like ``boxes_normalized``.
        preset: the name of the model preset the request was built with (``"deepseek-ocr"``).
        metadata: what the model reported besides the page (e.g. a rotation), by its output format.
        token_ids: the generated token ids, when the server returned them
            (``extra_body={"return_token_ids": True}``); else ``None``.
        prompt_token_ids: the prompt's token ids (image tokens included), likewise.
    """

    model_config = ConfigDict(frozen=True)

    text: str
    markdown: str
    blocks: list[OCRBlock]
    usage: Usage
    finish_reason: str | None
    truncated: bool
    model: str
    prompt: str
    image_size: tuple[int, int] | None
    sent_size: tuple[int, int] | None
    preset: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    token_ids: list[int] | None = None
    prompt_token_ids: list[int] | None = None
    _image: Any = PrivateAttr(default=None)

    def _boxes_for(self, block: OCRBlock, size: tuple[int, int]) -> list[PixelBox]:
        if self.image_size is None:  # URL sent as is: only the normalised boxes are known
            from ..grounding import to_pixels

            return [to_pixels(box, size) for box in block.boxes_normalized]
        return _fit(block.boxes, size, self.image_size)

    def _original(self, image: Any) -> Any:
        if image is not None:
            return _as_pil(image)
        if self._image is None:
            raise ValueError("this result keeps no image; pass the image to draw() or crop()")
        return self._image.open_original()

    def draw(self, image: Any = None, *, labels: Sequence[str] | None = None, line_width: int = 3) -> Any:
        """The image with each block's boxes and labels drawn on it (a new PIL image, RGB).

        Args:
            image: the image that was OCR'd; default: the one this result was made from.
            labels: draw only blocks with these labels (default: all blocks with boxes).
            line_width: box outline width in pixels.

        Raises:
            MissingDependency: pillow is not installed.

        Examples:
            >>> result.draw().save("page-boxes.png")
        """
        from ..dependencies import require

        ImageDraw = require("PIL.ImageDraw", "image", "drawing OCR boxes")  # noqa: N806
        ImageFont = require("PIL.ImageFont", "image", "drawing OCR boxes")  # noqa: N806
        canvas = self._original(image).convert("RGB")
        draw = ImageDraw.Draw(canvas)
        try:  # a caption size that stays readable on large pages (pillow >= 10.1)
            font: Any = ImageFont.load_default(max(12, min(canvas.size) // 60))
        except TypeError:  # pragma: no cover - older pillow
            font = ImageFont.load_default()
        color_of: dict[str, str] = {}
        for block in self.blocks:
            name = block.label or ""
            if not block.boxes or (labels is not None and name not in labels):
                continue
            color = color_of.setdefault(name, COLORS[len(color_of) % len(COLORS)])
            caption = name if len(name) <= 40 else name[:37] + "..."
            for x1, y1, x2, y2 in self._boxes_for(block, canvas.size):
                draw.rectangle((x1, y1, x2, y2), outline=color, width=line_width)
                text_box = draw.textbbox((x1, y1), caption, font=font)
                top = max(0, y1 - (text_box[3] - text_box[1]) - 4)
                draw.rectangle((x1, top, x1 + text_box[2] - text_box[0] + 4, y1), fill=color)
                draw.text((x1 + 2, top + 1), caption, fill="white", font=font)
        return canvas

    def to_html(
        self,
        *,
        max_rows: int = defaults.VIEW_MAX_ROWS,
        max_chars: int = defaults.VIEW_MAX_TEXT_CHARS,
        max_media_bytes: int = defaults.VIEW_MAX_MEDIA_BYTES,
    ) -> str:
        """An HTML view for notebooks: the page image with its grounding boxes (inline SVG, a tooltip per
        box) beside the markdown, when this result keeps its image; otherwise the markdown. Then the block
        list (label, boxes, text).

        The image embedded is the one uploaded (a copy at most 1600 px long when it is over
        ``max_media_bytes``); markdown and block texts are escaped and cut.

        Examples:
            >>> IPython.display.HTML(result.to_html(max_rows=200))
        """
        return ocr_html(
            self, self._image, max_rows=max_rows, max_chars=max_chars, max_media_bytes=max_media_bytes
        )

    def _repr_html_(self) -> str:
        return self.to_html()

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        markdown = self.markdown.strip()
        shown = repr(clip(markdown, 60)) + (f" ({len(markdown):,} chars)" if len(markdown) > 60 else "")
        yield "markdown", Shown(shown)
        yield "blocks", Shown(f"<{count(len(self.blocks), 'block')}>")
        yield "model", self.model
        yield "image_size", self.image_size
        yield "finish_reason", self.finish_reason
        yield "truncated", self.truncated
        yield "usage", self.usage

    def crop(self, label: str | None = "image", image: Any = None) -> list[Any]:
        """The regions of blocks labelled ``label`` (default: figures) as PIL images, in output order.

        Args:
            label: the block label to crop; ``None`` crops every block with a box.
            image: the image that was OCR'd; default: the one this result was made from.

        Raises:
            MissingDependency: pillow is not installed.

        Examples:
            >>> for i, figure in enumerate(result.crop()):
            ...     figure.save(f"figure-{i}.png")
        """
        source = self._original(image)
        crops = []
        for block in self.blocks:
            if label is not None and block.label != label:
                continue
            for x1, y1, x2, y2 in self._boxes_for(block, source.size):
                if x2 > x1 and y2 > y1:
                    crops.append(source.crop((x1, y1, x2, y2)))
        return crops


class OCRPage(BaseModel):
    """One page of :meth:`Client.ocr_pdf`: its 1-based number, its :class:`OCRResult`, and how the
    page-quality ladder got it (:class:`~vllm_tasks.ocr.PageQuality`).

    Attributes:
        page: the 1-based page number.
        result: the answer kept; for a failed page, its fallback: the PDF's own text for the page (or
            ``""``) as ``text`` and ``markdown``, no blocks.
        tries: requests sent for the page (1: the first answer was kept).
        rotation: degrees the page was rotated (counter-clockwise) for the answer kept, where the model
            said it was not upright; its boxes are in pixels of the rotated page.
        failure: why the page failed every try (``"truncated"``, ``"unfinished"``, ``"invalid"``,
            ``"context_length"``: see :data:`vllm_tasks.ocr.ladder.Problem`), or ``None``.
        fallback: the failed page's markdown is the PDF's text layer.
        tries_usage: the tokens of every try of the page (``None``: one try, the result's ``usage``).
    """

    model_config = ConfigDict(frozen=True)

    page: int
    result: OCRResult
    tries: int = 1
    rotation: int = 0
    failure: str | None = None
    fallback: bool = False
    tries_usage: Usage | None = None


class OCRDocument(BaseModel):
    """What :meth:`Client.ocr_pdf` returns: per-page results in page order and the joined document.

    Attributes:
        pages: the OCR'd pages in page order.
        markdown: every page's markdown, pages separated by a blank line, ``---`` and a blank line.
        usage: token counts summed over the pages (every try of each page).
        truncated_pages: 1-based numbers of pages cut short by ``max_tokens`` (with ``quality=None``; the
            ladder tries such a page again, and lists it in ``failed_pages`` if every try is).
        failed_pages: 1-based numbers of pages that failed every try of the page-quality ladder.
    """

    model_config = ConfigDict(frozen=True)

    pages: list[OCRPage]
    markdown: str
    usage: Usage
    truncated_pages: list[int]
    failed_pages: list[int] = []


def _fit(boxes: Sequence[PixelBox], size: tuple[int, int], original: tuple[int, int]) -> list[PixelBox]:
    """Boxes in pixels of ``original`` rescaled to an image of ``size`` (a caller's resized copy)."""
    if size == original or original[0] <= 0 or original[1] <= 0:
        return list(boxes)
    sx, sy = size[0] / original[0], size[1] / original[1]
    return [(round(x1 * sx), round(y1 * sy), round(x2 * sx), round(y2 * sy)) for x1, y1, x2, y2 in boxes]


def _as_pil(image: Any) -> Any:
    from ..images import prepare_image

    if type(image).__module__.startswith("PIL."):
        return image
    return prepare_image(image, max_side=None).open_original()


# --------------------------------------------------------------------------------------------------
# Notebook view
# --------------------------------------------------------------------------------------------------


def image_data_url(prepared: Any, max_bytes: int = defaults.VIEW_MAX_MEDIA_BYTES) -> str | None:
    """The data URL of an OCR'd page for display: the uploaded bytes when small enough, else a copy at most
    ``VIEW_IMAGE_MAX_SIDE`` pixels long as JPEG; ``None`` when no image is at hand or it cannot be shrunk.
    """
    data_url = getattr(prepared, "data_url", None)
    data = getattr(prepared, "data", None)
    if not isinstance(data_url, str) or not isinstance(data, bytes):
        return None
    if len(data) <= max_bytes and data_url.startswith("data:image/"):
        return data_url
    try:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as image:
            image.thumbnail((defaults.VIEW_IMAGE_MAX_SIDE, defaults.VIEW_IMAGE_MAX_SIDE))
            buffer = io.BytesIO()
            image.convert("RGB").save(buffer, format="JPEG", quality=85)
    except Exception:
        return None
    if buffer.tell() > max_bytes:
        return None
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def label_colors(labels: Iterable[str | None]) -> dict[str, str]:
    """A colour per label, in order of first appearance."""
    colors: dict[str, str] = {}
    for label in labels:
        colors.setdefault(label or "", COLORS[len(colors) % len(COLORS)])
    return colors


def page_svg(result: OCRResult, data_url: str, colors: Mapping[str, str]) -> str:
    """The page image with every block's boxes drawn over it, as inline SVG (boxes in image pixels)."""
    width, height = result.image_size or result.sent_size or (999, 999)
    stroke = max(2.0, max(width, height) / 400)
    rects = []
    for block in result.blocks:
        color = colors.get(block.label or "", COLORS[0])
        tip = esc(f"{block.label or 'text'}: {clip(block.text, 160)}")
        for x1, y1, x2, y2 in block.boxes if result.image_size else []:
            rects.append(
                f'<rect x="{x1}" y="{y1}" width="{max(0, x2 - x1)}" height="{max(0, y2 - y1)}" '
                f'fill="{color}" fill-opacity="0.08" stroke="{color}" stroke-width="{stroke:.1f}">'
                f"<title>{tip}</title></rect>"
            )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        'style="width:100%;height:auto;max-height:800px;border:1px solid rgba(128,128,128,.35)">'
        f'<image href="{esc(data_url)}" x="0" y="0" width="{width}" height="{height}" '
        f'preserveAspectRatio="none"/>{"".join(rects)}</svg>'
    )


def _legend(colors: Mapping[str, str]) -> str:
    swatches = (
        f'<span style="display:inline-block;margin-right:10px"><span style="display:inline-block;width:10px;'
        f'height:10px;background:{color};margin-right:4px"></span>{esc(label or "text")}</span>'
        for label, color in list(colors.items())[:40]
    )
    return f"<div>{''.join(swatches)}</div>"


def ocr_html(
    result: OCRResult,
    prepared: Any = None,
    *,
    max_rows: int = defaults.VIEW_MAX_ROWS,
    max_chars: int = defaults.VIEW_MAX_TEXT_CHARS,
    max_media_bytes: int = defaults.VIEW_MAX_MEDIA_BYTES,
) -> str:
    """The view of an :class:`~vllm_tasks.OCRResult`: the page with its boxes beside the markdown when the
    image is at hand (``prepared``), else the markdown; then the block list."""
    facts: list[tuple[str, object]] = [
        ("model", result.model),
        ("image", "×".join(map(str, result.image_size)) if result.image_size else None),
        ("finish", result.finish_reason),
        ("prompt tokens", f"{result.usage.prompt_tokens:,}"),
        ("completion tokens", f"{result.usage.completion_tokens or 0:,}"),
    ]
    colors = label_colors(block.label for block in result.blocks if block.boxes)
    data_url = image_data_url(prepared, max_media_bytes) if prepared is not None else None
    markdown = pre(result.markdown, max_chars)
    body = []
    if result.truncated:
        body.append('<div style="color:#c62828">cut short by max_tokens: the page is incomplete</div>')
    if data_url is not None:
        side = "flex:1 1 340px;min-width:0"
        body.append(
            '<div style="display:flex;gap:12px;flex-wrap:wrap;align-items:flex-start">'
            f'<div style="{side}">{page_svg(result, data_url, colors)}{_legend(colors)}</div>'
            f'<div style="{side}">{markdown}</div></div>'
        )
    else:
        if prepared is not None:
            body.append(note("page image too large to embed"))
        body.append(markdown)
    body.append(_blocks_table(result, max_rows))
    title = f"OCRResult — {count(len(result.blocks), 'block')}"
    return card(title, facts, *body)


def _blocks_table(result: OCRResult, max_rows: int) -> str:
    rows = []
    for i, block in enumerate(result.blocks[: max(0, max_rows)]):
        boxes = block.boxes[:2]
        box_text = "; ".join(f"[{x1}, {y1}, {x2}, {y2}]" for x1, y1, x2, y2 in boxes)
        if len(block.boxes) > 2:
            box_text += f" +{len(block.boxes) - 2}"
        label = esc(block.label or "") + ("" if block.complete else " (cut)")
        rows.append(
            [str(i), label, esc(box_text), esc(clip(block.text.strip(), defaults.VIEW_MAX_CELL_CHARS))]
        )
    columns = [("#", True), ("label", False), ("boxes (px)", False), ("text", False)]
    return table(columns, rows, total=len(result.blocks), noun="block")
