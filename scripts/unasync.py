"""Generate vllm_tasks/_sync_client.py from vllm_tasks/_async_client.py.

The async client is the source of truth; the sync twin is derived by token replacement (as httpcore
does), so both always expose the same methods with the same signatures. Run after editing the async
client:  python scripts/unasync.py   (tests/unit/test_parity.py fails when the output is stale).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "vllm_tasks" / "_async_client.py"
TARGET = ROOT / "vllm_tasks" / "_sync_client.py"

# Order matters: longer, more specific patterns first.
REPLACEMENTS: list[tuple[str, str]] = [
    (
        r'"""The asynchronous client\. .*?"""',
        ('"""The synchronous client. GENERATED from _async_client.py by scripts/unasync.py: do not edit."""'),
    ),
    (r"\bimport asyncio\b", "import threading"),
    (r"\basyncio\.Lock\(\)", "threading.Lock()"),
    (r"\bAsyncClient\b", "Client"),
    (r"\bAsyncTransport\b", "SyncTransport"),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\bAsyncGenerator\b", "Generator"),
    (r"\basync_sleep\b", "sync_sleep"),
    (r"\basync def ", "def "),
    (r"\basync with ", "with "),
    (r"\basync for ", "for "),
    (r"\bawait ", ""),
    (r"__aenter__", "__enter__"),
    (r"__aexit__", "__exit__"),
    (r"\.aclose\(\)", ".close()"),
    (r"\bAsynchronous client\b", "Synchronous client"),
    (r"\basynchronous\b", "synchronous"),
]


def generate() -> str:
    """Return the formatted source of the sync client."""
    text = SOURCE.read_text()
    for pattern, replacement in REPLACEMENTS:
        text = re.sub(pattern, replacement, text, flags=re.DOTALL)
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(TARGET), "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return formatted.stdout


def main() -> int:
    TARGET.write_text(generate())
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
