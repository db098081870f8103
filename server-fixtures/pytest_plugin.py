"""pytest plugin: real CPU vLLM servers as session fixtures.

Registered from tests/conftest.py (``pytest_plugins = ["pytest_plugin"]`` after putting server-fixtures/
on sys.path). Fixtures, one per entry of fixture_table.FIXTURES (``vllm_`` + the name, ``-`` -> ``_``):

    vllm_embed, vllm_embed_mrl, vllm_embed_matryoshka, vllm_rerank, vllm_api_key, vllm_late_interaction,
    vllm_listwise, vllm_qwen3_reranker, vllm_qwen3_reranker_no_template, vllm_ocr, vllm_ocr_no_processor,
    vllm_stt
    ->  VLLMServer(name, base_url, model, api_key, log_path, vllm_version)

They run on today's vLLM (fixture_pins.VLLM_VERSION), or on the version in $VLLM_TASKS_FIXTURE_VLLM (one of
fixture_pins.MATRIX_VERSIONS; its venv from ``server-fixtures/setup --vllm VERSION``), so that whole
modules can run against an older server. The version matrix:

    @pytest.mark.parametrize("matrix_server", [("embed", "0.16.0")], indirect=True)
    def test_x(matrix_server): ...       # a started VLLMServer of fixture `embed` on vLLM 0.16.0

Modules parametrize over ``fixture_pins.selected_matrix_versions()`` ($VLLM_TASKS_MATRIX).

Behaviour:
- Servers are keyed by (fixture, vLLM version). A server starts on first use (the first test that needs
  it, directly or through another fixture) and is stopped right after the last collected test that
  needs it. Tests are reordered so that tests needing the same server(s) run together, so each
  (fixture, version) server starts once; tests that need no server keep their order and run first.
- At most one vLLM server runs at a time (unless one test needs two): before each test, running servers
  it does not need are stopped. A server stopped that way before its last test (only when tests need
  overlapping sets of servers) starts again on the same port when a test needs it.
- With VLLM_TASKS_FIXTURES_AHEAD=1 (scripts/test.sh sets it), when a server is ready the next one the
  ordered tests need is launched beside it, so that it boots while the current group runs: two servers at
  most, the second one waited for (and its start counted from its launch) by its first test.
- A server that cannot start makes every test that needs it ERROR with the server's log tail.
- If setup was never run, tests that need a server are skipped with the reason -- unless
  VLLM_TASKS_REQUIRE_FIXTURES=1 or CI=true, where they fail instead. For a matrix server on an older
  version, failing instead of skipping applies only to versions $VLLM_TASKS_MATRIX selects.
- Markers: ``contract`` (tests against real servers; tests/conftest.py also applies it to tests/contract/) and
  ``gpu`` (skipped unless nvidia-smi exists).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NoReturn

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fixture_pins
import launcher
from fixture_table import FIXTURES, version_key
from gpu_recipes import have_gpu

#: pytest fixture name -> fixture_table.FIXTURES name
FIXTURE_NAMES: dict[str, str] = {"vllm_" + name.replace("-", "_"): name for name in FIXTURES}
#: The indirectly parametrized fixture of the version matrix; its param is (fixture name, vLLM version).
MATRIX_FIXTURE = "matrix_server"

#: A server: (fixture name, vLLM version)
Key = tuple[str, str]


@dataclasses.dataclass(frozen=True)
class VLLMServer:
    """What a test gets: where the server is and how to call it."""

    name: str
    base_url: str
    model: str
    api_key: str | None
    log_path: str | None = None
    vllm_version: str = fixture_pins.VLLM_VERSION


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no", "off")


def must_run() -> bool:
    return _truthy(os.environ.get("VLLM_TASKS_REQUIRE_FIXTURES")) or _truthy(os.environ.get("CI"))


def missing_component(why: str) -> NoReturn:
    """A test's component (nginx, a venv) is missing: fail under CI / VLLM_TASKS_REQUIRE_FIXTURES, else
    skip, saying ``why``."""
    if must_run():
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


def _label(key: Key) -> str:
    name, version = key
    return name if fixture_pins.is_default_version(version) else f"{name}@{version}"


def _matrix_key(param: Any) -> Key:
    """Validate a ``matrix_server`` param: (fixture name, vLLM version)."""
    if not (isinstance(param, tuple | list) and len(param) == 2):
        raise ValueError(
            f"matrix_server needs (fixture name, vLLM version) as its param, e.g. ('embed', '0.16.0'); "
            f"got {param!r}"
        )
    name, version = str(param[0]), str(param[1])
    if name not in FIXTURES:
        raise ValueError(f"matrix_server: unknown fixture {name!r}; known: {', '.join(FIXTURES)}")
    return name, fixture_pins.check_version(version)


class _Manager:
    """Starts servers on demand, remembers failures, stops each one after its last test."""

    def __init__(self) -> None:
        self.servers: dict[Key, launcher.FixtureServer] = {}
        self.failures: dict[Key, str] = {}
        self.skip_reason: str | None = None
        self.last_use: dict[Key, int] = {}  # server -> index of the last item that needs it
        self.index: dict[int, int] = {}  # id(item) -> position in session.items
        self.current: tuple[Key, ...] = ()  # servers the running test needs
        self.ports: dict[Key, int] = {}  # a server stopped before its last use restarts on its port
        self.report: list[str] = []
        self.items: list[pytest.Item] = []
        self.position = -1  # the running test's place in items
        self.ahead: Key | None = None  # launched for the next group, not yet waited for
        self.ready_at: dict[Key, float] = {}  # when the tests could first use each running server
        self.zygotes: dict[ZygoteKey, launcher.Zygote] = {}
        self.shared: set[ZygoteKey] = set()  # server environments that two or more of the run's servers share

    def acquire(self, key: Key, *, required: bool | None = None) -> VLLMServer:
        name, version = key
        default = fixture_pins.is_default_version(version)
        if key in self.failures:
            pytest.fail(self.failures[key], pytrace=False)
        if default:
            missing = fixture_pins.setup_missing([name])
        else:
            missing = fixture_pins.setup_missing([name], version=version)
        if missing:
            setup = "server-fixtures/setup" if default else f"server-fixtures/setup --vllm {version}"
            why = (
                f"vLLM fixture {name!r} (vLLM {version}) unavailable: {setup} has not been run "
                f"(missing: {'; '.join(missing)})"
            )
            if must_run() if required is None else required:
                self.failures[key] = why + " -- required here (CI or VLLM_TASKS_REQUIRE_FIXTURES is set)."
                pytest.fail(self.failures[key], pytrace=False)
            self.skip_reason = why
            pytest.skip(why + "; set VLLM_TASKS_REQUIRE_FIXTURES=1 to make this an error")
        srv = self.servers.get(key)
        if key == self.ahead and srv is not None:
            srv = self.wait_ahead(key, srv)
        elif srv is None or not srv.running:
            srv = self.start(key)
        self.launch_ahead()
        return VLLMServer(
            name=name,
            base_url=srv.base_url,
            model=srv.model or "",
            api_key=srv.api_key,
            log_path=str(srv.log_path) if srv.log_path else None,
            vllm_version=version,
        )

    def start(self, key: Key) -> launcher.FixtureServer:
        """Start a server (on its earlier port if it ran before), first stopping every running server
        the current test does not need."""
        for other in list(self.servers):
            if other != key and other not in self.current and other != self.ahead:
                self.stop(other)
        srv = self._server(key)
        try:
            srv.start()
        except launcher.FixtureStartError as e:
            self.failures[key] = str(e)
            pytest.fail(str(e), pytrace=False)
        again = " (again)" if key in self.ports else ""
        self.ready_at[key] = time.monotonic()
        self.servers[key] = srv
        self.ports[key] = srv.port
        self.report.append(
            f"{_label(key)}: ready{again} in {srv.start_seconds:.1f} s, RSS {srv.rss_mib():.0f} MiB"
        )
        return srv

    def _server(self, key: Key) -> launcher.FixtureServer:
        """A server of ``key`` (not started), on the port it had before, if it ran."""
        name, version = key
        port = self.ports.get(key)
        if not fixture_pins.is_default_version(version):
            return launcher.FixtureServer(name, port, vllm_version=version)
        srv = launcher.FixtureServer(name, port)
        zygote_key = _zygote_key(srv) if self.shared else None
        if zygote_key is not None and zygote_key in self.shared:
            if zygote_key not in self.zygotes or not self.zygotes[zygote_key].alive:
                self.zygotes[zygote_key] = launcher.Zygote(srv.command[0], srv.env)
            srv.zygote = self.zygotes[zygote_key]
        return srv

    def plan_zygotes(self, keys: Iterable[Key]) -> None:
        """Fork the servers whose environment two or more of ``keys`` share from one zygote each
        (VLLM_TASKS_FIXTURES_FORK=0: none): they skip importing vLLM. A server alone in its environment
        gains nothing from one."""
        self.shared = set()
        if not _truthy(os.environ.get("VLLM_TASKS_FIXTURES_FORK", "1")):
            return
        seen: set[ZygoteKey] = set()
        for name, version in keys:
            if fixture_pins.is_default_version(version):
                zygote_key = _zygote_key(launcher.FixtureServer(name, 0))
                (self.shared if zygote_key in seen else seen).add(zygote_key)

    def wait_ahead(self, key: Key, srv: launcher.FixtureServer) -> launcher.FixtureServer:
        """Wait for the server launched ahead of its group."""
        self.ahead = None
        t0 = time.monotonic()
        try:
            srv.wait_ready()
        except launcher.FixtureStartError as e:
            self.servers.pop(key, None)
            self.failures[key] = str(e)
            pytest.fail(str(e), pytrace=False)
        self.ready_at[key] = time.monotonic()
        self.report.append(
            f"{_label(key)}: ready in {srv.start_seconds:.1f} s (launched ahead; the tests waited "
            f"{self.ready_at[key] - t0:.1f} s), RSS {srv.rss_mib():.0f} MiB"
        )
        return srv

    def launch_ahead(self) -> None:
        """Launch the server the next group of tests needs (VLLM_TASKS_FIXTURES_AHEAD=1), beside the ready
        one(s) of the current test: it boots while the current group runs."""
        if not _truthy(os.environ.get("VLLM_TASKS_FIXTURES_AHEAD")) or self.ahead is not None:
            return
        if any(key not in self.servers for key in self.current):
            return  # the current test still waits for one of its own
        key = self._next_server()
        if key is None or key in self.servers or key in self.failures:
            return
        name, version = key
        if fixture_pins.setup_missing(
            [name], version=None if fixture_pins.is_default_version(version) else version
        ):
            return  # acquire() reports it
        srv = self._server(key)
        try:
            srv.launch()
        except launcher.FixtureStartError as e:
            self.failures[key] = str(e)
            return
        self.servers[key] = srv
        self.ports[key] = srv.port
        self.ahead = key

    def _next_server(self) -> Key | None:
        """The first server a later test needs that the current test does not."""
        for item in self.items[self.position + 1 :]:
            for key in _servers_needed(item):
                if key not in self.current:
                    return key
        return None

    def before_test(self, item: pytest.Item) -> None:
        """Before each test: stop the running servers it does not need (at most one server at a time),
        and start again, on its old port, a server it needs that was stopped early that way (its session
        fixture value still names that port)."""
        self.current = _servers_needed(item)
        self.position = self.index.get(id(item), -1)
        for key in list(self.servers):
            if key not in self.current and key != self.ahead:
                self.stop(key)
        for key in self.current:
            if key in self.ports and key not in self.servers and key not in self.failures:
                self.start(key)

    def stop(self, key: Key) -> None:
        if key == self.ahead:
            self.ahead = None
        srv = self.servers.pop(key, None)
        if srv is not None:
            t0 = time.monotonic()
            rss = srv.rss_mib()
            srv.stop()
            used = t0 - self.ready_at.pop(key, t0)
            self.report.append(
                f"{_label(key)}: stopped in {time.monotonic() - t0:.1f} s after {used:.1f} s of tests "
                f"(RSS before stop {rss:.0f} MiB)"
            )

    def stop_all(self) -> None:
        for key in list(self.servers):
            self.stop(key)
        for zygote in self.zygotes.values():
            zygote.stop()
        self.zygotes.clear()


ZygoteKey = tuple[str, tuple[tuple[str, str], ...]]


def _zygote_key(srv: launcher.FixtureServer) -> ZygoteKey:
    """Servers started by the same python with the same environment can share a zygote."""
    return srv.command[0], tuple(sorted(srv.env.items()))


_manager = _Manager()


def _servers_needed(item: pytest.Item) -> tuple[Key, ...]:
    names = getattr(item, "fixturenames", ())
    version = fixture_pins.fixture_vllm_version()
    needed = [(FIXTURE_NAMES[f], version) for f in FIXTURE_NAMES if f in names]
    callspec = getattr(item, "callspec", None)
    if MATRIX_FIXTURE in names and callspec is not None and MATRIX_FIXTURE in callspec.params:
        try:
            key = _matrix_key(callspec.params[MATRIX_FIXTURE])
        except ValueError:
            pass  # the fixture reports it when the test runs
        else:
            if key not in needed:
                needed.append(key)
    return tuple(needed)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "contract: test against real vLLM servers (server-fixtures/)")
    config.addinivalue_line("markers", "gpu: needs a GPU host with vllm and the model hub; skipped otherwise")
    config.addinivalue_line(
        "markers",
        "vllm_min(version, why): the test needs fixtures on vLLM >= version; skipped, saying why, when "
        "$VLLM_TASKS_FIXTURE_VLLM starts them on an older release (never in the default run)",
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    # Group tests by the set of servers they need (stable; server-less tests first, in their order).
    groups: dict[tuple[Key, ...], list[pytest.Item]] = {}
    for item in items:
        groups.setdefault(_servers_needed(item), []).append(item)
    ordered = groups.pop((), [])
    for group in groups.values():  # in order of first appearance
        ordered.extend(group)
    items[:] = ordered

    if not have_gpu():
        skip_gpu = pytest.mark.skip(reason="gpu: no GPU on this machine (nvidia-smi not found)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip_gpu)
    _skip_below_fixture_version(items)


def _skip_below_fixture_version(items: list[pytest.Item]) -> None:
    """Skip ``vllm_min`` tests when the normal fixtures run on an older vLLM ($VLLM_TASKS_FIXTURE_VLLM)."""
    version = fixture_pins.fixture_vllm_version()
    for item in items:
        marker = item.get_closest_marker("vllm_min")
        if marker is None:
            continue
        needed, why = marker.args
        if version_key(version) < version_key(needed):
            item.add_marker(
                pytest.mark.skip(
                    reason=f"vllm_min: needs vLLM >= {needed}, the fixtures run on {version}: {why} "
                    "(the older side is tested in tests/contract/test_version_gates.py)"
                )
            )


def pytest_collection_finish(session: pytest.Session) -> None:
    _manager.items = list(session.items)
    _manager.index = {id(item): i for i, item in enumerate(session.items)}
    _manager.last_use = {}
    for i, item in enumerate(session.items):
        for key in _servers_needed(item):
            _manager.last_use[key] = i
    _manager.plan_zygotes(_manager.last_use)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _manager.before_test(item)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    i = _manager.index.get(id(item))
    for key in list(_manager.servers):
        last = _manager.last_use.get(key, -1)
        if nextitem is None or i is None or i >= last:
            _manager.stop(key)
    _manager.current = ()


def pytest_sessionfinish(session: pytest.Session) -> None:
    _manager.stop_all()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    lines = list(_manager.report)
    if _manager.skip_reason:
        lines.append("SKIPPED contract tests: " + _manager.skip_reason)
    if lines:
        terminalreporter.section("vLLM fixture servers")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture
def matrix_server(request: pytest.FixtureRequest) -> VLLMServer:
    """A started server of (fixture, vLLM version), given by indirect parametrization:

        @pytest.mark.parametrize("matrix_server", [("embed", v) for v in selected_matrix_versions()],
                                 indirect=True)

    Reused by every test with the same param and stopped after the last one. An older version whose
    venv is not built skips (``server-fixtures/setup --vllm VERSION``); under CI /
    VLLM_TASKS_REQUIRE_FIXTURES it fails instead, for the versions $VLLM_TASKS_MATRIX selects."""
    param = getattr(request, "param", None)
    try:
        key = _matrix_key(param)
    except ValueError as e:
        pytest.fail(str(e), pytrace=False)
    required = must_run() and key[1] in fixture_pins.selected_matrix_versions()
    return _manager.acquire(key, required=required)


def _make_fixture(fixture_name: str, name: str):
    @pytest.fixture(scope="session", name=fixture_name)
    def _fixture() -> VLLMServer:
        return _manager.acquire((name, fixture_pins.fixture_vllm_version()))

    _fixture.__doc__ = f"The `{name}` CPU vLLM server ({FIXTURES[name].description}); started on first use."
    return _fixture


for _fixture_name, _name in FIXTURE_NAMES.items():
    globals()[_fixture_name] = _make_fixture(_fixture_name, _name)
