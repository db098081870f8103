"""Offline checks of the fixture and GPU-recipe tables (no server, runs everywhere in < 1 s)."""

from __future__ import annotations

import json

import gpu_recipes
from fixture_pins import MODELS
from fixture_table import FIXTURES, TEST_API_KEY
from launcher import FixtureServer
from pytest_plugin import FIXTURE_NAMES


def test_fixture_table():
    assert {"embed", "embed-mrl", "rerank", "api-key"} <= set(FIXTURES)
    assert FIXTURE_NAMES["vllm_embed_mrl"] == "embed-mrl"
    for f in FIXTURES.values():
        assert f.model_dir in MODELS
        assert "--served-model-name" not in f.args and "--port" not in f.args
    assert FIXTURES["api-key"].api_key == TEST_API_KEY
    srv = FixtureServer("embed-mrl", port=12345)
    assert srv.base_url == "http://127.0.0.1:12345"
    assert srv.model == "minilm-mrl" and srv.api_key is None
    cmd = srv.command
    assert cmd[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert json.loads(cmd[cmd.index("--hf-overrides") + 1]) == {"matryoshka_dimensions": [128, 256, 384]}


def test_gpu_recipes_table():
    recipes = gpu_recipes.recipes()
    models = {r["model"] for r in recipes.values()}
    for needed in (
        "Qwen/Qwen3-Embedding-0.6B",
        "BAAI/bge-m3",
        "jinaai/jina-embeddings-v3",
        "jinaai/jina-embeddings-v4-vllm-retrieval",
        "ssmits/Qwen2-7B-Instruct-embed-base",
        "BAAI/bge-reranker-v2-m3",
        "Qwen/Qwen3-Reranker-0.6B",
        "jinaai/jina-colbert-v2",
        "vidore/colpali-v1.3-hf",
        "openai/whisper-large-v3-turbo",
        "mistralai/Voxtral-Mini-3B-2507",
        "deepseek-ai/DeepSeek-OCR",
    ):
        assert needed in models
    for r in recipes.values():
        cmd = gpu_recipes.recipe_command(r, host="127.0.0.1", port=8000, vllm="vllm")
        assert cmd[:3] == ["vllm", "serve", r["model"]]
        for i, arg in enumerate(cmd):
            if arg in ("--hf-overrides", "--pooler-config"):
                json.loads(cmd[i + 1])
            if arg == "--chat-template":
                templates = gpu_recipes.TEMPLATES_DIR
                assert (templates / "qwen3_reranker.jinja").exists()
                assert cmd[i + 1].startswith(str(templates))
