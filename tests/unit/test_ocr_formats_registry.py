"""Every format in vllm_tasks.ocr.formats.FORMATS keeps the registry's contract, whatever the answer: parse
never raises and gives markdown, well-formed blocks and JSON-able metadata; check never raises and gives a
reason or None. Answers mix each format's markers with noise, cut anywhere (as max_tokens cuts them)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_tasks.ocr.formats import FORMATS, PageSizes
from vllm_tasks.types.ocr import OCRBlock

MARKERS = st.sampled_from(
    [
        "<|ref|>", "<|/ref|>", "<|det|>", "<|/det|>", "[[", "]]", ", ", "0", "999", "title", "text",
        "---\n", "rotation_correction: 90\n", "is_rotation_valid: false\n", '{"bbox": [',
        '"category": "Text"',
        '"text": "', "}", "[", "]", "<table>", "<td>", "</td>", "</table>", "$$", "\\frac{a}{b}", "<img>",
        "</img>", "<page_number>", "</page_number>", "<watermark>", "☐", "☑", "\n", " ", "#", "|",
    ]
)  # fmt: skip
ANSWERS = st.lists(st.one_of(MARKERS, st.text(max_size=6)), max_size=40).map("".join)
SIZES = st.one_of(st.none(), st.tuples(st.integers(1, 5000), st.integers(1, 5000)))


@pytest.mark.parametrize("name", FORMATS)
@given(answer=ANSWERS, sent=SIZES, original=SIZES)
@settings(max_examples=150, deadline=None)
def test_a_format_reads_any_answer_without_raising(
    name: str, answer: str, sent: tuple[int, int] | None, original: tuple[int, int] | None
) -> None:
    output = FORMATS[name]
    parsed = output.parse(answer, PageSizes(sent, original))
    assert isinstance(parsed.markdown, str)
    assert all(isinstance(block, OCRBlock) for block in parsed.blocks)
    for block in parsed.blocks:
        assert all(len(box) == 4 and all(isinstance(v, int) for v in box) for box in block.boxes)
        assert len(block.boxes) == len(block.boxes_normalized)
    json.dumps(parsed.metadata)
    reason = output.check(answer)
    assert reason is None or (isinstance(reason, str) and reason)
