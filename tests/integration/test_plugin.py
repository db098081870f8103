"""The pytest plugin's scheduling, with fake servers (no vLLM): tests are grouped by server, each server
starts on first use and stops after its last test, a start failure fails the tests with the log tail, and
a missing setup skips (or fails under CI). Each case runs pytest in a subprocess (a few seconds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

SERVER_FIXTURES = Path(__file__).resolve().parents[2] / "server-fixtures"

CONFTEST = """
import json, os, sys
sys.path.insert(0, {server_fixtures!r})
import fixture_pins
import launcher
from fixture_table import FIXTURES

EVENTS = os.environ["EVENTS_FILE"]

def log(*event):
    with open(EVENTS, "a") as f:
        f.write(json.dumps(event) + "\\n")

class FakeServer:
    def __init__(self, name, port=None):
        self.name, self.port = name, 1000 + len(name)
        self.model, self.api_key = FIXTURES[name].served_model_name, FIXTURES[name].api_key
        self.base_url = "http://fake:%d" % self.port
        self.log_path, self.start_seconds, self.running = None, 0.0, False
    def start(self, timeout=None):
        if os.environ.get("FAIL_START") == self.name:
            raise launcher.FixtureStartError(
                "fixture %r died\\n--- last lines ---\\nBOOM in the log" % self.name
            )
        log("start", self.name)
        self.running = True
        return self
    def stop(self):
        log("stop", self.name)
        self.running = False
    def rss_mib(self):
        return 0.0

launcher.FixtureServer = FakeServer
if not os.environ.get("SETUP_MISSING"):
    fixture_pins.setup_missing = lambda fixtures=None: []
pytest_plugins = ["pytest_plugin"]
"""

TESTS = """
def test_a(vllm_rerank, record): record("a")
def test_b(record): record("b")
def test_c(vllm_embed, record): record("c")
def test_d(vllm_rerank, record): record("d")
def test_e(vllm_embed, record): assert vllm_embed.model == "minilm"; record("e")
def test_f(vllm_api_key, record): assert vllm_api_key.api_key; record("f")

import pytest, json, os
@pytest.fixture
def record():
    def _record(name):
        with open(os.environ["EVENTS_FILE"], "a") as f:
            f.write(json.dumps(["run", name]) + "\\n")
    return _record
"""


def _run(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    (tmp_path / "conftest.py").write_text(CONFTEST.format(server_fixtures=str(SERVER_FIXTURES)))
    (tmp_path / "test_sched.py").write_text(textwrap.dedent(TESTS))
    events = tmp_path / "events.jsonl"
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "VLLM_TASKS_REQUIRE_FIXTURES")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-q", str(tmp_path)],
        cwd=tmp_path,
        env={**clean, "EVENTS_FILE": str(events), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = events.read_text().splitlines() if events.exists() else []
    return proc, [json.loads(line) for line in lines]


def test_grouping_and_stop_after_last_use(tmp_path: Path) -> None:
    proc, events = _run(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert events == [
        ["run", "b"],
        ["start", "rerank"],
        ["run", "a"],
        ["run", "d"],
        ["stop", "rerank"],
        ["start", "embed"],
        ["run", "c"],
        ["run", "e"],
        ["stop", "embed"],
        ["start", "api-key"],
        ["run", "f"],
        ["stop", "api-key"],
    ]


def test_start_failure_fails_the_tests_with_the_log_tail(tmp_path: Path) -> None:
    proc, events = _run(tmp_path, FAIL_START="embed")
    assert proc.returncode == 1
    assert "2 errors" in proc.stdout, proc.stdout
    assert "BOOM in the log" in proc.stdout
    assert ["start", "embed"] not in events
    assert ["run", "f"] in events  # other servers still run


def test_missing_setup_skips_with_reason_outside_ci(tmp_path: Path) -> None:
    proc, events = _run(tmp_path, SETUP_MISSING="1", VLLM_TASKS_FIXTURE_CACHE=str(tmp_path / "none"))
    assert proc.returncode == 0, proc.stdout
    assert "5 skipped" in proc.stdout and "server-fixtures/setup has not been run" in proc.stdout
    assert events == [["run", "b"]]


def test_missing_setup_fails_in_ci(tmp_path: Path) -> None:
    proc, _ = _run(tmp_path, SETUP_MISSING="1", VLLM_TASKS_FIXTURE_CACHE=str(tmp_path / "none"), CI="true")
    assert proc.returncode == 1
    assert "5 errors" in proc.stdout and "required here" in proc.stdout
