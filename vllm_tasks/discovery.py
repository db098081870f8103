"""Server discovery and probing, the pure parts: the requests to send and how to read the answers.

The sending is ``vllm_tasks/_async/discovery.py`` (and its generated sync twin).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from . import defaults
from .responses import json_object, malformed, validated
from .server_errors import parse_error_body
from .server_state import Fact
from .tasks import TASK_ROUTES, TaskRoute
from .transport import Request
from .types.server import Advisory, ModelCard, ServerInfo, TaskProbe, TaskStatus

MODELS_PATH = "/v1/models"


def _json_body(response: httpx.Response) -> dict[str, Any] | None:
    """The JSON object of a 200 response; ``None`` for an error status or a body that is not an object."""
    if response.status_code != 200:
        return None
    try:
        payload = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return None
    return payload if isinstance(payload, dict) else None


def parse_version_response(response: httpx.Response) -> str | None:
    """The ``version`` string of a ``GET /version`` response, or ``None`` if hidden or malformed."""
    version = (_json_body(response) or {}).get("version")
    return version if isinstance(version, str) and version.strip() else None


def parse_models_response(response: httpx.Response) -> tuple[ModelCard, ...]:
    """The model cards of a ``GET /v1/models`` response (empty for an error status).

    Raises:
        UnexpectedResponse: a 2xx that is not vLLM's model list (a redirect, an HTML page, an empty
            body, a card without a string ``id`` or with fields of the wrong type).
        APIStatusError: a 200 whose body is vLLM's error object.
    """
    if response.status_code >= 400:
        return ()
    cards = json_object(response, MODELS_PATH).get("data")
    if not isinstance(cards, list) or not all(isinstance(card, dict) for card in cards):
        raise malformed(response, MODELS_PATH, "not a model list (no `data` list of objects)")
    return tuple(validated(response, MODELS_PATH, ModelCard, card) for card in cards)


def parse_openapi_response(response: httpx.Response) -> frozenset[str] | None:
    """The mounted paths listed by ``GET /openapi.json``; ``None`` when docs are disabled."""
    paths = (_json_body(response) or {}).get("paths")
    return frozenset(paths) if isinstance(paths, dict) else None


def probe_requests(routes: Sequence[TaskRoute]) -> list[Request]:
    """The cheapest request for each task route (``{}`` or a one-character input), retried as any.

    Errors are returned, not raised: the status says whether the task is served (see
    :func:`classify_probe`).
    """
    return [
        Request(
            "POST",
            route.path,
            json=route.probe_json,
            data={"probe": "1"} if route.probe_json is None else None,
            raise_for_status=False,
            timeout=defaults.PROBE_TIMEOUT,
        )
        for route in routes
    ]


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
    message_for: Callable[[ServerInfo], str] | None = None  # a message naming the served model's fix


def _version_below(info: ServerInfo, version: str) -> bool:
    parsed = info.parsed_version
    return parsed.known and not parsed.at_least(version)


def model_matches(info: ServerInfo, pattern: str, model: str | None = None) -> bool:
    """Whether a served model's name (or its root) matches the regular expression ``pattern``.

    Args:
        info: the server's description (its model cards).
        pattern: the regular expression (case-insensitive).
        model: only this served model (its name itself when no card lists it); ``None``: any.
    """
    cards = [card for card in info.models if model is None or card.id == model]
    names = " ".join(f"{card.id} {card.root or ''}" for card in cards) if cards else (model or "")
    return re.search(pattern, names, re.IGNORECASE) is not None


_QWEN3_LAST_POOLING = r"qwen3[-_]?(reranker|embedding)"

SCORE_TEMPLATE_DIR = "examples/pooling/score/template"
"""Where vLLM keeps its score templates: in its source distribution and repository, not in the wheel."""


@dataclass(frozen=True)
class RerankerTemplate:
    """An LLM-based reranker that vLLM scores right only through its score template (``--chat-template``).

    Without the template vLLM reads each pair as the bare concatenation ``query + document``, and with no
    error the scores mean nothing (``vllm_tasks.score_template`` tells it from token counts).

    Attributes:
        family: the name users know the model by.
        pattern: a regular expression (case-insensitive) over the served model's name or ``/v1/models`` root.
        template: the template's file in :data:`SCORE_TEMPLATE_DIR`.
        flags: the other serve flags (``--hf-overrides`` that turn an original checkpoint into a one-score
            classifier, ``--trust-remote-code``).
    """

    family: str
    pattern: str
    template: str
    flags: str

    @property
    def serve_flags(self) -> str:
        """Every flag the model is served with, its ``--chat-template`` last.

        Examples:
            >>> RERANKER_TEMPLATES[-1].serve_flags
            '--runner pooling --chat-template examples/pooling/score/template/zerank2.jinja'
        """
        return f"{self.flags} --chat-template {SCORE_TEMPLATE_DIR}/{self.template}"

    @property
    def needs_overrides(self) -> bool:
        """Whether an original checkpoint is a one-score classifier only with its ``--hf-overrides``."""
        return "--hf-overrides" in self.flags


def _classifier_overrides(architecture: str, tokens: Sequence[str], **extra: object) -> str:
    overrides = {"architectures": [architecture], "classifier_from_token": list(tokens), **extra}
    return f"--hf-overrides '{orjson.dumps(overrides).decode()}'"


RERANKER_TEMPLATES: tuple[RerankerTemplate, ...] = (
    # vLLM 0.32.0-0.34.0 sdists: examples/pooling/score/using_template_online.py (serve lines),
    # docs/models/pooling_models/scoring.md and specific_models.md; the first match wins.
    RerankerTemplate(
        "Qwen3-VL-Reranker",
        r"qwen3[-_ ]?vl[-_ ]?reranker",
        "qwen3_vl_reranker.jinja",
        "--runner pooling "
        + _classifier_overrides(
            "Qwen3VLForSequenceClassification", ("no", "yes"), is_original_qwen3_reranker=True
        ),
    ),
    RerankerTemplate(
        "Qwen3-Reranker (converted to sequence classification)",
        r"qwen3[-_ ]?reranker.*seq[-_]?cls",
        "qwen3_reranker.jinja",
        "--runner pooling",
    ),
    RerankerTemplate(
        "Qwen3-Reranker",
        r"qwen3[-_ ]?reranker",
        "qwen3_reranker.jinja",
        "--runner pooling --convert classify "
        + _classifier_overrides(
            "Qwen3ForSequenceClassification", ("no", "yes"), is_original_qwen3_reranker=True
        ),
    ),
    RerankerTemplate(
        "bge-reranker-v2-gemma",
        r"bge[-_ ]?reranker[-_ ]?v2[-_ ]?gemma",
        "bge-reranker-v2-gemma.jinja",
        "--runner pooling "
        + _classifier_overrides("GemmaForSequenceClassification", ("Yes",), method="no_post_processing"),
    ),
    RerankerTemplate(
        "mxbai-rerank-v2",
        r"mxbai[-_ ]?rerank[-_ ]?(xsmall|base|large)?[-_ ]?v2",
        "mxbai_rerank_v2.jinja",
        "--runner pooling "
        + _classifier_overrides("Qwen2ForSequenceClassification", ("0", "1"), method="from_2_way_softmax"),
    ),
    RerankerTemplate(
        "Llama Nemotron VL reranker",
        r"nemotron[-_ ]?rerank[-_ ]?vl",
        "nemotron-vl-rerank.jinja",
        "--runner pooling --trust-remote-code",
    ),
    RerankerTemplate(
        "Llama Nemotron reranker",
        r"nemotron[-_ ]?rerank",
        "nemotron-rerank.jinja",
        "--runner pooling --trust-remote-code",
    ),
    RerankerTemplate("zerank-2", r"zerank[-_ ]?2", "zerank2.jinja", "--runner pooling"),
)
"""The rerankers whose score template vLLM ships (``examples/pooling/score/template/``), most specific first.
From vLLM 0.33.0 a checkpoint whose Sentence Transformers config declares its template (a ``CrossEncoder``
with the ``message`` modality, e.g. nvidia/llama-nemotron-rerank-vl-1b-v2 from October 2026) needs no
``--chat-template``: the token-count check sees the template either way."""


def reranker_template(info: ServerInfo, model: str | None = None) -> RerankerTemplate | None:
    """The :data:`RERANKER_TEMPLATES` entry whose pattern the served model's name (or root) matches.

    Args:
        info: the server's description (its model cards).
        model: only this served model (its name itself when no card lists it); ``None``: any.

    Returns:
        The first matching entry, or None for a model that needs no template vLLM ships.

    Examples:
        >>> card = ModelCard(id="BAAI/bge-reranker-v2-gemma")
        >>> info = ServerInfo(base_url="http://h", version=None, models=(card,), routes=None)
        >>> reranker_template(info).template
        'bge-reranker-v2-gemma.jinja'
        >>> reranker_template(info, "BAAI/bge-reranker-v2-m3") is None
        True
    """
    return next((entry for entry in RERANKER_TEMPLATES if model_matches(info, entry.pattern, model)), None)


def _overrides_missing(info: ServerInfo, tasks: dict[str, TaskStatus]) -> bool:
    entry = reranker_template(info)
    return (
        entry is not None
        and entry.needs_overrides
        and tasks.get("classify") is TaskStatus.SERVED
        and tasks.get("rerank") is TaskStatus.NOT_SERVED
    )


def overrides_missing_message(info: ServerInfo) -> str:
    """The advisory for an LLM reranker served as a classifier without its ``--hf-overrides``.

    Examples:
        >>> card = ModelCard(id="Qwen/Qwen3-Reranker-4B")
        >>> info = ServerInfo(base_url="http://h", version=None, models=(card,), routes=None)
        >>> "classifier_from_token" in overrides_missing_message(info)
        True
    """
    entry = reranker_template(info)
    family, flags = (entry.family, entry.serve_flags) if entry else ("This reranker", "its --hf-overrides")
    return (
        f"{family} served with --convert classify but without its --hf-overrides is a two-label classifier "
        f"with an untrained head: /score and /rerank answer 404. Start it with {flags} (docs/scoring.md, "
        '"Serving Qwen3-Reranker").'
    )


ADVISORIES: tuple[_AdvisoryRule, ...] = (
    _AdvisoryRule(
        "last-pooling-chunked-prefill",
        lambda info, _: _version_below(info, "0.26.0") and model_matches(info, _QWEN3_LAST_POOLING),
        "LAST-pooling models such as Qwen3-Reranker and Qwen3-Embedding return wrong scores for long pairs "
        "that are chunk-prefilled on vLLM < 0.26.0; upgrade the server to vLLM >= 0.26.0.",
        "vLLM issue #48901",
    ),
    _AdvisoryRule(
        "qwen3-reranker-overrides-missing", _overrides_missing, "", message_for=overrides_missing_message
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
        Advisory(
            id=rule.id,
            message=rule.message_for(info) if rule.message_for else rule.message,
            reference=rule.reference,
        )
        for rule in ADVISORIES
        if rule.applies(info, statuses)
    ]


NGRAM_PROCESSOR_FLAG = (
    "--logits-processors vllm.model_executor.models.deepseek_ocr:NGramPerReqLogitsProcessor"
)
"""The server flag that loads DeepSeek-OCR's n-gram repetition guard."""

NGRAM_PROCESSOR: Fact[str, bool | None] = Fact("n-gram processor loaded", key="model")
"""Whether DeepSeek-OCR's n-gram processor is loaded: True, False (``vllm_xargs`` ignored), or None
(the check was inconclusive); learned by ``probe()`` or the first ``ocr()`` call that sends
``vllm_xargs``."""


def ngram_check_request(
    model: str | None, extra_headers: Mapping[str, str] | None, timeout: float
) -> Request:
    """The one-token request that tells whether DeepSeek-OCR's n-gram logits processor is loaded.

    It sends ``vllm_xargs {"ngram_size": 0}`` with ``max_tokens: 1``: a loaded processor rejects it with
    400 ("`ngram_size` has to be a strictly positive integer"); a server without the processor ignores
    ``vllm_xargs`` and answers 200.

    Examples:
        >>> ngram_check_request("ocr", None, 30.0).json["vllm_xargs"]
        {'ngram_size': 0}
    """
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": "."}],
        "max_tokens": 1,
        "vllm_xargs": {"ngram_size": 0},
    }
    if model:
        body["model"] = model
    return Request(
        "POST",
        TASK_ROUTES["chat"].path,
        json=body,
        headers=extra_headers,
        task="chat",
        timeout=timeout,
    )


def missing_processor_message(flag: str = NGRAM_PROCESSOR_FLAG) -> str:
    """The warning text for a server without the n-gram processor loaded by ``flag``.

    Examples:
        >>> "--logits-processors" in missing_processor_message()
        True
    """
    return (
        "This server ignores vllm_xargs: the OCR model's n-gram repetition guard is not loaded, so tables "
        f"and repeated lines can loop until max_tokens. Start the server with `{flag}` "
        "(and, per the recipe, --no-enable-prefix-caching --mm-processor-cache-gb 0). Pass "
        "require_ngram_processor=True to raise instead."
    )
