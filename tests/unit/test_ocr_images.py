"""Pre-upload image checks (vllm_tasks.images.prepare_image): decodable, bomb limit, size, encodings."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vllm_tasks import images
from vllm_tasks.errors import InvalidInputError


def encoded(size: tuple[int, int] = (40, 30), fmt: str = "PNG", color: str = "white") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format=fmt)
    return buffer.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width x height`` (no pixel data needed: the check reads the header)."""
    return images.png_from_scanlines(width, height, b"\x00", channels=1)


def test_bytes_path_file_pil_numpy_and_data_url_are_accepted(tmp_path: Path) -> None:
    data = encoded()
    path = tmp_path / "page.png"
    path.write_bytes(data)
    data_url = "data:image/png;base64," + base64.b64encode(data).decode()
    for source in (data, path, str(path), io.BytesIO(data), data_url):
        prepared = images.prepare_image(source)
        assert prepared.size == prepared.original_size == (40, 30)
        assert prepared.data == data  # sent as is: no re-encoding
        assert prepared.data_url == data_url
    prepared = images.prepare_image(Image.new("L", (10, 20)))
    assert prepared.size == (10, 20) and prepared.mime == "image/png"
    prepared = images.prepare_image(np.zeros((20, 10, 3), dtype=np.uint8))
    assert prepared.size == (10, 20)


def test_jpeg_keeps_its_mime_type() -> None:
    prepared = images.prepare_image(encoded(fmt="JPEG"))
    assert prepared.mime == "image/jpeg"
    assert prepared.data_url.startswith("data:image/jpeg;base64,")


def test_garbage_bytes_are_refused_before_upload() -> None:
    with pytest.raises(InvalidInputError, match="not a decodable image"):
        images.prepare_image(bytes(range(256)) * 4)


def test_truncated_file_is_refused() -> None:
    data = encoded((200, 200), fmt="JPEG", color="red")
    with pytest.raises(InvalidInputError, match="does not decode completely"):
        images.prepare_image(data[: len(data) // 2])


def test_invalid_base64_data_url_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="not valid base64"):
        images.prepare_image("data:image/png;base64,@@@not-base64@@@")


@pytest.mark.parametrize("size", [(20000, 20000), (14000, 13000)])
def test_over_the_bomb_limit_is_refused_without_decoding(size: tuple[int, int]) -> None:
    """20000 x 20000 is over twice the limit (PIL raises), 14000 x 13000 just over it (PIL only warns)."""
    with pytest.raises(InvalidInputError, match="178,956,970"):
        images.prepare_image(png_header_only(*size))


def test_over_max_side_is_downscaled_keeping_the_aspect_ratio() -> None:
    prepared = images.prepare_image(encoded((1000, 500)), max_side=200)
    assert prepared.downscaled
    assert prepared.size == (200, 100)
    assert prepared.original_size == (1000, 500)
    assert Image.open(io.BytesIO(prepared.data)).size == (200, 100)
    assert prepared.open_original().size == (1000, 500)


def test_over_max_side_is_refused_without_downscale() -> None:
    with pytest.raises(InvalidInputError, match="max_side=200") as caught:
        images.prepare_image(encoded((1000, 500)), max_side=200, downscale=False)
    assert caught.value.size == (1000, 500) and caught.value.kind == "image_too_large"


def test_urls_must_be_fetched_first_and_are_recognised() -> None:
    assert images.is_remote_url(" https://example.com/a.png")
    assert not images.is_remote_url("data:image/png;base64,AAAA")
    with pytest.raises(InvalidInputError, match="Fetch it first"):
        images.prepare_image("https://example.com/a.png")


def test_missing_file_and_wrong_type() -> None:
    with pytest.raises(InvalidInputError, match="cannot be read"):
        images.prepare_image(Path("/nonexistent/page.png"))
    with pytest.raises(InvalidInputError, match="is not an image"):
        images.prepare_image(3.5)
