"""OCR presets: which preset a served model gets, what each preset puts on the wire, what is refused before
any request, and how its format reads the answer (vllm_tasks/ocr/presets.py, formats.py)."""

from __future__ import annotations

import base64
import io
import json
from dataclasses import replace
from typing import Any

import pytest
from PIL import Image
from pytest_httpx import HTTPXMock

from vllm_tasks import ocr as ocr_ops
from vllm_tasks.errors import InvalidInputError
from vllm_tasks.ocr.formats import FORMATS, PageSizes, block_from_pixels
from vllm_tasks.ocr.presets import DEEPSEEK_OCR, GENERIC, PRESETS, OCRPreset, ocr_preset, recognised
from vllm_tasks.types.server import ModelCard, ServerInfo

from .conftest import BASE

CHAT = f"{BASE}/v1/chat/completions"


def info_of(model_id: str, root: str | None = None) -> ServerInfo:
    return ServerInfo(
        base_url=BASE, version="0.32.0", models=(ModelCard(id=model_id, root=root),), routes=None
    )


def serve(httpx_mock: HTTPXMock, model_id: str, root: str | None = None) -> None:
    """Discovery of a server serving ``model_id`` (vLLM 0.32)."""
    httpx_mock.add_response(url=f"{BASE}/version", json={"version": "0.32.0"}, is_reusable=True)
    card = {"id": model_id, "object": "model", "root": root or model_id, "max_model_len": 4096}
    models = {"object": "list", "data": [card]}
    httpx_mock.add_response(url=f"{BASE}/v1/models", json=models, is_reusable=True)
    not_found = {"detail": "Not Found"}
    httpx_mock.add_response(url=f"{BASE}/openapi.json", status_code=404, json=not_found, is_reusable=True)


def answer(text: str, **extra: Any) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text}}
    choice["finish_reason"] = "stop"
    choice.update(extra.pop("choice", {}))
    usage = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
    return {"object": "chat.completion", "model": "m", "choices": [choice], "usage": usage, **extra}


def sent(httpx_mock: HTTPXMock) -> list[dict[str, Any]]:
    return [json.loads(r.content) for r in httpx_mock.get_requests() if r.url.path == "/v1/chat/completions"]


def png(size: tuple[int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, "white").save(buffer, format="PNG")
    return buffer.getvalue()


def sent_size(body: dict[str, Any]) -> tuple[int, int]:
    url = next(p for p in body["messages"][0]["content"] if p["type"] == "image_url")["image_url"]["url"]
    size: tuple[int, int] = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).size
    return size


# ---------------------------------------------------------------------------------------- recognition


@pytest.mark.parametrize(
    ("model_id", "root", "name"),
    [
        ("deepseek-ocr", None, "deepseek-ocr"),
        ("ocr", "deepseek-ai/DeepSeek-OCR", "deepseek-ocr"),
        ("served", "/models/DeepSeek_OCR", "deepseek-ocr"),
    ],
)
def test_the_served_model_picks_its_preset(model_id: str, root: str | None, name: str) -> None:
    assert ocr_preset(info_of(model_id, root), None).name == name


@pytest.mark.parametrize("root", ["stepfun-ai/GOT-OCR-2.0-hf", "Qwen/Qwen2.5-VL-3B-Instruct", "llava"])
def test_an_unknown_model_is_a_typed_error_naming_the_presets(root: str) -> None:
    with pytest.raises(InvalidInputError, match="no OCR preset recognises") as caught:
        ocr_preset(info_of("served", root), None)
    assert caught.value.field == "preset"
    for name in PRESETS:
        assert repr(name) in str(caught.value)
    assert recognised(info_of("served", root), None) is None


def test_generic_is_chosen_only_by_name_and_an_unknown_name_is_refused() -> None:
    info = info_of("ocr", "deepseek-ai/DeepSeek-OCR")
    assert ocr_preset(info, None, "generic") is GENERIC
    custom = replace(GENERIC, name="mine")
    assert ocr_preset(info, None, custom) is custom
    with pytest.raises(InvalidInputError, match="'deepseek-ocr', 'generic'"):
        ocr_preset(info, None, "paddle")
    with pytest.raises(InvalidInputError, match="not an OCR preset"):
        ocr_ops.OCRParams(preset="paddle")


def test_a_preset_that_cannot_work_is_refused_when_made() -> None:
    with pytest.raises(InvalidInputError, match=r"preset\.output"):
        OCRPreset(name="x", pattern="x", tasks={"ocr": "OCR:"}, output="nope")
    with pytest.raises(InvalidInputError, match=r"preset\.content"):
        OCRPreset(name="x", pattern="x", tasks={"ocr": "OCR:"}, content="audio")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"preset\.tasks"):
        OCRPreset(name="x", pattern="x", tasks={})


# ------------------------------------------------------------------------------------------- the wire


def test_unknown_model_sends_no_page(make_client: Any, httpx_mock: HTTPXMock) -> None:
    serve(httpx_mock, "qwen-vl", "Qwen/Qwen2.5-VL-3B-Instruct")
    with pytest.raises(InvalidInputError, match="preset="):
        make_client().ocr(png((8, 8)))
    assert sent(httpx_mock) == []


def test_generic_sends_image_then_instruction_and_nothing_of_deepseek(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    serve(httpx_mock, "qwen-vl", "Qwen/Qwen2.5-VL-3B-Instruct")
    httpx_mock.add_response(url=CHAT, json=answer("# Title\n\nBody\n"))
    result = make_client().ocr(png((8, 8)), preset="generic")
    (body,) = sent(httpx_mock)  # no n-gram processor check either
    content = body["messages"][0]["content"]
    assert [part["type"] for part in content] == ["image_url", "text"]
    assert content[1]["text"] == GENERIC.tasks["markdown"]
    assert "vllm_xargs" not in body and "skip_special_tokens" not in body
    assert body["temperature"] == 0.0 and body["model"] == "qwen-vl"
    assert result.markdown == "# Title\n\nBody" and result.blocks == [] and result.preset == "generic"
    assert result.prompt == GENERIC.tasks["markdown"] and result.metadata == {}


@pytest.mark.parametrize(
    ("field", "value"),
    [("ngram_size", 30), ("ngram_size", None), ("window_size", 64), ("whitelist_token_ids", [1])],
)
def test_deepseek_fields_are_refused_for_a_preset_without_the_guard(
    make_client: Any, httpx_mock: HTTPXMock, field: str, value: Any
) -> None:
    serve(httpx_mock, "qwen-vl")
    with pytest.raises(InvalidInputError, match="n-gram guard") as caught:
        make_client().ocr(png((8, 8)), preset="generic", **{field: value})
    assert caught.value.field == field
    with pytest.raises(InvalidInputError, match="require_ngram_processor"):
        make_client().ocr(png((8, 8)), preset="generic", require_ngram_processor=True)
    assert sent(httpx_mock) == []


@pytest.mark.parametrize(
    ("content", "prompt", "parts"),
    [
        ("image-text", "OCR:", [("image_url", None), ("text", "OCR:")]),
        ("text-image", "OCR:", [("text", "OCR:"), ("image_url", None)]),
        ("image", "", [("image_url", None)]),
        ("image-tag", "<image>\nOCR:", [("image_url", None), ("text", "<image>\nOCR:")]),
    ],
)
def test_the_message_has_the_preset_s_shape(
    make_client: Any, httpx_mock: HTTPXMock, content: Any, prompt: str, parts: list[tuple[str, Any]]
) -> None:
    preset = OCRPreset(
        name="shaped",
        pattern="shaped",
        tasks={"ocr": "OCR:", "table": "Table Recognition:"},
        content=content,
        sampling={"temperature": 0.2, "top_p": 0.9, "repetition_penalty": 1.0},
        extra_body={"mm_processor_kwargs": {"max_pixels": 1000}},
    )
    serve(httpx_mock, "shaped-model")
    httpx_mock.add_response(url=CHAT, json=answer("text"), is_reusable=True)
    client = make_client()
    result = client.ocr(png((8, 8)), preset=preset, temperature=0.5, max_tokens=64)
    (body,) = sent(httpx_mock)
    assert [(p["type"], p.get("text")) for p in body["messages"][0]["content"]] == parts
    assert body["temperature"] == 0.5 and body["top_p"] == 0.9 and body["repetition_penalty"] == 1.0
    assert body["max_tokens"] == 64 and body["mm_processor_kwargs"] == {"max_pixels": 1000}
    assert result.prompt == prompt and result.preset == "shaped"
    if content == "image":
        with pytest.raises(InvalidInputError, match="image alone"):
            client.ocr(png((8, 8)), preset=preset, prompt="Read it")
    else:
        client.ocr(png((8, 8)), preset=preset, task="table")
        assert "Table Recognition:" in json.dumps(sent(httpx_mock)[-1]["messages"])


def test_tasks_prompts_and_their_errors(make_client: Any, httpx_mock: HTTPXMock) -> None:
    serve(httpx_mock, "deepseek-ocr")
    httpx_mock.add_response(url=CHAT, json=answer("x"), is_reusable=True)
    client = make_client()
    located = client.ocr(png((8, 8)), task="locate:Total", ngram_size=None)
    assert located.prompt == "Locate <|ref|>Total<|/ref|> in the image."
    assert client.ocr(png((8, 8)), prompt="free", ngram_size=None).prompt == "Free OCR."
    assert client.ocr(png((8, 8)), prompt="Read the title.", ngram_size=None).prompt == "Read the title."
    with pytest.raises(InvalidInputError, match="markdown, ocr, free, figure, describe, locate:TEXT"):
        client.ocr(png((8, 8)), task="table", ngram_size=None)
    with pytest.raises(InvalidInputError, match="not a task"):
        client.ocr(png((8, 8)), task="locate", ngram_size=None)
    with pytest.raises(InvalidInputError, match="prompt="):
        client.ocr(png((8, 8)), task="free", prompt="Free OCR.")
    assert len(sent(httpx_mock)) == 3


def test_the_preset_s_max_side_and_side_multiple_size_the_image(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    preset = replace(GENERIC, name="sized", max_side=100, side_multiple=28)
    serve(httpx_mock, "m")
    answered = "<|ref|>text<|/ref|><|det|>[[0, 0, 499, 499]]<|/det|>\nHi"
    httpx_mock.add_response(url=CHAT, json=answer(answered), is_reusable=True)
    client = make_client()
    result = client.ocr(png((400, 200)), preset=preset)
    assert sent_size(sent(httpx_mock)[0]) == result.sent_size == (112, 56)  # 100 x 50, rounded to 28s
    assert result.image_size == (400, 200)
    result = client.ocr(png((400, 200)), preset=preset, max_side=None)
    assert result.sent_size == (392, 196)
    grounded = client.ocr(png((400, 200)), preset=replace(preset, output="deepseek-grounding"))
    assert grounded.blocks[0].boxes == [(0, 0, 200, 100)]  # in pixels of the caller's 400 x 200 image


def test_deepseek_stays_the_recipe_with_its_overrides() -> None:
    plan = ocr_ops.plan_request(DEEPSEEK_OCR, ocr_ops.OCRParams())
    assert plan.fields == {
        "temperature": 0.0,
        "skip_special_tokens": False,
        "max_tokens": 4096,
        "vllm_xargs": {"ngram_size": 30, "window_size": 90, "whitelist_token_ids": [128821, 128822]},
    }
    assert plan.max_side == 4096 and plan.checks_processor
    changed = ocr_ops.plan_request(DEEPSEEK_OCR, ocr_ops.OCRParams(ngram_size=20, whitelist_token_ids=None))
    assert changed.fields["vllm_xargs"] == {"ngram_size": 20, "window_size": 90}
    off = ocr_ops.plan_request(DEEPSEEK_OCR, ocr_ops.OCRParams(ngram_size=None))
    assert "vllm_xargs" not in off.fields and not off.checks_processor


def test_token_ids_are_read_when_the_server_returns_them(make_client: Any, httpx_mock: HTTPXMock) -> None:
    serve(httpx_mock, "qwen-vl")
    httpx_mock.add_response(
        url=CHAT, json=answer("a", choice={"token_ids": [5, 6]}, prompt_token_ids=[1, 2, 3])
    )
    httpx_mock.add_response(url=CHAT, json=answer("a"))
    client = make_client()
    result = client.ocr(png((8, 8)), preset="generic", extra_body={"return_token_ids": True})
    assert sent(httpx_mock)[0]["return_token_ids"] is True
    assert result.token_ids == [5, 6] and result.prompt_token_ids == [1, 2, 3]
    plain = client.ocr(png((8, 8)), preset="generic")
    assert plain.token_ids is None and plain.prompt_token_ids is None


def test_the_probe_checks_the_processor_only_for_a_preset_that_has_one(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    from vllm_tasks.tasks import TASK_ROUTES

    serve(httpx_mock, "lighton-ocr", "lightonai/LightOnOCR-2-1B")  # an OCR model without DeepSeek's guard
    httpx_mock.add_response(url=CHAT, status_code=400, json={"error": {"message": "bad", "code": 400}})
    for route in TASK_ROUTES.values():
        if route.task != "chat":
            httpx_mock.add_response(url=BASE + route.path, status_code=404, json={"detail": "Not Found"})
    report = make_client().probe()
    assert report.ngram_processor is None
    assert sent(httpx_mock) == [{}]  # the probe's cheapest request only


# -------------------------------------------------------------------------------------------- formats


def test_markdown_format_and_pixel_blocks() -> None:
    parsed = FORMATS["markdown"].parse("\n# A\n\ntext\n", PageSizes((10, 10), (20, 20)))
    assert parsed.markdown == "# A\n\ntext" and parsed.blocks == [] and parsed.metadata == {}
    assert FORMATS["markdown"].check("anything") is None
    block = block_from_pixels("table", "<table/>", [(14, 7, 28, 14)], PageSizes((28, 14), (56, 28)))
    assert block.boxes == [(28, 14, 56, 28)] and block.boxes_normalized == [(500, 500, 999, 999)]


def test_grounding_format_depends_on_its_input() -> None:
    sizes = PageSizes((100, 100), (200, 100))
    one = FORMATS["deepseek-grounding"].parse(
        "<|ref|>title<|/ref|><|det|>[[0, 0, 999, 499]]<|/det|>\n# A", sizes
    )
    two = FORMATS["deepseek-grounding"].parse(
        "<|ref|>text<|/ref|><|det|>[[0, 499, 999, 999]]<|/det|>\nB", sizes
    )
    assert (one.markdown, one.blocks[0].label, one.blocks[0].boxes) == ("# A", "title", [(0, 0, 200, 50)])
    assert (two.markdown, two.blocks[0].label, two.blocks[0].boxes) == ("B", "text", [(0, 50, 200, 100)])


def test_system_message_task_fields_and_the_preset_s_max_tokens(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    preset = OCRPreset(
        name="recipe",
        pattern="recipe",
        tasks={"ocr": "OCR:", "spotting": "Spotting:"},
        system="You are a helpful assistant.",
        max_tokens=8000,
        task_fields={"spotting": {"skip_special_tokens": False}},
    )
    serve(httpx_mock, "m")
    httpx_mock.add_response(url=CHAT, json=answer("x"), is_reusable=True)
    client = make_client()
    client.ocr(png((8, 8)), preset=preset)
    client.ocr(png((8, 8)), preset=preset, task="spotting", max_tokens=100)
    client.ocr(png((8, 8)), preset=preset, prompt="spotting", max_tokens=None)
    plain, spotting, named = sent(httpx_mock)
    assert [m["role"] for m in plain["messages"]] == ["system", "user"]
    assert plain["messages"][0]["content"] == "You are a helpful assistant."
    assert plain["max_tokens"] == 8000 and "skip_special_tokens" not in plain
    assert spotting["max_tokens"] == 100 and spotting["skip_special_tokens"] is False
    assert "max_tokens" not in named and named["skip_special_tokens"] is False
    with pytest.raises(InvalidInputError, match=r"preset\.task_fields"):
        replace(preset, task_fields={"table": {"top_k": 1}})


def test_token_ids_of_the_wrong_type_are_an_unexpected_response(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    from vllm_tasks.errors import UnexpectedResponse

    serve(httpx_mock, "qwen-vl")
    httpx_mock.add_response(url=CHAT, json=answer("a", choice={"token_ids": ["a"]}))
    httpx_mock.add_response(url=CHAT, json=answer("a", prompt_token_ids=[1, True]))
    client = make_client()
    for _ in range(2):
        with pytest.raises(UnexpectedResponse, match="token_ids is not a list of token ids"):
            client.ocr(png((8, 8)), preset="generic")


def test_a_task_answers_in_its_own_format(make_client: Any, httpx_mock: HTTPXMock) -> None:
    """HunyuanOCR's spotting task is read as lines with corners on the 0-1000 grid, its other tasks as
    markdown; the ladder's validity check follows the task's format too."""
    serve(httpx_mock, "tencent/HunyuanOCR")
    spotting = "Invoice(100,50),(500,150)\nTotal 9.50(100,800),(400,900)"
    httpx_mock.add_response(url=CHAT, json=answer(spotting), is_reusable=True)
    client = make_client()
    spotted = client.ocr(png((200, 100)), task="spotting")
    markdown = client.ocr(png((200, 100)))
    assert sent(httpx_mock)[0]["messages"][1]["content"][1]["text"].startswith("Detect and recognize text")
    assert [block.text for block in spotted.blocks] == ["Invoice", "Total 9.50"]
    assert spotted.blocks[0].boxes == [(20, 5, 100, 15)]  # 0-1000 of a 200x100 page
    assert spotted.markdown == "Invoice\nTotal 9.50" and spotted.preset == "hunyuan-ocr"
    assert markdown.blocks == [] and markdown.markdown == spotting
    hunyuan = PRESETS["hunyuan-ocr"]
    assert ocr_ops.plan_request(hunyuan, ocr_ops.OCRParams(task="spotting")).output == "hunyuan-spotting"
    assert ocr_ops.plan_request(hunyuan, ocr_ops.OCRParams(prompt="spotting")).output == "hunyuan-spotting"
    assert ocr_ops.plan_request(hunyuan, ocr_ops.OCRParams(prompt="Read it.")).output == "markdown-html"
    with pytest.raises(InvalidInputError, match=r"preset\.task_outputs"):
        replace(hunyuan, task_outputs={"nope": "markdown"})
    with pytest.raises(InvalidInputError, match=r"preset\.output"):
        replace(hunyuan, task_outputs={"spotting": "nope"})
