"""Scoring operations: ``rerank``, ``score``, ``classify``, ``pool``, and the ``maxsim`` helper.

Written once as operations (see :mod:`vllm_tasks.steps`) and driven by both clients.

Splitting and merging: a long document list is sent as several ``/rerank`` (or ``/score``) requests of at
most ``batch_size`` documents and :data:`MAX_REQUEST_BYTES` of JSON, with bounded concurrency, and the
answers are merged into one global ranking. This is **exact** for every scorer vLLM serves: a
cross-encoder scores each (query, document) pair on its own, a bi-encoder compares two independent
embeddings, and a late-interaction model computes MaxSim per pair. (The listwise ``JinaForRanking`` model
is the exception: it sees all documents of a request at once; use ``batch_size >= len(documents)``.)

Scorer kind: the first call per model asks ``POST /pooling`` for a one-word input, alongside the real
requests: a vector of length 1 means a one-label classifier (cross-encoder), a longer vector an embedding
model (bi-encoder, cosine), a matrix a token-embedding model (late interaction, MaxSim). When ``/pooling``
refuses, the routes listed by ``/openapi.json`` decide (``/classify`` -> cross-encoder, ``/v1/embeddings``
-> bi-encoder).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import Any, Literal

import httpx
import numpy as np
import numpy.typing as npt

from . import gates, images
from .batching import plan_batches
from .calls import resolve_model
from .errors import (
    APIError,
    BadRequestError,
    ContextLengthExceeded,
    InternalServerError,
    InvalidInputError,
    RequestTooLargeError,
)
from .progress import Progress
from .steps import CLIENT_DEFAULT, GetServerInfo, Operation, Parallel, Request, TimeoutLike
from .types.common import Usage
from .types.scoring import (
    ClassificationResult,
    PoolingResult,
    RerankHit,
    RerankResult,
    ScoreResult,
    ScorerKind,
)
from .types.server import ServerInfo

DEFAULT_BATCH_SIZE = 128
"""Documents (or pairs) per ``/rerank``, ``/score``, ``/classify`` or ``/pooling`` request."""
DEFAULT_CONCURRENCY = 4
"""Requests in flight at once when a call is split."""
MAX_REQUEST_BYTES = 8 * 1024 * 1024
"""A request's JSON body stays under this (images make documents large); the Rust front end and many
proxies refuse bodies over 32 MiB."""

Fallback = Literal["error", "client"]
ScoreInput = str | dict[str, Any]
"""What the server accepts for one side of a pair: a string or ``{"content": [content parts]}``."""

POOLING_TASKS = ("embed", "classify", "token_embed", "token_classify", "embed&token_classify", "plugin")
_SCORER_PROBE_INPUT = "a"


# --------------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------------


def to_score_input(item: Any, field: str, text_field: str = "text") -> ScoreInput:
    """Turn one query or document into what ``/score`` and ``/rerank`` accept.

    Args:
        item: a string (text); a mapping with ``text_field`` (its value is the text); a mapping with
            ``content`` (content parts, sent as they are); a single content part (``{"type": ...}``); a
            list/tuple of parts (strings become text parts, images become image parts); or an image
            (path object, bytes, file object, PIL image, numpy array; see :mod:`vllm_tasks.images`). An
            object with a string attribute named ``text_field`` (e.g. ``page_content``) gives its text.
        field: the argument's name for error messages (``documents[3]``).
        text_field: the key (or attribute) holding a document's text.

    Returns:
        A string, or ``{"content": [parts]}`` for multimodal input.

    Raises:
        InvalidInputError: for anything else, naming ``field``.

    Example:
        >>> to_score_input({"text": "Paris", "id": 7}, "documents[0]")
        'Paris'
    """
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        if text_field in item:
            value = item[text_field]
            if not isinstance(value, str):
                raise InvalidInputError(
                    f"{field}[{text_field!r}]", value, "must be a string", "Put the document's text there."
                )
            return value
        if "content" in item:
            content = item["content"]
            if isinstance(content, str):
                return {"content": [{"type": "text", "text": content}]}
            if isinstance(content, list | tuple) and content:
                return {
                    "content": [_to_part(part, f"{field}.content[{j}]") for j, part in enumerate(content)]
                }
            raise InvalidInputError(
                f"{field}.content", content, "must be a non-empty list of content parts", ""
            )
        if "type" in item:
            return {"content": [_to_part(item, field)]}
        raise InvalidInputError(
            field,
            item,
            f"is a mapping without a {text_field!r} or 'content' key",
            f"Pass text_field='<key holding the text>' (now {text_field!r}), or {{'content': [parts]}}.",
        )
    if isinstance(item, list | tuple):
        if not item:
            raise InvalidInputError(field, item, "is an empty list of content parts", "")
        return {"content": [_to_part(part, f"{field}[{j}]") for j, part in enumerate(item)]}
    if images.is_image(item):
        return {"content": [images.image_content_part(item, field=field)]}
    attribute = getattr(item, text_field, None)
    if isinstance(attribute, str):
        return attribute
    raise InvalidInputError(
        field,
        type(item).__name__,
        "is not a text, a mapping, a list of content parts or an image",
        f"Pass a string, a dict with a {text_field!r} key, or an image (path, bytes, PIL image).",
    )


def _to_part(part: Any, field: str) -> dict[str, Any]:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if isinstance(part, Mapping):
        if "type" not in part:
            raise InvalidInputError(
                field, part, "is a content part without 'type'", "Use {'type': 'text', 'text': ...}."
            )
        return dict(part)
    return images.image_content_part(part, field=field)


def is_multimodal(value: ScoreInput) -> bool:
    """Whether a converted input (see :func:`to_score_input`) carries anything but text parts.

    Multimodal inputs are gated (vLLM >= 0.10.0; >= 0.17.0 on late-interaction models).

    Example:
        >>> is_multimodal({"content": [{"type": "image_url", "image_url": {"url": "https://x/a.png"}}]})
        True
    """
    if isinstance(value, str):
        return False
    return any(part.get("type") != "text" for part in value["content"])


def _as_list(value: Any, field: str) -> list[Any]:
    if isinstance(value, str | bytes | Mapping) or value is None:
        raise InvalidInputError(field, value, "must be a list", f"Wrap a single item: {field}=[item].")
    try:
        return list(value)
    except TypeError as error:
        raise InvalidInputError(field, type(value).__name__, "must be a list", "") from error


def _is_single(value: Any) -> bool:
    """A score side given as one input rather than a list of inputs."""
    return not isinstance(value, list | tuple) and not (
        isinstance(value, Iterable)
        and not isinstance(value, str | bytes | Mapping)
        and not images.is_image(value)
    )


def _check_int(field: str, value: int | None, minimum: int, fix: str = "") -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInputError(field, value, f"must be an integer >= {minimum}", fix)


def _check_common(
    *,
    batch_size: int,
    concurrency: int,
    truncate_prompt_tokens: int | None,
    extra_body: Mapping[str, Any] | None,
) -> None:
    _check_int("batch_size", batch_size, 1)
    _check_int("concurrency", concurrency, 1)
    _check_int(
        "truncate_prompt_tokens", truncate_prompt_tokens, -1, "Use -1 for the model's maximum, or None."
    )
    if extra_body is not None and not isinstance(extra_body, Mapping):
        raise InvalidInputError("extra_body", extra_body, "must be a mapping", "Pass a dict of fields.")


def _json_size(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode()) + 8
    return len(json.dumps(value)) + 8


def _body(common: Mapping[str, Any], extra_body: Mapping[str, Any] | None, **fields: Any) -> dict[str, Any]:
    body = {key: value for key, value in common.items() if value is not None}
    body.update({key: value for key, value in fields.items() if value is not None})
    if extra_body:
        body.update(extra_body)
    return body


def _max_model_len(info: ServerInfo, model: str | None) -> int | None:
    """The context length of ``model`` (a LoRA card: its base model's), when the server states it."""
    try:
        card = info.model_card(model)
    except KeyError:
        return None
    if card.max_model_len is None and card.parent is not None:
        return _max_model_len(info, card.parent)
    return card.max_model_len


def _request(
    path: str,
    body: dict[str, Any],
    task: Any,
    extra_headers: Mapping[str, str] | None,
    timeout: TimeoutLike,
) -> Request:
    return Request("POST", path, json=body, headers=extra_headers, timeout=timeout, task=task)


def _json(response: httpx.Response, what: str) -> dict[str, Any]:
    try:
        payload = response.json()
    except ValueError as error:
        raise APIError(f"{what}: the server's answer is not JSON: {response.text[:200]!r}") from error
    if not isinstance(payload, dict):
        raise APIError(f"{what}: unexpected answer {str(payload)[:200]!r}")
    return payload


def _usage(payload: Mapping[str, Any]) -> Usage:
    usage = payload.get("usage")
    return Usage.model_validate(usage) if isinstance(usage, Mapping) else Usage()


# --------------------------------------------------------------------------------------------------
# Scorer kind
# --------------------------------------------------------------------------------------------------


def scorer_probe_request(model: str | None, timeout: TimeoutLike = CLIENT_DEFAULT) -> Request:
    """The ``/pooling`` request whose answer tells the scorer kind (see :func:`scorer_from_probe`).

    A one-word input; errors are returned, not raised (``raise_for_status=False``): a refusal only means
    the routes decide.

    Example:
        >>> scorer_probe_request("minilm").json
        {'input': 'a', 'model': 'minilm'}
    """
    body: dict[str, Any] = {"input": _SCORER_PROBE_INPUT}
    if model:
        body["model"] = model
    return Request("POST", "/pooling", json=body, raise_for_status=False, timeout=timeout)


def scorer_from_probe(response: httpx.Response | None, info: ServerInfo) -> ScorerKind:
    """Which kind of model serves ``/score`` and ``/rerank``, from a ``/pooling`` answer and the routes.

    Args:
        response: the answer to :func:`scorer_probe_request` (``None`` if not asked).
        info: the server's description (its ``/openapi.json`` routes are the fallback signal).

    Returns:
        ``LATE_INTERACTION`` for a per-token matrix; ``CROSS_ENCODER`` for a one-element vector (or when
        ``/classify`` is served); ``BI_ENCODER`` for a longer vector (or when ``/v1/embeddings`` is
        served); ``UNKNOWN`` otherwise.

    Example:
        >>> scorer_from_probe(httpx.Response(200, json={"data": [{"data": [0.48]}]}), info)
        <ScorerKind.CROSS_ENCODER: 'cross-encoder'>
    """
    if response is not None and response.status_code == 200:
        try:
            data = response.json()["data"][0]["data"]
        except (ValueError, KeyError, IndexError, TypeError):
            data = None
        if isinstance(data, list) and data:
            if isinstance(data[0], list):
                return ScorerKind.LATE_INTERACTION
            if len(data) == 1 or info.serves_route("/classify"):
                return ScorerKind.CROSS_ENCODER
            return ScorerKind.BI_ENCODER
    if info.serves_route("/classify"):
        return ScorerKind.CROSS_ENCODER
    if info.serves_route("/v1/embeddings"):
        return ScorerKind.BI_ENCODER
    return ScorerKind.UNKNOWN


def scorer_kind_op(
    model: str | None = None,
    *,
    cache: MutableMapping[str, ScorerKind] | None = None,
    timeout: TimeoutLike = CLIENT_DEFAULT,
) -> Operation[ScorerKind]:
    """Find (or read from ``cache``) which kind of scorer the server's model is.

    Args:
        model: the served model name; ``None`` for the server's default.
        cache: a per-client mapping ``model -> kind``, filled by this operation.
        timeout: for the ``/pooling`` probe.

    Returns:
        The :class:`ScorerKind`.

    Example:
        >>> client._run(scorer_kind_op("minilm-rerank", cache={}))
        <ScorerKind.CROSS_ENCODER: 'cross-encoder'>
    """
    info: ServerInfo = yield GetServerInfo()
    name = resolve_model(info, model)
    key = name or ""
    if cache is not None and key in cache:
        return cache[key]
    response = yield scorer_probe_request(name, timeout)
    kind = scorer_from_probe(response, info)
    if cache is not None:
        cache[key] = kind
    return kind


# --------------------------------------------------------------------------------------------------
# Token limits (server-side from vLLM 0.20.0, else client-side via /tokenize + /detokenize)
# --------------------------------------------------------------------------------------------------


def _token_limits(
    info: ServerInfo,
    *,
    max_tokens_per_doc: int | None,
    max_tokens_per_query: int | None,
    fallback: Fallback,
    model: str | None = None,
) -> tuple[dict[str, int], dict[str, int]]:
    """Split the limits into (sent to the server, applied by the client); raise when neither works."""
    if fallback not in ("error", "client"):
        raise InvalidInputError("max_tokens_per_doc_fallback", fallback, "must be 'error' or 'client'", "")
    server: dict[str, int] = {}
    client: dict[str, int] = {}
    max_len = _max_model_len(info, model)
    for name, value in (
        ("max_tokens_per_doc", max_tokens_per_doc),
        ("max_tokens_per_query", max_tokens_per_query),
    ):
        _check_int(name, value, 0, "Use 0 or None for no limit.")
        if not value:
            continue
        if max_len is not None and value >= max_len:
            raise InvalidInputError(
                name,
                value,
                f"must be less than the model's max_model_len ({max_len})",
                f"Use a value below {max_len}, or None for no limit.",
            )
        if gates.supports(info, name):
            server[name] = value
        elif fallback == "client":
            client[name] = value
        else:
            gates.require(info, [name])
    return server, client


def truncate_texts_op(
    texts: Sequence[str],
    limit: int,
    *,
    model: str | None,
    concurrency: int = DEFAULT_CONCURRENCY,
    extra_headers: Mapping[str, str] | None = None,
    timeout: TimeoutLike = CLIENT_DEFAULT,
) -> Operation[list[str]]:
    """Cut each text to its first ``limit`` tokens with the server's tokenizer.

    ``POST /tokenize`` (without special tokens) counts each text; texts over the limit are rebuilt from
    their first ``limit`` tokens with ``POST /detokenize``. This is the client-side stand-in for
    ``max_tokens_per_doc`` on vLLM < 0.20.0; decoding may normalise the text (an uncased tokenizer
    lowercases it), which the model would have done anyway.

    Args:
        texts: the texts to cut.
        limit: the most tokens each may keep.
        model: the served model whose tokenizer counts.
        concurrency: requests in flight at once.
        extra_headers: extra headers for the requests.
        timeout: per-request timeout.

    Returns:
        The texts, truncated where needed, in order.

    Raises:
        APIStatusError: when ``/tokenize`` or ``/detokenize`` fails.

    Example:
        >>> client._run(truncate_texts_op(["a very long text ..."], 3, model="minilm"))
        ['a very long']
    """
    requests = [
        _request(
            "/tokenize",
            _body({"model": model}, None, prompt=text, add_special_tokens=False),
            None,
            extra_headers,
            timeout,
        )
        for text in texts
    ]
    responses = yield Parallel(requests, concurrency)
    out = list(texts)
    cut: list[tuple[int, list[int]]] = []
    for index, response in enumerate(responses):
        tokens = _json(response, "/tokenize").get("tokens")
        if isinstance(tokens, list) and len(tokens) > limit:
            cut.append((index, tokens[:limit]))
    if cut:
        detokenized = yield Parallel(
            [
                _request(
                    "/detokenize", _body({"model": model}, None, tokens=tokens), None, extra_headers, timeout
                )
                for _, tokens in cut
            ],
            concurrency,
        )
        for (index, _), response in zip(cut, detokenized, strict=True):
            prompt = _json(response, "/detokenize").get("prompt")
            if isinstance(prompt, str):
                out[index] = prompt
    return out


def _truncate_inputs_op(
    inputs: list[ScoreInput],
    limit: int | None,
    *,
    model: str | None,
    concurrency: int,
    extra_headers: Mapping[str, str] | None,
    timeout: TimeoutLike,
) -> Operation[list[ScoreInput]]:
    if not limit:
        return inputs
    positions = [i for i, value in enumerate(inputs) if isinstance(value, str)]
    texts = [inputs[i] for i in positions]
    truncated = yield from truncate_texts_op(
        [t for t in texts if isinstance(t, str)],
        limit,
        model=model,
        concurrency=concurrency,
        extra_headers=extra_headers,
        timeout=timeout,
    )
    out = list(inputs)
    for position, text in zip(positions, truncated, strict=True):
        out[position] = text
    return out


# --------------------------------------------------------------------------------------------------
# Sending scoring requests (with the scorer probe) and explaining length errors
# --------------------------------------------------------------------------------------------------

LENGTH_HINT = (
    "Cut long documents with max_tokens_per_doc=N (vLLM >= 0.20.0; max_tokens_per_doc_fallback='client' "
    "on older servers), or let the server cut each prompt with truncate_prompt_tokens=-1."
)
QUERY_TOO_LONG_HINT = (
    "vLLM 0.32 answers this when the query alone does not fit the model's context while "
    "max_tokens_per_doc is set; cut the query with max_tokens_per_query=N."
)
_LOCATE_LIMIT = 32


def _send_scoring_op(
    requests: list[Request],
    *,
    info: ServerInfo,
    model: str | None,
    concurrency: int,
    timeout: TimeoutLike,
    scorer_cache: MutableMapping[str, ScorerKind] | None,
    firsts: Sequence[ScoreInput],
    seconds: Sequence[ScoreInput],
    fields: tuple[str, str],
    batch_sizes: Sequence[int] = (),
    show_progress: bool = False,
) -> Operation[tuple[list[httpx.Response], ScorerKind]]:
    """Send ``/rerank`` or ``/score`` requests (plus the scorer probe on first use); explain errors.

    A :class:`ContextLengthExceeded` gets the offending input's position (``input_index``, found with
    ``/tokenize``) and how to cut it; vLLM 0.32's 500 for an over-long query with ``max_tokens_per_doc``
    gets an explanation.
    """
    key = model or ""
    known = scorer_cache.get(key) if scorer_cache is not None else None
    if known is None:
        requests = [*requests, scorer_probe_request(model, timeout)]
    progress = Progress(sum(batch_sizes), enabled=show_progress, description=fields[1])

    def advance(index: int, _: httpx.Response) -> None:
        if index < len(batch_sizes):
            progress.advance(batch_sizes[index])

    try:
        responses: list[httpx.Response] = yield Parallel(requests, concurrency, advance)
    except ContextLengthExceeded as error:
        yield from _locate_too_long_op(
            error,
            firsts,
            seconds,
            fields=fields,
            limit=error.max_model_len or _max_model_len(info, model),
            model=model,
            kind=known,
        )
        raise
    except InternalServerError as error:
        if "sequence to truncate too short" in error.message.lower():
            error.message = f"{error.message} {QUERY_TOO_LONG_HINT}"
            error.args = (error.message,)
        raise
    finally:
        progress.close()
    if known is None:
        known = scorer_from_probe(responses.pop(), info)
        if scorer_cache is not None:
            scorer_cache[key] = known
    return responses, known


def _smaller_batches(batches: Sequence[range], sizes: Sequence[int]) -> tuple[int, int] | None:
    """After a 413 (a proxy's or server's body limit): half the largest batch's count and bytes.

    Returns ``None`` when every batch already holds one item (nothing left to split).
    """
    largest = max(batches, key=len)
    if len(largest) <= 1:
        return None
    heaviest = max(sum(sizes[i] for i in batch) for batch in batches)
    return max(1, len(largest) // 2), max(1, heaviest // 2)


def _locate_too_long_op(
    error: ContextLengthExceeded,
    firsts: Sequence[ScoreInput],
    seconds: Sequence[ScoreInput],
    *,
    fields: tuple[str, str],
    limit: int | None,
    model: str | None,
    kind: ScorerKind | None,
) -> Operation[None]:
    """Name the first input that makes a pair too long (on ``error``), and add how to cut it.

    The longest texts of each side are measured with ``/tokenize``: a document over the limit on its
    own is the culprit for every scorer, then the query; for a cross-encoder (which reads query and
    document as one prompt) the first document whose pair is over the limit.
    """
    found: tuple[str, int] | None = None
    if limit is not None:

        def longest(values: Sequence[ScoreInput]) -> list[int]:
            texts = [i for i, v in enumerate(values) if isinstance(v, str)]
            return sorted(texts, key=lambda i: -len(values[i]))[:_LOCATE_LIMIT]

        first_idx, second_idx = longest(firsts), longest(seconds)
        requests = [
            Request(
                "POST",
                "/tokenize",
                json=_body({"model": model}, None, prompt=values[i]),
                raise_for_status=False,
            )
            for values, indices in ((firsts, first_idx), (seconds, second_idx))
            for i in indices
        ]
        responses: list[httpx.Response] = yield Parallel(requests, concurrency=4)
        counts = [int(r.json().get("count", 0)) if r.status_code == 200 else 0 for r in responses]
        first_counts = dict(zip(first_idx, counts[: len(first_idx)], strict=True))
        second_counts = dict(zip(second_idx, counts[len(first_idx) :], strict=True))
        over_second = [i for i, n in second_counts.items() if n > limit]
        over_first = [i for i, n in first_counts.items() if n > limit]
        if over_second:
            found = (fields[1], min(over_second))
        elif over_first:
            found = (fields[0], min(over_first))
        elif kind not in (ScorerKind.BI_ENCODER, ScorerKind.LATE_INTERACTION):
            # Each count includes the special tokens of a single sequence; a pair shares one start token.
            pairs = [
                i
                for i, n in second_counts.items()
                if n + first_counts.get(i if len(firsts) > 1 else 0, 0) - 1 > limit
            ]
            if pairs:
                found = (fields[1], min(pairs))
    prefix = ""
    if found is not None:
        field, index = found
        prefix = f"{field} is too long: " if field == "query" else f"{field}[{index}] is too long: "
        if field in ("documents", "text_2"):
            error.input_index = index
    error.message = f"{prefix}{error.message} {LENGTH_HINT}"
    error.args = (error.message,)


# --------------------------------------------------------------------------------------------------
# rerank
# --------------------------------------------------------------------------------------------------


def rerank_op(
    query: Any,
    documents: Iterable[Any],
    *,
    model: str | None = None,
    top_n: int | None = None,
    text_field: str = "text",
    max_tokens_per_doc: int | None = None,
    max_tokens_per_query: int | None = None,
    max_tokens_per_doc_fallback: Fallback = "error",
    instruction: str | None = None,
    use_activation: bool | None = None,
    truncate_prompt_tokens: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    concurrency: int = DEFAULT_CONCURRENCY,
    show_progress: bool = False,
    extra_body: Mapping[str, Any] | None = None,
    extra_headers: Mapping[str, str] | None = None,
    timeout: TimeoutLike = CLIENT_DEFAULT,
    scorer_cache: MutableMapping[str, ScorerKind] | None = None,
) -> Operation[RerankResult]:
    """Rank ``documents`` by relevance to ``query`` with ``POST /rerank``.

    Validates everything before sending, gates version-dependent fields, splits the documents into
    requests (``batch_size``, :data:`MAX_REQUEST_BYTES`), sends them ``concurrency`` at a time and merges
    the answers into one global ranking with the caller's documents. The arguments are those of
    ``Client.rerank`` (documented there), plus ``scorer_cache``: a per-client ``model -> ScorerKind``
    mapping that saves the scorer probe after the first call.

    Returns:
        RerankResult: the hits, best first, with the caller's documents.

    Raises:
        InvalidInputError: bad arguments (before any request).
        UnsupportedByServer: a field the server's vLLM version lacks.
        ContextLengthExceeded: a pair is too long (``input_index`` names the document when found).

    Example:
        >>> client._run(rerank_op("capital of France?", ["Paris", "Bananas"], top_n=1)).indices
        [0]
    """
    docs = _as_list(documents, "documents")
    if not docs:
        raise InvalidInputError("documents", docs, "is empty", "Pass at least one document.")
    if not isinstance(text_field, str) or not text_field:
        raise InvalidInputError("text_field", text_field, "must be a non-empty string", "")
    query_input = to_score_input(query, "query", text_field)
    inputs = [to_score_input(doc, f"documents[{i}]", text_field) for i, doc in enumerate(docs)]
    _check_int("top_n", top_n, 0, "Use 0 or None to return every document.")
    _check_common(
        batch_size=batch_size,
        concurrency=concurrency,
        truncate_prompt_tokens=truncate_prompt_tokens,
        extra_body=extra_body,
    )
    if instruction is not None and not isinstance(instruction, str):
        raise InvalidInputError("instruction", instruction, "must be a string", "")

    info: ServerInfo = yield GetServerInfo()
    name = resolve_model(info, model)
    server_limits, client_limits = _token_limits(
        info,
        max_tokens_per_doc=max_tokens_per_doc,
        max_tokens_per_query=max_tokens_per_query,
        fallback=max_tokens_per_doc_fallback,
        model=name,
    )
    features = []
    if instruction is not None:
        features.append("score_instruction")
    if is_multimodal(query_input) or any(is_multimodal(value) for value in inputs):
        features.append("score_multimodal")
        if scorer_cache is not None and scorer_cache.get(name or "") is ScorerKind.LATE_INTERACTION:
            features.append("score_multimodal_late_interaction")
    gates.require(info, features)

    inputs = yield from _truncate_inputs_op(
        inputs,
        client_limits.get("max_tokens_per_doc"),
        model=name,
        concurrency=concurrency,
        extra_headers=extra_headers,
        timeout=timeout,
    )
    truncated_query = yield from _truncate_inputs_op(
        [query_input],
        client_limits.get("max_tokens_per_query"),
        model=name,
        concurrency=1,
        extra_headers=extra_headers,
        timeout=timeout,
    )
    query_input = truncated_query[0]

    common = {
        "model": name,
        "instruction": instruction,
        "use_activation": use_activation,
        "truncate_prompt_tokens": truncate_prompt_tokens,
        **server_limits,
    }
    sizes = [_json_size(value) for value in inputs]
    max_bytes = MAX_REQUEST_BYTES
    while True:
        batches = plan_batches(sizes, batch_size, max_bytes)
        requests = [
            _request(
                "/rerank",
                _body(
                    common,
                    extra_body,
                    query=query_input,
                    documents=[inputs[i] for i in batch],
                    top_n=top_n if top_n and top_n < len(batch) else None,
                ),
                "rerank",
                extra_headers,
                timeout,
            )
            for batch in batches
        ]
        try:
            responses, scorer = yield from _send_scoring_op(
                requests,
                info=info,
                model=name,
                concurrency=concurrency,
                timeout=timeout,
                scorer_cache=scorer_cache,
                firsts=[query_input],
                seconds=inputs,
                fields=("query", "documents"),
                batch_sizes=[len(batch) for batch in batches],
                show_progress=show_progress,
            )
        except RequestTooLargeError:
            smaller = _smaller_batches(batches, sizes)
            if smaller is None:
                raise
            batch_size, max_bytes = smaller
            continue
        break
    return merge_rerank(responses, batches, docs, top_n=top_n, model=name, scorer=scorer)


def merge_rerank(
    responses: Sequence[httpx.Response],
    batches: Sequence[range],
    documents: Sequence[Any],
    *,
    top_n: int | None,
    model: str | None,
    scorer: ScorerKind,
) -> RerankResult:
    """Merge ``/rerank`` answers for consecutive document batches into one ranking.

    Each answer's ``index`` is relative to its batch; it is shifted to the caller's list. Hits are sorted
    by score, highest first, ties by position (as vLLM sorts), then cut to ``top_n``.

    Args:
        responses: one ``/rerank`` answer per batch.
        batches: the document positions each request carried.
        documents: the caller's documents.
        top_n: keep the best N (0 or None: all).
        model: the model name to report.
        scorer: the scorer kind to report.

    Returns:
        A :class:`RerankResult` whose hits carry the caller's original documents.

    Raises:
        APIError: for an answer without ``results``.

    Example:
        >>> merge_rerank([first, second], [range(0, 2), range(2, 3)], docs, top_n=2, model="m",
        ...              scorer=ScorerKind.CROSS_ENCODER).indices
        [2, 0]
    """
    scored: list[tuple[float, int]] = []
    usage = Usage()
    served_model = model
    for response, batch in zip(responses, batches, strict=True):
        payload = _json(response, "/rerank")
        results = payload.get("results")
        if not isinstance(results, list):
            raise APIError(f"/rerank: answer without 'results': {response.text[:200]!r}")
        for entry in results:
            scored.append((float(entry["relevance_score"]), batch[int(entry["index"])]))
        usage += _usage(payload)
        served_model = served_model or payload.get("model")
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    if top_n:
        scored = scored[:top_n]
    hits = [RerankHit(index=index, score=score, document=documents[index]) for score, index in scored]
    return RerankResult(
        results=hits,
        model=served_model or "",
        scorer=scorer,
        usage=usage,
        num_requests=len(responses),
    )


# --------------------------------------------------------------------------------------------------
# score
# --------------------------------------------------------------------------------------------------


def pair_mode(len_1: int, len_2: int) -> Literal["1:1", "1:N", "N:N"]:
    """How vLLM pairs two sides: 1:1, 1:N (the first side broadcast) or N:N (zipped, not a product).

    Raises:
        InvalidInputError: for an empty side, or lengths that are none of these (N:M, and N:1 where
            only the *first* side may be broadcast).

    Example:
        >>> pair_mode(1, 3)
        '1:N'
    """
    if len_1 == 0 or len_2 == 0:
        side = "text_1" if len_1 == 0 else "text_2"
        raise InvalidInputError(side, [], "is empty", "Pass at least one input on each side.")
    if len_1 == 1:
        return "1:1" if len_2 == 1 else "1:N"
    if len_1 == len_2:
        return "N:N"
    raise InvalidInputError(
        "text_1/text_2",
        f"{len_1} and {len_2} inputs",
        "pair as neither 1:1, 1:N nor N:N (vLLM broadcasts only a single text_1, and zips equal lengths)",
        "Pass one text_1 for many text_2, or equal-length lists; for N:1 swap the sides.",
    )


def score_op(
    text_1: Any,
    text_2: Any,
    *,
    model: str | None = None,
    text_field: str = "text",
    max_tokens_per_doc: int | None = None,
    max_tokens_per_query: int | None = None,
    max_tokens_per_doc_fallback: Fallback = "error",
    instruction: str | None = None,
    use_activation: bool | None = None,
    truncate_prompt_tokens: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    concurrency: int = DEFAULT_CONCURRENCY,
    show_progress: bool = False,
    extra_body: Mapping[str, Any] | None = None,
    extra_headers: Mapping[str, str] | None = None,
    timeout: TimeoutLike = CLIENT_DEFAULT,
    scorer_cache: MutableMapping[str, ScorerKind] | None = None,
) -> Operation[ScoreResult]:
    """Score pairs with ``POST /score``; scores come back in pair order.

    The arguments are those of ``Client.score`` (documented there), plus ``scorer_cache`` as for
    :func:`rerank_op`. Pairs are split into requests of ``batch_size`` pairs.

    Returns:
        ScoreResult: ``scores`` in pair order and the scorer kind.

    Raises:
        InvalidInputError: bad arguments or a pairing vLLM refuses (N:M, N:1), before any request.
        UnsupportedByServer: a field the server's vLLM version lacks.

    Example:
        >>> client._run(score_op("capital of France?", ["Paris", "Bananas"])).scores
        array([0.86, 0.01])
    """
    side_1 = [text_1] if _is_single(text_1) else _as_list(text_1, "text_1")
    side_2 = [text_2] if _is_single(text_2) else _as_list(text_2, "text_2")
    mode = pair_mode(len(side_1), len(side_2))
    inputs_1 = [to_score_input(v, f"text_1[{i}]", text_field) for i, v in enumerate(side_1)]
    inputs_2 = [to_score_input(v, f"text_2[{i}]", text_field) for i, v in enumerate(side_2)]
    _check_common(
        batch_size=batch_size,
        concurrency=concurrency,
        truncate_prompt_tokens=truncate_prompt_tokens,
        extra_body=extra_body,
    )
    info: ServerInfo = yield GetServerInfo()
    name = resolve_model(info, model)
    server_limits, client_limits = _token_limits(
        info,
        max_tokens_per_doc=max_tokens_per_doc,
        max_tokens_per_query=max_tokens_per_query,
        fallback=max_tokens_per_doc_fallback,
        model=name,
    )
    features = []
    if instruction is not None:
        features.append("score_instruction")
    if any(is_multimodal(v) for v in inputs_1 + inputs_2):
        features.append("score_multimodal")
        if scorer_cache is not None and scorer_cache.get(name or "") is ScorerKind.LATE_INTERACTION:
            features.append("score_multimodal_late_interaction")
    gates.require(info, features)
    inputs_1 = yield from _truncate_inputs_op(
        inputs_1,
        client_limits.get("max_tokens_per_query"),
        model=name,
        concurrency=concurrency,
        extra_headers=extra_headers,
        timeout=timeout,
    )
    inputs_2 = yield from _truncate_inputs_op(
        inputs_2,
        client_limits.get("max_tokens_per_doc"),
        model=name,
        concurrency=concurrency,
        extra_headers=extra_headers,
        timeout=timeout,
    )
    keys = (
        ("queries", "documents") if gates.supports(info, "score_queries_documents") else ("text_1", "text_2")
    )
    common = {
        "model": name,
        "instruction": instruction,
        "use_activation": use_activation,
        "truncate_prompt_tokens": truncate_prompt_tokens,
        **server_limits,
    }
    sizes = [_json_size(v) for v in inputs_2]
    batches = plan_batches(sizes, batch_size, MAX_REQUEST_BYTES)

    def build(names: tuple[str, str]) -> list[Request]:
        built = []
        for batch in batches:
            first: Any = inputs_1[0] if mode != "N:N" else [inputs_1[i] for i in batch]
            second: Any = inputs_2[0] if mode == "1:1" else [inputs_2[i] for i in batch]
            body = _body(common, extra_body, **{names[0]: first, names[1]: second})
            built.append(_request("/score", body, "score", extra_headers, timeout))
        return built

    def send(names: tuple[str, str]) -> Operation[tuple[list[httpx.Response], ScorerKind]]:
        return _send_scoring_op(
            build(names),
            info=info,
            model=name,
            concurrency=concurrency,
            timeout=timeout,
            scorer_cache=scorer_cache,
            firsts=inputs_1,
            seconds=inputs_2,
            fields=("text_1", "text_2"),
            batch_sizes=[len(batch) for batch in batches],
            show_progress=show_progress,
        )

    while True:
        try:
            responses, scorer = yield from send(keys)
        except BadRequestError as error:
            # A server that hides its version may predate the queries/documents form (vLLM < 0.16):
            # its validation error names the text_1/text_2 fields it expected; ask again in that form.
            if info.parsed_version.known or keys[0] != "queries" or "text_1" not in error.message:
                raise
            keys = ("text_1", "text_2")
            continue
        except RequestTooLargeError:
            smaller = _smaller_batches(batches, sizes)
            if smaller is None:
                raise
            batches = plan_batches(sizes, *smaller)
            continue
        break
    scores: list[float] = []
    usage = Usage()
    served_model = name
    for response, batch in zip(responses, batches, strict=True):
        payload = _json(response, "/score")
        entries = sorted(_data(payload, "/score"), key=lambda entry: int(entry["index"]))
        if len(entries) != len(batch):
            raise APIError(f"/score: {len(entries)} scores for {len(batch)} pairs")
        scores.extend(float(entry["score"]) for entry in entries)
        usage += _usage(payload)
        served_model = served_model or payload.get("model")
    return ScoreResult(
        scores=np.array(scores, dtype=np.float64),
        model=served_model or "",
        scorer=scorer,
        usage=usage,
    )


def _data(payload: Mapping[str, Any], what: str) -> list[dict[str, Any]]:
    data = payload.get("data")
    if not isinstance(data, list):
        raise APIError(f"{what}: answer without 'data': {str(payload)[:200]!r}")
    return data


# --------------------------------------------------------------------------------------------------
# classify and pool
# --------------------------------------------------------------------------------------------------


def _text_inputs(value: Any, field: str) -> list[str]:
    texts = [value] if isinstance(value, str) else _as_list(value, field)
    if not texts:
        raise InvalidInputError(field, texts, "is empty", "Pass at least one text.")
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidInputError(f"{field}[{index}]", type(text).__name__, "must be a string", "")
    return texts


def _batched_op(
    path: str,
    task: Any,
    texts: list[str],
    common: Mapping[str, Any],
    *,
    batch_size: int,
    concurrency: int,
    extra_body: Mapping[str, Any] | None,
    extra_headers: Mapping[str, str] | None,
    timeout: TimeoutLike,
    show_progress: bool = False,
) -> Operation[tuple[list[dict[str, Any]], Usage, str | None]]:
    batches = plan_batches([_json_size(t) for t in texts], batch_size, MAX_REQUEST_BYTES)
    requests = [
        _request(
            path, _body(common, extra_body, input=[texts[i] for i in batch]), task, extra_headers, timeout
        )
        for batch in batches
    ]
    progress = Progress(len(texts), enabled=show_progress, description=path.strip("/"))
    try:
        responses = yield Parallel(
            requests, concurrency, lambda index, _: progress.advance(len(batches[index]))
        )
    finally:
        progress.close()
    entries: list[dict[str, Any]] = []
    usage = Usage()
    model: str | None = None
    for response, batch in zip(responses, batches, strict=True):
        payload = _json(response, path)
        data = sorted(_data(payload, path), key=lambda entry: int(entry["index"]))
        if len(data) != len(batch):
            raise APIError(f"{path}: {len(data)} results for {len(batch)} inputs")
        entries.extend(data)
        usage += _usage(payload)
        model = model or payload.get("model")
    return entries, usage, model


def classify_op(
    input: Any,
    *,
    model: str | None = None,
    use_activation: bool | None = None,
    truncate_prompt_tokens: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    concurrency: int = DEFAULT_CONCURRENCY,
    show_progress: bool = False,
    extra_body: Mapping[str, Any] | None = None,
    extra_headers: Mapping[str, str] | None = None,
    timeout: TimeoutLike = CLIENT_DEFAULT,
) -> Operation[ClassificationResult]:
    """Classify texts with ``POST /classify``, split into requests of ``batch_size`` texts.

    The arguments are those of ``Client.classify`` (documented there).

    Returns:
        ClassificationResult: labels, ``probs`` ``[n, num_classes]``, ``num_classes``.

    Raises:
        InvalidInputError: bad arguments (before any request).
        EndpointNotServed: the model's active task is not ``classify``.

    Example:
        >>> client._run(classify_op(["great", "awful"])).probs.shape
        (2, 2)
    """
    texts = _text_inputs(input, "input")
    _check_common(
        batch_size=batch_size,
        concurrency=concurrency,
        truncate_prompt_tokens=truncate_prompt_tokens,
        extra_body=extra_body,
    )
    info: ServerInfo = yield GetServerInfo()
    name = resolve_model(info, model)
    common = {
        "model": name,
        "use_activation": use_activation,
        "truncate_prompt_tokens": truncate_prompt_tokens,
    }
    entries, usage, served = yield from _batched_op(
        "/classify",
        "classify",
        texts,
        common,
        batch_size=batch_size,
        concurrency=concurrency,
        extra_body=extra_body,
        extra_headers=extra_headers,
        timeout=timeout,
        show_progress=show_progress,
    )
    probs = np.array([entry["probs"] for entry in entries], dtype=np.float64)
    num_classes = int(entries[0].get("num_classes") or probs.shape[1])
    return ClassificationResult(
        labels=[entry.get("label") for entry in entries],
        probs=probs,
        num_classes=num_classes,
        model=name or served or "",
        usage=usage,
    )


def pool_op(
    input: Any,
    *,
    task: str | None = None,
    model: str | None = None,
    use_activation: bool | None = None,
    truncate_prompt_tokens: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    concurrency: int = DEFAULT_CONCURRENCY,
    show_progress: bool = False,
    extra_body: Mapping[str, Any] | None = None,
    extra_headers: Mapping[str, str] | None = None,
    timeout: TimeoutLike = CLIENT_DEFAULT,
) -> Operation[PoolingResult]:
    """Run the model's pooler with ``POST /pooling``, split into requests of ``batch_size`` texts.

    The arguments are those of ``Client.pool`` (documented there).

    Returns:
        PoolingResult: one array per input (a matrix per input on ``token_*`` tasks).

    Raises:
        InvalidInputError: bad arguments or a removed task name (before any request).
        BadRequestError: ``task`` is not the server's active pooling task.

    Example:
        >>> client._run(pool_op("hello world")).data[0].shape
        (384,)
    """
    texts = _text_inputs(input, "input")
    if task is not None and task not in POOLING_TASKS:
        fix = {
            "score": "The `score` task was removed in vLLM 0.19; use 'classify'.",
            "encode": "The `encode` task was removed; use 'token_embed' or 'token_classify'.",
        }.get(task, "")
        raise InvalidInputError("task", task, f"must be one of {', '.join(POOLING_TASKS)}", fix)
    _check_common(
        batch_size=batch_size,
        concurrency=concurrency,
        truncate_prompt_tokens=truncate_prompt_tokens,
        extra_body=extra_body,
    )
    info: ServerInfo = yield GetServerInfo()
    name = resolve_model(info, model)
    common = {
        "model": name,
        "task": task,
        "use_activation": use_activation,
        "truncate_prompt_tokens": truncate_prompt_tokens,
    }
    entries, usage, served = yield from _batched_op(
        "/pooling",
        "pooling",
        texts,
        common,
        batch_size=batch_size,
        concurrency=concurrency,
        extra_body=extra_body,
        extra_headers=extra_headers,
        timeout=timeout,
        show_progress=show_progress,
    )
    data = [np.asarray(entry["data"], dtype=np.float32) for entry in entries]
    return PoolingResult(data=data, model=name or served or "", usage=usage)


# --------------------------------------------------------------------------------------------------
# Late interaction
# --------------------------------------------------------------------------------------------------


def maxsim(query_vectors: npt.ArrayLike, doc_vectors: npt.ArrayLike) -> float:
    """Late-interaction (ColBERT) score: for each query token, the best dot product with any document
    token, summed over the query tokens -- what vLLM computes for ``token_embed`` models.

    Args:
        query_vectors: ``[n_query_tokens, d]`` (e.g. ``client.pool(query).data[0]``).
        doc_vectors: ``[n_doc_tokens, d]``.

    Returns:
        The MaxSim score (unbounded; it grows with the query's length).

    Raises:
        InvalidInputError: for arrays that are not 2-D with the same width.

    Example:
        >>> q = client.pool("what is vllm?").data[0]
        >>> d = client.pool("vLLM is an inference engine").data[0]
        >>> maxsim(q, d)
        7.93...
    """
    query = np.asarray(query_vectors, dtype=np.float64)
    doc = np.asarray(doc_vectors, dtype=np.float64)
    for field, array in (("query_vectors", query), ("doc_vectors", doc)):
        if array.ndim != 2 or array.shape[0] == 0:
            raise InvalidInputError(
                field, f"array of shape {array.shape}", "must be a non-empty [tokens, d] matrix", ""
            )
    if query.shape[1] != doc.shape[1]:
        raise InvalidInputError(
            "doc_vectors", f"width {doc.shape[1]}", f"must match the query's width {query.shape[1]}", ""
        )
    return float((query @ doc.T).max(axis=1).sum())
