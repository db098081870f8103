"""The docs blocks whose point is the real server run against the real CPU fixtures (tests/docs_blocks.py):
server blocks marked ``contract`` (one per server kind) and those of a fixture that has no fake; every other
server block runs on FakeVLLM in tests/component/test_docs_examples.py.

One test per set of servers (``docs_blocks.SERVER_GROUPS``: ``test_embed_blocks``,
``test_embed_and_ocr_blocks``, ...), parametrized over its blocks and using its fixtures, so that the
server plugin runs each set's blocks together and starts each server once; each block's
``http://localhost:8000`` (or ``http://HOST:8000``) becomes its fixture's URL. ``integration`` blocks
start what they need themselves (the fixtures' launcher, a pytest session with the server plugin) and
run with no fixture server up.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fixture_table import FIXTURES
from pytest_plugin import FIXTURE_NAMES

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
from tests.fakes import FAKE_SETTINGS

pytestmark = pytest.mark.contract

BLOCKS = all_blocks()
ENDS = chain_ends(BLOCKS, FIXTURES)
PYTEST_FIXTURE = {name: fixture for fixture, name in FIXTURE_NAMES.items()}  # "embed" -> "vllm_embed"


def on_real_servers(block: Block) -> bool:
    """A server block marked ``contract``, or one whose fixtures include one without a fake."""
    marker = parse_marker(block, FIXTURES)
    return marker.kind == "server" and (
        marker.contract or any(name not in FAKE_SETTINGS for name in marker.fixtures)
    )


def blocks_on(group: tuple[str, ...]) -> list[Block]:
    """The chain ends to run on real servers whose marker names exactly these fixtures."""
    return [
        block for block in ENDS if on_real_servers(block) and parse_marker(block, FIXTURES).fixtures == group
    ]


def distinct_urls(urls: dict[str, str]) -> dict[str, str]:
    """Two hosts of a block on the same fixture (the replicas of docs/jobs.md and docs/scaling.md) get two
    spellings of its address, 127.0.0.1 and localhost: a job refuses one server named twice."""
    seen: set[str] = set()
    for host, url in urls.items():
        if url in seen:
            urls[host] = url.replace("://127.0.0.1:", "://localhost:", 1)
        seen.add(url)
    return urls


def group_test(group: tuple[str, ...]) -> Callable[..., None]:
    """The test of one set of servers: its fixtures by ``usefixtures``, so the plugin sees them."""
    fixtures = [PYTEST_FIXTURE[name] for name in group]

    @pytest.mark.usefixtures(*fixtures)
    @pytest.mark.parametrize("block", blocks_on(group), ids=str)
    def test(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        marker = parse_marker(block, FIXTURES)
        urls = distinct_urls(
            {host: request.getfixturevalue(PYTEST_FIXTURE[name]).base_url for host, name in marker.servers}
        )
        print(run_chain(chain(block, BLOCKS, FIXTURES), workdir(tmp_path), urls))

    test.__doc__ = f"The blocks that need the {' and '.join(group)} fixture(s), with their URLs."
    return test


for _group in SERVER_GROUPS:
    globals()[f"test_{'_and_'.join(_group).replace('-', '_')}_blocks"] = group_test(_group)


def test_every_server_group_has_blocks() -> None:
    assert all(blocks_on(group) for group in SERVER_GROUPS), (
        "a group without blocks: drop it from SERVER_GROUPS"
    )


@pytest.mark.parametrize(
    "block", [b for b in ENDS if parse_marker(b, FIXTURES).kind == "integration"], ids=str
)
def test_self_starting_blocks(block: Block, tmp_path: Path) -> None:
    """Blocks that start their own servers (the plugin has stopped its own before this test: it needs
    none); a ``pytest`` block runs in a pytest session with the server plugin."""
    blocks = chain(block, BLOCKS, FIXTURES)
    if parse_marker(block, FIXTURES).pytest:
        print(run_pytest_chain(blocks, tmp_path, plugins=["pytest_plugin"]))
    else:
        print(run_chain(blocks, workdir(tmp_path)))
