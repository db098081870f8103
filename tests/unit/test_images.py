"""vllm_tasks.images: every accepted image form becomes an image_url content part."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import vllm_tasks as vt
from vllm_tasks import images


def png_bytes(color: str = "red", size: tuple[int, int] = (3, 2)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


def decode(url: str) -> Image.Image:
    assert url.startswith("data:image/png;base64,")
    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))


def test_bytes_path_str_path_and_file_object(tmp_path: Path) -> None:
    data = png_bytes()
    path = tmp_path / "a.png"
    path.write_bytes(data)
    expected = "data:image/png;base64," + base64.b64encode(data).decode()
    assert images.image_to_data_url(data) == expected
    assert images.image_to_data_url(bytearray(data)) == expected
    assert images.image_to_data_url(path) == expected
    assert images.image_to_data_url(str(path)) == expected
    with path.open("rb") as handle:
        assert images.image_to_data_url(handle) == expected


def test_jpeg_and_webp_are_sent_undecoded() -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (2, 2)).save(buffer, format="JPEG")
    assert images.image_to_data_url(buffer.getvalue()).startswith("data:image/jpeg;base64,")
    assert images.sniff_mime_type(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"


def test_pil_image_and_numpy_array_are_encoded_as_png() -> None:
    assert decode(images.image_to_data_url(Image.new("RGB", (5, 4), "blue"))).size == (5, 4)
    array = np.zeros((4, 6, 3), dtype=np.uint8)
    array[..., 1] = 255
    decoded = decode(images.image_to_data_url(array))
    assert decoded.size == (6, 4)
    assert decoded.getpixel((0, 0)) == (0, 255, 0)
    assert decode(images.image_to_data_url(np.zeros((2, 2, 1), dtype=np.uint8))).size == (2, 2)
    assert decode(images.image_to_data_url(Image.new("CMYK", (2, 2)))).mode == "RGB"


def test_urls_pass_through() -> None:
    assert images.image_to_data_url(" https://example.com/cat.jpg ") == "https://example.com/cat.jpg"
    data_url = "data:image/png;base64,AAAA"
    assert images.image_to_data_url(data_url) == data_url
    part = images.image_content_part("http://example.com/a.png")
    assert part == {"type": "image_url", "image_url": {"url": "http://example.com/a.png"}}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (b"not an image", "not a recognised image"),
        ("data:image/png,raw", "without ';base64,'"),
        ("/no/such/file.png", "cannot be read"),
        (12, "is not an image"),
        (np.zeros((2, 2), dtype=np.float32), "must be uint8"),
        (np.zeros((2, 2, 2), dtype=np.uint8), "not an image array"),
        (io.StringIO("text"), "text-mode"),
    ],
)
def test_bad_images_are_refused_with_the_field(value: object, problem: str) -> None:
    with pytest.raises(vt.InvalidInputError, match=problem) as info:
        images.image_to_data_url(value, field="documents[2]")
    assert info.value.field == "documents[2]"


def test_is_image() -> None:
    assert images.is_image(b"x")
    assert images.is_image(Path("a.png"))
    assert images.is_image(Image.new("L", (1, 1)))
    assert images.is_image(np.zeros((1, 1), dtype=np.uint8))
    assert not images.is_image("a.png")
    assert not images.is_image({"text": "x"})
