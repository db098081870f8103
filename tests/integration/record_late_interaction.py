"""Record the late-interaction server's answers into tests/recorded/late-interaction/.

The server is the `late-interaction` fixture of server-fixtures/ (MiniLM with
`--pooler-config '{"task": "token_embed"}'`) and its exchanges live in server-fixtures/record.py; this
script is kept as a shortcut for:

    python3 server-fixtures/record.py late-interaction
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RECORD = Path(__file__).resolve().parents[2] / "server-fixtures" / "record.py"

if __name__ == "__main__":
    sys.exit(subprocess.call([sys.executable, str(RECORD), "late-interaction"]))
