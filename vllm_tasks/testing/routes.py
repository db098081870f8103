"""The fake server's route table and dispatcher: what vLLM mounts, the API key, model names, 404/405.

Every route is a row of :data:`ROUTES`: its methods, the task that mounts it (``None``: always mounted),
its handler, how its body is read and which model check applies. To add a route, write a handler
``(Call) -> Reply`` and add a row.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from . import chat, pooling, realtime, speech
from .content import Vocabulary, aligner_ids
from .inputs import Call, input_texts
from .settings import FakeSettings
from .wire import ReceivedRequest, Refusal, Reply, error_reply, json_reply, not_found, validation_error

Handler = Callable[[Call], Reply]
BodyKind = Literal["none", "json", "form"]
ModelCheck = Literal["none", "pooling", "named"]
"""How a wrong ``model`` is refused: ``pooling`` routes say only that it does not exist; ``named``
routes (generate, transcription, tokenize) list the valid names and set ``param``."""

GUARDED_PREFIXES = ("/v1", "/v2", "/inference", "/cohere")
"""Paths vLLM's ``--api-key`` guards; ``/score``, ``/rerank``, ``/pooling``, ... answer without a key."""


@dataclass(frozen=True)
class Route:
    """One row of the route table."""

    methods: tuple[str, ...]
    task: str | None
    handler: Handler
    body: BodyKind = "json"
    model_check: ModelCheck = "pooling"


# ------------------------------------------------------------------------------ always-mounted routes


def version(call: Call) -> Reply:
    """``GET /version``."""
    return json_reply({"version": call.settings.version})


def models(call: Call) -> Reply:
    """``GET /v1/models``: one model card, shaped as vLLM 0.32 writes it."""
    settings = call.settings
    permission = {
        "id": "modelperm-fake", "object": "model_permission", "created": settings.created,
        "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
        "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False,
        "organization": "*", "group": None, "is_blocking": False,
    }  # fmt: skip
    card = {
        "id": settings.model, "object": "model", "created": settings.created, "owned_by": "vllm",
        "root": settings.root or settings.model, "parent": None, "max_model_len": settings.max_model_len,
        "permission": [permission],
    }  # fmt: skip
    return json_reply({"object": "list", "data": [card]})


def health(call: Call) -> Reply:
    """``GET /health``: 200 with an empty body, or 503 while ``healthy`` is False."""
    return Reply(200 if call.settings.healthy else 503)


def openapi(call: Call) -> Reply:
    """``GET /openapi.json``: the mounted routes (the SDK's list of what the server serves), the schema's
    own route left out as FastAPI leaves it out."""
    if not call.settings.openapi:
        return not_found()
    paths = {
        path: {method.lower(): {"summary": route.handler.__name__} for method in route.methods}
        for path, route in ROUTES.items()
        if mounted(route, call.settings) and path != "/openapi.json"
    }
    return json_reply({"openapi": "3.1.0", "info": {"title": "FakeVLLM", "version": "0.1.0"}, "paths": paths})


def tokenize(call: Call) -> Reply:
    """``POST /tokenize``: the fake tokenizer's ids (and strings with ``return_token_strs``)."""
    chat_form = "prompt" not in call.body and "messages" in call.body
    text = input_texts(call, "prompt")[0]
    if call.settings.aligner:  # a Qwen tokenizer: no special tokens added, the markers kept whole
        ids = aligner_ids(call.vocabulary, text)
    else:
        ids = call.vocabulary.encode(text, special=call.flag("add_special_tokens", not chat_form))
    strings = call.vocabulary.strings(ids) if call.flag("return_token_strs") else None
    return json_reply(
        {
            "count": len(ids),
            "max_model_len": call.settings.max_model_len,
            "tokens": ids,
            "token_strs": strings,
        }
    )


def detokenize(call: Call) -> Reply:
    """``POST /detokenize``: the text of ids the fake tokenizer produced (``[UNK]`` for others)."""
    ids = call.body.get("tokens")
    if not isinstance(ids, list) or not all(isinstance(i, int) and i >= 0 for i in ids):
        raise validation_error("tokens", "list_type", "Input should be a valid list of integers >= 0", ids)
    return json_reply({"prompt": call.vocabulary.decode(ids)})


ROUTES: dict[str, Route] = {
    "/version": Route(("GET",), None, version, "none", "none"),
    "/v1/models": Route(("GET",), None, models, "none", "none"),
    "/health": Route(("GET",), None, health, "none", "none"),
    "/ping": Route(("GET", "POST"), None, health, "none", "none"),
    "/openapi.json": Route(("GET",), None, openapi, "none", "none"),
    "/tokenize": Route(("POST",), None, tokenize, "json", "named"),
    "/detokenize": Route(("POST",), None, detokenize, "json", "named"),
    "/v1/embeddings": Route(("POST",), "embed", pooling.embeddings),
    "/v2/embed": Route(("POST",), "embed_v2", pooling.embed_v2),
    "/score": Route(("POST",), "score", pooling.score),
    "/v1/score": Route(("POST",), "score", pooling.score),
    "/rerank": Route(("POST",), "rerank", pooling.rerank),
    "/v1/rerank": Route(("POST",), "rerank", pooling.rerank),
    "/v2/rerank": Route(("POST",), "rerank", pooling.rerank),
    "/classify": Route(("POST",), "classify", pooling.classify),
    "/pooling": Route(("POST",), "pooling", pooling.pooling),
    "/v1/audio/transcriptions": Route(("POST",), "transcription", speech.transcription, "form", "named"),
    "/v1/audio/translations": Route(("POST",), "translation", speech.translation, "form", "named"),
    "/v1/chat/completions": Route(("POST",), "chat", chat.chat_completions, "json", "named"),
}
"""The routes FakeVLLM serves, by path."""


def mounted(route: Route, settings: FakeSettings) -> bool:
    """Whether ``route`` exists on a server with these settings (its task is served)."""
    return route.task is None or route.task in settings.tasks


# ----------------------------------------------------------------------------------------- dispatch


def answer(request: ReceivedRequest, settings: FakeSettings, vocabulary: Vocabulary) -> Reply:
    """The fake server's answer to ``request``, in vLLM's order of checks: API key, route, method (405 with
    ``Allow``), content type, body, model, then the route's handler. A WebSocket handshake goes to
    :func:`~vllm_tasks.testing.realtime.handshake` after the API key check.
    """
    if settings.api_key and request.path.startswith(GUARDED_PREFIXES) and not authorized(request, settings):
        return json_reply({"error": "Unauthorized"}, 401)
    if realtime.is_upgrade(request):
        return realtime.handshake(request, settings)
    route = ROUTES.get(request.path)
    if route is None or not mounted(route, settings):
        return not_found()
    if request.method not in route.methods:
        return json_reply({"detail": "Method Not Allowed"}, 405, {"allow": ", ".join(route.methods)})
    try:
        call = Call(request, read_body(request, route), settings, vocabulary)
        check_model(call, route)
        return route.handler(call)
    except Refusal as refusal:
        return refusal.reply


def authorized(request: ReceivedRequest, settings: FakeSettings) -> bool:
    """Whether the request carries ``Authorization: Bearer <api_key>`` (scheme matched case-insensitively)."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip(), settings.api_key or "")


def read_body(request: ReceivedRequest, route: Route) -> dict[str, Any]:
    """The request's fields: its JSON object or its form; vLLM's 400 for another content type or bad JSON."""
    if route.body == "none":
        return {}
    if route.body == "form":
        return dict(request.form)
    if not request.headers.get("content-type", "").startswith("application/json"):
        raise Refusal(
            error_reply(
                400,
                "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed",
                type="Bad Request",
            )
        )
    if not isinstance(request.json, dict):
        raise validation_error(
            "", "model_attributes_type", "Input should be a valid dictionary or object", None
        )
    return request.json


def check_model(call: Call, route: Route) -> None:
    """vLLM's 404 for a ``model`` that is not the served one (an empty or missing name means it)."""
    name = call.request.model
    served = call.settings.model
    if route.model_check == "none" or name is None or name == served:
        return
    if route.model_check == "named":
        message = f"The model `{name}` does not exist. Valid aliases: {served}."
        raise Refusal(error_reply(404, message, param="model"))
    raise Refusal(error_reply(404, f"The model `{name}` does not exist."))
