"""FakeVLLM answering as DeepSeek-OCR-2, Unlimited-OCR and dots.ocr over real HTTP: the served model picks
its preset, the fake checks the message is shaped for that model, and the answer is read with the preset's
format (boxes in the caller's pixels)."""

from __future__ import annotations

import io

import pytest
from PIL import Image

import vllm_tasks as vt
from vllm_tasks.testing import OCR_TASKS, FakeVLLM, grounding_output

GROUNDED = grounding_output([("title", (0, 0, 999, 200), "# Invoice 7")])
DOTS_LAYOUT = '[{"bbox": [0, 0, 56, 28], "category": "Title", "text": "# Invoice 7"}]'


def png(size: tuple[int, int] = (112, 84)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, "white").save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("model", "preset", "answer", "prompt_start", "block"),
    [
        (
            "deepseek-ai/DeepSeek-OCR-2",
            "deepseek-ocr2",
            GROUNDED,
            "<|grounding|>Convert the document to markdown.",
            ("title", [(0, 0, 112, 17)]),
        ),
        (
            "rednote-hilab/dots.ocr",
            "dots-ocr",
            DOTS_LAYOUT,
            "<|img|><|imgpad|><|endofimg|>Please",
            ("Title", [(0, 0, 56, 28)]),
        ),
    ],
)
def test_the_fake_answers_as_the_served_model(
    model: str, preset: str, answer: str, prompt_start: str, block: tuple[str, list[tuple[int, ...]]]
) -> None:
    with (
        FakeVLLM(model=model, tasks=OCR_TASKS, ocr_preset=preset, ocr_output=answer) as fake,
        vt.Client(fake.url) as client,
    ):
        result = client.ocr(png())
        sent = fake.received("/v1/chat/completions")[-1].json["messages"][0]["content"]
    assert result.preset == preset and result.markdown == "# Invoice 7"
    assert [part["type"] for part in sent] == ["image_url", "text"]
    assert sent[1]["text"].startswith(prompt_start)
    assert [(b.label, b.boxes) for b in result.blocks] == [block]


def test_the_fake_takes_unlimited_ocr_s_tag_prompt_and_guard() -> None:
    with (
        FakeVLLM(
            model="baidu/Unlimited-OCR", tasks=OCR_TASKS, ocr_preset="unlimited-ocr", ocr_output="Text."
        ) as fake,
        vt.Client(fake.url) as client,
    ):
        result = client.ocr(png(), require_ngram_processor=True)
        body = fake.received("/v1/chat/completions")[-1].json
    assert result.preset == "unlimited-ocr" and result.markdown == "Text."
    assert body["messages"][0]["content"][1]["text"] == "<image>document parsing."
    assert body["vllm_xargs"] == {"ngram_size": 35, "window_size": 128}
