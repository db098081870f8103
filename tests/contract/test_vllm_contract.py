"""vLLM's own API contract, through the SDK, on the real CPU fixtures (issue 11, item 6).

vLLM tests its endpoints in ``tests/entrypoints/pooling/`` and ``tests/entrypoints/openai/`` with raw HTTP
or the OpenAI client. Each test here takes the client-visible behaviours one of those tests asserts and
checks they hold through ``Client`` and ``AsyncClient`` (every test runs on both) against the CPU fixtures.
The comment above each test names the vLLM test(s) it follows (paths in the vllm-project/vllm repository).
Where vLLM 0.32 (the fixtures' version) answers differently from vLLM's current tests, the server wins and
the comment says so. Behaviours an existing integration test already covers carry the citation there.

Fixtures: ``embed`` (MiniLM bi-encoder), ``rerank`` (MiniLM cross-encoder, seeded 1-label head: its scores
carry no meaning, only their arithmetic does), ``late-interaction`` (MiniLM with token_embed) and ``stt``
(Whisper base).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile as sf

import vllm_tasks as vt
from tests.clients import client_factory

pytestmark = pytest.mark.contract

INPUT_TEXT = "The best thing about vLLM is that it supports many different models"
TEXTS_1 = ["What is the capital of France?", "What is the capital of Germany?"]
TEXTS_2 = ["The capital of France is Paris.", "The capital of Germany is Berlin."]
RERANK_DOCS = [
    "The capital of Brazil is Brasilia.",
    "The capital of France is Paris.",
    "Cross-encoder models are neat",
]
#: Over max_model_len (256) in tokens; vLLM's tests use a 10-word sentence x 100 on max_model_len 100.
LONG_TEXT = "Immerse yourself in the enchanting chronicle of calculus and its history. " * 30
#: ~1,400 tokens and 6,000 characters: also over the bi-encoder's character bound (18 x 256).
LONG_QUERY = "What is the capital of France?" * 200
MAX_MODEL_LEN = 256
TRUNCATION_TOO_BIG = (
    "truncate_prompt_tokens value is greater than max_model_len. Please request a smaller truncation size."
)
TOLERANCE = {"float32": 1e-6, "float16": 2e-3, "bfloat16": 8e-3, "fp8_e4m3": 4e-2, "fp8_e5m2": 6e-2}
MESSAGES = [
    {"role": "user", "content": "The cat sat on the mat."},
    {"role": "assistant", "content": "A feline was resting on a rug."},
    {"role": "user", "content": "Stars twinkle brightly in the night sky."},
]
AUDIO = Path(__file__).resolve().parent.parent / "data" / "audio"
FOX, NUMBERS, FRENCH, LONG_AUDIO = (AUDIO / n for n in ("fox.wav", "numbers.wav", "french.wav", "long45.wav"))


@pytest.fixture(params=["sync", "async"])
def make_client(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Factory for a ``Client`` or an ``AsyncClient`` (``max_retries`` 0 unless given); closed afterwards."""
    yield from client_factory(request.param)


def token_ids(server: Any, text: str) -> list[int]:
    """The server's own tokenization of ``text`` (``POST /tokenize``, special tokens included)."""
    response = httpx.post(
        server.base_url + "/tokenize", json={"model": server.model, "prompt": text}, timeout=60
    )
    response.raise_for_status()
    tokens: list[int] = response.json()["tokens"]
    return tokens


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def words(text: str) -> list[str]:
    return "".join(c if c.isalnum() or c.isspace() else " " for c in text.lower()).split()


# --------------------------------------------------------------------------------------------------
# /v1/embeddings, /pooling and /v2/embed on the bi-encoder (`embed`)
# --------------------------------------------------------------------------------------------------


# tests/entrypoints/pooling/embed/test_online.py::test_completion_request
# tests/entrypoints/pooling/embed/test_online.py::test_completion_request_batched
# tests/entrypoints/pooling/embed/test_cohere_openai_parity.py::test_token_count_parity
# tests/entrypoints/pooling/pooling/test_online.py::test_completion_request_batched
def test_usage_counts_every_prompt_token(vllm_embed: Any, make_client: Callable[..., Any]) -> None:
    client = make_client(vllm_embed.base_url)
    ids = token_ids(vllm_embed, INPUT_TEXT)
    n = 10
    texts = client.embed([INPUT_TEXT] * n)
    assert texts.vectors.shape == (n, 384)
    assert texts.usage.prompt_tokens == texts.usage.total_tokens == len(ids) * n
    assert not texts.usage.completion_tokens  # 0, or absent from the binary transport's metadata
    as_ids = client.embed([ids] * n)  # list[list[int]] input
    assert as_ids.usage.prompt_tokens == len(ids) * n
    np.testing.assert_allclose(as_ids.vectors, texts.vectors, rtol=0, atol=1e-5)
    single = client.embed(INPUT_TEXT)  # a lone string is one input
    assert single.vectors.shape == (1, 384) and single.usage.prompt_tokens == len(ids)
    v2 = client.embed_v2(texts=[INPUT_TEXT] * n)
    assert v2.billed_units["input_tokens"] == len(ids) * n
    pooled = client.pool([INPUT_TEXT] * n)
    assert pooled.usage.prompt_tokens == len(ids) * n and len(pooled.data) == n


# tests/entrypoints/pooling/basic/test_truncation.py::test_smaller_truncation_size
# tests/entrypoints/pooling/basic/test_truncation.py::test_max_truncation_size
# tests/entrypoints/pooling/basic/test_truncation.py::test_bigger_truncation_size
# tests/entrypoints/pooling/embed/test_online.py::test_truncate_prompt_tokens
def test_truncate_prompt_tokens_counts_and_its_limit(
    vllm_embed: Any, make_client: Callable[..., Any]
) -> None:
    client = make_client(vllm_embed.base_url)
    assert client.embed(LONG_TEXT, truncate_prompt_tokens=10).usage.prompt_tokens == 10
    ids = token_ids(vllm_embed, LONG_TEXT)
    assert len(ids) > MAX_MODEL_LEN
    assert client.embed([ids], truncate_prompt_tokens=10).usage.prompt_tokens == 10
    assert client.embed(LONG_TEXT, truncate_prompt_tokens=-1).usage.prompt_tokens == MAX_MODEL_LEN
    with pytest.raises(vt.BadRequestError) as caught:
        client.embed(LONG_TEXT, truncate_prompt_tokens=MAX_MODEL_LEN + 1)
    error = caught.value
    assert type(error) is vt.BadRequestError and error.status_code == 400
    assert error.message == TRUNCATION_TOO_BIG
    assert isinstance(error.body, dict) and error.body["error"]["type"] == "BadRequestError"


# tests/entrypoints/pooling/embed/test_online.py::test_base64_embed_dtype_and_endianness
# tests/entrypoints/pooling/embed/test_online.py::test_bytes_embed_dtype_and_endianness
# tests/entrypoints/pooling/embed/test_online.py::test_bytes_only_embed_dtype_and_endianness
# (test_embeddings.py covers the default endianness and float16 big/little on base64 and bytes.)
def test_every_binary_transport_dtype_and_endianness_agrees_with_float(
    vllm_embed: Any, make_client: Callable[..., Any]
) -> None:
    client = make_client(vllm_embed.base_url)
    texts = [INPUT_TEXT, "hello world"]
    reference = client.embed(texts, encoding_format="float").vectors
    for fmt in ("base64", "bytes", "bytes_only"):
        for dtype, tolerance in TOLERANCE.items():
            for endianness in ("big", "little"):
                got = client.embed(texts, encoding_format=fmt, embed_dtype=dtype, endianness=endianness)
                assert got.vectors.shape == reference.shape and got.vectors.dtype == np.float32
                error = float(np.abs(got.vectors - reference).max())
                assert error <= tolerance, (fmt, dtype, endianness, error)


# tests/entrypoints/pooling/embed/test_online.py::test_params_not_supported
# tests/entrypoints/pooling/pooling/test_online.py::test_params_not_supported
# tests/entrypoints/pooling/embed/test_online_dimensions.py::test_matryoshka (dimensions=-1)
def test_unknown_transport_values_are_refused(vllm_embed: Any, make_client: Callable[..., Any]) -> None:
    client = make_client(vllm_embed.base_url)
    for name in ("encoding_format", "embed_dtype", "endianness"):
        bad = f"bad_{name}"
        # The SDK refuses before sending, naming the argument and the value...
        with pytest.raises(vt.InvalidInputError) as refused:
            client.embed(INPUT_TEXT, **{name: bad})
        assert refused.value.field == name and bad in str(refused.value)
        # ...and when the value reaches the server anyway, its 400 comes back as it was.
        with pytest.raises(vt.BadRequestError) as caught:
            client.embed(INPUT_TEXT, encoding_format="base64", extra_body={name: bad})
        assert caught.value.status_code == 400 and caught.value.param == f"body.{name}"
        assert "literal_error" in caught.value.message and bad in caught.value.message
    with pytest.raises(vt.InvalidInputError, match="dimensions"):
        client.embed(INPUT_TEXT, dimensions=-1)


# tests/entrypoints/pooling/embed/test_online.py::test_use_activation
def test_use_activation_false_returns_the_unnormalised_embedding(
    vllm_embed: Any, make_client: Callable[..., Any]
) -> None:
    client = make_client(vllm_embed.base_url)
    default = client.embed(INPUT_TEXT).vectors
    normalised = client.embed(INPUT_TEXT, use_activation=True).vectors
    raw = client.embed(INPUT_TEXT, use_activation=False).vectors
    np.testing.assert_allclose(default, normalised, rtol=0, atol=1e-6)
    assert not np.allclose(raw, normalised, atol=1e-2)
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), normalised, atol=1e-5)


# tests/entrypoints/pooling/embed/test_online.py::test_chat_request
# (MiniLM's tokenizer has no chat template: the `embed` fixture serves vLLM's dummy one, as that test does.)
def test_chat_embedding_equals_the_rendered_prompt(vllm_embed: Any, make_client: Callable[..., Any]) -> None:
    client = make_client(vllm_embed.base_url)
    chat = client.embed(messages=MESSAGES)
    prompt = "".join(f"{m['role']}: {m['content']}\n" for m in MESSAGES)
    completion = client.embed(prompt, add_special_tokens=False)
    np.testing.assert_allclose(chat.vectors, completion.vectors, rtol=0, atol=1e-5)
    assert chat.usage == completion.usage and chat.model == completion.model
    with_special = client.embed(messages=MESSAGES, add_special_tokens=True)
    assert with_special.usage.prompt_tokens == chat.usage.prompt_tokens + 2  # [CLS] and [SEP]
    both = {"continue_final_message": True, "add_generation_prompt": True}
    with pytest.raises(vt.BadRequestError) as caught:
        client.embed(messages=MESSAGES, extra_body=both)
    assert "Cannot set both `continue_final_message` and `add_generation_prompt` to True." in str(
        caught.value
    )


# tests/entrypoints/pooling/embed/test_online.py::test_pooling_embed
# tests/entrypoints/pooling/embed/test_online.py::test_pooling_not_supported
# tests/entrypoints/pooling/scoring/test_bi_encoder_online.py::test_pooling_not_supported
# (test_online.py::test_pooling_token_embed: vLLM 0.32 answers 400 "Try switching the model's
# pooling_task" for token_embed on an embed model; test_scoring.py asserts that.)
def test_pooling_tasks_of_an_embedding_model(vllm_embed: Any, make_client: Callable[..., Any]) -> None:
    client = make_client(vllm_embed.base_url)
    assert client.pool(INPUT_TEXT, task="embed").data[0].shape == (384,)
    for task in ("classify", "token_classify"):
        with pytest.raises(vt.BadRequestError) as caught:
            client.pool(INPUT_TEXT, task=task)
        assert caught.value.message.startswith(f"Unsupported task: {task!r}")
        assert caught.value.param == "task" and caught.value.body["error"]["type"] == "BadRequestError"
    with pytest.raises(vt.BadRequestError, match="No IOProcessor plugin installed"):
        client.pool(INPUT_TEXT, task="plugin")


# tests/entrypoints/pooling/embed/test_cohere_online.py::test_truncate_end_succeeds
# tests/entrypoints/pooling/embed/test_cohere_online.py::test_truncate_start_succeeds
# tests/entrypoints/pooling/embed/test_cohere_online.py::test_truncate_none_rejects_long_input
# tests/entrypoints/pooling/embed/test_cohere_online.py::test_truncate_start_vs_end_differ
def test_cohere_truncate_modes(vllm_embed: Any, make_client: Callable[..., Any]) -> None:
    client = make_client(vllm_embed.base_url)
    long_text = " ".join(f"alpha{i}" for i in range(300)) + " " + " ".join(f"omega{i}" for i in range(300))
    end = client.embed_v2(texts=[long_text], truncate="END")
    start = client.embed_v2(texts=[long_text], truncate="START")
    assert end.float is not None and start.float is not None and end.float.shape == (1, 384)
    assert end.billed_units["input_tokens"] == start.billed_units["input_tokens"] == MAX_MODEL_LEN
    assert cosine(end.float[0], start.float[0]) < 0.99
    with pytest.raises(vt.ContextLengthExceeded) as caught:
        client.embed_v2(texts=[long_text], truncate="NONE")
    assert caught.value.status_code == 400 and caught.value.max_model_len == MAX_MODEL_LEN
    # vLLM 0.32 (embed/io_processor.py): with truncate=NONE, max_tokens is a limit, not a cut.
    with pytest.raises(vt.BadRequestError, match=r"exceeds max_tokens=2 with truncate=NONE"):
        client.embed_v2(texts=["hi there you"], truncate="NONE", max_tokens=2)


# tests/entrypoints/pooling/embed/test_cohere_online.py::test_response_structure
# tests/entrypoints/pooling/embed/test_cohere_online.py::test_embedding_types
# tests/entrypoints/pooling/embed/test_cohere_online.py::test_l2_normalized
# tests/entrypoints/pooling/embed/test_cohere_online.py::test_semantic_similarity
# tests/entrypoints/pooling/embed/test_cohere_online.py::test_missing_input_returns_error
# (vLLM's current test reads meta.tokens.input_tokens; 0.32 answers meta.billed_units, as in
# test_cohere_openai_parity.py.)
def test_cohere_response_structure(vllm_embed: Any, make_client: Callable[..., Any]) -> None:
    client = make_client(vllm_embed.base_url)
    texts = ["machine learning", "deep learning", "chocolate cake recipe"]
    result = client.embed_v2(texts=texts, embedding_types=["float", "binary", "ubinary"])
    assert result.texts == texts and result.id is not None
    assert result.billed_units["input_tokens"] > 0 and result.billed_units["image_tokens"] == 0
    assert result.float is not None and result.binary is not None and result.ubinary is not None
    assert result.binary.shape == result.ubinary.shape == (3, 384 // 8)
    np.testing.assert_allclose(np.linalg.norm(result.float, axis=1), 1.0, atol=1e-3)
    assert cosine(result.float[0], result.float[1]) > cosine(result.float[0], result.float[2])
    with pytest.raises(vt.InvalidInputError):  # vLLM answers 400; the SDK refuses before sending
        client.embed_v2()


# --------------------------------------------------------------------------------------------------
# /score and /rerank on the bi-encoder (`embed`)
# --------------------------------------------------------------------------------------------------


# tests/entrypoints/pooling/scoring/test_bi_encoder_online.py::test_score_api_queries_str_1_documents_str_1
# tests/entrypoints/pooling/scoring/test_bi_encoder_online.py::test_score_api_queries_str_1_documents_str_n
# tests/entrypoints/pooling/scoring/test_bi_encoder_online.py::test_score_api_queries_str_n_documents_str_n
# tests/entrypoints/pooling/scoring/test_bi_encoder_online.py::test_rerank_api_texts
# tests/entrypoints/pooling/scoring/test_bi_encoder_online.py::test_rerank_api_top_n
def test_bi_encoder_pairings_order_and_top_n(vllm_embed: Any, make_client: Callable[..., Any]) -> None:
    client = make_client(vllm_embed.base_url)
    vectors = client.embed(TEXTS_1 + TEXTS_2).vectors.astype(np.float64)
    q, d = vectors[:2], vectors[2:]
    one = client.score(TEXTS_1[0], TEXTS_2[0])
    broadcast = client.score(TEXTS_1[0], TEXTS_2)
    zipped = client.score(TEXTS_1, TEXTS_2)
    np.testing.assert_allclose(one.scores, [cosine(q[0], d[0])], atol=1e-5)
    np.testing.assert_allclose(broadcast.scores, [cosine(q[0], d[0]), cosine(q[0], d[1])], atol=1e-5)
    np.testing.assert_allclose(zipped.scores, [cosine(q[0], d[0]), cosine(q[1], d[1])], atol=1e-5)
    assert zipped.usage.prompt_tokens > 0
    top = client.rerank(TEXTS_1[0], RERANK_DOCS, top_n=2)
    assert len(top.results) == 2 and top.results[0].index == 1  # the France document first
    assert top.results[0].score > top.results[1].score
    every = client.rerank(TEXTS_1[0], RERANK_DOCS, top_n=0)  # 0 (or >= the count) returns every document
    assert sorted(every.indices) == [0, 1, 2] and every.indices[:2] == top.indices
    assert client.rerank(TEXTS_1[0], RERANK_DOCS, top_n=10).indices == every.indices


def assert_too_long_query(server: Any, client: Any) -> None:
    """A query over max_model_len: 400 with the server's message; truncate_prompt_tokens over it: 400."""
    n_tokens = len(token_ids(server, LONG_QUERY))
    for call in (
        lambda: client.rerank(LONG_QUERY, RERANK_DOCS[:2]),
        lambda: client.score(LONG_QUERY, RERANK_DOCS[:2]),
    ):
        with pytest.raises(vt.ContextLengthExceeded) as caught:
            call()
        error = caught.value
        assert error.status_code == 400 and "Please reduce the length of the input prompt" in error.message
        assert error.max_model_len == MAX_MODEL_LEN
        # A token count, when the message states one (never the character count some messages give).
        assert error.prompt_tokens is None or MAX_MODEL_LEN < error.prompt_tokens <= n_tokens
    with pytest.raises(vt.BadRequestError) as caught:
        client.score(LONG_QUERY, RERANK_DOCS[:2], truncate_prompt_tokens=MAX_MODEL_LEN + 1)
    assert "Please request a smaller truncation size." in caught.value.message


# tests/entrypoints/pooling/scoring/test_bi_encoder_online.py::test_rerank_api_max_model_len
# tests/entrypoints/pooling/scoring/test_bi_encoder_online.py::test_score_api_max_model_len
def test_bi_encoder_too_long_query(vllm_embed: Any, make_client: Callable[..., Any]) -> None:
    assert_too_long_query(vllm_embed, make_client(vllm_embed.base_url))


# tests/entrypoints/openai/speech_to_text/test_translation_validation.py::test_non_asr_model
# tests/entrypoints/openai/test_transcription_validation.py::test_non_asr_model
# (0.32 answers 404 {"detail": "Not Found"}: the route is not mounted on a pooling model.)
def test_transcription_on_a_pooling_model_is_not_served(
    vllm_embed: Any, make_client: Callable[..., Any]
) -> None:
    client = make_client(vllm_embed.base_url)
    for call, task in ((client.transcribe, "transcription"), (client.translate, "translation")):
        with pytest.raises(vt.EndpointNotServed) as caught:
            call(FOX, language="en")
        assert caught.value.status_code == 404 and caught.value.task == task


# --------------------------------------------------------------------------------------------------
# the cross-encoder (`rerank`): /score, /rerank, /classify, /pooling
# --------------------------------------------------------------------------------------------------


# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_rerank_api_max_model_len
# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_score_api_max_model_len
def test_cross_encoder_too_long_query(vllm_rerank: Any, make_client: Callable[..., Any]) -> None:
    assert_too_long_query(vllm_rerank, make_client(vllm_rerank.base_url))


# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_rerank_max_tokens_per_doc
# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_rerank_max_tokens_per_doc_reduces_tokens  # noqa: E501
# tests/entrypoints/pooling/scoring/test_max_tokens_per_doc.py::test_jina_max_tokens_per_doc_reduces_tokens
# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_rerank_max_tokens_per_doc_validation
# (vLLM's current test refuses 0 as "must be a positive integer"; 0.32 takes 0 as "no limit" and refuses
# only negative values, "must be a non-negative integer" -- which the SDK refuses before sending.)
def test_max_tokens_per_doc_cuts_the_prompt(vllm_rerank: Any, make_client: Callable[..., Any]) -> None:
    client = make_client(vllm_rerank.base_url)
    query, long_doc = TEXTS_1[0], "The capital of France is Paris. " * 10
    full = client.rerank(query, [long_doc])
    cut = client.rerank(query, [long_doc], max_tokens_per_doc=10)
    assert len(cut.results) == 1 and 0 < cut.usage.prompt_tokens < full.usage.prompt_tokens
    # query + 10 document tokens + [CLS] [SEP] [SEP]
    assert cut.usage.prompt_tokens == len(token_ids(vllm_rerank, query)) + 10 + 1
    assert client.rerank(query, [long_doc], max_tokens_per_doc=0).usage == full.usage
    with pytest.raises(vt.InvalidInputError, match="max_tokens_per_doc"):
        client.rerank(query, [long_doc], max_tokens_per_doc=-5)


# tests/entrypoints/pooling/classify/test_online.py::test_completion_request
# tests/entrypoints/pooling/classify/test_online.py::test_completion_request_batched
# tests/entrypoints/pooling/classify/test_online.py::test_truncate_prompt_tokens
# tests/entrypoints/pooling/classify/test_online.py::test_empty_input_error
def test_classify_batches_order_usage_and_truncation(
    vllm_rerank: Any, make_client: Callable[..., Any]
) -> None:
    client = make_client(vllm_rerank.base_url)
    texts = [INPUT_TEXT, "hello world", "vLLM serves classifiers", "Paris is the capital of France."]
    ids = [token_ids(vllm_rerank, text) for text in texts]
    together = client.classify(texts)
    assert together.probs.shape == (4, together.num_classes) and together.num_classes == 1
    assert together.labels == ["relevance"] * 4  # id2label of the head
    assert together.usage.prompt_tokens == together.usage.total_tokens == sum(map(len, ids))
    one_by_one = client.classify(texts, batch_size=1)  # four requests, merged in input order
    np.testing.assert_allclose(one_by_one.probs, together.probs, rtol=0, atol=1e-6)
    np.testing.assert_allclose(client.classify(ids).probs, together.probs, rtol=0, atol=1e-6)
    long = client.classify("hello " * 600, truncate_prompt_tokens=5)
    assert long.probs.shape == (1, 1) and long.usage.prompt_tokens == long.usage.total_tokens == 5
    with pytest.raises(vt.BadRequestError) as caught:
        client.classify("test", truncate_prompt_tokens=MAX_MODEL_LEN + 1)
    assert caught.value.status_code == 400 and "truncate_prompt_tokens" in caught.value.message
    with pytest.raises(vt.InvalidInputError):  # vLLM: 400 "You must pass at least one prompt"
        client.classify([])
    # vLLM's test sends "" to a Qwen2 classifier and gets 400; MiniLM's tokenizer makes [CLS] [SEP] of it
    # and vLLM 0.32 classifies that.
    assert client.classify("").usage.prompt_tokens == 2


# tests/entrypoints/pooling/classify/test_online.py::test_use_activation
# (The fixture's head has one label, so the activation is a sigmoid, not the multi-class softmax.)
def test_classify_use_activation(vllm_rerank: Any, make_client: Callable[..., Any]) -> None:
    client = make_client(vllm_rerank.base_url)
    texts = [INPUT_TEXT, "hello world"]
    default = client.classify(texts).probs
    activated = client.classify(texts, use_activation=True).probs
    logits = client.classify(texts, use_activation=False).probs
    np.testing.assert_allclose(default, activated, atol=1e-6)
    assert not np.allclose(logits, activated, atol=1e-2)
    np.testing.assert_allclose(1 / (1 + np.exp(-logits)), activated, atol=1e-5)


# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_pooling_classify
# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_pooling_token_classify
# tests/entrypoints/pooling/scoring/test_cross_encoder_online.py::test_pooling_not_supported
# (test_pooling_token_classify: vLLM 0.32 has token_classify supported but inactive on this model and
# answers 400 "Try switching the model's pooling_task"; vLLM's current test gets one row per token.)
def test_pooling_tasks_of_a_cross_encoder(vllm_rerank: Any, make_client: Callable[..., Any]) -> None:
    client = make_client(vllm_rerank.base_url)
    pooled = client.pool(INPUT_TEXT, task="classify")
    assert pooled.data[0].shape == (1,)
    np.testing.assert_allclose(pooled.data[0], client.classify(INPUT_TEXT).probs[0], atol=1e-6)
    with pytest.raises(vt.BadRequestError, match="Try switching the model's pooling_task"):
        client.pool(INPUT_TEXT, task="token_classify")
    for task in ("embed", "token_embed"):
        with pytest.raises(vt.BadRequestError) as caught:
            client.pool(INPUT_TEXT, task=task)
        assert caught.value.message.startswith(f"Unsupported task: {task!r}") and caught.value.param == "task"


# --------------------------------------------------------------------------------------------------
# late interaction (`late-interaction`: MiniLM with token_embed active)
# --------------------------------------------------------------------------------------------------


# tests/entrypoints/pooling/scoring/test_late_interaction_online.py::test_score_api_queries_str_1_documents_str_1  # noqa: E501
# tests/entrypoints/pooling/scoring/test_late_interaction_online.py::test_score_api_queries_str_n_documents_str_n  # noqa: E501
# tests/entrypoints/pooling/scoring/test_late_interaction_online.py::test_rerank_api_texts
# tests/entrypoints/pooling/scoring/test_late_interaction_online.py::test_rerank_api_top_n
# tests/entrypoints/pooling/scoring/test_late_interaction_online.py::test_token_embed
# tests/entrypoints/pooling/token_embed/test_online.py::test_pooling_token_embed
# (test_scoring.py covers 1:N against MaxSim of the pooled matrices.)
def test_late_interaction_pairings_top_n_and_token_matrices(
    vllm_late_interaction: Any, make_client: Callable[..., Any]
) -> None:
    client = make_client(vllm_late_interaction.base_url)
    pooled = client.pool(TEXTS_1 + TEXTS_2)
    for text, matrix in zip(TEXTS_1 + TEXTS_2, pooled.data, strict=True):
        assert matrix.shape == (len(token_ids(vllm_late_interaction, text)), 384)  # one row per token
    q, d = pooled.data[:2], pooled.data[2:]
    np.testing.assert_allclose(
        client.score(TEXTS_1[0], TEXTS_2[0]).scores, [vt.maxsim(q[0], d[0])], rtol=1e-4
    )
    zipped = client.score(TEXTS_1, TEXTS_2)
    np.testing.assert_allclose(zipped.scores, [vt.maxsim(q[0], d[0]), vt.maxsim(q[1], d[1])], rtol=1e-4)
    assert zipped.scorer is vt.types.ScorerKind.LATE_INTERACTION
    top = client.rerank(TEXTS_1[0], RERANK_DOCS, top_n=2)
    assert len(top.results) == 2 and top.results[0].index == 1


# tests/entrypoints/pooling/token_embed/test_online.py::test_pooling_not_supported
# tests/entrypoints/pooling/scoring/test_late_interaction_online.py::test_embed_not_supported
# (vLLM 0.32 lists embed as supported but inactive on this model: 400 "Try switching ...".)
def test_pooling_tasks_of_a_token_embedding_model(
    vllm_late_interaction: Any, make_client: Callable[..., Any]
) -> None:
    client = make_client(vllm_late_interaction.base_url)
    with pytest.raises(vt.BadRequestError, match="Try switching the model's pooling_task") as caught:
        client.pool(TEXTS_1[0], task="embed")
    assert caught.value.param == "task"
    for task in ("classify", "token_classify"):
        with pytest.raises(vt.BadRequestError) as refused:
            client.pool(TEXTS_1[0], task=task)
        assert refused.value.message.startswith(f"Unsupported task: {task!r}")


# --------------------------------------------------------------------------------------------------
# speech to text (`stt`: Whisper base)
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def stt_client(vllm_stt: Any, make_client: Callable[..., Any]) -> Any:
    return make_client(vllm_stt.base_url, timeout=300)


# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_long_audio_request
# tests/entrypoints/openai/speech_to_text/test_transcription_validation.py::test_long_audio_parakeet
# (usage.seconds is ceil(duration of the file); the SDK's default transcribes this 45.9 s file in
# sequential windows, "client" in pieces: one usage either way.)
def test_long_audio_usage_is_the_whole_duration_rounded_up(stt_client: Any) -> None:
    result = stt_client.transcribe(LONG_AUDIO, language="en")
    assert result.requests >= 2
    assert result.usage is not None and result.usage.type == "duration"
    assert result.usage.seconds == math.ceil(sf.info(LONG_AUDIO).duration) == 46
    result = stt_client.transcribe(LONG_AUDIO, language="en", chunking="client")
    assert result.requests == 2
    assert result.usage is not None and result.usage.type == "duration"
    assert result.usage.seconds == math.ceil(sf.info(LONG_AUDIO).duration) == 46


# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_sampling_params
# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_audio_prompt
# tests/entrypoints/openai/speech_to_text/test_translation_validation.py::test_audio_prompt
# (vLLM's transcription test also asserts that the prompted transcript keeps its first words; with that
# test's prompt whisper-base stops after "The", a small-model limitation, so only "the prompt conditions
# the decoding" is asserted here.)
def test_sampling_parameters_and_prompt_reach_the_decoder(stt_client: Any) -> None:
    greedy = stt_client.transcribe(NUMBERS, language="en")
    assert {"meeting", "starts"} <= set(words(greedy.text))
    sampled = stt_client.transcribe(
        NUMBERS,
        language="en",
        temperature=0.8,
        seed=42,
        repetition_penalty=1.9,
        top_k=12,
        top_p=0.4,
        min_p=0.5,
        extra_body={"frequency_penalty": 1.8, "presence_penalty": 2.0},
    )
    assert sampled.text != greedy.text
    prompted = stt_client.transcribe(
        NUMBERS, language="en", prompt="This is a speech, recorded in a phonograph."
    )
    assert prompted.text != greedy.text
    prompt = "Nor have I ever"
    translated = stt_client.translate(FRENCH, language="fr", prompt=prompt)
    assert translated.text and prompt not in translated.text


# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_audio_with_max_tokens
# tests/entrypoints/openai/speech_to_text/test_translation_validation.py::test_audio_with_max_tokens
def test_max_completion_tokens(stt_client: Any) -> None:
    one = stt_client.transcribe(FOX, language="en", max_completion_tokens=1)
    assert one.text == "The"
    huge = stt_client.transcribe(FOX, language="en", max_completion_tokens=10**6)  # clamped by the server
    assert "lazy dog" in huge.text.lower()
    assert len(words(stt_client.translate(FRENCH, language="fr", max_completion_tokens=1).text)) == 1


# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_audio_with_timestamp
# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_language_auto_detect
# (English only: whisper-base detects the synthetic French clip as English, so the Italian case of that
# test cannot be shown on this fixture.)
def test_verbose_json_segments_and_detected_language(stt_client: Any) -> None:
    result = stt_client.transcribe(FOX, response_format="verbose_json")  # no language: detected
    assert result.language == "en" and "fox" in result.text.lower()
    assert result.segments and result.segments[0].avg_logprob is not None
    assert result.segments[0].compression_ratio is not None and result.segments[0].tokens


# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_whisper_beam_search_single_beam  # noqa: E501
# (Capped at 2 tokens: beam search costs ~1.2 s per token on 2 cores, and an uncapped request did not
# finish within 300 s on this fixture.)
def test_beam_search_with_one_beam_equals_greedy(stt_client: Any) -> None:
    greedy = stt_client.transcribe(FOX, language="en", max_completion_tokens=2)
    beam = stt_client.transcribe(FOX, language="en", use_beam_search=True, n=1, max_completion_tokens=2)
    assert beam.text == greedy.text and greedy.text


# tests/entrypoints/openai/speech_to_text/test_transcription_validation_whisper.py::test_completion_endpoints
# (Whisper reports only the transcription task: /v1/chat/completions is not mounted, 404.)
def test_chat_route_on_whisper_is_not_served(stt_client: Any) -> None:
    with pytest.raises(vt.EndpointNotServed) as caught:
        stt_client.ocr(np.zeros((8, 8, 3), dtype=np.uint8), preset="generic")  # sent: Whisper has no preset
    assert caught.value.status_code == 404 and caught.value.reason == "not_mounted"
