"""Whether a reranker reads each (query, document) pair through a score template: the LLM rerankers' pitfall.

An LLM-based reranker such as Qwen3-Reranker (a causal LM served with ``--convert classify`` and the yes/no
``--hf-overrides``) was trained on one prompt layout: a system line, the instruction, the query and the
document in a chat turn. vLLM ships the templates of those it knows (bge-reranker-v2-gemma, mxbai-rerank-v2,
Llama Nemotron, zerank-2, Qwen3-Reranker and Qwen3-VL-Reranker: ``discovery.RERANKER_TEMPLATES``). vLLM lays
the pair out that way only when the server was started with ``--chat-template`` (or, from vLLM 0.33.0, when
the checkpoint's Sentence Transformers config declares its template); without it vLLM reads the bare
concatenation ``query + document``, drops any ``instruction`` and answers scores that look plausible but mean
nothing, with no error (vLLM >= 0.30 logs a warning at startup, which clients never see).

No answer names the template, so the check reads it from token counts (three small requests): one ``/rerank``
of one pair, and ``/tokenize`` of the two texts joined, with and without the tokenizer's special tokens.
Without a template the pair costs exactly the tokens of the joined text. A template adds its prompt's tokens;
a BERT-style cross-encoder adds separators (``[CLS] q [SEP] d [SEP]``: one more than the joined text with its
special tokens). Whether the instruction changes the score is no test: a BERT cross-encoder ignores it too.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import httpx
import orjson

from .calls import CLIENT_DEFAULT, TimeoutLike
from .discovery import RERANKER_TEMPLATES, SCORE_TEMPLATE_DIR, reranker_template
from .server_state import Fact
from .transport import Request
from .types.server import Advisory, ServerInfo

TEMPLATE_CHECK_QUERY = "Which city is the capital of France?"
TEMPLATE_CHECK_DOCUMENT = "Paris is the capital of France."
"""The pair the check scores (any short pair would do)."""

ADVISORY_ID = "score-template-missing"

SCORE_TEMPLATE_MISSING: Fact[str, bool | None] = Fact("score template missing", key="model")
"""Whether the served reranker reads pairs without a score template: True (the bare concatenation of query
and document), False, or None (inconclusive); learned by ``probe()`` or the first ``rerank()`` / ``score()``
of a model whose name says Qwen3-Reranker."""


class ScoreTemplateMissingWarning(UserWarning):
    """The server's reranker reads each pair as the bare concatenation of query and document: an LLM-based
    reranker (Qwen3-Reranker, bge-reranker-v2-gemma, ...) started without its ``--chat-template``, whose
    scores are meaningless."""


def named_like_llm_reranker(info: ServerInfo, model: str | None) -> bool:
    """Whether ``model`` (its name or its ``/v1/models`` root) names a reranker that needs a score template
    (one of ``discovery.RERANKER_TEMPLATES``).

    The first ``rerank()`` / ``score()`` of such a model runs the template check; ``probe()`` runs it for
    every cross-encoder.

    Args:
        info: the server's description (its model cards).
        model: the served model name the call uses (``None``: the server's first).

    Returns:
        True for a name such as ``Qwen/Qwen3-Reranker-0.6B``, ``qwen3-vl-reranker``,
        ``BAAI/bge-reranker-v2-gemma``, ``mixedbread-ai/mxbai-rerank-base-v2``,
        ``nvidia/llama-nemotron-rerank-1b-v2`` or ``zerank-2``.

    Examples:
        >>> from vllm_tasks.types.server import ModelCard
        >>> card = ModelCard(id="Qwen/Qwen3-Reranker-4B")
        >>> info = ServerInfo(base_url="http://h", version=None, models=(card,), routes=None)
        >>> named_like_llm_reranker(info, "Qwen/Qwen3-Reranker-4B"), named_like_llm_reranker(info, "bge")
        (True, False)
    """
    return reranker_template(info, model) is not None


def template_check_requests(model: str | None, timeout: TimeoutLike = CLIENT_DEFAULT) -> list[Request]:
    """The three requests whose answers tell whether a score template is applied (:func:`template_missing`).

    ``/rerank`` of :data:`TEMPLATE_CHECK_QUERY` and :data:`TEMPLATE_CHECK_DOCUMENT`, then ``/tokenize`` of
    the two joined, without and with special tokens. Errors are returned, not raised (after the retries).

    Args:
        model: the served model name (``None``: the server's only model).
        timeout: each request's timeout.

    Returns:
        list[Request]: ``[rerank, tokenize plain, tokenize with special tokens]``.

    Examples:
        >>> [request.path for request in template_check_requests("qwen3-reranker")]
        ['/rerank', '/tokenize', '/tokenize']
    """
    joined = TEMPLATE_CHECK_QUERY + TEMPLATE_CHECK_DOCUMENT
    bodies: list[tuple[str, dict[str, Any]]] = [
        ("/rerank", {"query": TEMPLATE_CHECK_QUERY, "documents": [TEMPLATE_CHECK_DOCUMENT]}),
        ("/tokenize", {"prompt": joined, "add_special_tokens": False}),
        ("/tokenize", {"prompt": joined, "add_special_tokens": True}),
    ]
    return [
        Request(
            "POST",
            path,
            json={**body, "model": model} if model else body,
            raise_for_status=False,
            timeout=timeout,
        )
        for path, body in bodies
    ]


def _count(response: httpx.Response, *keys: str) -> int | None:
    """The integer at ``keys`` in a 200 JSON answer, else None."""
    if response.status_code != 200:
        return None
    try:
        value: Any = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return None
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def template_missing(responses: Sequence[httpx.Response]) -> bool | None:
    """Read the answers to :func:`template_check_requests`.

    Args:
        responses: the ``/rerank`` answer and the two ``/tokenize`` answers, in request order.

    Returns:
        True when the pair cost exactly the tokens of the joined text (no template, no separator), False
        when it cost more or fewer, None when an answer failed or lacks its count.

    Examples:
        >>> rerank = httpx.Response(200, json={"usage": {"prompt_tokens": 14}, "results": []})
        >>> plain, special = httpx.Response(200, json={"count": 14}), httpx.Response(200, json={"count": 16})
        >>> template_missing([rerank, plain, special])
        True
        >>> template_missing([httpx.Response(200, json={"usage": {"prompt_tokens": 17}}), plain, special])
        False
    """
    pair = _count(responses[0], "usage", "prompt_tokens")
    joined = [_count(response, "count") for response in responses[1:]]
    if pair is None or any(count is None for count in joined):
        return None
    return pair in joined


def missing_template_message(model: str | None, info: ServerInfo | None = None) -> str:
    """The advisory and warning text for a reranker that reads pairs without a score template.

    Args:
        model: the served model name, named in the text.
        info: the server's description, to find the model's family (its name or root) in
            ``discovery.RERANKER_TEMPLATES``; None: by ``model`` alone.

    Returns:
        str: what is wrong, the flags that fix it (the family's ``--hf-overrides`` and ``--chat-template``,
        or the templates vLLM ships) and the docs.

    Examples:
        >>> "bge-reranker-v2-gemma.jinja" in missing_template_message("BAAI/bge-reranker-v2-gemma")
        True
        >>> "zerank2.jinja" in missing_template_message("my-reranker")
        True
    """
    described = info or ServerInfo(base_url="", version=None, models=(), routes=None)
    entry = reranker_template(described, model)
    if entry is not None:
        fix = f"{entry.family} is served with {entry.serve_flags}"
    else:
        shipped = ", ".join(sorted({entry.template for entry in RERANKER_TEMPLATES}))
        fix = f"vLLM ships those of the LLM rerankers it knows in {SCORE_TEMPLATE_DIR}/ ({shipped})"
    return (
        f"The reranker {model or '(default model)'} reads each (query, document) pair as the bare "
        "concatenation of the two texts: the server was started without a score template, so its scores "
        f"are meaningless and `instruction` is ignored (vLLM raises no error). Restart it with the model's "
        f'template: {fix}. See docs/scoring.md, "Serving Qwen3-Reranker".'
    )


def template_advisory(model: str | None, info: ServerInfo | None = None) -> Advisory:
    """The ``probe()`` advisory for a reranker without its score template (:func:`missing_template_message`).

    Args:
        model: the served model name, named in the message.
        info: the server's description (the model's root names its family too).

    Returns:
        Advisory: id ``score-template-missing``, the message, and the docs page as its reference.

    Examples:
        >>> template_advisory("m").id
        'score-template-missing'
    """
    message = missing_template_message(model, info)
    return Advisory(id=ADVISORY_ID, message=message, reference="docs/scoring.md")


def warn_template_missing(model: str | None, stacklevel: int, info: ServerInfo | None = None) -> None:
    """Warn with :class:`ScoreTemplateMissingWarning` (once per model and client: the caller checks).

    Args:
        model: the served model name, named in the message.
        stacklevel: the caller's frames above this function (1: the line that called it).
        info: the server's description (the model's root names its family too).

    Examples:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warn_template_missing("qwen3-reranker", stacklevel=1)
        >>> caught[0].category.__name__
        'ScoreTemplateMissingWarning'
    """
    message = missing_template_message(model, info)
    warnings.warn(message, ScoreTemplateMissingWarning, stacklevel=stacklevel + 1)
