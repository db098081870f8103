"""Make docs/images/ocr-annotated.png: what ``OCRResult.draw()`` returns for a DeepSeek-OCR page; and the
sample inputs the docs' OCR examples read (and tests/contract/test_docs_examples.py runs them on):
examples/data/page.png (the page, 480 x 600 px: one DeepSeek-OCR view, no tiles) and examples/data/report.pdf
(two 240 x 300 pt pages: 480 x 600 px at the SDK's 144 dpi).

Illustration only: the page is drawn here with PIL and the grounding output is written by hand in
DeepSeek-OCR's documented format (the CPU test fixture's tiny model writes meaningless text). The boxes,
labels and markdown are produced by the SDK's own parser and ``draw()``.

    .venv/bin/python scripts/make_ocr_figure.py
"""

from __future__ import annotations

from pathlib import Path

import httpx
from PIL import Image, ImageDraw

from vllm_tasks import ocr
from vllm_tasks.images import prepare_image

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "images" / "ocr-annotated.png"
SAMPLES = ROOT / "examples" / "data"
SAMPLE_SIZE = (480, 600)
W, H = 800, 1000

GROUNDING = (
    "<|ref|>title<|/ref|><|det|>[[75, 40, 700, 95]]<|/det|>\n# Quarterly Report 2026\n\n"
    "<|ref|>text<|/ref|><|det|>[[75, 110, 925, 215]]<|/det|>\n"
    "Revenue grew 12% over the previous quarter, driven by the EU region.\n\n"
    "<|ref|>image<|/ref|><|det|>[[75, 250, 925, 560]]<|/det|>\n\n"
    "<|ref|>image_caption<|/ref|><|det|>[[250, 570, 750, 600]]<|/det|>\nFigure 1: Revenue by month\n\n"
    "<|ref|>table<|/ref|><|det|>[[75, 640, 925, 880]]<|/det|>\n"
    "<table><tr><td>Region</td><td>Revenue</td></tr><tr><td>EU</td><td>500</td></tr></table>\n"
)


def page() -> Image.Image:
    image = Image.new("RGB", (W, H), "white")
    d = ImageDraw.Draw(image)
    d.text((70, 50), "Quarterly Report 2026", fill="black", font_size=34)
    for i, line in enumerate(
        [
            "Revenue grew 12% over the previous quarter,",
            "driven by the EU region. Costs were flat.",
            "Margins improved.",
        ]
    ):
        d.text((70, 120 + 30 * i), line, fill="black", font_size=22)
    d.rectangle((90, 270, 710, 540), outline="gray")
    for i, height in enumerate([60, 110, 90, 160, 140, 200, 230]):
        d.rectangle((120 + 80 * i, 530 - height, 170 + 80 * i, 530), fill="#5b8def")
    d.text((220, 575), "Figure 1: Revenue by month", fill="black", font_size=20)
    for row in range(4):
        for col in range(2):
            x, y = 70 + 330 * col, 650 + 55 * row
            d.rectangle((x, y, x + 330, y + 55), outline="black")
            d.text(
                (x + 15, y + 15),
                ["Region", "Revenue", "EU", "500", "US", "420", "APAC", "310"][row * 2 + col],
                fill="black",
                font_size=20,
            )
    return image


def second_page() -> Image.Image:
    image = Image.new("RGB", (W, H), "white")
    d = ImageDraw.Draw(image)
    d.text((70, 50), "Outlook", fill="black", font_size=34)
    for i, line in enumerate(["We expect revenue in Q3 to grow", "by another 8%, led by APAC."]):
        d.text((70, 120 + 30 * i), line, fill="black", font_size=22)
    return image


def write_samples() -> None:
    SAMPLES.mkdir(parents=True, exist_ok=True)
    first, second = (p.resize(SAMPLE_SIZE, Image.Resampling.LANCZOS) for p in (page(), second_page()))
    first.save(SAMPLES / "page.png", optimize=True)
    first.save(SAMPLES / "report.pdf", format="PDF", save_all=True, append_images=[second], resolution=144)
    print(f"wrote {SAMPLES / 'page.png'} and {SAMPLES / 'report.pdf'}")


def main() -> None:
    prepared = prepare_image(page())
    body = {
        "model": "deepseek-ai/DeepSeek-OCR",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": GROUNDING}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 921, "completion_tokens": 180, "total_tokens": 1101},
    }
    result = ocr.parse_response(httpx.Response(200, json=body), prepared, ocr.PROMPTS["markdown"])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    result.draw().save(OUT, optimize=True)
    print(result.markdown)
    print(f"wrote {OUT} ({[b.label for b in result.blocks]})")
    write_samples()


if __name__ == "__main__":
    main()
