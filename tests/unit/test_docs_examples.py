"""Every Python block of README.md and docs/ carries a valid docs-test marker (tests/docs_blocks.py).

The blocks run in the other tiers: ``run`` blocks and server blocks on FakeVLLM in
tests/component/test_docs_examples.py, the ``contract`` ones on the real fixtures in
tests/contract/test_docs_examples.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixture_table import FIXTURES

from ..docs_blocks import (
    SERVER_GROUPS,
    Block,
    MarkerError,
    all_blocks,
    chain,
    parse_marker,
    python_source,
    run_chain,
)
from ..fakes import FAKE_SETTINGS

BLOCKS = all_blocks()


def marker(block: Block):  # type: ignore[no-untyped-def]
    return parse_marker(block, FIXTURES)


def errors_of(blocks: list[Block]) -> list[str]:
    found = []
    for block in blocks:
        try:
            chain(block, blocks, FIXTURES)
        except MarkerError as error:
            found.append(str(error))
    return found


def test_every_block_has_a_valid_marker() -> None:
    assert len(BLOCKS) >= 30
    assert errors_of(BLOCKS) == []


def test_every_block_on_real_servers_has_a_test_for_its_servers() -> None:
    for block in BLOCKS:
        m = marker(block)
        if m.kind == "server" and (m.contract or not set(m.fixtures) <= set(FAKE_SETTINGS)):
            assert m.fixtures in SERVER_GROUPS, f"{block}: add {m.fixtures} to SERVER_GROUPS"


def test_each_server_kind_has_one_block_on_the_real_server() -> None:
    """One ``contract`` block per fixture the docs use (not more: the rest run on FakeVLLM)."""
    used = {name for block in BLOCKS if marker(block).kind == "server" for name in marker(block).fixtures}
    on_real = [name for block in BLOCKS if marker(block).contract for name in marker(block).fixtures]
    faked = used & set(FAKE_SETTINGS)
    assert sorted(on_real) == sorted(faked), "mark exactly one block per faked fixture `contract`"


def test_contract_is_only_for_server_blocks(tmp_path: Path) -> None:
    [block] = write_docs(tmp_path, "<!-- docs-test: run contract -->\n```python\nx = 1\n```\n")
    with pytest.raises(MarkerError, match="`contract` is for server= blocks"):
        marker(block)


def test_few_blocks_are_skipped() -> None:
    skipped = [block.where for block in BLOCKS if marker(block).kind == "skip"]
    assert len(skipped) <= len(BLOCKS) // 5, skipped


def write_docs(root: Path, readme: str, page: str = "") -> list[Block]:
    (root / "docs").mkdir()
    (root / "README.md").write_text(readme)
    (root / "docs" / "guide.md").write_text(page)
    return all_blocks(root)


def test_a_block_without_a_marker_is_named_by_file_and_line(tmp_path: Path) -> None:
    blocks = write_docs(tmp_path, "# Title\n\ntext\n\n```python\nprint(1)\n```\n", "```py\nx = 1\n```\n")
    assert [block.where for block in blocks] == ["README.md:5", "docs/guide.md:1"]
    found = errors_of(blocks)
    assert len(found) == 2
    assert found[0].startswith("README.md:5: a python block without a marker")
    assert found[1].startswith("docs/guide.md:1: a py block without a marker")


def test_a_skip_needs_a_reason(tmp_path: Path) -> None:
    blocks = write_docs(
        tmp_path,
        "<!-- docs-test: skip -->\n```python\na\n```\n<!-- docs-test: skip:   -->\n```python\nb\n```\n"
        "<!-- docs-test: skip: needs a GPU -->\n```python\nc\n```\n",
    )
    found = errors_of(blocks)
    assert found == [
        "README.md:2: `skip` needs a reason: `<!-- docs-test: skip: WHY -->`",
        "README.md:6: `skip` needs a reason: `<!-- docs-test: skip: WHY -->`",
    ]
    assert marker(blocks[2]).reason == "needs a GPU"


@pytest.mark.parametrize(
    ("comment", "message"),
    [
        ("server=nope", "unknown fixture nope"),
        ("run server=embed", "two kinds"),
        ("id=a", "has no kind"),
        ("run after=missing", "after=missing names no earlier block"),
        ("run colour=blue", "'colour=blue' in 'run colour=blue' is not a docs-test word"),
        ("server=ocr-host:", "write FIXTURE or HOST:FIXTURE"),
    ],
)
def test_bad_markers_are_refused(tmp_path: Path, comment: str, message: str) -> None:
    [block] = write_docs(tmp_path, f"<!-- docs-test: {comment} -->\n```python\nx = 1\n```\n")
    [error] = errors_of([block])
    assert error.startswith("README.md:2: ") and message in error


def test_a_chain_runs_its_predecessors_first_and_keeps_one_kind(tmp_path: Path) -> None:
    blocks = write_docs(
        tmp_path,
        "<!-- docs-test: run id=a -->\n```python\nx = 1\n```\n"
        "<!-- docs-test: run id=b after=a -->\n```python\ny = x + 1\n```\n"
        "<!-- docs-test: run after=b -->\n```python\nassert y == 2\n```\n"
        "<!-- docs-test: server=embed after=a -->\n```python\nx\n```\n",
    )
    assert [b.line for b in chain(blocks[2], blocks, FIXTURES)] == [2, 6, 10]
    with pytest.raises(MarkerError, match=r"README\.md:14: after=a names README\.md:2, whose kind"):
        chain(blocks[3], blocks, FIXTURES)
    assert marker(blocks[3]).servers == (("localhost", "embed"),)


def test_host_pairs_and_pycon_examples(tmp_path: Path) -> None:
    blocks = write_docs(
        tmp_path,
        "<!-- docs-test: server=ocr-host:ocr,embed-host:embed -->\n```python\nx\n```\n",
        "Text\n<!-- docs-test: run -->\n>>> a = 1\n\n"
        "<!-- docs-test: run -->\n```\n>>> b = [\n... 2]\n[2]\n```\n",
    )
    assert marker(blocks[0]).servers == (("ocr-host", "ocr"), ("embed-host", "embed"))
    assert marker(blocks[0]).fixtures == ("embed", "ocr")
    assert [(b.where, b.language) for b in blocks[1:]] == [
        ("docs/guide.md:3", "pycon"),
        ("docs/guide.md:6", "pycon"),
    ]
    assert python_source(blocks[2]) == "b = [\n2]\n\n"


def test_a_failing_block_names_its_markdown_line(tmp_path: Path) -> None:
    blocks = write_docs(tmp_path, "<!-- docs-test: run -->\n```python\nx = 1\nraise SystemError(x)\n```\n")
    with pytest.raises(AssertionError, match=r'File "README.md", line 4'):
        run_chain(blocks, tmp_path)
