"""``embed(long_inputs=...)``, the pure parts: documents longer than the model's context.

- ``"error"`` (the default): sent as they are; the server refuses an over-long input (400, the SDK's
  ``ContextLengthExceeded`` naming it), as ``embed`` always did.
- ``"truncate"``: ``truncate_prompt_tokens=-1`` (the model's maximum) unless a count is given.
- ``"split_mean"``: the client splits each over-long input by the server's own tokens (``/tokenize``) into
  windows of ``chunk_tokens`` with ``chunk_overlap`` tokens shared by neighbours, each sent as token ids with
  the tokenizer's special tokens around it; the document's vector is the mean of its windows' vectors
  weighted by their token counts, L2-normalised when the model's vectors are. Inputs that fit go as they
  are (the same vector as ``"error"``).
- ``"late_chunking"``: vLLM >= 0.33 on a ``token_embed`` model pools the whole document's contextual token
  states in ``chunk_tokens`` chunks (``late_chunking_params``); the document's vector is the same weighted
  mean of those chunk vectors. The document must fit the context.

The sending is ``AsyncEmbeddingMethods._embed_long`` and ``_embed_late_chunked``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import httpx
import numpy as np
import numpy.typing as npt

from .calls import CallOptions
from .errors import InvalidInputError, UnexpectedResponse, UnsupportedByServer
from .responses import json_object, malformed, usage_of
from .transport import Request
from .types.common import Usage
from .types.embeddings import EmbeddingChunks, EmbeddingResult
from .types.server import ServerInfo

if TYPE_CHECKING:
    from .embeddings import EmbedParams

LongInputs = Literal["error", "truncate", "split_mean", "late_chunking"]
"""What ``embed`` does with an input longer than the model's context (see the module docstring)."""
LONG_INPUTS: tuple[str, ...] = ("error", "truncate", "split_mean", "late_chunking")

#: How close to 1 every chunk vector's L2 norm must be for the model's output to count as normalised.
UNIT_NORM_TOLERANCE = 1e-3

#: The text tokenized with and without special tokens to learn which ones the tokenizer puts around a text.
PROBE = "hello world"


def check_long_inputs(
    mode: str, chunk_tokens: int | None, chunk_overlap: int | None, truncate_prompt_tokens: int | None
) -> None:
    """Check ``embed``'s long-input options together.

    Raises:
        InvalidInputError: an unknown mode, a chunk option without a chunking mode, ``chunk_tokens`` below
            1, ``chunk_overlap`` below 0 or not below ``chunk_tokens``, ``late_chunking`` without
            ``chunk_tokens``, or ``truncate_prompt_tokens`` with a chunking mode.

    Examples:
        >>> check_long_inputs("split_mean", 128, 16, None)
    """
    if mode not in LONG_INPUTS:
        raise InvalidInputError(
            "long_inputs", mode, f"must be one of {', '.join(LONG_INPUTS)}", "'error' is the default."
        )
    chunking = mode in ("split_mean", "late_chunking")
    for name, value, least in (("chunk_tokens", chunk_tokens, 1), ("chunk_overlap", chunk_overlap, 0)):
        if value is None:
            continue
        if not chunking:
            raise InvalidInputError(
                name, value, f"applies to long_inputs='split_mean' or 'late_chunking', not {mode!r}", ""
            )
        if type(value) is not int or value < least:
            raise InvalidInputError(name, value, f"must be an int >= {least}", "Or leave it unset.")
    if chunk_tokens is not None and chunk_overlap is not None and chunk_overlap >= chunk_tokens:
        raise InvalidInputError(
            "chunk_overlap", chunk_overlap, f"must be below chunk_tokens ({chunk_tokens})", ""
        )
    if mode == "late_chunking" and chunk_overlap is not None:
        raise InvalidInputError(
            "chunk_overlap", chunk_overlap, "does not apply to late chunking (the server's chunks abut)", ""
        )
    if mode == "late_chunking" and chunk_tokens is None:
        raise InvalidInputError(
            "chunk_tokens", None, "is needed for late chunking", "Pass the chunk size in tokens, e.g. 256."
        )
    if chunking and truncate_prompt_tokens is not None:
        raise InvalidInputError(
            "truncate_prompt_tokens",
            truncate_prompt_tokens,
            f"cannot be combined with long_inputs={mode!r}",
            "Chunking keeps every token; use long_inputs='truncate' to cut instead.",
        )


def special_tokens(with_special: Sequence[int], without: Sequence[int]) -> tuple[list[int], list[int]]:
    """The tokens the tokenizer puts before and after a text: ``with_special`` is one text tokenized with
    special tokens, ``without`` the same text without them.

    Raises:
        UnexpectedResponse: ``without`` is not found inside ``with_special``.

    Examples:
        >>> special_tokens([101, 7592, 102], [7592])
        ([101], [102])
    """
    n = len(without)
    for start in range(len(with_special) - n + 1):
        if list(with_special[start : start + n]) == list(without):
            return list(with_special[:start]), list(with_special[start + n :])
    raise UnexpectedResponse(
        "/tokenize: a text's tokens without special tokens are not inside its tokens with them "
        f"({list(with_special)[:12]} vs {list(without)[:12]}); the document cannot be split around them",
        kind="decode",
    )


def windows(count: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """``[start, end)`` token ranges of ``size`` covering ``count`` tokens, neighbours sharing ``overlap``;
    the last one ends at ``count`` (it may be shorter).

    Examples:
        >>> windows(10, 4, 1)
        [(0, 4), (3, 7), (6, 10)]
        >>> windows(3, 4, 1)
        [(0, 3)]
    """
    ranges: list[tuple[int, int]] = []
    start = 0
    while True:
        end = min(start + size, count)
        ranges.append((start, end))
        if end >= count:
            return ranges
        start = end - overlap


def chunk_budget(
    max_model_len: int, specials: int, chunk_tokens: int | None, chunk_overlap: int | None
) -> tuple[int, int]:
    """The window size and overlap ``split_mean`` uses: ``chunk_tokens`` (default: the context less the
    special tokens) and ``chunk_overlap`` (default: an eighth of the window).

    Raises:
        InvalidInputError: ``chunk_tokens`` plus the special tokens over ``max_model_len``.

    Examples:
        >>> chunk_budget(256, 2, None, None)
        (254, 31)
    """
    room = max_model_len - specials
    size = room if chunk_tokens is None else chunk_tokens
    if size > room or size < 1:
        raise InvalidInputError(
            "chunk_tokens",
            chunk_tokens,
            f"must be at most {room} (the context of {max_model_len} tokens less {specials} special tokens)",
            "Leave it unset for the largest.",
        )
    overlap = size // 8 if chunk_overlap is None else chunk_overlap
    if overlap >= size:
        raise InvalidInputError(
            "chunk_overlap", chunk_overlap, f"must be below the window ({size} tokens)", ""
        )
    return size, overlap


@dataclass
class SplitPlan:
    """What ``split_mean`` sends and how the answers go back together.

    Attributes:
        whole: the texts that fit, sent as they are.
        windows: the token ids of every window of the texts that do not (special tokens around each).
        parts: per input, its pieces: ``(in_windows, index in whole or windows, (start, end) tokens)``.
    """

    whole: list[str] = field(default_factory=list)
    windows: list[list[int]] = field(default_factory=list)
    parts: list[list[tuple[bool, int, tuple[int, int]]]] = field(default_factory=list)


def plan_split(
    texts: Sequence[str],
    bodies: Sequence[Sequence[int]],
    specials: tuple[Sequence[int], Sequence[int]],
    max_model_len: int | None,
    params: EmbedParams,
) -> SplitPlan:
    """Plan ``split_mean``: each text whose tokens (``bodies``, without special tokens) fit the context with
    the ``specials`` put before and after a text goes whole; the others as :func:`windows` of their tokens.

    Raises:
        UnexpectedResponse: the server did not report its context length (``max_model_len``).
        InvalidInputError: ``chunk_tokens`` too large for the context.

    Examples:
        >>> from vllm_tasks import EmbedParams
        >>> params = EmbedParams(long_inputs="split_mean", chunk_tokens=3, chunk_overlap=1)
        >>> plan_split(["a b", "c d e f"], [[1, 2], [3, 4, 5, 6]], ([101], [102]), 5, params).windows
        [[101, 3, 4, 5, 102], [101, 5, 6, 102]]
    """
    if max_model_len is None:
        raise UnexpectedResponse(
            "/tokenize: no max_model_len in the answer; cannot split to fit", kind="decode"
        )
    prefix, suffix = specials
    room = max_model_len - len(prefix) - len(suffix)
    size, overlap = chunk_budget(
        max_model_len, max_model_len - room, params.chunk_tokens, params.chunk_overlap
    )
    plan = SplitPlan()
    for text, body in zip(texts, bodies, strict=True):
        if len(body) <= room:
            plan.parts.append([(False, len(plan.whole), (0, len(body)))])
            plan.whole.append(text)
            continue
        pieces = []
        for start, end in windows(len(body), size, overlap):
            pieces.append((True, len(plan.windows), (start, end)))
            plan.windows.append([*prefix, *body[start:end], *suffix])
        plan.parts.append(pieces)
    return plan


def merge_split(
    plan: SplitPlan, whole: EmbeddingResult | None, windowed: EmbeddingResult | None
) -> EmbeddingResult:
    """One vector per input from the answers of :func:`plan_split`'s two groups: a whole text's own
    vector, or its windows' :func:`weighted_mean`; ``chunks`` holds every input's pieces."""
    groups = {False: whole, True: windowed}
    chunks: list[EmbeddingChunks] = []
    rows: list[npt.NDArray[np.float32]] = []
    for parts in plan.parts:
        vectors = np.stack([_group_rows(groups[kind])[index] for kind, index, _ in parts]).astype(np.float32)
        chunk = EmbeddingChunks(vectors=vectors, token_ranges=[span for _, _, span in parts])
        chunks.append(chunk)
        rows.append(vectors[0] if len(parts) == 1 else weighted_mean(vectors, chunk.weights))
    answered = [result for result in (whole, windowed) if result is not None]
    usage = Usage()
    for result in answered:
        usage += result.usage
    return EmbeddingResult(
        vectors=np.stack(rows),
        model=answered[0].model,
        usage=usage,
        encoding_format=answered[0].encoding_format,
        chunks=chunks,
    )


def _group_rows(result: EmbeddingResult | None) -> npt.NDArray[Any]:
    assert result is not None  # a planned piece belongs to a group that was sent
    return result.vectors


def check_late_chunking(params: EmbedParams) -> None:
    """Refuse the ``embed`` options vLLM's late chunking does not take (0.33: float JSON only, no
    ``dimensions``, no truncation).

    Raises:
        InvalidInputError: naming the option.
    """
    for name, allowed in (
        ("dimensions", (None,)),
        ("encoding_format", ("auto", "float")),
        ("embed_dtype", (None,)),
        ("endianness", (None,)),
        ("truncation_side", (None,)),
    ):
        if getattr(params, name) not in allowed:
            raise InvalidInputError(
                name, getattr(params, name), "cannot be combined with long_inputs='late_chunking'", ""
            )


def weighted_mean(vectors: npt.NDArray[Any], weights: Sequence[int]) -> npt.NDArray[np.float32]:
    """The mean of ``vectors`` (one row per chunk) weighted by ``weights`` (token counts), L2-normalised when
    every row is (the model normalises its output), else as it is.

    Examples:
        >>> weighted_mean(np.array([[1.0, 0.0], [0.0, 1.0]]), [3, 1]).round(4)
        array([0.9487, 0.3162], dtype=float32)
    """
    rows = np.asarray(vectors, np.float64)
    w = np.asarray(weights, np.float64)
    mean = (rows * w[:, None]).sum(axis=0) / w.sum()
    norms = np.linalg.norm(rows, axis=1)
    if np.all(np.abs(norms - 1.0) <= UNIT_NORM_TOLERANCE):
        length = np.linalg.norm(mean)
        if length > 0:
            mean = mean / length
    result: npt.NDArray[np.float32] = mean.astype(np.float32)
    return result


def late_chunking_requests(
    texts: Sequence[str],
    fields: dict[str, Any],
    call: CallOptions,
    *,
    batch_size: int,
) -> tuple[list[Request], list[range]]:
    """The ``/v1/embeddings`` requests with ``late_chunking_params`` (vLLM 0.33: JSON floats only, plain
    text only), ``batch_size`` texts each; ``fields`` holds the model, ``late_chunking_params`` and the
    activation field.

    Raises:
        InvalidInputError: an empty text (vLLM refuses late chunking of one).
    """
    for index, text in enumerate(texts):
        if not text:
            raise InvalidInputError(f"input[{index}]", text, "is empty", "Late chunking needs text.")
    body = {**fields, "encoding_format": "float", **(call.extra_body or {})}
    batches = [range(i, min(i + batch_size, len(texts))) for i in range(0, len(texts), batch_size)]
    requests = [
        Request(
            "POST",
            "/v1/embeddings",
            json={**body, "input": [texts[i] for i in batch]},
            headers=call.extra_headers,
            timeout=call.timeout,
            task="embed",
        )
        for batch in batches
    ]
    return requests, batches


def parse_late_chunking(
    response: httpx.Response, count: int, info: ServerInfo, model: str
) -> tuple[list[EmbeddingChunks], Usage]:
    """One late-chunked ``/v1/embeddings`` answer: per input, its chunk vectors and ranges.

    Raises:
        UnsupportedByServer: the model answered one vector per input without ``late_chunking``: it is not
            served with ``token_embed`` active (vLLM ignores the field elsewhere).
        UnexpectedResponse: a body of another shape, or chunks that do not match their ranges.
    """
    payload = json_object(response, "/v1/embeddings", task="embed")
    data = payload.get("data")
    if not isinstance(data, list) or len(data) != count:
        raise malformed(response, "/v1/embeddings", f"expected a 'data' list of {count} items")
    items = sorted(data, key=lambda item: item.get("index", 0) if isinstance(item, dict) else 0)
    chunks: list[EmbeddingChunks] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("late_chunking"), dict):
            raise UnsupportedByServer(
                "late_chunking",
                server_version=info.version,
                required_version="0.33.0",
                server_flag="""--pooler-config '{"task": "token_embed"}'""",
                detail=f"Model {model!r} answered without late_chunking: it is not served with token_embed "
                "active. Use long_inputs='split_mean' instead",
            )
        chunks.append(_late_chunks(response, item))
    return chunks, usage_of(response, "/v1/embeddings", payload.get("usage"))


def _late_chunks(response: httpx.Response, item: dict[str, Any]) -> EmbeddingChunks:
    meta = item["late_chunking"]
    ranges = meta.get("chunks")
    try:
        vectors = np.asarray(item.get("embedding"), np.float32)
        token_ranges = [(int(c["token_range"][0]), int(c["token_range"][1])) for c in ranges]
        char_ranges = [
            None if c.get("char_range") is None else (int(c["char_range"][0]), int(c["char_range"][1]))
            for c in ranges
        ]
    except (TypeError, ValueError, KeyError, IndexError):
        raise malformed(response, "/v1/embeddings", "late_chunking chunks without token ranges") from None
    if vectors.ndim != 2 or vectors.shape[0] != len(token_ranges) or not np.isfinite(vectors).all():
        raise malformed(
            response,
            "/v1/embeddings",
            f"{len(token_ranges)} chunk ranges for embeddings of shape {vectors.shape}",
        )
    if any(end <= start for start, end in token_ranges):
        raise malformed(response, "/v1/embeddings", "an empty late_chunking token range")
    return EmbeddingChunks(vectors=vectors, token_ranges=token_ranges, char_ranges=char_ranges)
