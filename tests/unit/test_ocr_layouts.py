"""The OCR output parsers' rules, each checked against the reference it follows (PaddleX's OTSL and
spotting readers, dots.ocr's cleaner, the Nanonets-OCR2 prompt's tags), and fuzzed: no text makes a
parser raise."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vllm_tasks.ocr import layouts
from vllm_tasks.ocr.formats import FORMATS, PageSizes
from vllm_tasks.ocr.layouts import LayoutBlock, ParsedLayout

# --- PaddleOCR-VL (PaddleX paddlex/inference/pipelines/paddleocr_vl) ---------------------------------------


@pytest.mark.parametrize(
    ("otsl", "html"),
    [
        # <lcel> extends the cell on its left: colspan
        (
            "<fcel>A<lcel><nl><fcel>1<fcel>2<nl>",
            '<table><tr><td colspan="2">A</td></tr><tr><td>1</td><td>2</td></tr></table>',
        ),
        # <ucel> extends the cell above: rowspan
        (
            "<fcel>A<fcel>B<nl><ucel><fcel>C<nl>",
            '<table><tr><td rowspan="2">A</td><td>B</td></tr><tr><td>C</td></tr></table>',
        ),
        # <xcel> extends both ways
        (
            "<fcel>A<lcel><nl><ucel><xcel><nl>",
            '<table><tr><td rowspan="2" colspan="2">A</td></tr><tr></tr></table>',
        ),
        # <ecel> is an empty cell; text is HTML-escaped
        ("<fcel>a&b<ecel><nl>", "<table><tr><td>a&amp;b</td><td></td></tr></table>"),
        # a short row is padded with empty cells (otsl_pad_to_sqr_v2)
        (
            "<fcel>1<fcel>2<fcel>3<nl><fcel>4<nl><fcel>5<fcel>6<fcel>7<nl>",
            "<table><tr><td>1</td><td>2</td><td>3</td></tr><tr><td>4</td><td></td><td></td></tr><tr><td>5</td><td>6</td><td>7</td></tr></table>",
        ),
        # no <nl> at all: one row
        ("<fcel>x<fcel>y", "<table><tr><td>x</td><td>y</td></tr></table>"),
        ("no cells here", ""),
        # a <fcel> without text: an empty cell
        ("<fcel><fcel>b<nl>", "<table><tr><td></td><td>b</td></tr></table>"),
    ],
)
def test_otsl_to_html_follows_paddlex(otsl: str, html: str) -> None:
    assert layouts.otsl_to_html(otsl) == html


def test_paddleocr_vl_table_answer_becomes_html() -> None:
    answer = layouts.parse_paddleocr_vl("<fcel>Year<fcel>Total<nl><fcel>2024<fcel>12<nl>", "table")

    assert answer.valid
    assert (
        answer.markdown
        == "<table><tr><td>Year</td><td>Total</td></tr><tr><td>2024</td><td>12</td></tr></table>"
    )
    assert answer.blocks == (LayoutBlock("table", answer.markdown),)


def test_paddleocr_vl_table_answer_without_a_table_is_invalid() -> None:
    assert layouts.parse_paddleocr_vl("Year Total 2024 12", "table").problem == (
        "no OTSL or HTML table in a table answer"
    )


def test_paddleocr_vl_math_rewrite_and_formula_block() -> None:
    assert layouts.parse_paddleocr_vl(r"area \(\pi r^2\) of $c$", "ocr").markdown == r"area  $ \pi r^2 $ of c"
    formula = layouts.parse_paddleocr_vl(r"\frac{a}{b}", "formula")
    assert formula.markdown == "$$\n\\frac{a}{b}\n$$"
    assert formula.blocks == (LayoutBlock("formula", r"\frac{a}{b}"),)
    assert layouts.parse_paddleocr_vl(r"\[x^2\]", "formula").markdown == "$$ x^2 $$"


def _loc(*values: int) -> str:
    return "".join(f"<|LOC_{v}|>" for v in values)


def test_paddleocr_vl_spotting_delimited_and_bare_forms() -> None:
    delimited = (
        "<|TEXT_START|>Hello<|TEXT_END|><|LOC_BEGIN|>"
        + _loc(100, 200, 300, 200, 300, 400, 100, 400)
        + "<|LOC_END|>"
        "<|TEXT_START|> World <|TEXT_END|><|LOC_BEGIN|>" + _loc(0, 0, 10, 0, 10, 5, 0, 5) + "<|LOC_END|>"
    )
    bare = "Hello" + _loc(100, 200, 300, 200, 300, 400, 100, 400) + "World" + _loc(0, 0, 10, 0, 10, 5, 0, 5)

    for text in (delimited, bare):
        answer = layouts.parse_paddleocr_vl(text, "spotting")
        assert answer.valid and answer.markdown == "Hello\n\nWorld"
        assert answer.blocks[0] == LayoutBlock(
            "text",
            "Hello",
            (100.0, 200.0, 300.0, 400.0),
            ((100.0, 200.0), (300.0, 200.0), (300.0, 400.0), (100.0, 400.0)),
        )
        assert answer.blocks[1].box == (0.0, 0.0, 10.0, 5.0)


def test_paddleocr_vl_spotting_without_locations_names_the_request_flag() -> None:
    answer = layouts.parse_paddleocr_vl("Hello World", "spotting")

    assert answer.problem == "no <|LOC_n|> locations: send skip_special_tokens=false for spotting"


# --- dots.ocr (dots_ocr/utils: layout_utils, output_cleaner, format_transformer) ---------------------------


def test_dots_layout_repairs_a_missing_comma_like_output_cleaner() -> None:
    answer = layouts.parse_dots_layout(
        '[{"bbox": [0, 0, 5, 5], "category": "Title", "text": "# A"}'
        '{"bbox": [0, 6, 5, 9], "category": "Text", "text": "b"}]'
    )

    assert answer.valid and answer.markdown == "# A\n\nb"
    assert answer.metadata == {"repairs": ["missing comma between objects"]}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Sorry, no layout.", "the answer is not a JSON list"),
        ('[{"bbox": [0, 0, 5, 5], "text": "x"}]', "a layout element is not an object with a category"),
        (
            '[{"bbox": [9, 0, 5, 5], "category": "Text", "text": "x"}]',
            "bbox [9, 0, 5, 5] is empty or inverted",
        ),
        ('[{"bbox": [0, 0, 5], "category": "Text", "text": "x"}]', "bbox [0, 0, 5] is not four numbers"),
        (
            '[{"bbox": [0, 0, 5, 5], "category": "Text"} oops]',
            "not JSON at character 44: expected ',' or ']', got 'o'",
        ),
    ],
)
def test_dots_layout_invalid_answers(text: str, problem: str) -> None:
    assert layouts.parse_dots_layout(text).problem == problem


def test_dots_layout_formula_and_table_markdown_follow_layoutjson2md() -> None:
    answer = layouts.parse_dots_layout(
        '[{"bbox": [0, 0, 9, 9], "category": "Formula", "text": "E = mc^2"},'
        ' {"bbox": [0, 0, 9, 9], "category": "Formula", "text": "$$a$$"},'
        ' {"bbox": [0, 0, 9, 9], "category": "Table", "text": "<table><tr><td>1</td></tr></table>"},'
        ' {"bbox": [0, 0, 9, 9], "category": "Text", "text": "`$x$`"},'
        ' {"bbox": [0, 0, 9, 9], "category": "Formula", "text": "`code`"},'
        ' {"bbox": [0, 0, 9, 9], "category": "Formula", "text": "\\\\usepackage{amsmath} \\\\alpha"}]'
    )

    # expected: dots.ocr's get_formula_in_markdown / clean_text on each text (no LaTeX: left as is)
    assert answer.markdown.split("\n\n") == [
        "E = mc^2",
        "$$\na\n$$",
        "<table><tr><td>1</td></tr></table>",
        "$x$",
        "`code`",
        "$$\n \\alpha\n$$",
    ]


def test_dots_layout_only_answer_has_boxes_and_no_markdown() -> None:
    answer = layouts.parse_dots_layout('[{"bbox": [1, 2, 3, 4], "category": "Picture"}]')

    assert answer.valid and answer.markdown == ""
    assert answer.blocks == (LayoutBlock("Picture", "", (1.0, 2.0, 3.0, 4.0)),)


def test_dots_boxes_map_back_to_the_callers_image() -> None:
    """A 700x1000 page is seen as 700x1008 (dots.ocr's smart_resize); post_process_cells scales back."""
    seen = layouts.smart_resize(1000, 700)
    assert seen == (1008, 700)

    assert layouts.scale_box((70.0, 504.0, 700.0, 1008.0), (seen[1], seen[0]), (700, 1000)) == (
        70,
        500,
        700,
        1000,
    )
    assert layouts.smart_resize(1, 500) is None  # aspect ratio over 200: dots.ocr refuses it


# --- Nanonets-OCR2 (the tags its prompt asks for) ---------------------------------------------------------


def test_nanonets_tags_checkboxes_and_tables() -> None:
    text = (
        "<watermark>OFFICIAL COPY</watermark>\n# Form\n\n☑ Yes ☐ No ☒ N/A\n\n"
        "<img>A company logo</img>\n\n<table><tr><td>1</td></tr></table>\n\n"
        "Signed: <signature>J. Doe</signature>\n\n$$x^2$$\n\n<page_number>9/22</page_number>"
    )

    answer = layouts.parse_nanonets(text)

    assert answer.valid
    assert answer.markdown == (
        "# Form\n\n☑ Yes ☐ No ☒ N/A\n\n<img>A company logo</img>\n\n<table><tr><td>1</td></tr></table>\n\n"
        "Signed: <signature>J. Doe</signature>\n\n$$x^2$$"
    )
    assert answer.metadata == {
        "page_numbers": ["9/22"],
        "watermarks": ["OFFICIAL COPY"],
        "checkboxes": {"unchecked": 1, "checked": 1, "crossed": 1},
    }
    assert [(block.label, block.text) for block in answer.blocks] == [
        ("image", "A company logo"),
        ("signature", "J. Doe"),
        ("table", "<table><tr><td>1</td></tr></table>"),
        ("formula", "x^2"),
    ]


def test_nanonets_unclosed_tag_is_cut_short() -> None:
    assert layouts.parse_nanonets("Text <img>A logo with").problem == (
        "<img> is opened and never closed (the answer was cut short)"
    )


# --- Qianfan-OCR's <think> layout section -----------------------------------------------------------------


def test_markdown_html_think_section_goes_to_metadata() -> None:
    answer = layouts.parse_markdown_html("<think>title at top, then a table</think>\n# Report")

    assert answer.valid and answer.markdown == "# Report"
    assert answer.metadata == {"thinking": ["title at top, then a table"]}
    opened_by_the_prompt = layouts.parse_markdown_html("title, then a table\n</think>\n\n# Report")
    assert opened_by_the_prompt.markdown == "# Report"
    assert opened_by_the_prompt.metadata == {"thinking": ["title, then a table"]}
    assert layouts.parse_markdown_html("<think>title at top").problem == (
        "a <think> section is opened and never closed (the answer was cut short)"
    )


# --- Fuzz: no text makes any parser raise ------------------------------------------------------------------

_PIECES = [
    "---\n",
    "\n---",
    "primary_language: en\n",
    "rotation_correction: 90\n",
    "is_table: True\n",
    ": ",
    "[",
    "]",
    "{",
    "}",
    '"',
    "\\",
    ",",
    '"bbox": [1, 2, 3, 4]',
    '"category": "Text"',
    "1e9",
    "-",
    "tru",
    "nul",
    "<fcel>",
    "<ecel>",
    "<lcel>",
    "<ucel>",
    "<xcel>",
    "<nl>",
    "<|LOC_5|>",
    "<|TEXT_START|>",
    "<|TEXT_END|>",
    "<|LOC_BEGIN|>",
    "<|LOC_END|>",
    "<img>",
    "</img>",
    "<page_number>",
    "</page_number>",
    "<watermark>",
    "<table>",
    "</table>",
    "<tr>",
    '<td colspan="2">',
    "</td>",
    "<br/>",
    "$$",
    "\\[",
    "\\]",
    "\\(",
    "\\)",
    "<think>",
    "<![foo]>",
    "<!--",
    "</think>",
    "☐",
    "☑",
    "x",
    " ",
    "\n",
]
_SOUP = st.lists(st.sampled_from(_PIECES), max_size=60).map("".join) | st.text(max_size=300)


TEXT_PARSERS = [
    layouts.parse_olmocr,
    layouts.parse_dots_layout,
    layouts.parse_dots_text,
    layouts.parse_nanonets,
    layouts.parse_markdown_html,
    layouts.parse_hunyuan_spotting,
]
"""Every parser that needs only the answer's text."""


def _check(answer: ParsedLayout) -> None:
    assert isinstance(answer.markdown, str)
    assert answer.problem is None or (isinstance(answer.problem, str) and answer.problem)
    assert all(isinstance(block, LayoutBlock) and isinstance(block.text, str) for block in answer.blocks)


@given(_SOUP)
def test_fuzz_task_independent_parsers_never_raise(text: str) -> None:
    for parse in TEXT_PARSERS:
        _check(parse(text))


@given(_SOUP, st.sampled_from([*layouts.PADDLE_TASKS, None]))
def test_fuzz_paddleocr_vl_never_raises(text: str, task: str | None) -> None:
    _check(layouts.parse_paddleocr_vl(text, task))


@given(_SOUP)
def test_fuzz_tables_and_json_never_raise(text: str) -> None:
    assert isinstance(layouts.otsl_to_html(text), str)
    for table in [*layouts.html_tables(text), text]:
        assert all(isinstance(cell, str) for row in layouts.table_rows(table) for cell in row)
    items, repairs, problem = layouts.lenient_json_list(text)
    assert (
        isinstance(items, list) and isinstance(repairs, set) and (problem is None or isinstance(problem, str))
    )


@given(st.integers(min_value=1, max_value=10**5), st.integers(min_value=1, max_value=10**5))
def test_fuzz_smart_resize_sides_are_multiples_of_28(height: int, width: int) -> None:
    seen = layouts.smart_resize(height, width)
    if max(height, width) / min(height, width) > 200:
        assert seen is None
    else:
        assert seen is not None and seen[0] % 28 == 0 and seen[1] % 28 == 0
        assert seen[0] * seen[1] <= layouts.DOTS_MAX_PIXELS


# --- HunyuanOCR spotting (Hunyuan-OCR-master/utils.py process_spotting_response) ---------------------------


def test_hunyuan_spotting_lines_and_corners() -> None:
    answer = layouts.parse_hunyuan_spotting("Invoice(12,30),(480,61)\nTotal: 9.50(40,900),(300,930)")

    assert answer.valid and answer.markdown == "Invoice\nTotal: 9.50"
    assert [block.box for block in answer.blocks] == [(12.0, 30.0, 480.0, 61.0), (40.0, 900.0, 300.0, 930.0)]
    assert layouts.parse_hunyuan_spotting("Invoice Total").problem == (
        "no text with (x1,y1),(x2,y2) coordinates in a spotting answer"
    )


def test_paddleocr_vl_answer_names_its_task_when_none_is_given() -> None:
    spotting = "Hi" + _loc(1, 2, 9, 2, 9, 8, 1, 8)

    assert layouts.parse_paddleocr_vl(spotting).blocks[0].label == "text"
    assert layouts.parse_paddleocr_vl("<fcel>a<nl>").markdown == "<table><tr><td>a</td></tr></table>"
    assert layouts.parse_paddleocr_vl("生甘草").blocks == (LayoutBlock("ocr", "生甘草"),)


def test_table_rows_survive_a_marked_section_html_parser_asserts_on() -> None:
    assert layouts.table_rows("<table><tr><td>1</td><![foo]><td>2</td></tr></table>") == [["1"]]


def test_huge_numbers_are_read_without_python_int_digit_limit() -> None:
    huge = "9" * 5000
    dots = layouts.parse_dots_layout('[{"bbox": [' + huge + ', 0, 5, 5], "category": "Text"}]')
    olmocr = layouts.parse_olmocr(f"---\nprimary_language: en\nrotation_correction: {huge}\n---\nx")
    spots = layouts.parse_paddleocr_vl("a" + f"<|LOC_{huge}|>" * 8, "spotting")

    assert dots.problem == "bbox [inf, 0, 5, 5] is not four numbers"
    assert olmocr.problem == "front matter lacks 'is_rotation_valid'"
    assert spots.problem == "no <|LOC_n|> locations: send skip_special_tokens=false for spotting"
    assert (
        layouts.parse_olmocr(
            "---\nprimary_language: en\nis_rotation_valid: True\nrotation_correction: " + huge + "\n---\nx"
        ).problem
        == f"rotation_correction={huge!r} is not an integer"
    )


def test_olmocr_figure_labels_are_blocks_with_their_boxes() -> None:
    body = "Intro ![A bar chart of sales](page_10_20_300_150.png) and ![](page_0_0_5_5.png)"
    body += " [x](page_1_1_1_1.png)."

    answer = layouts.parse_olmocr(layouts_front_matter() + body)

    assert [(block.label, block.text, block.box) for block in answer.blocks] == [
        ("image", "A bar chart of sales", (10.0, 20.0, 310.0, 170.0)),
        ("image", "", (0.0, 0.0, 5.0, 5.0)),
    ]


def layouts_front_matter() -> str:
    fields = "primary_language: en\nis_rotation_valid: True\nrotation_correction: 0\nis_table: False"
    return f"---\n{fields}\nis_diagram: True\n---\n"


@pytest.mark.parametrize(
    "text",
    [
        "<table><tr><td>x</td>" * 4000,
        "a <img>b " * 10000,
        "a $$ b \\[ " * 10000,
        "word " * 20000,
        "<think>x " * 10000,
        "<|TEXT_START|>x <|LOC_BEGIN|>" * 10000,
        "![x " * 10000,
    ],
    ids=["tables", "img", "math", "words", "think", "spotting", "figures"],
)
def test_a_looping_answer_is_read_in_linear_time(text: str) -> None:
    """A looping model repeats an opener it never closes; lazy regexes would take seconds per answer."""
    started = time.perf_counter()
    for parse in [*TEXT_PARSERS, layouts.parse_paddleocr_vl]:
        parse(text)

    assert time.perf_counter() - started < 2.0


# --- The registered formats (vllm_tasks.ocr.formats.FORMATS) over these parsers ---------------------------


def test_registered_grid_formats_give_pixels_of_the_callers_image() -> None:
    sizes = PageSizes((500, 250), (2000, 1000))
    spotting = FORMATS["hunyuan-spotting"].parse("Total(100,200),(500,400)", sizes)
    paddle = FORMATS["paddleocr-vl"].parse("Hi" + _loc(100, 200, 500, 200, 500, 400, 100, 400), sizes)

    for parsed in (spotting, paddle):
        assert parsed.blocks[0].boxes == [(200, 200, 1000, 400)]
        assert parsed.blocks[0].boxes_normalized == [(100, 200, 500, 400)]
    assert paddle.metadata == {"polygons": [[[200, 200], [1000, 200], [1000, 400], [200, 400]]]}
    assert spotting.metadata == {}
    unsized = FORMATS["hunyuan-spotting"].parse("Total(100,200),(500,400)", PageSizes(None, None))
    assert unsized.blocks[0].boxes == [(100, 200, 500, 400)]  # as normalised, like DeepSeek's without sizes


def test_registered_text_formats_have_no_boxes() -> None:
    sizes = PageSizes((100, 100), (100, 100))
    nanonets = FORMATS["nanonets"].parse("<img>Logo</img> ☑<page_number>2</page_number>", sizes)
    dots_text = FORMATS["dots-ocr-text"].parse(" Hello \n", sizes)

    assert nanonets.markdown == "<img>Logo</img> ☑" and nanonets.metadata["page_numbers"] == ["2"]
    assert [(block.label, block.boxes) for block in nanonets.blocks] == [("image", [])]
    assert dots_text.markdown == "Hello" and dots_text.blocks == []
    assert (
        FORMATS["nanonets"].check("<img>Lo") == "<img> is opened and never closed (the answer was cut short)"
    )
    assert FORMATS["dots-ocr-text"].check("anything") is None


_SCALARS = st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.text(max_size=8)
_JSON = st.recursive(
    _SCALARS | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)  # fmt: skip


@given(st.lists(_JSON, max_size=5), st.booleans())
def test_lenient_json_reads_valid_json_as_the_json_module_does(items: list[object], ascii_only: bool) -> None:
    text = json.dumps(items, ensure_ascii=ascii_only)

    assert layouts.lenient_json_list(text) == (json.loads(text), set(), None)


def test_hunyuan_spotting_corners_after_punctuation_alone_make_no_item() -> None:
    """Tencent's format3: an item's text runs from the previous corners to its own; corners after nothing
    but parentheses and commas (a stray ")", the second pair of a doubled item) are no item."""
    answer = layouts.parse_hunyuan_spotting(")(0,0),(1000,1000),(5,6),(7,8)")

    assert answer.blocks == () and not answer.valid
