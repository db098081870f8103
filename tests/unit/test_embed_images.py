"""embed(images=...): one single-image conversation per image, refused before sending when ambiguous."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import embeddings

from .recorded import add_recorded, mock_server

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108020000009077"
    "53de0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082"
)


def test_each_image_is_its_own_conversation(make_client: Any, httpx_mock: HTTPXMock, tmp_path: Path) -> None:
    mock_server(httpx_mock, "embed")
    add_recorded(httpx_mock, "embed", "embeddings_float")  # two vectors, as two images ask
    path = tmp_path / "dot.png"
    path.write_bytes(PNG)
    make_client().embed(images=[path, PNG], encoding_format="float")
    body = json.loads(next(r for r in httpx_mock.get_requests() if r.url.path == "/v1/embeddings").content)
    assert len(body["messages"]) == 2
    for conversation in body["messages"]:
        assert [message["role"] for message in conversation] == ["user"]
        (part,) = conversation[0]["content"]
        assert part["type"] == "image_url" and part["image_url"]["url"].startswith("data:image/png;base64,")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"images": "cat.png"}, "bare string"),
        ({"images": []}, "is empty"),
        ({"input": "a", "images": [PNG]}, "exactly one of input=, messages= and images="),
        ({"images": [PNG], "prompt": "q: "}, "cannot take prompt"),
    ],
)
def test_ambiguous_images_are_refused_before_sending(
    kwargs: dict[str, Any], match: str, make_client: Any
) -> None:
    with pytest.raises(vt.InvalidInputError, match=match):
        make_client().embed(**kwargs)


def test_a_single_image_is_one_conversation() -> None:
    assert len(embeddings.image_conversations(PNG)) == 1
