"""FakeVLLM answering as an OCR preset's model, and ``preset=`` through ocr_dir, Ray's OCR, the LangChain
loader and the CLI, over real HTTP."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

import vllm_tasks as vt
from vllm_tasks import cli
from vllm_tasks.ocr import PageQuality
from vllm_tasks.ocr.presets import GENERIC
from vllm_tasks.testing import OCR_TASKS, FakeVLLM, grounding_output

PAGE = grounding_output(
    [("title", (0, 0, 999, 200), "# Invoice 7"), ("text", (0, 300, 999, 600), "Due now.")]
)
IMAGE_ONLY = replace(GENERIC, name="image-only", pattern=r"image[-_]only", tasks={"ocr": ""}, content="image")


def png(color: str = "white", size: tuple[int, int] = (64, 48)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


def test_generic_fake_answers_markdown_and_sees_no_deepseek_extras() -> None:
    with (
        FakeVLLM(model="qwen-vl", tasks=OCR_TASKS, ocr_preset="generic", ocr_output=PAGE) as fake,
        vt.Client(fake.url) as client,
    ):
        with pytest.raises(vt.InvalidInputError, match="no OCR preset recognises"):
            client.ocr(png())
        result = client.ocr(png(), preset="generic")
        assert result.markdown == "# Invoice 7\n\nDue now." and "<|ref|>" not in result.text
        assert result.preset == "generic" and result.blocks == []
        (request,) = fake.received("/v1/chat/completions")  # no n-gram processor check
        assert "vllm_xargs" not in request.json


def test_fake_refuses_a_message_shaped_for_another_model() -> None:
    with (
        FakeVLLM(model="image-only-ocr", tasks=OCR_TASKS, ocr_preset=IMAGE_ONLY, ocr_output="Text.") as fake,
        vt.Client(fake.url) as client,
    ):
        assert client.ocr(png(), preset=IMAGE_ONLY).markdown == "Text."
        with pytest.raises(
            vt.BadRequestError, match=r"the image alone; this message's parts are \['image', 'text'\]"
        ):
            client.ocr(png(), preset="generic")
    with (
        FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS) as fake,
        vt.Client(fake.url) as client,
        pytest.raises(vt.BadRequestError, match="the image then the prompt"),
    ):
        client.ocr(png(), preset=replace(GENERIC, content="text-image"))


def test_fake_returns_token_ids_that_depend_on_the_answer() -> None:
    with FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS) as fake, vt.Client(fake.url) as client:
        asked = {"extra_body": {"return_token_ids": True}}
        markdown = client.ocr(png(), **asked)
        free = client.ocr(png(), task="free", **asked)
        assert markdown.token_ids is not None and free.token_ids is not None
        assert (
            markdown.token_ids != free.token_ids
            and len(markdown.token_ids) == markdown.usage.completion_tokens
        )
        assert (
            markdown.prompt_token_ids is not None
            and len(markdown.prompt_token_ids) == markdown.usage.prompt_tokens
        )
        assert markdown.prompt_token_ids != free.prompt_token_ids
        assert client.ocr(png()).token_ids is None


def test_ocr_dir_takes_a_preset_and_resumes_only_with_it(tmp_path: Path) -> None:
    scans = tmp_path / "scans"
    scans.mkdir()
    (scans / "a.png").write_bytes(png())
    with FakeVLLM(model="qwen-vl", tasks=OCR_TASKS, ocr_preset="generic", ocr_output=PAGE) as fake:
        report = vt.ocr_dir(fake.url, scans, tmp_path / "md", preset="generic")
        assert report.complete
        assert (tmp_path / "md" / "a.md").read_text().startswith("# Invoice 7")
        with pytest.raises(vt.jobs.JobMismatch, match="preset"):
            vt.ocr_dir(fake.url, scans, tmp_path / "md", preset=replace(GENERIC, tasks={"md": "Markdown:"}))
        with pytest.raises(vt.InvalidInputError, match=r"differs from params\.preset"):
            vt.ocr_dir(
                fake.url, scans, tmp_path / "md", params=vt.OCRParams(preset="deepseek-ocr"), preset="generic"
            )


def test_ray_ocr_langchain_loader_and_cli_take_a_preset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from vllm_tasks.integrations.langchain import VLLMOCRLoader
    from vllm_tasks.integrations.ray import OCR

    image = tmp_path / "page.png"
    image.write_bytes(png())
    with FakeVLLM(model="qwen-vl", tasks=OCR_TASKS, ocr_preset="generic", ocr_output=PAGE) as fake:
        column = np.empty(1, dtype=object)
        column[:] = [png()]
        out = OCR(settings=vt.ClientSettings(fake.url), preset="generic")({"image": column})
        assert out["markdown"].tolist() == ["# Invoice 7\n\nDue now."]
        docs = VLLMOCRLoader(image, base_url=fake.url, preset="generic").load()
        assert docs[0].page_content == "# Invoice 7\n\nDue now."
        assert cli.main(["ocr", str(image), "--url", fake.url, "--preset", "generic"]) == 0
        assert capsys.readouterr().out.startswith("# Invoice 7")
        sent = [json.loads(r.body) for r in fake.received("/v1/chat/completions")]
        assert all("vllm_xargs" not in body for body in sent) and len(sent) == 3


def test_a_deepseek_fake_still_answers_per_prompt(tmp_path: Path) -> None:
    with (
        FakeVLLM(model="deepseek-ocr", tasks=OCR_TASKS, ocr_output=PAGE) as fake,
        vt.Client(fake.url) as client,
    ):
        assert [b.label for b in client.ocr(png()).blocks] == ["title", "text"]
        assert client.ocr(png(), task="free").text == "# Invoice 7\n\nDue now."
        generic: Any = client.ocr(png(), preset="generic")  # DeepSeek-OCR read a plain instruction
        assert generic.markdown == "# Invoice 7\n\nDue now." and generic.blocks == []


@pytest.mark.parametrize("name", sorted(vt.ocr.presets.PRESETS))
@pytest.mark.parametrize("output", [PAGE, "Plain words on a page."])
def test_every_preset_s_fake_answers_in_a_form_its_format_accepts(name: str, output: str) -> None:
    """A fake whose answer its own preset's format refuses would fail every page of a job (the ladder)."""
    with (
        FakeVLLM(model=name, tasks=OCR_TASKS, ocr_preset=name, ocr_output=output) as fake,
        vt.Client(fake.url) as client,
    ):
        result = client.ocr(png(), preset=name, max_tokens=2000)
    assert result.finish_reason == "stop"
    assert "Invoice 7" in result.markdown or "Plain words" in result.markdown
    output_format = vt.ocr.formats.FORMATS[vt.ocr.presets.PRESETS[name].output]
    assert output_format.check(result.text) is None


def test_ocr_dir_reads_and_checks_each_page_in_its_task_s_format(tmp_path: Path) -> None:
    """HunyuanOCR's spotting task: a grounded page comes back as lines with corners, recorded in
    pages.jsonl with the preset; text without corners fails the spotting format's check, so the ladder
    tries again and the page fails, where the markdown task keeps the same text."""
    scans = tmp_path / "scans"
    scans.mkdir()
    (scans / "a.png").write_bytes(png(size=(200, 100)))
    spotting = vt.OCRParams(task="spotting")
    with FakeVLLM(
        model="tencent/HunyuanOCR", tasks=OCR_TASKS, ocr_preset="hunyuan-ocr", ocr_output=PAGE
    ) as fake:
        assert vt.ocr_dir(fake.url, scans, tmp_path / "spots", params=spotting).complete
    (record,) = [json.loads(line) for line in (tmp_path / "spots" / "pages.jsonl").read_text().splitlines()]
    assert record["preset"] == "hunyuan-ocr" and record["metadata"] == {} and record["tries"] == 1
    assert [(block["text"], block["boxes"]) for block in record["blocks"]] == [
        ("# Invoice 7", [[0, 0, 199, 20]]),  # 999 of the 0-1000 grid
        ("Due now.", [[0, 30, 199, 60]]),
    ]
    with FakeVLLM(
        model="tencent/HunyuanOCR", tasks=OCR_TASKS, ocr_preset="hunyuan-ocr", ocr_output="Due."
    ) as fake:
        failed = vt.ocr_dir(fake.url, scans, tmp_path / "failed", params=spotting)
        tries = len(fake.received("/v1/chat/completions"))
        kept = vt.ocr_dir(fake.url, scans, tmp_path / "kept")
    assert not failed.complete and kept.complete and tries == 1 + len(PageQuality().retry_temperatures)
    assert any("page 1: invalid" in message for _, _, message in failed.failed), failed.failed


def test_pages_jsonl_keeps_what_the_model_said_of_the_page(tmp_path: Path) -> None:
    scans = tmp_path / "scans"
    scans.mkdir()
    (scans / "a.png").write_bytes(png())
    with FakeVLLM(model="olmOCR-2", tasks=OCR_TASKS, ocr_preset="olmocr", ocr_output="Hello.") as fake:
        assert vt.ocr_dir(fake.url, scans, tmp_path / "md").complete
    (record,) = [json.loads(line) for line in (tmp_path / "md" / "pages.jsonl").read_text().splitlines()]
    assert record["preset"] == "olmocr" and record["markdown"] == "Hello."
    assert record["metadata"]["primary_language"] == "en" and record["metadata"]["rotation_correction"] == 0
