"""Generate vllm_tasks/_sync/ from vllm_tasks/_async/ (the httpcore model).

The async client is the source of truth; the sync twin is derived by token replacement, so both
always expose the same methods with the same signatures.

    python scripts/unasync.py            # regenerate vllm_tasks/_sync/
    python scripts/unasync.py --check    # exit 1 (listing the files) when vllm_tasks/_sync/ is stale

Either mode fails when a replacement rule matched nothing in any file: a rule that no longer applies is
a sign that the async code drifted from what the rules expect. The generated files are formatted with
the ruff version pinned in pyproject.toml (the test extra), so the output is reproducible.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "vllm_tasks" / "_async"
TARGET = ROOT / "vllm_tasks" / "_sync"
HEADER = "# GENERATED from vllm_tasks/_async/{name} by scripts/unasync.py: do not edit.\n"

# Order matters: specific names first, then the general `AsyncX` -> `X` rule.
REPLACEMENTS: list[tuple[str, str]] = [
    (r"\bimport asyncio\b", "import threading"),
    (r"\basyncio\.Lock\(\)", "threading.Lock()"),
    (r"\bAsyncTransport\b", "SyncTransport"),
    (r"\bAsyncBackend\b", "SyncBackend"),
    (r"\bAsyncWebSocket\b", "SyncWebSocket"),
    (r"\bAsync(?=[A-Z])", ""),
    (r"\basync_offload\b", "sync_offload"),
    (r"\basync_pieces_of\b", "sync_pieces_of"),
    (r"\basync def ", "def "),
    (r"\basync with ", "with "),
    (r"\basync for ", "for "),
    (r"\bawait ", ""),
    (r"__aenter__", "__enter__"),
    (r"__aexit__", "__exit__"),
    (r"__aiter__", "__iter__"),
    (r"\.aclose\(\)", ".close()"),
    (r"\.aread\(\)", ".read()"),
    (r"\baiter_(bytes|lines)\b", r"iter_\1"),
    (r"\bcontextlib\.aclosing\b", "contextlib.closing"),
    (r"\basynchronous\b", "synchronous"),
    (r"\bAsynchronous\b", "Synchronous"),
    (r"\bAwaitable\[(\w+)\]", r"\1"),
]


class StaleRules(Exception):
    """A replacement rule matched nothing in any source file."""


def convert(text: str, hits: dict[str, int] | None = None) -> str:
    """Apply the async -> sync replacements to one module's source; count each rule's matches in ``hits``."""
    for pattern, replacement in REPLACEMENTS:
        text, count = re.subn(pattern, replacement, text)
        if hits is not None:
            hits[pattern] = hits.get(pattern, 0) + count
    return text


def _ruff(args: list[str], text: str, name: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--stdin-filename", str(TARGET / name), "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,  # exit code 1 is ruff's 'fixed/reformatted', not a failure
    )
    if done.returncode not in (0, 1) or not done.stdout:
        raise RuntimeError(f"ruff {' '.join(args)} failed on {name}: {done.stderr.strip()}")
    return done.stdout


def _format(text: str, name: str) -> str:
    # Renames (AsyncTransport -> SyncTransport) can unsort an import line, and Awaitable[T] -> T leave an
    # import unused: sort and drop those, then format.
    fixed = _ruff(["check", "--select", "I,F401", "--fix", "--exit-zero", "--quiet"], text, name)
    return _ruff(["format"], fixed, name)


def generate() -> dict[str, str]:
    """Return {file name: formatted sync source} for every module of vllm_tasks/_async/.

    Raises:
        StaleRules: a replacement rule matched nothing.
    """
    hits: dict[str, int] = {}
    out = {
        path.name: _format(HEADER.format(name=path.name) + convert(path.read_text(), hits), path.name)
        for path in sorted(SOURCE.glob("*.py"))
    }
    unused = [pattern for pattern, _ in REPLACEMENTS if not hits.get(pattern)]
    if unused:
        raise StaleRules("replacement rules that matched nothing: " + ", ".join(unused))
    return out


def stale_files(generated: dict[str, str]) -> list[str]:
    """The files of vllm_tasks/_sync/ that differ from ``generated``, are missing, or are left over."""
    current = {path.name: path.read_text() for path in TARGET.glob("*.py")}
    names = sorted(set(current) | set(generated))
    return [name for name in names if current.get(name) != generated.get(name)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="fail when vllm_tasks/_sync/ is stale")
    args = parser.parse_args(argv)
    try:
        generated = generate()
    except StaleRules as error:
        print(f"unasync: {error}", file=sys.stderr)
        return 1
    stale = stale_files(generated)
    if args.check:
        if stale:
            print("unasync: stale generated files (run python scripts/unasync.py): " + ", ".join(stale))
            return 1
        print(f"unasync: {TARGET.relative_to(ROOT)} is up to date ({len(generated)} files)")
        return 0
    TARGET.mkdir(exist_ok=True)
    for name in stale:
        if name in generated:
            (TARGET / name).write_text(generated[name])
        else:
            (TARGET / name).unlink()
    print(f"unasync: wrote {len(stale)} of {len(generated)} files to {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
