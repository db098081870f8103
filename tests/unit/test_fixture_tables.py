"""Offline checks of the fixture and GPU-recipe tables (no server, runs everywhere in < 1 s)."""

from __future__ import annotations

import json
from pathlib import Path

import gpu_recipes
import pytest
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


def test_version_matrix_tables(monkeypatch):
    import fixture_pins
    import fixture_table

    assert fixture_pins.MATRIX_VERSIONS[-1] == fixture_pins.VLLM_VERSION
    assert set(fixture_pins.DEFAULT_MATRIX) <= set(fixture_pins.MATRIX_VERSIONS)
    assert fixture_pins.venv_python() == fixture_pins.venv_python(fixture_pins.VLLM_VERSION)
    assert fixture_pins.venv_python("0.16.0") == fixture_pins.cache_dir() / "venvs/0.16.0/bin/python"
    srv = FixtureServer("embed", port=12345, vllm_version="0.16.0")
    assert srv.command[0] == str(fixture_pins.venv_python("0.16.0")) and srv.vllm_version == "0.16.0"
    assert "venvs/0.16.0" in srv.env["VLLM_CACHE_ROOT"]

    for raw, expected in (
        (None, fixture_pins.DEFAULT_MATRIX),
        ("default", fixture_pins.DEFAULT_MATRIX),
        ("all", fixture_pins.MATRIX_VERSIONS),
        (" 0.11.0, 0.16.0,0.11.0 ", ("0.11.0", "0.16.0")),
    ):
        if raw is None:
            monkeypatch.delenv("VLLM_TASKS_MATRIX", raising=False)
        else:
            monkeypatch.setenv("VLLM_TASKS_MATRIX", raw)
        assert fixture_pins.selected_matrix_versions() == expected
    monkeypatch.setenv("VLLM_TASKS_MATRIX", "0.9.0")
    with pytest.raises(ValueError, match=r"0\.9\.0"):
        fixture_pins.selected_matrix_versions()

    # per-version flags: data in fixture_table.VERSION_FLAGS, applied below `before`
    rule = fixture_table.VersionFlags(
        before="0.12.0",
        why="test",
        fixtures=("embed",),
        drop=("--max-model-len",),
        add=("--x",),
        env={"A": "1"},
    )
    monkeypatch.setattr(fixture_table, "VERSION_FLAGS", (rule,))
    embed = FIXTURES["embed"]
    old = fixture_table.fixture_args(embed, "0.11.0")
    assert "--max-model-len" not in old and "256" not in old and old[-1] == "--x"
    assert fixture_table.fixture_args(embed, "0.12.0") == embed.args
    assert fixture_table.fixture_args(FIXTURES["rerank"], "0.11.0") == FIXTURES["rerank"].args
    assert fixture_table.fixture_env(embed, "0.11.0") == {"A": "1"}


@pytest.mark.parametrize("instruction", [None, "Find the city"])
def test_qwen3_reranker_template_renders_the_model_card_prompt(instruction: str | None) -> None:
    """The fixture's --chat-template gives, character for character, the prompt references.py scores (the
    model card's); the tiny tokenizer drops whitespace, so the contract test alone would miss a newline."""
    from fixture_table import QWEN3_RERANKER_TEMPLATE
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from references import qwen3_reranker_prompt

    # transformers and vLLM render chat templates with these settings
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    template = env.from_string(QWEN3_RERANKER_TEMPLATE.read_text())
    messages = [{"role": "query", "content": "Q?"}, {"role": "document", "content": "D."}]
    extra = {"instruction": instruction} if instruction else {}
    rendered = template.render(messages=messages, **extra)
    assert rendered == qwen3_reranker_prompt("Q?", "D.", instruction)


def test_qwen3_reranker_fixture_uses_the_gpu_recipes_flags() -> None:
    """The CPU fixture is served as the production recipe is (server-fixtures/gpu-recipes.json)."""

    def flags(args: list[str] | tuple[str, ...]) -> dict[str, str]:
        return {a: b for a, b in zip(args, [*args[1:], ""], strict=True) if a.startswith("--")}

    recipe = flags(gpu_recipes.recipes()["qwen3-reranker-0.6b"]["args"])
    fixture = flags(FIXTURES["qwen3-reranker"].args)
    for flag in ("--runner", "--convert"):
        assert fixture[flag] == recipe[flag]
    assert json.loads(fixture["--hf-overrides"]) == json.loads(recipe["--hf-overrides"])
    assert Path(fixture["--chat-template"]).name == Path(recipe["--chat-template"]).name
    assert "--chat-template" not in flags(FIXTURES["qwen3-reranker-no-template"].args)


def test_a_cuda_vllm_serves_todays_fixtures_when_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/gpu-zoo.sh's switch: $VLLM_TASKS_FIXTURE_PYTHON runs today's fixtures' servers, never an
    older release's (the version matrix keeps its own venvs)."""
    import fixture_pins

    monkeypatch.delenv("VLLM_TASKS_FIXTURE_PYTHON", raising=False)
    assert fixture_pins.server_python() == fixture_pins.venv_python()
    monkeypatch.setenv("VLLM_TASKS_FIXTURE_PYTHON", "/opt/vllm-cuda/bin/python")
    assert str(fixture_pins.server_python()) == "/opt/vllm-cuda/bin/python"
    assert str(fixture_pins.server_python(fixture_pins.VLLM_VERSION)) == "/opt/vllm-cuda/bin/python"
    older = fixture_pins.MATRIX_VERSIONS[0]
    assert fixture_pins.server_python(older) == fixture_pins.venv_python(older)
