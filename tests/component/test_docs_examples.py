"""The blocks of README.md and docs/ that run without a real server: the ``run`` ones (many start a FakeVLLM
or a pytest session with the ``fake_vllm`` plugin themselves), and the server blocks against FakeVLLM
configured like their fixtures (tests/docs_blocks.py, tests/fakes.py).

Each block's ``http://HOST:8000`` becomes the URL of a fake of HOST's fixture, one fake per host (two hosts
on one fixture, the replicas of docs/jobs.md and docs/scaling.md, get two fakes), started for that block:
what a guide shows is the SDK's glue, which the fake exercises over real HTTP. The blocks whose point is the
real server carry the marker option ``contract`` and run again on the real fixture
(tests/contract/test_docs_examples.py), as do the blocks of a fixture that has no fake.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest
from fixture_table import FIXTURES

from tests.docs_blocks import (
    Block,
    all_blocks,
    chain,
    chain_ends,
    parse_marker,
    run_chain,
    run_pytest_chain,
    workdir,
)
from tests.fakes import FAKE_SETTINGS, fake_like

BLOCKS = all_blocks()
ENDS = chain_ends(BLOCKS, FIXTURES)


def faked(block: Block) -> bool:
    """A server block all of whose fixtures have a fake."""
    marker = parse_marker(block, FIXTURES)
    return marker.kind == "server" and all(name in FAKE_SETTINGS for name in marker.fixtures)


@pytest.mark.parametrize("block", [b for b in ENDS if faked(b)], ids=str)
def test_server_block_on_fakes(block: Block, tmp_path: Path) -> None:
    marker = parse_marker(block, FIXTURES)
    with ExitStack() as stack:
        urls = {host: stack.enter_context(fake_like(name)).base_url for host, name in marker.servers}
        print(run_chain(chain(block, BLOCKS, FIXTURES), workdir(tmp_path), urls))


RUNNABLE = [block for block in ENDS if parse_marker(block, FIXTURES).kind == "run"]


@pytest.mark.parametrize("block", RUNNABLE, ids=str)
def test_runnable_block(block: Block, tmp_path: Path) -> None:
    """A block that needs no server, run with its chain (a ``pytest`` block: as files in a pytest run with
    the ``fake_vllm`` plugin)."""
    blocks = chain(block, BLOCKS, FIXTURES)
    if parse_marker(block, FIXTURES).pytest:
        print(run_pytest_chain(blocks, tmp_path, plugins=["vllm_tasks.testing.pytest_plugin"]))
    else:
        print(run_chain(blocks, workdir(tmp_path)))
