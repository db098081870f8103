"""Server discovery, readiness and probing over the asynchronous transport.

The parsing of each answer is pure code in ``vllm_tasks.discovery``; this module only sends.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from .. import defaults
from ..discovery import (
    advisories_for,
    classify_probe,
    missing_processor_message,
    ngram_check_request,
    parse_models_response,
    parse_openapi_response,
    parse_version_response,
    probe_requests,
)
from ..errors import APIConnectionError, APIError, BadRequestError, ServerNotReady
from ..ocr.presets import recognised
from ..score_template import template_advisory, template_check_requests, template_missing
from ..tasks import TASK_ROUTES
from ..transport import Request, answered
from ..types.server import Advisory, ProbeReport, ServerInfo, TaskStatus
from .transport import AsyncTransport


async def discover(transport: AsyncTransport, base_url: str, *, strict: bool = True) -> ServerInfo:
    """Read ``/version``, ``/v1/models`` and ``/openapi.json`` (concurrently) into a ``ServerInfo``.

    Args:
        transport: the client's transport.
        base_url: recorded in the result.
        strict: when True a failing ``/v1/models`` raises (e.g. :class:`AuthenticationError`), and so
            does an overloaded answer (429, 503, a gateway's) of any of the three after its retries,
            which would say nothing about the server; when False (probing) they give an empty model
            list, no version or no routes.
    """
    version_response, models_response, openapi_response = await transport.send_all(
        [
            Request("GET", "/version", raise_for_status=False),
            Request("GET", "/v1/models", raise_for_status=strict),
            Request("GET", "/openapi.json", raise_for_status=False),
        ],
        concurrency=3,
    )
    if strict:
        version_response, openapi_response = answered(version_response), answered(openapi_response)
    return ServerInfo(
        base_url=base_url,
        version=parse_version_response(version_response),
        models=parse_models_response(models_response),
        routes=parse_openapi_response(openapi_response),
    )


async def wait_until_ready(transport: AsyncTransport, base_url: str, timeout: float, interval: float) -> None:
    """Poll ``GET /health`` until it answers 200, tolerating refused connections and 503 while loading.

    Raises:
        ServerNotReady: when ``timeout`` seconds pass, with the last cause seen.
    """
    deadline = time.monotonic() + timeout
    last_cause: str | None = None
    while True:
        remaining = deadline - time.monotonic()
        health = Request(
            "GET", "/health", raise_for_status=False, retry=False, timeout=max(0.5, min(5.0, remaining))
        )
        try:
            response = await transport.send(health)
        except APIConnectionError as error:
            last_cause = str(error)
        else:
            if response.status_code == 200:
                return
            last_cause = f"/health answered HTTP {response.status_code}"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ServerNotReady(f"{base_url} was not ready within {timeout:g} s", last_cause)
        await transport.sleep(min(interval, remaining))


async def probe(transport: AsyncTransport, base_url: str) -> ProbeReport:
    """Find which tasks the server serves, with advisories for known pitfalls.

    Each task's route gets its cheapest request (``{}`` or a one-character input); the status says
    whether the task is served (200/400/422), not served (404), inactive (501) or guarded (401).

    Raises:
        APIConnectionError: when the server cannot be reached at all.
    """
    info = await discover(transport, base_url, strict=False)
    routes = list(TASK_ROUTES.values())
    responses = await transport.send_all(probe_requests(routes), concurrency=defaults.PROBE_CONCURRENCY)
    tasks = tuple(classify_probe(route, response) for route, response in zip(routes, responses, strict=True))
    advisories = advisories_for(info, tasks)
    ngram_processor: bool | None = None
    chat_served = any(t.task == "chat" and t.status is TaskStatus.SERVED for t in tasks)
    preset = recognised(info, None)
    if chat_served and preset is not None and preset.server_check is not None:
        try:
            ngram_processor = await check_ngram_processor(transport)
        except APIError:
            ngram_processor = None
        if ngram_processor is False:
            message = missing_processor_message(preset.server_check)
            advisories.append(Advisory(id="ocr-ngram-processor-missing", message=message))
    bare_pairs: bool | None = None
    served = {t.task for t in tasks if t.status is TaskStatus.SERVED}
    if {"rerank", "classify"} <= served:  # a cross-encoder: its active task is classify
        bare_pairs = await check_score_template(transport)
        if bare_pairs:
            advisories.append(template_advisory(info.models[0].id if info.models else None, info))
    return ProbeReport(
        server=info,
        tasks=tasks,
        advisories=tuple(advisories),
        ngram_processor=ngram_processor,
        score_template_missing=bare_pairs,
    )


async def check_score_template(transport: AsyncTransport, model: str | None = None) -> bool | None:
    """Whether the server's cross-encoder reads pairs without a score template (see score_template.py):
    one ``/rerank`` of one pair and two ``/tokenize``, sent one after the other.

    Returns:
        True (no template: Qwen3-Reranker without ``--chat-template``), False, or None (an answer failed).

    Raises:
        APIConnectionError: when the server cannot be reached.
    """
    requests = template_check_requests(model, defaults.PROBE_TIMEOUT)
    return template_missing(await transport.send_all(requests, concurrency=1))


async def check_ngram_processor(
    transport: AsyncTransport, model: str | None = None, *, extra_headers: Mapping[str, str] | None = None
) -> bool | None:
    """Whether the server runs DeepSeek-OCR's n-gram logits processor (one text-only request, < 0.1 s).

    A loaded processor rejects ``vllm_xargs {"ngram_size": 0}`` with 400 ("`ngram_size` has to be a
    strictly positive integer"); a server without it ignores ``vllm_xargs`` and answers 200.

    Returns:
        True (loaded), False (``vllm_xargs`` ignored), or None (another 400: inconclusive).

    Raises:
        EndpointNotServed: the server's model does not serve chat completions.
        APIError: for other failures.
    """
    try:
        await transport.send(ngram_check_request(model, extra_headers, defaults.PROCESSOR_CHECK_TIMEOUT))
    except BadRequestError as error:
        return True if "ngram_size" in error.message else None
    return False
