"""Decode cost of one embeddings response: vllm_tasks vs openai-python vs the raw-bytes floor.

The same 256 x 1024 float32 vectors are served, through httpx.MockTransport (no network), as vLLM writes
them: JSON floats, base64 JSON, and `encoding_format=bytes` with its `metadata` header. Times are medians
of repeated full calls (request building + response parsing + numpy array out).

    python benchmarks/embed_decode.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import time
from collections.abc import Callable

import httpx
import numpy as np

import vllm_tasks as vt

N, D = 256, 1024
BASE = "http://bench.local:8000"


def make_payloads(vectors: np.ndarray) -> dict[str, tuple[bytes, dict[str, str]]]:
    usage = {"prompt_tokens": N, "total_tokens": N}
    floats = json.dumps(
        {
            "object": "list",
            "model": "m",
            "data": [
                {"index": i, "object": "embedding", "embedding": v.tolist()} for i, v in enumerate(vectors)
            ],
            "usage": usage,
        }
    ).encode()
    b64 = json.dumps(
        {
            "object": "list",
            "model": "m",
            "data": [
                {"index": i, "object": "embedding", "embedding": base64.b64encode(v.tobytes()).decode()}
                for i, v in enumerate(vectors)
            ],
            "usage": usage,
        }
    ).encode()
    item = D * 4
    metadata = {
        "id": "embd-1",
        "created": 0,
        "model": "m",
        "usage": usage,
        "data": [
            {
                "index": i,
                "embed_dtype": "float32",
                "endianness": "native",
                "start": i * item,
                "end": (i + 1) * item,
                "shape": [D],
            }
            for i in range(N)
        ],
    }
    json_headers = {"content-type": "application/json"}
    return {
        "float": (floats, json_headers),
        "base64": (b64, json_headers),
        "bytes": (
            vectors.astype("<f4").tobytes(),
            {"content-type": "application/octet-stream", "metadata": json.dumps(metadata)},
        ),
    }


def transport(payloads: dict[str, tuple[bytes, dict[str, str]]]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/version":
            return httpx.Response(200, json={"version": "0.32.0"})
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m", "max_model_len": 8192}]})
        if request.url.path == "/openapi.json":
            return httpx.Response(404, json={"detail": "Not Found"})
        fmt = json.loads(request.content).get("encoding_format", "float")
        body, headers = payloads[fmt]
        return httpx.Response(200, content=body, headers=headers)

    return httpx.MockTransport(handler)


def median_ms(fn: Callable[[], np.ndarray], repeat: int, expected: np.ndarray) -> float:
    out = fn()
    assert out.shape == expected.shape and np.array_equal(out, expected), "wrong result"
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    vectors = np.random.default_rng(0).standard_normal((N, D)).astype(np.float32)
    payloads = make_payloads(vectors)
    texts = ["x"] * N
    sdk = vt.Client(BASE, http_client=httpx.Client(transport=transport(payloads)), max_retries=0)
    sdk.server_info()

    import openai

    oai = openai.OpenAI(
        base_url=BASE + "/v1",
        api_key="x",
        http_client=httpx.Client(transport=transport(payloads)),
        max_retries=0,
    )

    def openai_call() -> np.ndarray:
        response = oai.embeddings.create(model="m", input=texts)  # openai-python asks for base64
        return np.array([item.embedding for item in response.data], dtype=np.float32)

    raw_body = payloads["bytes"][0]
    raw_http = httpx.Client(transport=transport(payloads))

    def raw_httpx_bytes() -> np.ndarray:
        response = raw_http.post(BASE + "/v1/embeddings", json={"input": texts, "encoding_format": "bytes"})
        return np.frombuffer(response.content, dtype="<f4").reshape(N, D)

    rows = [
        ("raw-bytes floor: httpx post + np.frombuffer", raw_httpx_bytes),
        (
            "vllm_tasks encoding_format=bytes",
            lambda: sdk.embed(texts, encoding_format="bytes", batch_size=N).vectors,
        ),
        (
            "vllm_tasks encoding_format=base64",
            lambda: sdk.embed(texts, encoding_format="base64", batch_size=N).vectors,
        ),
        (
            "vllm_tasks encoding_format=float",
            lambda: sdk.embed(texts, encoding_format="float", batch_size=N).vectors,
        ),
        ("openai-python embeddings.create -> np.array", openai_call),
    ]
    results = [(name, median_ms(fn, args.repeat, vectors)) for name, fn in rows]
    floor = results[0][1]
    openai_ms = results[-1][1]
    print(f"decode {N} x {D} float32 vectors (median of {args.repeat})")
    copy_ms = median_ms(lambda: np.frombuffer(raw_body, "<f4").reshape(N, D).copy(), args.repeat, vectors)
    print(f"pure np.frombuffer(body).copy() of the same bytes: {copy_ms:.3f} ms")
    print(f"{'method':<46} {'ms':>9} {'vs floor':>9} {'openai/this':>12}")
    for name, ms in results:
        print(f"{name:<46} {ms:9.2f} {ms / floor:8.1f}x {openai_ms / ms:11.1f}x")


if __name__ == "__main__":
    main()
