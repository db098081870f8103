"""``reward``'s pure parts: its options, the version gates it checks before sending, and reading vLLM's
``/pooling`` arrays (shapes from vLLM 0.32's ``tests/entrypoints/pooling/reward/test_token_reward_online.py``
and the ``reward`` fixture's answer) as rewards."""

from __future__ import annotations

import numpy as np
import pytest

import vllm_tasks as vt
from vllm_tasks.reward import RewardParams, require_reward, reward_result
from vllm_tasks.types import PoolingResult, ServerInfo


def info(version: str | None) -> ServerInfo:
    return ServerInfo(base_url="http://h", version=version, models=(), routes=None)


def pooled(*arrays: list[float] | list[list[float]]) -> PoolingResult:
    return PoolingResult(data=[np.asarray(a, np.float32) for a in arrays], model="rm")


def test_a_vector_per_conversation_is_a_sequence_reward() -> None:
    # the `reward` fixture's raw answer (vLLM 0.32, use_activation=false) and the transformers reference
    result = reward_result(pooled([3.030613422393799], [1.3168879747390747]), "auto")
    assert result.kind == "sequence"
    assert result.scores is not None
    np.testing.assert_allclose(result.scores, [3.0306134, 1.316888], rtol=1e-6)
    assert len(result) == 2


def test_a_matrix_per_conversation_is_a_token_reward_read_at_its_last_token() -> None:
    result = reward_result(pooled([[0.1], [0.2], [0.7]], [[-1.0], [2.5]]), "auto")
    assert result.kind == "token"
    assert result.scores is not None
    np.testing.assert_allclose(result.scores, [0.7, 2.5])
    assert [r.shape for r in result.rewards] == [(3, 1), (2, 1)]


def test_several_labels_leave_the_reading_to_the_caller() -> None:
    # a process reward model: one [P(negative), P(positive)] row per step tag
    result = reward_result(pooled([[0.9, 0.1], [0.2, 0.8]]), "token")
    assert result.scores is None
    with pytest.raises(vt.InvalidInputError, match="several labels"):
        _ = result.score


def test_one_score_needs_one_conversation() -> None:
    assert reward_result(pooled([2.0]), "sequence").score == 2.0
    with pytest.raises(vt.InvalidInputError, match="exactly one conversation"):
        _ = reward_result(pooled([2.0], [1.0]), "sequence").score


@pytest.mark.parametrize(("asked", "arrays"), [("sequence", ([[1.0], [2.0]],)), ("token", ([1.0],))])
def test_an_answer_of_the_other_granularity_is_refused(asked: str, arrays: tuple[list, ...]) -> None:
    with pytest.raises(vt.UnexpectedResponse, match=f"asked for {asked} rewards") as raised:
        reward_result(pooled(*arrays), asked)
    assert raised.value.kind == "decode"


def test_mixed_or_empty_shapes_are_refused() -> None:
    with pytest.raises(vt.UnexpectedResponse, match="one vector or one matrix"):
        reward_result(pooled([1.0], [[1.0]]), "auto")
    with pytest.raises(vt.UnexpectedResponse, match="without rows"):
        reward_result(PoolingResult(data=[np.zeros((0, 1), np.float32)], model="rm"), "auto")


def test_each_kind_sends_its_task_and_raw_rewards_by_default() -> None:
    assert RewardParams().fields() == {"task": None, "use_activation": False}
    assert RewardParams(kind="sequence").fields()["task"] == "classify"
    assert RewardParams(kind="token", use_activation=True).fields() == {
        "task": "token_classify",
        "use_activation": True,
    }


@pytest.mark.parametrize(("field", "value"), [("kind", "reward"), ("use_activation", 1)])
def test_bad_options_are_refused(field: str, value: object) -> None:
    with pytest.raises(vt.InvalidInputError) as raised:
        RewardParams(**{field: value})  # type: ignore[arg-type]
    assert raised.value.field == field


@pytest.mark.parametrize("version", ["0.19.0", "0.32.0", "0.34.0", None])
def test_the_active_task_is_trusted_from_0_19(version: str | None) -> None:
    require_reward(info(version), "auto")


@pytest.mark.parametrize("version", ["0.12.0", "0.16.0", "0.18.1"])
def test_older_servers_answer_per_token_without_a_task_so_auto_is_refused(version: str) -> None:
    with pytest.raises(vt.UnsupportedByServer, match="kind='sequence' or kind='token'") as raised:
        require_reward(info(version), "auto")
    assert (raised.value.feature, raised.value.required_version) == ("reward_active_task", "0.19.0")
    require_reward(info(version), "sequence")
    require_reward(info(version), "token")


@pytest.mark.parametrize("kind", ["auto", "sequence", "token"])
def test_vllm_0_11_ignores_the_task_so_every_kind_is_refused(kind: str) -> None:
    with pytest.raises(vt.UnsupportedByServer):
        require_reward(info("0.11.0"), kind)
