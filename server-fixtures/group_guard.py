"""Process-group guard for a fixture server: ``python group_guard.py CMD [ARG ...]``.

The launcher (launcher.Server) starts this guard as the leader of a new process group, with
PR_SET_PDEATHSIG=SIGTERM, and the guard runs CMD (the vLLM server) in the same group. On SIGTERM, SIGINT
or SIGHUP -- sent by the launcher's stop(), or by the kernel because the launcher died, even by SIGKILL
-- the guard terminates the whole group: SIGTERM, then SIGKILL after a grace period. vLLM itself ignores
a SIGTERM to its API process alone while the engine is starting, which is why the group is signalled.
When CMD exits on its own, the guard kills what is left of the group and exits with CMD's status.
Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

GRACE_SECONDS = 10.0


def _kill_group_and_exit(code: int) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the guard survives its own group SIGTERM
    pgid = os.getpgid(0)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    while time.monotonic() < deadline and _others_alive(pgid):
        _reap()
        time.sleep(0.1)
    if _others_alive(pgid):
        for pid in _members(pgid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    _reap()
    os._exit(code)


def _members(pgid: int) -> list[int]:
    me = os.getpid()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2 :].split()
        if int(rest[2]) == pgid and rest[0] != "Z":
            out.append(int(entry))
    return out


def _others_alive(pgid: int) -> bool:
    return bool(_members(pgid))


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: group_guard.py CMD [ARG ...]", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: _kill_group_and_exit(128 + signum))
    try:
        child = subprocess.Popen(argv)
    except OSError as e:
        print(f"group_guard: cannot run {argv[0]!r}: {e}", file=sys.stderr, flush=True)
        return 127
    code = child.wait()
    _kill_group_and_exit(code if code >= 0 else 128 - code)
    return code  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
