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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from fault_proxy import FaultProxy
from nginx_proxy import NginxProxy, NginxStartError, nginx_binary
from pytest_plugin import missing_component


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
