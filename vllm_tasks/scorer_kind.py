"""Which kind of model serves ``/score`` and ``/rerank`` (a :class:`~vllm_tasks.types.scoring.ScorerKind`).

No vLLM response names it. The first scoring call per model asks ``POST /pooling`` for a one-word input,
on its own: a vector of length 1 means a one-label classifier (cross-encoder), a longer vector an embedding
model (bi-encoder, cosine), a matrix a token-embedding model (late interaction, MaxSim). When ``/pooling``
refuses, the routes listed by ``/openapi.json`` decide (``/classify`` -> cross-encoder, ``/v1/embeddings``
-> bi-encoder). Servers older than 0.19 answer per token for every model and get a second probe; so does a
model that refuses one input and serves neither route: a listwise reranker (``JinaForRanking``) needs two,
and answers them with one matrix (it read them as one list).
"""

from __future__ import annotations

from typing import Any

import httpx

from .calls import CLIENT_DEFAULT, TimeoutLike
from .server_state import Fact
from .transport import Request
from .types.scoring import ScorerKind
from .types.server import ServerInfo

SCORER_KIND: Fact[str, ScorerKind] = Fact("scorer kind", key="model")
"""What the served model scores with (cross-encoder, bi-encoder, late interaction), probed once per
model with ``/pooling`` (see :func:`scorer_probe_request`)."""

_SCORER_PROBE_INPUT = "a"
_LIST_PROBE_INPUT = ["a", "b"]

# Before this release /pooling without a `task` answers per token for every model (0.12-0.16: the
# token_embed / token_classify output; 0.11: hidden states, whatever the task), so a per-token answer
# does not mean late interaction. 0.19.1 is the first release verified answering with the active task
# (0.17 and 0.18 were not run: they get the two-step probe, which is right either way).
POOLING_ANSWERS_ACTIVE_TASK = "0.19.0"


def scorer_probe_request(
    model: str | None,
    timeout: TimeoutLike = CLIENT_DEFAULT,
    *,
    task: str | None = None,
    listwise: bool = False,
) -> Request:
    """The ``/pooling`` request whose answer tells the scorer kind (see :func:`scorer_from_probe`).

    A one-word input; errors are returned, not raised (``raise_for_status=False``): a refusal only means
    the routes decide.

    Args:
        model: the served model name (``None``: the server's only model).
        timeout: the request's timeout.
        task: a pooling task to ask for (the follow-up probe of old servers, :func:`scorer_from_embed_probe`);
            ``None`` asks for the model's active task.
        listwise: send two inputs instead of one (the follow-up probe for a listwise reranker,
            :func:`scorer_from_list_probe`).

    Examples:
        >>> scorer_probe_request("minilm").json
        {'input': 'a', 'model': 'minilm'}
    """
    body: dict[str, Any] = {"input": _LIST_PROBE_INPUT if listwise else _SCORER_PROBE_INPUT}
    if model:
        body["model"] = model
    if task:
        body["task"] = task
    return Request("POST", "/pooling", json=body, raise_for_status=False, timeout=timeout)


def scorer_from_probe(response: httpx.Response | None, info: ServerInfo) -> ScorerKind | None:
    """Which kind of model serves ``/score`` and ``/rerank``, from a ``/pooling`` answer and the routes.

    Args:
        response: the answer to :func:`scorer_probe_request` (``None`` if not asked).
        info: the server's description (its version and its ``/openapi.json`` routes).

    Returns:
        ``CROSS_ENCODER`` for a one-element vector (or when ``/classify`` is served), ``BI_ENCODER`` for a
        longer vector (or when ``/v1/embeddings`` is served), ``LATE_INTERACTION`` for a per-token matrix,
        ``UNKNOWN`` otherwise. On a server older than 0.19, whose ``/pooling`` answers per token for every
        model, a per-token matrix one wide is a cross-encoder's ``token_classify`` output, and a wider one
        is ``None``: ask again with ``task="embed"`` and read it with :func:`scorer_from_embed_probe`.
    """
    data = _probe_data(response)
    if data is not None:
        if isinstance(data[0], list):
            version = info.parsed_version
            if not version.known or version.at_least(POOLING_ANSWERS_ACTIVE_TASK):
                return ScorerKind.LATE_INTERACTION
            return ScorerKind.CROSS_ENCODER if len(data[0]) == 1 else None
        if len(data) == 1 or info.serves_route("/classify"):
            return ScorerKind.CROSS_ENCODER
        return ScorerKind.BI_ENCODER
    if info.serves_route("/classify"):
        return ScorerKind.CROSS_ENCODER
    if info.serves_route("/v1/embeddings"):
        return ScorerKind.BI_ENCODER
    return ScorerKind.UNKNOWN


def scorer_from_embed_probe(response: httpx.Response | None) -> ScorerKind:
    """The scorer kind from an old server's answer to ``/pooling`` with ``task="embed"``.

    Asked when :func:`scorer_from_probe` returned ``None`` (a server older than 0.19 answered per token).

    Returns:
        ``BI_ENCODER`` for one vector (the model embeds), ``LATE_INTERACTION`` for a refusal (it only has
        per-token embeddings), ``UNKNOWN`` when the server answers per token again (vLLM 0.11 ignores
        ``task``: its answers cannot tell).

    Examples:
        >>> scorer_from_embed_probe(httpx.Response(200, json={"data": [{"data": [0.1, 0.2]}]}))
        <ScorerKind.BI_ENCODER: 'bi-encoder'>
    """
    data = _probe_data(response)
    if data is not None:
        return ScorerKind.UNKNOWN if isinstance(data[0], list) else ScorerKind.BI_ENCODER
    if response is not None and response.status_code == 400:
        return ScorerKind.LATE_INTERACTION
    return ScorerKind.UNKNOWN


def needs_list_probe(kind: ScorerKind | None, response: httpx.Response | None) -> bool:
    """Whether to ask :func:`scorer_probe_request` with ``listwise=True``: the single input was refused (400)
    and the routes did not tell the kind (a listwise reranker serves only ``/score``, ``/rerank`` and
    ``/pooling``, and needs at least two inputs)."""
    return kind is ScorerKind.UNKNOWN and response is not None and response.status_code == 400


def scorer_from_list_probe(response: httpx.Response | None) -> ScorerKind:
    """``LISTWISE`` when two inputs came back as one per-token matrix (the model read them as one list),
    else ``UNKNOWN``.

    Examples:
        >>> scorer_from_list_probe(httpx.Response(200, json={"data": [{"data": [[0.1], [0.2]]}]}))
        <ScorerKind.LISTWISE: 'listwise'>
    """
    if response is None or response.status_code != 200:
        return ScorerKind.UNKNOWN
    try:
        items = response.json()["data"]
    except (ValueError, KeyError, TypeError):
        return ScorerKind.UNKNOWN
    data = _probe_data(response)
    listwise = isinstance(items, list) and len(items) == 1 and data is not None and isinstance(data[0], list)
    return ScorerKind.LISTWISE if listwise else ScorerKind.UNKNOWN


def _probe_data(response: httpx.Response | None) -> list[Any] | None:
    """The first item's ``data`` of a 200 ``/pooling`` answer, when it is a non-empty list."""
    if response is None or response.status_code != 200:
        return None
    try:
        data = response.json()["data"][0]["data"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return data if isinstance(data, list) and data else None
