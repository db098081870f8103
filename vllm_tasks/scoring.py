"""Scoring, the pure parts: ``rerank`` (``/rerank``) and ``score`` (``/score``).

Checking inputs, splitting token limits between server and client, building the batched requests,
explaining length errors and merging the answers. The sending is ``vllm_tasks/_async/scoring.py`` (and its
generated sync twin); which kind of model scores is learned in :mod:`vllm_tasks.scorer_kind`; ``classify``,
``pool`` and ``maxsim`` are in :mod:`vllm_tasks.pooling`, which shares this module's request helpers.

Splitting and merging: a long document list is sent as several ``/rerank`` (or ``/score``) requests of at
most ``batch_size`` documents and ``defaults.SCORE_MAX_REQUEST_BYTES`` of JSON, with bounded concurrency,
and the answers are merged into one global ranking. This is **exact** for every scorer vLLM serves: a
cross-encoder scores each (query, document) pair on its own, a bi-encoder compares two independent
embeddings, and a late-interaction model computes MaxSim per pair. (The listwise ``JinaForRanking`` model
is the exception: it sees all documents of a request at once; use ``batch_size >= len(documents)``.)
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx
import numpy as np

from . import gates, images, listwise
from .calls import CallOptions, TaskParams, max_model_len, resolve_model
from .errors import (
    APIStatusError,
    BadRequestError,
    ContextLengthExceeded,
    InternalServerError,
    InvalidInputError,
    RequestTooLargeError,
)
from .responses import in_index_order, index_problem, json_object, malformed, text_or_none, usage_of
from .transport import Request
from .types.common import Usage
from .types.scoring import RerankHit, RerankResult, ScoreResult, ScorerKind
from .types.server import ServerInfo
from .validation import int_at_least

Fallback = Literal["error", "client"]

ScoreInput = str | dict[str, Any]
"""What the server accepts for one side of a pair: a string or ``{"content": [content parts]}``."""

PairMode = Literal["1:1", "1:N", "N:N"]

TOKEN_ID_JSON_BYTES = 8
"""JSON bytes one token id takes at most in a request body: up to 6 digits (vocabularies stay under a
million ids), a comma and a space. Sizes token-id inputs against ``defaults.SCORE_MAX_REQUEST_BYTES``."""

LENGTH_HINT = (
    "Cut long documents with max_tokens_per_doc=N (vLLM >= 0.20.0; max_tokens_per_doc_fallback='client' "
    "on older servers), or let the server cut each prompt with truncate_prompt_tokens=-1."
)

QUERY_TOO_LONG_HINT = (
    "vLLM 0.32 answers this when the query alone does not fit the model's context while "
    "max_tokens_per_doc is set; cut the query with max_tokens_per_query=N."
)


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

    Examples:
        >>> to_score_input({"text": "Paris", "id": 7}, "documents[0]")
        'Paris'
    """
    if isinstance(item, str):
        return item
    refuse_token_ids(item, field)
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


def is_token_id(value: object) -> bool:
    """Whether ``value`` is an int that is not a bool (a token id, unchecked)."""
    return isinstance(value, int) and not isinstance(value, bool)


def refuse_token_ids(value: Any, field: str) -> None:
    """Refuse a token id, or a list of them, where ``/score`` and ``/rerank`` want text.

    vLLM (0.32 included) reads each side of a pair as a string or ``{"content": [parts]}``
    (``ScoreInput`` in ``entrypoints/pooling/scoring/typing.py``): it has no token-id form.

    Raises:
        InvalidInputError: for an int, or a non-empty list/tuple of ints, naming ``field``.

    Examples:
        >>> refuse_token_ids("Paris", "documents[0]")
    """
    if is_token_id(value) or (
        isinstance(value, list | tuple) and value and all(is_token_id(item) for item in value)
    ):
        raise InvalidInputError(
            field,
            value,
            "is token ids, which /score and /rerank do not accept (vLLM reads text or {'content': [parts]})",
            "Pass the text (the server's POST /detokenize turns ids back into text); token ids work "
            "with embed(), classify() and pool().",
        )


def _to_part(part: Any, field: str) -> dict[str, Any]:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if isinstance(part, Mapping):
        if "type" not in part:
            raise InvalidInputError(
                field, part, "is a content part without 'type'", "Use {'type': 'text', 'text': ...}."
            )
        return images.checked_part(part, field)
    return images.image_content_part(part, field=field)


def is_multimodal(value: ScoreInput) -> bool:
    """Whether a converted input (see :func:`to_score_input`) carries anything but text parts.

    Multimodal inputs are gated (vLLM >= 0.10.0; >= 0.17.0 on late-interaction models).

    Examples:
        >>> is_multimodal({"content": [{"type": "image_url", "image_url": {"url": "https://x/a.png"}}]})
        True
    """
    if isinstance(value, str):
        return False
    return any(part.get("type") != "text" for part in value["content"])


def as_list(value: Any, field: str) -> list[Any]:
    """``value`` as a list: one that is not a list (a string, a mapping, ``None``) is refused.

    Raises:
        InvalidInputError: naming ``field``, with how to wrap a single item.
    """
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


@dataclass(frozen=True)
class ScorePairs:
    """The checked inputs of a ``rerank`` or ``score`` call, as the server accepts them.

    Attributes:
        firsts: the query (``rerank``: one) or ``text_1``'s inputs.
        seconds: the documents or ``text_2``'s inputs; batches split this side.
        fields: the caller's names of the two sides, for messages (``("query", "documents")``).
        mode: how the sides pair: ``"1:1"``, ``"1:N"`` (the first broadcast) or ``"N:N"`` (zipped).
    """

    firsts: list[ScoreInput]
    seconds: list[ScoreInput]
    fields: tuple[str, str]
    mode: PairMode = "1:N"


def rerank_inputs(query: Any, documents: Iterable[Any], text_field: str) -> tuple[list[Any], ScorePairs]:
    """The caller's documents as a list, and the query and documents as the server accepts them.

    Converting encodes images, so the async client runs this in a worker thread.

    Raises:
        InvalidInputError: ``documents`` is not a non-empty list, or an input is not convertible.

    Examples:
        >>> docs, pairs = rerank_inputs("capital?", [{"text": "Paris"}], "text")
        >>> pairs.seconds
        ['Paris']
    """
    docs = as_list(documents, "documents")
    if not docs:
        raise InvalidInputError("documents", docs, "is empty", "Pass at least one document.")
    query_input = to_score_input(query, "query", text_field)
    inputs = [to_score_input(doc, f"documents[{i}]", text_field) for i, doc in enumerate(docs)]
    return docs, ScorePairs([query_input], inputs, ("query", "documents"))


def score_inputs(text_1: Any, text_2: Any, text_field: str) -> ScorePairs:
    """Both sides of a ``score`` call as the server accepts them, and how they pair.

    Raises:
        InvalidInputError: an empty side, a pairing vLLM refuses (N:M, N:1), or an input that is not
            convertible.

    Examples:
        >>> score_inputs("capital?", ["Paris", "Rome"], "text").mode
        '1:N'
    """
    refuse_token_ids(text_1, "text_1")
    refuse_token_ids(text_2, "text_2")
    side_1 = [text_1] if _is_single(text_1) else as_list(text_1, "text_1")
    side_2 = [text_2] if _is_single(text_2) else as_list(text_2, "text_2")
    mode = pair_mode(len(side_1), len(side_2))
    inputs_1 = [to_score_input(v, f"text_1[{i}]", text_field) for i, v in enumerate(side_1)]
    inputs_2 = [to_score_input(v, f"text_2[{i}]", text_field) for i, v in enumerate(side_2)]
    return ScorePairs(inputs_1, inputs_2, ("text_1", "text_2"), mode)


def pair_mode(len_1: int, len_2: int) -> PairMode:
    """How vLLM pairs two sides: 1:1, 1:N (the first side broadcast) or N:N (zipped, not a product).

    Raises:
        InvalidInputError: for an empty side, or lengths that are none of these (N:M, and N:1 where
            only the *first* side may be broadcast).

    Examples:
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


def check_truncate_prompt_tokens(value: int | None) -> int | None:
    """Check ``truncate_prompt_tokens``: ``None``, -1 (the model's maximum) or a count.

    Raises:
        InvalidInputError: for anything below -1 or not an int.

    Examples:
        >>> check_truncate_prompt_tokens(-1)
        -1
    """
    return int_at_least("truncate_prompt_tokens", value, -1, "Use -1 for the model's maximum, or None.")


@dataclass(frozen=True)
class RerankParams(TaskParams):
    """The options ``rerank`` and ``score`` share, checked on construction; each field is their keyword
    argument of the same name (see :meth:`~vllm_tasks.Client.rerank`; ``top_n`` stays ``rerank``'s own).
    The LangChain and LlamaIndex rerankers and Ray's ``Scorer`` take one as ``params=``.

    Raises:
        InvalidInputError: an empty ``text_field``, a bad fallback, a negative token limit, a
            ``truncate_prompt_tokens`` below -1, or an ``instruction`` that is not a string.

    Examples:
        >>> params = vt.RerankParams(max_tokens_per_doc=512, truncate_prompt_tokens=-1)
        >>> client.rerank("capital of France?", documents, top_n=3, **params.keywords())
    """

    text_field: str = "text"
    max_tokens_per_doc: int | None = None
    max_tokens_per_query: int | None = None
    max_tokens_per_doc_fallback: Fallback = "error"
    instruction: str | None = None
    use_activation: bool | None = None
    truncate_prompt_tokens: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text_field, str) or not self.text_field:
            raise InvalidInputError("text_field", self.text_field, "must be a non-empty string", "")
        if self.max_tokens_per_doc_fallback not in ("error", "client"):
            raise InvalidInputError(
                "max_tokens_per_doc_fallback",
                self.max_tokens_per_doc_fallback,
                "must be 'error' or 'client'",
                "",
            )
        int_at_least("max_tokens_per_doc", self.max_tokens_per_doc, 0, "Use 0 or None for no limit.")
        int_at_least("max_tokens_per_query", self.max_tokens_per_query, 0, "Use 0 or None for no limit.")
        check_truncate_prompt_tokens(self.truncate_prompt_tokens)
        if self.instruction is not None and not isinstance(self.instruction, str):
            raise InvalidInputError("instruction", self.instruction, "must be a string", "")


def _json_size(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode()) + 8
    if isinstance(value, list) and value and is_token_id(value[0]):  # checked token ids (pool_inputs)
        return TOKEN_ID_JSON_BYTES * len(value) + 8
    return len(json.dumps(value)) + 8


def json_sizes(values: Sequence[Any]) -> list[int]:
    """Each value's size in a request's JSON body (bytes, with a little overhead), for batching.

    A token-id list counts :data:`TOKEN_ID_JSON_BYTES` per id (an upper bound, without serializing it).

    Examples:
        >>> json_sizes(["abc"])
        [11]
    """
    return [_json_size(value) for value in values]


def request_body(
    common: Mapping[str, Any], extra_body: Mapping[str, Any] | None, **fields: Any
) -> dict[str, Any]:
    """A request's JSON body: ``common`` and ``fields`` without their ``None`` values, then ``extra_body``
    merged over them."""
    body = {key: value for key, value in common.items() if value is not None}
    body.update({key: value for key, value in fields.items() if value is not None})
    if extra_body:
        body.update(extra_body)
    return body


def answer_data(
    response: httpx.Response, payload: Mapping[str, Any], what: str, count: int
) -> list[dict[str, Any]]:
    """``payload["data"]`` in index order: a list of ``count`` objects indexed exactly ``0..count-1``.

    Raises:
        UnexpectedResponse: naming what is wrong.
    """
    data = payload.get("data")
    if not isinstance(data, list):
        raise malformed(response, what, "an answer without a 'data' list")
    if len(data) != count:
        raise malformed(response, what, f"{len(data)} results for {count} inputs")
    problem = index_problem(data)
    if problem is not None:
        raise malformed(response, what, problem)
    return in_index_order(data)


def _number(response: httpx.Response, what: str, entry: Mapping[str, Any], key: str) -> float:
    """A finite number ``entry[key]`` (not a bool, a string or null)."""
    value = entry.get(key)
    try:
        number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    except OverflowError:  # an int beyond float range
        number = None
    if number is None or not np.isfinite(number):
        raise malformed(response, what, f"{key}={str(value)[:50]} is not a finite number")
    return number


# --------------------------------------------------------------------------------------------------
# Token limits (server-side from vLLM 0.20.0, else client-side via /tokenize + /detokenize)
# --------------------------------------------------------------------------------------------------


def split_token_limits(
    info: ServerInfo,
    *,
    max_tokens_per_doc: int | None,
    max_tokens_per_query: int | None,
    fallback: Fallback,
    model: str | None = None,
) -> tuple[dict[str, int], dict[str, int]]:
    """Split the token limits into (sent to the server, applied by the client).

    The values are checked by :class:`RerankParams`; here they meet the server: each must be below the
    model's ``max_model_len``, and a server without the field (vLLM < 0.20.0) gets it applied client-side
    when ``fallback`` is ``"client"``.

    Raises:
        InvalidInputError: a limit not below the model's context length.
        UnsupportedByServer: the server lacks the field and ``fallback`` is ``"error"``.
    """
    server: dict[str, int] = {}
    client: dict[str, int] = {}
    max_len = max_model_len(info, model)
    for name, value in (
        ("max_tokens_per_doc", max_tokens_per_doc),
        ("max_tokens_per_query", max_tokens_per_query),
    ):
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


def split_texts(inputs: Sequence[ScoreInput]) -> tuple[list[int], list[str]]:
    """The positions and values of the text inputs (multimodal ones are not cut client-side).

    Examples:
        >>> split_texts(["a", {"content": []}, "b"])
        ([0, 2], ['a', 'b'])
    """
    positions = [i for i, value in enumerate(inputs) if isinstance(value, str)]
    return positions, [value for value in inputs if isinstance(value, str)]


def replace_texts(
    inputs: Sequence[ScoreInput], positions: Sequence[int], texts: Sequence[str]
) -> list[ScoreInput]:
    """``inputs`` with the values at ``positions`` replaced by ``texts`` (see :func:`split_texts`).

    Examples:
        >>> replace_texts(["long a", {"content": []}], [0], ["a"])
        ['a', {'content': []}]
    """
    out = list(inputs)
    for position, text in zip(positions, texts, strict=True):
        out[position] = text
    return out


# --------------------------------------------------------------------------------------------------
# Planning /rerank and /score requests
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoringSetup:
    """What every ``/rerank`` or ``/score`` request of one call shares, checked against the server.

    Attributes:
        info: the server's description.
        model: the model named in the requests.
        pairs: the inputs (client-side truncated once :meth:`with_inputs` has been applied).
        call: the per-call options (``extra_body``, headers, timeout).
        fields: the JSON fields common to every request.
        client_limits: token limits to apply client-side (``max_tokens_per_doc``/``_query``).
    """

    info: ServerInfo
    model: str | None
    pairs: ScorePairs
    call: CallOptions
    fields: dict[str, Any]
    client_limits: dict[str, int]

    def with_inputs(self, firsts: list[ScoreInput], seconds: list[ScoreInput]) -> ScoringSetup:
        """This setup with the inputs replaced (after client-side truncation)."""
        pairs = dataclasses.replace(self.pairs, firsts=firsts, seconds=seconds)
        return dataclasses.replace(self, pairs=pairs)


def plan_scoring(
    info: ServerInfo,
    pairs: ScorePairs,
    params: RerankParams,
    call: CallOptions,
    *,
    client_model: str | None,
    scorer_kinds: Mapping[str, ScorerKind],
) -> ScoringSetup:
    """Check a ``rerank``/``score`` call against the server and gather what its requests share.

    Args:
        info: the server's description.
        pairs: the checked inputs.
        params: the call's options.
        call: the per-call options.
        client_model: the client's model (used when the call names none).
        scorer_kinds: the client's cache ``model -> ScorerKind`` (multimodal late interaction is gated).

    Raises:
        InvalidInputError: a token limit not below the model's context length.
        UnsupportedByServer: a field (or multimodal input) the server's vLLM version lacks.
    """
    name = resolve_model(info, call.model, client_model)
    server_limits, client_limits = split_token_limits(
        info,
        max_tokens_per_doc=params.max_tokens_per_doc,
        max_tokens_per_query=params.max_tokens_per_query,
        fallback=params.max_tokens_per_doc_fallback,
        model=name,
    )
    features = []
    if params.instruction is not None:
        features.append("score_instruction")
    if params.use_activation is not None:
        features.append("use_activation")
    if any(is_multimodal(value) for value in pairs.firsts + pairs.seconds):
        features.append("score_multimodal")
        if scorer_kinds.get(name or "") is ScorerKind.LATE_INTERACTION:
            features.append("score_multimodal_late_interaction")
    gates.require(info, features)
    fields = {
        "model": name,
        "instruction": params.instruction,
        "use_activation": params.use_activation,
        "truncate_prompt_tokens": params.truncate_prompt_tokens,
        **server_limits,
    }
    return ScoringSetup(info, name, pairs, call, fields, client_limits)


def plan_rerank_requests(setup: ScoringSetup, batches: Sequence[range], top_n: int | None) -> list[Request]:
    """One ``/rerank`` request per batch of documents (``top_n`` only where it cuts the batch)."""
    call = setup.call
    return [
        Request(
            "POST",
            "/rerank",
            json=request_body(
                setup.fields,
                call.extra_body,
                query=setup.pairs.firsts[0],
                documents=[setup.pairs.seconds[i] for i in batch],
                top_n=top_n if top_n and top_n < len(batch) else None,
            ),
            headers=call.extra_headers,
            timeout=call.timeout,
            task="rerank",
        )
        for batch in batches
    ]


def score_keys(info: ServerInfo) -> tuple[str, str]:
    """The ``/score`` field names this server reads: ``queries``/``documents`` from vLLM 0.16.0."""
    return (
        ("queries", "documents") if gates.supports(info, "score_queries_documents") else ("text_1", "text_2")
    )


def plan_score_requests(
    setup: ScoringSetup, batches: Sequence[range], keys: tuple[str, str]
) -> list[Request]:
    """One ``/score`` request per batch of pairs, the sides named ``keys`` (see :func:`score_keys`).

    A broadcast side is sent as a single value, a zipped side as the batch's slice.
    """
    pairs, call = setup.pairs, setup.call
    requests = []
    for batch in batches:
        first: Any = pairs.firsts[0] if pairs.mode != "N:N" else [pairs.firsts[i] for i in batch]
        second: Any = pairs.seconds[0] if pairs.mode == "1:1" else [pairs.seconds[i] for i in batch]
        body = request_body(setup.fields, call.extra_body, **{keys[0]: first, keys[1]: second})
        requests.append(
            Request(
                "POST", "/score", json=body, headers=call.extra_headers, timeout=call.timeout, task="score"
            )
        )
    return requests


def wants_text_1_text_2(error: BadRequestError, info: ServerInfo, keys: tuple[str, str]) -> bool:
    """Whether a 400 to a ``queries``/``documents`` request means the server only reads ``text_1``/``text_2``.

    A server that hides its version may predate that form (vLLM < 0.16): its validation error names the
    ``text_1``/``text_2`` fields it expected.
    """
    return (
        not isinstance(error, ContextLengthExceeded)
        and not info.parsed_version.known
        and keys[0] == "queries"
        and "text_1" in error.message
    )


# --------------------------------------------------------------------------------------------------
# Explaining errors
# --------------------------------------------------------------------------------------------------


def _too_long(
    pairs: ScorePairs,
    first_counts: Mapping[int, int],
    second_counts: Mapping[int, int],
    limit: int,
    kind: ScorerKind | None,
) -> tuple[str, int] | None:
    over_second = [i for i, n in second_counts.items() if n > limit]
    over_first = [i for i, n in first_counts.items() if n > limit]
    if over_second:
        return pairs.fields[1], min(over_second)
    if over_first:
        return pairs.fields[0], min(over_first)
    if kind in (ScorerKind.BI_ENCODER, ScorerKind.LATE_INTERACTION):
        return None
    # A cross-encoder reads query and document as one prompt. Each count includes the special tokens
    # of a single sequence; a pair shares one start token.
    zipped = len(pairs.firsts) > 1
    pair_over = [
        i for i, n in second_counts.items() if n + first_counts.get(i if zipped else 0, 0) - 1 > limit
    ]
    return (pairs.fields[1], min(pair_over)) if pair_over else None


def name_too_long_pair(
    error: ContextLengthExceeded,
    pairs: ScorePairs,
    first_counts: Mapping[int, int],
    second_counts: Mapping[int, int],
    *,
    limit: int | None,
    kind: ScorerKind | None,
) -> None:
    """Name on ``error`` the first input that makes a pair too long, and add how to cut it.

    A document over ``limit`` on its own is the culprit for every scorer, then the query; for a
    cross-encoder (which reads query and document as one prompt) the first document whose pair is over
    it. The counts (index -> tokens) come from ``/tokenize`` for the longest texts of each side.
    """
    found = _too_long(pairs, first_counts, second_counts, limit, kind) if limit is not None else None
    prefix = ""
    if found is not None:
        field, index = found
        prefix = f"{field} is too long: " if field == "query" else f"{field}[{index}] is too long: "
        if field in ("documents", "text_2"):
            error.input_index = index
    error.message = f"{prefix}{error.message} {LENGTH_HINT}"
    error.args = (error.message,)


def is_one_list(kind: ScorerKind, pairs: ScorePairs) -> bool:
    """Whether a call's pairs are one listwise list: a listwise reranker's query with its documents (vLLM
    renders zipped N:N pairs as separate prompts, which may be split)."""
    return kind is ScorerKind.LISTWISE and pairs.mode != "N:N"


def refuse_listwise_truncation(kind: ScorerKind, fields: Mapping[str, Any]) -> None:
    """Refuse ``truncate_prompt_tokens`` for a listwise reranker (vLLM's ``JinaForRanking``).

    vLLM renders one prompt per list, the query and its embedding token last: vLLM 0.32-0.33 cut that whole
    prompt (the query first, so the scores mean nothing, with no error), and 0.34 answers 400 ("JinaForRanking
    does not support truncate_prompt_tokens", ``entrypoints/pooling/scoring/io_processor.py``).

    Raises:
        InvalidInputError: ``truncate_prompt_tokens`` set for a listwise reranker.

    Examples:
        >>> refuse_listwise_truncation(ScorerKind.CROSS_ENCODER, {"truncate_prompt_tokens": 8})
        >>> try:
        ...     refuse_listwise_truncation(ScorerKind.LISTWISE, {"truncate_prompt_tokens": 8})
        ... except InvalidInputError as error:
        ...     print(error.field)
        truncate_prompt_tokens
    """
    value = fields.get("truncate_prompt_tokens")
    if kind is ScorerKind.LISTWISE and value is not None:
        raise InvalidInputError(
            "truncate_prompt_tokens",
            value,
            "is not supported by a listwise reranker (vLLM's JinaForRanking reads the whole list as one "
            "prompt, the query last)",
            "Use max_tokens_per_doc and max_tokens_per_query, or shorten the texts.",
        )


def explain_list_too_long(error: APIStatusError, count: int, fitting: int | None, limit: int | None) -> None:
    """Put in front of a listwise list's context-length error how many documents fit and what to do."""
    error.message = f"{listwise.too_long_message(count, fitting, limit)} ({error.message})"
    error.args = (error.message,)


def explain_list_not_split(error: RequestTooLargeError) -> None:
    """Add to a 413 for a listwise list that the SDK does not split it (the scores would change)."""
    error.message = (
        f"{error.message} A listwise reranker's list is sent in one request and not split (each score "
        "depends on the whole list): send fewer or shorter documents, or raise the proxy's body limit."
    )
    error.args = (error.message,)


def explain_query_too_long(error: InternalServerError) -> None:
    """Add to vLLM 0.32's 500 for an over-long query with ``max_tokens_per_doc`` how to avoid it."""
    if "sequence to truncate too short" in error.message.lower():
        error.message = f"{error.message} {QUERY_TOO_LONG_HINT}"
        error.args = (error.message,)


# --------------------------------------------------------------------------------------------------
# Merging /rerank and /score answers
# --------------------------------------------------------------------------------------------------


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
    """
    scored: list[tuple[float, int]] = []
    usage = Usage()
    served_model = model
    for response, batch in zip(responses, batches, strict=True):
        payload = json_object(response, "/rerank", task="rerank")
        scored.extend(_rerank_hits(response, payload, batch, top_n))
        usage += usage_of(response, "/rerank", payload.get("usage"))
        served_model = served_model or text_or_none(payload.get("model"))
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


def _rerank_hits(
    response: httpx.Response, payload: Mapping[str, Any], batch: range, top_n: int | None
) -> list[tuple[float, int]]:
    """``(score, position in the caller's list)`` of one batch's results, checked: as many as asked
    (the batch, or ``top_n`` where it cut the batch), distinct indices within the batch, finite scores.
    """
    results = payload.get("results")
    if not isinstance(results, list):
        raise malformed(response, "/rerank", "an answer without a 'results' list")
    expected = top_n if top_n and top_n < len(batch) else len(batch)
    if len(results) != expected:
        raise malformed(response, "/rerank", f"{len(results)} results for {expected} documents")
    hits: list[tuple[float, int]] = []
    seen: set[int] = set()
    for entry in results:
        index = entry.get("index") if isinstance(entry, dict) else None
        if type(index) is not int or not 0 <= index < len(batch) or index in seen:
            raise malformed(response, "/rerank", f"index {index!r} is not a distinct position in the batch")
        seen.add(index)
        hits.append((_number(response, "/rerank", entry, "relevance_score"), batch[index]))
    return hits


def merge_scores(
    responses: Sequence[httpx.Response], batches: Sequence[range], *, model: str | None, scorer: ScorerKind
) -> ScoreResult:
    """Merge ``/score`` answers for consecutive batches of pairs into scores in pair order.

    Raises:
        APIError: an answer without ``data``, or with a score count that does not match its batch.
    """
    scores: list[float] = []
    usage = Usage()
    served_model = model
    for response, batch in zip(responses, batches, strict=True):
        payload = json_object(response, "/score", task="score")
        entries = answer_data(response, payload, "/score", len(batch))
        scores.extend(_number(response, "/score", entry, "score") for entry in entries)
        usage += usage_of(response, "/score", payload.get("usage"))
        served_model = served_model or text_or_none(payload.get("model"))
    return ScoreResult(
        scores=np.array(scores, dtype=np.float64),
        model=served_model or "",
        scorer=scorer,
        usage=usage,
    )
