"""Fixtures for the integration tests: real proxies in front of the real `embed` vLLM server.

``proxied_embed`` (module scope) puts, in front of the ONE `embed` server the other embed tests use
(``vllm_embed``; requesting it groups these tests with them, so no second vLLM server starts):

- ``.nginx``: a real nginx (server-fixtures/nginx_proxy.py) with one server block per deployment case
  (``.nginx.url("plain" | "small_body" | "auth" | "redirect" | "redirect_route" | "gateway" |
  "maintenance")``);
- ``.gateway``: the FaultProxy that nginx's ``gateway`` block proxies to (delay it for nginx's 504, stop it
  for nginx's 502);
- ``.faults``: a FaultProxy directly in front of vLLM (resets, trickles, truncated bodies).

``proxies`` (function scope) is the same object with both fault proxies reset and listening.
nginx missing: the tests skip, or fail under CI / VLLM_TASKS_REQUIRE_FIXTURES=1 (server-fixtures/setup
installs it).

``@pytest.mark.pipeline_stage(n)``: a test whose input is what a stage-(n-1) test on another server left
(tests/integration/test_rag_pipeline.py). The server plugin runs the tests of one server together, its
groups in order of first appearance across the whole session, so a module's own order is not enough
(in a full run the `embed` group comes first). After the plugin has grouped the tests, the groups that
hold stage tests are put in stage order among the positions they already had; every other group keeps
its place, and each group stays together (one server at a time).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from fault_proxy import FaultProxy
from nginx_proxy import NginxProxy, NginxStartError, nginx_binary
from pytest_plugin import _servers_needed, missing_component


@dataclasses.dataclass
class ProxiedEmbed:
    """The `embed` server and the proxies in front of it."""

    server: Any  # pytest_plugin.VLLMServer
    nginx: NginxProxy
    gateway: FaultProxy
    faults: FaultProxy


@pytest.fixture(scope="module")
def proxied_embed(vllm_embed: Any) -> Iterator[ProxiedEmbed]:
    """nginx and two fault proxies in front of the `embed` server (see the module doc)."""
    if nginx_binary() is None:
        missing_component(
            "nginx is not installed: run server-fixtures/setup as root (apt-get install nginx-light)"
        )
    parts = urlsplit(vllm_embed.base_url)
    upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
    gateway = FaultProxy(*upstream).start()
    faults = FaultProxy(*upstream).start()
    nginx = NginxProxy(upstream, (gateway.host, gateway.port))
    try:
        nginx.start()
    except NginxStartError as error:
        gateway.close()
        faults.close()
        pytest.fail(str(error), pytrace=False)
    try:
        yield ProxiedEmbed(vllm_embed, nginx, gateway, faults)
    finally:
        nginx.stop()
        gateway.close()
        faults.close()


@pytest.fixture
def proxies(proxied_embed: ProxiedEmbed) -> ProxiedEmbed:
    """``proxied_embed`` with both fault proxies listening, their plans and request logs cleared."""
    for proxy in (proxied_embed.gateway, proxied_embed.faults):
        proxy.reset()
        proxy.start()
    return proxied_embed


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "pipeline_stage(n): runs after the stage-(n-1) tests of other servers (see conftest.py)"
    )


def _stage(item: pytest.Item) -> int | None:
    marker = item.get_closest_marker("pipeline_stage")
    return int(marker.args[0]) if marker is not None else None


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> Iterator[None]:
    yield  # the server plugin (trylast) has grouped the items by server
    groups: list[list[pytest.Item]] = []
    for item in items:
        if groups and _servers_needed(groups[-1][0]) == _servers_needed(item):
            groups[-1].append(item)
        else:
            groups.append([item])
    stages: dict[int, int] = {}
    for index, group in enumerate(groups):
        numbers = [n for n in map(_stage, group) if n is not None]
        if numbers:
            stages[index] = min(numbers)
    slots = sorted(stages)
    in_stage_order = [groups[index] for index in sorted(slots, key=stages.__getitem__)]
    for slot, group in zip(slots, in_stage_order, strict=True):
        groups[slot] = group
    items[:] = [item for group in groups for item in group]
