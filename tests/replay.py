"""Replaying the exchanges recorded from the real vLLM CPU fixtures (tests/recorded/, by
server-fixtures/record.py and record_stt.py) and comparing two answers as a client reads them.

tests/component/test_fake_replay.py holds FakeVLLM to the recordings, and
tests/contract/test_recordings_current.py holds the real servers to them (a recording that no longer matches
vLLM is stale: record again). What is compared, and what may differ, is listed by the constants below, each
with its reason.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import random
import re
import socket
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from vllm_tasks.server_errors import error_from_response, parse_error_body
from vllm_tasks.testing import routes

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "recorded"
AUDIO = ROOT / "tests" / "data" / "audio"
RECORDINGS = sorted(RECORDED.glob("*/*.json"))

#: The response headers a client reads, and how they are compared.
READ_HEADERS = {
    "content-type": "its media type and charset",
    "allow": "the methods a 405 names (as a set)",
    "retry-after": "present in both or neither (when to retry)",
    "www-authenticate": "present in both or neither",
    "x-request-id": "present in both or neither",
    "metadata": "its JSON shape (the description of an encoding_format=bytes body)",
}

#: Lists whose length the model decides, not the request: (fixture or "*", JSON path with [*] indices).
FREE_LENGTHS: dict[tuple[str, str], str] = {
    ("*", "$.tokens"): "token ids: the fake's tokenizer is words and punctuation, not WordPiece",
    ("*", "$.token_strs"): "the same tokens as strings",
    ("*", "$.prompt_token_ids"): "a chat prompt's ids: the fake counts 256 tokens an image",
    ("late-interaction", "$.data[*].data"): "one vector per token, as many as the tokenizer makes",
    ("stt", "$.segments"): "Whisper ends a segment where its timestamp tokens say; the fake at each sentence",
    ("stt", "$.segments[*].tokens"): "Whisper's token ids of the segment",
}

#: Values the request and the fixture's configuration decide (not the model), compared as well.
SAME_VALUES = frozenset({
    "$.version", "$.object", "$.model", "$.max_model_len", "$.language", "$.response_type",
    "$.data[*].object", "$.data[*].index", "$.data[*].id", "$.data[*].max_model_len",
    "$.data[*].label", "$.data[*].num_classes", "$.usage.type", "$.meta.api_version.version",
    "$.choices[*].message.role", "events[*].object", "events[*].model",
    *(f"header metadata.data[*].{key}" for key in ("index", "embed_dtype", "endianness", "start", "end")),
    "header metadata.data[*].shape",
})  # fmt: skip

#: What other SDK code looks for in an error message (discovery: the n-gram processor check; scoring:
#: the pre-0.16 text_1/text_2 fallback and the over-long query hint).
SDK_PHRASES = ("ngram_size", "text_1", "sequence to truncate too short")

#: Routes the real server lists in /openapi.json that FakeVLLM does not serve (none is a task route the
#: SDK probes): metrics, load, KV-cache events, SageMaker's /invocations and /v1/systemone.
ROUTES_NOT_IMITATED = frozenset({"/load", "/metrics", "/kv_event_sources", "/invocations", "/v1/systemone"})


@dataclasses.dataclass(frozen=True)
class KnownGap:
    """A divergence FakeVLLM keeps on purpose: why, and exactly what the replay finds."""

    reason: str
    divergences: tuple[str, ...]


#: Exchanges whose divergences are known and documented (docs/testing.md, "What FakeVLLM does not
#: imitate"), by "<fixture>/<name>".
KNOWN_GAPS: dict[str, KnownGap] = {}


@dataclasses.dataclass(frozen=True)
class Answer:
    """One HTTP answer: status, headers (lower-cased names) and body."""

    status: int
    headers: dict[str, str]
    body: bytes

    def media(self) -> tuple[str, str | None]:
        """The content type's media type and charset (``("", None)`` without one)."""
        kind, *params = self.headers.get("content-type", "").lower().split(";")
        charset = next((p.split("=", 1)[1].strip() for p in params if p.strip().startswith("charset=")), None)
        return kind.strip(), charset


def answer_of(response: httpx.Response) -> Answer:
    """A live answer, as :class:`Answer`."""
    return Answer(response.status_code, {k.lower(): v for k, v in response.headers.items()}, response.content)


def recorded_answer(recording: dict[str, Any]) -> Answer:
    """What the real server answered."""
    response = recording["response"]
    if response["body_b64"] is not None:
        body = base64.b64decode(response["body_b64"])
    else:
        body = (response["body_text"] or "").encode()
    return Answer(response["status"], response["headers"], body)


def replayed_request(client: httpx.Client, recording: dict[str, Any], name: str) -> httpx.Request:
    """The recorded request, rebuilt as record.py / record_stt.py sent it."""
    request = recording["request"]
    method, path = request["method"], request["path"]
    headers = dict(request["headers"])
    upload = request.get("file")
    if upload is not None:  # record_stt.py: the form plus a file of tests/data/audio, or random bytes
        if upload == "<random bytes>":  # os.urandom(4096) there; seeded here, the same bytes every run
            filename, content = "audio.bin", random.Random(name).randbytes(4096)
        else:
            filename, content = upload, (AUDIO / upload).read_bytes()
        files = {"file": (filename, content, "application/octet-stream")}
        return client.build_request(method, path, headers=headers, data=request["form"], files=files)
    raw = headers.pop("_raw_body", None)  # record.py: a body sent as is, with its own content type
    if raw is not None:
        return client.build_request(method, path, headers=headers, content=raw.encode())
    if request["json"] is not None:
        headers.setdefault("Content-Type", "application/json")
        content = json.dumps(request["json"]).encode()
        return client.build_request(method, path, headers=headers, content=content)
    return client.build_request(method, path, headers=headers)


# ------------------------------------------------------------------------------------------- comparing


def kind(value: Any) -> str:
    """A JSON value's type: object, list, str, int, float, bool or null."""
    if value is None:
        return "null"
    return {dict: "object", list: "list"}.get(type(value), type(value).__name__)


def shape_divergences(real: Any, fake: Any, path: str = "$", fixture: str = "*") -> list[str]:
    """Where ``fake`` differs from ``real`` in shape: keys, value types, list lengths, by JSON path.

    Values are not compared, except those of :data:`SAME_VALUES`. A list's length is, unless
    :data:`FREE_LENGTHS` names its path; items past the real list's end are compared with its last item
    (the lists of these APIs hold items of one shape).
    """
    generic = re.sub(r"\[\d+\]", "[*]", path)
    if kind(real) != kind(fake):
        return [f"{path}: real is {kind(real)}, fake is {kind(fake)}"]
    if generic in SAME_VALUES and real != fake:
        return [f"{path}: real {real!r}, fake {fake!r}"]
    found: list[str] = []
    if isinstance(real, dict):
        found += [f"{path}.{key}: missing from the fake" for key in real if key not in fake]
        found += [f"{path}.{key}: only in the fake" for key in fake if key not in real]
        for key in [key for key in real if key in fake]:
            found += shape_divergences(real[key], fake[key], f"{path}.{key}", fixture)
    elif isinstance(real, list):
        free = (fixture, generic) in FREE_LENGTHS or ("*", generic) in FREE_LENGTHS
        if len(real) != len(fake) and not free:
            found.append(f"{path}: real has {len(real)} items, fake {len(fake)}")
        if real:
            for index, item in enumerate(fake):
                found += shape_divergences(real[min(index, len(real) - 1)], item, f"{path}[{index}]", fixture)
    return found


def header_divergences(real: Answer, fake: Answer) -> list[str]:
    """The headers of :data:`READ_HEADERS` that differ."""
    found: list[str] = []
    for name in READ_HEADERS:
        mine, theirs = real.headers.get(name), fake.headers.get(name)
        if (mine is None) != (theirs is None):
            found.append(f"header {name}: real {mine!r}, fake {theirs!r}")
        elif mine is None or theirs is None:
            continue
        elif name == "content-type" and real.media() != fake.media():
            found.append(f"header content-type: real {mine!r}, fake {theirs!r}")
        elif name == "allow" and methods(mine) != methods(theirs):
            found.append(f"header allow: real {mine!r}, fake {theirs!r}")
        elif name == "metadata":
            found += shape_divergences(json.loads(mine), json.loads(theirs), "header metadata")
    return found


def methods(allow: str) -> set[str]:
    """The methods of an ``Allow`` header."""
    return {method.strip().upper() for method in allow.split(",") if method.strip()}


def sdk_reading(answer: Answer, method: str, path: str) -> dict[str, Any]:
    """How the SDK reads an error answer: the exception class and what it parses out of the message."""
    response = httpx.Response(answer.status, headers=answer.headers, content=answer.body)
    error = error_from_response(response, method=method, url=f"http://fake{path}")
    message = parse_error_body(response)[0].lower()
    reading = {
        "class": type(error).__name__,
        "param": error.param,
        "max_model_len": getattr(error, "max_model_len", None),
        "prompt_tokens": getattr(error, "prompt_tokens", None),
    }
    return reading | {f"says {phrase!r}": phrase in message for phrase in SDK_PHRASES}


def error_divergences(real: Answer, fake: Answer, method: str, path: str) -> list[str]:
    """An error body's shape, the fields a client reads, and how the SDK reads it."""
    mine, theirs = json.loads(real.body), json.loads(fake.body)
    found = shape_divergences(mine, theirs)

    def fields(body: Any) -> dict[str, Any]:
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            return {f"error.{key}": body["error"].get(key) for key in ("type", "code", "param")}
        return {key: body[key] for key in ("detail", "error") if isinstance(body, dict) and key in body}

    expected, got = fields(mine), fields(theirs)
    found += [
        f"$.{key}: real {expected[key]!r}, fake {got.get(key)!r}"
        for key in expected
        if expected[key] != got.get(key)
    ]
    expected, got = sdk_reading(real, method, path), sdk_reading(fake, method, path)
    found += [
        f"SDK reads {key}: real {expected[key]!r}, fake {got[key]!r}"
        for key in expected
        if expected[key] != got[key]
    ]
    return found


def sse_events(body: bytes) -> list[Any]:
    """The ``data:`` of each server-sent event: parsed JSON, or the text (``[DONE]``)."""
    events: list[Any] = []
    for block in body.decode().split("\n\n"):
        data = "\n".join(line[5:].strip() for line in block.splitlines() if line.startswith("data:"))
        if data:
            try:
                events.append(json.loads(data))
            except ValueError:
                events.append(data)
    return events


def skeleton(value: Any) -> Any:
    """A hashable outline of a JSON value's shape (keys and types, no values, no list lengths)."""
    if isinstance(value, dict):
        return tuple((key, skeleton(item)) for key, item in value.items())
    if isinstance(value, list):
        return ("list", frozenset(skeleton(item) for item in value))
    return value if value == "[DONE]" else kind(value)


def event_runs(events: list[Any]) -> list[Any]:
    """The first event of each run of events shaped alike (one chunk per word makes one run)."""
    return [event for i, event in enumerate(events) if i == 0 or skeleton(event) != skeleton(events[i - 1])]


def leaves(value: Any, path: str = "") -> list[str]:
    """The paths of a JSON value's leaves, list items merged (``choices[].delta.content``)."""
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in leaves(item, f"{path}.{key}")]
    if isinstance(value, list):
        merged = dict.fromkeys(leaf for item in value for leaf in leaves(item, f"{path}[]"))
        return list(merged) or [f"{path}[]"]
    return [path.lstrip(".") or repr(value)]


def stream_divergences(real: Answer, fake: Answer) -> list[str]:
    """The same kinds of events, in the same order, each shaped like the real one."""
    mine, theirs = event_runs(sse_events(real.body)), event_runs(sse_events(fake.body))
    if [skeleton(event) for event in mine] != [skeleton(event) for event in theirs]:
        legend = {skeleton(event): ", ".join(leaves(event)) for event in mine + theirs}
        letter = {outline: "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[i % 26] for i, outline in enumerate(legend)}

        def order(runs: list[Any]) -> str:
            return " ".join(letter[skeleton(event)] for event in runs)

        found = [f"events: real runs {order(mine)}, fake runs {order(theirs)} (one letter per kind of event)"]
        return found + [f"  {letter[outline]}: {leaf_paths}" for outline, leaf_paths in legend.items()]
    found: list[str] = []
    for index, (first, second) in enumerate(zip(mine, theirs, strict=True)):
        found += shape_divergences(first, second, f"events[{index}]")
    return found


def openapi_divergences(real: Answer, fake: Answer) -> list[str]:
    """The routes both could list (FakeVLLM's route table) and their methods; others must be known."""
    mine, theirs = json.loads(real.body)["paths"], json.loads(fake.body)["paths"]
    found = [f"route {path}: real lists it, FakeVLLM has no such route" for path in sorted(mine)
             if path not in routes.ROUTES and path not in ROUTES_NOT_IMITATED]  # fmt: skip
    for path in sorted((set(mine) | set(theirs)) & set(routes.ROUTES)):
        expected, got = sorted(mine.get(path, ())), sorted(theirs.get(path, ()))
        if expected != got:
            found.append(f"route {path}: real methods {expected}, fake {got}")
    return found


def body_divergences(real: Answer, fake: Answer, fixture: str, method: str, path: str) -> list[str]:
    """Compare two bodies as the real one's content type says."""
    media = real.media()[0]
    if media == "application/json":
        try:
            theirs = json.loads(fake.body)
        except ValueError:
            return [f"body: the fake's is not JSON: {fake.body[:200]!r}"]
        if real.status >= 400:
            return error_divergences(real, fake, method, path)
        if path == "/openapi.json":
            return openapi_divergences(real, fake)
        return shape_divergences(json.loads(real.body), theirs, fixture=fixture)
    if media == "text/event-stream":
        return stream_divergences(real, fake)
    if media == "application/octet-stream" or not real.body or not fake.body:
        if len(real.body) != len(fake.body):
            return [f"body: real has {len(real.body)} bytes, fake {len(fake.body)}"]
        return []
    return [] if real.body == fake.body else [f"body: real {real.body[:200]!r}, fake {fake.body[:200]!r}"]


def divergences(real: Answer, fake: Answer, fixture: str, method: str, path: str) -> list[str]:
    """Every way ``fake`` differs from ``real`` that a client could notice."""
    if real.status != fake.status:
        return [f"status: real {real.status}, fake {fake.status}: {fake.body[:300]!r}"]
    found = header_divergences(real, fake)
    if real.media() != fake.media():
        return found
    return found + body_divergences(real, fake, fixture, method, path)


def report(found: list[str], most: int = 20) -> str:
    """The divergences one a line, the first ``most`` of them."""
    more = [f"... and {len(found) - most} more"] if len(found) > most else []
    return "\n".join(f"  {line}" for line in found[:most] + more)


# ------------------------------------------------------------------------------------ malformed HTTP


def tls_client_hello() -> bytes:
    """The first bytes a TLS client sends (what an https:// URL sends to a plain-HTTP port)."""
    outgoing = ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(ssl.MemoryBIO(), outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


POST = b"POST /v1/embeddings HTTP/1.1\r\nHost: fake\r\nContent-Type: application/json\r\n"
MALFORMED: dict[str, Callable[[], bytes]] = {
    "bad Content-Length": lambda: POST + b"Content-Length: 2x\r\n\r\n{}",
    "bad chunk size": lambda: POST + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
    "TLS hello": tls_client_hello,
}


def raw_exchange(base_url: str, data: bytes) -> tuple[str, dict[str, str], bytes]:
    """Send ``data`` as is on a new connection; the status line, headers and body the server answered
    before closing it."""
    address = httpx.URL(base_url)
    with socket.create_connection((address.host, address.port or 80), timeout=5) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(4096):  # until the server closes the connection
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode().split("\r\n")
    headers = {name.lower(): value.strip() for name, value in (line.split(":", 1) for line in lines)}
    return status, headers, body


def assert_uvicorns_400(base_url: str, data: bytes) -> None:
    """The server answers ``data`` with uvicorn's 400 in plain text, closes the connection, serves on."""
    status, headers, body = raw_exchange(base_url, data)
    assert status == "HTTP/1.1 400 Bad Request" and body == b"Invalid HTTP request received."
    assert headers["content-type"] == "text/plain; charset=utf-8" and headers["connection"] == "close"
    assert httpx.get(base_url + "/health").status_code == 200


VERSIONLESS = b"POST /v1/embeddings\r\n\r\n"
"""A request line without an HTTP version: uvicorn's parser takes it (no headers, so no content type) and
vLLM refuses the body, not the request: JSON, not uvicorn's plain-text 400 (seen on vLLM 0.32)."""


def assert_versionless_request_is_refused_by_vllm(base_url: str) -> None:
    """The server answers :data:`VERSIONLESS` with vLLM's JSON 400 for a missing content type, and closes."""
    status, headers, body = raw_exchange(base_url, VERSIONLESS)
    assert status == "HTTP/1.1 400 Bad Request" and headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    error = json.loads(body)["error"]
    assert error["type"] == "Bad Request" and error["code"] == 400
    assert "Unsupported Media Type: Only 'application/json' is allowed" in error["message"]
