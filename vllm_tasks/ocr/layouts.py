"""The output formats of OCR models other than DeepSeek-OCR, as pure parsers that never raise.

Each ``parse_*`` function reads one model's answer text the way that model's authors read it and returns a
:class:`ParsedLayout`: clean markdown, layout blocks (label, text, and a box or polygon in the coordinates the
model wrote), the model's own metadata, and ``problem``: ``None`` for a valid answer, else the reason it is
not (a page-quality ladder retries such pages). Whatever the text, a parser returns; a malformed answer is
"invalid with a reason", never an exception.

- :func:`parse_olmocr`: olmOCR-2's YAML front matter (``primary_language``, ``is_rotation_valid``,
  ``rotation_correction``, ``is_table``, ``is_diagram``) over markdown, checked as olmOCR's
  ``FrontMatterParser`` + ``PageResponse`` check it (allenai/olmocr ``olmocr/train/front_matter.py``).
- :func:`parse_dots_layout`: dots.ocr's JSON list of ``{"bbox", "category", "text"}`` (boxes in pixels of the
  image the model saw); answers that are cut off or hold unescaped LaTeX backslashes are read as far as
  they are whole, as dots.ocr's ``OutputCleaner`` does.
- :func:`parse_paddleocr_vl`: PaddleOCR-VL per task, as PaddleX's ``paddleocr_vl`` pipeline post-processes
  it: OTSL tables to HTML, ``\\(``/``\\[`` math to ``$``/``$$``, spotting's ``<|LOC_n|>`` quads (0-1000).
- :func:`parse_nanonets`: Nanonets-OCR2 markdown with ``<img>``, ``<page_number>``, ``<watermark>``,
  ``<signature>`` and checkboxes (☐ ☑ ☒).
- :func:`parse_markdown_html`: markdown with HTML tables and LaTeX (HunyuanOCR, LightOnOCR, GLM-OCR,
  Qianfan-OCR; Qianfan's ``<think>`` layout section goes to the metadata).
"""

from __future__ import annotations

import html
import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

Point = tuple[float, float]
Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class LayoutBlock:
    """One block of a parsed answer.

    Attributes:
        label: what the block is (``table``, ``formula``, ``image``, a dots.ocr category, ...).
        text: its content: markdown, an HTML ``<table>``, LaTeX without delimiters, a description.
        box: ``(x1, y1, x2, y2)`` as the model wrote it (see each parser for the coordinate system).
        polygon: the corner points as the model wrote them, where it writes a quadrilateral.
        complete: False when the answer was cut inside this block.
    """

    label: str | None
    text: str
    box: Box | None = None
    polygon: tuple[Point, ...] | None = None
    complete: bool = True


@dataclass(frozen=True)
class ParsedLayout:
    """What one answer says, read by one model's rules.

    Attributes:
        markdown: the page as clean markdown.
        blocks: the layout blocks in answer order.
        metadata: the model's own fields (olmOCR's rotation, Nanonets' page number, ...).
        problem: ``None`` for a valid answer, else why it is not.
    """

    markdown: str
    blocks: tuple[LayoutBlock, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    problem: str | None = None

    @property
    def valid(self) -> bool:
        """True when the answer follows its model's format (``problem is None``)."""
        return self.problem is None


GRID_MAX = 1000
"""PaddleOCR-VL's and HunyuanOCR's spotting coordinates run from 0 to 1000 of the image's width and height."""


# --- HTML tables and LaTeX blocks (shared by every markdown format) ------------------------------------

_TABLE_OPEN_RE = re.compile(r"<table\b", re.IGNORECASE)
_TABLE_CLOSE_RE = re.compile(r"</table\s*>", re.IGNORECASE)
_MATH_OPEN_RE = re.compile(r"\$\$|\\\[")
_MATH_CLOSERS = {"$$": "$$", "\\[": "\\]"}
Span = tuple[int, int, int, int]
"""An element's ``(start, content start, content end, end)`` in a text."""


def _elements(text: str, opener: re.Pattern[str], closer: re.Pattern[str]) -> list[Span]:
    """Each complete element: the first ``opener`` then the nearest ``closer`` after it, as a lazy
    ``opener(.*?)closer`` regex finds them, in one pass (the regex is quadratic on a long answer that
    repeats an opener it never closes, as a looping model's does)."""
    spans: list[Span] = []
    at = 0
    while (start := opener.search(text, at)) is not None:
        end = closer.search(text, start.end())
        if end is None:
            break
        spans.append((start.start(), start.end(), end.start(), end.end()))
        at = end.end()
    return spans


def _tag(name: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    return re.compile(re.escape(f"<{name}>")), re.compile(re.escape(f"</{name}>"))


def _without(text: str, spans: Sequence[Span]) -> str:
    kept, at = [], 0
    for start, _, _, end in spans:
        kept.append(text[at:start])
        at = end
    return "".join(kept) + text[at:]


def html_tables(text: str) -> list[str]:
    """The complete ``<table>...</table>`` elements in ``text``, in order.

    Examples:
        >>> html_tables("a <table><tr><td>1</td></tr></table> b")
        ['<table><tr><td>1</td></tr></table>']
    """
    return [text[start:end] for start, _, _, end in _elements(text, _TABLE_OPEN_RE, _TABLE_CLOSE_RE)]


def display_formulas(text: str) -> list[str]:
    """The LaTeX inside each display formula (``$$...$$`` or ``\\[...\\]``), stripped, in order.

    Examples:
        >>> display_formulas("x $$ a^2 $$ y \\\\[b\\\\]")
        ['a^2', 'b']
    """
    formulas: list[str] = []
    at, closed = 0, set(_MATH_CLOSERS)
    while closed and (start := _MATH_OPEN_RE.search(text, at)) is not None:
        opener = start.group()
        end = text.find(_MATH_CLOSERS[opener], start.end() + 1) if opener in closed else -1
        if end == -1:  # never closed: no later formula of this kind is either
            closed.discard(opener)
            at = start.start() + 1
            continue
        formulas.append(text[start.end() : end].strip())
        at = end + 2
    return formulas


class _RowCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._depth += 1
        elif self._depth == 1 and tag == "tr":
            self.rows.append([])
        elif self._depth == 1 and tag in ("td", "th"):
            self._close_cell()
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._close_cell()
            self._depth -= 1
        elif self._depth == 1 and tag in ("td", "th", "tr"):
            self._close_cell()

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def _close_cell(self) -> None:
        if self._cell is not None:
            if not self.rows:
                self.rows.append([])
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None


def table_rows(table: str) -> list[list[str]]:
    """The cell texts of an HTML table, row by row (``<br>`` becomes a newline; spans are not expanded;
    a nested table's cells are read as its outer cell's text).

    Examples:
        >>> table_rows("<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2&amp;3</td></tr></table>")
        [['a', 'b'], ['1', '2&3']]
    """
    collector = _RowCollector()
    try:
        collector.feed(table)
        collector.close()
    except AssertionError:  # html.parser's markupbase asserts on an unknown `<![keyword` section
        pass
    collector._close_cell()
    return [row for row in collector.rows if row]


def _markdown_blocks(text: str) -> tuple[LayoutBlock, ...]:
    tables = [LayoutBlock("table", table) for table in html_tables(text)]
    formulas = [LayoutBlock("formula", latex) for latex in display_formulas(text)]
    return tuple(tables + formulas)


def _unclosed_table(text: str) -> str | None:
    opened = len(_TABLE_OPEN_RE.findall(text))
    closed = len(html_tables(text))
    return (
        "an HTML <table> is opened and never closed (the answer was cut short)" if opened > closed else None
    )


# --- olmOCR: YAML front matter + markdown ----------------------------------------------------------------

OLMOCR_FIELDS = ("primary_language", "is_rotation_valid", "rotation_correction", "is_table", "is_diagram")
"""The front matter olmOCR-2 writes, in order (``olmocr.prompts.PageResponse`` less ``natural_text``)."""
OLMOCR_ROTATIONS = (0, 90, 180, 270)

_YAML_LINE_RE = re.compile(r"([A-Za-z_][\w-]*)[ \t]*:(?:[ \t]+(.*?))?[ \t]*")
_YAML_TRUE = frozenset({"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"})
_YAML_FALSE = frozenset({"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"})
_YAML_NULL = frozenset({"", "~", "null", "Null", "NULL"})
_OLMOCR_FIGURE_RE = re.compile(r"\]\(page_(\d+)_(\d+)_(\d+)_(\d+)\.png\)")


def split_front_matter(text: str) -> tuple[str | None, str]:
    """``(front matter, body)`` as olmOCR splits them: the answer starts with ``---\\n`` and the front matter
    ends at the next ``\\n---``; without one, ``(None, text.strip())``.

    Examples:
        >>> split_front_matter("---\\na: 1\\n---\\nBody\\n")
        ('a: 1', 'Body')
    """
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end != -1:
            return text[4:end], text[end + 4 :].strip()
    return None, text.strip()


def _yaml_scalar(raw: str) -> Any:
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    if value in _YAML_NULL:
        return None
    if value in _YAML_TRUE:
        return True
    if value in _YAML_FALSE:
        return False
    if re.fullmatch(r"[-+]?\d{1,18}", value):
        return int(value)
    return value


def parse_flat_yaml(block: str) -> dict[str, Any] | str:
    """A flat ``key: value`` YAML mapping as PyYAML's ``safe_load`` reads its scalars (YAML 1.1 booleans
    such as ``no``, ``null``/``~``, integers), or a string saying which line is not ``key: value``.

    Examples:
        >>> parse_flat_yaml("primary_language: no\\nrotation_correction: 90")
        {'primary_language': False, 'rotation_correction': 90}
    """
    mapping: dict[str, Any] = {}
    for line in block.split("\n"):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _YAML_LINE_RE.fullmatch(line)
        if match is None:
            return f"front matter line {line[:80]!r} is not `key: value`"
        mapping[match.group(1)] = _yaml_scalar(match.group(2) or "")
    return mapping


def _olmocr_field(name: str, value: Any) -> tuple[Any, str | None]:
    if name == "primary_language":  # Optional[str]: a YAML boolean (``no``) or empty value becomes None
        if isinstance(value, bool) or not value:
            return None, None
        return (value, None) if isinstance(value, str) else (None, f"primary_language={value!r} is not text")
    if name == "rotation_correction":
        if isinstance(value, str):
            if not re.fullmatch(r"\s*[-+]?\d{1,18}\s*", value):
                return None, f"rotation_correction={value!r} is not an integer"
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value not in OLMOCR_ROTATIONS:
            return None, f"rotation_correction={value!r} is not one of 0, 90, 180, 270"
        return value, None
    if isinstance(value, str):
        return value.lower() == "true", None
    return (value, None) if isinstance(value, bool) else (None, f"{name}={value!r} is not a boolean")


def olmocr_page_fields(front_matter: str | None) -> tuple[dict[str, Any], str | None]:
    """The checked front-matter fields, and the first problem (missing, unexpected, mistyped), as
    olmOCR's ``FrontMatterParser(front_matter_class=PageResponse)`` would raise it.

    Examples:
        >>> olmocr_page_fields("primary_language: en\\nis_rotation_valid: True")[1]
        "front matter lacks 'rotation_correction'"
    """
    if front_matter is None:
        return {}, "no front matter: the answer does not start with '---'"
    mapping = parse_flat_yaml(front_matter)
    if isinstance(mapping, str):
        return {}, mapping
    fields: dict[str, Any] = {}
    for name in OLMOCR_FIELDS:
        if name not in mapping:
            return fields, f"front matter lacks {name!r}"
        fields[name], problem = _olmocr_field(name, mapping[name])
        if problem is not None:
            return fields, problem
    extra = sorted(set(mapping) - set(OLMOCR_FIELDS))
    return fields, (f"unexpected front matter fields: {', '.join(extra)}" if extra else None)


def _olmocr_figures(markdown: str) -> tuple[LayoutBlock, ...]:
    """Each ``![alt](page_x_y_w_h.png)``, found from its ``](page_...png)`` end (one pass)."""
    figures = []
    at = 0
    for match in _OLMOCR_FIGURE_RE.finditer(markdown):
        opening = markdown.rfind("![", at, match.start())
        at = match.end()
        if opening != -1 and "]" not in markdown[opening + 2 : match.start()]:
            x, y, w, h = (float(value) for value in match.groups())
            figures.append(LayoutBlock("image", markdown[opening + 2 : match.start()], (x, y, x + w, y + h)))
    return tuple(figures)


def parse_olmocr(text: str) -> ParsedLayout:
    """Read an olmOCR-2 answer: front matter checked as olmOCR checks it, the body as markdown.

    A page olmOCR reports as not upright (``is_rotation_valid: False``) is invalid too: olmOCR's pipeline
    turns the page by ``rotation_correction`` degrees clockwise and asks again. Blocks: each figure the
    model labelled ``![alt](page_x_y_w_h.png)`` (box in pixels of the image it saw) and each HTML table.

    Examples:
        >>> answer = parse_olmocr("---\\nprimary_language: en\\nis_rotation_valid: True\\n"
        ...     "rotation_correction: 0\\nis_table: False\\nis_diagram: False\\n---\\nHello")
        >>> answer.markdown, answer.metadata["primary_language"], answer.valid
        ('Hello', 'en', True)
    """
    front_matter, body = split_front_matter(text)
    fields, problem = olmocr_page_fields(front_matter)
    if problem is None and fields["is_rotation_valid"] is False:
        problem = f"the page is not upright: turn it {fields['rotation_correction']} degrees clockwise"
    markdown = body if front_matter is not None else text.strip()
    figures = _olmocr_figures(markdown)
    tables = tuple(LayoutBlock("table", table) for table in html_tables(markdown))
    return ParsedLayout(markdown, figures + tables, fields, problem or _unclosed_table(markdown))


# --- Nanonets-OCR2: markdown with semantic tags ----------------------------------------------------------

NANONETS_CHECKBOXES = {"☐": "unchecked", "☑": "checked", "☒": "crossed"}
_NANONETS_TAGS = ("img", "page_number", "watermark", "signature")


def parse_nanonets(text: str) -> ParsedLayout:
    """Read a Nanonets-OCR2 answer.

    ``<page_number>`` and ``<watermark>`` elements leave the markdown for the metadata (``page_numbers``,
    ``watermarks``); ``<img>`` (a description or caption) and ``<signature>`` stay in the markdown and are
    also blocks (``image``, ``signature``), as are HTML tables and display formulas. ``checkboxes`` counts
    ☐ (unchecked), ☑ (checked) and ☒ (crossed). A tag opened and never closed, or an unclosed table, makes
    the answer invalid (cut short).

    Examples:
        >>> answer = parse_nanonets("Total ☑\\n<page_number>3</page_number>")
        >>> answer.markdown, answer.metadata["page_numbers"], answer.metadata["checkboxes"]["checked"]
        ('Total ☑', ['3'], 1)
    """
    numbered = _elements(text, *_tag("page_number"))
    page_numbers = [text[inner:end].strip() for _, inner, end, _ in numbered]
    text_left = _without(text, numbered)
    marked = _elements(text_left, *_tag("watermark"))
    watermarks = [text_left[inner:end].strip() for _, inner, end, _ in marked]
    markdown = re.sub(r"\n{3,}", "\n\n", _without(text_left, marked)).strip()
    described = sorted(
        (span, label)
        for tag, label in (("img", "image"), ("signature", "signature"))
        for span in _elements(markdown, *_tag(tag))
    )
    blocks = tuple(
        LayoutBlock(label, markdown[inner:end].strip()) for (_, inner, end, _), label in described
    ) + _markdown_blocks(markdown)
    metadata: dict[str, Any] = {
        "page_numbers": page_numbers,
        "watermarks": watermarks,
        "checkboxes": {name: text.count(mark) for mark, name in NANONETS_CHECKBOXES.items()},
    }
    problem = next(
        (
            f"<{tag}> is opened and never closed (the answer was cut short)"
            for tag in _NANONETS_TAGS
            if text.count(f"<{tag}>") > text.count(f"</{tag}>")
        ),
        None,
    )
    return ParsedLayout(markdown, blocks, metadata, problem or _unclosed_table(markdown))


# --- Markdown + HTML tables + LaTeX (HunyuanOCR, LightOnOCR, GLM-OCR, Qianfan-OCR) -------------------------


def parse_markdown_html(text: str) -> ParsedLayout:
    """Read a markdown answer with HTML tables and LaTeX: the markdown as written; blocks for each HTML
    table and display formula. A ``<think>...</think>`` section (Qianfan-OCR's layout reasoning when the
    prompt ends with ``<think>``; the answer then starts inside it and only ``</think>`` is written) moves
    to ``metadata["thinking"]``. An unclosed ``<table>`` or ``<think>`` makes the answer invalid (cut
    short).

    Examples:
        >>> answer = parse_markdown_html("# T\\n\\n<table><tr><td>1</td></tr></table>")
        >>> [block.label for block in answer.blocks], answer.valid
        (['table'], True)
    """
    sections = _elements(text, *_tag("think"))
    thinking = [text[inner:end].strip() for _, inner, end, _ in sections]
    markdown = _without(text, sections).strip()
    head, closing, rest = markdown.partition("</think>")
    if closing and "<think>" not in head:  # the prompt opened the section
        thinking.insert(0, head.strip())
        markdown = rest.strip()
    problem = _unclosed_table(markdown)
    if "<think>" in markdown:
        problem = "a <think> section is opened and never closed (the answer was cut short)"
    return ParsedLayout(
        markdown, _markdown_blocks(markdown), {"thinking": thinking} if thinking else {}, problem
    )


# --- HunyuanOCR spotting: text followed by two corner points ------------------------------------------

_HUNYUAN_CORNERS_RE = re.compile(r"\((\d+),(\d+)\),\((\d+),(\d+)\)")
_HUNYUAN_TEXT_RE = re.compile(r"[^\s(),]")


def parse_hunyuan_spotting(text: str) -> ParsedLayout:
    """Read a HunyuanOCR spotting answer (``Detect and recognize text in the image, and output the text
    coordinates in a formatted manner.``): items of text each followed by ``(x1,y1),(x2,y2)``, its top-left
    and bottom-right corners on the 0-1000 grid, back to back or one per line, as Tencent's spotting
    scorer reads them (``train_verl/reward/task_scorers/spotting.py``, ``_parse_format3``): an item's text
    is everything after the previous item's corners, parentheses included (``ATLANTA (AP)``); corners
    after nothing but punctuation (a second pair) belong to no new item. One ``text`` block per item; the
    markdown is the items, one per line. Invalid when no item has corners.

    Examples:
        >>> answer = parse_hunyuan_spotting("Total(10,20),(300,40)")
        >>> answer.markdown, answer.blocks[0].box
        ('Total', (10.0, 20.0, 300.0, 40.0))
    """
    found: list[LayoutBlock] = []
    at = 0
    for corners in _HUNYUAN_CORNERS_RE.finditer(text):
        item = text[at : corners.start()].strip()
        at = corners.end()
        if _HUNYUAN_TEXT_RE.search(item):
            x1, y1, x2, y2 = (float(value) for value in corners.groups())
            found.append(LayoutBlock("text", item, (x1, y1, x2, y2)))
    blocks = tuple(found)
    problem = None if blocks else "no text with (x1,y1),(x2,y2) coordinates in a spotting answer"
    return ParsedLayout("\n".join(block.text for block in blocks), blocks, {}, problem)


# --- dots.ocr: JSON layout ------------------------------------------------------------------------------

DOTS_CATEGORIES = (
    "Caption",
    "Footnote",
    "Formula",
    "List-item",
    "Page-footer",
    "Page-header",
    "Picture",
    "Section-header",
    "Table",
    "Text",
    "Title",
)
"""dots.ocr's layout categories (``dots_ocr/utils/prompts.py``)."""
DOTS_FACTOR, DOTS_MIN_PIXELS, DOTS_MAX_PIXELS = 28, 3136, 11289600
"""dots.ocr's image sizing (``dots_ocr/utils/consts.py``): sides multiples of 28, 3136-11289600 pixels."""

_MAX_DEPTH = 32
_JSON_SCALAR_RE = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null")
_JSON_PARTIAL_RE = re.compile(
    r"-?\d*(?:\.\d*)?(?:[eE][-+]?\d*)?|t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?|n(?:u(?:ll?)?)?"
)
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class _Incomplete(Exception):
    """The text ended inside a JSON value."""


class _Malformed(Exception):
    """The text is not JSON at this point."""


class _LenientJSON:
    """JSON with two repairs dots.ocr's answers need: a backslash before a character JSON does not escape
    (LaTeX's ``\\dots``) is kept as written, and a missing comma between objects (``}{``) is accepted."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.repairs: set[str] = set()

    def skip(self) -> str:
        while self.at < len(self.text) and self.text[self.at] in " \t\r\n":
            self.at += 1
        if self.at >= len(self.text):
            raise _Incomplete
        return self.text[self.at]

    def value(self, depth: int = 0) -> Any:
        char = self.skip()
        if depth > _MAX_DEPTH:
            raise _Malformed("nested too deeply")
        if char in "{[":
            return self.container(char, depth)
        if char == '"':
            return self.string()
        match = _JSON_SCALAR_RE.match(self.text, self.at)
        if match is None or match.end() == len(self.text):
            if _JSON_PARTIAL_RE.fullmatch(self.text, self.at):
                raise _Incomplete
            raise _Malformed(f"unexpected {char!r}")
        self.at = match.end()
        number = match.group()
        if number[0] in "tfn":
            return json.loads(number)
        is_int = number.lstrip("-").isdigit() and len(number) <= 4000  # int() refuses over 4300 digits
        return int(number) if is_int else float(number)

    def container(self, opener: str, depth: int) -> Any:
        closer = "}" if opener == "{" else "]"
        self.at += 1
        items: list[Any] = []
        pairs: dict[str, Any] = {}
        while True:
            char = self.skip()
            if char == closer:
                self.at += 1
                return pairs if opener == "{" else items
            if items or pairs:
                if char == ",":
                    self.at += 1
                elif not (opener == "[" and char == "{"):
                    raise _Malformed(f"expected ',' or {closer!r}, got {char!r}")
                else:
                    self.repairs.add("missing comma between objects")
            if opener == "[":
                items.append(self.value(depth + 1))
                continue
            if self.skip() != '"':
                raise _Malformed("an object key is not a string")
            key = self.string()
            if self.skip() != ":":
                raise _Malformed("expected ':' after an object key")
            self.at += 1
            pairs[key] = self.value(depth + 1)

    def string(self) -> str:
        out: list[str] = []
        self.at += 1
        while True:
            end = self.text.find('"', self.at)
            slash = self.text.find("\\", self.at)
            if end == -1:
                raise _Incomplete
            if slash == -1 or end < slash:
                out.append(self.text[self.at : end])
                self.at = end + 1
                return "".join(out)
            out.append(self.text[self.at : slash])
            self.at = slash + self._escape(slash, out)

    def _escape(self, slash: int, out: list[str]) -> int:
        code = self.text[slash + 1 : slash + 2]
        if not code:
            raise _Incomplete
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
            return 2
        digits = self.text[slash + 2 : slash + 6]
        if code == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", digits):
            high = int(digits, 16)
            low = self.text[slash + 6 : slash + 12]
            if 0xD800 <= high < 0xDC00 and re.fullmatch(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}", low):
                out.append(chr(0x10000 + ((high - 0xD800) << 10) + (int(low[2:], 16) - 0xDC00)))
                return 12  # a surrogate pair: one character
            out.append(chr(high))
            return 6
        self.repairs.add("backslashes JSON does not escape kept as written")
        out.append("\\" + code)
        return 2


def lenient_json_list(text: str) -> tuple[list[Any], set[str], str | None]:
    """The complete elements of a JSON list (a lone object counts as a list of one), the repairs made, and
    ``None`` or the reason reading stopped early: cut off (``max_tokens``), not JSON, or no list at all.

    Examples:
        >>> items, repairs, problem = lenient_json_list('[{"a": "\\\\dots"}, {"b": 1')
        >>> items, problem
        ([{'a': '\\\\dots'}], 'the JSON list is cut off after 1 complete element(s)')
    """
    reader = _LenientJSON(text)
    items: list[Any] = []
    try:
        opener = reader.skip()
        if opener == "{":
            return [reader.value()], reader.repairs, None
        if opener != "[":
            return [], reader.repairs, "the answer is not a JSON list"
        reader.at += 1
        while True:
            char = reader.skip()
            if char == "]":
                return items, reader.repairs, None
            if items and char == ",":
                reader.at += 1
            elif items and char == "{":
                reader.repairs.add("missing comma between objects")
            elif items:
                raise _Malformed(f"expected ',' or ']', got {char!r}")
            items.append(reader.value(1))
    except _Incomplete:
        return items, reader.repairs, f"the JSON list is cut off after {len(items)} complete element(s)"
    except _Malformed as error:
        return items, reader.repairs, f"not JSON at character {reader.at}: {error}"


_LATEX_PREAMBLE_RE = re.compile(
    r"\\documentclass\{[^}]+\}|\\usepackage(?:\[[^\]]*\])?\{[^}]+\}|\\begin\{document\}|\\end\{document\}",
    re.IGNORECASE,
)


def _pair(text: str, opener: str, closer: str) -> bool:
    start = text.find(opener)
    return start != -1 and text.find(closer, start + len(opener)) != -1


def _has_latex(text: str) -> bool:
    """dots.ocr's ``has_latex_markdown``: a command, or math delimiters that close."""
    return bool(
        re.search(r"\\[a-zA-Z]", text)
        or _pair(text, "$$", "$$")
        or re.search(r"\$[^$\n]+?\$", text)
        or _pair(text, "\\[", "\\]")
        or _pair(text, "\\(", "\\)")
    )


def _dots_formula(text: str) -> str:
    """dots.ocr's ``get_formula_in_markdown``: a formula as a ``$$`` block unless it is already delimited
    or holds no LaTeX; a preamble (``\\usepackage``) and wrapping backticks go."""
    text = text.strip()
    if text.startswith("$$") and text.endswith("$$"):
        inner = text[2:-2].strip()
        return text if "$" in inner else f"$$\n{inner}\n$$"
    if text.startswith("\\[") and text.endswith("\\]"):
        return f"$$\n{text[2:-2].strip()}\n$$"
    delimited = any(_pair(line, "\\[", "\\]") for line in text.split("\n"))
    if delimited or re.search(r"\$([^$]+)\$", text) or not _has_latex(text):
        return text
    if "usepackage" in text:
        text = _LATEX_PREAMBLE_RE.sub("", text)
    if len(text) >= 2 and text[0] == "`" and text[-1] == "`":
        text = text[1:-1]
    return f"$$\n{text}\n$$"


def _dots_cell(cell: Any) -> tuple[LayoutBlock | None, str | None]:
    if not isinstance(cell, dict) or not isinstance(cell.get("category"), str):
        return None, "a layout element is not an object with a category"
    bbox = cell.get("bbox")
    box: Box | None = None
    problem = None
    if isinstance(bbox, list) and len(bbox) == 4 and all(_is_number(v) for v in bbox):
        box = (float(bbox[0]), float(bbox[1]), float(bbox[2]), float(bbox[3]))
        if box[2] <= box[0] or box[3] <= box[1]:
            problem = f"bbox {bbox} is empty or inverted"
    elif bbox is not None:
        problem = f"bbox {bbox!r} is not four numbers"
    text = cell.get("text")
    return LayoutBlock(cell["category"], text if isinstance(text, str) else "", box), problem


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def parse_dots_layout(text: str) -> ParsedLayout:
    """Read a dots.ocr layout answer (``prompt_layout_all_en`` or ``prompt_layout_only_en``).

    Blocks keep dots.ocr's category as label and the bbox as written: pixels of the image the model saw,
    whose sides :func:`smart_resize` gives (map them with :func:`scale_box`). The markdown follows dots.ocr's
    ``layoutjson2md``: Formula as a ``$$`` block, Table as its HTML, others as their markdown; Picture
    (no text) is left out. Invalid: not a JSON list, cut off (the complete elements are kept, as dots.ocr's
    ``OutputCleaner`` keeps them), an element without a category, or a bbox that is not four numbers or is
    empty (dots.ocr's ``is_legal_bbox``). ``metadata["repairs"]`` lists what was read leniently.

    Examples:
        >>> answer = parse_dots_layout('[{"bbox": [1, 2, 30, 40], "category": "Title", "text": "# Hi"}]')
        >>> answer.markdown, answer.blocks[0].box
        ('# Hi', (1.0, 2.0, 30.0, 40.0))
    """
    cells, repairs, problem = lenient_json_list(text)
    blocks: list[LayoutBlock] = []
    for cell in cells:
        block, cell_problem = _dots_cell(cell)
        problem = problem or cell_problem
        if block is not None:
            blocks.append(block)
    parts = []
    for block in blocks:
        if block.label == "Picture":
            continue
        content = _dots_formula(block.text) if block.label == "Formula" else _dots_text(block.text)
        if content:
            parts.append(content)
    metadata = {"repairs": sorted(repairs)} if repairs else {}
    return ParsedLayout("\n\n".join(parts), tuple(blocks), metadata, problem)


def _dots_text(text: str) -> str:
    """dots.ocr's ``clean_text``: stripped, and a `` `$...$` `` wrapper loses its backticks."""
    text = text.strip()
    return text[1:-1] if text[:2] == "`$" and text[-2:] == "$`" else text


def parse_dots_text(text: str) -> ParsedLayout:
    """Read a dots.ocr ``prompt_ocr`` answer: plain text, taken as it is (stripped).

    Examples:
        >>> parse_dots_text("  Hello\\n").markdown
        'Hello'
    """
    return ParsedLayout(text.strip())


def smart_resize(
    height: int,
    width: int,
    factor: int = DOTS_FACTOR,
    min_pixels: int = DOTS_MIN_PIXELS,
    max_pixels: int = DOTS_MAX_PIXELS,
) -> tuple[int, int] | None:
    """``(height, width)`` of the image a Qwen2-VL-style processor makes of one this size: sides rounded to
    multiples of ``factor``, pixels kept within ``[min_pixels, max_pixels]`` (dots.ocr's
    ``dots_ocr/utils/image_utils.py``); ``None`` for an aspect ratio over 200 or a side below 1.

    Examples:
        >>> smart_resize(1000, 700)
        (1008, 700)
    """
    if height < 1 or width < 1 or max(height, width) / min(height, width) > 200:
        return None
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
        if h_bar * w_bar > max_pixels:
            beta = math.sqrt((h_bar * w_bar) / max_pixels)
            h_bar = max(factor, math.floor(h_bar / beta / factor) * factor)
            w_bar = max(factor, math.floor(w_bar / beta / factor) * factor)
    return h_bar, w_bar


def scale_box(box: Box, seen: tuple[int, int], target: tuple[int, int]) -> tuple[int, int, int, int]:
    """A box in pixels of an image of size ``seen`` ``(width, height)`` in pixels of one of size ``target``,
    each coordinate truncated as dots.ocr's ``post_process_cells`` does.

    Examples:
        >>> scale_box((28.0, 56.0, 280.0, 560.0), (700, 1008), (1400, 2016))
        (56, 112, 560, 1120)
    """
    scale_x = target[0] / seen[0] if seen[0] else 0.0
    scale_y = target[1] / seen[1] if seen[1] else 0.0
    return whole_box((box[0] * scale_x, box[1] * scale_y, box[2] * scale_x, box[3] * scale_y))


def whole_box(box: Box) -> tuple[int, int, int, int]:
    """``box`` in whole pixels, each coordinate truncated (a value that is not finite, or absurdly large,
    becomes 0).

    Examples:
        >>> whole_box((1.9, 2.0, 3.5, float("inf")))
        (1, 2, 3, 0)
    """
    x1, y1, x2, y2 = (int(v) if math.isfinite(v) and abs(v) < 2**62 else 0 for v in box)
    return (x1, y1, x2, y2)


# --- PaddleOCR-VL: one format per task ------------------------------------------------------------------

PADDLE_TASKS = ("ocr", "table", "formula", "chart", "spotting", "seal")
"""PaddleOCR-VL's tasks (PaddleX ``paddleocr_vl`` pipeline ``prompt_label``s)."""

_OTSL_TAGS = ("<fcel>", "<ecel>", "<lcel>", "<ucel>", "<xcel>", "<nl>")
_OTSL_RE = re.compile("(" + "|".join(re.escape(tag) for tag in _OTSL_TAGS) + ")")
_OTSL_CELL_RE = re.compile(
    r"(?:<fcel>|<ecel>|<nl>|<lcel>|<ucel>|<xcel>).*?(?=<fcel>|<ecel>|<nl>|<lcel>|<ucel>|<xcel>|$)", re.DOTALL
)
_SPOT_TEXT = (re.compile(re.escape("<|TEXT_START|>")), re.compile(re.escape("<|TEXT_END|>")))
_SPOT_LOC = (re.compile(re.escape("<|LOC_BEGIN|>")), re.compile(re.escape("<|LOC_END|>")))
_LOC_RE = re.compile(r"<\|LOC_(\d{1,6})\|>")


def _otsl_pad(otsl: str) -> str:
    """PaddleX's ``otsl_pad_to_sqr_v2``: every row padded or cut to the width that fits the rows best."""
    otsl = otsl.strip()
    if "<nl>" not in otsl:
        return otsl + "<nl>"
    rows = []
    for line in otsl.split("<nl>"):
        cells = _OTSL_CELL_RE.findall(line)
        if cells:
            filled = max((i + 1 for i, cell in enumerate(cells) if cell.startswith("<fcel>")), default=0)
            rows.append((cells, filled))
    if not rows:
        return "<nl>"
    narrowest = max(filled for _, filled in rows)
    widest = max(narrowest, *(len(cells) for cells, _ in rows))
    width = min(range(narrowest, widest + 1), key=lambda w: sum(abs(len(cells) - w) for cells, _ in rows))
    return "<nl>".join("".join((cells + ["<ecel>"] * width)[:width]) for cells, _ in rows) + "<nl>"


def otsl_to_html(otsl: str) -> str:
    """PaddleOCR-VL's OTSL table (``<fcel>`` filled cell, ``<ecel>`` empty, ``<lcel>``/``<ucel>``/``<xcel>``
    spans, ``<nl>`` row end) as an HTML table, as PaddleX's ``convert_otsl_to_html`` writes it (rows padded
    to one width first); ``""`` when there is no cell. A ``<fcel>`` with no text is an empty cell (PaddleX
    takes the next tag's name as its text, or raises).

    Examples:
        >>> otsl_to_html("<fcel>A<lcel><nl><fcel>1<fcel>2<nl>")
        '<table><tr><td colspan="2">A</td></tr><tr><td>1</td><td>2</td></tr></table>'
    """
    padded = _otsl_pad(otsl)
    tokens = _OTSL_RE.findall(padded)
    rows = [list(group) for is_nl, group in itertools.groupby(tokens, lambda t: t == "<nl>") if not is_nl]
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    for row in rows:
        row.extend(["<ecel>"] * (width - len(row)))
    texts = _otsl_cell_texts(padded)
    grid: list[list[tuple[int, int, int, int, str] | None]] = [[None] * width for _ in rows]
    cells = 0
    for r, row in enumerate(rows):
        for c, tag in enumerate(row):
            if tag not in ("<fcel>", "<ecel>"):
                continue
            col_span = 1 + _otsl_run(row, c + 1, ("<lcel>", "<xcel>"))
            row_span = 1 + _otsl_run([below[c] for below in rows[r + 1 :]], 0, ("<ucel>", "<xcel>"))
            cell = (r, c, row_span, col_span, texts.get((r, c), "") if tag == "<fcel>" else "")
            cells += 1
            for rr in range(r, min(r + row_span, len(rows))):
                for cc in range(c, min(c + col_span, width)):
                    grid[rr][cc] = cell
    if not cells:
        return ""
    body = []
    for r in range(len(rows)):
        body.append("<tr>")
        for c in range(width):
            start_r, start_c, row_span, col_span, text = grid[r][c] or (r, c, 1, 1, "")
            if (start_r, start_c) == (r, c):
                spans = (f' rowspan="{row_span}"' if row_span > 1 else "") + (
                    f' colspan="{col_span}"' if col_span > 1 else ""
                )
                body.append(f"<td{spans}>{html.escape(text.strip())}</td>")
        body.append("</tr>")
    return "<table>" + "".join(body) + "</table>"


def _otsl_run(tags: Sequence[str], start: int, kinds: tuple[str, ...]) -> int:
    return sum(1 for _ in itertools.takewhile(lambda tag: tag in kinds, tags[start:]))


def _otsl_cell_texts(padded: str) -> dict[tuple[int, int], str]:
    """The text after each ``<fcel>``, by (row, column)."""
    texts: dict[tuple[int, int], str] = {}
    r = c = 0
    pieces = _OTSL_RE.split(padded)
    for index in range(1, len(pieces), 2):
        tag, after = pieces[index], pieces[index + 1]
        if tag == "<nl>":
            r, c = r + 1, 0
            continue
        if tag == "<fcel>":
            texts[(r, c)] = after
        c += 1
    return texts


def _paddle_math(text: str) -> str:
    """PaddleX's math rewrite: with ``\\(...\\)`` or ``\\[...\\]`` present, ``$`` signs go and those
    delimiters become `` $ `` and `` $$ ``."""
    if not (("\\(" in text and "\\)" in text) or ("\\[" in text and "\\]" in text)):
        return text
    text = text.replace("$", "")
    for old, new in (("\\(", " $ "), ("\\)", " $"), ("\\[\\[", "\\["), ("\\]\\]", "\\]")):
        text = text.replace(old, new)
    return text.replace("\\[", " $$ ").replace("\\]", " $$ ")


def paddle_spotting(text: str) -> list[tuple[str, tuple[Point, ...]]]:
    """PaddleOCR-VL's spotting answer as ``(text, four corner points)`` pairs, points on the 0-1000 grid, as
    PaddleX's ``post_process_for_spotting`` reads it: ``<|TEXT_START|>t<|TEXT_END|><|LOC_BEGIN|>`` eight
    ``<|LOC_n|>`` ``<|LOC_END|>``; failing that, each run of eight ``<|LOC_n|>`` with the text before it.

    Examples:
        >>> paddle_spotting("Hi<|LOC_1|><|LOC_2|><|LOC_9|><|LOC_2|><|LOC_9|><|LOC_8|><|LOC_1|><|LOC_8|>")
        [('Hi', ((1.0, 2.0), (9.0, 2.0), (9.0, 8.0), (1.0, 8.0)))]
    """
    found: list[tuple[str, tuple[Point, ...]]] = []
    labels = [text[inner:end] for _, inner, end, _ in _elements(text, *_SPOT_TEXT)]
    places = [text[inner:end] for _, inner, end, _ in _elements(text, *_SPOT_LOC)]
    for label, locations in zip(labels, places, strict=False):
        values = [int(v) for v in _LOC_RE.findall(locations)[:8]]
        if len(values) == 8:
            found.append((label.strip(), _points(values)))
    if found:
        return found
    matches = list(_LOC_RE.finditer(text))
    last_end = 0
    for start in range(0, len(matches) - 7, 8):
        group = matches[start : start + 8]
        found.append((text[last_end : group[0].start()].strip(), _points([int(m.group(1)) for m in group])))
        last_end = group[-1].end()
    return found


def _points(values: Sequence[int]) -> tuple[Point, ...]:
    return tuple((float(values[i]), float(values[i + 1])) for i in range(0, 8, 2))


def _bounds(points: Sequence[Point]) -> Box:
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return (min(xs), min(ys), max(xs), max(ys))


def parse_paddleocr_vl(text: str, task: str | None = None) -> ParsedLayout:
    """Read a PaddleOCR-VL answer to one task (``ocr``, ``table``, ``formula``, ``chart``, ``spotting``,
    ``seal``) the way PaddleX's pipeline post-processes it. Without a task, the answer says which: spotting
    when it holds ``<|LOC_n|>`` markers, a table when it holds OTSL tags, else text (``ocr``).

    - every task but spotting: ``\\(...\\)``/``\\[...\\]`` math becomes ``$``/``$$`` (PaddleX's rewrite);
    - ``table``: the OTSL answer becomes an HTML table (:func:`otsl_to_html`); invalid without OTSL or HTML;
    - ``formula``: a ``formula`` block of the LaTeX; the markdown is a ``$$`` block unless already delimited;
    - ``spotting``: one ``text`` block per located line, ``polygon`` and ``box`` on the 0-1000 grid of the
      image; the markdown is the lines joined by blank lines; invalid without locations (they are special
      tokens: the request must send ``skip_special_tokens: false``).

    Examples:
        >>> parse_paddleocr_vl("<fcel>a<fcel>b<nl>", "table").markdown
        '<table><tr><td>a</td><td>b</td></tr></table>'
    """
    if task is None:
        task = "spotting" if _LOC_RE.search(text) else "table" if _OTSL_RE.search(text) else "ocr"
    if task == "spotting":
        spots = paddle_spotting(text)
        blocks = tuple(LayoutBlock("text", line, _bounds(points), points) for line, points in spots)
        problem = None if spots else "no <|LOC_n|> locations: send skip_special_tokens=false for spotting"
        return ParsedLayout("\n\n".join(line for line, _ in spots), blocks, {}, problem)
    content = _paddle_math(text).strip()
    if task == "table":
        if _OTSL_RE.search(content):
            content = otsl_to_html(content) or content
        elif not html_tables(content):
            return ParsedLayout(content, (), {}, "no OTSL or HTML table in a table answer")
        return ParsedLayout(content, (LayoutBlock("table", content),))
    if task == "formula":
        latex = content.strip("$ \n")
        markdown = content if "$" in content or not latex else f"$$\n{latex}\n$$"
        return ParsedLayout(markdown, (LayoutBlock("formula", latex),))
    return ParsedLayout(content, (LayoutBlock(task, content),) if content else ())
