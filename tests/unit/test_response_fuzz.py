"""Issue 11: a fuzz suite over the server's answers, for every route, through the real clients.

Each route has a valid answer (what vLLM sends). Hypothesis mutates it -- truncated, reordered, wrong
types, wrong shapes, wrong content types and statuses, huge, empty, vLLM's error object -- and the
client (sync and async, over ``httpx.MockTransport``) must give exactly the valid answer's result or
raise a ``VLLMTasksError``: never another exception, never a different result.

Mutations that change values while keeping a valid shape (a float in a vector, a dropped stream frame)
cannot be detected by any client and are not generated; neither are mutations of fields the results do
not carry from the body (usage, labels, segments are not compared; discovery is lenient by design:
a hidden version or schema is ``None``).

The counts (bodies tried per route, typed errors, exact results, other exceptions: must be 0) are
printed by the last test of this module.
"""

from __future__ import annotations

import base64
import copy
import io
import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vllm_tasks as vt

from .recorded import RECORDED, exchange, recorded_response

FOX = Path(__file__).resolve().parent.parent / "data" / "audio" / "fox.wav"
VECTORS = np.array([[0.5, -2.0, 3.0, 4.0], [1.0, 2.0, -3.0, 0.25]], dtype=np.float32)
HTML = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
EXAMPLES = 100
"""Per client kind: every route gets 2 x EXAMPLES bodies."""

COUNTS: dict[str, dict[str, int]] = defaultdict(lambda: {"bodies": 0, "exact": 0, "typed": 0, "other": 0})

Answer = tuple[int, dict[str, str], bytes]


# --------------------------------------------------------------------------------- the fake server


class FakeServer:
    """Discovery as a recorded fixture answered it; the route under test answers ``self.answer``."""

    def __init__(self, fixture: str) -> None:
        self.fixture = fixture
        self.answer: Answer = (500, {}, b"")
        self.discovery: dict[str, Answer] = {}
        for name, path in (("version", "/version"), ("models", "/v1/models"), ("openapi", "/openapi.json")):
            if (RECORDED / fixture / f"{name}.json").exists():
                response = recorded_response(fixture, name)
                self.discovery[path] = (response.status_code, dict(response.headers), response.content)
            else:
                self.discovery[path] = (404, {"content-type": "application/json"}, b'{"detail":"Not Found"}')

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        status, headers, content = self.discovery.get(path) or self._special(request) or self.answer
        return httpx.Response(status, headers=headers, content=content)

    def _special(self, request: httpx.Request) -> Answer | None:
        body = (
            json.loads(request.content) if request.headers.get("content-type") == "application/json" else {}
        )
        if request.url.path == "/pooling" and body.get("input") == "a":  # the scorer probe
            response = recorded_response(self.fixture, "pooling")
            return response.status_code, dict(response.headers), response.content
        if (body.get("vllm_xargs") or {}).get("ngram_size") == 0:  # OCR's processor check
            response = recorded_response("ocr", "chat_ngram_check_400")
            return response.status_code, {"content-type": "application/json"}, response.content
        return None


def client_for(kind: str, server: FakeServer, make_client: Callable[..., Any]) -> Any:
    if kind == "sync":
        return make_client(http_client=httpx.Client(transport=httpx.MockTransport(server)))
    return make_client(http_client=httpx.AsyncClient(transport=httpx.MockTransport(server)))


def json_answer(body: Any, content_type: str = "application/json") -> Answer:
    return 200, {"content-type": content_type}, json.dumps(body).encode()


# ---------------------------------------------------------------------------------------- routes


def embeddings_json(fmt: str) -> Answer:
    rows = [
        row.tolist() if fmt == "float" else base64.b64encode(row.astype("<f4").tobytes()).decode()
        for row in VECTORS
    ]
    data = [{"index": i, "object": "embedding", "embedding": row} for i, row in enumerate(rows)]
    return json_answer({"id": "embd-1", "object": "list", "model": "minilm", "data": data, "usage": USAGE})


def embeddings_bytes(metadata: bool) -> Answer:
    headers = {"content-type": "application/octet-stream"}
    if metadata:
        width = VECTORS.shape[1] * 4
        items = [
            {"index": i, "embed_dtype": "float32", "endianness": "native", "start": i * width,
             "end": (i + 1) * width, "shape": [VECTORS.shape[1]]}
            for i in range(len(VECTORS))
        ]  # fmt: skip
        headers["metadata"] = json.dumps({"id": "e", "model": "minilm", "data": items, "usage": USAGE})
    return 200, headers, VECTORS.astype("<f4").tobytes()


USAGE = {"prompt_tokens": 4, "total_tokens": 4}


def v2_answer() -> Answer:
    ubinary = np.packbits(VECTORS >= 0, axis=1)
    embeddings = {
        "float": VECTORS.tolist(),
        "ubinary": ubinary.tolist(),
        "binary": (ubinary.astype(np.int16) - 128).tolist(),
        "base64": [base64.b64encode(row.astype("<f4").tobytes()).decode() for row in VECTORS],
    }
    body = {
        "id": "e",
        "embeddings": embeddings,
        "texts": ["a", "b"],
        "meta": {"billed_units": {"input_tokens": 4}},
    }
    return json_answer(body)


def sse_answer() -> Answer:
    response = exchange("stt", "transcription_stream_usage")["response"]
    return 200, {"content-type": "text/event-stream; charset=utf-8"}, response["body_text"].encode()


def ocr_answer() -> Answer:
    body = json.loads(exchange("ocr", "chat_markdown")["response"]["body_text"])
    body["choices"][0]["finish_reason"] = "stop"
    return json_answer(body)


def pool_answer() -> Answer:
    return json_answer(
        {"model": "m", "data": [{"index": i, "data": v} for i, v in enumerate(VECTORS.tolist())]}
    )


def tiny_png() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (8, 8), "white").save(out, format="PNG")
    return out.getvalue()


PNG = tiny_png()


def recorded_answer(fixture: str, name: str) -> Answer:
    response = exchange(fixture, name)["response"]
    return response["status"], {"content-type": "application/json"}, response["body_text"].encode()


def arrays(*values: Any) -> tuple[Any, ...]:
    return tuple(np.asarray(value).tolist() for value in values)


@dataclass(frozen=True)
class Route:
    name: str
    fixture: str
    kind: str  # json, bytes, raw, sse
    answer: Callable[[], Answer]
    call: Callable[[Any], Any]
    key: Callable[[Any], Any]
    ids: dict[str, Any] = field(default_factory=dict)


def transcribe(response_format: str) -> Callable[[Any], Any]:
    return lambda client: client.transcribe(
        FOX, prepare="never", chunking="server", response_format=response_format
    )


def stream_text(client: Any) -> str:
    stream = client.transcribe_stream(FOX, prepare="never", chunking="server")
    if hasattr(stream, "__aiter__"):

        async def run() -> list[Any]:
            return [event async for event in stream]

        events = client._loop.run_until_complete(run())
    else:
        events = list(stream)
    final: vt.types.Transcription = events[-1]
    assert "".join(e.text for e in events[:-1]) == final.text
    return final.text


ROUTES = [
    Route(
        "embed float",
        "embed",
        "json",
        lambda: embeddings_json("float"),
        lambda c: c.embed(["a", "b"], encoding_format="float"),
        lambda r: arrays(r.vectors),
    ),
    Route(
        "embed base64",
        "embed",
        "json",
        lambda: embeddings_json("base64"),
        lambda c: c.embed(["a", "b"], encoding_format="base64"),
        lambda r: arrays(r.vectors),
    ),
    Route(
        "embed bytes",
        "embed",
        "bytes",
        lambda: embeddings_bytes(True),
        lambda c: c.embed(["a", "b"], encoding_format="bytes"),
        lambda r: arrays(r.vectors),
    ),
    # bytes_only has no metadata: only `dimensions` lets a client check the width.
    Route(
        "embed bytes_only",
        "embed",
        "raw",
        lambda: embeddings_bytes(False),
        lambda c: c.embed(["a", "b"], encoding_format="bytes_only", dimensions=4),
        lambda r: arrays(r.vectors),
    ),
    Route(
        "/v2/embed",
        "embed",
        "json",
        v2_answer,
        lambda c: c.embed_v2(texts=["a", "b"], embedding_types=["float", "binary", "ubinary", "base64"]),
        lambda r: arrays(r.float, r.binary, r.ubinary, r.base64),
    ),
    Route(
        "/score",
        "rerank",
        "json",
        lambda: recorded_answer("embed", "score"),
        lambda c: c.score("q", ["a", "b", "c"]),
        lambda r: arrays(r.scores),
    ),
    Route(
        "/rerank",
        "rerank",
        "json",
        lambda: recorded_answer("embed", "rerank"),
        lambda c: c.rerank("q", ["a", "b", "c"]),
        lambda r: [(h.index, h.score) for h in r.results],
    ),
    Route(
        "/classify",
        "rerank",
        "json",
        lambda: recorded_answer("rerank", "classify"),
        lambda c: c.classify(["a", "b"]),
        lambda r: arrays(r.probs),
    ),
    Route("/pooling", "embed", "json", pool_answer, lambda c: c.pool(["a", "b"]), lambda r: arrays(*r.data)),
    Route(
        "transcription json",
        "stt",
        "json",
        lambda: recorded_answer("stt", "transcription_json"),
        transcribe("json"),
        lambda r: r.text,
    ),
    Route(
        "transcription verbose_json",
        "stt",
        "json",
        lambda: recorded_answer("stt", "transcription_verbose_json"),
        transcribe("verbose_json"),
        lambda r: r.text,
    ),
    Route("transcription stream", "stt", "sse", sse_answer, stream_text, lambda text: text),
    Route("OCR chat completion", "ocr", "json", ocr_answer, lambda c: c.ocr(PNG), lambda r: r.text),
]


# ------------------------------------------------------------------------------------- mutations


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:4]):  # the first items are enough
            yield from paths(item, (*prefix, index))


def at(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


def kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


REPLACEMENTS: list[Any] = [None, "x", True, 7, -1, 2.5, [], {}, [[1.0]], {"a": 1}, 10**30]


def applicable(value: Any, path: tuple[Any, ...], op: str) -> bool:
    target = at(value, path)
    parent = at(value, path[:-1]) if path else None
    if op == "retype":
        return target is not None
    if op == "delete":
        return isinstance(parent, dict)
    if op in ("dup", "drop"):
        return isinstance(parent, list)
    if op == "swap":
        indexed = isinstance(target, list) and all(isinstance(i, dict) and "index" in i for i in target)
        return indexed and len(target) > 1
    return op == "huge" and isinstance(target, list) and bool(target)


@st.composite
def json_mutation(draw: st.DrawFn, value: Any, ops: tuple[str, ...]) -> tuple[str, Any]:
    """A mutated copy of the JSON ``value`` (the operation named); values only change type."""
    value = copy.deepcopy(value)
    candidates = [(path, op) for path in paths(value) for op in ops if applicable(value, path, op)]
    path, op = draw(st.sampled_from(candidates))
    target = at(value, path)
    parent = at(value, path[:-1]) if path else None
    if op == "retype":
        choices = [r for r in REPLACEMENTS if kind_of(r) != kind_of(target)]
        if isinstance(target, str):
            choices = [r for r in choices if r is not None]  # a null string is a legal "no text"
        new = copy.deepcopy(draw(st.sampled_from(choices)))
        if parent is None:
            return f"root -> {new!r}", new
        parent[path[-1]] = new
        return f"{path} -> {new!r}", value
    if op == "delete":
        del parent[path[-1]]
    elif op == "dup":
        parent.insert(path[-1], copy.deepcopy(target))
    elif op == "drop":
        del parent[path[-1]]
    elif op == "swap":
        target.reverse()  # reordering indexed items is legal: must give the same result
        return f"reverse {path}", value
    else:
        target.extend(copy.deepcopy(target) * 300)
    return f"{op} {path}", value


LEGAL = ("unchanged", "reverse", "status 202", "content-type charset", "padded")
"""Mutations that leave a legal answer: the exact result is required (text/plain too for JSON)."""


def legal(route: Route, described: str) -> bool:
    return described.startswith(LEGAL) or (
        route.kind != "bytes" and route.kind != "raw" and described == "content-type text/plain"
    )


@st.composite
def mutation(draw: st.DrawFn, route: Route, answer: Answer) -> tuple[str, Answer]:
    status, headers, content = answer
    family = draw(st.sampled_from(["body", "status", "content-type", "replace", "truncate"]))
    if family == "status":
        new_status = draw(st.sampled_from([100, 202, 204, 301, 302, 307, 308]))
        extra = {"location": "https://elsewhere.test/"} if 300 <= new_status < 400 else {}
        body = b"" if new_status in (204, 301, 302, 307, 308) else content
        return f"status {new_status}", (new_status, {**headers, **extra}, body)
    if family == "content-type":
        new_type = draw(
            st.sampled_from(
                ["text/html", "text/plain", "application/octet-stream", "application/json", None, "charset"]
            )
        )
        changed = {k: v for k, v in headers.items() if k != "content-type"}
        if new_type == "charset":
            changed["content-type"] = headers["content-type"].split(";")[0] + "; charset=utf-8"
        elif new_type is not None:
            changed["content-type"] = new_type
        return f"content-type {new_type}", (status, changed, content)
    if family == "replace":
        choice = draw(st.sampled_from(["empty", "html", "flat error", "nested error", "padded", "not utf-8"]))
        errors = {
            "flat error": {
                "object": "error",
                "message": "boom",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            },
            "nested error": {"error": {"message": "boom", "type": "InternalServerError", "code": 500}},
        }
        if choice in errors:
            return choice, (200, {"content-type": "application/json"}, json.dumps(errors[choice]).encode())
        if choice == "padded":
            pad = b": ping\n\n" * 2000 if route.kind == "sse" else b" " * 200_000
            if route.kind in ("bytes", "raw"):
                return "unchanged", answer
            return choice, (status, headers, pad + content if route.kind == "sse" else content + pad)
        body = {"empty": b"", "html": HTML, "not utf-8": b"\xff\xfe\xfa" + content[:50]}[choice]
        return choice, (status, headers, body)
    if family == "truncate" or route.kind == "raw":
        cut = draw(st.integers(0, len(content)))
        tail = draw(st.sampled_from([b"", b"\0\0\0\0", b"\x7f" * 8]))
        if cut == len(content) and not tail:
            return "unchanged", answer
        if cut + len(tail) == len(content):  # the same length with other bytes: a value change
            tail += b"\0"
        return f"truncate {cut} + {tail!r}", (status, headers, content[:cut] + tail)
    return draw(body_mutation(route, answer))


@st.composite
def body_mutation(draw: st.DrawFn, route: Route, answer: Answer) -> tuple[str, Answer]:
    status, headers, content = answer
    if route.kind == "json":
        described, new = draw(
            json_mutation(json.loads(content), ("retype", "delete", "dup", "drop", "swap", "huge"))
        )
        return described, (status, headers, json.dumps(new).encode())
    if route.kind == "bytes":
        choice = draw(st.sampled_from(["metadata", "no metadata", "garbage metadata", "float16 label"]))
        meta = json.loads(headers["metadata"])
        if choice == "metadata":
            ops = ("retype", "delete", "dup", "drop", "swap", "huge")
            described, new = draw(json_mutation(meta, ops))
            return f"metadata {described}", (status, {**headers, "metadata": json.dumps(new)}, content)
        if choice == "float16 label":
            for item in meta["data"]:
                item["embed_dtype"] = "float16"
            return choice, (status, {**headers, "metadata": json.dumps(meta)}, content)
        changed = {k: v for k, v in headers.items() if k != "metadata"}
        if choice == "garbage metadata":
            changed["metadata"] = headers["metadata"][: len(headers["metadata"]) // 2]
        return choice, (status, changed, content)
    # sse: frames only change type (a dropped or doubled frame cannot be detected); or junk is added
    lines = content.decode().split("\n")
    choice = draw(st.sampled_from(["frame", "junk frame", "no [DONE]"]))
    frames = [i for i, line in enumerate(lines) if line.startswith("data: {")]
    if choice == "frame":
        index = draw(st.sampled_from(frames))
        described, new = draw(json_mutation(json.loads(lines[index][6:]), ("retype",)))
        lines[index] = "data: " + json.dumps(new)
    elif choice == "junk frame":
        lines.insert(draw(st.sampled_from(frames)), "data: {not json\n")
    else:
        lines = [line for line in lines if line.strip() != "data: [DONE]"]
        described = choice
    return f"sse {choice} {described if choice == 'frame' else ''}", (
        status,
        headers,
        "\n".join(lines).encode(),
    )


# ---------------------------------------------------------------------------------------- the tests


def check_one(
    route: Route, client: Any, server: FakeServer, expected: Any, described: str, answer: Answer
) -> None:
    server.answer = answer
    counts = COUNTS[route.name]
    counts["bodies"] += 1
    try:
        result = route.call(client)
    except vt.VLLMTasksError:
        counts["typed"] += 1
        assert not legal(route, described), f"{route.name}: a legal answer ({described}) was refused"
        return
    except BaseException:
        counts["other"] += 1
        raise
    counts["exact"] += 1
    assert route.key(result) == expected, f"{route.name}: a different result after {described}"


@pytest.mark.parametrize("route", ROUTES, ids=[route.name for route in ROUTES])
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_answer_gives_the_exact_result_or_a_typed_error(
    route: Route, data: st.DataObject, make_client: Callable[..., Any], request: pytest.FixtureRequest
) -> None:
    kind = request.node.callspec.params["make_client"]
    cache = request.node.__dict__.setdefault("fuzz_state", {})
    if "client" not in cache:  # one client per test (its discovery is cached), reused by every example
        server = FakeServer(route.fixture)
        server.answer = route.answer()
        client = client_for(kind, server, make_client)
        cache.update(client=client, server=server, expected=route.key(route.call(client)))
    described, answer = data.draw(mutation(route, route.answer()))
    check_one(route, cache["client"], cache["server"], cache["expected"], described, answer)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_discovery_answers_give_a_server_info_or_a_typed_error(
    data: st.DataObject, make_client: Callable[..., Any], request: pytest.FixtureRequest
) -> None:
    # Lenient by design: a hidden or unreadable /version or /openapi.json is None; /v1/models is checked.
    kind = request.node.callspec.params["make_client"]
    server = FakeServer("embed")
    path = data.draw(st.sampled_from(["/version", "/v1/models", "/openapi.json"]))
    route = Route(
        f"discovery {path}", "embed", "json", lambda: server.discovery[path], lambda c: c, lambda c: c
    )
    _, answer = data.draw(mutation(route, server.discovery[path]))
    server.discovery[path] = answer
    counts = COUNTS["discovery /version /v1/models /openapi.json"]
    counts["bodies"] += 1
    client = client_for(kind, server, make_client)
    try:
        info = client.server_info()
    except vt.VLLMTasksError:
        counts["typed"] += 1
        return
    except BaseException:
        counts["other"] += 1
        raise
    counts["exact"] += 1
    assert info.version in ("0.32.0", None) or isinstance(info.version, str)
    assert all(isinstance(card.id, str) for card in info.models)
    assert info.routes is None or all(isinstance(route, str) for route in info.routes)


def test_zz_fuzz_counts(capsys: pytest.CaptureFixture[str]) -> None:
    """The closing note's numbers: bodies tried per route and exceptions other than VLLMTasksError."""
    if not COUNTS:
        pytest.skip("run with the fuzz tests above")
    lines = [f"{'route':40} {'bodies':>7} {'exact':>7} {'typed':>7} {'other':>7}"]
    for name, counts in COUNTS.items():
        lines.append(
            f"{name:40} {counts['bodies']:7} {counts['exact']:7} {counts['typed']:7} {counts['other']:7}"
        )
    total = {
        key: sum(counts[key] for counts in COUNTS.values()) for key in ("bodies", "exact", "typed", "other")
    }
    lines.append(f"{'total':40} {total['bodies']:7} {total['exact']:7} {total['typed']:7} {total['other']:7}")
    with capsys.disabled():
        print("\nresponse fuzz counts (other = exceptions that are not VLLMTasksError):\n" + "\n".join(lines))
    assert total["other"] == 0
