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
    def __init__(self, name, port=None, *, vllm_version=None):
        self.name, self.vllm_version = name, vllm_version or fixture_pins.VLLM_VERSION
        self.label = name if vllm_version is None else "%s@%s" % (name, vllm_version)
        self.port = port or 1000 + len(self.label)
        self.model, self.api_key = FIXTURES[name].served_model_name, FIXTURES[name].api_key
        self.base_url = "http://fake:%d" % self.port
        self.log_path, self.start_seconds, self.running = None, 0.0, False
    def start(self, timeout=None):
        if os.environ.get("FAIL_START") == self.label:
            raise launcher.FixtureStartError(
                "fixture %r died\\n--- last lines ---\\nBOOM in the log" % self.label
            )
        log("start", self.label)
        self.running = True
        return self
    def launch(self):
        log("launch", self.label)
        self.running = True
        return self
    def wait_ready(self, timeout=None):
        if os.environ.get("FAIL_START") == self.label:
            raise launcher.FixtureStartError("fixture %r died while launched ahead" % self.label)
        log("ready", self.label)
        return self
    def stop(self):
        log("stop", self.label)
        self.running = False
    def rss_mib(self):
        return 0.0

launcher.FixtureServer = FakeServer
os.environ["VLLM_TASKS_FIXTURES_FORK"] = "0"  # fake servers are not forked from a zygote
_real_setup_missing = fixture_pins.setup_missing
def _setup_missing(fixtures=None, version=None):
    # SETUP_MISSING=1: nothing is built; SETUP_MISSING=<version>: only that version's venv is missing
    missing = os.environ.get("SETUP_MISSING")
    if missing == "1" or (missing and missing == version):
        return _real_setup_missing(fixtures, version=version)
    return []
fixture_pins.setup_missing = _setup_missing
pytest_plugins = ["pytest_plugin"]
"""

RECORD = """
import pytest, json, os
@pytest.fixture
def record():
    def _record(name):
        with open(os.environ["EVENTS_FILE"], "a") as f:
            f.write(json.dumps(["run", name]) + "\\n")
    return _record
"""

TESTS = (
    """
def test_a(vllm_rerank, record): record("a")
def test_b(record): record("b")
def test_c(vllm_embed, record): record("c")
def test_d(vllm_rerank, record): record("d")
def test_e(vllm_embed, record): assert vllm_embed.model == "minilm"; record("e")
def test_f(vllm_api_key, record): assert vllm_api_key.api_key; record("f")
"""
    + RECORD
)

#: The version matrix: matrix_server params, and a plain fixture whose version follows
#: VLLM_TASKS_FIXTURE_VLLM.
MATRIX_TESTS = (
    """
import os
import pytest

@pytest.mark.parametrize("matrix_server", [("embed", "0.16.0"), ("embed", "0.32.0")], indirect=True)
def test_m1(matrix_server, record):
    assert matrix_server.model == "minilm"
    record("m1-" + matrix_server.vllm_version)

def test_plain(vllm_embed, record):
    assert vllm_embed.vllm_version == os.environ.get("VLLM_TASKS_FIXTURE_VLLM", "0.32.0")
    record("plain")

@pytest.mark.parametrize("matrix_server", [("embed", "0.16.0")], indirect=True)
def test_m2(matrix_server, record):
    record("m2-" + matrix_server.vllm_version)
"""
    + RECORD
)


def _run(
    tmp_path: Path, tests: str = TESTS, **env: str
) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    (tmp_path / "conftest.py").write_text(CONFTEST.format(server_fixtures=str(SERVER_FIXTURES)))
    (tmp_path / "test_sched.py").write_text(textwrap.dedent(tests))
    events = tmp_path / "events.jsonl"
    inherited = (
        "CI",
        "VLLM_TASKS_REQUIRE_FIXTURES",
        "VLLM_TASKS_MATRIX",
        "VLLM_TASKS_FIXTURE_VLLM",
        "VLLM_TASKS_FIXTURES_AHEAD",
    )
    clean = {k: v for k, v in os.environ.items() if k not in inherited}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-q", str(tmp_path)],
        cwd=tmp_path,
        # Only the plugin under test and this conftest: the installed plugins' imports (hypothesis,
        # langsmith, ...) would be most of each inner run's time.
        env={**clean, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "EVENTS_FILE": str(events), **env},
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


def test_the_next_server_boots_beside_the_current_group(tmp_path: Path) -> None:
    """VLLM_TASKS_FIXTURES_AHEAD=1: once a server is ready, the next group's server is launched; its first
    test waits for it. Two servers at most; each still stops after its last test."""
    proc, events = _run(tmp_path, VLLM_TASKS_FIXTURES_AHEAD="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert events == [
        ["run", "b"],
        ["start", "rerank"],
        ["launch", "embed"],
        ["run", "a"],
        ["run", "d"],
        ["stop", "rerank"],
        ["ready", "embed"],
        ["launch", "api-key"],
        ["run", "c"],
        ["run", "e"],
        ["stop", "embed"],
        ["ready", "api-key"],
        ["run", "f"],
        ["stop", "api-key"],
    ]
    assert "embed: ready in" in proc.stdout and "(launched ahead; the tests waited" in proc.stdout


def test_a_server_launched_ahead_that_dies_fails_its_tests(tmp_path: Path) -> None:
    proc, events = _run(tmp_path, VLLM_TASKS_FIXTURES_AHEAD="1", FAIL_START="embed")
    assert proc.returncode == 1
    assert "2 errors" in proc.stdout and "died while launched ahead" in proc.stdout
    assert ["run", "c"] not in events and ["run", "f"] in events


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


def test_matrix_servers_start_once_per_version(tmp_path: Path) -> None:
    proc, events = _run(tmp_path, MATRIX_TESTS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert events == [
        ["start", "embed@0.16.0"],
        ["run", "m1-0.16.0"],
        ["run", "m2-0.16.0"],
        ["stop", "embed@0.16.0"],
        ["start", "embed"],
        ["run", "m1-0.32.0"],
        ["run", "plain"],
        ["stop", "embed"],
    ]


def test_fixture_vllm_moves_the_plain_fixtures_to_that_version(tmp_path: Path) -> None:
    proc, events = _run(tmp_path, MATRIX_TESTS, VLLM_TASKS_FIXTURE_VLLM="0.16.0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert events == [
        ["start", "embed@0.16.0"],
        ["run", "m1-0.16.0"],
        ["run", "plain"],
        ["run", "m2-0.16.0"],
        ["stop", "embed@0.16.0"],
        ["start", "embed"],
        ["run", "m1-0.32.0"],
        ["stop", "embed"],
    ]


def test_missing_matrix_venv_fails_in_ci_only_when_selected(tmp_path: Path) -> None:
    cache = str(tmp_path / "none")
    proc, events = _run(
        tmp_path, MATRIX_TESTS, SETUP_MISSING="0.16.0", VLLM_TASKS_FIXTURE_CACHE=cache, CI="true"
    )
    assert proc.returncode == 1
    assert "2 errors" in proc.stdout and "server-fixtures/setup --vllm 0.16.0" in proc.stdout, proc.stdout
    assert ["run", "m1-0.32.0"] in events and ["run", "plain"] in events

    proc, events = _run(
        tmp_path,
        MATRIX_TESTS,
        SETUP_MISSING="0.16.0",
        VLLM_TASKS_FIXTURE_CACHE=cache,
        CI="true",
        VLLM_TASKS_MATRIX="0.32.0",
    )
    assert proc.returncode == 0, proc.stdout
    assert "2 skipped" in proc.stdout and "server-fixtures/setup --vllm 0.16.0" in proc.stdout


def test_one_server_at_a_time_and_restart_on_the_same_port(tmp_path: Path) -> None:
    tests = (
        """
def test_both(vllm_embed, vllm_rerank, record): record("both")
def test_rerank(vllm_rerank, record): record("rerank")
def test_embed(vllm_embed, record):
    assert vllm_embed.base_url == "http://fake:1005"  # the port it first had
    record("embed")

import pytest
@pytest.mark.parametrize("matrix_server", [("embed", "9.9.9"), "embed"], indirect=True)
def test_bad_param(matrix_server): pass
"""
        + RECORD
    )
    proc, events = _run(tmp_path, tests)
    assert proc.returncode == 1
    assert "2 errors" in proc.stdout, proc.stdout
    assert (
        "unknown vLLM version '9.9.9'" in proc.stdout and "needs (fixture name, vLLM version)" in proc.stdout
    )
    assert events == [
        ["start", "embed"],
        ["start", "rerank"],
        ["run", "both"],
        ["stop", "embed"],  # not needed by the next test
        ["run", "rerank"],
        ["stop", "rerank"],
        ["start", "embed"],  # again, on its old port (the session fixture value still names it)
        ["run", "embed"],
        ["stop", "embed"],
    ]
