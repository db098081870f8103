"""One server state per client: ``server_info(refresh=True)`` after a model swap re-learns every fact.

A FakeVLLM is stopped and another one, serving other weights, starts on the same port: the client must
not keep what it learned from the first (the embedding width, the scorer kind, the n-gram processor
check, a proxy's batch cap) once it is told to refresh.
"""

from __future__ import annotations

import asyncio
import socket
import warnings
from typing import Any

import pytest

import vllm_tasks as vt
from vllm_tasks.embeddings import BYTES_BATCH_CAP
from vllm_tasks.errors import UnexpectedResponse
from vllm_tasks.testing import EMBEDDING_TASKS, OCR_TASKS, RERANKER_TASKS, FakeVLLM
from vllm_tasks.types.scoring import ScorerKind

# The old weights embed (a bi-encoder); the new ones carry a classification head (a cross-encoder).
OLD_TASKS = EMBEDDING_TASKS | OCR_TASKS
NEW_TASKS = RERANKER_TASKS | OCR_TASKS | {"embed"}
OLD: dict[str, Any] = {
    "model": "m",
    "tasks": OLD_TASKS,
    "width": 384,
    "scorer": "bi-encoder",
    "ngram_processor": False,
}
NEW: dict[str, Any] = {
    "model": "m",
    "tasks": NEW_TASKS,
    "width": 768,
    "scorer": "cross-encoder",
    "ngram_processor": True,
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def learn_everything(client: vt.Client) -> None:
    assert client.embed(["a"]).vectors.shape == (1, 384)
    assert client.scorer_kind() is ScorerKind.BI_ENCODER
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert client.check_ngram_processor() is False
    # A proxy's refusal of bytes headers is learned the same way (it needs nginx to happen for real).
    client._learn(client._server_state, BYTES_BATCH_CAP, None, 16)


def test_refresh_after_a_model_swap_relearns_every_fact() -> None:
    port = free_port()
    client = vt.Client(f"http://127.0.0.1:{port}", max_retries=0)
    with FakeVLLM(**OLD, port=port) as old:
        learn_everything(client)
        url = old.url
    with FakeVLLM(**NEW, port=port) as new, client:
        assert new.url == url
        # Without a refresh the client still holds the old server's facts: a new width is refused.
        with pytest.raises(UnexpectedResponse, match=r"768-wide vectors .* earlier answers were 384-wide"):
            client.embed(["a"])
        assert client.scorer_kind() is ScorerKind.BI_ENCODER
        assert client._server_state.get(BYTES_BATCH_CAP, None) == 16

        client.server_info(refresh=True)
        assert client._server_state.all_of(BYTES_BATCH_CAP) == {}
        assert client.embed(["a"]).vectors.shape == (1, 768)
        assert client.scorer_kind() is ScorerKind.CROSS_ENCODER
        assert client.check_ngram_processor() is True
        paths = [request.path for request in new.requests]
    # Each fact was asked of the new server once: the scorer probe and the n-gram check.
    assert paths.count("/pooling") == 1
    assert paths.count("/v1/chat/completions") == 1


def test_async_client_refresh_relearns_every_fact() -> None:
    port = free_port()

    async def swap() -> None:
        async with vt.AsyncClient(f"http://127.0.0.1:{port}", max_retries=0) as client:
            with FakeVLLM(**OLD, port=port):
                assert (await client.embed(["a"])).vectors.shape == (1, 384)
                assert await client.scorer_kind() is ScorerKind.BI_ENCODER
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    assert await client.check_ngram_processor() is False
            with FakeVLLM(**NEW, port=port):
                await client.server_info(refresh=True)
                assert (await client.embed(["a"])).vectors.shape == (1, 768)
                assert await client.scorer_kind() is ScorerKind.CROSS_ENCODER
                assert await client.check_ngram_processor() is True

    asyncio.run(swap())


def test_a_probe_before_the_first_call_keeps_its_ngram_check() -> None:
    with FakeVLLM(model="deepseek-ocr", ngram_processor=True) as fake, vt.Client(fake.url) as client:
        assert client.probe().ngram_processor is True
        checks = [r for r in fake.requests if r.path == "/v1/chat/completions"]
        assert client.check_ngram_processor() is True
        assert [r for r in fake.requests if r.path == "/v1/chat/completions"] == checks
