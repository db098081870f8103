"""``reward`` over real HTTP against FakeVLLM's reward models: what goes on the wire (one conversation a
request, the task per kind, raw values), both clients, and the refusals that send nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

import vllm_tasks as vt
from vllm_tasks.testing import FakeVLLM

CHOSEN = [{"role": "user", "content": "what is two plus two"}, {"role": "assistant", "content": "four"}]
REJECTED = [{"role": "user", "content": "what is two plus two"}, {"role": "assistant", "content": "five"}]


@pytest.mark.parametrize("model", ["sequence", "token"])
def test_each_conversation_goes_alone_and_gets_its_own_reward(model: Any) -> None:
    with FakeVLLM(reward=model) as fake, vt.Client(fake.url) as client:
        result = client.reward([CHOSEN, REJECTED])
        bodies = [request.json for request in fake.received("/pooling")]
    sent = sorted((body["messages"] for body in bodies), key=str)  # sent concurrently: any order
    assert sent == sorted([CHOSEN, REJECTED], key=str)
    assert all("task" not in body and body["use_activation"] is False for body in bodies)
    assert result.kind == model
    assert result.scores is not None and result.scores[0] != result.scores[1]


def test_the_async_client_gives_the_same_rewards() -> None:
    async def rewards(url: str) -> vt.types.RewardResult:
        async with vt.AsyncClient(url) as client:
            return await client.reward([CHOSEN, REJECTED], kind="token")

    with FakeVLLM(reward="token") as fake, vt.Client(fake.url) as client:
        synced = client.reward([CHOSEN, REJECTED], kind="token")
        awaited = asyncio.run(rewards(fake.url))
    assert synced.scores is not None and awaited.scores is not None
    np.testing.assert_array_equal(synced.scores, awaited.scores)
    assert [a.shape for a in synced.rewards] == [a.shape for a in awaited.rewards]


def test_a_named_kind_sends_its_task_and_the_other_kind_is_the_servers_400() -> None:
    with FakeVLLM(reward="sequence") as fake, vt.Client(fake.url) as client:
        assert client.reward(CHOSEN, kind="sequence").kind == "sequence"
        assert fake.received("/pooling")[-1].json["task"] == "classify"
        with pytest.raises(vt.BadRequestError, match="pooling_task"):
            client.reward(CHOSEN, kind="token")


def test_activation_is_the_servers_sigmoid_of_the_raw_reward() -> None:
    with FakeVLLM(reward="sequence") as fake, vt.Client(fake.url) as client:
        raw = client.reward(CHOSEN).score
        activated = client.reward(CHOSEN, use_activation=True).score
    assert activated == pytest.approx(1 / (1 + np.exp(-raw)), rel=1e-6)


def test_auto_on_a_server_older_than_0_19_is_refused_before_sending() -> None:
    with FakeVLLM(reward="sequence", version="0.16.0") as fake, vt.Client(fake.url) as client:
        with pytest.raises(vt.UnsupportedByServer, match=r"0\.19\.0"):
            client.reward(CHOSEN)
        assert fake.received("/pooling") == []
        # what it would have answered: per-token rows for a sequence model
        assert client.pool(messages=CHOSEN).data[0].ndim == 2
        assert client.reward(CHOSEN, kind="sequence").kind == "sequence"


def test_an_empty_conversation_list_is_refused_before_sending() -> None:
    with FakeVLLM(reward="sequence") as fake, vt.Client(fake.url) as client:
        with pytest.raises(vt.InvalidInputError):
            client.reward([])
        assert fake.received("/pooling") == []
