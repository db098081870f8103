"""rerank() / score() / classify() / pool() against real vLLM CPU servers.

Fixtures: `rerank` (MiniLM cross-encoder, seeded 1-label head), `embed` (MiniLM bi-encoder), and a
late-interaction server started here: the same MiniLM weights with `--pooler-config '{"task":
"token_embed"}'` (per-token vectors, MaxSim scoring).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fixture_pins import models_dir, venv_python

import vllm_tasks as vt
from tests.clients import scorer_kind_on

pytestmark = pytest.mark.contract

QUERY = "What is the capital of France?"
DOCS = [
    "Paris is the capital of France.",
    "Bananas are yellow.",
    "France is in Europe.",
    "Berlin is the capital of Germany.",
    "The Eiffel Tower is in Paris, the French capital.",
    "vLLM serves embeddings and rerankers.",
    "Lyon is a large city in France.",
]
LONG_DOC = "Paris is the capital of France. " + " ".join(["Bananas are yellow and grow in warm places."] * 12)


def at_least(client: vt.Client, version: str) -> bool:
    """Whether the fixture server runs vLLM ``version`` or newer ($VLLM_TASKS_FIXTURE_VLLM: older)."""
    return client.server_info().parsed_version.at_least(version)


def expected_scorer(client: vt.Client, kind: vt.types.ScorerKind) -> vt.types.ScorerKind:
    """The kind ``client``'s server lets the SDK tell (``scorer_kind_on``)."""
    return scorer_kind_on(client.server_info().version or "", kind)


def raw(server: Any, path: str, body: dict[str, Any]) -> Any:
    response = httpx.post(server.base_url + path, json={"model": server.model, **body}, timeout=120)
    response.raise_for_status()
    return response.json()


@pytest.fixture(scope="module")
def rerank_client(vllm_rerank: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_rerank.base_url) as client:
        yield client


@pytest.fixture(scope="module")
def embed_client(vllm_embed: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_embed.base_url) as client:
        yield client


# --------------------------------------------------------------------------------------------------
# cross-encoder
# --------------------------------------------------------------------------------------------------


# vLLM's test(s):
# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_rerank_api_texts
# (results sorted by relevance)
def test_rerank_order_equals_score_order(vllm_rerank: Any, rerank_client: vt.Client) -> None:
    result = rerank_client.rerank(QUERY, DOCS)
    assert result.scorer is expected_scorer(rerank_client, vt.types.ScorerKind.CROSS_ENCODER)
    scores = raw(vllm_rerank, "/score", {"text_1": QUERY, "text_2": DOCS})["data"]
    by_score = sorted(range(len(DOCS)), key=lambda i: (-scores[i]["score"], i))
    assert result.indices == by_score
    assert np.allclose(result.scores, [scores[i]["score"] for i in by_score], atol=1e-6)
    ours = rerank_client.score(QUERY, DOCS)
    assert np.allclose(ours.scores, [entry["score"] for entry in scores], atol=1e-6)
    assert ours.scorer is expected_scorer(rerank_client, vt.types.ScorerKind.CROSS_ENCODER)


# vLLM's test(s):
# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_rerank_api_top_n
def test_rerank_top_n_and_original_documents(rerank_client: vt.Client) -> None:
    docs = [{"text": text, "id": f"doc-{i}"} for i, text in enumerate(DOCS)]
    full = rerank_client.rerank(QUERY, docs)
    top = rerank_client.rerank(QUERY, docs, top_n=3)
    assert top.indices == full.indices[:3]
    assert [hit.document for hit in top.results] == [docs[i] for i in full.indices[:3]]
    assert all(hit.document is docs[hit.index] for hit in top.results)


def test_split_requests_merge_into_the_single_request_ranking(rerank_client: vt.Client) -> None:
    single = rerank_client.rerank(QUERY, DOCS)
    split = rerank_client.rerank(QUERY, DOCS, batch_size=2, concurrency=3, top_n=5)
    assert split.num_requests == 4
    assert split.indices == single.indices[:5]
    assert np.allclose(split.scores, single.scores[:5], atol=1e-6)


def test_async_client_rerank(vllm_rerank: Any) -> None:
    async def run() -> tuple[vt.types.RerankResult, vt.types.RerankResult]:
        async with vt.AsyncClient(vllm_rerank.base_url) as client:
            return await client.rerank(QUERY, DOCS), await client.rerank(QUERY, DOCS, batch_size=3)

    single, split = asyncio.run(run())
    assert split.indices == single.indices
    assert split.num_requests == 3


@pytest.mark.vllm_min("0.20.0", "server-side max_tokens_per_doc")
# vLLM's test(s):
# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_rerank_max_tokens_per_doc
# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_score_max_tokens_per_doc_with_score_template  # noqa: E501
def test_max_tokens_per_doc_changes_the_long_documents_score(rerank_client: vt.Client) -> None:
    docs = [LONG_DOC, DOCS[1]]
    full = rerank_client.score(QUERY, docs).scores
    cut = rerank_client.score(QUERY, docs, max_tokens_per_doc=8).scores
    assert abs(cut[0] - full[0]) > 1e-4
    assert abs(cut[1] - full[1]) < 1e-6  # 5 tokens: not cut
    reranked = rerank_client.rerank(QUERY, docs, max_tokens_per_doc=8)
    assert dict(zip(reranked.indices, reranked.scores, strict=True))[0] == pytest.approx(cut[0], abs=1e-6)


@pytest.mark.vllm_min("0.20.0", "server-side max_tokens_per_doc to compare with")
def test_client_side_truncation_matches_the_servers(vllm_rerank: Any) -> None:
    docs = [LONG_DOC, DOCS[1], DOCS[4]]
    with vt.Client(vllm_rerank.base_url) as client:
        server_side = client.score(QUERY, docs, max_tokens_per_doc=8).scores
        # Pretend the server is vLLM 0.19 (no max_tokens_per_doc): the client cuts via /tokenize.
        info = client.server_info()
        client._server_state = client._server_state.with_info(info.model_copy(update={"version": "0.19.0"}))
        with pytest.raises(vt.UnsupportedByServer):
            client.score(QUERY, docs, max_tokens_per_doc=8)
        client_side = client.score(
            QUERY, docs, max_tokens_per_doc=8, max_tokens_per_doc_fallback="client"
        ).scores
    assert np.allclose(client_side, server_side, atol=1e-4), (client_side, server_side)


# vLLM's test(s):
# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_score_api_queries_str_1_documents_str_n
# (against the HF model)
def test_scores_equal_sentence_transformers_cross_encoder(rerank_client: vt.Client) -> None:
    script = textwrap.dedent(
        """
        import json, sys
        from sentence_transformers import CrossEncoder
        model = CrossEncoder(sys.argv[1], device="cpu", max_length=256)
        query, docs = json.loads(sys.stdin.read())
        print(json.dumps(model.predict([(query, d) for d in docs]).tolist()))
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        [str(venv_python()), "-c", script, str(models_dir() / "minilm-rerank")],
        input=json.dumps([QUERY, DOCS]),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=True,
    )
    reference = np.array(json.loads(done.stdout.strip().splitlines()[-1]), dtype=np.float64)
    result = rerank_client.rerank(QUERY, DOCS)
    ours = np.empty(len(DOCS))
    ours[result.indices] = result.scores
    assert np.abs(ours - reference).max() <= 1e-4, (ours, reference)


@pytest.mark.vllm_min("0.12.0", "use_activation")
# vLLM's test(s):
# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_use_activation
def test_use_activation_false_gives_logits(rerank_client: vt.Client) -> None:
    probs = rerank_client.score(QUERY, DOCS).scores
    logits = rerank_client.score(QUERY, DOCS, use_activation=False).scores
    # Two forward passes: 0.16-0.23's CPU kernels differ by up to 5e-4 between them (docs/compatibility.md)
    tolerance = 1e-5 if at_least(rerank_client, "0.32.0") else 2e-3
    assert np.allclose(1 / (1 + np.exp(-logits)), probs, atol=tolerance)


# vLLM's test(s):
# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_score_api_queries_str_1_documents_str_1
# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_score_api_queries_str_1_documents_str_n
# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_score_api_queries_str_n_documents_str_n
def test_score_pairings_on_the_server(rerank_client: vt.Client) -> None:
    one = rerank_client.score(QUERY, DOCS[0]).scores
    many = rerank_client.score(QUERY, DOCS).scores
    zipped = rerank_client.score([QUERY] * len(DOCS), DOCS, batch_size=3).scores
    assert one.shape == (1,) and one[0] == pytest.approx(many[0], abs=1e-6)
    assert np.allclose(zipped, many, atol=1e-6)
    with pytest.raises(vt.InvalidInputError):
        rerank_client.score([QUERY, QUERY], DOCS)


# vLLM's test(s):
# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_pooling_classify
def test_classify_and_pool_on_the_cross_encoder(rerank_client: vt.Client) -> None:
    result = rerank_client.classify(["hello world", "vLLM serves embeddings"])
    assert result.labels == ["relevance", "relevance"]
    assert result.probs.shape == (2, 1) and result.num_classes == 1
    pooled = rerank_client.pool("hello world")
    # Before 0.19 the default /pooling answers per token: token_classify (one label) from 0.12, the
    # hidden states on 0.11.0
    per_token = (4, 1) if at_least(rerank_client, "0.12.0") else (4, 384)
    assert pooled.data[0].shape == ((1,) if at_least(rerank_client, "0.19.0") else per_token)
    assert rerank_client.scorer_kind() is expected_scorer(rerank_client, vt.types.ScorerKind.CROSS_ENCODER)


# vLLM's test(s):
# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_rerank_api_max_model_len
# (a too-long document; test_vllm_contract.py: the query)
def test_too_long_document_is_named(rerank_client: vt.Client) -> None:
    docs = [DOCS[0], " ".join(["banana"] * 400), DOCS[1]]
    with pytest.raises(vt.ContextLengthExceeded) as info:
        rerank_client.rerank(QUERY, docs)
    assert info.value.input_index == 1
    assert "documents[1] is too long" in str(info.value)
    cut = rerank_client.rerank(QUERY, docs, truncate_prompt_tokens=-1)
    assert sorted(cut.indices) == [0, 1, 2]


def test_images_reach_the_server_as_content_parts(rerank_client: vt.Client) -> None:
    from PIL import Image

    # MiniLM is text-only: the server parses the content parts, then refuses the modality. 0.11.0's
    # /rerank takes text documents only (docs/compatibility.md).
    refusal = "MultiModalParam is not supported" if at_least(rerank_client, "0.16.0") else "valid string"
    with pytest.raises(vt.BadRequestError, match=refusal):
        rerank_client.rerank(QUERY, [Image.new("RGB", (8, 8), "red"), DOCS[0]])


def test_rank_example_runs(vllm_rerank: Any) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "rank.py"
    done = subprocess.run(
        [sys.executable, str(example), vllm_rerank.base_url, "--top-k", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    lines = done.stdout.splitlines()
    with vt.Client(vllm_rerank.base_url) as client:
        scorer = expected_scorer(client, vt.types.ScorerKind.CROSS_ENCODER)
    assert f"scorer: {scorer.value}" in lines[0]
    assert len(lines) == 3


def test_cli_rerank(vllm_rerank: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from vllm_tasks import cli

    assert cli.main(["rerank", QUERY, *DOCS[:3], "--url", vllm_rerank.base_url, "--top-n", "2"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_max_tokens_per_doc_over_the_limit_is_refused_client_side(rerank_client: vt.Client) -> None:
    with pytest.raises(vt.InvalidInputError, match="max_model_len"):
        rerank_client.rerank(QUERY, DOCS, max_tokens_per_doc=1000)


# --------------------------------------------------------------------------------------------------
# bi-encoder
# --------------------------------------------------------------------------------------------------


# vLLM's test(s):
# tests/entrypoints/pooling/scoring/test_bi_encoder_online.py::test_score_api_queries_str_1_documents_str_n
# (against the HF model)
def test_bi_encoder_rerank_equals_cosine_of_embeddings(embed_client: vt.Client) -> None:
    result = embed_client.rerank(QUERY, DOCS)
    assert result.scorer is expected_scorer(embed_client, vt.types.ScorerKind.BI_ENCODER)
    vectors = embed_client.embed([QUERY, *DOCS]).vectors.astype(np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    cosine = vectors[1:] @ vectors[0]
    ours = np.empty(len(DOCS))
    ours[result.indices] = result.scores
    assert np.abs(ours - cosine).max() <= 1e-5, (ours, cosine)


# vLLM's test(s):
# tests/entrypoints/pooling/embed/test_online.py::test_pooling_embed
# tests/entrypoints/pooling/embed/test_online.py::test_pooling_token_embed
# (vLLM 0.32 refuses token_embed on an embed model: 400)
def test_bi_encoder_pool_and_inactive_task(embed_client: vt.Client) -> None:
    pooled = embed_client.pool(["hello world", "x"]).data[0]
    # Before 0.19 /pooling without a task answers per token (here 4 tokens); from 0.19 the active task's
    assert pooled.shape == ((384,) if at_least(embed_client, "0.19.0") else (4, 384))
    if at_least(embed_client, "0.23.0"):  # an inactive task is refused
        with pytest.raises(vt.BadRequestError, match=r"token_embed|pooling_task|task"):
            embed_client.pool("hello", task="token_embed")
    else:  # 0.12-0.19 serve any supported task (0.11 ignores `task`): per-token vectors
        assert embed_client.pool("hello", task="token_embed").data[0].shape == (3, 384)
    with pytest.raises(vt.EndpointNotServed):
        embed_client.classify("hello")


# --------------------------------------------------------------------------------------------------
# late interaction: the `late-interaction` fixture (MiniLM with the token_embed pooling task)
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def late_interaction(vllm_late_interaction: Any) -> Any:
    return vllm_late_interaction


@pytest.mark.vllm_min(
    "0.23.0", "the late-interaction fixture does not start on 0.16 and its /score is not MaxSim before 0.23"
)
# vLLM's test(s):
# tests/entrypoints/pooling/scoring/test_late_interaction_online.py::test_score_api_queries_str_1_documents_str_n  # noqa: E501
# tests/entrypoints/pooling/scoring/test_late_interaction_online.py::test_token_embed
def test_late_interaction_scores_equal_maxsim_of_pooled_token_vectors(late_interaction: Any) -> None:
    with vt.Client(late_interaction.base_url) as client:
        result = client.rerank(QUERY, DOCS[:4])
        assert result.scorer is vt.types.ScorerKind.LATE_INTERACTION
        pooled = client.pool([QUERY, *DOCS[:4]])
        score = client.score(QUERY, DOCS[:4])
    assert pooled.data[0].ndim == 2
    expected = np.array([vt.maxsim(pooled.data[0], doc) for doc in pooled.data[1:]])
    ours = np.empty(4)
    ours[result.indices] = result.scores
    assert np.allclose(ours, expected, rtol=1e-4, atol=1e-4), (ours, expected)
    assert np.allclose(score.scores, expected, rtol=1e-4, atol=1e-4)
    assert score.scorer is vt.types.ScorerKind.LATE_INTERACTION
