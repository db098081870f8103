"""Embedding operations: ``/v1/embeddings`` (``embed``) and ``/v2/embed`` (``embed_v2``).

Long inputs are split into batches sent with bounded concurrency and merged back in input order; the
transport is chosen by server version and decoded straight into numpy (``vllm_tasks.decoding``).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, cast

import httpx
import numpy as np
import numpy.typing as npt

from . import gates
from .batching import plan_batches
from .calls import CallOptions, positive_int, resolve_model
from .decoding import EMBED_DTYPES, DecodeError, EmbedDType, Endianness, decode_bytes_response, decode_raw
from .errors import ContextLengthExceeded, DimensionsNotApplied, InvalidInputError
from .progress import Progress
from .steps import GetServerInfo, Operation, Parallel, Request
from .types.common import Usage
from .types.embeddings import EmbeddingResult, EmbeddingType, EmbedV2Result, EncodingFormat, Truncate
from .types.server import ServerInfo

DEFAULT_BATCH_SIZE = 64
DEFAULT_CONCURRENCY = 4
MAX_BATCH_CHARS = 200_000
"""A batch is also cut when its texts reach this many characters, so one request stays bounded."""

V2_EMBEDDING_TYPES: tuple[str, ...] = ("float", "binary", "ubinary", "base64")
_LOCATE_LIMIT = 64
"""At most this many ``/tokenize`` calls are spent finding which input is over the context length."""

EmbedInput = str | Sequence[str] | Sequence[int] | Sequence[Sequence[int]]


def normalize_embed_input(value: object) -> list[str] | list[list[int]]:
    """Check ``input`` and return it as a list of prompts.

    Accepts a string, a list of strings, one tokenized prompt (``list[int]``) or several
    (``list[list[int]]``).

    Raises:
        InvalidInputError: naming the offending element.
    """
    if isinstance(value, str):
        return [value]
    if isinstance(value, bytes | bytearray) or not isinstance(value, Sequence):
        raise InvalidInputError(
            "input", value, "must be a str, a list of str, or token ids", "Pass text, e.g. input=['a', 'b']."
        )
    items = list(value)
    if not items:
        raise InvalidInputError("input", items, "is empty", "Pass at least one text.")
    if all(isinstance(item, int) and not isinstance(item, bool) for item in items):
        return [cast(list[int], items)]
    if all(isinstance(item, str) for item in items):
        return cast(list[str], items)
    if all(isinstance(item, Sequence) and not isinstance(item, str) for item in items):
        prompts: list[list[int]] = []
        for index, item in enumerate(items):
            ids = list(item)
            if not ids or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids):
                raise InvalidInputError(
                    f"input[{index}]", ids, "must be a non-empty list of token ids (ints >= 0)", ""
                )
            prompts.append(ids)
        return prompts
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise InvalidInputError(
                f"input[{index}]", item, "is not a str", "Every element of a list of texts must be a str."
            )
    raise AssertionError("unreachable")  # pragma: no cover


def _choose_format(info: ServerInfo, requested: EncodingFormat) -> str:
    if requested != "auto":
        return requested
    version = info.parsed_version
    if version.known and gates.supports(info, "encoding_format_bytes"):
        return "bytes"
    return "base64"


def _gated_features(fmt: str, options: Mapping[str, Any]) -> list[str]:
    features = []
    if fmt == "bytes":
        features.append("encoding_format_bytes")
    elif fmt == "bytes_only":
        features.append("encoding_format_bytes_only")
    elif fmt == "base64":
        features.append("encoding_format_base64")
    for name in ("embed_dtype", "endianness", "truncation_side"):
        if options.get(name) is not None:
            features.append(name)
    return features


def decode_embeddings_response(
    response: httpx.Response,
    *,
    expected_items: int,
    embed_dtype: str,
    endianness: str,
    widen: bool,
) -> tuple[npt.NDArray[Any], str | None, Usage]:
    """Decode one ``/v1/embeddings`` response of any transport into ``(matrix, model, usage)``.

    JSON bodies may hold float lists or base64 strings; binary bodies are ``bytes`` (with the
    ``metadata`` header) or ``bytes_only``.

    Raises:
        DecodeError: when the payload does not match the request.
    """
    content_type = response.headers.get("content-type", "")
    if "json" not in content_type:
        matrix, meta = decode_bytes_response(
            response.content,
            response.headers.get("metadata"),
            expected_items=expected_items,
            embed_dtype=embed_dtype,
            widen=widen,
        )
        return matrix, meta.get("model"), Usage.model_validate(meta.get("usage") or {})
    payload = response.json()
    data = sorted(payload.get("data") or [], key=lambda item: int(item["index"]))
    if len(data) != expected_items:
        raise DecodeError(f"the server returned {len(data)} embeddings for {expected_items} inputs")
    usage = Usage.model_validate(payload.get("usage") or {})
    if data and isinstance(data[0]["embedding"], str):
        raw = b"".join(base64.b64decode(item["embedding"]) for item in data)
        matrix = decode_raw(raw, embed_dtype, endianness, widen=widen).reshape(len(data), -1)
    else:
        matrix = np.asarray([item["embedding"] for item in data], dtype=np.float32)
        if matrix.ndim != 2:
            raise DecodeError(f"expected one vector per input, got an array of shape {matrix.shape}")
    return matrix, payload.get("model"), usage


def embed(
    input: EmbedInput | None,
    *,
    messages: Sequence[Mapping[str, Any]] | Sequence[Sequence[Mapping[str, Any]]] | None,
    call: CallOptions,
    client_model: str | None,
    dimensions: int | None,
    encoding_format: EncodingFormat,
    embed_dtype: EmbedDType | None,
    endianness: Endianness | None,
    widen: bool,
    truncate_prompt_tokens: int | None,
    truncation_side: str | None,
    use_activation: bool | None,
    normalize: bool | None,
    add_special_tokens: bool | None,
    batch_size: int,
    concurrency: int,
    show_progress: bool,
) -> Operation[EmbeddingResult]:
    """The ``embed`` operation (see ``Client.embed`` for the arguments)."""
    if (input is None) == (messages is None):
        raise InvalidInputError(
            "input", input, "exactly one of input= and messages= is needed", "Pass texts as input=..."
        )
    batch_size = positive_int("batch_size", batch_size)
    concurrency = positive_int("concurrency", concurrency)
    if dimensions is not None and (
        isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1
    ):
        raise InvalidInputError("dimensions", dimensions, "must be an integer >= 1", "Or leave it unset.")
    if embed_dtype is not None and embed_dtype not in EMBED_DTYPES:
        raise InvalidInputError(
            "embed_dtype", embed_dtype, "is not a vLLM embed dtype", f"Use one of {EMBED_DTYPES}."
        )
    if normalize is not None and use_activation is not None:
        raise InvalidInputError(
            "normalize", normalize, "cannot be combined with use_activation", "Pass only use_activation."
        )
    prompts: list[Any] = (
        normalize_messages(messages) if messages is not None else normalize_embed_input(input)
    )

    info: ServerInfo = yield GetServerInfo()
    fmt = _choose_format(info, encoding_format)
    options: dict[str, Any] = {
        "embed_dtype": embed_dtype,
        "endianness": endianness,
        "truncation_side": truncation_side,
    }
    if messages is not None and len(prompts) > 1:
        batched = gates.supports(info, "batched_chat_embeddings")
        if not batched:
            batch_size = 1
    gates.require(info, _gated_features(fmt, options))
    body: dict[str, Any] = {
        "model": resolve_model(info, call.model, client_model),
        "encoding_format": fmt,
        "dimensions": dimensions,
        "truncate_prompt_tokens": truncate_prompt_tokens,
        "add_special_tokens": add_special_tokens,
        "use_activation": use_activation,
        **options,
        **gates.normalize_fields(info, normalize),
    }
    body = {key: value for key, value in body.items() if value is not None}
    body.update(call.extra_body or {})
    wire_dtype = str(body.get("embed_dtype", "float32"))
    wire_endianness = str(body.get("endianness", "native"))

    sizes = [len(prompt) for prompt in prompts]
    batches = plan_batches(sizes, batch_size, MAX_BATCH_CHARS)
    requests = []
    for batch in batches:
        items = [prompts[i] for i in batch]
        if messages is not None:
            payload = {"messages": items[0] if len(items) == 1 else items}
        else:
            payload = {"input": items}
        requests.append(
            Request(
                "POST",
                "/v1/embeddings",
                json={**body, **payload},
                headers=call.extra_headers,
                timeout=call.timeout,
                task="embed",
            )
        )
    progress = Progress(len(prompts), enabled=show_progress, description="embed")
    try:
        responses: list[httpx.Response] = yield Parallel(
            requests, concurrency, lambda index, _: progress.advance(len(batches[index]))
        )
    except ContextLengthExceeded as error:
        if messages is None:
            yield from _locate_too_long(error, prompts, info, body.get("model"))
        raise
    finally:
        progress.close()

    matrices = []
    usage = Usage()
    served_model: str | None = None
    for batch, response in zip(batches, responses, strict=True):
        matrix, model_name, batch_usage = decode_embeddings_response(
            response,
            expected_items=len(batch),
            embed_dtype=wire_dtype,
            endianness=wire_endianness,
            widen=widen,
        )
        matrices.append(matrix)
        usage += batch_usage
        served_model = served_model or model_name
    vectors = np.concatenate(matrices) if len(matrices) > 1 else matrices[0]
    if dimensions is not None and vectors.shape[1] != dimensions:
        raise DimensionsNotApplied(
            f"asked for dimensions={dimensions} but the server returned {vectors.shape[1]}-wide vectors "
            f"(vLLM {info.version or 'unknown'} ignored it; vLLM >= 0.24.0 refuses unsupported values). "
            "Use a Matryoshka model/dimension, or leave dimensions unset."
        )
    return EmbeddingResult(
        vectors=vectors,
        model=served_model or str(body.get("model") or ""),
        usage=usage,
        encoding_format=fmt,
    )


def normalize_messages(
    messages: Sequence[Mapping[str, Any]] | Sequence[Sequence[Mapping[str, Any]]],
) -> list[list[dict[str, Any]]]:
    """Check chat-style input: one conversation (a list of messages) or a list of conversations.

    Raises:
        InvalidInputError: when a message has no string ``role``.
    """
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence) or not messages:
        raise InvalidInputError(
            "messages", messages, "must be a non-empty list of chat messages", "e.g. [{'role': 'user', ...}]"
        )
    conversations = [messages] if isinstance(messages[0], Mapping) else list(messages)
    checked: list[list[dict[str, Any]]] = []
    for c_index, conversation in enumerate(conversations):
        if isinstance(conversation, Mapping) or not isinstance(conversation, Sequence) or not conversation:
            raise InvalidInputError(
                f"messages[{c_index}]", conversation, "must be a non-empty list of messages", ""
            )
        turns = []
        for m_index, message in enumerate(conversation):
            if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
                raise InvalidInputError(
                    f"messages[{c_index}][{m_index}]",
                    message,
                    "needs a string 'role'",
                    "e.g. {'role': 'user'}",
                )
            turn = dict(message)
            if "content" in turn:
                turn["content"] = _content_with_images(turn["content"])
            turns.append(turn)
        checked.append(turns)
    return checked


def _content_with_images(content: Any) -> Any:
    """Turn ``{"type": "image", "image": <path/bytes/PIL/array/URL>}`` parts into ``image_url`` parts."""
    if not isinstance(content, list):
        return content
    from .images import image_content_part

    return [
        image_content_part(part["image"])
        if isinstance(part, Mapping) and part.get("type") == "image"
        else part
        for part in content
    ]


def _locate_too_long(
    error: ContextLengthExceeded, prompts: Sequence[Any], info: ServerInfo, model: str | None
) -> Operation[None]:
    """Find the first input over the context length and note its index on ``error``.

    Token-id inputs are measured directly; texts are measured with ``/tokenize``, longest first.
    """
    limit = error.max_model_len or info.max_model_len
    if limit is None:
        return
    found: int | None = None
    if prompts and isinstance(prompts[0], list):
        found = next((i for i, ids in enumerate(prompts) if len(ids) > limit), None)
    else:
        order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))[:_LOCATE_LIMIT]
        requests = [
            Request("POST", "/tokenize", json={"model": model, "prompt": prompts[i]}, raise_for_status=False)
            for i in order
        ]
        responses: list[httpx.Response] = yield Parallel(requests, concurrency=4)
        over = [
            i
            for i, response in zip(order, responses, strict=True)
            if response.status_code == 200 and int(response.json().get("count", 0)) > limit
        ]
        found = min(over) if over else None
    if found is not None:
        error.input_index = found
        error.message = f"input[{found}] is too long: {error.message}"
        error.args = (error.message,)


def embed_v2(
    *,
    texts: Sequence[str] | None,
    images: Sequence[Any] | None,
    inputs: Sequence[Mapping[str, Any]] | None,
    call: CallOptions,
    client_model: str | None,
    input_type: str | None,
    embedding_types: Sequence[EmbeddingType | str] | None,
    output_dimension: int | None,
    truncate: Truncate | None,
    max_tokens: int | None,
    priority: int | None,
    batch_size: int,
    concurrency: int,
    show_progress: bool,
) -> Operation[EmbedV2Result]:
    """The ``embed_v2`` operation (see ``Client.embed_v2`` for the arguments)."""
    given = {
        name: value
        for name, value in (("texts", texts), ("images", images), ("inputs", inputs))
        if value is not None
    }
    if len(given) != 1:
        raise InvalidInputError(
            "texts/images/inputs",
            sorted(given),
            "exactly one must be given",
            "Pass texts=[...] (or images/inputs).",
        )
    field, values = next(iter(given.items()))
    if isinstance(values, str | bytes) or not isinstance(values, Sequence) or len(values) == 0:
        raise InvalidInputError(field, values, "must be a non-empty list", f"e.g. {field}=[...]")
    items = list(values)
    if field == "texts":
        for index, text in enumerate(items):
            if not isinstance(text, str):
                raise InvalidInputError(f"texts[{index}]", text, "is not a str", "Pass strings in texts=.")
    elif field == "images":
        from .images import image_to_data_url

        items = [item if isinstance(item, str) else image_to_data_url(item) for item in items]
    types = list(embedding_types) if embedding_types is not None else ["float"]
    bad = [t for t in types if t not in V2_EMBEDDING_TYPES]
    if bad or not types:
        raise InvalidInputError(
            "embedding_types",
            types,
            f"vLLM's /v2/embed supports only {', '.join(V2_EMBEDDING_TYPES)}"
            + (" (int8 and uint8 are refused by the server)" if {"int8", "uint8"} & set(bad) else ""),
            "Use 'binary'/'ubinary' for packed sign bits or 'float' for full vectors.",
        )
    batch_size = positive_int("batch_size", batch_size)
    concurrency = positive_int("concurrency", concurrency)

    info: ServerInfo = yield GetServerInfo()
    features = ["/v2/embed"] + (["v2_embed_priority"] if priority is not None else [])
    gates.require(info, features)
    body: dict[str, Any] = {
        "model": resolve_model(info, call.model, client_model),
        "input_type": input_type,
        "embedding_types": types,
        "output_dimension": output_dimension,
        "truncate": truncate,
        "max_tokens": max_tokens,
        "priority": priority,
    }
    body = {key: value for key, value in body.items() if value is not None}
    body.update(call.extra_body or {})
    sizes = [len(item) if isinstance(item, str) else 1 for item in items]
    batches = plan_batches(sizes, batch_size, MAX_BATCH_CHARS)
    requests = [
        Request(
            "POST",
            "/v2/embed",
            json={**body, field: [items[i] for i in batch]},
            headers=call.extra_headers,
            timeout=call.timeout,
            task="embed_v2",
        )
        for batch in batches
    ]
    progress = Progress(len(items), enabled=show_progress, description="embed_v2")
    try:
        responses: list[httpx.Response] = yield Parallel(
            requests, concurrency, lambda index, _: progress.advance(len(batches[index]))
        )
    finally:
        progress.close()
    return merge_v2_responses([response.json() for response in responses], types)


def merge_v2_responses(payloads: Sequence[Mapping[str, Any]], types: Sequence[str]) -> EmbedV2Result:
    """Merge ``/v2/embed`` response bodies (one per batch, in order) into one result.

    Raises:
        DecodeError: when a requested type is missing from a response.
    """
    arrays: dict[str, list[npt.NDArray[Any]]] = {name: [] for name in types}
    texts: list[str] = []
    billed: dict[str, int] = {}
    for payload in payloads:
        embeddings = payload.get("embeddings") or {}
        for name in types:
            if name not in embeddings:
                raise DecodeError(f"the server's /v2/embed response has no {name!r} embeddings")
            arrays[name].append(_v2_array(name, embeddings[name]))
        texts.extend(payload.get("texts") or [])
        units = (payload.get("meta") or {}).get("billed_units") or {}
        for key, value in units.items():
            if isinstance(value, int | float):
                billed[key] = billed.get(key, 0) + int(value)
    merged = {name: np.concatenate(parts) for name, parts in arrays.items()}
    return EmbedV2Result(
        float=merged.get("float"),
        binary=merged.get("binary"),
        ubinary=merged.get("ubinary"),
        base64=merged.get("base64"),
        texts=texts or None,
        billed_units=billed,
        id=payloads[0].get("id") if payloads else None,
    )


def _v2_array(name: str, values: Sequence[Any]) -> npt.NDArray[Any]:
    if name == "float":
        return np.asarray(values, dtype=np.float32).reshape(len(values), -1)
    if name == "binary":
        return np.asarray(values, dtype=np.int8).reshape(len(values), -1)
    if name == "ubinary":
        return np.asarray(values, dtype=np.uint8).reshape(len(values), -1)
    # base64 on /v2/embed is always little-endian float32, whatever embed_dtype would say.
    raw = b"".join(base64.b64decode(text) for text in values)
    return decode_raw(raw, "float32", "little").reshape(len(values), -1)
