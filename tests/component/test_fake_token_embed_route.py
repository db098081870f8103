"""FakeVLLM as vLLM >= 0.33 serves a token_embed (late-interaction) model's embedding routes, held to the
SDK's reading of them (tests/unit/test_token_embed_route.py holds the SDK to vLLM 0.33's source)."""

from __future__ import annotations

import httpx
import pytest

import vllm_tasks as vt
from vllm_tasks.testing import FakeVLLM


def test_032_answers_501_and_033_its_own_handler() -> None:
    with FakeVLLM(scorer="late-interaction") as old, vt.Client(old.url) as client:
        with pytest.raises(vt.EndpointNotServed) as caught:
            client.embed("hello")
        assert caught.value.status_code == 501
    with FakeVLLM(scorer="late-interaction", version="0.33.0", width=8) as new, vt.Client(new.url) as client:
        with pytest.raises(vt.EndpointNotServed, match="token_embed") as caught:
            client.embed("hello")
        assert caught.value.status_code == 400
        with pytest.raises(vt.UnexpectedResponse, match="one matrix per input"):
            client.embed(["hello world", "hi"], encoding_format="float")
        raw = httpx.post(f"{new.url}/v1/embeddings", json={"input": ["hello world", "hi"]}).json()
        rows = [item["embedding"] for item in raw["data"]]
        assert [len(row) for row in rows] != [1, 1] and all(
            len(vector) == 8 for row in rows for vector in row
        )
        assert len(rows[0]) != len(rows[1])  # one vector per token of each input
        with pytest.raises(vt.EndpointNotServed) as v2:
            client.embed_v2(texts=["hello"])
        assert v2.value.status_code == 404
