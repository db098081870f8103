"""A fork server for the CPU vLLM fixtures: import vLLM once, then fork one API server per request.

Importing vLLM (torch, transformers, vLLM's config and engine modules) costs about 7 s of CPU, half a tiny
fixture's start. ``launcher.Zygote`` runs this script once per distinct server environment with the
fixture venv's python; each server of that environment is then a fork that skips the import.

Protocol, one JSON object per line: the launcher writes ``{"argv": [...], "log": PATH, "exit": PATH}`` on
stdin; the zygote answers ``{"pid": N}`` on stdout once the child leads its own session (its pid is its
process group, which the launcher signals as it signals a ``group_guard.py`` group). The child's output
goes to ``log``; when it ends, its exit status is written to ``exit``. On SIGTERM, SIGHUP or the end of
stdin (the launcher is gone) the zygote kills every child's group and exits; a child whose zygote
disappears (even by SIGKILL) kills its own group.

Standard library plus the fixture venv's vLLM; never imported by the SDK or the tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable

children: dict[int, str] = {}  # pid -> file that receives its exit status


def _record_exits(signum: int, frame: object) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        path = children.pop(pid, None)
        if path is not None:
            with open(path, "w") as f:
                f.write(f"{os.waitstatus_to_exitcode(status)}\n")


def _kill_children_and_exit(signum: int = 0, frame: object = None) -> None:
    for pid in list(children):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    os._exit(0)


def _watch_zygote(zygote: int) -> None:
    while os.getppid() == zygote:
        time.sleep(1.0)
    os.killpg(0, signal.SIGKILL)


def _serve_in_child(request: dict[str, object], serve: Callable[[], object], ready_fd: int) -> None:
    """The forked child: own session, output to the log, then vLLM's API server with ``argv``."""
    code = 1
    try:
        zygote = os.getppid()
        os.setsid()
        os.write(ready_fd, b"x")
        os.close(ready_fd)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        log = os.open(str(request["log"]), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        threading.Thread(target=_watch_zygote, args=(zygote,), daemon=True).start()
        sys.argv = [str(a) for a in request["argv"]]  # type: ignore[attr-defined]
        serve()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def main() -> int:
    from vllm.entrypoints.launchers.api_server.entry import main as serve  # the import every fork skips

    signal.signal(signal.SIGCHLD, _record_exits)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _kill_children_and_exit)
    for line in sys.stdin:
        request = json.loads(line)
        ready_read, ready_write = os.pipe()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # an early exit is recorded too
        pid = os.fork()
        if pid == 0:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            os.close(ready_read)
            _serve_in_child(request, serve, ready_write)
        os.close(ready_write)
        children[pid] = str(request["exit"])
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        os.read(ready_read, 1)  # the child leads its own session: its pid is a process group now
        os.close(ready_read)
        sys.stdout.write(json.dumps({"pid": pid}) + "\n")
        sys.stdout.flush()
    _kill_children_and_exit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
