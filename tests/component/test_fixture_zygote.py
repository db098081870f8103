"""The fixtures' fork server (server-fixtures/zygote.py) with a stand-in for vLLM's API server entry point:
a forked server answers, stops without leaving a process, reports its own exit status, and goes down
with its zygote even when the zygote is killed outright. No vLLM: the stand-in serves ``/health``."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVER_FIXTURES = Path(__file__).resolve().parents[2] / "server-fixtures"
sys.path.insert(0, str(SERVER_FIXTURES))

import launcher  # noqa: E402

ENTRY = """
import http.server, os, sys

def main():
    args = sys.argv[1:]
    if "--exit" in args:
        raise SystemExit(int(args[args.index("--exit") + 1]))
    port = int(args[args.index("--port") + 1])

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(str(os.getpid()).encode())

        def log_message(self, *args):
            pass

    http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


@pytest.fixture
def zygote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[launcher.Zygote]:
    """A zygote whose ``vllm.entrypoints.launchers.api_server.entry`` is the stand-in above."""
    package = tmp_path / "standin" / "vllm" / "entrypoints" / "launchers" / "api_server"
    package.mkdir(parents=True)
    for folder in (package, *package.parents[:3]):
        (folder / "__init__.py").touch()
    (package / "entry.py").write_text(textwrap.dedent(ENTRY))
    monkeypatch.setenv("VLLM_TASKS_FIXTURE_CACHE", str(tmp_path / "cache"))
    z = launcher.Zygote(sys.executable, {"PYTHONPATH": str(tmp_path / "standin")})
    yield z
    z.stop()


def _server(zygote: launcher.Zygote, *args: str) -> launcher.Server:
    port = launcher.free_port()
    srv = launcher.Server(
        "standin", [sys.executable, "-m", launcher.VLLM_API_SERVER, "--port", str(port), *args], port=port
    )
    srv.zygote = zygote
    return srv


def _gone(pid: int, within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not launcher._group_alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_two_forked_servers_answer_and_stop_without_leftovers(zygote: launcher.Zygote) -> None:
    first, second = _server(zygote), _server(zygote)
    first.launch()
    second.launch()  # asked for before the first pid is read: answers arrive in order
    first.wait_ready(timeout=30)
    second.wait_ready(timeout=30)
    pids = [first.proc.pid, second.proc.pid]  # type: ignore[union-attr]
    assert len(set(pids)) == 2 and os.getpid() not in pids
    assert all(os.getpgid(pid) == pid for pid in pids)  # each leads its own process group
    first.stop()
    assert _gone(pids[0]) and launcher._group_alive(pids[1])
    second.stop()
    assert _gone(pids[1])


def test_a_server_that_exits_reports_its_status(zygote: launcher.Zygote) -> None:
    srv = _server(zygote, "--exit", "3")
    srv.launch()
    with pytest.raises(launcher.FixtureStartError, match="exited with code 3"):
        srv.wait_ready(timeout=30)


def test_servers_go_down_with_a_killed_zygote(zygote: launcher.Zygote) -> None:
    srv = _server(zygote)
    srv.start(timeout=30)
    pid = srv.proc.pid  # type: ignore[union-attr]
    os.kill(zygote.proc.pid, signal.SIGKILL)
    assert _gone(pid), "a forked server outlived its zygote"
    srv.stop()
