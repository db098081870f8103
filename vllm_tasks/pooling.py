"""``classify`` (``/classify``) and ``pool`` (``/pooling``), the pure parts, and the ``maxsim`` helper.

Checking inputs (texts or token ids, never mixed), the ``pool`` task, building the batched requests and
merging the answers into one result in input order; ``maxsim`` computes a late-interaction score from two
per-token matrices (``pool`` on a ``token_embed`` model), as vLLM does. The sending is
``vllm_tasks/_async/pooling.py`` (and its generated sync twin).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import httpx
import numpy as np
import numpy.typing as npt

from . import defaults, gates
from .batching import plan_batches
from .calls import CallOptions, TaskParams
from .decoding import check_finite, decode_bytes_tensors, float_rows
from .embeddings import embed_inputs
from .errors import APIError, InvalidInputError, UnexpectedResponse
from .responses import json_object, malformed, text_or_none, usage_of
from .scoring import answer_data, as_list, check_truncate_prompt_tokens, is_token_id, json_sizes, request_body
from .tasks import TaskName
from .transport import Request
from .types.common import Usage
from .types.scoring import ClassificationResult, ClassLabel, PoolingResult
from .types.server import ServerInfo
from .validation import int_at_least, number_in_range, token_ids

PoolPrompts = list[str] | list[list[int]]
"""The checked inputs of ``classify``/``pool``: texts, or token-id lists (never mixed)."""

POOLING_TASKS = ("embed", "classify", "token_embed", "token_classify", "embed&token_classify", "plugin")

PoolEncodingFormat = Literal["auto", "float", "bytes"]
"""How ``pool`` has arrays sent: ``auto`` (binary where the server has it), JSON ``float``, or ``bytes``."""
POOL_ENCODING_FORMATS: tuple[str, ...] = ("auto", "float", "bytes")


def pool_inputs(value: Any, field: str = "input") -> PoolPrompts:
    """Check ``classify``/``pool`` input: texts or token ids, in the shapes vLLM's ``input`` takes.

    A string, a list of strings, one tokenized prompt (a list of ints) or several (a list of lists of
    ints); texts and token ids do not mix. vLLM reads ``input: list[int] | list[list[int]] | str |
    list[str]`` on ``/classify`` and ``/pooling`` (``CompletionRequestMixin``, 0.32).

    Raises:
        InvalidInputError: an empty input, bytes, a mix, or a bad element, naming it (``input[2][0]``).

    Examples:
        >>> pool_inputs("hello")
        ['hello']
        >>> pool_inputs([101, 7592, 102])
        [[101, 7592, 102]]
    """
    items = [value] if isinstance(value, str) else as_list(value, field)
    if not items:
        raise InvalidInputError(field, items, "is empty", "Pass at least one text or token-id list.")
    if is_token_id(items[0]):
        return [token_ids(field, items)]
    if _is_id_list(items[0]):
        return [token_ids(f"{field}[{i}]", _id_list(item, f"{field}[{i}]")) for i, item in enumerate(items)]
    for index, text in enumerate(items):
        if not isinstance(text, str):
            raise InvalidInputError(
                f"{field}[{index}]", _shown(text), "must be a string", "Texts and token ids do not mix."
            )
    return items


def _is_id_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray | memoryview)


def _id_list(item: Any, field: str) -> Sequence[Any]:
    if not _is_id_list(item):
        raise InvalidInputError(
            field,
            _shown(item),
            "must be a list of token ids, as the first one is",
            "Texts and token ids do not mix.",
        )
    return cast(Sequence[Any], item)


def _shown(value: Any) -> Any:
    """What an error shows of a bad element: bytes as their type and length, else the type's name."""
    if isinstance(value, bytes | bytearray | memoryview):
        return f"{type(value).__name__} of length {len(value)} (decode text first)"
    return type(value).__name__


def check_pool_task(task: str | None) -> None:
    """Check ``pool``'s ``task``: ``None`` or one of :data:`POOLING_TASKS`.

    Raises:
        InvalidInputError: another name; the removed ``score`` and ``encode`` tasks say what replaced them.

    Examples:
        >>> check_pool_task("token_embed")
    """
    if task is not None and task not in POOLING_TASKS:
        fix = {
            "score": "The `score` task was removed in vLLM 0.19; use 'classify'.",
            "encode": "The `encode` task was removed; use 'token_embed' or 'token_classify'.",
        }.get(task, "")
        raise InvalidInputError("task", task, f"must be one of {', '.join(POOLING_TASKS)}", fix)


@dataclass(frozen=True)
class _ActivationParams(TaskParams):
    """The options ``classify`` and ``pool`` share: the request's activation and truncation."""

    use_activation: bool | None = None
    truncate_prompt_tokens: int | None = None

    def __post_init__(self) -> None:
        check_truncate_prompt_tokens(self.truncate_prompt_tokens)
        if self.use_activation is not None and not isinstance(self.use_activation, bool):
            raise InvalidInputError(
                "use_activation", self.use_activation, "must be True, False or None", "Pass a bool."
            )

    def fields(self) -> dict[str, Any]:
        """The request's JSON fields."""
        return {"use_activation": self.use_activation, "truncate_prompt_tokens": self.truncate_prompt_tokens}


@dataclass(frozen=True)
class ClassifyParams(_ActivationParams):
    """The options of ``classify`` (``/classify``), checked on construction; each field is its keyword
    argument of the same name (see :meth:`~vllm_tasks.Client.classify`).

    Raises:
        InvalidInputError: ``truncate_prompt_tokens`` below -1, ``use_activation`` or ``multi_label`` not
            a bool, ``threshold`` outside 0..1, ``top_k`` below 1, or ``label_names`` not a non-empty list
            of strings.

    Examples:
        >>> params = vt.ClassifyParams(multi_label=True, threshold=0.3)
        >>> client.classify(["great!"], **params.keywords()).labels
        [['positive', 'excited']]
    """

    multi_label: bool | None = None
    threshold: float = 0.5
    top_k: int | None = None
    label_names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.multi_label is not None and not isinstance(self.multi_label, bool):
            raise InvalidInputError(
                "multi_label",
                self.multi_label,
                "must be True, False or None",
                "None decides from the answer.",
            )
        number_in_range("threshold", self.threshold, 0.0, 1.0, "A probability, e.g. 0.5.")
        int_at_least("top_k", self.top_k, 1, "None keeps every label the rule chooses.")
        if self.label_names is not None:
            names = self.label_names
            if isinstance(names, str) or not isinstance(names, Sequence) or not names:
                raise InvalidInputError(
                    "label_names", _shown(names), "must be a non-empty list of names", _LABEL_NAMES_FIX
                )
            for index, name in enumerate(names):
                if not isinstance(name, str):
                    raise InvalidInputError(f"label_names[{index}]", _shown(name), "must be a string", "")
            object.__setattr__(self, "label_names", tuple(names))


_LABEL_NAMES_FIX = "Pass the model's id2label names in class order (its config.json)."


@dataclass(frozen=True)
class PoolParams(_ActivationParams):
    """The options of ``pool`` (``/pooling``), checked on construction; each field is its keyword
    argument of the same name (see :meth:`~vllm_tasks.Client.pool`).

    Raises:
        InvalidInputError: ``truncate_prompt_tokens`` below -1, ``use_activation`` not a bool, or a removed
            ``task`` name.

    Examples:
        >>> params = vt.PoolParams(task="token_embed")
        >>> client.pool(["hello"], **params.keywords()).data[0].shape
        (4, 128)
    """

    task: str | None = None
    encoding_format: PoolEncodingFormat = "auto"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_pool_task(self.task)
        if self.encoding_format not in POOL_ENCODING_FORMATS:
            raise InvalidInputError(
                "encoding_format",
                self.encoding_format,
                f"must be one of {', '.join(POOL_ENCODING_FORMATS)}",
                "'auto' takes the binary transport where the server has it.",
            )

    def fields(self) -> dict[str, Any]:
        """The request's JSON fields, less ``encoding_format`` (see :func:`pool_wire_format`)."""
        return {"task": self.task, **super().fields()}


def pool_wire_format(info: ServerInfo, requested: PoolEncodingFormat) -> str | None:
    """The ``encoding_format`` a ``/pooling`` request sends: ``"bytes"`` (raw float32 arrays, their shapes
    in a header) where asked for or, for ``"auto"``, where the server's version has it; else None (JSON
    floats, the server's default).

    Raises:
        UnsupportedByServer: ``"bytes"`` asked of a vLLM older than the binary transport.

    Examples:
        >>> from vllm_tasks.types import ServerInfo
        >>> def server(version):
        ...     return ServerInfo(base_url="http://h", version=version, models=(), routes=None)
        >>> pool_wire_format(server("0.32.0"), "auto")
        'bytes'
        >>> pool_wire_format(server("0.11.0"), "auto") is None
        True
    """
    if requested == "float":
        return None
    if requested == "bytes":
        gates.require(info, ["encoding_format_bytes"])
        return "bytes"
    known = info.parsed_version.known
    return "bytes" if known and gates.supports(info, "encoding_format_bytes") else None


def pool_prompts(input: Any, messages: Any, images: Any) -> tuple[list[Any], bool]:
    """The prompts of a ``pool`` call and whether they are conversations: texts or token ids
    (:func:`pool_inputs`), or one chat-style conversation per image or per ``messages`` conversation.

    Raises:
        InvalidInputError: not exactly one of ``input``, ``messages`` and ``images``, or a bad element.

    Examples:
        >>> pool_prompts(["a text"], None, None)
        (['a text'], False)
        >>> pool_prompts(None, None, ["https://example.com/page.png"])[1]
        True
    """
    if input is not None and messages is None and images is None:
        return list(pool_inputs(input)), False
    return embed_inputs(input, messages, images), True


def plan_pooling_requests(
    path: str,
    task: TaskName,
    prompts: Sequence[Any],
    fields: Mapping[str, Any],
    call: CallOptions,
    *,
    batch_size: int,
    conversations: bool = False,
    max_bytes: int = defaults.SCORE_MAX_REQUEST_BYTES,
) -> tuple[list[Request], list[range]]:
    """The batched ``/classify`` or ``/pooling`` requests of ``prompts`` and the batches they carry.

    Batches hold at most ``batch_size`` prompts (texts or token-id lists, see :func:`pool_inputs`) and
    ``max_bytes`` of JSON (a token id counted as
    :data:`~vllm_tasks.scoring.TOKEN_ID_JSON_BYTES`), and a ``bytes`` request at most
    :data:`defaults.EMBED_BYTES_HEADER_MAX_BATCH` (its answer's ``metadata`` header grows with them);
    ``fields`` (``None`` values left out) and
    ``call.extra_body`` go into every body. ``conversations`` go one per request as ``messages``
    (``/pooling`` takes a single conversation, vLLM 0.32).

    Examples:
        >>> requests, batches = plan_pooling_requests(
        ...     "/classify", "classify", ["a", "b"], {}, CallOptions(), batch_size=1
        ... )
        >>> batches
        [range(0, 1), range(1, 2)]
    """
    if conversations:
        batches = [range(i, i + 1) for i in range(len(prompts))]
    else:
        if fields.get("encoding_format") == "bytes":
            batch_size = min(batch_size, defaults.EMBED_BYTES_HEADER_MAX_BATCH)
        batches = plan_batches(json_sizes(prompts), batch_size, max_bytes)
    requests = [
        Request(
            "POST",
            path,
            json=request_body(
                fields,
                call.extra_body,
                **(
                    {"messages": prompts[batch[0]]}
                    if conversations
                    else {"input": [prompts[i] for i in batch]}
                ),
            ),
            headers=call.extra_headers,
            timeout=call.timeout,
            task=task,
        )
        for batch in batches
    ]
    return requests, batches


def _prompt_field(prompts: Sequence[Any], batch: range, conversations: bool) -> dict[str, Any]:
    return {"messages": prompts[batch[0]]} if conversations else {"input": [prompts[i] for i in batch]}


def _merge_entries(
    responses: Sequence[httpx.Response], batches: Sequence[range], path: str, key: str
) -> tuple[list[tuple[dict[str, Any], npt.NDArray[Any]]], Usage, str | None]:
    """Each input's entry with its ``key`` array (checked numbers), in input order; usage; model."""
    entries: list[tuple[dict[str, Any], npt.NDArray[Any]]] = []
    usage = Usage()
    model: str | None = None
    task: TaskName = "classify" if path == "/classify" else "pooling"
    for response, batch in zip(responses, batches, strict=True):
        payload = json_object(response, path, task=task)
        for entry in answer_data(response, payload, path, len(batch)):
            value = entry.get(key)
            if not isinstance(value, list) or not value:
                raise malformed(response, path, f"{key}={str(value)[:50]!r} is not a non-empty list")
            nested = isinstance(value[0], list)
            array = _rows(response, path, value if nested else [value], np.float64)
            entries.append((entry, array if nested else array[0]))
        usage += usage_of(response, path, payload.get("usage"))
        model = model or text_or_none(payload.get("model"))
    return entries, usage, model


def _rows(response: httpx.Response, what: str, rows: list[Any], dtype: npt.DTypeLike) -> npt.NDArray[Any]:
    try:
        return float_rows(rows, dtype)
    except UnexpectedResponse as error:
        raise malformed(response, what, error.message) from None


def merge_classify(
    responses: Sequence[httpx.Response],
    batches: Sequence[range],
    model: str | None,
    params: ClassifyParams = ClassifyParams(),
) -> ClassificationResult:
    """Merge ``/classify`` answers into a ``[n, num_classes]`` probability matrix and each input's labels,
    chosen by :func:`choose_labels`.

    Args:
        responses: one answer per batch.
        batches: the input positions each request carried.
        model: the model named in the requests (else the served one is reported).
        params: the call's options (how labels are chosen).

    Raises:
        APIError: an answer without ``data``, or with a result count that does not match its batch.
        InvalidInputError: ``label_names`` whose length is not the model's number of classes.
    """
    entries, usage, served = _merge_entries(responses, batches, "/classify", "probs")
    widths = {array.shape for _, array in entries}
    if len(widths) != 1 or len(next(iter(widths))) != 1:
        raise APIError(f"/classify: the server returned probabilities of shapes {sorted(widths)[:5]}")
    probs = np.stack([array for _, array in entries])
    server_labels = [entry.get("label") for entry, _ in entries]
    if not all(label is None or isinstance(label, str) for label in server_labels):
        raise APIError(f"/classify: labels that are not strings: {server_labels[:5]}")
    multi_label, predictions = choose_labels(probs, cast(list[str | None], server_labels), params)
    labels: list[str | None] | list[list[str | None]]
    if multi_label or params.top_k is not None:
        labels = [[chosen.label for chosen in row] for row in predictions]
    else:
        labels = [row[0].label for row in predictions]
    return ClassificationResult(
        labels=labels,
        predictions=predictions,
        probs=probs,
        num_classes=probs.shape[1],
        multi_label=multi_label,
        model=model or served or "",
        usage=usage,
    )


SOFTMAX_SUM_TOLERANCE = 1e-3
"""How far a row of one softmax may sum from 1 and still be one (float32 rounding is about 1e-6 a class)."""


def looks_multi_label(probs: npt.NDArray[np.float64]) -> bool:
    """Whether ``/classify`` probabilities are a multi-label model's (one sigmoid per class) rather than
    one softmax over the classes: at least two classes, every value in ``[0, 1]``, and at least one row
    whose sum is more than :data:`SOFTMAX_SUM_TOLERANCE` from 1.

    vLLM says nothing about it in its answers or in ``/v1/models``: it applies a sigmoid to each class
    where the model's config has ``problem_type: multi_label_classification`` (also for one class, and
    where a sentence-transformers ``activation_fn`` is a sigmoid), a softmax otherwise (0.32,
    ``get_act_fn``). Sigmoids that happen to sum to 1 in every row read as one softmax: pass
    ``multi_label=True`` to be sure.

    Examples:
        >>> looks_multi_label(np.array([[0.9, 0.7, 0.1]]))
        True
        >>> looks_multi_label(np.array([[0.7, 0.2, 0.1]]))
        False
    """
    if probs.ndim != 2 or probs.shape[1] < 2 or not ((probs >= 0) & (probs <= 1)).all():
        return False
    return bool((np.abs(probs.sum(axis=1) - 1.0) > SOFTMAX_SUM_TOLERANCE).any())


def choose_labels(
    probs: npt.NDArray[np.float64], server_labels: Sequence[str | None], params: ClassifyParams
) -> tuple[bool, list[list[ClassLabel]]]:
    """Whether the model is taken as multi-label, and each input's chosen classes, most probable first.

    Multi-label (``params.multi_label``, or when None :func:`looks_multi_label`; never guessed from raw
    logits, ``use_activation=False``): every class whose probability is over ``params.threshold`` (of a
    logit: its sigmoid), at most ``top_k``. Single-label: the most probable class, or the ``top_k`` most
    probable. A class is named by ``params.label_names``, else by the server's label of an input whose
    most probable class it is, else ``None`` (the server names only the most probable class).

    Raises:
        InvalidInputError: ``label_names`` whose length is not the number of classes.
    """
    count = probs.shape[1]
    if params.multi_label is not None:
        multi_label = params.multi_label
    else:
        multi_label = params.use_activation is not False and looks_multi_label(probs)
    names = _class_names(probs, server_labels, params.label_names)
    chosen: list[list[ClassLabel]] = []
    for row in probs:
        order = sorted(range(count), key=lambda i: (-row[i], i))
        if multi_label:
            activated = row if params.use_activation is not False else 1.0 / (1.0 + np.exp(-row))
            order = [i for i in order if activated[i] > params.threshold]
        keep = order[: params.top_k or (count if multi_label else 1)]
        chosen.append([ClassLabel(index=i, label=names.get(i), score=float(row[i])) for i in keep])
    return multi_label, chosen


def _class_names(
    probs: npt.NDArray[np.float64], server_labels: Sequence[str | None], label_names: Sequence[str] | None
) -> dict[int, str | None]:
    if label_names is not None:
        if len(label_names) != probs.shape[1]:
            raise InvalidInputError(
                "label_names",
                f"{len(label_names)} names",
                f"must name each of the model's {probs.shape[1]} classes",
                _LABEL_NAMES_FIX,
            )
        return dict(enumerate(label_names))
    return {
        int(np.argmax(row)): label
        for row, label in zip(probs, server_labels, strict=True)
        if label is not None
    }


def merge_pool(
    responses: Sequence[httpx.Response], batches: Sequence[range], model: str | None
) -> PoolingResult:
    """Merge ``/pooling`` answers into one float32 array per input (a matrix on ``token_*`` tasks).

    Raises:
        APIError: an answer without ``data``, or with a result count that does not match its batch.
        UnexpectedResponse: arrays of different shapes in one answer (``kind="decode"``).
    """
    if responses and all(is_binary(response) for response in responses):
        data, usage, served = _merge_binary(responses, batches)
    else:
        entries, usage, served = _merge_entries(responses, batches, "/pooling", "data")
        data = [array.astype(np.float32) for _, array in entries]
    widths = {(array.ndim, array.shape[-1]) for array in data}
    if len(widths) > 1:  # every pooling task gives one width ([d], or [tokens, d]) for all inputs
        shapes = [array.shape for array in data][:5]
        raise UnexpectedResponse(
            f"/pooling: the server returned arrays of different shapes {shapes}; every input of one "
            "pooling task has one width",
            kind="decode",
        )
    return PoolingResult(data=data, model=model or served or "", usage=usage)


def is_binary(response: httpx.Response) -> bool:
    """Whether ``response`` is a ``bytes`` answer (``application/octet-stream``) rather than JSON."""
    content_type: str = response.headers.get("content-type", "")
    return content_type.startswith("application/octet-stream")


def _merge_binary(
    responses: Sequence[httpx.Response], batches: Sequence[range]
) -> tuple[list[npt.NDArray[np.float32]], Usage, str | None]:
    """The arrays of ``bytes`` answers in input order (float32, shaped by each answer's metadata)."""
    data: list[npt.NDArray[np.float32]] = []
    usage = Usage()
    model: str | None = None
    for response, batch in zip(responses, batches, strict=True):
        try:
            arrays, meta = decode_bytes_tensors(
                response.content, response.headers.get("metadata"), expected_items=len(batch)
            )
        except UnexpectedResponse as error:
            raise malformed(response, "/pooling", error.message) from None
        data.extend(check_finite(array).astype(np.float32, copy=False) for array in arrays)
        usage += usage_of(response, "/pooling", meta.get("usage"))
        model = model or text_or_none(meta.get("model"))
    return data, usage, model


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
        InvalidInputError: an argument that is not a non-empty ``[tokens, d]`` matrix of finite numbers
            (strings, ragged rows, NaN or infinity, 1-D or 3-D, no tokens, ``d == 0``), or widths that differ.

    Examples:
        >>> q = client.pool("what is vllm?").data[0]
        >>> d = client.pool("vLLM is an inference engine").data[0]
        >>> maxsim(q, d)
        7.93...
    """
    query = _token_matrix("query_vectors", query_vectors)
    doc = _token_matrix("doc_vectors", doc_vectors)
    if query.shape[1] != doc.shape[1]:
        raise InvalidInputError(
            "doc_vectors", f"width {doc.shape[1]}", f"must match the query's width {query.shape[1]}", ""
        )
    with np.errstate(over="ignore", invalid="ignore"):
        score = float((query @ doc.T).max(axis=1).sum())
    if not np.isfinite(score):
        raise InvalidInputError(
            "doc_vectors", f"score {score}", "overflows float64", "Pass unit-scale vectors."
        )
    return score


_TOKEN_MATRIX_FIX = "Pass a token_embed model's per-token matrix, e.g. client.pool(text).data[0]."


def _token_matrix(field: str, value: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """``value`` as a float64 ``[tokens, d]`` matrix with ``tokens, d > 0`` and finite values.

    Raises:
        InvalidInputError: naming ``field`` and what is wrong.
    """
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as error:  # ragged rows
        raise InvalidInputError(
            field, type(value).__name__, f"is not a matrix ({error})", _TOKEN_MATRIX_FIX
        ) from None
    if raw.size and raw.dtype.kind not in "iuf":
        raise InvalidInputError(field, f"array of {raw.dtype}", "must hold numbers", _TOKEN_MATRIX_FIX)
    if raw.ndim != 2 or 0 in raw.shape:
        raise InvalidInputError(
            field, f"array of shape {raw.shape}", "must be a non-empty [tokens, d] matrix", _TOKEN_MATRIX_FIX
        )
    with np.errstate(over="ignore"):  # an overflow is a non-finite value, refused below
        matrix = raw.astype(np.float64)
    if not np.isfinite(matrix).all():
        row = int(np.argwhere(~np.isfinite(matrix))[0][0])
        raise InvalidInputError(field, f"row {row}", "holds NaN or an infinity", "Pass finite vectors.")
    return matrix
