"""Generate vllm_tasks/_sync/ from vllm_tasks/_async/.

The async client is the source of truth; the sync twin is derived by token replacement (as httpcore
does), so both always expose the same methods with the same signatures. Run after editing any file in
vllm_tasks/_async/:  python scripts/unasync.py   (tests/unit/test_parity.py fails when output is stale).
"""

from __future__ import annotations

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
    (r"\bAsync(?=[A-Z])", ""),
    (r"\basync_sleep\b", "sync_sleep"),
    (r"\basync def ", "def "),
    (r"\basync with ", "with "),
    (r"\basync for ", "for "),
    (r"\bawait ", ""),
    (r"__aenter__", "__enter__"),
    (r"__aexit__", "__exit__"),
    (r"__aiter__", "__iter__"),
    (r"__anext__", "__next__"),
    (r"\.aclose\(\)", ".close()"),
    (r"\.aread\(\)", ".read()"),
    (r"\.aiter_lines\(\)", ".iter_lines()"),
    (r"\basynchronous\b", "synchronous"),
    (r"\bAsynchronous\b", "Synchronous"),
]


def convert(text: str) -> str:
    """Apply the async -> sync replacements to one module's source."""
    for pattern, replacement in REPLACEMENTS:
        text = re.sub(pattern, replacement, text)
    return text


def generate() -> dict[str, str]:
    """Return {file name: formatted sync source} for every module of vllm_tasks/_async/."""
    out: dict[str, str] = {}
    for path in sorted(SOURCE.glob("*.py")):
        text = HEADER.format(name=path.name) + convert(path.read_text())
        formatted = subprocess.run(
            [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(TARGET / path.name), "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        out[path.name] = formatted.stdout
    return out


def main() -> int:
    TARGET.mkdir(exist_ok=True)
    generated = generate()
    for stale in TARGET.glob("*.py"):
        if stale.name not in generated:
            stale.unlink()
    for name, text in generated.items():
        (TARGET / name).write_text(text)
    print(f"wrote {len(generated)} files to {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
