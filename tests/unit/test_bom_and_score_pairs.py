"""A UTF-8 byte order mark opens many files written on Windows: it is no part of the first row of a text
or JSONL input (CSV drops it already). A ``ScoreResult`` keeps the inputs of its pairs only when they pair
into its scores."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

import vllm_tasks as vt
from vllm_tasks.jobs.inputs import InputSpec, read_chunks, text_lines
from vllm_tasks.types import ScoreResult, ScorerKind
from vllm_tasks.types.common import Usage

BOM = b"\xef\xbb\xbf"


def test_a_byte_order_mark_is_not_part_of_the_first_line() -> None:
    assert list(text_lines(io.BytesIO(BOM + b"first\r\nsecond\n"), "x.txt")) == ["first", "second"]
    assert list(text_lines(io.BytesIO(b"first\n" + BOM + b"second"), "x.txt")) == [
        "first",
        BOM.decode() + "second",
    ]


def test_a_jsonl_input_with_a_byte_order_mark_reads_its_first_row(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(BOM + b'{"text": "a"}\n{"text": "b"}\n')
    (chunk,) = read_chunks(InputSpec(path=path, format="jsonl"), chunk_rows=10)
    assert chunk.texts == ["a", "b"]


def result(scores: list[float]) -> ScoreResult:
    return ScoreResult(scores=np.array(scores), model="m", scorer=ScorerKind.CROSS_ENCODER, usage=Usage())


@pytest.mark.parametrize(
    ("firsts", "seconds", "mode"),
    [(["q"], ["a", "b", "c"], "1:N"), (["q"], ["a", "b"], "N:N"), (["q", "r", "s"], ["a", "b"], "N:N")],
)
def test_inputs_that_do_not_pair_into_the_scores_are_refused(
    firsts: list[str], seconds: list[str], mode: str
) -> None:
    with pytest.raises(vt.InvalidInputError, match="do not pair into the 2 scores"):
        result([0.5, 0.2]).keep_inputs(firsts, seconds, mode)


@pytest.mark.parametrize(
    ("firsts", "seconds", "mode"), [(["q"], ["a", "b"], "1:N"), (["q", "r"], ["a", "b"], "N:N")]
)
def test_inputs_that_pair_into_the_scores_are_shown(firsts: list[str], seconds: list[str], mode: str) -> None:
    html = result([0.5, 0.2]).keep_inputs(firsts, seconds, mode).to_html()
    assert "a" in html and "b" in html and "q" in html
