"""The version-gate table and its check."""

from __future__ import annotations

from pathlib import Path

import pytest

import vllm_tasks as vt
from vllm_tasks import gates
from vllm_tasks.types import ServerInfo


def info(version: str | None) -> ServerInfo:
    return ServerInfo(base_url="http://x", version=version, models=(), routes=None)


REFERENCE_ROWS = {
    # reference §10 and the list: feature -> first version
    "max_tokens_per_doc": "0.20.0",
    "max_tokens_per_query": "0.20.0",
    "/v2/embed": "0.18.0",
    "transcription_beam_search": "0.18.0",
    "encoding_format_base64": "0.5.1",
    "embed_dtype": "0.11.1",
    "endianness": "0.11.1",
    "encoding_format_bytes": "0.11.1",
    "encoding_format_bytes_only": "0.13.0",
    "/v2/rerank": "0.7.0",
    "score_multimodal": "0.10.0",
    "score_queries_documents": "0.16.0",
    "score_multimodal_late_interaction": "0.17.0",
    "v2_embed_priority": "0.18.0",
    "deepseek_ocr_ngram_xargs": "0.11.1",
    "score_instruction": "0.20.0",
    "batched_chat_embeddings": "0.25.0",
    "truncation_side": "0.18.0",
    "diarized_json": "0.27.0",  # not in §10: vLLM PR #48543, first released in 0.27.0 (gates.FEATURES)
    "late_chunking": "0.33.0",  # §11 item 1; docs/compatibility.md "vLLM 0.33.0"
}


@pytest.mark.parametrize(("feature", "first"), sorted(REFERENCE_ROWS.items()))
def test_table_matches_reference(feature: str, first: str) -> None:
    assert gates.FEATURES[feature].min_version == first
    major, minor, _patch = (int(p) for p in first.split("."))
    older = f"{major}.{minor - 1}.0" if minor else "0.0.1"
    assert gates.supports(info(first), feature)
    assert gates.supports(info(first + "+cpu"), feature)
    assert not gates.supports(info(older), feature)


def test_require_names_feature_and_versions() -> None:
    with pytest.raises(vt.UnsupportedByServer) as raised:
        gates.require(info("0.19.0"), ["max_tokens_per_doc"])
    error = raised.value
    assert (error.feature, error.server_version, error.required_version) == (
        "max_tokens_per_doc",
        "0.19.0",
        "0.20.0",
    )
    assert "vLLM >= 0.20.0" in str(error) and "0.19.0" in str(error)


def test_flag_is_named_when_one_is_needed() -> None:
    with pytest.raises(vt.UnsupportedByServer, match="--logits-processors"):
        gates.require(info("0.11.0"), ["deepseek_ocr_ngram_xargs"])


def test_unknown_version_lets_requests_through() -> None:
    gates.require(info(None), list(gates.FEATURES))
    gates.require(info("dev"), ["max_tokens_per_doc"])


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.16.0", {"normalize": False}),
        ("0.17.0", {"use_activation": False}),
        ("0.25.1", {"use_activation": False}),
        ("0.26.0", {"use_activation": False}),
        (None, {"use_activation": False}),
    ],
)
def test_normalize_is_mapped_per_version(version: str | None, expected: dict[str, bool]) -> None:
    assert gates.normalize_fields(info(version), False) == expected
    assert gates.normalize_fields(info(version), None) == {}


def test_removed_feature_error_says_when() -> None:
    with pytest.raises(vt.UnsupportedByServer, match=r"removed in vLLM 0\.17\.0"):
        gates.require(info("0.26.0"), ["normalize"])


def test_every_gate_is_in_the_compatibility_table() -> None:
    """docs/compatibility.md says, for each gate, what real servers did on both sides, or why not run."""
    text = (Path(__file__).parents[2] / "docs" / "compatibility.md").read_text()
    missing = [name for name in gates.FEATURES if f"`{name}`" not in text]
    assert missing == [], f"add these gates to docs/compatibility.md: {missing}"
