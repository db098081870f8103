"""Start each production recipe of server-fixtures/gpu-recipes.json with `vllm serve` and call it.

Needs a GPU host with `vllm` on PATH (or $VLLM_TASKS_VLLM) and the Hugging Face hub (or a warm HF cache).
Skipped elsewhere with the reason. Select one recipe with e.g. `pytest -m gpu -k bge-m3`.
"""

from __future__ import annotations

import base64
import io
import math
import os
import shutil
import struct
import wave
import zlib

import gpu_recipes
import httpx
import pytest
from launcher import FixtureStartError

RECIPES = gpu_recipes.recipes()

pytestmark = [pytest.mark.gpu, pytest.mark.contract]

QUERY = "What is the capital of France?"
DOCS = ["Bananas are yellow.", "Paris is the capital of France.", "France is in Europe."]


def _need_vllm() -> None:
    exe = os.environ.get("VLLM_TASKS_VLLM", "vllm")
    if shutil.which(exe) is None:
        if os.environ.get("CI") or os.environ.get("VLLM_TASKS_REQUIRE_FIXTURES"):
            pytest.fail(f"GPU recipes need the `{exe}` executable (vLLM with CUDA) on PATH")
        pytest.skip(f"GPU recipes need the `{exe}` executable (vLLM with CUDA) on PATH")


def _wav_tone(seconds: float = 2.0, rate: int = 16000) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        frames = b"".join(
            struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate)))
            for i in range(int(seconds * rate))
        )
        w.writeframes(frames)
    return buf.getvalue()


def _png(width: int = 64, height: int = 32) -> bytes:
    raw = b"".join(
        b"\x00" + bytes([255 if (x // 8 + y // 8) % 2 else 0 for x in range(width)]) for y in range(height)
    )

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    )


def _check(srv: gpu_recipes.GpuRecipeServer, check: dict) -> None:
    url, model = srv.base_url, srv.model
    kind = check["kind"]
    with httpx.Client(timeout=300) as c:
        if kind == "embed":
            r = c.post(url + "/v1/embeddings", json={"model": model, "input": ["hello world", QUERY]})
            assert r.status_code == 200, r.text
            assert len(r.json()["data"][0]["embedding"]) == check["dim"]
            if "dimensions" in check:
                r = c.post(
                    url + "/v1/embeddings",
                    json={"model": model, "input": ["x"], "dimensions": check["dimensions"]},
                )
                assert r.status_code == 200, r.text
                assert len(r.json()["data"][0]["embedding"]) == check["dimensions"]
        elif kind == "token_embed":
            r = c.post(url + "/pooling", json={"model": model, "input": "Query: hello world"})
            assert r.status_code == 200, r.text
            data = r.json()["data"][0]["data"]
            assert len(data[0]) == check["dim"]  # one vector per token
        elif kind in ("rerank", "rerank_late_interaction"):
            r = c.post(url + "/rerank", json={"model": model, "query": QUERY, "documents": DOCS})
            assert r.status_code == 200, r.text
            assert r.json()["results"][0]["index"] == 1, r.text
        elif kind == "transcription":
            data = {"model": model, "response_format": "json"}
            if "language" in check:
                data["language"] = check["language"]
            r = c.post(
                url + "/v1/audio/transcriptions",
                data=data,
                files={"file": ("tone.wav", _wav_tone(), "audio/wav")},
            )
            assert r.status_code == 200, r.text
            assert "text" in r.json()
        elif kind == "ocr":
            # The n-gram processor is loaded iff this is refused (without it, vllm_xargs are ignored).
            r = c.post(
                url + "/v1/chat/completions",
                json={
                    "model": model,
                    "messages": [{"role": "user", "content": "hi"}],
                    "max_tokens": 1,
                    "vllm_xargs": {"ngram_size": 0},
                },
            )
            assert r.status_code == 400, r.text
            image = "data:image/png;base64," + base64.b64encode(_png()).decode()
            r = c.post(
                url + "/v1/chat/completions",
                json={
                    "model": model,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {"type": "image_url", "image_url": {"url": image}},
                                {"type": "text", "text": "Free OCR."},
                            ],
                        }
                    ],
                    "max_tokens": 64,
                    "temperature": 0,
                    "skip_special_tokens": False,
                    "vllm_xargs": {
                        "ngram_size": 30,
                        "window_size": 90,
                        "whitelist_token_ids": [128821, 128822],
                    },
                },
            )
            assert r.status_code == 200, r.text
            assert isinstance(r.json()["choices"][0]["message"]["content"], str)
        else:  # pragma: no cover - table and test out of sync
            raise AssertionError(f"unknown check kind {kind!r}")


@pytest.mark.parametrize("name", list(RECIPES))
def test_gpu_recipe(name: str) -> None:
    _need_vllm()
    recipe = RECIPES[name]
    srv = gpu_recipes.GpuRecipeServer(name)
    try:
        srv.start()
    except FixtureStartError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        _check(srv, recipe["check"])
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- server log tail ---\n{srv.log_tail(40)}") from None
    finally:
        srv.stop()
