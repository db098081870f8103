"""The Python code blocks of README.md and docs/**/*.md: found, checked for their marker, and run.

Every ```python / ```py / ```pycon block (and any ``>>>`` example) carries a marker on the line before its
fence, an HTML comment that the rendered page does not show (docs/contributing.md, "Code blocks in the
docs"):

    <!-- docs-test: run -->                        runs with no server (a unit test)
    <!-- docs-test: server=embed -->               runs against FakeVLLM configured like the `embed` CPU
                                                   fixture (component tier; tests/fakes.py)
    <!-- docs-test: server=embed contract -->      the same, and again on the real `embed` fixture
                                                   (contract tier): one block per server kind
    <!-- docs-test: server=ocr-host:ocr,embed-host:embed -->   several fixtures, one per host of the block
    <!-- docs-test: integration -->                an integration test with no fixture server up: the
                                                   block starts its own (the fixtures' launcher, pytest)
    <!-- docs-test: skip: needs DeepSeek-OCR on a GPU -->   not run; the reason is required

Options after the kind: ``id=NAME`` names a block; ``after=NAME`` runs the block after block NAME of the
same page, in the namespace it left (a fragment that continues an example; the chain runs in one
process); ``pytest`` makes the block a pytest module: the chain's blocks are written out as files (named
by a first line ``# name.py``, else ``test_block<N>.py``) and run in a pytest subprocess in which every
test must pass; ``contract`` (server blocks) runs the block on the real fixtures too. A block whose fixture
has no fake (tests/fakes.py) runs on the real fixture only.

A server block's ``http://localhost:8000`` (or ``http://HOST:8000`` for each ``HOST:fixture`` pair) is
replaced by the fixture's URL, and its namespace starts with ``vt`` imported and ``client`` /
``aclient`` (``vt.Client`` / ``vt.AsyncClient``) connected to its first fixture: the names the guides use
once their first example made them. Blocks run in a subprocess (logging, OpenTelemetry providers and
other process-wide settings stay there), with top-level ``await`` allowed, in a fresh temporary
directory holding links to the repository's top-level files and folders: ``tests/data/audio/fox.wav``
reads the repository's file, and what a block writes stays in the temporary directory.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import inspect
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LANGUAGES = ("python", "py", "pycon")
KINDS = ("run", "server", "integration", "skip")
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<body>.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<ticks>`{3,}|~{3,})(?P<lang>[\w+-]*)")
LOCAL_URL = "http://localhost:8000"
#: The fixture sets of the blocks that run on real servers (``contract`` ones and those of a fixture without
#: a fake): each is one test of tests/contract/test_docs_examples.py, so that each set starts once.
SERVER_GROUPS: tuple[tuple[str, ...], ...] = (
    ("embed",),
    ("ocr",),
    ("rerank",),
    ("late-interaction",),
    ("qwen3-embedding",),
    ("stt",),
    ("splade",),
    ("bge-m3",),
    ("classify-multilabel",),
    ("token-classify",),
    ("reward",),
)
#: Seconds one block (with its chain) may run; the OCR fixture's pages take the longest.
BLOCK_TIMEOUT = 900


class MarkerError(ValueError):
    """A block whose marker is missing or wrong; the message names ``file:line``."""


@dataclasses.dataclass(frozen=True)
class Block:
    """One code block: where it is, its language, its source, and its parsed marker."""

    path: str  # relative to ROOT
    line: int  # 1-based line of the opening fence
    language: str
    source: str
    marker: str | None  # the text after "docs-test:", None without a marker

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def __str__(self) -> str:
        return self.where


@dataclasses.dataclass(frozen=True)
class Marker:
    """A parsed marker: the kind, the fixtures by host, the skip reason and the options."""

    kind: str
    servers: tuple[tuple[str, str], ...] = ()  # (host, fixture name), first one is `client`'s
    reason: str = ""
    id: str | None = None
    after: str | None = None
    pytest: bool = False
    contract: bool = False  # a server block that also runs on the real fixtures

    @property
    def fixtures(self) -> tuple[str, ...]:
        """The fixture names the block needs, sorted, without repeats."""
        return tuple(sorted({name for _, name in self.servers}))


def markdown_files(root: Path = ROOT) -> list[Path]:
    """README.md and every page under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def find_blocks(path: Path, root: Path = ROOT) -> list[Block]:
    """The Python blocks of one markdown file (fenced, and ``>>>`` lines outside fences)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    name = path.relative_to(root).as_posix()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            if lines[i].lstrip().startswith(">>>"):
                blocks.append(Block(name, i + 1, "pycon", lines[i], _marker_before(lines, i)))
            i += 1
            continue
        indent, ticks, language = fence["indent"], fence["ticks"], fence["lang"].lower()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(ticks):
            end += 1
        body = [line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]]
        if language in LANGUAGES or (not language and any(b.lstrip().startswith(">>>") for b in body)):
            blocks.append(
                Block(name, i + 1, language or "pycon", "\n".join(body) + "\n", _marker_before(lines, i))
            )
        i = end + 1
    return blocks


def _marker_before(lines: Sequence[str], index: int) -> str | None:
    if index == 0:
        return None
    found = MARKER.match(lines[index - 1])
    return found["body"] if found else None


def all_blocks(root: Path = ROOT) -> list[Block]:
    """Every Python block of README.md and docs/, in file order."""
    return [block for path in markdown_files(root) for block in find_blocks(path, root)]


def parse_marker(block: Block, fixtures: Iterable[str]) -> Marker:
    """The block's marker, checked; raises MarkerError naming ``file:line`` and the fix."""
    if block.marker is None:
        raise MarkerError(
            f"{block.where}: a {block.language} block without a marker: put `<!-- docs-test: run -->`, "
            "`<!-- docs-test: server=FIXTURE -->` or `<!-- docs-test: skip: REASON -->` on the line before "
            "the fence (docs/contributing.md, 'Code blocks in the docs')"
        )
    body = block.marker
    if body.split(":", 1)[0].strip() == "skip":
        reason = body.split(":", 1)[1].strip() if ":" in body else ""
        if not reason:
            raise MarkerError(f"{block.where}: `skip` needs a reason: `<!-- docs-test: skip: WHY -->`")
        return Marker("skip", reason=reason)
    known = set(fixtures)
    kind: str | None = None
    servers: list[tuple[str, str]] = []
    options: dict[str, str] = {}
    flags: set[str] = set()
    for word in body.split():
        key, _, value = word.partition("=")
        if key in ("run", "integration") and not value:
            if kind is not None:
                raise MarkerError(
                    f"{block.where}: two kinds in {body!r}: give one of run, server=, integration"
                )
            kind = key
        elif key == "server" and value:
            if kind is not None:
                raise MarkerError(
                    f"{block.where}: two kinds in {body!r}: give one of run, server=, integration"
                )
            kind = "server"
            servers = [_server(pair, block) for pair in value.split(",")]
            unknown = [name for _, name in servers if name not in known]
            if unknown:
                raise MarkerError(
                    f"{block.where}: unknown fixture {', '.join(unknown)}; known: {', '.join(sorted(known))}"
                )
        elif key in ("id", "after") and value:
            options[key] = value
        elif key in ("pytest", "contract") and not value:
            flags.add(key)
        else:
            raise MarkerError(
                f"{block.where}: {word!r} in {body!r} is not a docs-test word: kinds run, server=FIXTURE, "
                "integration, skip: REASON; options id=NAME, after=NAME, pytest, contract"
            )
    if kind is None:
        raise MarkerError(
            f"{block.where}: {body!r} has no kind: give one of run, server=FIXTURE, integration"
        )
    if "contract" in flags and kind != "server":
        raise MarkerError(f"{block.where}: `contract` is for server= blocks (others run on no fixture)")
    return Marker(
        kind,
        tuple(servers),
        "",
        options.get("id"),
        options.get("after"),
        "pytest" in flags,
        "contract" in flags,
    )


def _server(pair: str, block: Block) -> tuple[str, str]:
    host, _, name = pair.rpartition(":")
    if not name:
        raise MarkerError(f"{block.where}: server={pair!r}: write FIXTURE or HOST:FIXTURE")
    return (host or "localhost", name)


def chain(block: Block, blocks: Sequence[Block], fixtures: Iterable[str]) -> list[Block]:
    """The blocks to run for ``block``: its ``after=`` predecessors (same page, earlier, same kind,
    servers and pytest flag), oldest first, then the block itself."""
    fixtures = tuple(fixtures)
    marker = parse_marker(block, fixtures)
    if marker.after is None:
        return [block]
    earlier = [b for b in blocks if b.path == block.path and b.line < block.line and b.marker is not None]
    named = [(b, m) for b, m in ((b, parse_marker(b, fixtures)) for b in earlier) if m.id == marker.after]
    if not named:
        raise MarkerError(f"{block.where}: after={marker.after} names no earlier block of {block.path}")
    previous, previous_marker = named[-1]
    same = (previous_marker.kind, previous_marker.servers, previous_marker.pytest) == (
        marker.kind,
        marker.servers,
        marker.pytest,
    )
    if not same:
        raise MarkerError(
            f"{block.where}: after={marker.after} names {previous.where}, whose kind, servers or pytest "
            "flag differ: a chain runs in one place"
        )
    return [*chain(previous, blocks, fixtures), block]


def chain_ends(blocks: Sequence[Block], fixtures: Iterable[str]) -> list[Block]:
    """The blocks no later block continues (``after=``): running each with its chain runs every block."""
    fixtures = tuple(fixtures)
    markers = {block: parse_marker(block, fixtures) for block in blocks if block.marker is not None}
    continued = {(block.path, m.after) for block, m in markers.items() if m.after is not None}
    return [
        block for block in blocks if block not in markers or (block.path, markers[block].id) not in continued
    ]


def workdir(tmp: Path) -> Path:
    """``tmp`` with a link to each top-level entry of the repository (the blocks' working directory)."""
    for entry in ROOT.iterdir():
        if not entry.name.startswith("."):
            (tmp / entry.name).symlink_to(entry)
    return tmp


def python_source(block: Block) -> str:
    """The block as Python: a ``pycon`` block keeps its ``>>>`` / ``...`` lines without the prompts (the
    expected output is not compared); line numbers are kept."""
    if block.language != "pycon":
        return block.source
    lines = []
    for line in block.source.splitlines():
        stripped = line.lstrip()
        lines.append(stripped[4:] if stripped.startswith((">>> ", "... ")) else "")
    return "\n".join(lines) + "\n"


def localize(source: str, urls: Mapping[str, str]) -> str:
    """``http://HOST:8000`` replaced by the URL of HOST's fixture."""
    for host, url in urls.items():
        source = source.replace(f"http://{host}:8000", url)
    return source


def environment() -> dict[str, str]:
    """The subprocesses' environment: this checkout's ``vllm_tasks`` and server-fixtures/ importable."""
    env = dict(os.environ)
    paths = [str(ROOT), str(ROOT / "server-fixtures"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    # docs/fixtures.md's version-matrix example starts one server per selected version in its own session:
    # one older release shows the mechanism (the contract tier proves both sides of every gate itself), and
    # saves a vLLM start. A matrix chosen by the caller ($VLLM_TASKS_MATRIX) is kept.
    env.setdefault("VLLM_TASKS_MATRIX", "0.16.0")
    return env


def _subprocess(
    command: Sequence[str], cwd: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``command`` in ``cwd`` with :func:`environment`, its output captured, at most BLOCK_TIMEOUT s."""
    return subprocess.run(
        command,
        input=stdin,
        cwd=cwd,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
        check=False,
    )


def run_chain(blocks: Sequence[Block], cwd: Path, urls: Mapping[str, str] | None = None) -> str:
    """Run the blocks, in order and in one namespace, in a Python subprocess in ``cwd``; returns its
    output, raises AssertionError with the output (the traceback names the markdown lines) on failure.
    ``urls``: host -> fixture URL; the first is the preset ``client``'s server."""
    job = {
        "url": next(iter(urls.values())) if urls else None,
        "blocks": [
            {"path": b.path, "line": b.line, "source": localize(b.source, urls or {})} for b in blocks
        ],
    }
    done = _subprocess([sys.executable, __file__], cwd, json.dumps(job))
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise AssertionError(f"{blocks[-1].where} failed (exit {done.returncode}):\n{output}")
    return output


def run_pytest_chain(
    blocks: Sequence[Block], cwd: Path, plugins: Sequence[str], urls: Mapping[str, str] | None = None
) -> str:
    """Write the blocks out as files in ``cwd`` (an empty directory: no ini file or test folder of ours is
    found from it) and run pytest on the ``test_*.py`` ones in a subprocess with ``plugins`` (``-p``);
    every collected test must pass (no failure, error or skip)."""
    names = []
    for number, block in enumerate(blocks, 1):
        named = re.match(r"#\s*([\w.]+\.py)\s*\n", block.source)
        names.append(named.group(1) if named else f"test_block{number}.py")
        (cwd / names[-1]).write_text(localize(block.source, urls or {}), encoding="utf-8")
    tests = [name for name in names if name.startswith("test_")]
    command = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--rootdir", str(cwd)]
    command += tests
    for plugin in plugins:
        command += ["-p", plugin]
    done = _subprocess(command, cwd)
    output = done.stdout + done.stderr
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""  # "4 passed in 1.2s"
    clean = done.returncode == 0 and " passed" in summary and not re.search(r"skipped|error|failed", summary)
    if not clean:
        raise AssertionError(
            f"{blocks[-1].where}: pytest did not pass every test (exit {done.returncode}):\n{output}"
        )
    return output


def _execute(job: Mapping[str, object]) -> None:
    """In the subprocess: the preset names, then each block compiled with its markdown line numbers."""
    namespace: dict[str, object] = {"__name__": "__main__"}
    url = job["url"]
    if url:
        import vllm_tasks as vt

        namespace.update(vt=vt, client=vt.Client(str(url)), aclient=vt.AsyncClient(str(url)))
    for block in job["blocks"]:  # type: ignore[attr-defined]
        source = "\n" * block["line"] + block["source"]  # line numbers as in the markdown file
        code = compile(source, block["path"], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, namespace)
        if inspect.iscoroutine(result):
            asyncio.run(result)


if __name__ == "__main__":
    _execute(json.load(sys.stdin))
