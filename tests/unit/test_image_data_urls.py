"""``data:`` URLs given as images are parsed strictly before anything is sent: an ``image/*`` MIME type,
``;base64,`` and a payload that decodes, else a typed ``InvalidInputError`` (``image_decode``)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import vllm_tasks as vt
from vllm_tasks import images

PNG = b"\x89PNG\r\n\x1a\n" + b"pixels"


TEXT_PART = {"type": "image_url", "image_url": {"url": "data:text/plain,hi"}}
"""A content part the caller wrote, whose data: URL is not an image."""


def png_url(data: bytes = PNG, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


@pytest.mark.parametrize(
    "url",
    [
        "data:text/plain,hello",
        "data:text/plain;base64,aGVsbG8=",
        "data:;base64,aGVsbG8=",
        "data:,hello",
        "data:application/pdf;base64,JVBERi0=",
        "data:IMAGEX/png;base64,aGVsbG8=",
    ],
)
def test_a_data_url_of_another_type_is_refused_as_not_an_image(url: str) -> None:
    with pytest.raises(vt.InvalidInputError, match="not an image") as caught:
        images.image_to_data_url(url, field="images[0]")
    assert caught.value.kind == "image_decode" and caught.value.field == "images[0]"


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("data:image/png;base64,!!!!", "not valid base64"),
        ("data:image/png;base64,aGVsbG8", "not valid base64"),  # padding missing
        ("data:image/png;base64,aGVs\nbG8=", "not valid base64"),
        ("data:image/png;base64,", "holds no bytes"),
    ],
)
def test_a_data_url_whose_payload_does_not_decode_is_refused_typed(url: str, match: str) -> None:
    with pytest.raises(vt.InvalidInputError, match=match) as caught:
        images.image_to_data_url(url)
    assert caught.value.kind == "image_decode"


def test_an_image_data_url_is_sent_as_it_is_and_decoded_for_checks() -> None:
    url = png_url(mime="Image/PNG;name=a.png")
    assert images.image_to_data_url(f"  {url} ") == url
    assert images.data_url_bytes(url) == PNG


@pytest.mark.parametrize(
    "call",
    [
        lambda client: client.embed(images=["data:text/plain,hi"]),
        lambda client: client.embed_v2(images=["data:text/plain,hi"]),
        lambda client: client.rerank("q", [{"content": [TEXT_PART]}]),
        lambda client: client.score("q", [[TEXT_PART]]),
        lambda client: client.embed(messages=[{"role": "user", "content": [TEXT_PART]}]),
        lambda client: client.pool(messages=[{"role": "user", "content": [TEXT_PART]}]),
    ],
    ids=["embed", "embed_v2", "rerank(part)", "score(part)", "embed(messages)", "pool(messages)"],
)
def test_the_clients_refuse_a_text_data_url_before_sending(call: Any, make_client: Any) -> None:
    """No response is registered: a request sent would fail the test (pytest-httpx)."""
    with pytest.raises(vt.InvalidInputError, match="text/plain, not an image"):
        call(make_client())


@given(st.binary(min_size=1, max_size=64), st.sampled_from(["png", "jpeg", "webp", "avif"]))
def test_any_base64_image_payload_round_trips(data: bytes, kind: str) -> None:
    assert images.data_url_bytes(png_url(data, f"image/{kind}")) == data


@given(st.text(max_size=80))
def test_any_text_after_data_is_bytes_or_a_typed_refusal(text: str) -> None:
    try:
        assert isinstance(images.data_url_bytes("data:" + text), bytes)
    except vt.InvalidInputError as error:
        assert error.kind in ("image_decode", "argument")
