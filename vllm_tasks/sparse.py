"""``embed_sparse`` (SPLADE through ``/v1/embeddings``, BGE-M3's lexical weights through ``/pooling``), the
pure parts.

vLLM serves SPLADE as ``BertSpladeSparseEmbeddingModel`` (``model_executor/models/bert.py``, PR #26339): a
BERT encoder and its MLM head, ``log(1 + relu(logits))`` max-pooled over the tokens, returned by
``/v1/embeddings`` as one vocabulary-wide dense row per input (30522 floats for a BERT vocabulary, mostly
zeros; no L2 normalisation). This module checks that an answer is such a vector (a dense embedding model's
rows have negative weights or few exact zeros, a SPLADE row never has either), turns each row into
``(indices, values)`` and plans the windows a long call is sent in, so that the dense rows of only one
window are in memory at a time.

BGE-M3 (``BgeM3EmbeddingModel``, ``model_executor/models/roberta.py``, PR #14526) served with the
``token_classify`` task active answers ``/pooling`` with one weight per token, ``relu(sparse_linear(h))``,
its first (BOS) and last (EOS) token left out. The client sends token ids it got from ``/tokenize``, so it
knows which id each weight belongs to, and reduces them as FlagEmbedding's ``lexical_weights`` do: special
tokens and weights <= 0 left out, the largest weight of a repeated id kept.

The sending is ``vllm_tasks/_async/embeddings.py`` (and its generated sync twin).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import httpx
import numpy as np
import numpy.typing as npt

from . import defaults, gates
from .batching import plan_batches
from .calls import CallOptions, TaskParams
from .decoding import check_finite
from .embeddings import EmbedParams, EmbedPlan
from .errors import InvalidInputError, UnexpectedResponse, UnsupportedByServer
from .responses import in_index_order, index_problem, json_object, usage_of
from .scoring import json_sizes, request_body
from .server_state import Fact
from .transport import Request
from .types.common import Usage
from .types.server import ServerInfo
from .types.sparse import SparseVector

SPARSE_FEATURE = "sparse_embeddings"
LEXICAL_FEATURE = "sparse_lexical_weights"
SPLADE_FLAGS = """--runner pooling --hf-overrides '{"architectures": ["BertSpladeSparseEmbeddingModel"]}'"""
"""How a SPLADE checkpoint (a ``BertForMaskedLM``) is served as a sparse embedder."""
LEXICAL_FLAGS = (
    """--runner pooling --hf-overrides '{"architectures": ["BgeM3EmbeddingModel"]}' """
    """--pooler-config '{"task": "token_classify"}'"""
)
"""How BAAI/bge-m3 is served for its lexical (sparse) weights."""
PLUGIN_FLAGS = (
    """--runner pooling --hf-overrides '{"architectures": ["BgeM3EmbeddingModel"]}' """
    "--io-processor-plugin bge_m3_sparse_plugin"
)
"""How BAAI/bge-m3 is served with vLLM's sparse IO-processor plugin (``pip install`` it first from vLLM's
source tree, ``tests/plugins/bge_m3_sparse_plugin``)."""
SPECIAL_TOKENS = frozenset({"<s>", "</s>", "<pad>", "<unk>", "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"})
"""Token strings left out of lexical weights (FlagEmbedding leaves out the CLS, EOS, PAD and UNK ids)."""

SPARSE_SOURCE: Fact[str, str] = Fact("sparse source", key="model")
"""Where a model's sparse vectors come from: ``"splade"`` (``/v1/embeddings``), ``"lexical"``
(``/pooling`` ``token_classify``, BGE-M3) or ``"plugin"`` (``/pooling`` through BGE-M3's sparse plugin)."""

NOT_SPARSE: Fact[str, str] = Fact("not a sparse model", key="model")
"""Models that answered ``/v1/embeddings`` with dense vectors (the reason, for the error): a later
``embed_sparse`` call to them is refused before sending."""


@dataclass(frozen=True)
class SparseEmbedParams(TaskParams):
    """The options of :meth:`~vllm_tasks.Client.embed_sparse` (its keywords, as one frozen value).

    Attributes:
        truncate_prompt_tokens: keep only N tokens of each input; -1 = the model's maximum.
        add_special_tokens: override the tokenizer default ([CLS]/[SEP] are added by default).
        min_weight: drop weights at or below this (0: keep every non-zero weight).
        top_k: keep only the ``top_k`` largest weights of each input (None: all).
        return_tokens: also fetch each token id's string (one ``/detokenize`` per distinct id).
    """

    truncate_prompt_tokens: int | None = None
    add_special_tokens: bool | None = None
    min_weight: float = 0.0
    top_k: int | None = None
    return_tokens: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.min_weight, bool) or not isinstance(self.min_weight, int | float):
            raise InvalidInputError(
                "min_weight", self.min_weight, "must be a number", "Use e.g. 0.0 or 0.01."
            )
        if not np.isfinite(self.min_weight) or self.min_weight < 0:
            raise InvalidInputError(
                "min_weight", self.min_weight, "must be a finite number >= 0", "Use 0.0 to keep every weight."
            )
        if self.top_k is not None and (
            isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1
        ):
            raise InvalidInputError(
                "top_k", self.top_k, "must be an integer >= 1 or None", "Use e.g. top_k=128."
            )
        if not isinstance(self.return_tokens, bool):
            raise InvalidInputError("return_tokens", self.return_tokens, "must be True or False", "")
        self.embed_params()  # checks truncate_prompt_tokens and add_special_tokens as embed() does

    def embed_params(self) -> EmbedParams:
        """The ``/v1/embeddings`` request options: raw float32 rows (``auto`` transport), no activation
        field (SPLADE's pooler ignores it)."""
        return EmbedParams(
            encoding_format="auto",
            truncate_prompt_tokens=self.truncate_prompt_tokens,
            add_special_tokens=self.add_special_tokens,
        )


def check_sparse_server(info: ServerInfo, model: str | None, known_dense: str | None) -> None:
    """Refuse before sending what the client already knows cannot give sparse vectors.

    Args:
        info: the server's cached description.
        model: the served model name the call targets.
        known_dense: why an earlier answer of this model was dense (the ``NOT_SPARSE`` fact), if one was.

    Raises:
        UnsupportedByServer: the server is older than the first vLLM with SPLADE, does not serve
            ``/v1/embeddings`` (its ``/openapi.json`` lacks it), or answered dense vectors before.
    """
    gates.require(info, [SPARSE_FEATURE])
    unrouted = info.serves_route("/v1/embeddings") is False and info.serves_route("/pooling") is False
    if known_dense is not None or unrouted:
        reason = known_dense or f"model {model!r} serves neither /v1/embeddings nor /pooling"
        raise not_sparse_error(info, reason)


def not_sparse_error(info: ServerInfo, reason: str) -> UnsupportedByServer:
    """The error for a server whose model is not a sparse (SPLADE) embedder, naming how to serve one."""
    return UnsupportedByServer(
        SPARSE_FEATURE,
        server_version=info.version,
        required_version=None,
        server_flag=SPLADE_FLAGS,
        detail=f"{reason}. Serve a SPLADE checkpoint (a BertForMaskedLM, e.g. naver/splade-v3) so, or "
        f"BAAI/bge-m3 with {LEXICAL_FLAGS} (or with {PLUGIN_FLAGS})",
    )


def first_source(info: ServerInfo) -> str:
    """Where to ask a model not asked before: ``/v1/embeddings`` (SPLADE) unless the server's
    ``/openapi.json`` lists ``/pooling`` but not ``/v1/embeddings``."""
    if info.serves_route("/v1/embeddings") is False and info.serves_route("/pooling"):
        return "lexical"
    return "splade"


def lexical_fields(params: SparseEmbedParams) -> None:
    """Refuse the options the lexical path cannot honour.

    Raises:
        InvalidInputError: ``truncate_prompt_tokens`` (the weights would no longer line up with the
            token ids the client read from ``/tokenize``).
    """
    if params.truncate_prompt_tokens is not None:
        raise InvalidInputError(
            "truncate_prompt_tokens",
            params.truncate_prompt_tokens,
            "is not supported for BGE-M3 lexical weights",
            "Shorten the texts before sending them.",
        )


def parse_lexical(
    response: httpx.Response, expected_items: int
) -> tuple[list[npt.NDArray[np.float32]], Usage]:
    """The per-token weights of one ``/pooling`` ``token_classify`` answer, in input order.

    Raises:
        UnexpectedResponse: (``kind="decode"``) not one item per input, or an item that is not a list of
            finite numbers; a per-token matrix (a token classifier with several labels) is reported by
            :func:`dense_reason` on the caller's side as not lexical.
    """
    payload = json_object(response, "/pooling")
    data = payload.get("data")
    if not isinstance(data, list) or len(data) != expected_items:
        raise UnexpectedResponse(f"/pooling: expected {expected_items} items in `data`", kind="decode")
    problem = index_problem(data)
    if problem is not None:
        raise UnexpectedResponse(f"/pooling: {problem}", kind="decode")
    rows = []
    for item in in_index_order(data):
        try:
            with np.errstate(over="ignore"):  # an overflow is a non-finite weight, refused below
                rows.append(check_finite(np.asarray(item.get("data"), dtype=np.float32), "json"))
        except (TypeError, ValueError):
            raise UnexpectedResponse("/pooling: an item's `data` is not numbers", kind="decode") from None
        except UnexpectedResponse as error:
            raise UnexpectedResponse(f"/pooling: {error.message}", kind="decode") from None
    return rows, usage_of(response, "/pooling", payload.get("usage"))


def lexical_vector(
    weights: npt.NDArray[np.float32], ids: Sequence[int], strings: Sequence[str] | None, model: str
) -> SparseVector:
    """One input's lexical weights: the per-token ``weights`` laid on ``ids`` (the prompt's token ids,
    BOS/EOS included: vLLM drops their rows), special tokens and weights <= 0 left out, the largest weight
    of a repeated id kept.

    Raises:
        UnexpectedResponse: (``kind="decode"``) the weights do not line up with the ids, or are not one
            number per token (then the model is a token classifier, not BGE-M3's sparse head).

    Examples:
        >>> lexical_vector(np.array([0.5, 0.0, 0.25], np.float32), [0, 7, 8, 7, 2], None, "m").to_milvus()
        {7: 0.5}
    """
    if weights.ndim != 1:
        raise not_lexical(model, f"answered a {weights.ndim}-D per-token array, not one weight per token")
    if weights.size == len(ids) - 2:
        ids, strings = ids[1:-1], (strings[1:-1] if strings is not None else None)
    elif weights.size != len(ids):
        raise UnexpectedResponse(
            f"/pooling: {weights.size} token weights for a prompt of {len(ids)} tokens", kind="decode"
        )
    best: dict[int, tuple[float, str | None]] = {}
    for position, (token_id, weight) in enumerate(zip(ids, weights.tolist(), strict=True)):
        text = strings[position] if strings is not None else None
        if weight > 0 and text not in SPECIAL_TOKENS and weight > best.get(token_id, (0.0, None))[0]:
            best[token_id] = (weight, text)
    order = sorted(best)
    tokens = None if strings is None else tuple(str(best[i][1]) for i in order)
    return SparseVector(indices=order, values=[best[i][0] for i in order], tokens=tokens)


def plugin_requests(
    prompts: Sequence[Any],
    params: SparseEmbedParams,
    model: str,
    call: CallOptions,
    *,
    batch_size: int,
    max_bytes: int = defaults.SCORE_MAX_REQUEST_BYTES,
) -> tuple[list[Request], list[range]]:
    """The batched ``/pooling`` requests to BGE-M3's sparse IO-processor plugin, and the batches they carry
    (at most ``batch_size`` prompts and ``max_bytes`` of JSON each).

    Token strings are always asked for (they cost the server nothing): special tokens are told by them.

    Raises:
        InvalidInputError: ``add_special_tokens=False`` (the plugin's server always adds them).

    Examples:
        >>> requests, _ = plugin_requests(["a b"], SparseEmbedParams(), "m", CallOptions(), batch_size=8)
        >>> requests[0].json["data"]
        {'input': ['a b'], 'embed_task': 'sparse', 'return_tokens': True}
    """
    if params.add_special_tokens is False:
        raise InvalidInputError(
            "add_special_tokens",
            False,
            "is not supported by BGE-M3's sparse plugin (its server always adds them)",
            "Leave add_special_tokens unset.",
        )
    batches = plan_batches(json_sizes(prompts), batch_size, max_bytes)
    requests = [
        Request(
            "POST",
            "/pooling",
            json=request_body(
                {"model": model, "task": "plugin", "truncate_prompt_tokens": params.truncate_prompt_tokens},
                call.extra_body,
                data={"input": [prompts[i] for i in batch], "embed_task": "sparse", "return_tokens": True},
            ),
            headers=call.extra_headers,
            timeout=call.timeout,
            task="pooling",
        )
        for batch in batches
    ]
    return requests, batches


def parse_plugin(response: httpx.Response, expected_items: int) -> tuple[list[SparseVector], Usage]:
    """The sparse vectors of one answer of BGE-M3's sparse plugin, in input order.

    Each item's ``sparse_embedding`` (``{"token_id", "weight", "token"}`` entries, in first-occurrence order)
    becomes a :class:`SparseVector` with ascending ids: weights <= 0 and special tokens left out, the largest
    weight kept where an id repeats.

    Raises:
        UnexpectedResponse: (``kind="decode"``) not the plugin's shape, not one item per input, or an entry
            that is not an id, a finite weight and a token string (or null).

    Examples:
        >>> cat = {"token_id": 7, "weight": 0.5, "token": "cat"}
        >>> a = {"token_id": 2, "weight": 0.0, "token": "a"}
        >>> item = {"index": 0, "sparse_embedding": [cat, a]}
        >>> body = {"data": {"data": [item], "usage": {"prompt_tokens": 4}}}
        >>> vectors, usage = parse_plugin(httpx.Response(200, json=body), 1)
        >>> vectors[0].to_dict(), usage.prompt_tokens
        ({'cat': 0.5}, 4)
    """
    payload = json_object(response, "/pooling")
    inner = payload.get("data")
    items = inner.get("data") if isinstance(inner, dict) else None
    if not isinstance(items, list) or len(items) != expected_items:
        raise UnexpectedResponse(
            f"/pooling: expected BGE-M3's sparse plugin answer, `data.data` with {expected_items} items",
            kind="decode",
        )
    problem = index_problem(items)
    if problem is not None:
        raise UnexpectedResponse(f"/pooling: {problem}", kind="decode")
    vectors = [_plugin_vector(item.get("sparse_embedding")) for item in in_index_order(items)]
    return vectors, usage_of(response, "/pooling", cast(dict[str, Any], inner).get("usage"))


def _plugin_vector(entries: object) -> SparseVector:
    if not isinstance(entries, list):
        raise UnexpectedResponse("/pooling: an item's `sparse_embedding` is not a list", kind="decode")
    best: dict[int, tuple[float, str | None]] = {}
    for entry in entries:
        token_id = entry.get("token_id") if isinstance(entry, dict) else None
        weight = _finite_weight(entry.get("weight")) if isinstance(entry, dict) else None
        token = entry.get("token") if isinstance(entry, dict) else None
        if (
            not isinstance(token_id, int)
            or isinstance(token_id, bool)
            or not 0 <= token_id < 2**63
            or weight is None
            or not (token is None or isinstance(token, str))
        ):
            raise UnexpectedResponse(
                f"/pooling: a sparse entry is not a token id, a finite weight and a token: {str(entry)[:99]}",
                kind="decode",
            )
        if weight > 0 and token not in SPECIAL_TOKENS and weight > best.get(token_id, (0.0, None))[0]:
            best[token_id] = (weight, token)
    order = sorted(best)
    strings = [best[i][1] for i in order]
    tokens = tuple(str(t) for t in strings) if all(t is not None for t in strings) else None
    return SparseVector(indices=order, values=[best[i][0] for i in order], tokens=tokens)


def _finite_weight(value: object) -> float | None:
    """``value`` as a float that is finite in float32, or None (not a number, NaN, infinite, too large)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        weight = float(value)
    except OverflowError:
        return None
    return weight if abs(weight) <= float(np.finfo(np.float32).max) else None


def not_lexical(model: str, what: str) -> UnexpectedResponse:
    """The error for a ``/pooling`` answer that is not BGE-M3's per-token weights."""
    return UnexpectedResponse(
        f"model {model!r} {what}: it is not BGE-M3's sparse head (serve BAAI/bge-m3 with {LEXICAL_FLAGS})",
        kind="decode",
    )


def dense_reason(matrix: npt.NDArray[Any], model: str | None) -> str | None:
    """Why ``matrix`` (one answer's rows) cannot be SPLADE vectors, or None when it can.

    SPLADE weights are ``log(1 + relu(x))`` over a vocabulary: never negative, never NaN, and exactly 0 for
    every token the text does not activate (a few hundred of 30522). A dense embedding has no exact zeros,
    and may happen to have no negative weight either, so a row with more non-zero weights than zeros is
    dense.

    Examples:
        >>> dense_reason(np.array([[0.0, 1.5]]), "splade") is None
        True
        >>> dense_reason(np.array([[0.1, -0.2]]), "minilm")[:60]
        "model 'minilm' answered dense embeddings (input 0 has a nega"
        >>> dense_reason(np.array([[0.1, 0.2, 0.0]]), "minilm")[:69]
        "model 'minilm' answered dense embeddings (input 0 has 2 non-zero weig"
    """
    if not np.isfinite(matrix).all():
        return f"model {model!r} answered non-finite weights"
    negative = np.flatnonzero((matrix < 0).any(axis=1))
    if negative.size:
        row = int(negative[0])
        low = float(matrix[row].min())
        return (
            f"model {model!r} answered dense embeddings (input {row} has a negative weight, {low:.3g}: "
            "a SPLADE weight is never below 0)"
        )
    non_zero = np.count_nonzero(matrix, axis=-1) if matrix.size else np.zeros(0, np.intp)
    full = np.flatnonzero(2 * non_zero > matrix.shape[-1])
    if full.size:
        row = int(full[0])
        return (
            f"model {model!r} answered dense embeddings (input {row} has {int(non_zero[row])} non-zero "
            f"weights of {matrix.shape[-1]}: a SPLADE vector over a vocabulary is mostly zeros)"
        )
    return None


def sparsify(
    matrix: npt.NDArray[Any], *, min_weight: float = 0.0, top_k: int | None = None
) -> list[SparseVector]:
    """Each row's weights above ``min_weight`` (at most ``top_k``, the largest) as a :class:`SparseVector`.

    Examples:
        >>> [v.to_qdrant() for v in sparsify(np.array([[0.0, 0.5, 0.0, 2.0]]))]
        [{'indices': [1, 3], 'values': [0.5, 2.0]}]
        >>> sparsify(np.array([[0.0, 0.5, 0.0, 2.0]]), top_k=1)[0].to_milvus()
        {3: 2.0}
    """
    rows = np.asarray(matrix, dtype=np.float32)
    vectors = []
    for row in rows:
        indices = np.flatnonzero(row > min_weight)
        if top_k is not None and indices.size > top_k:
            keep = np.argpartition(-row[indices], top_k - 1)[:top_k]
            indices = np.sort(indices[keep])
        vectors.append(SparseVector(indices=indices.astype(np.int64), values=row[indices]))
    return vectors


def pruned(vectors: Sequence[SparseVector], params: SparseEmbedParams) -> list[SparseVector]:
    """The vectors with ``params.min_weight`` and ``params.top_k`` applied, token strings kept only when
    ``params.return_tokens`` asked for them.

    Examples:
        >>> vector = SparseVector(indices=[1, 2], values=[0.5, 0.25], tokens=["a", "b"])
        >>> pruned([vector], SparseEmbedParams(top_k=1))[0].to_milvus()
        {1: 0.5}
    """
    kept = []
    for vector in vectors:
        order = np.flatnonzero(vector.values > params.min_weight)
        if params.top_k is not None and order.size > params.top_k:
            order = np.sort(order[np.argpartition(-vector.values[order], params.top_k - 1)[: params.top_k]])
        tokens = None
        if params.return_tokens and vector.tokens is not None:
            tokens = [vector.tokens[i] for i in order]
        kept.append(SparseVector(indices=vector.indices[order], values=vector.values[order], tokens=tokens))
    return kept


def windows(plan: EmbedPlan, batches_per_window: int) -> list[EmbedPlan]:
    """Split a plan into sub-plans of ``batches_per_window`` batches, sent (and sparsified) one at a time.

    Examples:
        >>> from vllm_tasks.embeddings import EmbedPlan
        >>> plan = EmbedPlan([], [range(0, 2), range(2, 4), range(4, 5)], "bytes", "m", "float32", "native")
        >>> [w.batches for w in windows(plan, 2)]
        [[range(0, 2), range(2, 4)], [range(4, 5)]]
    """
    step = max(1, batches_per_window)
    return [
        replace(plan, requests=plan.requests[i : i + step], batches=plan.batches[i : i + step])
        for i in range(0, max(1, len(plan.batches)), step)
    ]


def with_tokens(vectors: Sequence[SparseVector], strings: dict[int, str]) -> list[SparseVector]:
    """The vectors with each index's token string from ``strings`` (id -> string).

    Examples:
        >>> with_tokens([SparseVector(indices=[5], values=[1.0])], {5: "cat"})[0].to_dict()
        {'cat': 1.0}
    """
    return [
        SparseVector(
            indices=vector.indices,
            values=vector.values,
            tokens=tuple(strings[int(i)] for i in vector.indices),
        )
        for vector in vectors
    ]
