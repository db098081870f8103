"""Each OCR output format read from answers the models' authors published (tests/data/ocr_published/,
sources in its SOURCE.md). The expected markdown, blocks and metadata are read off the files by eye."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from vllm_tasks import ocr as ocr_ops
from vllm_tasks.ocr import layouts
from vllm_tasks.ocr.formats import FORMATS, PageSizes
from vllm_tasks.ocr.layouts import LayoutBlock
from vllm_tasks.ocr.presets import OCRPreset

DATA = Path(__file__).resolve().parents[1] / "data" / "ocr_published"


def published(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


# --- olmOCR -----------------------------------------------------------------------------------------------


def test_olmocr_text_page_front_matter_and_body() -> None:
    answer = layouts.parse_olmocr(published("olmocr/edgar.md"))

    assert answer.valid
    assert answer.metadata == {
        "primary_language": "en",
        "is_rotation_valid": True,
        "rotation_correction": 0,
        "is_table": True,
        "is_diagram": False,
    }
    assert answer.markdown.startswith("Edgar (or Eadgar;[1] c. 944 – 8 July 975) was King of the English")
    assert answer.markdown.endswith("free from external attacks and internal disorder, especially")
    assert answer.markdown.count("\n\n") == 2  # three paragraphs, front matter gone
    assert answer.blocks == ()


def test_olmocr_table_page_html_table_rows() -> None:
    answer = layouts.parse_olmocr(published("olmocr/untable.md"))

    assert answer.valid and answer.metadata["is_table"] is True
    assert answer.markdown.startswith(
        "Annex I: Annual mid-year population, United Nations estimates: 2003 - 2012"
    )
    [table] = answer.blocks
    assert table.label == "table" and table.text.startswith("<table>") and table.text.endswith("</table>")
    rows = layouts.table_rows(table.text)
    assert len(rows) == 67
    assert rows[0] == [
        "Continent and country or area\nContinent et pays ou zone",
        "Population estimates (in thousands) - Estimations de population (en milliers)¹",
    ]
    assert rows[1] == [str(year) for year in range(2003, 2013)]
    assert rows[2] == ["AFRICA - AFRIQUE"]
    algeria = "33 003, 33 461, 33 961, 34 507, 35 097, 35 725, 36 383, 37 063, 37 763, 38 482"
    assert rows[3] == ["Algeria - Algérie", *algeria.split(", ")]
    assert rows[-1] == [
        "Barbados - Barbade",
        "271",
        "272",
        "274",
        "275",
        "276",
        "278",
        "279",
        "280",
        "282",
        "283",
    ]


def test_olmocr_blank_page_is_valid_and_empty() -> None:
    answer = layouts.parse_olmocr(published("olmocr/blanktext.md"))

    assert answer.valid and answer.markdown == "" and answer.blocks == ()
    assert answer.metadata["is_table"] is False and answer.metadata["primary_language"] == "en"


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        (
            "rotation_correction: 0",
            "rotation_correction: 45",
            "rotation_correction=45 is not one of 0, 90, 180, 270",
        ),
        ("is_diagram: False\n", "", "front matter lacks 'is_diagram'"),
        ("is_table: True", "is_table: True\nconfidence: 1", "unexpected front matter fields: confidence"),
        ("is_table: True", "is_table: 1", "is_table=1 is not a boolean"),
        ("is_table: True", "is_table True", "front matter line 'is_table True' is not `key: value`"),
        (
            "is_rotation_valid: True\nrotation_correction: 0",
            "is_rotation_valid: False\nrotation_correction: 90",
            "the page is not upright: turn it 90 degrees clockwise",
        ),
    ],
)
def test_olmocr_answers_olmocr_would_reject(old: str, new: str, problem: str) -> None:
    text = published("olmocr/edgar.md")
    assert old in text

    answer = layouts.parse_olmocr(text.replace(old, new, 1))

    assert answer.problem == problem
    assert answer.markdown.startswith("Edgar (or Eadgar")


def test_olmocr_answer_without_front_matter_is_invalid_but_keeps_its_text() -> None:
    body = published("olmocr/edgar.md").split("---\n", 2)[2]

    answer = layouts.parse_olmocr(body)

    assert answer.problem == "no front matter: the answer does not start with '---'"
    assert answer.markdown == body.strip() and answer.metadata == {}


def test_olmocr_yaml_no_is_read_as_pyyaml_reads_it() -> None:
    """PyYAML reads ``no`` (Norwegian) as False; olmOCR turns a boolean language into None."""
    text = published("olmocr/edgar.md").replace("primary_language: en", "primary_language: no", 1)

    answer = layouts.parse_olmocr(text)

    assert answer.valid and answer.metadata["primary_language"] is None


# --- GLM-OCR, LightOnOCR: markdown + HTML + LaTeX ---------------------------------------------------------


def test_glm_ocr_table_answer_rows() -> None:
    text = published("glm-ocr/table.md")

    answer = layouts.parse_markdown_html(text)

    assert answer.valid and answer.markdown == text.strip()
    [table] = answer.blocks
    rows = layouts.table_rows(table.text)
    assert len(rows) == 10
    assert rows[0] == ["项目", "本期金额", "上期金额", "说明"]
    assert rows[1] == [
        "非流动性资产处置损益，包括已计提资产减值准备的冲销部分",
        "-342,273.79",
        "-828,932.00",
        "",
    ]
    assert rows[-1] == [
        "企业取得子公司、联营企业及合营企业的投资成本小于取得投资时应享有被投资单位可辨认净资产公允价值产生的收益",
        "",
        "",
        "",
    ]


def test_glm_ocr_paper_answer_display_formulas() -> None:
    text = published("glm-ocr/paper.md")

    answer = layouts.parse_markdown_html(text)

    assert answer.valid and answer.markdown == text.strip()
    formulas = [block.text for block in answer.blocks]
    assert [block.label for block in answer.blocks] == ["formula"] * 11
    assert formulas[0] == r"\sum_ {i = 1} ^ {n} x _ {i} \frac {\partial R}{\partial x _ {i}} = d R."
    assert formulas[-1].startswith(r"\begin{array}{l} \sum_ {i = 0} ^ {n} \binom {n} {i} (- 1) ^ {n - i}")
    assert formulas[-1].endswith(r"= (- 1) ^ {n + 1} \frac {n}{n + 1}. \\ \end{array}")


def test_glm_ocr_seal_answer_is_plain_text() -> None:
    answer = layouts.parse_markdown_html(published("glm-ocr/seal.md"))

    assert answer.valid and answer.blocks == ()
    assert (
        answer.markdown
        == "中国石油天然气股份有限公司四川销售分公司\n\n510105711890927\n\n发票专用章\n\n5101055004432"
    )


def test_lighton_receipt_answer_cut_in_a_markdown_table() -> None:
    """LightOnOCR writes markdown pipe tables: no HTML table block; the cut is the response's
    ``finish_reason`` to judge, not the format's."""
    answer = layouts.parse_markdown_html(published("lighton-ocr/sroie-receipt.txt"))

    assert answer.valid and answer.blocks == ()
    assert answer.markdown.splitlines()[0] == "Document No : TD01167104"
    assert answer.markdown.endswith("CASH BILL\n\n| CODE")


def test_markdown_html_table_cut_short_is_invalid() -> None:
    text = published("glm-ocr/table.md")

    answer = layouts.parse_markdown_html(text[: text.index("<tr><td>委托他人")])

    assert answer.problem == "an HTML <table> is opened and never closed (the answer was cut short)"
    assert answer.blocks == ()


# --- PaddleOCR-VL -----------------------------------------------------------------------------------------


def test_paddleocr_vl_ocr_answer() -> None:
    answer = layouts.parse_paddleocr_vl(published("paddleocr-vl/ocr_demo2-ocr.txt"), "ocr")

    assert answer.valid and answer.markdown == "生甘草"
    assert answer.blocks == (LayoutBlock("ocr", "生甘草"),)


# --- dots.ocr ---------------------------------------------------------------------------------------------


def test_dots_layout_cut_off_answer_keeps_its_complete_elements() -> None:
    answer = layouts.parse_dots_layout(published("dots-ocr/replicate-sljeff-example.txt"))

    assert answer.problem == "the JSON list is cut off after 7 complete element(s)"
    assert [(block.label, block.box) for block in answer.blocks] == [
        ("Page-header", (1355.0, 199.0, 2103.0, 262.0)),
        ("Picture", (698.0, 455.0, 1846.0, 1010.0)),
        ("Caption", (441.0, 1051.0, 2103.0, 1153.0)),
        ("Picture", (450.0, 1208.0, 1251.0, 1782.0)),
        ("Picture", (1292.0, 1208.0, 2088.0, 1782.0)),
        ("Caption", (526.0, 1821.0, 2021.0, 1878.0)),
        ("Text", (441.0, 1970.0, 2103.0, 2073.0)),
    ]
    assert answer.blocks[1].text == ""
    assert answer.blocks[2].text == (
        "Figure 7: Algorithmic performance measured in ES/s (effective samples per second), for the eight "
        r"highest energy KL coefficients $\ heta_k$, $k = 1, \dots, 8$, for both RWMH (blue) and MLDA (red)."
    )
    assert answer.metadata == {"repairs": ["backslashes JSON does not escape kept as written"]}
    text_block = (
        "and perturbing the calculated values $N(t^)$ and $P(t^)$ with independent Gaussian noise "
        r"$\epsilon \sim N(0, 1)$ (Fig. 8). Our aim is to predict the mean density of predators "
        r"$\mathbb{E}(P)$ over the same period."
    )
    assert answer.markdown == "\n\n".join(
        [
            "A PREPRINT - SEPTEMBER 5, 2022",
            answer.blocks[2].text,
            "Figure 8: The true (blue) and measured (red) densities of prey (left) and predators (right).",
            text_block,
        ]
    )


def test_dots_layout_whole_answer_is_valid() -> None:
    """The published elements closed into a list: the same blocks, no problem."""
    text = published("dots-ocr/replicate-sljeff-example.txt")
    whole = text[: text.rindex(", {")] + "]"

    answer = layouts.parse_dots_layout(whole)

    assert answer.valid and len(answer.blocks) == 7


@pytest.mark.parametrize(
    ("size", "seen"),
    [
        ((700, 1000), (700, 1008)),
        ((3000, 4000), (2884, 3864)),
        ((30, 20), (84, 56)),
        ((1654, 2339), (1652, 2352)),
    ],
)
def test_dots_smart_resize_matches_dots_ocr(size: tuple[int, int], seen: tuple[int, int]) -> None:
    """Expected sides from dots.ocr's own ``smart_resize`` (dots_ocr/utils/image_utils.py) on these sizes."""
    width, height = size

    assert layouts.smart_resize(height, width) == (seen[1], seen[0])


# --- The registered formats on the same answers -----------------------------------------------------------


def test_registered_dots_format_maps_the_published_boxes_to_the_callers_image() -> None:
    """Sent at 2240x2912 (multiples of 28, within dots.ocr's pixel range: the model sees it as sent) from a
    4480x5824 original: every box doubles."""
    answer = published("dots-ocr/replicate-sljeff-example.txt")
    output = FORMATS["dots-ocr-layout"]

    parsed = output.parse(answer, PageSizes((2240, 2912), (4480, 5824)))

    assert parsed.blocks[0].label == "Page-header"
    assert parsed.blocks[0].boxes == [(2710, 398, 4206, 524)]
    assert parsed.blocks[0].boxes_normalized == [(604, 68, 938, 90)]
    assert output.check(answer) == "the JSON list is cut off after 7 complete element(s)"


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("olmocr", "olmocr/edgar.md"),
        ("olmocr", "olmocr/untable.md"),
        ("olmocr", "olmocr/blanktext.md"),
        ("markdown-html", "glm-ocr/table.md"),
        ("markdown-html", "glm-ocr/paper.md"),
        ("markdown-html", "lighton-ocr/sroie-receipt.txt"),
        ("paddleocr-vl", "paddleocr-vl/ocr_demo2-ocr.txt"),
    ],
)
def test_registered_formats_accept_the_published_answers(name: str, path: str) -> None:
    answer = published(path)

    parsed = FORMATS[name].parse(answer, PageSizes((1000, 1400), (2000, 2800)))

    assert FORMATS[name].check(answer) is None
    assert parsed.markdown == getattr(layouts, PARSER_OF[name])(answer).markdown
    assert all(block.boxes == [] for block in parsed.blocks)


PARSER_OF = {
    "olmocr": "parse_olmocr",
    "markdown-html": "parse_markdown_html",
    "paddleocr-vl": "parse_paddleocr_vl",
}


def test_a_preset_naming_the_olmocr_format_gives_its_metadata_in_the_result() -> None:
    preset = OCRPreset(name="olmocr-like", pattern="(?!)", tasks={"page": "Convert."}, output="olmocr")
    answer = published("olmocr/untable.md")
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "allenai/olmOCR-2-7B-1025",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 3000, "total_tokens": 4000},
    }

    result = ocr_ops.parse_response(
        httpx.Response(200, json=body), "https://x/page.png", "Convert.", preset=preset
    )

    assert result.preset == "olmocr-like"
    assert result.metadata["is_table"] is True and result.metadata["rotation_correction"] == 0
    assert result.markdown.startswith("Annex I: Annual mid-year population")
    assert [block.label for block in result.blocks] == ["table"]


def test_hunyuan_spotting_reads_tencents_own_cases_of_the_format() -> None:
    """Each answer of Tencent's spotting-parser tests gives exactly the items Tencent's parser must read
    (text with its parentheses, a second pair of corners bound to no new item, text over two lines)."""
    cases = json.loads(published("hunyuan-ocr/spotting-format3-cases.json"))
    assert len(cases) == 6
    for case in cases:
        answer = layouts.parse_hunyuan_spotting(case["answer"])
        items = [[block.text, *(int(value) for value in block.box or ())] for block in answer.blocks]
        assert items == case["items"], case["answer"]
        assert answer.valid and answer.markdown == "\n".join(item[0] for item in case["items"])
