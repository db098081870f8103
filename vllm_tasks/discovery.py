"""Server discovery, readiness and probing, written once as operations (see ``vllm_tasks.steps``)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from . import defaults
from .errors import APIConnectionError, APIError, ServerNotReady, parse_error_body
from .steps import Operation, Parallel, Request, Sleep
from .tasks import TASK_ROUTES, TaskRoute
from .types.server import Advisory, ModelCard, ProbeReport, ServerInfo, TaskProbe, TaskStatus


def discover(base_url: str, *, strict: bool = True) -> Operation[ServerInfo]:
    """Read ``/version``, ``/v1/models`` and ``/openapi.json`` (concurrently) into a ``ServerInfo``.

    Args:
        base_url: recorded in the result.
        strict: when True a failing ``/v1/models`` raises (e.g. :class:`AuthenticationError`); when
            False (probing) it yields an empty model list.
    """
    version_response, models_response, openapi_response = yield Parallel(
        [
            Request("GET", "/version", raise_for_status=False),
            Request("GET", "/v1/models", raise_for_status=strict),
            Request("GET", "/openapi.json", raise_for_status=False),
        ],
        concurrency=3,
    )
    return ServerInfo(
        base_url=base_url,
        version=parse_version_response(version_response),
        models=parse_models_response(models_response),
        routes=parse_openapi_response(openapi_response),
    )


def _json_body(response: httpx.Response) -> dict[str, Any] | None:
    """The JSON object of a 200 response; ``None`` for an error status or a body that is not an object."""
    if response.status_code != 200:
        return None
    try:
        payload = response.json()
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def parse_version_response(response: httpx.Response) -> str | None:
    """The ``version`` string of a ``GET /version`` response, or ``None`` if hidden or malformed."""
    version = (_json_body(response) or {}).get("version")
    return version if isinstance(version, str) and version.strip() else None


def parse_models_response(response: httpx.Response) -> tuple[ModelCard, ...]:
    """The model cards of a ``GET /v1/models`` response (empty for an error or malformed body)."""
    cards = (_json_body(response) or {}).get("data")
    if not isinstance(cards, list):
        return ()
    return tuple(ModelCard.model_validate(card) for card in cards if isinstance(card, dict) and "id" in card)


def parse_openapi_response(response: httpx.Response) -> frozenset[str] | None:
    """The mounted paths listed by ``GET /openapi.json``; ``None`` when docs are disabled."""
    paths = (_json_body(response) or {}).get("paths")
    return frozenset(paths) if isinstance(paths, dict) else None


def wait_until_ready(
    base_url: str, timeout: float, interval: float = defaults.HEALTH_POLL_INTERVAL
) -> Operation[None]:
    """Poll ``GET /health`` until it answers 200, tolerating refused connections and 503 while loading.

    Raises:
        ServerNotReady: when ``timeout`` seconds pass, with the last cause seen.
    """
    deadline = time.monotonic() + timeout
    last_cause: str | None = None
    while True:
        remaining = deadline - time.monotonic()
        try:
            response = yield Request(
                "GET",
                "/health",
                raise_for_status=False,
                retry=False,
                timeout=max(0.5, min(5.0, remaining)),
            )
        except APIConnectionError as error:
            last_cause = str(error)
        else:
            if response.status_code == 200:
                return
            last_cause = f"/health answered HTTP {response.status_code}"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ServerNotReady(f"{base_url} was not ready within {timeout:g} s", last_cause)
        yield Sleep(min(interval, remaining))


def probe(base_url: str) -> Operation[ProbeReport]:
    """Find which tasks the server serves, with advisories for known pitfalls.

    Each task's route gets its cheapest request (``{}`` or a one-character input); the status says
    whether the task is served (200/400/422), not served (404), inactive (501) or guarded (401).

    Raises:
        APIConnectionError: when the server cannot be reached at all.
    """
    info = yield from discover(base_url, strict=False)
    routes = list(TASK_ROUTES.values())
    requests = [
        Request(
            "POST",
            route.path,
            json=route.probe_json,
            data={"probe": "1"} if route.probe_json is None else None,
            raise_for_status=False,
            retry=False,
            timeout=defaults.PROBE_TIMEOUT,
        )
        for route in routes
    ]
    responses = yield Parallel(requests, concurrency=3)
    tasks = tuple(classify_probe(route, response) for route, response in zip(routes, responses, strict=True))
    advisories = advisories_for(info, tasks)
    ngram_processor: bool | None = None
    chat_served = any(t.task == "chat" and t.status is TaskStatus.SERVED for t in tasks)
    if chat_served and _model_matches(info, r"ocr"):
        from .ocr import check_ngram_processor, missing_processor_message

        try:
            ngram_processor = yield from check_ngram_processor(None)
        except APIError:
            ngram_processor = None
        if ngram_processor is False:
            advisories.append(Advisory(id="ocr-ngram-processor-missing", message=missing_processor_message()))
    return ProbeReport(
        server=info, tasks=tasks, advisories=tuple(advisories), ngram_processor=ngram_processor
    )


def classify_probe(route: TaskRoute, response: httpx.Response) -> TaskProbe:
    """Turn one probe response into a :class:`TaskProbe`."""
    status = response.status_code
    message, _, _ = parse_error_body(response) if status >= 400 else ("", None, None)
    if status in (200, 400, 422):
        outcome = TaskStatus.SERVED
    elif status == 404 and message == "Not Found":
        outcome = TaskStatus.NOT_SERVED
    elif status == 501 and "does not support" in message.lower():
        outcome = TaskStatus.INACTIVE
    elif status == 401:
        outcome = TaskStatus.UNAUTHORIZED
    else:
        outcome = TaskStatus.ERROR
    detail = message if outcome is not TaskStatus.SERVED and message else None
    return TaskProbe(task=route.task, path=route.path, status=outcome, http_status=status, detail=detail)


@dataclass(frozen=True)
class _AdvisoryRule:
    id: str
    applies: Callable[[ServerInfo, dict[str, TaskStatus]], bool]
    message: str
    reference: str | None = None


def _version_below(info: ServerInfo, version: str) -> bool:
    parsed = info.parsed_version
    return parsed.known and not parsed.at_least(version)


def _model_matches(info: ServerInfo, pattern: str) -> bool:
    names = " ".join(f"{card.id} {card.root or ''}" for card in info.models)
    return re.search(pattern, names, re.IGNORECASE) is not None


_QWEN3_LAST_POOLING = r"qwen3[-_]?(reranker|embedding)"

ADVISORIES: tuple[_AdvisoryRule, ...] = (
    _AdvisoryRule(
        "last-pooling-chunked-prefill",
        lambda info, _: _version_below(info, "0.26.0") and _model_matches(info, _QWEN3_LAST_POOLING),
        "LAST-pooling models such as Qwen3-Reranker and Qwen3-Embedding return wrong scores for long pairs "
        "that are chunk-prefilled on vLLM < 0.26.0; upgrade the server to vLLM >= 0.26.0.",
        "vLLM issue #48901",
    ),
    _AdvisoryRule(
        "dimensions-unchecked",
        lambda info, tasks: _version_below(info, "0.24.0") and tasks.get("embed") is TaskStatus.SERVED,
        "vLLM < 0.24.0 silently returns full-width vectors for an oversized `dimensions`; the SDK checks "
        "the returned width and raises instead.",
        "vLLM PR #46313",
    ),
    _AdvisoryRule(
        "normalize-ignored",
        lambda info, _: (
            info.parsed_version.known
            and info.parsed_version.at_least("0.17.0")
            and _version_below(info, "0.26.0")
        ),
        "This server silently ignores the `normalize` field; the SDK maps normalize= to use_activation.",
    ),
    _AdvisoryRule(
        "flat-error-bodies",
        lambda info, _: _version_below(info, "0.10.1"),
        "vLLM < 0.10.1 answers errors with flat bodies; the SDK parses both shapes.",
    ),
    _AdvisoryRule(
        "server-side-audio-chunking",
        lambda _, tasks: tasks.get("transcription") is TaskStatus.SERVED,
        "For audio over 30 s the server joins chunk texts with a double space, ends a stream once per "
        "chunk and drops verbose_json chunks without timestamps; prefer client-side chunking.",
    ),
    _AdvisoryRule(
        "unguarded-pooling-routes",
        lambda _, tasks: (
            TaskStatus.UNAUTHORIZED in tasks.values()
            and any(
                tasks.get(name) is TaskStatus.SERVED for name in ("score", "rerank", "classify", "pooling")
            )
        ),
        "--api-key guards only /v1 and /v2 routes: /score, /rerank, /pooling, /classify and /tokenize "
        "answer without a key. Put an authenticating proxy in front if that matters.",
    ),
)


def advisories_for(info: ServerInfo, tasks: tuple[TaskProbe, ...]) -> list[Advisory]:
    """The advisories of :data:`ADVISORIES` that apply to this server."""
    statuses = {probe.task: probe.status for probe in tasks}
    return [
        Advisory(id=rule.id, message=rule.message, reference=rule.reference)
        for rule in ADVISORIES
        if rule.applies(info, statuses)
    ]
