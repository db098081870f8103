"""ocr() / ocr_pdf(): the recipe on the wire, the processor check, image handling, results.

Server answers are replayed from responses recorded on the real ``ocr`` / ``ocr-no-processor`` CPU
fixtures (tests/recorded/ocr*/); grounding outputs for box tests are written from the documented format.
"""

from __future__ import annotations

import base64
import io
import json
import warnings
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import ocr as ocr_ops
from vllm_tasks.errors import InputFetchError, InvalidInputError, UnsupportedByServer
from vllm_tasks.images import prepare_image
from vllm_tasks.tasks import TASK_ROUTES

from .conftest import BASE

RECORDED = Path(__file__).resolve().parent.parent / "recorded"
CHAT = f"{BASE}/v1/chat/completions"


def recorded(fixture: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / fixture / f"{name}.json").read_text())
    return data


def add(httpx_mock: HTTPXMock, fixture: str, name: str, **kwargs: Any) -> None:
    exchange = recorded(fixture, name)
    httpx_mock.add_response(
        url=BASE + exchange["request"]["path"],
        method=exchange["request"]["method"],
        status_code=exchange["response"]["status"],
        content=exchange["response"]["body_text"].encode(),
        headers={"content-type": "application/json"},
        **kwargs,
    )


def mock_discovery(httpx_mock: HTTPXMock, version: str | None = None) -> None:
    if version is None:
        add(httpx_mock, "ocr", "version")
    else:
        httpx_mock.add_response(url=f"{BASE}/version", json={"version": version})
    add(httpx_mock, "ocr", "models")
    httpx_mock.add_response(url=f"{BASE}/openapi.json", status_code=404, json={"detail": "Not Found"})


def recorded_image() -> bytes:
    """The PNG the recordings were made with (taken from the recorded request)."""
    url = recorded("ocr", "chat_markdown")["request"]["json"]["messages"][0]["content"][0]["image_url"]["url"]
    return base64.b64decode(url.split(",", 1)[1])


def sent(httpx_mock: HTTPXMock) -> list[dict[str, Any]]:
    return [json.loads(r.content) for r in httpx_mock.get_requests() if r.url.path == "/v1/chat/completions"]


def chat_answer(text: str, finish_reason: str = "stop") -> dict[str, Any]:
    """A chat-completions body shaped like the recorded ones, with ``text`` as the content."""
    body: dict[str, Any] = json.loads(recorded("ocr", "chat_markdown")["response"]["body_text"])
    body["choices"][0]["message"]["content"] = text
    body["choices"][0]["finish_reason"] = finish_reason
    return body


def png(size: tuple[int, int], color: str = "white") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


# --------------------------------------------------------------------------------------------------
# The recipe on the wire
# --------------------------------------------------------------------------------------------------


def test_ocr_sends_the_recipe_and_reads_the_recorded_answer(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_discovery(httpx_mock)
    add(httpx_mock, "ocr", "chat_ngram_check_400")
    add(httpx_mock, "ocr", "chat_markdown")
    client = make_client()
    with pytest.warns(ocr_ops.OCRTruncatedWarning, match="max_tokens") as caught:
        result = client.ocr(recorded_image(), max_tokens=40)
    if isinstance(client, vt.Client):  # the warning points at the caller's line
        assert caught[0].filename == __file__
    check, request = sent(httpx_mock)
    assert check == recorded("ocr", "chat_ngram_check_400")["request"]["json"]
    assert request == recorded("ocr", "chat_markdown")["request"]["json"]
    answer = json.loads(recorded("ocr", "chat_markdown")["response"]["body_text"])
    assert result.text == answer["choices"][0]["message"]["content"]
    assert result.usage.prompt_tokens == answer["usage"]["prompt_tokens"]
    assert result.finish_reason == "length" and result.truncated
    assert result.model == "deepseek-ocr-tiny"
    assert result.image_size == result.sent_size == (64, 48)
    assert result.prompt == ocr_ops.PROMPTS["markdown"]


def test_processor_check_runs_once_per_client(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_discovery(httpx_mock)
    add(httpx_mock, "ocr", "chat_ngram_check_400")
    httpx_mock.add_response(url=CHAT, json=chat_answer("Hi"), is_reusable=True)
    client = make_client()
    client.ocr(png((8, 8)))
    client.ocr(png((8, 8)))
    bodies = sent(httpx_mock)
    assert [b.get("vllm_xargs") for b in bodies] == [
        {"ngram_size": 0},
        {"ngram_size": 30, "window_size": 90, "whitelist_token_ids": [128821, 128822]},
        {"ngram_size": 30, "window_size": 90, "whitelist_token_ids": [128821, 128822]},
    ]
    assert client.check_ngram_processor() is True  # cached: no request


def test_probe_keeps_its_processor_check_for_ocr(make_client: Any, httpx_mock: HTTPXMock) -> None:
    check = recorded("ocr", "chat_ngram_check_400")["response"]["body_text"].encode()

    def chat(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body == {}:  # the probe's cheapest request
            return httpx.Response(400, json={"error": {"message": "1 validation error", "code": 400}})
        if body.get("vllm_xargs") == {"ngram_size": 0}:
            return httpx.Response(400, content=check, headers={"content-type": "application/json"})
        return httpx.Response(200, json=chat_answer("Hi"))

    for _ in range(2):  # probe() reads discovery itself; ocr() through the client's cache
        mock_discovery(httpx_mock)
    httpx_mock.add_callback(chat, url=CHAT, is_reusable=True)
    for route in TASK_ROUTES.values():
        if route.task != "chat":
            httpx_mock.add_response(url=BASE + route.path, status_code=404, json={"detail": "Not Found"})
    client = make_client()
    assert client.probe().ngram_processor is True
    client.ocr(png((8, 8)))
    checks = [b for b in sent(httpx_mock) if b.get("vllm_xargs") == {"ngram_size": 0}]
    assert len(checks) == 1  # the probe's check was reused by ocr()


def test_missing_processor_warns_once_naming_the_flag(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_discovery(httpx_mock)
    add(httpx_mock, "ocr-no-processor", "chat_ngram_check_200")
    httpx_mock.add_response(url=CHAT, json=chat_answer("Hi"), is_reusable=True)
    client = make_client()
    with pytest.warns(ocr_ops.NGramProcessorMissingWarning, match="--logits-processors") as caught:
        client.ocr(png((8, 8)))
    if isinstance(client, vt.Client):
        assert caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error", ocr_ops.NGramProcessorMissingWarning)
        client.ocr(png((8, 8)))
    assert client.check_ngram_processor() is False


def test_missing_processor_raises_when_required(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_discovery(httpx_mock)
    add(httpx_mock, "ocr-no-processor", "chat_ngram_check_200")
    client = make_client()
    with pytest.raises(UnsupportedByServer, match="NGramPerReqLogitsProcessor") as caught:
        client.ocr(png((8, 8)), require_ngram_processor=True)
    assert caught.value.server_flag == ocr_ops.NGRAM_PROCESSOR_FLAG
    assert len(sent(httpx_mock)) == 1  # only the check; the page was not sent


def test_old_server_is_gated_and_ngram_none_sends_no_xargs(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_discovery(httpx_mock, version="0.11.0")
    client = make_client()
    with pytest.raises(UnsupportedByServer, match=r"0\.11\.1"):
        client.ocr(png((8, 8)))
    httpx_mock.add_response(url=CHAT, json=chat_answer("plain"))
    result = client.ocr(png((8, 8)), ngram_size=None, prompt="free", extra_body={"top_k": 1})
    (request,) = sent(httpx_mock)
    assert "vllm_xargs" not in request
    assert request["top_k"] == 1 and request["skip_special_tokens"] is False and request["temperature"] == 0
    assert request["messages"][0]["content"][1] == {"type": "text", "text": "Free OCR."}
    assert result.markdown == "plain"


@pytest.mark.parametrize(
    ("prompt", "text"),
    [
        ("markdown", "<|grounding|>Convert the document to markdown."),
        ("ocr", "<|grounding|>OCR this image."),
        ("free", "Free OCR."),
        ("figure", "Parse the figure."),
        ("describe", "Describe this image in detail."),
        ("locate:Total", "Locate <|ref|>Total<|/ref|> in the image."),
        ("What is the title?", "What is the title?"),
    ],
)
def test_prompt_presets(prompt: str, text: str) -> None:
    assert ocr_ops.resolve_prompt(prompt) == text


def test_bad_arguments_fail_before_any_request(make_client: Any) -> None:
    client = make_client()
    with pytest.raises(InvalidInputError, match="max_tokens"):
        client.ocr(png((8, 8)), max_tokens=0)
    with pytest.raises(InvalidInputError, match="prompt"):
        client.ocr(png((8, 8)), prompt="")
    with pytest.raises(InvalidInputError, match="whitelist_token_ids"):
        client.ocr(png((8, 8)), whitelist_token_ids=["td"])


# --------------------------------------------------------------------------------------------------
# Images: checks before upload, client-side URL fetch
# --------------------------------------------------------------------------------------------------


def test_bad_images_never_reach_the_server(make_client: Any) -> None:
    """No response is registered: any request would fail the test."""
    client = make_client()
    with pytest.raises(InvalidInputError):
        client.ocr(bytes(range(256)) * 4)
    with pytest.raises(InvalidInputError):
        client.ocr(Image.new("L", (13400, 13400)), max_side=None)


def test_url_is_fetched_client_side_without_the_api_key(make_client: Any, httpx_mock: HTTPXMock) -> None:
    image = png((30, 20))
    httpx_mock.add_response(url="https://images.example/page.png", content=image)
    mock_discovery(httpx_mock)
    add(httpx_mock, "ocr", "chat_ngram_check_400")
    httpx_mock.add_response(url=CHAT, json=chat_answer("Hi"))
    client = make_client(api_key="secret-key")
    result = client.ocr("https://images.example/page.png")
    fetch = next(r for r in httpx_mock.get_requests() if r.url.host == "images.example")
    assert "authorization" not in fetch.headers
    assert all(
        r.headers["authorization"] == "Bearer secret-key"
        for r in httpx_mock.get_requests()
        if r.url.host == "vllm.test" and r.url.path.startswith("/v1")
    )
    url = sent(httpx_mock)[-1]["messages"][0]["content"][0]["image_url"]["url"]
    assert url == "data:image/png;base64," + base64.b64encode(image).decode()
    assert result.image_size == (30, 20)


def test_unreachable_url_is_a_typed_error_and_nothing_is_sent(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    httpx_mock.add_exception(
        httpx.ConnectError("Name or service not known"), url="https://nowhere.example/a.png"
    )
    httpx_mock.add_response(url="https://images.example/missing.png", status_code=404)
    client = make_client()
    with pytest.raises(InputFetchError, match="could not be fetched"):
        client.ocr("https://nowhere.example/a.png")
    with pytest.raises(InputFetchError, match="HTTP 404"):
        client.ocr("https://images.example/missing.png")
    assert sent(httpx_mock) == []


def test_fetch_urls_false_lets_the_server_fetch(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_discovery(httpx_mock)
    httpx_mock.add_response(
        url=CHAT, json=chat_answer("<|ref|>title<|/ref|><|det|>[[0, 0, 499, 999]]<|/det|>\n# T\n")
    )
    result = make_client().ocr("https://images.example/page.png", fetch_urls=False, ngram_size=None)
    assert (
        sent(httpx_mock)[0]["messages"][0]["content"][0]["image_url"]["url"]
        == "https://images.example/page.png"
    )
    assert result.image_size is None
    assert result.blocks[0].boxes == [(0, 0, 499, 999)]
    assert result.draw(Image.new("RGB", (100, 50))).size == (100, 50)


# --------------------------------------------------------------------------------------------------
# Results: boxes in pixels of the original image, draw(), crop()
# --------------------------------------------------------------------------------------------------

PAGE = (
    "<|ref|>title<|/ref|><|det|>[[100, 50, 899, 150]]<|/det|>\n# Report\n\n"
    "<|ref|>image<|/ref|><|det|>[[0, 200, 499, 599], [500, 200, 999, 599]]<|/det|>\n\n"
    "<|ref|>text<|/ref|><|det|>[[100, 700, 899, 900]]<|/det|>\nBody text.\n"
)


def test_boxes_are_in_pixels_of_the_original_even_after_downscaling() -> None:
    prepared = prepare_image(png((2000, 1000)), max_side=1000)
    assert prepared.size == (1000, 500)
    response = httpx.Response(200, json=chat_answer(PAGE))
    result = ocr_ops.parse_response(response, prepared, "p")
    assert result.image_size == (2000, 1000) and result.sent_size == (1000, 500)
    assert result.blocks[0].boxes == [(200, 50, 1800, 150)]
    assert result.blocks[0].boxes_normalized == [(100, 50, 899, 150)]
    assert result.markdown == "# Report\n\nBody text."
    assert not result.truncated


def test_draw_and_crop_use_the_original_image() -> None:
    prepared = prepare_image(png((999, 999), color="blue"))
    result = ocr_ops.parse_response(httpx.Response(200, json=chat_answer(PAGE)), prepared, "p")
    drawn = result.draw()
    assert drawn.size == (999, 999) and drawn.mode == "RGB"
    assert drawn.getpixel((100, 100)) != (0, 0, 255)  # the title's box outline
    assert drawn.getpixel((250, 400)) == (0, 0, 255)  # inside a box: untouched
    figures = result.crop()
    assert [f.size for f in figures] == [(499, 399), (499, 399)]
    assert len(result.crop(label=None)) == 4
    assert result.draw(labels=["text"]).getpixel((100, 100)) == (0, 0, 255)
    # a resized copy passed in gets rescaled boxes
    assert [f.size for f in result.crop(image=Image.new("RGB", (333, 333)))] == [(166, 133), (166, 133)]


# --------------------------------------------------------------------------------------------------
# ocr_pdf
# --------------------------------------------------------------------------------------------------


def make_pdf(path: Path, pages: int) -> Path:
    colors = ["red", "green", "blue", "white", "black", "yellow"]
    images = [Image.new("RGB", (300, 400), colors[i % len(colors)]) for i in range(pages)]
    images[0].save(path, format="PDF", save_all=True, append_images=images[1:], resolution=72)
    return path


def page_color_server(request: httpx.Request) -> httpx.Response:
    """Answers with the page's colour, so results can be matched to pages."""
    body = json.loads(request.content)
    url = body["messages"][0]["content"][0]["image_url"]["url"]
    image = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB")
    rgb = image.getpixel((image.width // 2, image.height // 2))
    if min(rgb) > 200:
        color = "white"
    elif max(rgb) < 60:
        color = "black"
    else:
        color = ("red", "green", "blue")[rgb.index(max(rgb))]
    finish = "length" if color == "blue" else "stop"
    return httpx.Response(
        200, json=chat_answer(f"<|ref|>text<|/ref|><|det|>[[0, 0, 999, 999]]<|/det|>\n{color}\n", finish)
    )


def test_ocr_pdf_returns_pages_in_order_with_joined_markdown(
    make_client: Any, httpx_mock: HTTPXMock, tmp_path: Path
) -> None:
    pdf = make_pdf(tmp_path / "doc.pdf", 5)
    mock_discovery(httpx_mock)
    add(httpx_mock, "ocr", "chat_ngram_check_400")
    httpx_mock.add_callback(page_color_server, url=CHAT, is_reusable=True)
    client = make_client()
    with pytest.warns(ocr_ops.OCRTruncatedWarning, match="page") as caught:
        document = client.ocr_pdf(pdf, pages="2-4", dpi=72, concurrency=2, quality=None)
    if isinstance(client, vt.Client):  # (pypdfium2 may warn too: only the SDK's warning is checked)
        ours = [w for w in caught if issubclass(w.category, ocr_ops.OCRTruncatedWarning)]
        assert ours[0].filename == __file__
    assert [p.page for p in document.pages] == [2, 3, 4]
    assert [p.result.markdown for p in document.pages] == ["green", "blue", "white"]
    assert document.markdown == "green\n\n---\n\nblue\n\n---\n\nwhite"
    assert document.truncated_pages == [3]
    assert document.pages[0].result.image_size == (300, 400)
    assert document.pages[0].result.blocks[0].boxes == [(0, 0, 300, 400)]
    assert document.pages[0].result.crop(label="text")[0].getpixel((10, 10))[1] > 100  # green page
    assert document.usage.prompt_tokens == 3 * chat_answer("")["usage"]["prompt_tokens"]


def test_ocr_pdf_bad_pages_and_files_fail_before_requests(make_client: Any, tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "doc.pdf", 2)
    client = make_client()
    with pytest.raises(InvalidInputError, match="2-page PDF"):
        client.ocr_pdf(pdf, pages=[3])
    with pytest.raises(InvalidInputError, match="page list"):
        client.ocr_pdf(pdf, pages="x")
    with pytest.raises(InvalidInputError, match="cannot be opened"):
        client.ocr_pdf(b"not a pdf")
    with pytest.raises(InvalidInputError, match="dpi"):
        client.ocr_pdf(pdf, dpi=5)


def test_parse_pages_spec() -> None:
    from vllm_tasks.pdf import parse_pages

    assert parse_pages("1-3,7") == [1, 2, 3, 7]
    assert parse_pages("4-") == [4, -1]
    with pytest.raises(InvalidInputError):
        parse_pages("3-1")


def test_public_names() -> None:
    assert vt.InvalidInputError is InvalidInputError and vt.types.OCRResult.__name__ == "OCRResult"
