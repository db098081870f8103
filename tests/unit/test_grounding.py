"""The DeepSeek-OCR grounding parser: realistic outputs written from the documented format, and properties.

Format (cpu-fixture-models.md, "DeepSeek-OCR output format"): each block is
``<|ref|>LABEL<|/ref|><|det|>[[x1, y1, x2, y2]]<|/det|>`` followed by its content; a ``det`` may hold
several boxes; coordinates are 0-999 of the image's width and height.
"""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_tasks import grounding
from vllm_tasks.grounding import (
    DET_CLOSE,
    DET_OPEN,
    REF_CLOSE,
    REF_OPEN,
    GroundedBlock,
    parse_boxes,
    parse_grounding,
    to_markdown,
)

# A page as DeepSeek-OCR writes it for "<|grounding|>Convert the document to markdown."
MARKDOWN_PAGE = (
    "<|ref|>title<|/ref|><|det|>[[112, 58, 885, 102]]<|/det|>\n"
    "# Quarterly Report 2026\n\n"
    "<|ref|>sub_title<|/ref|><|det|>[[112, 130, 480, 160]]<|/det|>\n"
    "## 1. Revenue\n\n"
    "<|ref|>text<|/ref|><|det|>[[112, 175, 885, 260]]<|/det|>\n"
    "Total revenue was $1,234,567, an increase of 12% over the previous quarter.\n\n"
    "<|ref|>table_caption<|/ref|><|det|>[[112, 280, 600, 300]]<|/det|>\n"
    "Table 1: Revenue by region\n\n"
    "<|ref|>table<|/ref|><|det|>[[112, 305, 885, 450]]<|/det|>\n"
    "<table><tr><td>Region</td><td>Revenue</td></tr><tr><td>EU</td><td>500</td></tr></table>\n\n"
    "<|ref|>image<|/ref|><|det|>[[150, 480, 850, 800]]<|/det|>\n\n\n"
    "<|ref|>image_caption<|/ref|><|det|>[[300, 810, 700, 835]]<|/det|>\n"
    "Figure 1: Revenue over time\n\n"
    "<|ref|>equation<|/ref|><|det|>[[400, 850, 600, 880]]<|/det|>\n"
    "\\[ r = \\frac{R_t - R_{t-1}}{R_{t-1}} \\]\n"
)

# "<|grounding|>OCR this image.": the ref holds the recognised text, nothing follows it.
OCR_LINES = (
    "<|ref|>STORE #42<|/ref|><|det|>[[310, 40, 690, 80]]<|/det|>\n"
    "<|ref|>Milk 1.99<|/ref|><|det|>[[100, 120, 900, 150]]<|/det|>\n"
    "<|ref|>Bread 2.49<|/ref|><|det|>[[100, 160, 900, 190]]<|/det|>\n"
)


def render_grounding(blocks: Iterable[GroundedBlock]) -> str:
    """Write blocks back in DeepSeek-OCR's format (the inverse of :func:`parse_grounding` for complete,
    tag-free blocks)."""
    out: list[str] = []
    for block in blocks:
        if block.label is None:
            out.append(block.content)
            continue
        out.append(f"{REF_OPEN}{block.label}{REF_CLOSE}")
        if block.boxes:
            boxes = ", ".join(f"[{x1}, {y1}, {x2}, {y2}]" for x1, y1, x2, y2 in block.boxes)
            out.append(f"{DET_OPEN}[{boxes}]{DET_CLOSE}")
        out.append(block.content)
    return "".join(out)


def test_markdown_page_blocks_labels_boxes_and_text() -> None:
    blocks = parse_grounding(MARKDOWN_PAGE)
    assert [b.label for b in blocks] == [
        "title",
        "sub_title",
        "text",
        "table_caption",
        "table",
        "image",
        "image_caption",
        "equation",
    ]
    assert blocks[0].boxes == ((112, 58, 885, 102),)
    assert blocks[0].text == "# Quarterly Report 2026"
    assert blocks[4].text.startswith("<table><tr><td>Region</td>")
    assert blocks[5].text == ""
    assert all(b.complete for b in blocks)


def test_markdown_strips_tags_and_leaves_figures_out() -> None:
    markdown = to_markdown(parse_grounding(MARKDOWN_PAGE))
    assert "<|" not in markdown
    assert markdown.startswith("# Quarterly Report 2026\n\n## 1. Revenue\n\nTotal revenue")
    assert "Figure 1: Revenue over time" in markdown
    assert "\n\n\n" not in markdown
    assert markdown.endswith("\\]")


def test_ocr_lines_use_the_ref_text_and_single_newlines() -> None:
    blocks = parse_grounding(OCR_LINES)
    assert [b.text for b in blocks] == ["STORE #42", "Milk 1.99", "Bread 2.49"]
    assert not blocks[0].is_layout
    assert to_markdown(blocks) == "STORE #42\nMilk 1.99\nBread 2.49"


def test_several_boxes_in_one_det() -> None:
    (block,) = parse_grounding("<|ref|>text<|/ref|><|det|>[[10, 20, 30, 40], [50, 60, 70, 80]]<|/det|>\nA\n")
    assert block.boxes == ((10, 20, 30, 40), (50, 60, 70, 80))
    assert block.text == "A"


def test_boxes_are_clamped_ordered_and_rounded() -> None:
    assert parse_boxes("[[1200, -5, 3.6, 40]]") == ((4, 0, 999, 40),)
    assert parse_boxes("[10, 20, 30, 40]") == ((10, 20, 30, 40),)
    assert parse_boxes("[[1, 2, 3]]") == ()


def test_truncated_inside_det_keeps_complete_boxes() -> None:
    text = (
        MARKDOWN_PAGE.split("<|ref|>equation", maxsplit=1)[0]
        + "<|ref|>equation<|/ref|><|det|>[[400, 850, 600, 880], [1, 2"
    )
    blocks = parse_grounding(text)
    assert blocks[-1].label == "equation"
    assert blocks[-1].boxes == ((400, 850, 600, 880),)
    assert not blocks[-1].complete
    assert blocks[-1].text == ""
    assert all(b.complete for b in blocks[:-1])


def test_truncated_inside_ref_label_is_not_text() -> None:
    blocks = parse_grounding("<|ref|>title<|/ref|><|det|>[[1, 2, 3, 4]]<|/det|>\n# T\n\n<|ref|>tex")
    assert [b.complete for b in blocks] == [True, False]
    assert to_markdown(blocks) == "# T"


def test_plain_output_without_grounding_is_one_unlabelled_block() -> None:
    blocks = parse_grounding("Just text.\nSecond line.")
    assert blocks == [GroundedBlock(None, (), "Just text.\nSecond line.")]
    assert to_markdown(blocks) == "Just text.\nSecond line."


def test_eos_and_grounding_tokens_are_stripped() -> None:
    text = "<|ref|>text<|/ref|><|det|>[[1, 2, 3, 4]]<|/det|>\nHi<｜end▁of▁sentence｜>"
    assert to_markdown(parse_grounding(text)) == "Hi"
    assert grounding.strip_tags("<|grounding|>a<|det|>[[1,2,3,4]]<|/det|>b") == "ab"


def test_to_pixels_scales_by_999() -> None:
    assert grounding.to_pixels((0, 0, 999, 999), (2000, 1000)) == (0, 0, 2000, 1000)
    assert grounding.to_pixels((500, 250, 750, 999), (999, 999)) == (500, 250, 750, 999)


def test_parse_never_raises_on_non_string() -> None:
    assert parse_grounding(None) == []  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------

TAGS = st.sampled_from(
    ["<|ref|>", "<|/ref|>", "<|det|>", "<|/det|>", "[[", "]]", "[", "]", ", ", "\n", "999"]
)
coords = st.integers(min_value=0, max_value=999)
boxes = st.tuples(coords, coords, coords, coords).map(
    lambda b: (min(b[0], b[2]), min(b[1], b[3]), max(b[0], b[2]), max(b[1], b[3]))
)
labels = st.sampled_from(sorted(grounding.LAYOUT_LABELS))
contents = st.text(
    alphabet=st.characters(blacklist_characters="<|[]", blacklist_categories=("Cs",)), max_size=40
).map(lambda s: "\n" + s.strip() + "\n\n")
blocks_strategy = st.lists(
    st.builds(GroundedBlock, labels, st.lists(boxes, min_size=1, max_size=3).map(tuple), contents),
    max_size=6,
)


@given(st.lists(st.one_of(TAGS, st.text(max_size=8)), max_size=30).map("".join))
@settings(max_examples=300)
def test_never_raises_on_arbitrary_text(text: str) -> None:
    blocks = parse_grounding(text)
    to_markdown(blocks)
    for block in blocks:
        for box in block.boxes:
            assert all(0 <= v <= 999 for v in box)
            assert box[0] <= box[2] and box[1] <= box[3]


@given(blocks_strategy)
@settings(max_examples=200)
def test_round_trips_well_formed_output(blocks: list[GroundedBlock]) -> None:
    parsed = parse_grounding(render_grounding(blocks))
    assert [(b.label, b.boxes, b.content.strip()) for b in parsed] == [
        (b.label, b.boxes, b.content.strip()) for b in blocks
    ]
    assert all(b.complete for b in parsed)


@given(blocks_strategy.filter(bool), st.data())
@settings(max_examples=200)
def test_output_cut_anywhere_keeps_every_earlier_block(
    blocks: list[GroundedBlock], data: st.DataObject
) -> None:
    text = render_grounding(blocks)
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    parsed = parse_grounding(text[:cut])
    complete = [b for b in parsed if b.complete and b.label is not None]
    # every block but the one that was cut comes back whole, in order
    for got, want in zip(complete[:-1], blocks, strict=False):
        assert (got.label, got.boxes, got.content.strip()) == (want.label, want.boxes, want.content.strip())
    assert sum(not b.complete for b in parsed) <= 1
