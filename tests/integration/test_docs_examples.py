"""The server blocks of README.md and docs/ run against the real CPU fixtures (tests/docs_blocks.py).

One test per set of servers (docs_blocks.SERVER_GROUPS), parametrized over its blocks, so that the
server plugin runs each set's blocks together and starts each server once; each block's
``http://localhost:8000`` (or ``http://HOST:8000``) becomes its fixture's URL. ``integration`` blocks
start what they need themselves (the fixtures' launcher, a pytest session with the server plugin) and
run with no fixture server up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fixture_table import FIXTURES

from tests.docs_blocks import (
    SERVER_GROUPS,
    Block,
    all_blocks,
    chain,
    chain_ends,
    parse_marker,
    run_chain,
    run_pytest_chain,
    workdir,
)

pytestmark = pytest.mark.integration

BLOCKS = all_blocks()
ENDS = chain_ends(BLOCKS, FIXTURES)


def blocks_on(*fixtures: str) -> list[Block]:
    return [
        b
        for b in ENDS
        if parse_marker(b, FIXTURES).kind == "server" and parse_marker(b, FIXTURES).fixtures == fixtures
    ]


def run_on(block: Block, tmp_path: Path, servers: dict[str, Any]) -> None:
    """Run ``block``'s chain with each host's ``http://HOST:8000`` pointed at its fixture."""
    marker = parse_marker(block, FIXTURES)
    urls = {host: servers[name].base_url for host, name in marker.servers}
    run_chain(chain(block, BLOCKS, FIXTURES), workdir(tmp_path), urls)


def test_every_server_group_has_a_test() -> None:
    tested = {("embed",), ("embed", "ocr"), ("ocr",), ("rerank",), ("late-interaction",), ("stt",)}
    assert set(SERVER_GROUPS) == tested
    assert all(blocks_on(*group) for group in SERVER_GROUPS), "a group without blocks: drop its test"


@pytest.mark.parametrize("block", blocks_on("embed"), ids=str)
def test_embed_blocks(block: Block, tmp_path: Path, vllm_embed: Any) -> None:
    run_on(block, tmp_path, {"embed": vllm_embed})


@pytest.mark.parametrize("block", blocks_on("embed", "ocr"), ids=str)
def test_embed_and_ocr_blocks(block: Block, tmp_path: Path, vllm_embed: Any, vllm_ocr: Any) -> None:
    run_on(block, tmp_path, {"embed": vllm_embed, "ocr": vllm_ocr})


@pytest.mark.parametrize("block", blocks_on("ocr"), ids=str)
def test_ocr_blocks(block: Block, tmp_path: Path, vllm_ocr: Any) -> None:
    run_on(block, tmp_path, {"ocr": vllm_ocr})


@pytest.mark.parametrize("block", blocks_on("rerank"), ids=str)
def test_rerank_blocks(block: Block, tmp_path: Path, vllm_rerank: Any) -> None:
    run_on(block, tmp_path, {"rerank": vllm_rerank})


@pytest.mark.parametrize("block", blocks_on("late-interaction"), ids=str)
def test_late_interaction_blocks(block: Block, tmp_path: Path, vllm_late_interaction: Any) -> None:
    run_on(block, tmp_path, {"late-interaction": vllm_late_interaction})


@pytest.mark.parametrize("block", blocks_on("stt"), ids=str)
def test_stt_blocks(block: Block, tmp_path: Path, vllm_stt: Any) -> None:
    run_on(block, tmp_path, {"stt": vllm_stt})


@pytest.mark.parametrize(
    "block", [b for b in ENDS if parse_marker(b, FIXTURES).kind == "integration"], ids=str
)
def test_self_starting_blocks(block: Block, tmp_path: Path) -> None:
    """Blocks that start their own servers (the plugin has stopped its own before this test: it needs
    none); a ``pytest`` block runs in a pytest session with the server plugin."""
    blocks = chain(block, BLOCKS, FIXTURES)
    if parse_marker(block, FIXTURES).pytest:
        run_pytest_chain(blocks, tmp_path, plugins=["pytest_plugin"])
    else:
        run_chain(blocks, workdir(tmp_path))
