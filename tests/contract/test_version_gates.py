"""Every version gate on real vLLM servers, on both sides of its boundary (issue 14).

Each test runs once per selected matrix version (``fixture_pins.selected_matrix_versions()``: today's
version and 0.16.0 by default, every built version with ``VLLM_TASKS_MATRIX=all``, see
``scripts/test-versions.sh``). The side of the boundary comes from ``gates.FEATURES`` and the server's real
``/version``; each test asserts, on that real server:

- below the boundary: what the server itself does with the field (a raw request: refused, or silently
  ignored), and that the SDK refuses before sending (no request reaches the server) or catches the
  server's silent misbehaviour;
- above it: the SDK's call works and gives the same numbers as the plain float request.

Where a server disagrees with the table, the server wins: fix ``gates.FEATURES`` and its evidence.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from fixture_pins import selected_matrix_versions

import vllm_tasks as vt
from tests.clients import scorer_kind_on
from vllm_tasks import gates
from vllm_tasks.versions import ServerVersion

pytestmark = pytest.mark.contract

VERSIONS = selected_matrix_versions()
TEXTS = ["hello world", "vLLM serves embeddings", "Paris is the capital of France."]
QUERY = "What is the capital of France?"
DOCS = ["Paris is the capital of France.", "Bananas are yellow.", "Berlin is in Germany."]
LONG_DOC = "Paris is the capital and largest city of France, " * 6 + "on the Seine."


def on(fixture: str) -> pytest.MarkDecorator:
    """Run the test on the ``fixture`` server of every selected version."""
    return pytest.mark.parametrize(
        "matrix_server", [(fixture, version) for version in VERSIONS], indirect=True, ids=VERSIONS
    )


def below(server: Any, feature: str) -> bool:
    """Whether the server's real version is below the first release with ``feature``."""
    first = gates.FEATURES[feature].min_version
    assert first is not None
    return ServerVersion.parse(server.vllm_version) < ServerVersion.parse(first)


class Recorded:
    """A client whose requests are recorded, to prove that a refused call sent nothing."""

    def __init__(self, server: Any) -> None:
        self.sent: list[str] = []
        self.http = httpx.Client(event_hooks={"request": [lambda r: self.sent.append(r.url.path)]})
        self.client = vt.Client(server.base_url, http_client=self.http, max_retries=0)

    def posts(self, path: str) -> int:
        return self.sent.count(path)


@pytest.fixture
def recorded(matrix_server: Any) -> Iterator[Recorded]:
    handle = Recorded(matrix_server)
    try:
        yield handle
    finally:
        handle.client.close()
        handle.http.close()


def raw_post(server: Any, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.base_url + path, json={"model": server.model, **body}, timeout=120)


def raw_float(server: Any, texts: list[str], **extra: Any) -> np.ndarray:
    response = raw_post(server, "/v1/embeddings", {"input": texts, **extra})
    response.raise_for_status()
    return np.array([item["embedding"] for item in response.json()["data"]], dtype=np.float32)


def by_index(ranking: vt.types.RerankResult) -> dict[int, float]:
    return dict(zip(ranking.indices, ranking.scores.tolist(), strict=True))


def assert_healthy(server: Any) -> None:
    assert httpx.get(server.base_url + "/health", timeout=10).status_code == 200


# --- the server's version is read as it is -----------------------------------------------------------


@on("embed")
def test_the_sdk_reads_the_real_version(matrix_server: Any, recorded: Recorded) -> None:
    info = recorded.client.server_info()
    assert info.version == matrix_server.vllm_version
    assert info.parsed_version.known


# --- bytes transports, embed_dtype, endianness (0.11.1) and bytes_only (0.13.0) ----------------------


@on("embed")
def test_auto_transport_is_the_fastest_the_version_has(matrix_server: Any, recorded: Recorded) -> None:
    result = recorded.client.embed(TEXTS)
    want = "base64" if below(matrix_server, "encoding_format_bytes") else "bytes"
    assert result.encoding_format == want
    assert np.abs(result.vectors - raw_float(matrix_server, TEXTS)).max() <= 1e-6


@on("embed")
@pytest.mark.parametrize(
    ("feature", "kwargs"),
    [
        ("encoding_format_bytes", {"encoding_format": "bytes"}),
        ("embed_dtype", {"encoding_format": "base64", "embed_dtype": "float16"}),
        ("endianness", {"encoding_format": "base64", "endianness": "big"}),
        ("encoding_format_bytes_only", {"encoding_format": "bytes_only"}),
    ],
    ids=["bytes", "embed_dtype", "endianness", "bytes_only"],
)
def test_wire_formats(matrix_server: Any, recorded: Recorded, feature: str, kwargs: dict[str, Any]) -> None:
    want = raw_float(matrix_server, TEXTS)
    if below(matrix_server, feature):
        # The server's own answer to the field it lacks (raw, bypassing the SDK's gate).
        raw = raw_post(matrix_server, "/v1/embeddings", {"input": TEXTS, **kwargs})
        if "embed_dtype" in kwargs or "endianness" in kwargs:  # silently ignored: float32, little-endian
            assert raw.status_code == 200
            decoded = [np.frombuffer(base64.b64decode(d["embedding"]), "<f4") for d in raw.json()["data"]]
            np.testing.assert_allclose(np.stack(decoded), want, rtol=0, atol=1e-6)
        else:  # an encoding_format value it does not know: refused
            assert raw.status_code == 400
        recorded.client.server_info()
        with pytest.raises(
            vt.UnsupportedByServer, match=re.escape(gates.FEATURES[feature].min_version or "")
        ):
            recorded.client.embed(TEXTS, **kwargs)
        assert recorded.posts("/v1/embeddings") == 0
    else:
        got = recorded.client.embed(TEXTS, **kwargs).vectors
        tolerance = 2e-3 if kwargs.get("embed_dtype") == "float16" else 1e-6
        assert np.abs(got - want).max() <= tolerance


# --- /v2/embed and truncation_side (0.18.0) ------------------------------------------------------------


@on("embed")
def test_v2_embed(matrix_server: Any, recorded: Recorded) -> None:
    if below(matrix_server, "/v2/embed"):
        assert raw_post(matrix_server, "/v2/embed", {"texts": TEXTS}).status_code == 404
        with pytest.raises(vt.UnsupportedByServer, match=re.escape("0.18.0")):
            recorded.client.embed_v2(texts=TEXTS)
        assert recorded.posts("/v2/embed") == 0
    else:
        result = recorded.client.embed_v2(texts=TEXTS, embedding_types=["float"], priority=0)
        assert result.float is not None
        assert np.abs(result.float - raw_float(matrix_server, TEXTS)).max() <= 1e-5


@on("embed")
def test_truncation_side(matrix_server: Any, recorded: Recorded) -> None:
    text = "left end of the text " + "filler " * 40 + "right end of the text"
    if below(matrix_server, "truncation_side"):
        with pytest.raises(vt.UnsupportedByServer, match=re.escape("0.18.0")):
            recorded.client.embed(text, truncate_prompt_tokens=8, truncation_side="left")
        assert recorded.posts("/v1/embeddings") == 0
    else:
        left = recorded.client.embed(text, truncate_prompt_tokens=8, truncation_side="left").vector
        right = recorded.client.embed(text, truncate_prompt_tokens=8, truncation_side="right").vector
        assert float(left @ right) < 0.99  # different ends kept
        for side, got in (("left", left), ("right", right)):
            want = raw_float(matrix_server, [text], truncate_prompt_tokens=8, truncation_side=side)[0]
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


# --- normalize: read up to 0.16, silently ignored 0.17-0.25, refused from 0.26 ------------------------


@on("embed")
def test_normalize_false_gives_raw_vectors_on_every_version(matrix_server: Any, recorded: Recorded) -> None:
    version = ServerVersion.parse(matrix_server.vllm_version)
    raw = raw_post(matrix_server, "/v1/embeddings", {"input": TEXTS, "normalize": False})
    if version < ServerVersion.parse("0.17.0"):
        norms = np.linalg.norm(np.array([d["embedding"] for d in raw.json()["data"]]), axis=1)
        assert (np.abs(norms - 1) > 1e-3).all()  # the server reads `normalize`
    elif version < ServerVersion.parse("0.26.0"):
        norms = np.linalg.norm(np.array([d["embedding"] for d in raw.json()["data"]]), axis=1)
        np.testing.assert_allclose(norms, 1, atol=1e-5)  # silently ignored: still unit length
    else:
        assert raw.status_code == 400
    vectors = recorded.client.embed(TEXTS, normalize=False).vectors
    assert (np.abs(np.linalg.norm(vectors, axis=1) - 1) > 1e-3).all()
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    np.testing.assert_allclose(unit, raw_float(matrix_server, TEXTS), rtol=0, atol=1e-5)


# --- dimensions ------------------------------------------------------------------------------------------
# A model that is not Matryoshka refuses `dimensions` on every version; one declared Matryoshka at any width
# (`is_matryoshka`) silently ignores a width over its own before 0.24 and refuses it from 0.24.


@on("embed")
def test_dimensions_on_a_non_matryoshka_model_is_refused_on_every_version(
    matrix_server: Any, recorded: Recorded
) -> None:
    raw = raw_post(matrix_server, "/v1/embeddings", {"input": TEXTS, "dimensions": 128})
    assert raw.status_code == 400
    with pytest.raises(vt.BadRequestError, match="is_matryoshka"):
        recorded.client.embed(TEXTS, dimensions=128)


@on("embed-mrl")
def test_matryoshka_dimensions_on_every_version(matrix_server: Any, recorded: Recorded) -> None:
    full = raw_float(matrix_server, TEXTS)
    cut = recorded.client.embed(TEXTS, dimensions=128).vectors
    want = full[:, :128] / np.linalg.norm(full[:, :128], axis=1, keepdims=True)
    np.testing.assert_allclose(cut, want, rtol=0, atol=1e-5)
    with pytest.raises(vt.BadRequestError):  # not one of [128, 256, 384]
        recorded.client.embed(TEXTS, dimensions=100)


@on("embed-matryoshka")
def test_dimensions_wider_than_the_model_never_pass_silently(matrix_server: Any, recorded: Recorded) -> None:
    raw = raw_post(matrix_server, "/v1/embeddings", {"input": TEXTS, "dimensions": 1024})
    if ServerVersion.parse(matrix_server.vllm_version) < ServerVersion.parse("0.24.0"):
        assert raw.status_code == 200 and len(raw.json()["data"][0]["embedding"]) == 384  # ignored
        with pytest.raises(vt.UnexpectedResponse, match="ignored it"):
            recorded.client.embed(TEXTS, dimensions=1024)
    else:
        assert raw.status_code == 400
        with pytest.raises(vt.BadRequestError):
            recorded.client.embed(TEXTS, dimensions=1024)


# --- over-long inputs: every version's wording is a ContextLengthExceeded with both numbers ---------------


@on("embed")
def test_over_long_input_names_both_lengths_on_every_version(matrix_server: Any, recorded: Recorded) -> None:
    with pytest.raises(vt.ContextLengthExceeded) as caught:
        recorded.client.embed(["word " * 600])
    assert caught.value.max_model_len == 256
    assert caught.value.prompt_tokens is not None and caught.value.prompt_tokens > 256


# --- rerank never takes the server down (0.11 and 0.16 died on the probe beside /rerank) -------------------


@on("rerank")
def test_every_scoring_call_leaves_the_server_up(matrix_server: Any, recorded: Recorded) -> None:
    client = recorded.client
    calls = [
        lambda: client.rerank(QUERY, DOCS, batch_size=1, concurrency=3),
        lambda: client.score(QUERY, DOCS, batch_size=1, concurrency=3),
        client.scorer_kind,
        lambda: client.classify(DOCS, concurrency=3, batch_size=1),
    ]
    for call in calls:
        call()
        assert_healthy(matrix_server)
    ranking = by_index(client.rerank(QUERY, DOCS))
    scores = client.score(QUERY, DOCS).scores
    np.testing.assert_allclose([ranking[i] for i in range(len(DOCS))], scores, rtol=0, atol=1e-5)
    assert client.scorer_kind() is expected_scorer(matrix_server, vt.types.ScorerKind.CROSS_ENCODER)
    assert_healthy(matrix_server)


def expected_scorer(server: Any, kind: vt.types.ScorerKind) -> vt.types.ScorerKind:
    """The kind the matrix server lets the SDK tell (``scorer_kind_on``)."""
    return scorer_kind_on(server.vllm_version, kind)


@on("embed")
def test_a_bi_encoder_is_told_from_a_late_interaction_model(matrix_server: Any, recorded: Recorded) -> None:
    assert recorded.client.scorer_kind() is expected_scorer(matrix_server, vt.types.ScorerKind.BI_ENCODER)
    scores = recorded.client.score(QUERY, DOCS).scores
    assert recorded.client.rerank(QUERY, DOCS).results[0].index == int(np.argmax(scores))
    assert_healthy(matrix_server)


# --- use_activation (0.12.0) ------------------------------------------------------------------------------


@on("rerank")
def test_use_activation(matrix_server: Any, recorded: Recorded) -> None:
    probs = recorded.client.classify(DOCS).probs[:, 0]
    raw = raw_post(matrix_server, "/classify", {"input": DOCS, "use_activation": False})
    raw_values = np.array([item["probs"][0] for item in raw.json()["data"]])
    if below(matrix_server, "use_activation"):
        np.testing.assert_allclose(raw_values, probs, rtol=0, atol=1e-6)  # silently ignored
        before = recorded.posts("/classify")
        with pytest.raises(vt.UnsupportedByServer, match=re.escape("0.12.0")):
            recorded.client.classify(DOCS, use_activation=False)
        assert recorded.posts("/classify") == before
    else:
        logits = recorded.client.classify(DOCS, use_activation=False).probs[:, 0]
        np.testing.assert_allclose(logits, raw_values, rtol=0, atol=1e-6)
        # The server's sigmoid of one request vs. the client's of another: 0.16-0.23's CPU kernels differ
        # by up to 5e-4 between two forward passes of the same batch (seen on real servers).
        np.testing.assert_allclose(1 / (1 + np.exp(-logits)), probs, rtol=0, atol=2e-3)


# --- max_tokens_per_doc, max_tokens_per_query, instruction (0.20.0) --------------------------------------


@on("rerank")
def test_max_tokens_per_doc(matrix_server: Any, recorded: Recorded) -> None:
    docs = [LONG_DOC, DOCS[1]]
    client = recorded.client
    full = client.score(QUERY, docs).scores
    raw = raw_post(matrix_server, "/rerank", {"query": QUERY, "documents": docs, "max_tokens_per_doc": 8})
    raw_scores = {hit["index"]: hit["relevance_score"] for hit in raw.json()["results"]}
    if below(matrix_server, "max_tokens_per_doc"):
        assert raw_scores[0] == pytest.approx(full[0], abs=1e-5)  # silently ignored by the server
        before = recorded.posts("/rerank")
        with pytest.raises(vt.UnsupportedByServer, match=re.escape("0.20.0")):
            client.rerank(QUERY, docs, max_tokens_per_doc=8)
        assert recorded.posts("/rerank") == before
        cut = client.rerank(QUERY, docs, max_tokens_per_doc=8, max_tokens_per_doc_fallback="client")
    else:
        assert abs(raw_scores[0] - full[0]) > 1e-4  # applied by the server
        cut = client.rerank(QUERY, docs, max_tokens_per_doc=8)
        assert by_index(cut)[0] == pytest.approx(raw_scores[0], abs=1e-5)
    assert abs(by_index(cut)[0] - full[0]) > 1e-4
    assert by_index(cut)[1] == pytest.approx(full[1], abs=1e-5)  # 5 tokens: not cut


@on("rerank")
@pytest.mark.parametrize(
    ("feature", "kwargs"),
    [("max_tokens_per_query", {"max_tokens_per_query": 4}), ("score_instruction", {"instruction": "Rank."})],
    ids=["max_tokens_per_query", "instruction"],
)
def test_other_020_scoring_fields(
    matrix_server: Any, recorded: Recorded, feature: str, kwargs: dict[str, Any]
) -> None:
    if below(matrix_server, feature):
        recorded.client.server_info()
        with pytest.raises(vt.UnsupportedByServer, match=re.escape("0.20.0")):
            recorded.client.rerank(QUERY, DOCS, **kwargs)
        assert recorded.posts("/rerank") == 0
    else:
        raw = raw_post(matrix_server, "/rerank", {"query": QUERY, "documents": DOCS, **kwargs})
        assert raw.status_code == 200  # the server reads the field
        want = {hit["index"]: hit["relevance_score"] for hit in raw.json()["results"]}
        got = by_index(recorded.client.rerank(QUERY, DOCS, **kwargs))
        assert got == pytest.approx(want, abs=1e-6)


# --- /score's queries/documents form (0.16.0): the SDK sends text_1/text_2 before it ----------------------


@on("rerank")
def test_score_body_form(matrix_server: Any, recorded: Recorded) -> None:
    raw = raw_post(matrix_server, "/score", {"queries": QUERY, "documents": DOCS})
    if below(matrix_server, "score_queries_documents"):
        assert raw.status_code == 400  # only text_1/text_2 there
    else:
        assert raw.status_code == 200
    scores = recorded.client.score(QUERY, DOCS).scores
    text_pairs = raw_post(matrix_server, "/score", {"text_1": QUERY, "text_2": DOCS}).json()["data"]
    np.testing.assert_allclose(scores, [item["score"] for item in text_pairs], rtol=0, atol=1e-6)


# --- several conversations in one request (0.25.0): one request per conversation before it ----------------

CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "Bananas are yellow."}],
]


@on("embed")
def test_batched_chat_embeddings(matrix_server: Any, recorded: Recorded) -> None:
    raw = raw_post(matrix_server, "/v1/embeddings", {"messages": CONVERSATIONS})
    if below(matrix_server, "batched_chat_embeddings"):
        assert raw.status_code == 400
    else:
        assert raw.status_code == 200
    both = recorded.client.embed(messages=CONVERSATIONS).vectors
    sent = recorded.posts("/v1/embeddings")
    assert sent == (2 if below(matrix_server, "batched_chat_embeddings") else 1)
    for row, conversation in zip(both, CONVERSATIONS, strict=True):
        one = raw_post(matrix_server, "/v1/embeddings", {"messages": conversation}).json()["data"][0]
        np.testing.assert_allclose(row, one["embedding"], rtol=0, atol=1e-5)
