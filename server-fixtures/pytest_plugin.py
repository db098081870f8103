"""pytest plugin: real CPU vLLM servers as session fixtures.

Registered from tests/conftest.py (``pytest_plugins = ["pytest_plugin"]`` after putting server-fixtures/
on sys.path). Fixtures, one per entry of fixture_table.FIXTURES (``vllm_`` + the name, ``-`` -> ``_``):

    vllm_embed, vllm_embed_mrl, vllm_rerank, vllm_api_key, vllm_late_interaction, vllm_ocr,
    vllm_ocr_no_processor, vllm_stt   ->  VLLMServer(name, base_url, model, api_key, log_path)

Behaviour:
- A server starts on first use (the first test that requests its fixture, directly or through another
  fixture) and is stopped right after the last collected test that needs it, so only one server runs at
  a time. Tests are reordered so that tests needing the same server(s) run together; tests that need no
  server keep their order and run first.
- A server that cannot start makes every test that needs it ERROR with the server's log tail.
- If setup was never run, tests that need a server are skipped with the reason -- unless
  VLLM_TASKS_REQUIRE_FIXTURES=1 or CI=true, where they fail instead.
- Markers: ``integration`` (tests against real servers) and ``gpu`` (skipped unless nvidia-smi exists).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fixture_pins
import launcher
from fixture_table import FIXTURES
from gpu_recipes import have_gpu

#: pytest fixture name -> fixture_table.FIXTURES name
FIXTURE_NAMES: dict[str, str] = {"vllm_" + name.replace("-", "_"): name for name in FIXTURES}


@dataclasses.dataclass(frozen=True)
class VLLMServer:
    """What a test gets: where the server is and how to call it."""

    name: str
    base_url: str
    model: str
    api_key: str | None
    log_path: str | None = None


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no", "off")


def _must_run() -> bool:
    return _truthy(os.environ.get("VLLM_TASKS_REQUIRE_FIXTURES")) or _truthy(os.environ.get("CI"))


class _Manager:
    """Starts servers on demand, remembers failures, stops each one after its last test."""

    def __init__(self) -> None:
        self.servers: dict[str, launcher.FixtureServer] = {}
        self.failures: dict[str, str] = {}
        self.skip_reason: str | None = None
        self.last_use: dict[str, int] = {}  # fixture name -> index of the last item that needs it
        self.index: dict[int, int] = {}  # id(item) -> position in session.items
        self.report: list[str] = []

    def acquire(self, name: str) -> VLLMServer:
        if name in self.failures:
            pytest.fail(self.failures[name], pytrace=False)
        missing = fixture_pins.setup_missing([name])
        if missing:
            why = (
                f"vLLM fixture {name!r} unavailable: server-fixtures/setup has not been run "
                f"(missing: {'; '.join(missing)})"
            )
            if _must_run():
                self.failures[name] = why + " -- required here (CI or VLLM_TASKS_REQUIRE_FIXTURES is set)."
                pytest.fail(self.failures[name], pytrace=False)
            self.skip_reason = why
            pytest.skip(why + "; set VLLM_TASKS_REQUIRE_FIXTURES=1 to make this an error")
        srv = self.servers.get(name)
        if srv is None or not srv.running:
            srv = launcher.FixtureServer(name)
            try:
                srv.start()
            except launcher.FixtureStartError as e:
                self.failures[name] = str(e)
                pytest.fail(str(e), pytrace=False)
            self.servers[name] = srv
            self.report.append(f"{name}: ready in {srv.start_seconds:.1f} s, RSS {srv.rss_mib():.0f} MiB")
        return VLLMServer(
            name=name,
            base_url=srv.base_url,
            model=srv.model or "",
            api_key=srv.api_key,
            log_path=str(srv.log_path) if srv.log_path else None,
        )

    def stop(self, name: str) -> None:
        srv = self.servers.pop(name, None)
        if srv is not None:
            t0 = time.monotonic()
            rss = srv.rss_mib()
            srv.stop()
            self.report.append(
                f"{name}: stopped in {time.monotonic() - t0:.1f} s (RSS before stop {rss:.0f} MiB)"
            )

    def stop_all(self) -> None:
        for name in list(self.servers):
            self.stop(name)


_manager = _Manager()


def _servers_needed(item: pytest.Item) -> tuple[str, ...]:
    names = getattr(item, "fixturenames", ())
    return tuple(FIXTURE_NAMES[f] for f in FIXTURE_NAMES if f in names)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: test against real vLLM servers (server-fixtures/)")
    config.addinivalue_line("markers", "gpu: needs a GPU host with vllm and the model hub; skipped otherwise")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    # Group tests by the set of servers they need (stable; server-less tests first, in their order).
    groups: dict[tuple[str, ...], list[pytest.Item]] = {}
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


def pytest_collection_finish(session: pytest.Session) -> None:
    _manager.index = {id(item): i for i, item in enumerate(session.items)}
    _manager.last_use = {}
    for i, item in enumerate(session.items):
        for name in _servers_needed(item):
            _manager.last_use[name] = i


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    i = _manager.index.get(id(item))
    for name in list(_manager.servers):
        last = _manager.last_use.get(name, -1)
        if nextitem is None or i is None or i >= last:
            _manager.stop(name)


def pytest_sessionfinish(session: pytest.Session) -> None:
    _manager.stop_all()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    lines = list(_manager.report)
    if _manager.skip_reason:
        lines.append("SKIPPED integration tests: " + _manager.skip_reason)
    if lines:
        terminalreporter.section("vLLM fixture servers")
        for line in lines:
            terminalreporter.write_line(line)


def _make_fixture(fixture_name: str, name: str):
    @pytest.fixture(scope="session", name=fixture_name)
    def _fixture() -> VLLMServer:
        return _manager.acquire(name)

    _fixture.__doc__ = f"The `{name}` CPU vLLM server ({FIXTURES[name].description}); started on first use."
    return _fixture


for _fixture_name, _name in FIXTURE_NAMES.items():
    globals()[_fixture_name] = _make_fixture(_fixture_name, _name)
