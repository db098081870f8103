"""The version matrix (server-fixtures/, docs/fixtures.md): on every vLLM version $VLLM_TASKS_MATRIX selects
(default: today's and 0.16.0), the `embed` and `rerank` fixtures start, answer /health, and report that
version through the SDK."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fixture_pins import selected_matrix_versions

import vllm_tasks as vt

pytestmark = pytest.mark.contract

SERVERS = [(name, version) for version in selected_matrix_versions() for name in ("embed", "rerank")]


@pytest.mark.parametrize("matrix_server", SERVERS, indirect=True, ids=[f"{n}-{v}" for n, v in SERVERS])
def test_health_and_version(matrix_server: Any) -> None:
    assert httpx.get(matrix_server.base_url + "/health", timeout=30).status_code == 200
    with vt.Client(matrix_server.base_url) as client:
        info = client.server_info()
        assert info.version == matrix_server.vllm_version
        assert info.default_model == matrix_server.model
