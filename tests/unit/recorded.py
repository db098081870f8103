"""Replay responses recorded from real vLLM CPU servers (tests/recorded/, by server-fixtures/record.py).

Example:
    mock_server(httpx_mock, "embed")                      # /version, /v1/models, /openapi.json of the fixture
    add_recorded(httpx_mock, "embed", "embeddings_float")  # one recorded exchange, replayed for its path
"""

from __future__ import annotations

import base64
import json
from functools import cache
from pathlib import Path
from typing import Any

import httpx
from pytest_httpx import HTTPXMock

from .conftest import BASE

RECORDED = Path(__file__).resolve().parent.parent / "recorded"
_DROP = {"content-length", "content-encoding", "transfer-encoding", "date", "server"}


@cache
def exchange(fixture: str, name: str) -> dict[str, Any]:
    """The recorded exchange ``tests/recorded/<fixture>/<name>.json``."""
    data: dict[str, Any] = json.loads((RECORDED / fixture / f"{name}.json").read_text())
    return data


def recorded_response(fixture: str, name: str) -> httpx.Response:
    """An ``httpx.Response`` with the recorded status, headers and body."""
    response = exchange(fixture, name)["response"]
    if response.get("body_b64") is not None:
        content = base64.b64decode(response["body_b64"])
    else:
        content = (response.get("body_text") or "").encode()
    headers = {k: v for k, v in response["headers"].items() if k.lower() not in _DROP}
    return httpx.Response(response["status"], headers=headers, content=content)


def add_recorded(
    httpx_mock: HTTPXMock, fixture: str, name: str, *, reusable: bool = False, **match: Any
) -> None:
    """Register a recorded exchange to answer the next request to its method and path."""
    request = exchange(fixture, name)["request"]
    response = recorded_response(fixture, name)
    httpx_mock.add_response(
        url=BASE + request["path"],
        method=request["method"],
        status_code=response.status_code,
        headers=dict(response.headers),
        content=response.content,
        is_reusable=reusable,
        **match,
    )


def mock_server(httpx_mock: HTTPXMock, fixture: str, *, version: str | None = None) -> None:
    """Answer discovery (/version, /v1/models, /openapi.json) as the recorded fixture did.

    ``version`` overrides the recorded version, to replay the same bodies as an older server.
    """
    if version is None:
        add_recorded(httpx_mock, fixture, "version")
    else:
        httpx_mock.add_response(url=f"{BASE}/version", json={"version": version})
    add_recorded(httpx_mock, fixture, "models")
    if (RECORDED / fixture / "openapi.json").exists():
        add_recorded(httpx_mock, fixture, "openapi")
    else:
        httpx_mock.add_response(url=f"{BASE}/openapi.json", status_code=404, json={"detail": "Not Found"})


def recorded_json(fixture: str, name: str) -> Any:
    """The recorded response body parsed as JSON."""
    return json.loads(exchange(fixture, name)["response"]["body_text"])
