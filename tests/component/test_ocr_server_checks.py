"""ocr() / ocr_pdf() glue against FakeVLLM configured like the `ocr` and `ocr-no-processor` fixtures
(moved from the contract tier: tests/component/test_fake_replay.py holds the fakes to the real servers'
recorded answers, among them the n-gram processor check on both): PDF pages in order with their sizes,
usage and truncation; the missing processor found, reported and warned about."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

import vllm_tasks as vt

from ..fakes import fake_like


def page(text: str = "Hello OCR", size: tuple[int, int] = (320, 240)) -> Image.Image:
    image = Image.new("RGB", size, "white")
    ImageDraw.Draw(image).text((20, 20), text, fill="black")
    return image


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_three_page_pdf(tmp_path: Path) -> None:
    pdf = tmp_path / "three.pdf"
    pages = [page(f"Page {n}", (300, 400)) for n in (1, 2, 3)]
    pages[0].save(pdf, format="PDF", save_all=True, append_images=pages[1:], resolution=72)
    with fake_like("ocr") as ocr, vt.Client(ocr.base_url, max_retries=0) as client:
        with pytest.warns(vt.ocr.OCRTruncatedWarning):
            one = client.ocr(png(page("Page 1", (400, 534))), max_tokens=4)
        with pytest.warns(vt.ocr.OCRTruncatedWarning):
            # 400 x 534 pixels; one try per page: each kept truncated
            document = client.ocr_pdf(pdf, max_tokens=4, concurrency=2, dpi=96, quality=None)
    assert [p.page for p in document.pages] == [1, 2, 3]
    assert [p.result.image_size for p in document.pages] == [(400, 534)] * 3
    assert all(p.result.usage.prompt_tokens == one.usage.prompt_tokens for p in document.pages)
    assert all(p.result.usage.completion_tokens == 4 for p in document.pages)
    assert document.truncated_pages == [1, 2, 3]
    assert document.usage.prompt_tokens == sum(p.result.usage.prompt_tokens for p in document.pages)
    assert document.markdown.count("\n\n---\n\n") == 2


def test_processor_check_false_without_the_flag() -> None:
    with fake_like("ocr-no-processor") as ocr, vt.Client(ocr.base_url, max_retries=0) as client:
        assert client.check_ngram_processor() is False
        report = client.probe()
        assert report.ngram_processor is False
        assert "ocr-ngram-processor-missing" in [a.id for a in report.advisories]
        with pytest.raises(vt.UnsupportedByServer, match="--logits-processors"):
            client.ocr(png(page()), require_ngram_processor=True)


def test_missing_processor_warns_on_first_ocr() -> None:
    with fake_like("ocr-no-processor") as ocr, vt.Client(ocr.base_url, max_retries=0) as client:
        with (
            pytest.warns(vt.ocr.NGramProcessorMissingWarning, match="NGramPerReqLogitsProcessor"),
            pytest.warns(vt.ocr.OCRTruncatedWarning),
        ):
            result = client.ocr(png(page()), max_tokens=1)
        assert result.usage.completion_tokens == 1 and result.truncated
