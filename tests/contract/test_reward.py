"""``reward`` on a real sequence reward model against transformers on the same weights.

Fixture: `reward` (Skywork-Reward-V2-Qwen3's layout: a tiny seeded ``Qwen3ForSequenceClassification`` with one
label and a ChatML template; vLLM runs it with ``classify`` active). The reference is
server-fixtures/references.py's ``reward``: the tokenizer's chat template (no generation prompt) and the score
head's raw output at the last token, in transformers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

import vllm_tasks as vt
from tests.zoo import reference as zoo_reference

pytestmark = [pytest.mark.contract, pytest.mark.vllm_min("0.19.0", "/pooling answers with the active task")]

QUESTION = {"role": "user", "content": "What is two plus two?"}
CONVERSATIONS = [
    [QUESTION, {"role": "assistant", "content": "Four."}],
    [QUESTION, {"role": "assistant", "content": "Five, obviously."}],
]
#: Float32 on both sides, one conversation a request.
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    answer: dict[str, Any] = zoo_reference("reward", "reward", {"conversations": CONVERSATIONS})
    return answer


@pytest.fixture(scope="module")
def reward_client(vllm_reward: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_reward.base_url, model=vllm_reward.model, timeout=120) as client:
        yield client


def test_rewards_equal_the_models_own_head_on_the_chat_templated_ids(
    reward_client: vt.Client, reference: dict[str, Any]
) -> None:
    result = reward_client.reward(CONVERSATIONS)
    assert result.kind == "sequence" and result.scores is not None
    expected = np.array(reference["rewards"])
    assert np.abs(result.scores - expected).max() <= TOLERANCE, (result.scores, expected)
    assert abs(expected[0] - expected[1]) > 0.1  # the two conversations' rewards differ
    assert result.usage.prompt_tokens == sum(len(ids) for ids in reference["token_ids"])


def test_the_server_renders_the_same_token_ids_as_transformers(
    vllm_reward: Any, reference: dict[str, Any]
) -> None:
    for conversation, ids in zip(CONVERSATIONS, reference["token_ids"], strict=True):
        body = {"model": vllm_reward.model, "messages": conversation, "add_generation_prompt": False}
        answer = httpx.post(f"{vllm_reward.base_url}/tokenize", json=body, timeout=60).json()
        assert answer["tokens"] == ids


def test_sequence_kind_and_activation_on_the_real_server(reward_client: vt.Client) -> None:
    raw = reward_client.reward(CONVERSATIONS[0], kind="sequence").score
    activated = reward_client.reward(CONVERSATIONS[0], use_activation=True).score
    assert activated == pytest.approx(1 / (1 + np.exp(-raw)), rel=1e-5)
    with pytest.raises(vt.BadRequestError, match="pooling_task"):
        reward_client.reward(CONVERSATIONS[0], kind="token")


# ------------------------------------------------------------------------------------------- token rewards
# Fixture `token-reward`: Qwen2.5-Math-RM's layout (vLLM's Qwen2ForRewardModel, token_classify active), tiny
# and seeded; the reference is references.py's ``token_reward``: transformers' Qwen2Model and the
# checkpoint's score head (Linear, ReLU, Linear) at every token.


@pytest.fixture(scope="module")
def token_reference() -> dict[str, Any]:
    answer: dict[str, Any] = zoo_reference("token-reward", "token-reward", {"conversations": CONVERSATIONS})
    return answer


def test_token_rewards_equal_the_heads_output_at_every_token(
    vllm_token_reward: Any, token_reference: dict[str, Any]
) -> None:
    with vt.Client(vllm_token_reward.base_url, model=vllm_token_reward.model, timeout=120) as client:
        result = client.reward(CONVERSATIONS)
        named = client.reward(CONVERSATIONS[1], kind="token")
        with pytest.raises(vt.BadRequestError, match="Unsupported task: 'classify'"):
            client.reward(CONVERSATIONS[0], kind="sequence")
    assert result.kind == "token" and result.scores is not None
    for rewards, expected in zip(result.rewards, token_reference["rewards"], strict=True):
        assert rewards.shape == (len(expected), 1)
        assert np.abs(rewards[:, 0] - np.array(expected)).max() <= TOLERANCE * 10, (rewards[:, 0], expected)
    last = np.array([expected[-1] for expected in token_reference["rewards"]])
    assert np.abs(result.scores - last).max() <= TOLERANCE * 10
    assert abs(last[0] - last[1]) > 0.1  # the two conversations' outcome rewards differ
    np.testing.assert_allclose(named.rewards[0], result.rewards[1], atol=1e-5)
