"""embed_sparse() on both clients, replaying answers recorded from the real `splade` fixture (SPLADE's
architecture on vLLM 0.32), and the sparse result's conversions."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import sparse
from vllm_tasks.types import SparseEmbeddingResult, SparseVector

from .conftest import BASE
from .recorded import add_recorded, exchange, mock_server

VOCAB = 30522


def recorded_row() -> np.ndarray:
    """The recorded SPLADE row of "hello world" (raw float32 bytes)."""
    body = base64.b64decode(exchange("splade", "embeddings_bytes")["response"]["body_b64"])
    return np.frombuffer(body, dtype="<f4")


def sent(httpx_mock: HTTPXMock, path: str) -> list[dict[str, Any]]:
    return [json.loads(r.content) for r in httpx_mock.get_requests() if r.url.path == path]


def test_the_recorded_row_becomes_its_non_zero_weights(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "splade")
    add_recorded(httpx_mock, "splade", "embeddings_bytes")
    result = make_client().embed_sparse("hello world")
    row = recorded_row()
    assert isinstance(result, SparseEmbeddingResult)
    assert (result.dimension, result.model, result.usage.prompt_tokens) == (VOCAB, "splade-minilm", 4)
    vector = result.vector
    assert vector.indices.dtype == np.int64 and vector.values.dtype == np.float32
    np.testing.assert_array_equal(vector.indices, np.flatnonzero(row))
    np.testing.assert_array_equal(vector.values, row[row > 0])
    assert 0 < len(vector) < VOCAB // 10  # the fixture's weights are sparse
    np.testing.assert_array_equal(result.to_dense()[0], row)
    (body,) = sent(httpx_mock, "/v1/embeddings")
    assert body == {"model": "splade-minilm", "input": ["hello world"], "encoding_format": "bytes"}


def test_top_k_and_min_weight(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "splade")
    add_recorded(httpx_mock, "splade", "embeddings_bytes", reusable=True)
    client = make_client()
    row = recorded_row()
    top = client.embed_sparse(["hello world"], top_k=5).vector
    np.testing.assert_array_equal(np.sort(top.values), np.sort(row)[-5:])
    assert list(top.indices) == sorted(top.indices)
    kept = client.embed_sparse(["hello world"], min_weight=0.5).vector
    np.testing.assert_array_equal(kept.indices, np.flatnonzero(row > 0.5))


def test_return_tokens_detokenizes_each_distinct_id(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "splade")
    add_recorded(httpx_mock, "splade", "embeddings_bytes")
    add_recorded(httpx_mock, "splade", "detokenize_one", reusable=True)  # every id answers "##ing"
    vector = make_client().embed_sparse("hello world", top_k=3, return_tokens=True).vector
    assert vector.tokens == ("##ing", "##ing", "##ing")
    bodies = sent(httpx_mock, "/detokenize")
    assert sorted(b["tokens"][0] for b in bodies) == vector.indices.tolist()
    assert vector.to_dict() == {"##ing": float(vector.values[-1])}


def test_a_dense_model_is_refused_with_the_splade_flags_then_before_sending(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "embed")  # all-MiniLM-L6-v2: a dense embedder
    add_recorded(httpx_mock, "embed", "embeddings_bytes_float32")
    client = make_client()
    with pytest.raises(vt.UnsupportedByServer) as caught:
        client.embed_sparse(["hello world", "vLLM serves embeddings"])
    error = caught.value
    assert error.feature == "sparse_embeddings"
    assert "BertSpladeSparseEmbeddingModel" in str(error.server_flag)
    assert "negative weight" in str(error) and "'minilm'" in str(error)
    requests = len(httpx_mock.get_requests())
    with pytest.raises(vt.UnsupportedByServer, match="negative weight"):
        client.embed_sparse(["again"])
    assert len(httpx_mock.get_requests()) == requests  # known dense: nothing sent


def test_a_server_older_than_splade_is_refused_before_sending(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "splade", version="0.11.0")
    with pytest.raises(vt.UnsupportedByServer, match=r"vLLM >= 0\.11\.1") as caught:
        make_client().embed_sparse("hello world")
    assert caught.value.server_version == "0.11.0"
    assert sent(httpx_mock, "/v1/embeddings") == []


def test_a_model_without_pooling_routes_is_refused_before_sending(
    make_client: Any, httpx_mock: HTTPXMock
) -> None:
    mock_server(httpx_mock, "stt")  # Whisper: its /openapi.json has neither /v1/embeddings nor /pooling
    with pytest.raises(vt.UnsupportedByServer, match="serves neither /v1/embeddings nor /pooling"):
        make_client().embed_sparse("hello world")
    assert [r.url.path for r in httpx_mock.get_requests()] == ["/version", "/v1/models", "/openapi.json"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"min_weight": -1.0}, "min_weight"),
        ({"min_weight": float("nan")}, "min_weight"),
        ({"min_weight": "0.1"}, "min_weight"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": True}, "top_k"),
        ({"return_tokens": "yes"}, "return_tokens"),
        ({"truncate_prompt_tokens": -2}, "truncate_prompt_tokens"),
    ],
)
def test_bad_options_name_the_field_before_any_request(
    kwargs: dict[str, Any], field: str, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    with pytest.raises(vt.InvalidInputError) as caught:
        make_client().embed_sparse("hello", **kwargs)
    assert caught.value.field == field
    assert httpx_mock.get_requests() == []


@pytest.mark.parametrize("bad", [[], [1, "a"], ["a", 2], None, b"bytes"])
def test_bad_input_is_refused_before_any_request(bad: Any, make_client: Any, httpx_mock: HTTPXMock) -> None:
    with pytest.raises(vt.InvalidInputError):
        make_client().embed_sparse(bad)
    assert httpx_mock.get_requests() == []


def test_sparse_params_are_the_method_keywords() -> None:
    params = vt.SparseEmbedParams(top_k=64, min_weight=0.01)
    assert params.keywords() == {"min_weight": 0.01, "top_k": 64}


# --------------------------------------------------------------------------------------------------
# The decoder and the conversions (pure)
# --------------------------------------------------------------------------------------------------

ROWS = hnp.arrays(
    np.float32,
    hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=40),
    elements=st.one_of(st.just(0.0), st.floats(0.0, 8.0, width=32)),
)


@settings(max_examples=200, deadline=None)
@given(ROWS)
def test_sparsify_round_trips_through_every_shape(matrix: np.ndarray) -> None:
    vectors = sparse.sparsify(matrix)
    result = SparseEmbeddingResult(vectors=vectors, dimension=matrix.shape[1], model="m")
    np.testing.assert_array_equal(result.to_dense(), matrix)
    for row, vector, qdrant, milvus in zip(
        matrix, result, result.to_qdrant(), result.to_milvus(), strict=True
    ):
        assert qdrant["indices"] == np.flatnonzero(row).tolist()
        assert all(type(i) is int for i in qdrant["indices"]) and all(
            type(v) is float for v in qdrant["values"]
        )
        assert milvus == {i: float(row[i]) for i in np.flatnonzero(row)}
        assert (vector.values > 0).all()


@settings(max_examples=200, deadline=None)
@given(ROWS, st.integers(1, 50))
def test_top_k_keeps_the_largest_weights(matrix: np.ndarray, k: int) -> None:
    for row, vector in zip(matrix, sparse.sparsify(matrix, top_k=k), strict=True):
        nonzero = row[row > 0]
        assert len(vector) == min(k, nonzero.size)
        if len(vector):
            assert vector.values.min() >= np.sort(nonzero)[-len(vector)]
        assert list(vector.indices) == sorted(vector.indices)


@settings(max_examples=100, deadline=None)
@given(ROWS)
def test_to_scipy_matches_the_dense_rows(matrix: np.ndarray) -> None:
    result = SparseEmbeddingResult(vectors=sparse.sparsify(matrix), dimension=matrix.shape[1], model="m")
    csr = result.to_scipy()
    assert csr.shape == matrix.shape and csr.dtype == np.float32
    np.testing.assert_array_equal(csr.toarray(), matrix)


def test_to_scipy_without_scipy_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import vllm_tasks.dependencies as dependencies

    def missing(name: str) -> Any:
        raise ImportError(name)

    monkeypatch.setattr(dependencies.importlib, "import_module", missing)
    result = SparseEmbeddingResult(vectors=sparse.sparsify(np.ones((1, 3))), dimension=3, model="m")
    with pytest.raises(vt.MissingDependency, match=r"vllm-tasks\[sparse\]"):
        result.to_scipy()


def test_dense_reason_reads_negative_and_non_finite_rows() -> None:
    assert sparse.dense_reason(np.zeros((2, 5)), "m") is None
    assert "input 1" in str(sparse.dense_reason(np.array([[0.0, 1.0], [0.5, -0.1]]), "m"))
    assert "non-finite" in str(sparse.dense_reason(np.array([[np.nan, 1.0]]), "m"))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"indices": [1, 2], "values": [1.0]}, "same length"),
        ({"indices": [3, 3], "values": [1.0, 2.0]}, "must not repeat"),
        ({"indices": [1], "values": [1.0], "tokens": ["a", "b"]}, "same length"),
    ],
)
def test_a_sparse_vector_refuses_inconsistent_arrays(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SparseVector(**fields)


def test_a_sparse_vector_sorts_by_index_with_its_tokens() -> None:
    vector = SparseVector(indices=[9, 2], values=[0.5, 1.5], tokens=["nine", "two"])
    assert vector.indices.tolist() == [2, 9] and vector.tokens == ("two", "nine")
    assert vector.to_dict() == {"two": 1.5, "nine": 0.5}
    with pytest.raises(ValueError, match="return_tokens=True"):
        SparseVector(indices=[1], values=[1.0]).to_dict()


def test_result_accessors() -> None:
    result = SparseEmbeddingResult(
        vectors=sparse.sparsify(np.array([[0, 2.0], [1.0, 0]])), dimension=2, model="m"
    )
    assert len(result) == 2 and [v.tolist() for v in result.indices] == [[1], [0]]
    assert [v.tolist() for v in result.values] == [[2.0], [1.0]]
    with pytest.raises(ValueError, match="holds 2 vectors"):
        _ = result.vector
    assert "nnz=2" in repr(result)


def test_windows_send_concurrency_batches_at_a_time(make_client: Any, httpx_mock: HTTPXMock) -> None:
    """Eight inputs in batches of one, two in flight: four windows; the answer rows stay in input order."""
    mock_server(httpx_mock, "splade")
    row = recorded_row()
    for i in range(8):
        scaled = (row * (i + 1)).astype("<f4")
        meta = json.loads(exchange("splade", "embeddings_bytes")["response"]["headers"]["metadata"])
        httpx_mock.add_response(
            url=f"{BASE}/v1/embeddings",
            content=scaled.tobytes(),
            headers={"content-type": "application/octet-stream", "metadata": json.dumps(meta)},
            match_json={"model": "splade-minilm", "input": [f"t{i}"], "encoding_format": "bytes"},
        )
    result = make_client().embed_sparse([f"t{i}" for i in range(8)], batch_size=1, concurrency=2)
    for i, vector in enumerate(result):
        np.testing.assert_allclose(vector.values, row[row > 0] * (i + 1), rtol=1e-6)
    assert result.usage.prompt_tokens == 8 * 4


# --------------------------------------------------------------------------------------------------
# BGE-M3's lexical weights (/pooling token_classify), replayed from the real `bge-m3` fixture
# --------------------------------------------------------------------------------------------------


def test_bge_m3_weights_are_laid_on_the_tokenized_ids(make_client: Any, httpx_mock: HTTPXMock) -> None:
    """The first call finds /v1/embeddings inactive (501) and reads /pooling; later ones go there at once."""
    mock_server(httpx_mock, "bge-m3")
    add_recorded(httpx_mock, "bge-m3", "error_embeddings")
    add_recorded(httpx_mock, "bge-m3", "tokenize", reusable=True)
    add_recorded(httpx_mock, "bge-m3", "pooling_token_classify", reusable=True)
    client = make_client()
    result = client.embed_sparse("hello world hello", return_tokens=True)
    # "hello world hello" is <s> 7596 2092 7596 </s>; the server answers the three middle weights
    (hello, world, hello_again), _ = recorded_weights()
    vector = result.vector
    assert vector.indices.tolist() == [2092, 7596]
    np.testing.assert_array_equal(vector.values, np.array([world, max(hello, hello_again)], np.float32))
    assert vector.tokens == ("world", "hello")
    assert result.dimension is None and result.usage.prompt_tokens == 5
    assert sent(httpx_mock, "/pooling") == [
        {"model": "bge-m3-tiny", "input": [[0, 7596, 2092, 7596, 2]], "task": "token_classify"}
    ]
    assert sent(httpx_mock, "/tokenize")[0]["return_token_strs"] is True
    again = client.embed_sparse("hello world hello", top_k=1)
    assert again.vector.indices.tolist() == [7596] and again.vector.tokens is None
    assert len(sent(httpx_mock, "/v1/embeddings")) == 1  # learned: the lexical path from then on
    with pytest.raises(vt.InvalidInputError) as caught:
        client.embed_sparse("hello", truncate_prompt_tokens=4)
    assert caught.value.field == "truncate_prompt_tokens"


def recorded_weights() -> tuple[list[float], int]:
    body = json.loads(exchange("bge-m3", "pooling_token_classify")["response"]["body_text"])
    return body["data"][0]["data"], body["usage"]["prompt_tokens"]


def test_bge_m3_before_its_first_version_is_refused(make_client: Any, httpx_mock: HTTPXMock) -> None:
    mock_server(httpx_mock, "bge-m3", version="0.15.0")
    add_recorded(httpx_mock, "bge-m3", "error_embeddings")
    with pytest.raises(vt.UnsupportedByServer) as caught:
        make_client().embed_sparse("hello world hello")
    assert caught.value.feature == "sparse_lexical_weights" and caught.value.required_version == "0.16.0"
    assert sent(httpx_mock, "/pooling") == []


def test_a_cross_encoder_is_not_sparse(make_client: Any, httpx_mock: HTTPXMock) -> None:
    """No /v1/embeddings route: the lexical path; the model refuses the token_classify task, then the sparse
    plugin's request (no plugin installed)."""
    mock_server(httpx_mock, "rerank")
    tokens = {"tokens": [101, 7592, 102], "token_strs": ["[CLS]", "hello", "[SEP]"]}
    httpx_mock.add_response(url=f"{BASE}/tokenize", json={"count": 3, "max_model_len": 256, **tokens})
    httpx_mock.add_response(
        url=f"{BASE}/pooling",
        status_code=400,
        json={"error": {"message": "Try switching the model's pooling_task via --pooler-config.task "
              "token_classify. (parameter=task)", "type": "BadRequestError", "param": "task", "code": 400}},
    )  # fmt: skip
    no_plugin = "No IOProcessor plugin installed. (parameter=task)"
    httpx_mock.add_response(
        url=f"{BASE}/pooling",
        status_code=400,
        json={"error": {"message": no_plugin, "type": "BadRequestError", "param": "task", "code": 400}},
    )
    client = make_client()
    with pytest.raises(vt.UnsupportedByServer, match="BgeM3EmbeddingModel") as caught:
        client.embed_sparse("hello")
    assert caught.value.feature == "sparse_embeddings"
    with pytest.raises(vt.UnsupportedByServer):
        client.embed_sparse("hello")  # known: refused before sending
    assert [body.get("task") for body in sent(httpx_mock, "/pooling")] == ["token_classify", "plugin"]


@pytest.mark.parametrize(
    ("weights", "ids", "message"),
    [
        (np.zeros(4, np.float32), [0, 5, 2], "4 token weights for a prompt of 3 tokens"),
        (np.zeros((1, 2), np.float32), [0, 5, 2], "not one weight per token"),
    ],
)
def test_lexical_weights_that_do_not_line_up_are_an_unexpected_answer(
    weights: np.ndarray, ids: list[int], message: str
) -> None:
    with pytest.raises(vt.UnexpectedResponse, match=message):
        sparse.lexical_vector(weights, ids, None, "m")


def test_lexical_weights_drop_special_tokens_and_keep_the_largest_repeat() -> None:
    ids = [0, 9, 3, 9, 2]
    strings = ["<s>", "cat", "<unk>", "cat", "</s>"]
    vector = sparse.lexical_vector(np.array([0.5, 4.0, 0.75], np.float32), ids, strings, "m")
    assert vector.to_milvus() == {9: 0.75} and vector.tokens == ("cat",)
    whole = sparse.lexical_vector(np.array([1.0, 0.5, 0.0, 0.25, 3.0], np.float32), ids, strings, "m")
    assert whole.to_milvus() == {9: 0.5}  # not filtered by the server: <s>, <unk>, </s> left out by string
