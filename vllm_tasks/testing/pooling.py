"""The fake server's pooling routes: ``/v1/embeddings``, ``/v2/embed``, ``/score``, ``/rerank``,
``/classify`` and ``/pooling``, with vLLM 0.32's shapes and error messages."""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import numpy as np
import numpy.typing as npt

from ..decoding import EMBED_DTYPES, ENDIANNESS, FP8_E4M3_TO_FLOAT16
from ..listwise import listwise_prompt
from ..versions import ServerVersion
from . import content
from .inputs import Call, check_context, check_token_count, content_text, fit_context, input_texts, usage
from .settings import Scorer
from .wire import Refusal, Reply, bad_request, error_reply, json_reply, not_found, validation_error

ENCODING_FORMATS = ("float", "base64", "bytes", "bytes_only")
V2_TYPES = ("float", "binary", "ubinary", "base64")
ACTIVE_TASKS: dict[Scorer, str] = {
    "bi-encoder": "embed",
    "cross-encoder": "classify",
    "late-interaction": "token_embed",
    "listwise": "token_embed",
}
"""The pooling task a model of each scorer kind runs (what ``/pooling`` answers)."""


# ----------------------------------------------------------------------------------------- vectors


def checked_dimensions(call: Call, field: str) -> int | None:
    """The requested Matryoshka width, checked like vLLM 0.32 (messages included)."""
    value = call.body.get(field)
    if value is None:
        return None
    settings, model = call.settings, call.settings.model
    if settings.matryoshka is False:
        raise bad_request(
            f"Model '{model}' does not support Matryoshka embeddings; dimensions must be unset "
            f"(received dimensions={value})."
        )
    if isinstance(value, bool) or not isinstance(value, int):
        raise validation_error(field, "int_type", "Input should be a valid integer", value)
    if not 1 <= value <= settings.width:
        raise bad_request(
            f"Model '{model}' only supports dimensions in range [1, {settings.width}], got {value}."
        )
    if settings.matryoshka is not True and value not in settings.matryoshka:
        allowed = list(settings.matryoshka)
        raise bad_request(f"Model '{model}' only supports Matryoshka dimensions {allowed}, got {value}.")
    return value


def vectors(call: Call, texts: list[str], dimensions: int | None) -> npt.NDArray[np.float32]:
    """The fake embeddings of ``texts`` (rows), normalised unless ``use_activation`` is false."""
    normalize = call.body.get("use_activation") is not False
    width = call.settings.width
    if call.settings.sparse:  # SPLADE's pooler: no normalisation, no Matryoshka
        rows = [content.sparse_vector(text, width) for text in texts]
        return np.stack(rows) if rows else np.zeros((0, width), np.float32)
    rows = [content.text_vector(text, width, dimensions=dimensions, normalize=normalize) for text in texts]
    return np.stack(rows) if rows else np.zeros((0, dimensions or width), np.float32)


def wire_bytes(matrix: npt.NDArray[np.float32], embed_dtype: str, endianness: str) -> npt.NDArray[Any]:
    """``matrix`` cast to vLLM's wire dtype and byte order (bfloat16 and fp8 as their bit patterns)."""
    order = {"little": "<", "big": ">"}.get(endianness, "<" if sys.byteorder == "little" else ">")
    if embed_dtype == "float16":
        return matrix.astype(order + "f2")
    if embed_dtype == "bfloat16":  # the upper half of float32, rounded to nearest even
        bits = matrix.astype("<f4").view("<u4").astype(np.uint64)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(order + "u2")
    if embed_dtype == "fp8_e5m2":  # the upper byte of float16, rounded to nearest even
        bits = matrix.astype("<f2").view("<u2").astype(np.uint32)
        return ((bits + 0x7F + ((bits >> 8) & 1)) >> 8).astype(np.uint8)
    if embed_dtype == "fp8_e4m3":  # the nearest of the 254 finite values
        table = FP8_E4M3_TO_FLOAT16.astype(np.float64)
        codes = np.flatnonzero(np.isfinite(table))
        codes = codes[np.argsort(table[codes], kind="stable")]
        return _nearest(matrix, table[codes], codes)
    return matrix.astype(order + "f4")


def _nearest(
    matrix: npt.NDArray[np.float32], values: npt.NDArray[np.float64], codes: npt.NDArray[Any]
) -> npt.NDArray[Any]:
    flat = matrix.astype(np.float64).ravel()
    right = np.clip(np.searchsorted(values, flat), 1, len(values) - 1)
    left = right - 1
    pick = np.where(np.abs(values[left] - flat) <= np.abs(values[right] - flat), left, right)
    out: npt.NDArray[Any] = codes[pick].astype(np.uint8).reshape(matrix.shape)
    return out


# -------------------------------------------------------------------------------------- embeddings


#: From this vLLM on, a ``token_embed`` model's ``/v1/embeddings`` has a handler of its own (one vector per
#: token, ``"float"`` only) and its ``/v2/embed`` is not mounted (0.33.0 ``pooling/factories.py:132-139``).
TOKEN_EMBED_ROUTE_VERSION = "0.33.0"


def token_embed_route(call: Call) -> bool:
    """Whether ``/v1/embeddings`` is vLLM >= 0.33's per-token handler (a late-interaction model)."""
    newer = ServerVersion.parse(call.settings.version).at_least(TOKEN_EMBED_ROUTE_VERSION)
    return newer and call.settings.scorer_kind == "late-interaction" and not call.settings.lexical


def check_embed_task(call: Call) -> None:
    """vLLM's 501 on the embedding routes of a late-interaction model (its active task is ``token_embed``;
    a fake serving ``classify`` and ``embed`` at once is a hybrid that embeds); from vLLM 0.33 such a
    model's ``/v2/embed`` is not mounted.

    Raises:
        Refusal: 501 ``The model does not support Embeddings API``; 404 from vLLM 0.33 on ``/v2/embed``.
    """
    if token_embed_route(call):
        raise Refusal(not_found())
    if call.settings.scorer_kind in ("late-interaction", "listwise") or call.settings.lexical:
        raise Refusal(error_reply(501, "The model does not support Embeddings API"))
    check_active_task(call, ("embed",), "Embeddings")


def check_active_task(call: Call, tasks: tuple[str, ...], api: str) -> None:
    """vLLM's 501 on a mounted route that none of ``tasks`` (the route's) is active for, on the models
    whose one active task the fake knows: a token classifier, a forced aligner (``token_classify``) and a
    reward model (``classify`` or ``token_classify``). A real server does not mount the routes such a
    model has no task for (404): mount them with ``tasks=``.

    Raises:
        Refusal: 501 ``The model does not support {api} API``.
    """
    settings = call.settings
    if settings.reward is not None:
        active = "classify" if settings.reward == "sequence" else "token_classify"
    elif settings.token_classifier or settings.aligner:
        active = "token_classify"
    else:
        return
    if active not in tasks:
        raise Refusal(error_reply(501, f"The model does not support {api} API"))


def _token_embeddings(call: Call) -> Reply:
    """vLLM >= 0.33's ``/v1/embeddings`` of a ``token_embed`` model (``token_embed/serving.py``): one matrix
    per input, ``encoding_format`` ``"float"`` only (anything else fails its literal)."""
    fmt = call.body.get("encoding_format", "float")
    if fmt != "float":
        raise validation_error(
            "encoding_format", "literal_error", "Input should be 'float'", fmt, {"expected": "'float'"}
        )
    texts = fit_context(call, input_texts(call))
    late = call.body.get("late_chunking_params")
    data = [
        {"index": i, "object": "embedding", "embedding": content.token_vectors(text, call.settings.width)}
        if late is None
        else _late_chunked(call, i, text, late)
        for i, text in enumerate(texts)
    ]
    tokens = sum(content.count_tokens(text) for text in texts)
    return json_reply({"id": call.response_id("embd"), "object": "list", "created": call.created(),
                       "model": call.settings.model, "data": data, "usage": usage(tokens)})  # fmt: skip


def embeddings(call: Call) -> Reply:
    """``POST /v1/embeddings``: float, base64, bytes (with the ``metadata`` header) or bytes_only."""
    if token_embed_route(call):
        return _token_embeddings(call)
    check_embed_task(call)
    if "normalize" in call.body:
        raise bad_request(
            "Parameter `normalize` was removed; use `use_activation` instead. (parameter=normalize)",
            "normalize",
        )
    fmt = call.choice("encoding_format", ENCODING_FORMATS, "float")
    dtype = call.choice("embed_dtype", EMBED_DTYPES, "float32")
    order = call.choice("endianness", ENDIANNESS, "native")
    texts = fit_context(call, input_texts(call))
    matrix = vectors(call, texts, checked_dimensions(call, "dimensions"))
    tokens = sum(content.count_tokens(text) for text in texts)
    head = {"id": call.response_id("embd"), "created": call.created(), "model": call.settings.model}
    if fmt in ("bytes", "bytes_only"):
        return _bytes_answer(
            head, list(wire_bytes(matrix, dtype, order)), dtype, order, tokens=tokens, metadata=fmt == "bytes"
        )
    if fmt == "base64":
        raw = wire_bytes(matrix, dtype, order)
        rows: list[Any] = [base64.b64encode(row.tobytes()).decode() for row in raw]
    else:
        rows = list(matrix)
    data = [{"index": i, "object": "embedding", "embedding": row} for i, row in enumerate(rows)]
    return json_reply({"id": head["id"], "object": "list", "created": head["created"],
                       "model": head["model"], "data": data, "usage": usage(tokens)})  # fmt: skip


def _bytes_answer(
    head: dict[str, Any],
    arrays: list[npt.NDArray[Any]],
    dtype: str,
    order: str,
    *,
    tokens: int,
    metadata: bool,
) -> Reply:
    """A ``bytes`` (or, without ``metadata``, ``bytes_only``) answer: the arrays (already in the wire dtype
    and byte order) back to back, each one's byte range and shape in the ``metadata`` header."""
    ends = np.cumsum([array.nbytes for array in arrays]).tolist()
    data = [
        {"index": i, "embed_dtype": dtype, "endianness": order, "start": end - array.nbytes, "end": end,
         "shape": list(array.shape)}
        for i, (array, end) in enumerate(zip(arrays, ends, strict=True))
    ]  # fmt: skip
    headers = {"content-type": "application/octet-stream"}
    if metadata:
        meta = {**head, "data": data, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
        headers["metadata"] = json.dumps(meta)
    return Reply(200, b"".join(array.tobytes() for array in arrays), headers)


def embed_v2(call: Call) -> Reply:
    """``POST /v2/embed`` (Cohere v2): float, binary, ubinary and base64 embeddings by type."""
    check_embed_task(call)
    kinds = [key for key in ("texts", "images", "inputs") if call.body.get(key)]
    if len(kinds) != 1:
        raise validation_error("texts", "value_error", "Value error, exactly one of texts, images or inputs")
    kind = kinds[0]
    types = call.body.get("embedding_types") or ["float"]
    expected = "'float', 'binary', 'ubinary' or 'base64'"
    for i, name in enumerate(types):
        if name not in V2_TYPES:
            message = f"Input should be {expected}"
            raise validation_error(
                f"embedding_types.{i}", "literal_error", message, name, {"expected": expected}
            )
    prefix = _input_type_prefix(call)
    texts = [prefix + (item if kind != "inputs" else content_text(item)) for item in call.body[kind]]
    texts = _v2_truncate(call, texts)
    matrix = vectors(call, texts, checked_dimensions(call, "output_dimension"))
    if {"binary", "ubinary"} & set(types) and matrix.shape[1] % 8:
        raise bad_request(
            f"binary embeddings need a dimension that is a multiple of 8, got {matrix.shape[1]}"
        )
    tokens = sum(content.count_tokens(text) for text in texts)
    answer: dict[str, Any] = {"id": call.response_id("embd"), "embeddings": _by_type(matrix, types)}
    if kind == "texts":
        answer["texts"] = call.body["texts"]
    units = {
        "input_tokens": 0 if kind == "images" else tokens,
        "image_tokens": tokens if kind == "images" else 0,
    }
    answer["meta"] = {"api_version": {"version": "2"}, "billed_units": units}
    answer["response_type"] = "embeddings_by_type"
    return json_reply(answer)


def _input_type_prefix(call: Call) -> str:
    input_type = call.body.get("input_type")
    if input_type is None:
        return ""
    accepted = list(call.settings.input_types)
    if input_type in accepted:
        return f"{input_type}: "
    if not accepted:
        raise bad_request(
            f"Unsupported input_type '{input_type}'. "
            "This model does not define any input_type task instructions."
        )
    # vLLM 0.32's words (tests/recorded/qwen3-embedding/error_v2_embed_unknown_input_type.json)
    supported = ", ".join(sorted(accepted))
    raise bad_request(f"Unsupported input_type '{input_type}'. Supported values: {supported}")


def _v2_truncate(call: Call, texts: list[str]) -> list[str]:
    truncate = call.choice("truncate", ("END", "START", "NONE"), "END")
    limit = call.optional_int("max_tokens", 1) or call.settings.max_model_len
    if truncate == "NONE":
        for text in texts:
            count = content.count_tokens(text)
            if count > limit and call.body.get("max_tokens") is not None:
                raise bad_request(f"Input of {count} tokens exceeds max_tokens={limit} with truncate=NONE.")
            check_context(text, call.settings.max_model_len)
        return texts
    side = "left" if truncate == "START" else "right"
    return [content.truncate_tokens(text, max(0, limit - 2), side) for text in texts]


def _by_type(matrix: npt.NDArray[np.float32], types: list[str]) -> dict[str, Any]:
    ubinary = np.packbits(matrix >= 0, axis=1) if matrix.shape[1] % 8 == 0 else None
    out: dict[str, Any] = {}
    for name in types:
        if name == "float":
            out[name] = list(matrix)
        elif name == "ubinary" and ubinary is not None:
            out[name] = ubinary.tolist()
        elif name == "binary" and ubinary is not None:
            out[name] = (ubinary.astype(np.int16) - 128).tolist()
        elif name == "base64":
            out[name] = [base64.b64encode(row.astype("<f4").tobytes()).decode() for row in matrix]
    return out


# ----------------------------------------------------------------------------------------- scoring


def _side(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [content_text(item) for item in items]


def _truncated(call: Call, texts: list[str], field: str) -> list[str]:
    limit = call.optional_int(field, 0)
    if not limit:
        return texts
    if limit >= call.settings.max_model_len:
        raise bad_request(
            f"{field} ({limit}) must be less than max_model_len ({call.settings.max_model_len})."
        )
    return [content.truncate_tokens(text, limit) for text in texts]


def _scores(call: Call, queries: list[str], documents: list[str]) -> list[float]:
    """The scores of one query's documents (``queries`` of one) or of zipped pairs, each prompt checked
    against the context as vLLM renders it: a listwise model reads one query's whole list as one prompt."""
    settings = call.settings
    if len(queries) == 1 and settings.scorer_kind == "listwise":
        check_context(listwise_prompt(queries[0], documents), settings.max_model_len)
        return content.list_relevance(queries[0], documents, settings.width, scorer="listwise")
    activation = call.body.get("use_activation") is not False
    pairs = list(zip(queries * len(documents) if len(queries) == 1 else queries, documents, strict=True))
    for query, document in pairs:
        prompt = (
            listwise_prompt(query, [document])
            if settings.scorer_kind == "listwise"
            else query + " " + document
        )
        check_context(prompt, settings.max_model_len)
    return [
        content.relevance(query, document, settings.width, scorer=settings.scorer_kind, activation=activation)
        for query, document in pairs
    ]


def _pair_tokens(call: Call, query: str, document: str) -> int:
    """The tokens a pair costs: each text with its special tokens, or, without a score template
    (``score_template=False``), the joined text without any."""
    if call.settings.score_template:
        return content.count_tokens(query) + content.count_tokens(document)
    return content.count_tokens(query + document, special=False)


def score(call: Call) -> Reply:
    """``POST /score`` and ``/v1/score``: one score per pair (1:1, 1:N or N:N), in pair order."""
    check_active_task(call, ("classify", "embed"), "Score")
    pairs = (("queries", "documents"), ("queries", "items"), ("data_1", "data_2"), ("text_1", "text_2"))
    keys = next((pair for pair in pairs if pair[0] in call.body and pair[1] in call.body), None)
    if keys is None:
        raise validation_error("queries", "missing", "Field required")
    left = _truncated(call, _side(call.body[keys[0]]), "max_tokens_per_query")
    right = _truncated(call, _side(call.body[keys[1]]), "max_tokens_per_doc")
    if not left or not right:
        raise bad_request("At least one text element must be given")
    if len(left) not in (1, len(right)):
        raise bad_request("Input lengths must be either 1:1, 1:N or N:N")
    scores = _scores(call, left, right)
    data = [{"index": i, "object": "score", "score": value} for i, value in enumerate(scores)]
    zipped = zip(left * len(right) if len(left) == 1 else left, right, strict=True)
    tokens = sum(_pair_tokens(call, q, d) for q, d in zipped)
    return json_reply({"id": call.response_id("score"), "object": "list", "created": call.created(),
                       "model": call.settings.model, "data": data, "usage": usage(tokens)})  # fmt: skip


def rerank(call: Call) -> Reply:
    """``POST /rerank``, ``/v1/rerank``, ``/v2/rerank``: documents sorted by relevance, cut to ``top_n``."""
    check_active_task(call, ("classify", "embed"), "Rerank (Score)")
    if "query" not in call.body or "documents" not in call.body:
        raise validation_error(
            "query" if "query" not in call.body else "documents", "missing", "Field required"
        )
    top_n = call.optional_int("top_n", 0) or 0
    raw = call.body["documents"] if isinstance(call.body["documents"], list) else [call.body["documents"]]
    query = _truncated(call, _side(call.body["query"]), "max_tokens_per_query")[0]
    documents = _truncated(call, _side(raw), "max_tokens_per_doc")
    results: list[dict[str, Any]] = []
    for index, (original, score) in enumerate(zip(raw, _scores(call, [query], documents), strict=True)):
        multi = original.get("content") if isinstance(original, dict) else None
        document = {"text": original if isinstance(original, str) else None, "multi_modal": multi}
        results.append({"index": index, "document": document, "relevance_score": score})
    results.sort(key=lambda hit: -hit["relevance_score"])
    tokens = sum(_pair_tokens(call, query, text) for text in documents)
    return json_reply({"id": call.response_id("score"), "model": call.settings.model,
                       "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                       "results": results[:top_n] if top_n else results})  # fmt: skip


# ------------------------------------------------------------------------------- classify, pooling


def classify(call: Call) -> Reply:
    """``POST /classify``: per input, the label with the highest probability and every probability."""
    check_active_task(call, ("classify",), "Classification")
    texts = fit_context(call, input_texts(call))
    labels = list(call.settings.labels)
    activation = call.body.get("use_activation") is not False
    data = []
    for index, text in enumerate(texts):
        probs = content.class_probabilities(
            text, labels, activation=activation, multi_label=call.settings.multi_label
        )
        label = labels[int(np.argmax(probs))]
        data.append({"index": index, "label": label, "probs": probs, "num_classes": len(labels)})
    tokens = sum(content.count_tokens(text) for text in texts)
    return json_reply({"id": call.response_id("classify"), "object": "list", "created": call.created(),
                       "model": call.settings.model, "data": data, "usage": usage(tokens)})  # fmt: skip


def pooling(call: Call) -> Reply:
    """``POST /pooling``: the active task's output per input: a vector (``embed``), a cross-encoder's scores
    (``classify``), one vector per token (``token_embed``) or one weight per token (``token_classify``,
    ``lexical``)."""
    if call.settings.lexical:
        return _lexical_pooling(call)
    if call.settings.aligner:
        return _aligner_pooling(call)
    if call.settings.token_classifier:
        return _token_classify_pooling(call)
    if call.settings.reward is not None:
        return _reward_pooling(call)
    active = ACTIVE_TASKS[call.settings.scorer_kind]
    task = call.body.get("task")
    if task is not None and task != active:
        raise bad_request(
            f"Try switching the model's pooling_task via --pooler-config.task {task}. (parameter=task)",
            "task",
        )
    if call.body.get("dimensions") is not None:
        raise bad_request("dimensions is currently not supported", "dimensions")
    if call.settings.scorer_kind == "listwise":
        return _listwise_pooling(call)
    texts = fit_context(call, input_texts(call))
    if active == "embed":
        rows: list[Any] = list(vectors(call, texts, None))
    elif active == "token_embed":
        rows = [content.token_vectors(text, call.settings.width) for text in texts]
    else:
        rows = [content.class_probabilities(text, call.settings.labels) for text in texts]
    tokens = sum(content.count_tokens(text) for text in texts)
    return _rows_answer(call, rows, tokens)


def _rows_answer(call: Call, rows: list[Any], tokens: int) -> Reply:
    """``/pooling``'s answer of one array per input, as JSON or (``encoding_format="bytes"``) raw bytes."""
    if call.choice("encoding_format", ENCODING_FORMATS, "float") == "bytes":
        dtype = call.choice("embed_dtype", EMBED_DTYPES, "float32")
        order = call.choice("endianness", ENDIANNESS, "native")
        arrays = [np.asarray(row, np.float32) for row in rows]
        wire = [wire_bytes(a.reshape(1, -1), dtype, order).reshape(a.shape) for a in arrays]
        head = {"id": call.response_id("pooling"), "created": call.created(), "model": call.settings.model}
        return _bytes_answer(head, wire, dtype, order, tokens=tokens, metadata=True)
    data = [{"index": i, "object": "pooling", "data": row} for i, row in enumerate(rows)]
    return json_reply({"id": call.response_id("pooling"), "object": "list", "created": call.created(),
                       "model": call.settings.model, "data": data, "usage": usage(tokens)})  # fmt: skip


def _token_classify_pooling(call: Call) -> Reply:
    """A token classifier with ``token_classify`` active: per input, one row of label scores per token
    ([CLS] and [SEP] included); token-id inputs as they are, texts through the fake tokenizer."""
    task = call.body.get("task")
    if task is not None and task != "token_classify":
        raise bad_request(
            f"Try switching the model's pooling_task via --pooler-config.task {task}. (parameter=task)",
            "task",
        )
    value = call.body.get("input")
    if isinstance(value, list) and value and all(isinstance(item, list) for item in value):
        prompts = [[int(i) for i in item] for item in value]
    else:
        prompts = [call.vocabulary.encode(text, special=True) for text in input_texts(call)]
    for ids in prompts:
        check_token_count(len(ids), call.settings.max_model_len)
    activation = call.body.get("use_activation") is not False
    labels = call.settings.labels
    rows = [
        [content.class_probabilities(f"token {i}", labels, activation=activation) for i in ids]
        for ids in prompts
    ]
    return _rows_answer(call, rows, sum(len(ids) for ids in prompts))


def _aligner_pooling(call: Call) -> Reply:
    """Qwen3-ForcedAligner with ``token_classify`` active: one conversation whose text is the aligner's
    prompt and whose audio part fills its ``<|audio_pad|>``; one row of time-class probabilities per
    prompt token, the audio's tokens included (vLLM's ``token_classify`` pooler returns them all)."""
    task = call.body.get("task")
    if task is not None and task != "token_classify":
        raise bad_request(
            f"Try switching the model's pooling_task via --pooler-config.task {task}. (parameter=task)",
            "task",
        )
    messages = call.body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[0], dict):
        raise bad_request("The forced aligner reads one conversation with an audio part (`messages`).")
    parts = messages[0].get("content")
    parts = parts if isinstance(parts, list) else [{"type": "text", "text": str(parts)}]
    text = "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text")
    audio = [p for p in parts if isinstance(p, dict) and p.get("type") == "audio_url"]
    placeholder = "<|audio_start|><|audio_pad|><|audio_end|>"
    if text.count(placeholder) > len(audio):
        raise bad_request(
            f"Found more '{placeholder}' placeholders in input prompt than actual multimodal data items.",
            "messages",
        )
    seconds = [_data_url_seconds(p.get("audio_url")) for p in audio]
    duration = sum(seconds)
    prompt = placeholder * (len(audio) - text.count(placeholder)) + text
    if call.body.get("chat_template") is None:  # the model's own template: a chat turn around it
        prompt = f"<|im_start|>user\n{prompt}<|im_end|>\n"
    ids: list[int] = []
    for token in content.aligner_ids(call.vocabulary, prompt):
        if token == content.AUDIO_PAD_ID and seconds:
            ids += [token] * content.audio_token_count(seconds.pop(0))
        else:
            ids.append(token)
    rows = content.aligner_rows(ids, duration, call.settings.width)
    return _rows_answer(call, [rows], len(ids))


def _data_url_seconds(value: Any) -> float:
    """The duration of a ``data:`` audio URL's file; vLLM's 400 for one it cannot read."""
    url = value.get("url") if isinstance(value, dict) else None
    if not isinstance(url, str) or not url.startswith("data:") or "," not in url:
        raise bad_request("The fake aligner reads audio from data: URLs only.", "messages")
    try:
        data = base64.b64decode(url.split(",", 1)[1], validate=True)
    except ValueError:
        raise bad_request("Invalid base64 audio data.", "messages") from None
    seconds = content.audio_seconds(data)
    if seconds is None:
        raise bad_request("Failed to load audio: the data is not an audio file vLLM can decode.", "messages")
    return seconds


def _lexical_pooling(call: Call) -> Reply:
    """BGE-M3 with ``token_classify`` active: per input, one weight per token, its first ([CLS]) and last
    ([SEP]) rows left out as vLLM's BOS/EOS filter does (XLM-R's ``<s>`` 0 and ``</s>`` 2 too, for token ids
    read from a real BGE-M3 tokenizer)."""
    task = call.body.get("task")
    if task is not None and task != "token_classify":
        raise bad_request(
            f"Try switching the model's pooling_task via --pooler-config.task {task}. (parameter=task)",
            "task",
        )
    value = call.body.get("input")
    if isinstance(value, list) and value and all(isinstance(i, int) for i in value):
        prompts: list[list[int]] = [value]
    elif isinstance(value, list) and value and all(isinstance(i, list) for i in value):
        prompts = [[int(i) for i in item] for item in value]
    else:
        prompts = [call.vocabulary.encode(text, special=True) for text in input_texts(call)]
    data = []
    for index, ids in enumerate(prompts):
        start = 1 if ids and ids[0] in (content.CLS_ID, 0) else 0
        end = len(ids) - 1 if len(ids) > start and ids[-1] in (content.SEP_ID, 2) else len(ids)
        data.append({"index": index, "object": "pooling", "data": content.lexical_weights(ids[start:end])})
    return json_reply({"id": call.response_id("pooling"), "object": "list", "created": call.created(),
                       "model": call.settings.model, "data": data,
                       "usage": usage(sum(map(len, prompts)))})  # fmt: skip


def _listwise_pooling(call: Call) -> Reply:
    """A listwise model's ``/pooling``: the inputs are documents then the query, read as one list; one item
    with a row per input (vLLM 0.32 refuses fewer than two inputs)."""
    texts = input_texts(call)
    if len(texts) < 2:
        raise bad_request("The JinaForRanking model requires at least 2 inputs.")
    prompt = listwise_prompt(texts[-1], texts[:-1])
    check_context(prompt, call.settings.max_model_len)
    matrix = np.stack([content.text_vector(text, call.settings.width) for text in texts])
    data = [{"index": 0, "object": "pooling", "data": matrix.tolist()}]
    return json_reply({"id": call.response_id("pooling"), "object": "list", "created": call.created(),
                       "model": call.settings.model, "data": data,
                       "usage": usage(content.count_tokens(prompt))})  # fmt: skip


# ------------------------------------------------------------------------------------------- reward


def _reward_pooling(call: Call) -> Reply:
    """A reward model's ``/pooling``: ``classify`` active gives ``[value]`` per conversation,
    ``token_classify`` active ``[[value], ...]``, one row per token of the text so far (the last row is the
    whole text's value). A server older than 0.19 answers per token when no ``task`` is sent."""
    active = "classify" if call.settings.reward == "sequence" else "token_classify"
    task = call.body.get("task")
    if task is not None and task != active:
        raise bad_request(
            f"Try switching the model's pooling_task via --pooler-config.task {task}. (parameter=task)",
            "task",
        )
    old = not ServerVersion.parse(call.settings.version).at_least("0.19.0")
    per_token = active == "token_classify" or (task is None and old)
    activation = call.body.get("use_activation") is not False
    texts = fit_context(call, input_texts(call))
    rows: list[Any] = []
    for text in texts:
        if not per_token:
            rows.append(content.class_probabilities(text, ["reward"], activation=activation))
            continue
        ends = [end for _, end in content.token_spans(text)] or [0]
        rows.append(
            [content.class_probabilities(text[:end], ["reward"], activation=activation) for end in ends]
        )
    return _rows_answer(call, rows, sum(content.count_tokens(text) for text in texts))


# ------------------------------------------------------------------------------------------- late chunking


def _late_chunked(call: Call, index: int, text: str, params: Any) -> dict[str, Any]:
    """vLLM 0.33's late chunking of one text (``token_embed/late_chunking.py``): the token vectors ([CLS]
    and [SEP] included) meaned in chunks of ``chunk_size`` tokens, each normalised unless
    ``use_activation`` is false, with each chunk's token range and the characters its tokens cover."""
    size = params.get("chunk_size") if isinstance(params, dict) else None
    if type(size) is not int or size < 1 or set(params) != {"chunk_size"}:
        raise validation_error("late_chunking_params", "greater_than", "Input should be greater than 0", size)
    if call.body.get("truncate_prompt_tokens") is not None or not text:
        raise bad_request("Late chunking requires nonempty plain-text input")
    rows = content.token_vectors(text, call.settings.width).astype(np.float64)
    offsets = [(0, 0), *content.token_spans(text), (0, 0)]
    vectors, chunks = [], []
    for start in range(0, len(rows), size):
        end = min(start + size, len(rows))
        mean = rows[start:end].mean(axis=0)
        if call.body.get("use_activation") is not False:
            mean = mean / np.linalg.norm(mean)
        vectors.append([float(x) for x in mean])
        spans = [(a, b) for a, b in offsets[start:end] if a < b]
        char_range = [min(a for a, _ in spans), max(b for _, b in spans)] if spans else None
        chunks.append({"token_range": [start, end], "char_range": char_range})
    meta = {"chunk_size": size, "input_tokens": len(rows), "chunks": chunks, "strategy": "fixed_tokens"}
    return {"index": index, "object": "embedding", "embedding": vectors, "late_chunking": meta}
