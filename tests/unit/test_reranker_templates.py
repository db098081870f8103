"""The rerankers whose score template vLLM ships, as data (``discovery.RERANKER_TEMPLATES``), held to vLLM's
own model -> template map and serve lines (vLLM 0.33.0 sdist; the same files in 0.32.0 and 0.34.0)."""

from __future__ import annotations

import json
import re

import pytest

from vllm_tasks.discovery import RERANKER_TEMPLATES, advisories_for, reranker_template
from vllm_tasks.score_template import missing_template_message, named_like_llm_reranker
from vllm_tasks.types.server import ModelCard, ServerInfo, TaskProbe, TaskStatus

# examples/pooling/score/using_template_offline.py:46-56 (get_chat_template's map), plus the two
# multimodal rerankers of docs/models/pooling_models/scoring.md:113-116 and specific_models.md:339-346.
VLLM_TEMPLATE_MAP = {
    "BAAI/bge-reranker-v2-gemma": "bge-reranker-v2-gemma.jinja",
    "Qwen/Qwen3-Reranker-0.6B": "qwen3_reranker.jinja",
    "Qwen/Qwen3-Reranker-4B": "qwen3_reranker.jinja",
    "Qwen/Qwen3-Reranker-8B": "qwen3_reranker.jinja",
    "tomaarsen/Qwen3-Reranker-0.6B-seq-cls": "qwen3_reranker.jinja",
    "tomaarsen/Qwen3-Reranker-4B-seq-cls": "qwen3_reranker.jinja",
    "tomaarsen/Qwen3-Reranker-8B-seq-cls": "qwen3_reranker.jinja",
    "mixedbread-ai/mxbai-rerank-base-v2": "mxbai_rerank_v2.jinja",
    "mixedbread-ai/mxbai-rerank-large-v2": "mxbai_rerank_v2.jinja",
    "nvidia/llama-nemotron-rerank-1b-v2": "nemotron-rerank.jinja",
    "polaria-tech/zerank-2-reranker-vllm": "zerank2.jinja",
    "Qwen/Qwen3-VL-Reranker-2B": "qwen3_vl_reranker.jinja",
    "nvidia/llama-nemotron-rerank-vl-1b-v2": "nemotron-vl-rerank.jinja",
}

# examples/pooling/score/using_template_online.py:18-23 and docs scoring.md:116: `vllm serve` lines.
VLLM_SERVE_OVERRIDES = {
    "BAAI/bge-reranker-v2-gemma": {
        "architectures": ["GemmaForSequenceClassification"],
        "classifier_from_token": ["Yes"],
        "method": "no_post_processing",
    },
    "mixedbread-ai/mxbai-rerank-base-v2": {
        "architectures": ["Qwen2ForSequenceClassification"],
        "classifier_from_token": ["0", "1"],
        "method": "from_2_way_softmax",
    },
    "Qwen/Qwen3-Reranker-0.6B": {
        "architectures": ["Qwen3ForSequenceClassification"],
        "classifier_from_token": ["no", "yes"],
        "is_original_qwen3_reranker": True,
    },
    "Qwen/Qwen3-VL-Reranker-2B": {
        "architectures": ["Qwen3VLForSequenceClassification"],
        "classifier_from_token": ["no", "yes"],
        "is_original_qwen3_reranker": True,
    },
    "tomaarsen/Qwen3-Reranker-0.6B-seq-cls": None,
    "nvidia/llama-nemotron-rerank-1b-v2": None,
    "polaria-tech/zerank-2-reranker-vllm": None,
}


def served(name: str, root: str | None = None) -> ServerInfo:
    return ServerInfo(
        base_url="http://h", version="0.33.0", models=(ModelCard(id=name, root=root),), routes=None
    )


@pytest.mark.parametrize(("model", "template"), sorted(VLLM_TEMPLATE_MAP.items()))
def test_each_model_of_vllms_map_finds_its_template(model: str, template: str) -> None:
    entry = reranker_template(served(model))
    assert entry is not None and entry.template == template
    assert entry.serve_flags.endswith(f"--chat-template examples/pooling/score/template/{template}")
    assert named_like_llm_reranker(served(model), model)


@pytest.mark.parametrize(
    "model",
    [
        "BAAI/bge-reranker-v2-m3",
        "cross-encoder/ms-marco-MiniLM-L-6-v2",
        "mixedbread-ai/mxbai-rerank-base-v1",
        "jinaai/jina-reranker-v3",
        "Qwen/Qwen3-Embedding-0.6B",
        "bge-reranker",
    ],
)
def test_rerankers_without_a_shipped_template_match_none(model: str) -> None:
    assert reranker_template(served(model)) is None
    assert not named_like_llm_reranker(served(model), model)


def test_a_served_name_without_the_family_is_found_by_its_root() -> None:
    info = served("reranker", root="/models/mxbai-rerank-large-v2")
    entry = reranker_template(info, "reranker")
    assert entry is not None and entry.template == "mxbai_rerank_v2.jinja"
    assert "mxbai-rerank-v2 is served with" in missing_template_message("reranker", info)
    generic = missing_template_message("reranker")  # the name alone names no family: every template listed
    assert "is served with" not in generic
    assert all(entry.template in generic for entry in RERANKER_TEMPLATES)


@pytest.mark.parametrize(("model", "overrides"), sorted(VLLM_SERVE_OVERRIDES.items()))
def test_the_serve_flags_carry_vllms_overrides(model: str, overrides: dict[str, object] | None) -> None:
    entry = reranker_template(served(model))
    assert entry is not None
    found = re.search(r"--hf-overrides '([^']*)'", entry.serve_flags)
    assert (json.loads(found[1]) if found else None) == overrides
    assert entry.needs_overrides is (overrides is not None)


def test_the_table_is_ordered_so_no_entry_hides_a_later_one() -> None:
    """Each entry's own reference names reach it, not an earlier, broader pattern."""
    for model, template in VLLM_TEMPLATE_MAP.items():
        first = next(entry for entry in RERANKER_TEMPLATES if re.search(entry.pattern, model, re.IGNORECASE))
        assert first.template == template, model


def test_the_advisory_for_missing_overrides_names_the_familys_flags() -> None:
    """A gemma reranker with --convert classify alone: classify served, /rerank not (as for Qwen3)."""
    classify_only = (
        TaskProbe(task="classify", path="/classify", status=TaskStatus.SERVED),
        TaskProbe(task="rerank", path="/rerank", status=TaskStatus.NOT_SERVED),
    )
    gemma = next(a for a in advisories_for(served("BAAI/bge-reranker-v2-gemma"), classify_only))
    assert gemma.id == "qwen3-reranker-overrides-missing"
    assert (
        "GemmaForSequenceClassification" in gemma.message and "bge-reranker-v2-gemma.jinja" in gemma.message
    )
    qwen = next(a for a in advisories_for(served("Qwen/Qwen3-Reranker-4B"), classify_only))
    assert "Qwen3ForSequenceClassification" in qwen.message
    for needs_none in ("polaria-tech/zerank-2-reranker-vllm", "tomaarsen/Qwen3-Reranker-0.6B-seq-cls"):
        ids = [a.id for a in advisories_for(served(needs_none), classify_only)]
        assert "qwen3-reranker-overrides-missing" not in ids
