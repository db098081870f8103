"""embed() / embed_v2() against real vLLM CPU servers (the `embed`, `embed-mrl` and `api-key` fixtures)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fixture_pins import models_dir, venv_python

import vllm_tasks as vt
from vllm_tasks.errors import BadRequestError
from vllm_tasks.jobs.state import PROBE_IMAGE

pytestmark = pytest.mark.contract

TEXTS = [
    "hello world",
    "vLLM serves embeddings",
    "The quick brown fox jumps over the lazy dog.",
    "Paris is the capital of France.",
    "numpy arrays out, never lists of floats",
]
TOLERANCE = {"float32": 1e-6, "float16": 2e-3, "bfloat16": 8e-3, "fp8_e4m3": 4e-2, "fp8_e5m2": 6e-2}


def raw_float(server: Any, texts: list[str], **extra: Any) -> np.ndarray:
    response = httpx.post(
        server.base_url + "/v1/embeddings", json={"model": server.model, "input": texts, **extra}, timeout=120
    )
    response.raise_for_status()
    return np.array([item["embedding"] for item in response.json()["data"]], dtype=np.float32)


@pytest.fixture(scope="module")
def embed_client(vllm_embed: Any) -> Any:
    with vt.Client(vllm_embed.base_url) as client:
        yield client


@pytest.mark.vllm_min("0.11.1", "the bytes transport embed() picks by default from 0.11.1")
# vLLM's test(s):
# tests/entrypoints/pooling/embed/test_online.py::test_basic
# tests/entrypoints/pooling/embed/test_online.py::test_completion_request
def test_embed_equals_the_raw_float_response(vllm_embed: Any, embed_client: vt.Client) -> None:
    result = embed_client.embed(TEXTS)
    assert result.encoding_format == "bytes"
    assert result.vectors.shape == (len(TEXTS), 384) and result.vectors.dtype == np.float32
    assert np.abs(result.vectors - raw_float(vllm_embed, TEXTS)).max() <= 1e-6
    assert result.model == "minilm"
    assert result.usage.prompt_tokens > len(TEXTS)


def test_embed_agrees_with_sentence_transformers(embed_client: vt.Client) -> None:
    script = textwrap.dedent(
        """
        import json, sys
        from sentence_transformers import SentenceTransformer
        model = SentenceTransformer(sys.argv[1], device="cpu")
        texts = json.loads(sys.stdin.read())
        print(json.dumps(model.encode(texts, normalize_embeddings=True).tolist()))
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        [str(venv_python()), "-c", script, str(models_dir() / "minilm")],
        input=json.dumps(TEXTS),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=True,
    )
    reference = np.array(json.loads(done.stdout.strip().splitlines()[-1]), dtype=np.float32)
    ours = embed_client.embed(TEXTS).vectors
    cosine = (ours * reference).sum(axis=1) / (
        np.linalg.norm(ours, axis=1) * np.linalg.norm(reference, axis=1)
    )
    assert cosine.min() >= 0.999, cosine


@pytest.mark.vllm_min("0.13.0", "embed_dtype (0.11.1) and bytes_only (0.13.0)")
# vLLM's test(s):
# tests/entrypoints/pooling/embed/test_online.py::test_base64_embedding
# tests/entrypoints/pooling/embed/test_online.py::test_base64_embed_dtype_and_endianness
# tests/entrypoints/pooling/embed/test_online.py::test_bytes_embed_dtype_and_endianness
# tests/entrypoints/pooling/embed/test_online.py::test_bytes_only_embed_dtype_and_endianness
@pytest.mark.parametrize("fmt", ["float", "base64", "bytes", "bytes_only"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "fp8_e4m3", "fp8_e5m2"])
def test_every_transport_and_dtype_agrees_with_float(
    fmt: str, dtype: str, vllm_embed: Any, embed_client: vt.Client
) -> None:
    reference = raw_float(vllm_embed, TEXTS)
    result = embed_client.embed(TEXTS, encoding_format=fmt, embed_dtype=None if fmt == "float" else dtype)
    assert result.vectors.shape == reference.shape
    tolerance = 1e-6 if fmt == "float" else TOLERANCE[dtype]
    assert np.abs(result.vectors - reference).max() <= tolerance


@pytest.mark.vllm_min("0.11.1", "endianness")
# vLLM's test(s):
# tests/entrypoints/pooling/embed/test_online.py::test_base64_embed_dtype_and_endianness
# tests/entrypoints/pooling/embed/test_online.py::test_bytes_embed_dtype_and_endianness
@pytest.mark.parametrize("endianness", ["big", "little", "native"])
def test_endianness(endianness: str, vllm_embed: Any, embed_client: vt.Client) -> None:
    reference = raw_float(vllm_embed, TEXTS)
    for fmt in ("base64", "bytes"):
        vectors = embed_client.embed(
            TEXTS, encoding_format=fmt, embed_dtype="float16", endianness=endianness
        ).vectors
        assert np.abs(vectors - reference).max() <= TOLERANCE["float16"]


@pytest.mark.vllm_min("0.11.1", "embed_dtype")
def test_compact_dtype_keeps_float16(embed_client: vt.Client) -> None:
    result = embed_client.embed(TEXTS, embed_dtype="float16", widen=False)
    assert result.vectors.dtype == np.float16


# vLLM's test(s):
# tests/entrypoints/pooling/embed/test_online.py::test_completion_request_batched
# (output order)
def test_batches_with_concurrency_match_one_request(vllm_embed: Any, embed_client: vt.Client) -> None:
    texts = [f"sentence number {i} about {TEXTS[i % len(TEXTS)]}" for i in range(100)]
    batched = embed_client.embed(texts, batch_size=7, concurrency=4)
    assert np.abs(batched.vectors - raw_float(vllm_embed, texts)).max() <= 1e-5


def test_async_client_matches_sync(vllm_embed: Any, embed_client: vt.Client) -> None:
    async def run() -> np.ndarray:
        async with vt.AsyncClient(vllm_embed.base_url) as client:
            return (await client.embed(TEXTS, batch_size=2, concurrency=3)).vectors

    assert np.abs(asyncio.run(run()) - embed_client.embed(TEXTS).vectors).max() <= 1e-6


def test_too_long_input_names_its_index_and_truncation_fixes_it(embed_client: vt.Client) -> None:
    texts = ["short", "token " * 400, "also short"]
    with pytest.raises(vt.ContextLengthExceeded) as info:
        embed_client.embed(texts)
    version = embed_client.server_info().parsed_version
    # 0.19.1's /tokenize drops the connection for a text over max_model_len: the SDK cannot count it
    # there and leaves the index unset (docs/compatibility.md)
    named = version.at_least("0.20.0") or not version.at_least("0.19.0")
    assert info.value.input_index == (1 if named else None)
    assert info.value.max_model_len == 256
    assert embed_client.embed(texts, truncate_prompt_tokens=-1).vectors.shape == (3, 384)


# vLLM's test(s):
# tests/entrypoints/pooling/embed/test_online_dimensions.py::test_matryoshka
# (the non-Matryoshka model)
def test_dimensions_on_a_non_matryoshka_model(embed_client: vt.Client) -> None:
    with pytest.raises(vt.BadRequestError, match="is_matryoshka"):
        embed_client.embed(TEXTS, dimensions=128)


@pytest.mark.vllm_min("0.18.0", "/v2/embed")
# vLLM's test(s):
# tests/entrypoints/pooling/embed/test_cohere_online.py::test_v1_v2_parity
# tests/entrypoints/pooling/embed/test_cohere_online.py::test_embedding_types
# tests/entrypoints/pooling/embed/test_cohere_online.py::test_base64_embedding_type
# tests/entrypoints/pooling/embed/test_cohere_openai_parity.py::test_single_text_parity
# tests/entrypoints/pooling/embed/test_cohere_openai_parity.py::test_batch_parity
def test_embed_v2_types_are_consistent(embed_client: vt.Client) -> None:
    result = embed_client.embed_v2(
        texts=TEXTS, embedding_types=["float", "binary", "ubinary", "base64"], batch_size=2
    )
    assert result.float is not None and result.float.shape == (len(TEXTS), 384)
    assert np.abs(result.base64 - result.float).max() <= 1e-6
    signs = (result.float >= 0).astype(np.uint8)
    np.testing.assert_array_equal(vt.unpackbits(result.binary), signs)
    np.testing.assert_array_equal(vt.unpackbits(result.ubinary), signs)
    assert np.abs(result.float - embed_client.embed(TEXTS).vectors).max() <= 1e-5


@pytest.mark.vllm_min("0.18.0", "/v2/embed")
# vLLM's test(s):
# tests/entrypoints/pooling/embed/test_cohere_online.py::test_unsupported_input_type_rejected
def test_embed_v2_input_type_lists_what_the_model_supports(embed_client: vt.Client) -> None:
    with pytest.raises(vt.BadRequestError, match="does not define any input_type"):
        embed_client.embed_v2(texts=TEXTS, input_type="search_query")


@pytest.mark.vllm_min("0.18.0", "/v2/embed")
# vLLM's test(s):
# tests/entrypoints/pooling/embed/test_online_dimensions.py::test_matryoshka
# (the Matryoshka model)
def test_matryoshka_dimensions_are_sliced_and_renormalised(vllm_embed_mrl: Any) -> None:
    with vt.Client(vllm_embed_mrl.base_url) as client:
        full = client.embed(TEXTS).vectors
        for dims in (128, 256):
            short = client.embed(TEXTS, dimensions=dims).vectors
            expected = full[:, :dims] / np.linalg.norm(full[:, :dims], axis=1, keepdims=True)
            assert short.shape == (len(TEXTS), dims)
            assert np.abs(short - expected).max() <= 1e-5
        v2 = client.embed_v2(texts=TEXTS, output_dimension=128)
        assert v2.float is not None and v2.float.shape == (len(TEXTS), 128)
        for bad in (100, 512):
            with pytest.raises(vt.BadRequestError):
                client.embed(TEXTS, dimensions=bad)


def test_api_key(vllm_api_key: Any) -> None:
    with vt.Client(vllm_api_key.base_url, api_key=vllm_api_key.api_key) as client:
        assert client.embed(TEXTS).vectors.shape == (len(TEXTS), 384)
    with (
        vt.Client(vllm_api_key.base_url, api_key="wrong-key") as client,
        pytest.raises(vt.AuthenticationError) as info,
    ):
        client.embed(TEXTS)
    assert "wrong-key" not in str(info.value)
    with vt.Client(vllm_api_key.base_url, api_key=None) as client:
        report = client.probe()
        assert report.status("embed") is vt.types.TaskStatus.UNAUTHORIZED
        assert report.status("rerank") is vt.types.TaskStatus.SERVED


def test_embed_file_job_on_the_real_server(vllm_embed: Any, embed_client: vt.Client, tmp_path: Any) -> None:
    lines = [f"line {i}: {TEXTS[i % len(TEXTS)]}" for i in range(150)]
    source = tmp_path / "corpus.txt"
    source.write_text("\n".join(lines) + "\n")
    report = vt.embed_file(embed_client, source, tmp_path / "corpus.npy", chunk_rows=64, batch_size=16)
    assert (report.texts, report.dimensions, report.chunks_sent) == (150, 384, 3)
    matrix = np.load(tmp_path / "corpus.npy", mmap_mode="r")
    assert np.abs(matrix - raw_float(vllm_embed, lines)).max() <= 1e-5


def test_an_image_job_on_a_text_model_is_refused_at_the_start(vllm_embed: Any, tmp_path: Path) -> None:
    # the job's model check embeds PROBE_IMAGE: MiniLM refuses it before any row is read or sent
    (tmp_path / "a.png").write_bytes(PROBE_IMAGE)
    source = tmp_path / "list.txt"
    source.write_text("a.png\n")
    with pytest.raises(BadRequestError, match="not a multimodal model"):
        vt.embed_file(vllm_embed.base_url, source, tmp_path / "out.npy", images=True)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.png", "list.txt"]
