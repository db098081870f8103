"""The fake server's HTTP messages: received requests (parsed), replies, and vLLM's error bodies."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from io import BufferedIOBase
from typing import Any
from urllib.parse import parse_qs

import orjson

FormValue = str | list[str]


@dataclass(frozen=True)
class UploadedFile:
    """One file part of a multipart request.

    Attributes:
        filename: the part's file name, when it had one.
        content_type: the part's content type, when it had one.
        content: the file's bytes.
    """

    filename: str | None
    content_type: str | None
    content: bytes


@dataclass(frozen=True)
class ReceivedRequest:
    """One request as the fake server received it, for assertions.

    Attributes:
        method: ``GET``, ``POST``, ...
        path: the path without the query string, e.g. ``/v1/embeddings``.
        query: the query string's parameters.
        headers: header names lower-cased (repeated headers joined with ``", "``).
        body: the raw body.
        json: the parsed JSON body (``None`` when the body is not JSON).
        form: multipart form fields (repeated fields, such as ``timestamp_granularities[]``, as lists).
        files: multipart file parts by field name (``file`` for audio uploads).
        received_at: ``time.monotonic()`` when the request was read.

    Examples:
        >>> request = fake.requests[-1]
        >>> request.path, request.json["input"]
        ('/v1/embeddings', ['hello'])
    """

    method: str
    path: str
    query: dict[str, list[str]] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    json: Any = None
    form: dict[str, FormValue] = field(default_factory=dict)
    files: dict[str, UploadedFile] = field(default_factory=dict)
    received_at: float = 0.0

    @property
    def model(self) -> str | None:
        """The ``model`` the request named (JSON body or form field), or ``None``."""
        value = self.json.get("model") if isinstance(self.json, dict) else self.form.get("model")
        return value if isinstance(value, str) and value else None


def parse_request(
    method: str, target: str, headers: Mapping[str, str], body: bytes, received_at: float
) -> ReceivedRequest:
    """Build a :class:`ReceivedRequest` from what the HTTP handler read (JSON and multipart parsed)."""
    path, _, query = target.partition("?")
    content_type = headers.get("content-type", "")
    parsed: Any = None
    form: dict[str, FormValue] = {}
    files: dict[str, UploadedFile] = {}
    if content_type.startswith("application/json") and body:
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
    elif content_type.startswith("multipart/form-data"):
        form, files = parse_multipart(content_type, body)
    return ReceivedRequest(
        method, path, parse_qs(query), dict(headers), body, parsed, form, files, received_at
    )


def parse_multipart(content_type: str, body: bytes) -> tuple[dict[str, FormValue], dict[str, UploadedFile]]:
    """Split a ``multipart/form-data`` body into form fields and file parts (bytes kept exactly)."""
    boundary = _header_param(content_type, "boundary")
    form: dict[str, FormValue] = {}
    files: dict[str, UploadedFile] = {}
    if not boundary:
        return form, files
    for part in body.split(b"--" + boundary.encode())[1:]:
        if part.startswith(b"--"):
            break
        head, _, content = part.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        content = content.removesuffix(b"\r\n")
        part_headers = _part_headers(head)
        disposition = part_headers.get("content-disposition", "")
        name = _header_param(disposition, "name")
        filename = _header_param(disposition, "filename")
        if name is None:
            continue
        if filename is not None or "content-type" in part_headers:
            files[name] = UploadedFile(filename, part_headers.get("content-type"), content)
            continue
        value = content.decode("utf-8", "replace")
        previous = form.get(name)
        form[name] = value if previous is None else [*_as_list(previous), value]
    return form, files


def _as_list(value: FormValue) -> list[str]:
    return value if isinstance(value, list) else [value]


def _part_headers(head: bytes) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in head.decode("utf-8", "replace").split("\r\n"):
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return headers


def _header_param(header: str, name: str) -> str | None:
    """A parameter of a header value (``boundary=...``, ``name="file"``), unquoted."""
    for item in header.split(";")[1:]:
        key, _, value = item.strip().partition("=")
        if key.lower() == name:
            return value.strip().strip('"')
    return None


# ------------------------------------------------------------------------------------------ replies


@dataclass
class Reply:
    """One answer of the fake server.

    Attributes:
        status: the HTTP status.
        body: the body (ignored when ``stream`` is set).
        headers: extra headers (``content-type`` included).
        stream: pieces sent one by one with chunked transfer encoding (server-sent events).
        upgrade: with status 101, the WebSocket session run on the connection once the headers are sent
            (``upgrade(rfile, wfile)``; a :class:`~vllm_tasks.testing.realtime.RealtimeSession`).
    """

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    stream: Iterable[bytes] | None = None
    upgrade: Callable[[BufferedIOBase, BufferedIOBase], None] | None = None


class Refusal(Exception):
    """Raised by a route handler to answer with an error reply instead (caught by the dispatcher)."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.status)
        self.reply = reply


def json_reply(payload: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Reply:
    """A JSON answer; numpy arrays in ``payload`` are written as float32-shortest numbers (like orjson
    in vLLM 0.33)."""
    body = orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY)
    return Reply(status, body, {"content-type": "application/json", **(headers or {})})


ERROR_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    422: "UnprocessableEntityError",
    500: "InternalServerError",
    # a mounted route whose task is not active: vLLM 0.32's answer in
    # tests/recorded/late-interaction/error_embeddings.json, held by tests/component/test_fake_replay.py
    501: "NotImplementedError",
    503: "ServiceUnavailableError",
}
"""vLLM's ``error.type`` per status; other statuses get their HTTP phrase (e.g. ``TooManyRequests``)."""


def error_type(status: int) -> str:
    """vLLM's ``error.type`` for ``status``."""
    if status in ERROR_TYPES:
        return ERROR_TYPES[status]
    try:
        return HTTPStatus(status).phrase.replace(" ", "").replace("-", "")
    except ValueError:
        return "Error"


def error_reply(status: int, message: str, *, type: str | None = None, param: str | None = None) -> Reply:
    """vLLM's error body ``{"error": {"message", "type", "param", "code"}}``."""
    error = {"message": message, "type": type or error_type(status), "param": param, "code": status}
    return json_reply({"error": error}, status)


def not_found() -> Reply:
    """The 404 of a route that is not mounted: FastAPI's ``{"detail": "Not Found"}``."""
    return json_reply({"detail": "Not Found"}, 404)


def bad_request(message: str, param: str | None = None) -> Refusal:
    """A 400 ``BadRequestError`` (vLLM's ``VLLMValidationError`` adds ``(parameter=..., value=...)``)."""
    return Refusal(error_reply(400, message, param=param))


def validation_error(loc: str, kind: str, msg: str, value: Any = None, ctx: Any = None) -> Refusal:
    """A 400 ``Bad Request`` as vLLM writes a pydantic validation error (``param`` = ``body.<loc>``)."""
    error: dict[str, Any] = {"type": kind, "loc": f"body.{loc}", "msg": msg, "input": value}
    if ctx is not None:
        error["ctx"] = ctx
    return Refusal(
        error_reply(400, f"1 validation error:\n  {error!r}", type="Bad Request", param=f"body.{loc}")
    )


def sse_frame(payload: Any) -> bytes:
    """One server-sent event: ``data: <json>`` and a blank line."""
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()
