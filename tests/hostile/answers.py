"""Hostile answers: rewrites of FakeVLLM's normal replies (``FakeVLLM.mutate``) and transient failures.

Each :class:`AnswerCase` is applied to a FakeVLLM before an entry point's call, against the paths the same
call requested from a clean server. A rewrite that finds nothing to change in any answer leaves
``Hits.changed`` at 0: the harness then fails the case as one that does not apply (fix the registry).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vllm_tasks.testing import FakeVLLM, Reply
from vllm_tasks.testing.realtime import CloseFrame, RealtimeSession

TRANSIENT_STATUSES = (429, 500, 503, 502, 504)
"""A transient case's statuses, one per path in turn (429 with ``Retry-After: 0``)."""

DISCOVERY = frozenset({"/version", "/v1/models", "/openapi.json", "/health"})
NAN = "__hostile_nan__"


@dataclass
class Hits:
    """How many answers a case's rewrites changed (0: the case found nothing to attack)."""

    changed: int = 0


Rewrite = Callable[[Any], Any]
"""Rewrites a parsed JSON answer in place-free style: returns the new value, or the value itself when it has
nothing to change."""


def _float_lists(value: Any, found: list[list[Any]]) -> None:
    """Every list of numbers (with at least one float) inside ``value``, depth first."""
    if isinstance(value, list):
        if value and all(isinstance(x, int | float) and not isinstance(x, bool) for x in value):
            if any(isinstance(x, float) for x in value):
                found.append(value)
            return
        for item in value:
            _float_lists(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _float_lists(item, found)


def _row_lists(value: Any, found: list[list[Any]]) -> None:
    """Every list of two or more objects or vectors (answer rows: ``data``, ``results``, ``segments``,
    ``/v2/embed``'s ``float``)."""
    if isinstance(value, list):
        if len(value) >= 2 and (
            all(isinstance(x, dict) for x in value) or all(isinstance(x, list) and x for x in value)
        ):
            found.append(value)
        for item in value:
            _row_lists(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _row_lists(item, found)


def _encoded_rows(value: Any, found: list[dict[str, Any]]) -> None:
    """Every object holding a base64 float32 ``embedding``/``data`` string."""
    if isinstance(value, dict):
        for key in ("embedding", "data"):
            if isinstance(value.get(key), str) and len(value[key]) >= 8:
                found.append(value)
        for item in value.values():
            _encoded_rows(item, found)
    elif isinstance(value, list):
        for item in value:
            _encoded_rows(item, found)


def _non_finite(number: float) -> Rewrite:
    """The first float of the answer (a vector's, a score's) becomes ``number`` (NaN or infinity): a JSON
    number becomes the marker that ``_json_rewrite`` writes as ``NaN`` or ``1e999``, a base64 float32 row
    gets it as its first value."""

    def rewrite(payload: Any) -> Any:
        lists: list[list[Any]] = []
        _float_lists(payload, lists)
        for numbers in lists:
            for i, x in enumerate(numbers):
                if isinstance(x, float):
                    numbers[i] = NAN
                    return payload
        scalars = [payload]
        while scalars:  # a lone score: {"score": 0.7}
            item = scalars.pop()
            if isinstance(item, dict):
                for key, x in item.items():
                    if isinstance(x, float):
                        item[key] = NAN
                        return payload
                    scalars.append(x)
            elif isinstance(item, list):
                scalars.extend(item)
        encoded: list[dict[str, Any]] = []
        _encoded_rows(payload, encoded)
        for row in encoded:
            key = "embedding" if isinstance(row.get("embedding"), str) else "data"
            raw = bytearray(base64.b64decode(row[key]))
            raw[:4] = np.array([number], np.float32).tobytes()
            row[key] = base64.b64encode(bytes(raw)).decode()
            return payload
        return None

    return rewrite


def _narrower(payload: Any) -> Any:
    """The last vector of a batch loses its last number (another width in one batch)."""
    lists: list[list[Any]] = []
    _float_lists(payload, lists)
    if len(lists) < 2:
        return None
    lists[-1].pop()
    return payload


def _wider(payload: Any) -> Any:
    """Every vector of the batch twice as wide (a 32-wide answer to a 16-wide model), each consistent."""
    lists: list[list[Any]] = []
    _float_lists(payload, lists)
    if not lists:
        return None
    for numbers in lists:
        numbers.extend(list(numbers))
    return payload


def _binary_wider(rows: list[dict[str, Any]], body: bytearray) -> bytearray | None:
    if not rows or any(
        row.get("embed_dtype", "float32") != "float32" or not row.get("shape") for row in rows
    ):
        return None
    wider = bytearray()
    for row in sorted(rows, key=lambda row: row["start"]):
        array = np.frombuffer(bytes(body[row["start"] : row["end"]]), np.float32).reshape(row["shape"])
        doubled = np.concatenate([array, array], axis=-1)
        row["start"], row["shape"] = len(wider), list(doubled.shape)
        wider += doubled.tobytes()
        row["end"] = len(wider)
    return wider


def _row_missing(payload: Any) -> Any:
    lists: list[list[Any]] = []
    _row_lists(payload, lists)
    if not lists:
        return None
    lists[0].pop()
    return payload


def _row_duplicated(payload: Any) -> Any:
    """The last row replaced by a copy of the first (same count, an index twice)."""
    lists: list[list[Any]] = []
    _row_lists(payload, lists)
    if not lists:
        return None
    rows = lists[0]
    rows[-1] = json.loads(json.dumps(rows[0]))
    return payload


def _rows_reordered(payload: Any) -> Any:
    """The rows in reverse order, each keeping its ``index`` (a right answer for clients that read it)."""
    lists: list[list[Any]] = []
    _row_lists(payload, lists)
    indexed = [rows for rows in lists if all("index" in row for row in rows)]
    if not indexed:
        return None
    indexed[0].reverse()
    return payload


Binary = Callable[[list[dict[str, Any]], bytearray], bytearray | None]
"""Rewrites a ``bytes`` answer (rows in the ``metadata`` header's ``data``, each ``start``/``end`` bytes of
the body): returns the new body, or ``None`` when it has nothing to change."""


def _binary_non_finite(number: float) -> Binary:
    def rewrite(rows: list[dict[str, Any]], body: bytearray) -> bytearray | None:
        if not rows or rows[0].get("embed_dtype", "float32") != "float32":
            return None
        body[rows[0]["start"] : rows[0]["start"] + 4] = np.array([number], np.float32).tobytes()
        return body

    return rewrite


def _binary_narrower(rows: list[dict[str, Any]], body: bytearray) -> bytearray | None:
    last = rows[-1] if len(rows) >= 2 else None
    if last is None or last["end"] != len(body) or not last.get("shape"):
        return None
    last["end"] -= 4
    last["shape"][-1] -= 1
    return body[:-4]


def _binary_missing(rows: list[dict[str, Any]], body: bytearray) -> bytearray | None:
    if len(rows) < 2:
        return None
    return body[: rows.pop()["start"]]


def _binary_duplicated(rows: list[dict[str, Any]], body: bytearray) -> bytearray | None:
    if len(rows) < 2:
        return None
    rows[-1] = dict(rows[0])
    return body


def _binary_reordered(rows: list[dict[str, Any]], body: bytearray) -> bytearray | None:
    if len(rows) < 2:
        return None
    rows.reverse()
    return body


def _rows_rewrite(rewrite: Rewrite, binary: Binary, hits: Hits, token: str) -> Callable[[Reply], Reply]:
    """The mutation of a rows case: ``rewrite`` on a JSON answer, ``binary`` on a ``bytes`` one."""

    def mutation(reply: Reply) -> Reply:
        content_type = reply.headers.get("content-type", "")
        if reply.stream is not None or reply.status != 200:
            return reply
        if "metadata" in reply.headers and "octet-stream" in content_type:
            metadata = json.loads(reply.headers["metadata"])
            body = binary(metadata.get("data", []), bytearray(reply.body))
            if body is None:
                return reply
            hits.changed += 1
            return Reply(reply.status, bytes(body), {**reply.headers, "metadata": json.dumps(metadata)})
        if "json" not in content_type:
            return reply
        changed = rewrite(json.loads(reply.body))
        if changed is None:
            return reply
        hits.changed += 1
        body = json.dumps(changed).replace(f'"{NAN}"', token)
        return Reply(reply.status, body.encode(), dict(reply.headers))

    return mutation


def _body_rewrite(change: Callable[[Reply], Reply | None], hits: Hits) -> Callable[[Reply], Reply]:
    def mutation(reply: Reply) -> Reply:
        if reply.stream is not None:
            reply = Reply(reply.status, b"".join(reply.stream), dict(reply.headers))
        if reply.status != 200 or not reply.body:
            return reply
        changed = change(reply)
        if changed is None:
            return reply
        hits.changed += 1
        return changed

    return mutation


def _truncated(reply: Reply) -> Reply:
    return Reply(reply.status, reply.body[: len(reply.body) // 2], dict(reply.headers))


def _html(reply: Reply) -> Reply:
    page = b"<!DOCTYPE html><html><body><h1>Sign in to continue</h1></body></html>"
    return Reply(200, page, {"content-type": "text/html; charset=utf-8"})


def _wrong_content_type(reply: Reply) -> Reply:
    return Reply(reply.status, reply.body, {**reply.headers, "content-type": "application/x-unknown"})


def _broken_gzip(reply: Reply) -> Reply:
    return Reply(reply.status, reply.body, {**reply.headers, "content-encoding": "gzip"})


def _session_rewrite(rewrite: Callable[[str], Any], hits: Hits) -> Callable[[Reply], Reply]:
    """The mutation of a ``/v1/realtime`` case: ``rewrite`` applied to each message the session sends (see
    ``RealtimeSession.rewrite``); other answers untouched."""

    def mutation(reply: Reply) -> Reply:
        if not isinstance(reply.upgrade, RealtimeSession):
            return reply
        hits.changed += 1
        reply.upgrade.rewrite = rewrite
        return reply

    return mutation


def _first_delta(change: Callable[[str], Any]) -> Callable[[str], Any]:
    """``change`` applied to the first ``transcription.delta`` of a session, every other message as is."""
    seen = []

    def rewrite(message: str) -> Any:
        if seen or '"transcription.delta"' not in message:
            return [message]
        seen.append(message)
        return change(message)

    return rewrite


def _done(change: Callable[[str], Any]) -> Callable[[str], Any]:
    """``change`` applied to ``transcription.done``, every other message as is."""
    return lambda message: change(message) if '"transcription.done"' in message else [message]


WS_REWRITES: dict[str, Callable[[], Callable[[str], Any]]] = {
    "ws-truncated": lambda: _first_delta(lambda message: [message[: len(message) // 2]]),
    "ws-unknown-event": lambda: lambda message: [json.dumps({"type": "session.heartbeat", "at": 1}), message],
    "ws-binary-garbage": lambda: _first_delta(lambda message: ["[1, 2, 3]", message]),
    "ws-no-done": lambda: _done(lambda message: [CloseFrame(1000)]),
    "ws-dropped": lambda: _first_delta(lambda message: None),
    "ws-error-event": lambda: _done(
        lambda message: [json.dumps({"type": "error", "error": "engine died", "code": "processing_error"})]
    ),
    "ws-done-without-text": lambda: _done(lambda message: [json.dumps({"type": "transcription.done"})]),
}
"""Hostile ``/v1/realtime`` servers: a message cut in half, an event type the client does not know (it must
give the right result), a JSON value that is not an event, a session closed before ``transcription.done``, a
connection dropped mid-stream, an error in place of ``transcription.done``, a ``done`` without its text."""


@dataclass(frozen=True)
class AnswerCase:
    """One hostile answer.

    Attributes:
        name: the case's id.
        mutation: makes the rewrite (counting into ``Hits``), or ``None`` for a transient-status case.
        status: a transient status answered once on each of the call's task paths with ``retry_after``;
            with ``every_path``, once on every path the call requests (discovery and probes included),
            the statuses of ``TRANSIENT_STATUSES`` in turn.
        retry_after: the ``Retry-After`` header of those statuses.
        every_path: the status hits every path once (else only the call's task paths, the POSTs).
        must_succeed: only the right result is accepted (a retried transient failure).
        second_only: the rewrite hits the second answer alone (the first one set the width).
    """

    name: str
    mutation: Callable[[Hits], Callable[[Reply], Reply]] | None = None
    status: int | None = None
    retry_after: str | None = None
    every_path: bool = False
    must_succeed: bool = False
    second_only: bool = False
    notes: str = field(default="", compare=False)

    def apply(self, fake: FakeVLLM, paths: Sequence[str], hits: Hits) -> None:
        """Arm ``fake`` for one call that requested ``paths`` from a clean server."""
        every = list(dict.fromkeys(paths))
        tasks = [p for p in every if p not in DISCOVERY] or every  # server_info's are all discovery
        if self.mutation is not None:
            once = {"times": 1, "after": 1} if self.second_only else {"times": None}
            fake.mutate(self.mutation(hits), path=tasks, **once)
            return
        assert self.status is not None
        targets = every if self.every_path else tasks
        for number, path in enumerate(targets):
            status = TRANSIENT_STATUSES[number % len(TRANSIENT_STATUSES)] if self.every_path else self.status
            wait = "0" if status == 429 and self.retry_after is None else self.retry_after
            fake.fail(status, path=path, times=1, retry_after=wait)
        hits.changed = len(targets)


def _rows_case(name: str, rewrite: Rewrite, binary: Binary, token: str = "") -> AnswerCase:
    return AnswerCase(name, mutation=lambda hits: _rows_rewrite(rewrite, binary, hits, token))


def _body_case(name: str, change: Callable[[Reply], Reply | None]) -> AnswerCase:
    return AnswerCase(name, mutation=lambda hits: _body_rewrite(change, hits))


ANSWER_CASES: dict[str, AnswerCase] = {
    case.name: case
    for case in (
        _rows_case("nan", _non_finite(math.nan), _binary_non_finite(math.nan), "NaN"),
        _rows_case("inf", _non_finite(math.inf), _binary_non_finite(math.inf), "1e999"),
        _rows_case("width", _narrower, _binary_narrower),
        AnswerCase(
            "batch-wider", lambda hits: _rows_rewrite(_wider, _binary_wider, hits, ""), second_only=True
        ),
        _rows_case("row-missing", _row_missing, _binary_missing),
        _rows_case("row-duplicated", _row_duplicated, _binary_duplicated),
        _rows_case("rows-reordered", _rows_reordered, _binary_reordered),
        _body_case("truncated", _truncated),
        _body_case("html-200", _html),
        _body_case("content-type", _wrong_content_type),
        _body_case("broken-gzip", _broken_gzip),
        AnswerCase("transient", status=TRANSIENT_STATUSES[0], every_path=True, must_succeed=True),
        AnswerCase("retry-after-0", status=503, retry_after="0", must_succeed=True),
        AnswerCase("retry-after-negative", status=503, retry_after="-5", must_succeed=True),
        AnswerCase("retry-after-huge", status=429, retry_after="99999999999"),
        AnswerCase(
            "retry-after-date", status=503, retry_after="Wed, 21 Oct 2015 07:28:00 GMT", must_succeed=True
        ),
        AnswerCase("retry-after-garbage", status=503, retry_after="soon, maybe", must_succeed=True),
        *(
            AnswerCase(
                name,
                mutation=lambda hits, make=make: _session_rewrite(make(), hits),  # type: ignore[misc]
                must_succeed=name == "ws-unknown-event",
            )
            for name, make in WS_REWRITES.items()
        ),
    )
}
"""Every hostile answer by name."""

VECTOR_CASES = ("nan", "inf", "width")
ROW_CASES = ("row-missing", "row-duplicated", "rows-reordered")
BODY_CASES = ("truncated", "html-200", "content-type", "broken-gzip")
WS_CASES = tuple(WS_REWRITES)
TRANSIENT_CASES = (
    "transient",
    "retry-after-0",
    "retry-after-negative",
    "retry-after-huge",
    "retry-after-date",
    "retry-after-garbage",
)
