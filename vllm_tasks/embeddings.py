"""Embeddings, the pure parts: ``/v1/embeddings`` (``embed``) and ``/v2/embed`` (``embed_v2``).

Checking inputs, choosing the transport by server version, building the batched requests, decoding
the responses straight into numpy (``vllm_tasks.decoding``) and merging them in input order. The
sending is ``vllm_tasks/_async/embeddings.py`` (and its generated sync twin).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast, get_args

import httpx
import numpy as np
import numpy.typing as npt

from . import defaults, gates
from .batching import plan_batches
from .calls import CallOptions, TaskParams, resolve_model
from .decoding import (
    EMBED_DTYPES,
    EmbedDType,
    Endianness,
    decode_base64_rows,
    decode_bytes_response,
    decode_error,
    float_rows,
)
from .errors import (
    APIStatusError,
    BadRequestError,
    ContextLengthExceeded,
    InvalidInputError,
    UnexpectedResponse,
)
from .long_inputs import LongInputs, check_long_inputs
from .responses import (
    check_status,
    in_index_order,
    index_problem,
    json_object,
    media_type,
    request_of,
    text_or_none,
    unexpected,
    usage_of,
)
from .server_errors import TOKEN_EMBED_ACTIVE
from .server_state import Fact
from .transport import Request
from .types.common import Usage
from .types.embeddings import EmbeddingResult, EmbeddingType, EmbedV2Result, EncodingFormat, Truncate
from .types.server import ServerInfo
from .validation import int_at_least, token_ids

V2_EMBEDDING_TYPES: tuple[str, ...] = ("float", "binary", "ubinary", "base64")

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
    if set(map(type, items)) == {str}:  # the common case, checked at C speed
        return cast(list[str], items)
    if all(isinstance(item, int) and not isinstance(item, bool) for item in items):
        return [token_ids("input", items)]
    if all(isinstance(item, str) for item in items):
        return cast(list[str], items)
    for index, item in enumerate(items):
        if isinstance(item, bytes | bytearray | memoryview):
            # bytes are a Sequence of ints: without this they would go out as token ids.
            raise InvalidInputError(
                f"input[{index}]",
                item,
                "is bytes, not text",
                "Decode it first, e.g. input=[data.decode('utf-8')]; token ids go as lists of ints.",
            )
    if all(isinstance(item, Sequence) and not isinstance(item, str) for item in items):
        return [token_ids(f"input[{index}]", item) for index, item in enumerate(items)]
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
    for name in ("embed_dtype", "endianness", "truncation_side", "use_activation"):
        if options.get(name) is not None:
            features.append(name)
    return features


EMBEDDINGS_PATH = "/v1/embeddings"

EMBEDDING_WIDTH: Fact[tuple[str, int | None], int] = Fact("embedding width", key="(model, dimensions)")
"""The width of the vectors the server answered for a model and ``dimensions``: a later answer of
another width is a cut-short body or a swapped model, never silently mixed in."""

BYTES_BATCH_CAP: Fact[None, int] = Fact("bytes batch cap", key="None (the whole server)")
"""The most inputs per ``bytes`` request, set after a proxy refused a bytes answer's metadata header
(see :func:`header_may_overflow`)."""
RAW_FORMATS = ("bytes", "bytes_only")
_RAW_TYPES = ("application/octet-stream", "")


def decode_embeddings_response(
    response: httpx.Response,
    *,
    expected_items: int,
    encoding_format: str,
    embed_dtype: str,
    endianness: str,
    widen: bool,
) -> tuple[npt.NDArray[Any], str | None, Usage]:
    """Decode one ``/v1/embeddings`` response of any transport into ``(matrix, model, usage)``.

    JSON bodies may hold float lists or base64 strings; a raw body (``application/octet-stream``) is
    read only when ``encoding_format`` asked for one: ``bytes`` (its ``metadata`` header is required)
    or ``bytes_only`` (decoded with the requested ``embed_dtype`` and ``endianness``). Every answer is
    checked: one row per input, indices exactly ``0..n-1``, equal widths > 0, finite values (float32,
    bfloat16 and JSON; a float16 or fp8 cast may overflow legitimately).

    Args:
        response: the server's answer to one request of ``expected_items`` inputs.
        expected_items: how many inputs the request carried.
        encoding_format: the format the request asked for.
        embed_dtype: the dtype the request asked for (``float32`` when it named none).
        endianness: the byte order the request asked for (``native`` when it named none).
        widen: see :func:`~vllm_tasks.decoding.decode_raw`.

    Raises:
        UnexpectedResponse: (``kind="decode"``) the payload does not match the request.
        UnexpectedResponse: not vLLM's answer (a redirect, an empty body, an HTML page, ...).
        APIStatusError: a 200 whose body is vLLM's error object (the server's error).
    """
    kind = media_type(response)
    try:
        if encoding_format in RAW_FORMATS and kind in _RAW_TYPES:
            return _decode_raw_body(
                response,
                expected_items=expected_items,
                encoding_format=encoding_format,
                embed_dtype=embed_dtype,
                endianness=endianness,
                widen=widen,
            )
        if encoding_format in RAW_FORMATS and "json" not in kind:
            raise unexpected(
                response, EMBEDDINGS_PATH, f"a {kind} body where {encoding_format} embeddings were expected"
            )
        payload = json_object(response, EMBEDDINGS_PATH, task="embed")
        return _decode_json_body(
            response,
            payload,
            expected_items=expected_items,
            embed_dtype=embed_dtype,
            endianness=endianness,
            widen=widen,
        )
    except UnexpectedResponse as error:
        request = request_of(response)
        method, url = (request.method, str(request.url)) if request is not None else (None, None)
        where = f" ({method} {url})" if request is not None else ""
        raise decode_error(f"{EMBEDDINGS_PATH}: {error.message}{where}", method=method, url=url) from None


def _decode_raw_body(
    response: httpx.Response,
    *,
    expected_items: int,
    encoding_format: str,
    embed_dtype: str,
    endianness: str,
    widen: bool,
) -> tuple[npt.NDArray[Any], str | None, Usage]:
    check_status(response, EMBEDDINGS_PATH)
    metadata = response.headers.get("metadata")
    if encoding_format == "bytes" and metadata is None:
        raise unexpected(response, EMBEDDINGS_PATH, "a raw body without the `metadata` header of `bytes`")
    matrix, meta = decode_bytes_response(
        response.content,
        metadata,
        expected_items=expected_items,
        embed_dtype=embed_dtype,
        endianness=endianness,
        widen=widen,
    )
    return matrix, text_or_none(meta.get("model")), usage_of(response, EMBEDDINGS_PATH, meta.get("usage"))


def _decode_json_body(
    response: httpx.Response,
    payload: dict[str, Any],
    *,
    expected_items: int,
    embed_dtype: str,
    endianness: str,
    widen: bool,
) -> tuple[npt.NDArray[Any], str | None, Usage]:
    data = payload.get("data")
    if not isinstance(data, list):
        raise decode_error(f"the answer has no `data` list: {str(payload)[:200]!r}")
    if len(data) != expected_items:
        raise decode_error(f"the server returned {len(data)} embeddings for {expected_items} inputs")
    problem = index_problem(data)
    if problem is not None:
        raise decode_error(problem)
    rows = [item.get("embedding") for item in in_index_order(data)]
    if rows and all(isinstance(row, list) and row and isinstance(row[0], list) for row in rows):
        raise decode_error(f"one matrix per input, not one vector: {TOKEN_EMBED_ACTIVE}")
    if all(isinstance(row, str) for row in rows):
        matrix = decode_base64_rows(cast(list[str], rows), embed_dtype, endianness, widen=widen)
    elif all(isinstance(row, list) for row in rows):
        matrix = float_rows(rows)
    else:
        raise decode_error("every `embedding` must be a list of numbers or a base64 string")
    usage = usage_of(response, EMBEDDINGS_PATH, payload.get("usage"))
    return matrix, text_or_none(payload.get("model")), usage


ENCODING_FORMATS: tuple[str, ...] = ("auto", "float", "base64", "bytes", "bytes_only")
ENDIANNESSES: tuple[str, ...] = ("native", "big", "little")
TRUNCATION_SIDES: tuple[str, ...] = ("left", "right")
TRUNCATES: tuple[str, ...] = get_args(Truncate)


def _one_of(field_name: str, value: object, allowed: tuple[str, ...], *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if not isinstance(value, str) or value not in allowed:
        raise InvalidInputError(field_name, value, "is not a valid value", f"Use one of {allowed}.")


@dataclass(frozen=True)
class EmbedParams(TaskParams):
    """The vector options of ``embed`` (``/v1/embeddings``), checked on construction; each field is the
    ``Client.embed`` keyword argument of the same name (see there). Jobs, adapters and Ray callables take
    one as ``params=``.

    Raises:
        InvalidInputError: ``dimensions`` not an int >= 1, ``truncate_prompt_tokens`` not an int >= -1,
            an unknown ``encoding_format``, ``embed_dtype``, ``endianness`` or ``truncation_side``, or
            ``normalize`` together with ``use_activation``.

    Examples:
        >>> params = vt.EmbedParams(dimensions=256, normalize=True)
        >>> vt.embed_file(client, "corpus.txt", "corpus.npy", params=params)
        >>> client.embed(["hello"], **params.keywords())
    """

    dimensions: int | None = None
    encoding_format: EncodingFormat = "auto"
    embed_dtype: EmbedDType | None = None
    endianness: Endianness | None = None
    widen: bool = True
    truncate_prompt_tokens: int | None = None
    truncation_side: str | None = None
    use_activation: bool | None = None
    normalize: bool | None = None
    add_special_tokens: bool | None = None
    prompt: str | None = None
    prompt_name: str | None = None
    long_inputs: LongInputs = "error"
    chunk_tokens: int | None = None
    chunk_overlap: int | None = None

    def __post_init__(self) -> None:
        int_at_least("dimensions", self.dimensions, 1, "Or leave it unset.")
        self._check_prompts()
        check_long_inputs(
            self.long_inputs, self.chunk_tokens, self.chunk_overlap, self.truncate_prompt_tokens
        )
        _one_of("encoding_format", self.encoding_format, ENCODING_FORMATS)
        _one_of("endianness", self.endianness, ENDIANNESSES, optional=True)
        _one_of("truncation_side", self.truncation_side, TRUNCATION_SIDES, optional=True)
        int_at_least(
            "truncate_prompt_tokens",
            self.truncate_prompt_tokens,
            -1,
            "Pass a token count, -1 for the model's maximum, or leave it unset.",
        )
        if self.embed_dtype is not None and self.embed_dtype not in EMBED_DTYPES:
            raise InvalidInputError(
                "embed_dtype", self.embed_dtype, "is not a vLLM embed dtype", f"Use one of {EMBED_DTYPES}."
            )
        if self.normalize is not None and self.use_activation is not None:
            raise InvalidInputError(
                "normalize",
                self.normalize,
                "cannot be combined with use_activation",
                "Pass only use_activation.",
            )

    def _check_prompts(self) -> None:
        for name in ("prompt", "prompt_name"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InvalidInputError(name, value, "is not a string", "Pass the prompt's text or its name.")
        if self.prompt is not None and self.prompt_name is not None:
            raise InvalidInputError(
                "prompt_name", self.prompt_name, "cannot be combined with prompt", "Pass one of the two."
            )
        if self.prompt_name is None:
            return
        if not self.prompt_name:
            raise InvalidInputError(
                "prompt_name", "", "is empty", "Name one of the model's prompts, e.g. 'query'."
            )
        for name in PROMPT_NAME_EXCLUDES:
            if getattr(self, name) not in (None, "auto", True, "error"):
                raise InvalidInputError(
                    name,
                    getattr(self, name),
                    "cannot be combined with prompt_name (the server applies the model's prompt on "
                    "/v2/embed, which has no such option)",
                    "Drop it, or pass the prompt's text as prompt=... instead of prompt_name.",
                )


#: ``embed`` options that ``/v2/embed`` (where ``prompt_name`` is applied) has no counterpart for.
PROMPT_NAME_EXCLUDES = (
    "long_inputs",
    "encoding_format",
    "embed_dtype",
    "endianness",
    "truncate_prompt_tokens",
    "truncation_side",
    "use_activation",
    "normalize",
    "add_special_tokens",
)


def with_prompt(prompts: list[Any], prompt: str | None) -> list[Any]:
    """``prompts`` with ``prompt`` put before every text, as sentence-transformers' ``encode(prompt=...)``.

    Raises:
        InvalidInputError: a prompt for token ids or conversations (only texts take one).

    Examples:
        >>> with_prompt(["cats"], "query: ")
        ['query: cats']
    """
    if not prompt:
        return prompts
    return [prompt + text for text in texts_only(prompts, "prompt")]


def texts_only(prompts: list[Any], option: str) -> list[str]:
    """``prompts``, checked to be texts: ``option`` (a prompt) applies to texts only.

    Raises:
        InvalidInputError: a token-id list or a conversation, naming its position.
    """
    for index, item in enumerate(prompts):
        if not isinstance(item, str):
            raise InvalidInputError(
                f"input[{index}]",
                item,
                f"cannot take {option}: only texts do",
                f"Pass texts, or drop {option}.",
            )
    return list(prompts)


def named_prompt_result(result: EmbedV2Result, model: str | None) -> EmbeddingResult:
    """The :class:`EmbeddingResult` of an ``embed(prompt_name=...)`` call from its ``/v2/embed`` answer."""
    tokens = result.billed_units.get("input_tokens", 0)
    vectors = result.base64 if result.base64 is not None else np.zeros((0, 0), np.float32)
    return EmbeddingResult(
        vectors=vectors,
        model=model or "",
        usage=Usage(prompt_tokens=tokens, total_tokens=tokens),
        encoding_format="base64",
    )


def explain_unknown_prompt(error: BadRequestError, prompt_name: str) -> None:
    """Say on ``/v2/embed``'s 400 for an unknown ``input_type`` that it is ``prompt_name`` the model lacks."""
    if error.kind != "input_type_not_supported":
        return
    error.message = (
        f"prompt_name={prompt_name!r} is not one of the model's prompts (vLLM loads them from "
        f"config_sentence_transformers.json `prompts` or the config's `task_instructions`): "
        f"{error.message.rstrip('.')}. Pass the prompt's text as prompt=... if the model has none."
    )
    error.args = (error.message,)


@dataclass(frozen=True)
class EmbedPlan:
    """The requests of one ``embed`` call and what decoding their answers needs."""

    requests: list[Request]
    batches: list[range]
    encoding_format: str
    model: str | None
    wire_dtype: str
    wire_endianness: str
    sizes: list[int] = field(default_factory=list)


def embed_inputs(
    input: EmbedInput | None,
    messages: Sequence[Mapping[str, Any]] | Sequence[Sequence[Mapping[str, Any]]] | None,
    images: Any = None,
) -> list[Any]:
    """The prompts of an ``embed`` call: texts, token-id lists, or checked conversations (``images``
    become one single-image conversation each).

    Raises:
        InvalidInputError: not exactly one of ``input``, ``messages`` and ``images``, or a bad element.
    """
    given = [value for value in (input, messages, images) if value is not None]
    if len(given) != 1:
        raise InvalidInputError(
            "input",
            input,
            "exactly one of input=, messages= and images= is needed",
            "Pass texts as input=..., images as images=[...].",
        )
    if images is not None:
        return normalize_messages(image_conversations(images))
    if messages is not None:
        return normalize_messages(messages)
    return normalize_embed_input(input)


def image_conversations(images: Any) -> list[list[dict[str, Any]]]:
    """One chat-style conversation per image (how vLLM embeds an image: CLIP, SigLIP, multimodal embedders).

    Args:
        images: an image (``pathlib.Path``, bytes, PIL image, ``uint8`` array) or a list of images (also
            ``http(s)``/``data:`` URLs).

    Raises:
        InvalidInputError: a bare string (a path or a URL? pass ``Path(...)`` or a list), or an empty list.

    Examples:
        >>> image_conversations(["https://example.com/cat.png"])[0][0]["content"][0]["type"]
        'image'
    """
    if isinstance(images, str):
        raise InvalidInputError(
            "images", images, "is a bare string", "Pass [url] for a URL, or pathlib.Path(...) for a file."
        )
    items = list(images) if isinstance(images, list | tuple) else [images]
    if not items:
        raise InvalidInputError("images", images, "is empty", "Pass at least one image.")
    return [[{"role": "user", "content": [{"type": "image", "image": image}]}] for image in items]


def plan_embed(
    info: ServerInfo,
    prompts: Sequence[Any],
    params: EmbedParams,
    call: CallOptions,
    *,
    client_model: str | None,
    batch_size: int,
    conversations: bool,
    max_chars: int = defaults.EMBED_MAX_BATCH_CHARS,
    bytes_batch_cap: int | None = None,
) -> EmbedPlan:
    """Check ``params`` against the server's version and build the batched ``/v1/embeddings`` requests.

    A ``bytes`` request carries at most :data:`defaults.EMBED_BYTES_HEADER_MAX_BATCH` inputs (its answer's
    ``metadata`` header grows with them), and at most ``bytes_batch_cap`` once a proxy refused larger ones
    (see :func:`header_may_overflow`).

    Raises:
        UnsupportedByServer: a transport, dtype or field the server's vLLM version lacks.
    """
    fmt = _choose_format(info, params.encoding_format)
    options: dict[str, Any] = {
        "embed_dtype": params.embed_dtype,
        "endianness": params.endianness,
        "truncation_side": params.truncation_side,
        "use_activation": params.use_activation,
    }
    if conversations and len(prompts) > 1 and not gates.supports(info, "batched_chat_embeddings"):
        batch_size = 1
    gates.require(info, _gated_features(fmt, options))
    body: dict[str, Any] = {
        "model": resolve_model(info, call.model, client_model),
        "encoding_format": fmt,
        "dimensions": params.dimensions,
        "truncate_prompt_tokens": params.truncate_prompt_tokens,
        "add_special_tokens": params.add_special_tokens,
        "use_activation": params.use_activation,
        **options,
        **gates.normalize_fields(info, params.normalize),
    }
    body = {key: value for key, value in body.items() if value is not None}
    body.update(call.extra_body or {})
    if fmt == "bytes":
        batch_size = min(batch_size, bytes_batch_cap or defaults.EMBED_BYTES_HEADER_MAX_BATCH)
    sizes = list(map(len, prompts))
    batches = plan_batches(sizes, batch_size, max_chars)
    requests = []
    for batch in batches:
        items = [prompts[i] for i in batch]
        payload = {"messages": items[0] if len(items) == 1 else items} if conversations else {"input": items}
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
    return EmbedPlan(
        requests=requests,
        batches=batches,
        encoding_format=fmt,
        model=body.get("model"),
        wire_dtype=str(body.get("embed_dtype", "float32")),
        wire_endianness=str(body.get("endianness", "native")),
        sizes=sizes,
    )


def header_may_overflow(plan: EmbedPlan, error: APIStatusError) -> bool:
    """Whether ``error`` may be a proxy refusing the plan's ``bytes`` answers for their header.

    vLLM's ``bytes`` answer carries one ``metadata`` header entry per input (~110 bytes); nginx's default
    ``proxy_buffer_size`` (4 KiB) turns a batch of 64 into a 502 "upstream sent too big header". A 502
    for a plan with larger batches than :data:`defaults.EMBED_BYTES_MAX_BATCH` is worth one try with
    smaller ones; a 502 that persists then is the upstream's own.
    """
    return (
        error.status_code == 502
        and plan.encoding_format == "bytes"
        and max(map(len, plan.batches), default=0) > defaults.EMBED_BYTES_MAX_BATCH
    )


def merge_embeddings(
    plan: EmbedPlan,
    responses: Sequence[httpx.Response],
    params: EmbedParams,
    info: ServerInfo,
    known_width: int | None = None,
) -> EmbeddingResult:
    """Decode every batch's response and stack them in input order.

    ``known_width`` is the width earlier answers for the same model and ``dimensions`` had: a
    ``bytes_only`` body states no width, so one cut short at a row boundary is caught only by it.

    Raises:
        UnexpectedResponse: (``kind="decode"``) a response does not match its request, or its width
            differs from ``known_width``.
        UnexpectedResponse: (``kind="dimensions_not_applied"``) the server ignored ``dimensions``
            (vLLM < 0.24.0).
    """
    matrices = []
    usage = Usage()
    served_model: str | None = None
    for batch, response in zip(plan.batches, responses, strict=True):
        matrix, model_name, batch_usage = decode_embeddings_response(
            response,
            expected_items=len(batch),
            encoding_format=plan.encoding_format,
            embed_dtype=plan.wire_dtype,
            endianness=plan.wire_endianness,
            widen=params.widen,
        )
        matrices.append(matrix)
        usage += batch_usage
        served_model = served_model or model_name
    widths = {matrix.shape[1] for matrix in matrices}
    if len(widths) > 1:
        raise decode_error(f"/v1/embeddings: the batches came back with different widths {sorted(widths)}")
    vectors = np.concatenate(matrices) if len(matrices) > 1 else matrices[0]
    if known_width is not None and vectors.shape[1] != known_width:
        raise decode_error(
            f"/v1/embeddings: {vectors.shape[1]}-wide vectors for model {plan.model!r}, where this client's "
            f"earlier answers were {known_width}-wide: the answer was cut short or the served model "
            "changed. Call server_info(refresh=True) (or make a new client) if the model changed."
        )
    if params.dimensions is not None and vectors.shape[1] != params.dimensions:
        raise UnexpectedResponse(
            f"asked for dimensions={params.dimensions} but the server returned {vectors.shape[1]}-wide "
            f"vectors (vLLM {info.version or 'unknown'} ignored it; vLLM >= 0.24.0 refuses unsupported "
            "values). Use a Matryoshka model/dimension, or leave dimensions unset.",
            kind="dimensions_not_applied",
        )
    return EmbeddingResult(
        vectors=vectors,
        model=served_model or str(plan.model or ""),
        usage=usage,
        encoding_format=plan.encoding_format,
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
    """Turn ``{"type": "image", "image": <path/bytes/PIL/array/URL>}`` parts into ``image_url`` parts, and
    check the ``data:`` URLs of the caller's ``image_url`` parts."""
    if not isinstance(content, list):
        return content
    from .images import checked_part, image_content_part

    return [
        (image_content_part(part["image"]) if part.get("type") == "image" else checked_part(part, "messages"))
        if isinstance(part, Mapping)
        else part
        for part in content
    ]


def name_too_long_input(
    error: ContextLengthExceeded, prompts: Sequence[Any], counts: Mapping[int, int], limit: int
) -> None:
    """Note on ``error`` the first input over ``limit`` tokens (``input_index`` and the message).

    Token-id inputs are measured by their length; texts by ``counts`` (index -> tokens, from
    ``/tokenize``, for the longest texts only).
    """
    if prompts and isinstance(prompts[0], list):
        found = next((i for i, ids in enumerate(prompts) if len(ids) > limit), None)
    else:
        found = min((i for i, count in counts.items() if count > limit), default=None)
    if found is not None:
        error.input_index = found
        error.message = f"input[{found}] is too long: {error.message}"
        error.args = (error.message,)


@dataclass(frozen=True)
class EmbedV2Params(TaskParams):
    """The options of ``embed_v2`` (Cohere-style ``/v2/embed``), checked on construction; each field is
    the ``Client.embed_v2`` keyword argument of the same name (see there).

    Raises:
        InvalidInputError: an embedding type vLLM does not serve, ``output_dimension`` or ``max_tokens``
            not an int >= 1, an unknown ``truncate``.

    Examples:
        >>> params = vt.EmbedV2Params(input_type="search_query", embedding_types=["float", "ubinary"])
        >>> result = client.embed_v2(["hello"], **params.keywords())
    """

    input_type: str | None = None
    embedding_types: Sequence[EmbeddingType] | None = None
    output_dimension: int | None = None
    truncate: Truncate | None = None
    max_tokens: int | None = None
    priority: int | None = None

    def __post_init__(self) -> None:
        v2_embedding_types(self.embedding_types)
        int_at_least("output_dimension", self.output_dimension, 1, "Or leave it unset.")
        int_at_least("max_tokens", self.max_tokens, 1, "Or leave it unset.")
        _one_of("truncate", self.truncate, TRUNCATES, optional=True)

    def body_fields(self) -> dict[str, Any]:
        """The request's JSON fields (``embedding_types`` defaulted to ``["float"]``)."""
        return {
            "input_type": self.input_type,
            "embedding_types": v2_embedding_types(self.embedding_types),
            "output_dimension": self.output_dimension,
            "truncate": self.truncate,
            "max_tokens": self.max_tokens,
            "priority": self.priority,
        }


def v2_inputs(
    texts: Sequence[str] | None, images: Sequence[Any] | None, inputs: Sequence[Mapping[str, Any]] | None
) -> tuple[str, list[Any]]:
    """Which of ``texts``/``images``/``inputs`` was given, and its checked items (images encoded).

    Raises:
        InvalidInputError: not exactly one given, an empty list, or a text that is not a str.
    """
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
    field_name, values = next(iter(given.items()))
    if isinstance(values, str | bytes) or not isinstance(values, Sequence) or len(values) == 0:
        raise InvalidInputError(field_name, values, "must be a non-empty list", f"e.g. {field_name}=[...]")
    items = list(values)
    if field_name == "texts":
        for index, text in enumerate(items):
            if not isinstance(text, str):
                raise InvalidInputError(f"texts[{index}]", text, "is not a str", "Pass strings in texts=.")
    elif field_name == "images":
        from .images import image_to_data_url

        items = [image_to_data_url(item, field=f"images[{index}]") for index, item in enumerate(items)]
    return field_name, items


def v2_embedding_types(embedding_types: Sequence[EmbeddingType | str] | None) -> list[str]:
    """The requested ``/v2/embed`` types (default ``["float"]``).

    Raises:
        InvalidInputError: a type vLLM does not serve (``int8``/``uint8`` are refused by the server).
    """
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
    return types


def plan_embed_v2(
    info: ServerInfo,
    field_name: str,
    items: Sequence[Any],
    body_fields: Mapping[str, Any],
    call: CallOptions,
    *,
    client_model: str | None,
    batch_size: int,
    max_chars: int = defaults.EMBED_MAX_BATCH_CHARS,
) -> tuple[list[Request], list[range]]:
    """Gate ``/v2/embed`` on the server's version and build the batched requests (at most ``batch_size``
    items and, in texts, ``max_chars`` characters each).

    Raises:
        UnsupportedByServer: the server is older than vLLM 0.18.0 (or lacks ``priority``).
    """
    features = ["/v2/embed"] + (["v2_embed_priority"] if body_fields.get("priority") is not None else [])
    gates.require(info, features)
    body = {"model": resolve_model(info, call.model, client_model), **body_fields}
    body = {key: value for key, value in body.items() if value is not None}
    body.update(call.extra_body or {})
    sizes = [len(item) if isinstance(item, str) else 1 for item in items]
    batches = plan_batches(sizes, batch_size, max_chars)
    requests = [
        Request(
            "POST",
            "/v2/embed",
            json={**body, field_name: [items[i] for i in batch]},
            headers=call.extra_headers,
            timeout=call.timeout,
            task="embed_v2",
        )
        for batch in batches
    ]
    return requests, batches


def merge_v2_responses(
    payloads: Sequence[Mapping[str, Any]], types: Sequence[str], counts: Sequence[int] | None = None
) -> EmbedV2Result:
    """Merge ``/v2/embed`` response bodies (one per batch, in order) into one result.

    Every body is checked: an ``embeddings`` object holding each requested type, one row per input
    (``counts[i]`` rows for batch ``i`` when given), rows of one width > 0 across batches, finite floats,
    ``binary``/``ubinary`` values in the int8/uint8 range, and ``texts``/``meta``/``id`` of the right types.

    Raises:
        UnexpectedResponse: (``kind="decode"``) naming the batch and what is wrong.
    """
    arrays: dict[str, list[npt.NDArray[Any]]] = {name: [] for name in types}
    texts: list[str] = []
    billed: dict[str, int] = {}
    for batch, payload in enumerate(payloads):
        where = f"/v2/embed (batch {batch})"
        embeddings = payload.get("embeddings")
        if not isinstance(embeddings, dict):
            raise decode_error(f"{where}: the answer has no `embeddings` object: {str(payload)[:200]!r}")
        expected = counts[batch] if counts is not None else None
        for name in types:
            if name not in embeddings:
                raise decode_error(f"the server's /v2/embed response has no {name!r} embeddings")
            values = embeddings[name]
            rows = len(values) if isinstance(values, list) else -1
            if rows <= 0 or (expected is not None and rows != expected):
                raise decode_error(f"{where}: {rows} {name!r} rows for {expected or 'the'} inputs")
            try:
                arrays[name].append(_v2_array(name, values))
            except UnexpectedResponse as error:
                raise decode_error(f"{where}: {name!r}: {error.message}") from None
        texts.extend(_v2_texts(payload.get("texts"), where))
        _add_billed(billed, payload.get("meta"), where)
    for name, parts in arrays.items():
        widths = {part.shape[1] for part in parts}
        if len(widths) > 1:
            raise decode_error(
                f"/v2/embed: the batches' {name!r} rows have different widths {sorted(widths)}"
            )
    merged = {name: np.concatenate(parts) for name, parts in arrays.items()}
    first_id = payloads[0].get("id") if payloads else None
    return EmbedV2Result(
        float=merged.get("float"),
        binary=merged.get("binary"),
        ubinary=merged.get("ubinary"),
        base64=merged.get("base64"),
        texts=texts or None,
        billed_units=billed,
        id=text_or_none(first_id),
    )


def _v2_texts(value: object, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(text, str) for text in value):
        raise decode_error(f"{where}: `texts` is not a list of strings: {str(value)[:100]!r}")
    return value


def _add_billed(billed: dict[str, int], meta: object, where: str) -> None:
    if meta is None:
        return
    units = meta.get("billed_units") if isinstance(meta, dict) else None
    if not isinstance(meta, dict) or not isinstance(units, dict | None):
        raise decode_error(f"{where}: `meta.billed_units` is not an object: {str(meta)[:100]!r}")
    for key, value in (units or {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            billed[key] = billed.get(key, 0) + int(value)


_V2_INT_RANGES = {"binary": (np.int8, -128, 127), "ubinary": (np.uint8, 0, 255)}


def _v2_array(name: str, values: Sequence[Any]) -> npt.NDArray[Any]:
    if name == "float":
        return float_rows(values)
    if name in _V2_INT_RANGES:
        dtype, low, high = _V2_INT_RANGES[name]
        wide = float_rows(values, np.float64)
        if (wide != np.round(wide)).any() or wide.min() < low or wide.max() > high:
            raise decode_error(f"values outside the {np.dtype(dtype).name} range {low}..{high}")
        return wide.astype(dtype)
    # base64 on /v2/embed is always little-endian float32, whatever embed_dtype would say.
    if not all(isinstance(value, str) for value in values):
        raise decode_error("base64 rows must be strings")
    return decode_base64_rows(values, "float32", "little")
