"""scripts/test.sh's exit status is its tests' status: the clean-up it runs on exit (stopping the
background tiers, which have usually ended by then) must not turn a passing run into a failing one."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "scripts" / "test.sh"


def exit_trap() -> str:
    (command,) = re.findall(r"^\s*trap '(.*)' EXIT$", SCRIPT.read_text(), flags=re.MULTILINE)
    return command


def test_the_exit_trap_keeps_a_passing_runs_status_with_nothing_left_to_stop() -> None:
    # the background job and its children have ended: pkill and kill find nothing
    shell = f"set -euo pipefail; fast_pid=999999999; trap '{exit_trap()}' EXIT; exit 0"
    assert subprocess.run(["bash", "-c", shell], check=False).returncode == 0


def test_the_exit_trap_keeps_a_failing_runs_status() -> None:
    shell = f"set -euo pipefail; fast_pid=999999999; trap '{exit_trap()}' EXIT; exit 3"
    assert subprocess.run(["bash", "-c", shell], check=False).returncode == 3
