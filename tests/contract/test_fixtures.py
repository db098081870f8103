"""The CPU vLLM fixtures answer what they should (plain httpx, no SDK).

Each test names the server fixture it needs; the plugin (server-fixtures/pytest_plugin.py) starts it on
first use and stops it after the last test that needs it.
"""

from __future__ import annotations

import json
import math
import subprocess

import httpx
import pytest
from fixture_pins import VLLM_VERSION, models_dir, venv_python
from fixture_table import BASE_ENV, TEST_API_KEY

pytestmark = pytest.mark.contract

QUERY = "What is the capital of France?"
DOCS = ["Bananas are yellow.", "Paris is the capital of France.", "France is in Europe."]


def _norm(v: list[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


def _post(server, path: str, body: dict, **kw) -> httpx.Response:
    headers = {"Authorization": f"Bearer {server.api_key}"} if server.api_key else {}
    return httpx.post(server.base_url + path, json=body, headers=headers, timeout=60, **kw)


def test_embed_embeddings(vllm_embed):
    r = _post(vllm_embed, "/v1/embeddings", {"model": vllm_embed.model, "input": ["hello world", "vLLM"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == vllm_embed.model == "minilm"
    vecs = [d["embedding"] for d in body["data"]]
    assert [d["index"] for d in body["data"]] == [0, 1]
    assert [len(v) for v in vecs] == [384, 384]
    assert all(abs(_norm(v) - 1.0) < 1e-3 for v in vecs)
    assert httpx.get(vllm_embed.base_url + "/version").json() == {"version": VLLM_VERSION}


def test_embed_matches_sentence_transformers(vllm_embed):
    """The server's vectors equal sentence-transformers' for the same model directory."""
    texts = ["hello world", "The quick brown fox jumps over the lazy dog."]
    r = _post(vllm_embed, "/v1/embeddings", {"input": texts})
    assert r.status_code == 200, r.text
    got = [d["embedding"] for d in r.json()["data"]]
    script = (
        "import json,sys; from sentence_transformers import SentenceTransformer;"
        "m=SentenceTransformer(sys.argv[1], device='cpu');"
        "print(json.dumps(m.encode(json.loads(sys.argv[2]), normalize_embeddings=True).tolist()))"
    )
    out = subprocess.run(
        [str(venv_python()), "-c", script, str(models_dir() / "minilm"), json.dumps(texts)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**BASE_ENV, "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    ref = json.loads(out.stdout.strip().splitlines()[-1])
    for a, b in zip(got, ref, strict=True):
        cos = sum(x * y for x, y in zip(a, b, strict=True)) / (_norm(a) * _norm(b))
        assert cos > 0.9999, cos


def test_embed_bi_encoder_rerank_ordering(vllm_embed):
    r = _post(vllm_embed, "/rerank", {"query": QUERY, "documents": DOCS})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert results[0]["index"] == 1  # the Paris sentence
    assert results[0]["document"]["text"] == DOCS[1]


def test_embed_mrl_dimensions(vllm_embed_mrl):
    r = _post(vllm_embed_mrl, "/v1/embeddings", {"input": ["hello world"], "dimensions": 128})
    assert r.status_code == 200, r.text
    vec = r.json()["data"][0]["embedding"]
    assert len(vec) == 128
    assert abs(_norm(vec) - 1.0) < 1e-3
    bad = _post(vllm_embed_mrl, "/v1/embeddings", {"input": ["hello world"], "dimensions": 100})
    assert bad.status_code == 400
    assert "Matryoshka dimensions [128, 256, 384]" in bad.json()["error"]["message"]


def test_rerank_cross_encoder(vllm_rerank):
    r = _post(vllm_rerank, "/rerank", {"model": vllm_rerank.model, "query": QUERY, "documents": DOCS})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    scores = [x["relevance_score"] for x in results]
    assert scores == sorted(scores, reverse=True)
    assert sorted(x["index"] for x in results) == [0, 1, 2]
    assert all(0.0 < s < 1.0 for s in scores)  # sigmoid of one logit

    s = _post(vllm_rerank, "/score", {"text_1": QUERY, "text_2": DOCS})
    assert s.status_code == 200, s.text
    by_index = {x["index"]: x["relevance_score"] for x in results}
    for d in s.json()["data"]:
        assert d["score"] == pytest.approx(by_index[d["index"]], abs=1e-6)

    # A cross-encoder is not an embedding model: /v1/embeddings is not served.
    e = _post(vllm_rerank, "/v1/embeddings", {"input": ["x"]})
    assert e.status_code in (404, 501)


def test_api_key(vllm_api_key):
    assert vllm_api_key.api_key == TEST_API_KEY
    url = vllm_api_key.base_url + "/v1/embeddings"
    body = {"model": vllm_api_key.model, "input": ["hello"]}
    no_key = httpx.post(url, json=body, timeout=60)
    assert no_key.status_code == 401
    assert no_key.json() == {"error": "Unauthorized"}
    wrong = httpx.post(url, json=body, headers={"Authorization": "Bearer nope"}, timeout=60)
    assert wrong.status_code == 401
    ok = httpx.post(url, json=body, headers={"Authorization": f"Bearer {vllm_api_key.api_key}"}, timeout=60)
    assert ok.status_code == 200, ok.text
    assert len(ok.json()["data"][0]["embedding"]) == 384


def test_late_interaction(vllm_late_interaction):
    r = _post(vllm_late_interaction, "/pooling", {"input": "hello world"})
    assert r.status_code == 200, r.text
    tokens = r.json()["data"][0]["data"]
    assert len(tokens) == 4 and all(len(t) == 384 for t in tokens)  # [CLS] hello world [SEP]
    rr = _post(vllm_late_interaction, "/rerank", {"query": QUERY, "documents": DOCS})
    assert rr.status_code == 200, rr.text
    assert rr.json()["results"][0]["index"] == 1
    assert rr.json()["results"][0]["relevance_score"] > 1.0  # MaxSim: a sum over query tokens
    e = _post(vllm_late_interaction, "/v1/embeddings", {"input": ["x"]})
    assert e.status_code == 501
