"""PDF pages as images for OCR: rendered with pypdfium2 (optional extra ``image``, imported lazily).

PDFium is not thread-safe, not even across documents: every call into it here holds :data:`PDFIUM_LOCK`,
so pages may be rendered in worker threads (``AsyncClient`` does) and by several calls at once.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from . import defaults, media_files
from .dependencies import require
from .errors import InvalidInputError

PDFIUM_LOCK = threading.RLock()
"""Held around every PDFium call of this module (PDFium crashes when called from two threads at once)."""
_RANGE_RE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d*)\s*)?$")


def parse_pages(spec: str) -> list[int]:
    """1-based page numbers from a spec such as ``"1-5"``, ``"2,4,7-9"`` or ``"3-"`` (to the end: -1).

    ``"N-"`` yields ``[N, -1]``-style open ranges as ``N`` followed by ``-1``; :func:`render_pages`
    expands them once the page count is known.

    Raises:
        InvalidInputError: for a malformed spec.

    Examples:
        >>> parse_pages("1-3,7")
        [1, 2, 3, 7]
    """
    pages: list[int] = []
    for part in spec.split(","):
        match = _RANGE_RE.match(part)
        if not match or int(match[1]) < 1:
            raise InvalidInputError(
                "pages", spec, "is not a page list", "Use 1-based numbers and ranges, e.g. '1-5,8' or '3-'."
            )
        first = int(match[1])
        if match[2] is None:
            pages.append(first)
        elif match[2] == "":
            pages.extend([first, -1])
        else:
            last = int(match[2])
            if last < first:
                raise InvalidInputError(
                    "pages", spec, f"has a reversed range {first}-{last}", "Write it low-high."
                )
            pages.extend(range(first, last + 1))
    return pages


def _expand(pages: Sequence[int] | None, count: int) -> list[int]:
    if pages is None:
        return list(range(1, count + 1))
    out: list[int] = []
    items = list(pages)
    for index, page in enumerate(items):
        if isinstance(page, bool) or not isinstance(page, int):
            raise InvalidInputError("pages", pages, "must hold ints", "Use 1-based page numbers.")
        if page == -1:
            start = items[index - 1] + 1 if index > 0 else 1
            out.extend(range(start, count + 1))
            continue
        if not 1 <= page <= count:
            raise InvalidInputError(
                "pages", page, f"is not a page of this {count}-page PDF", f"Use numbers from 1 to {count}."
            )
        out.append(page)
    return out


def open_pdf(pdf: Any) -> Any:
    """A ``pypdfium2.PdfDocument`` for a path, ``bytes`` or binary file object.

    Raises:
        InvalidInputError: the file cannot be read, names no regular file (a FIFO, a device, a folder) or
            is not a PDF.
        MissingDependency: pypdfium2 is not installed.
    """
    pypdfium2 = require("pypdfium2", "image", "OCR of PDFs")
    source: Any = pdf
    if isinstance(pdf, os.PathLike | str):
        path = Path(os.fspath(pdf))
        media_files.check_regular_file(path, "pdf", max_bytes=None)  # pdfium opens it: never a FIFO
        source = str(path)
    elif isinstance(pdf, bytearray | memoryview):
        source = bytes(pdf)
    elif hasattr(pdf, "read"):
        source = pdf.read()
    try:
        with PDFIUM_LOCK:
            return pypdfium2.PdfDocument(source)
    except pypdfium2.PdfiumError as error:
        raise InvalidInputError(
            "pdf", _name(pdf), f"cannot be opened ({error})", "Pass a valid PDF."
        ) from error


def render_pages(pdf: Any, pages: Sequence[int] | None, dpi: float) -> tuple[int, Iterator[tuple[int, Any]]]:
    """Render PDF pages to PIL images lazily, one at a time (CPU-heavy: advance it in a worker thread).

    Args:
        pdf: a path, ``bytes`` or binary file object.
        pages: 1-based page numbers (``-1`` after a number: to the end), or ``None`` for all.
        dpi: rendering resolution (72 = the PDF's point size).

    Returns:
        ``(number of pages selected, iterator of (page number, RGB PIL image))``; the document is closed
        when the iterator is exhausted.

    Raises:
        InvalidInputError: unreadable PDF, page numbers out of range, or a page over
            ``defaults.PDF_MAX_PAGE_PIXELS`` at ``dpi`` (raised here, before any rendering).
        MissingDependency: pypdfium2 (or pillow) is not installed.
    """
    require("PIL.Image", "image", "OCR of PDFs")  # pages become PIL images
    document = open_pdf(pdf)
    try:
        with PDFIUM_LOCK:
            selected = _expand(pages, len(document))
            check_page_sizes(document, selected, dpi)
    except BaseException:
        _close(document)
        raise

    def iterate() -> Iterator[tuple[int, Any]]:
        try:
            for number in selected:
                yield number, _render(document, number, dpi)
        finally:
            _close(document)

    return len(selected), iterate()


def check_page_sizes(document: Any, numbers: Sequence[int], dpi: float) -> None:
    """Refuse a page whose bitmap at ``dpi`` would be over ``defaults.PDF_MAX_PAGE_PIXELS`` (a PDF page
    may be 200 inches wide: rendering it would exhaust the memory). Call with :data:`PDFIUM_LOCK` held.

    Raises:
        InvalidInputError: naming the page, its size in pixels and the largest dpi that fits.
    """
    limit = defaults.PDF_MAX_PAGE_PIXELS
    scale = dpi / 72.0
    for number in dict.fromkeys(numbers):
        width, height = document.get_page_size(number - 1)
        pixels = (width * scale) * (height * scale)
        if pixels > limit:
            fits = 72.0 * math.sqrt(limit / max(width * height, 1e-9))
            raise InvalidInputError(
                "pdf",
                f"page {number}",
                f"is {width / 72:.0f} x {height / 72:.0f} inches: {width * scale:.0f} x {height * scale:.0f} "
                f"pixels at dpi={dpi:g}, over the {limit:,}-pixel limit",
                f"Pass a lower dpi (at most {math.floor(fits)}) or skip the page with pages=.",
            )


def reopenable(pdf: Any) -> Any:
    """``pdf`` as a source that opens more than once: a binary file object's bytes (read now); a path or
    ``bytes`` as is."""
    return pdf.read() if hasattr(pdf, "read") else pdf


def text_layer(pdf: Any, page: int) -> str:
    """The text a PDF holds for page ``page`` (1-based), as pypdfium2 reads it; ``""`` for a scan.

    The page-quality ladder's fallback for a page that failed every OCR try (olmOCR's is pdftotext).

    Raises:
        InvalidInputError: unreadable PDF, or no such page.
        MissingDependency: pypdfium2 is not installed.

    Examples:
        >>> import io, pypdfium2
        >>> blank = pypdfium2.PdfDocument.new()
        >>> page = blank.new_page(612, 792)
        >>> buffer = io.BytesIO()
        >>> blank.save(buffer)
        >>> text_layer(buffer.getvalue(), 1)  # a page without text, as a scan is
        ''
    """
    document = open_pdf(pdf)
    try:
        with PDFIUM_LOCK:
            _expand([page], len(document))
            opened = document[page - 1]
            try:
                text = opened.get_textpage()
                try:
                    return str(text.get_text_bounded())
                finally:
                    text.close()
            finally:
                opened.close()
    finally:
        _close(document)


def _render(document: Any, number: int, dpi: float) -> Any:
    """Page ``number`` (1-based) as an RGB PIL image that holds no PDFium memory."""
    with PDFIUM_LOCK:
        page = document[number - 1]
        try:
            bitmap = page.render(scale=dpi / 72.0)
            try:
                return bitmap.to_pil().convert("RGB")  # a copy: the bitmap can go
            finally:
                bitmap.close()
        finally:
            page.close()


def _close(document: Any) -> None:
    with PDFIUM_LOCK:
        document.close()


def _name(pdf: Any) -> str:
    return str(pdf) if isinstance(pdf, str | os.PathLike) else type(pdf).__name__
