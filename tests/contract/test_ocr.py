"""ocr() against the real DeepSeek-OCR CPU fixture (tiny language model, dummy weights).

The text such a model writes is meaningless, so these tests assert on the protocol: inputs accepted with
the expected prompt-token count, ``vllm_xargs`` applied, the processor check, client-side refusals. Each
image request costs seconds on 2 cores: the tests keep them few and small (``max_tokens`` 1 where the output
does not matter). PDF pages in order and the server without the n-gram processor are tested against
FakeVLLM (tests/component/test_ocr_server_checks.py), which tests/component/test_fake_replay.py holds to
both real servers' recorded answers. Grounding parsing is unit-tested on realistic outputs
(tests/unit/test_grounding.py).
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image, ImageDraw

import vllm_tasks as vt

pytestmark = pytest.mark.contract

# DeepSeek-OCR's image tokens for an image of at most 640 x 640: a 1024-px global view of 16 x 16 patches
# plus a newline per row, plus one view separator (vLLM's get_num_image_tokens).
SMALL_IMAGE_TOKENS = 16 * 17 + 1
# "\n" + "Describe this image in detail." is 7 tokens with the fixture's tokenizer; + BOS.
DESCRIBE_PROMPT_TOKENS = SMALL_IMAGE_TOKENS + 1 + 7
assert DESCRIBE_PROMPT_TOKENS == 281


def page(text: str = "Hello OCR", size: tuple[int, int] = (320, 240)) -> Image.Image:
    image = Image.new("RGB", size, "white")
    ImageDraw.Draw(image).text((20, 20), text, fill="black")
    return image


def encoded(image: Image.Image, fmt: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def bomb_png(width: int = 20000, height: int = 20000) -> bytes:
    """A valid 20000 x 20000 grayscale PNG (~0.4 MB: every row is white). The server answers 500 to it."""
    compressor = zlib.compressobj(1)
    row = b"\x00" + b"\xff" * width
    parts = [compressor.compress(row) for _ in range(height)]
    data = b"".join(parts) + compressor.flush()

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return (
            struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b"")


class CountingClient:
    """A vt.Client whose requests to the server are counted (to prove a refusal sent nothing)."""

    def __init__(self, server: Any) -> None:
        self.sent: list[str] = []
        self.http = httpx.Client(event_hooks={"request": [lambda r: self.sent.append(str(r.url))]})
        self.client = vt.Client(server.base_url, http_client=self.http, timeout=600, max_retries=0)

    def to_server(self, base_url: str) -> list[str]:
        return [url for url in self.sent if url.startswith(base_url)]


@pytest.fixture(scope="module")
def client(vllm_ocr: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_ocr.base_url, timeout=600, max_retries=0) as c:
        yield c


def test_image_inputs_are_accepted_with_the_expected_prompt_tokens(client: vt.Client, tmp_path: Path) -> None:
    jpeg_path = tmp_path / "page.jpg"
    jpeg_path.write_bytes(encoded(page(), "JPEG"))
    # a PIL image is sent as these PNG bytes (tests/unit/test_images.py): each real request costs ~10 s
    for image in (encoded(page(), "PNG"), jpeg_path):
        with pytest.warns(vt.ocr.OCRTruncatedWarning, match="max_tokens"):
            result = client.ocr(image, prompt="describe", max_tokens=1)
        assert result.usage.prompt_tokens == DESCRIBE_PROMPT_TOKENS, image
        assert result.usage.completion_tokens == 1
        assert result.finish_reason == "length" and result.truncated
        assert result.image_size == (320, 240)
        assert result.model == "deepseek-ocr-tiny"


def test_vllm_xargs_are_applied(client: vt.Client) -> None:
    """Greedy output of the dummy-weight model is a 2-token cycle; the n-gram guard (ngram_size 30) must
    break it once 30 tokens repeat: the outputs agree up to there and differ after."""
    image = encoded(page(), "PNG")
    with pytest.warns(vt.ocr.OCRTruncatedWarning):
        guarded = client.ocr(image, max_tokens=40)
    with pytest.warns(vt.ocr.OCRTruncatedWarning):
        free = client.ocr(image, max_tokens=40, ngram_size=None)
    assert guarded.usage.completion_tokens == free.usage.completion_tokens == 40
    # the default (markdown) prompt is 8 tokens with the fixture's tokenizer
    assert guarded.usage.prompt_tokens == free.usage.prompt_tokens == SMALL_IMAGE_TOKENS + 1 + 8
    assert guarded.text != free.text
    words_guarded, words_free = guarded.text.split(), free.text.split()
    assert words_guarded[:29] == words_free[:29]


def test_processor_check_true_on_the_recipe_server(client: vt.Client) -> None:
    assert client.check_ngram_processor(refresh=True) is True
    report = client.probe()
    assert report.ngram_processor is True
    assert "ocr-ngram-processor-missing" not in [a.id for a in report.advisories]


def test_bad_images_are_refused_client_side(vllm_ocr: Any) -> None:
    counting = CountingClient(vllm_ocr)
    with counting.client as client:
        with pytest.raises(vt.InvalidInputError, match="not a decodable image"):
            client.ocr(bytes(range(256)) * 64)
        with pytest.raises(vt.InvalidInputError, match="178,956,970"):
            client.ocr(bomb_png())
        with pytest.raises(vt.InputFetchError, match="could not be fetched"):
            client.ocr("http://127.0.0.1:9/page.png")  # port 9 (discard): refused at once
    assert counting.to_server(vllm_ocr.base_url) == []
