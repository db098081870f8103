"""Scoring methods of the asynchronous client: ``rerank``, ``score``, ``classify``, ``pool``.

Thin wrappers over the operations in ``vllm_tasks.scoring``; ``vllm_tasks/_sync/scoring.py`` is generated
from this file by ``scripts/unasync.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .. import scoring
from ..scoring import DEFAULT_BATCH_SIZE, DEFAULT_CONCURRENCY, Fallback
from ..steps import CLIENT_DEFAULT, TimeoutLike
from ..types.scoring import ClassificationResult, PoolingResult, RerankResult, ScoreResult, ScorerKind
from .base import AsyncClientBase


class AsyncScoringMethods(AsyncClientBase):
    """``rerank``, ``score``, ``classify``, ``pool``: ``/rerank``, ``/score``, ``/classify``, ``/pooling``."""

    def _scorer_cache(self) -> dict[str, ScorerKind]:
        cache: dict[str, ScorerKind] | None = getattr(self, "_scorer_kinds", None)
        if cache is None:
            cache = {}
            self._scorer_kinds = cache
        return cache

    async def rerank(
        self,
        query: Any,
        documents: Iterable[Any],
        *,
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
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> RerankResult:
        """Rank documents by relevance to a query (``POST /rerank``), highest score first.

        Long lists are split into requests of at most ``batch_size`` documents, sent ``concurrency`` at a
        time, and merged into one global ranking. The merge is exact: every scorer vLLM serves
        (cross-encoder, bi-encoder, late interaction) scores each (query, document) pair independently.

        Args:
            query: a string, or a multimodal input (see ``documents``).
            documents: strings; dicts whose ``text_field`` holds the text; objects with such an
                attribute; images (``pathlib.Path``, bytes, file objects, PIL images, numpy arrays);
                ``{"content": [parts]}``; or lists mixing text and images (one multimodal document).
            top_n: return only the best N; 0 or None returns all.
            text_field: the key (or attribute) of a document's text.
            max_tokens_per_doc: cut each text document to N tokens (vLLM >= 0.20.0).
            max_tokens_per_query: cut the query to N tokens (vLLM >= 0.20.0).
            max_tokens_per_doc_fallback: on older servers, ``"client"`` cuts texts with the server's
                tokenizer (``/tokenize`` + ``/detokenize``); ``"error"`` raises ``UnsupportedByServer``.
            instruction: for instruction-following rerankers (vLLM >= 0.20.0).
            use_activation: cross-encoders only: False returns raw logits instead of sigmoid scores.
            truncate_prompt_tokens: keep only the last N tokens of each pair's prompt (-1: model maximum).
            batch_size: documents per request.
            concurrency: requests in flight at once.
            show_progress: draw a progress bar (needs tqdm: ``vllm-tasks[progress]``).
            model: the served model (default: the client's, else the server's first).
            extra_body: extra JSON fields merged into every request.
            extra_headers: extra headers for this call.
            timeout: per-request timeout (default: the client's).

        Returns:
            RerankResult: ``.results`` (``index`` in your list, ``score``, your ``document``), sorted;
            ``.scorer`` says whether the scores are cross-encoder probabilities, bi-encoder cosines or
            unbounded late-interaction MaxSim sums.

        Raises:
            InvalidInputError: bad arguments (before any request).
            UnsupportedByServer: a field the server's vLLM version lacks.
            EndpointNotServed: the model does not serve ``/rerank``.

        Example:
            >>> result = await client.rerank("capital of France?", ["Paris is...", "Bananas..."], top_n=1)
            >>> result.results[0].document
            'Paris is...'
        """
        return await self._run(
            scoring.rerank_op(
                query,
                documents,
                model=model or self.model,
                top_n=top_n,
                text_field=text_field,
                max_tokens_per_doc=max_tokens_per_doc,
                max_tokens_per_query=max_tokens_per_query,
                max_tokens_per_doc_fallback=max_tokens_per_doc_fallback,
                instruction=instruction,
                use_activation=use_activation,
                truncate_prompt_tokens=truncate_prompt_tokens,
                batch_size=batch_size,
                concurrency=concurrency,
                show_progress=show_progress,
                extra_body=extra_body,
                extra_headers=extra_headers,
                timeout=timeout,
                scorer_cache=self._scorer_cache(),
            )
        )

    async def score(
        self,
        text_1: Any,
        text_2: Any,
        *,
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
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> ScoreResult:
        """Score pairs (``POST /score``): 1:1, 1:N (one ``text_1`` for every ``text_2``) or N:N (zipped).

        Any other pairing (N:M, N:1) is refused before sending, as the server would. On servers with
        the ``queries``/``documents`` form (vLLM >= 0.16.0) it is used; older ones get
        ``text_1``/``text_2``.

        Args:
            text_1: one input or a list (list/tuple) of inputs; inputs are as for ``rerank``.
            text_2: one input or a list of inputs.
            text_field: the key (or attribute) of a dict input's text.
            max_tokens_per_doc: cut each ``text_2`` text to N tokens (vLLM >= 0.20.0).
            max_tokens_per_query: cut each ``text_1`` text to N tokens (vLLM >= 0.20.0).
            max_tokens_per_doc_fallback: ``"client"`` or ``"error"``, as for ``rerank``.
            instruction: for instruction-following rerankers (vLLM >= 0.20.0).
            use_activation: cross-encoders only: False returns raw logits.
            truncate_prompt_tokens: keep only N tokens of each prompt (-1: model maximum).
            batch_size: pairs per request.
            concurrency: requests in flight at once.
            show_progress: draw a progress bar (needs tqdm: ``vllm-tasks[progress]``).
            model: the served model (default: the client's, else the server's first).
            extra_body: extra JSON fields merged into every request.
            extra_headers: extra headers for this call.
            timeout: per-request timeout (default: the client's).

        Returns:
            ScoreResult: ``.scores`` ``ndarray[n]`` in pair order, and ``.scorer``.

        Raises:
            InvalidInputError: bad arguments or pairing (before any request).
            UnsupportedByServer: a field the server's vLLM version lacks.
            EndpointNotServed: the model does not serve ``/score``.

        Example:
            >>> (await client.score("capital of France?", ["Paris", "Bananas"])).scores
            array([0.86, 0.01])
        """
        return await self._run(
            scoring.score_op(
                text_1,
                text_2,
                model=model or self.model,
                text_field=text_field,
                max_tokens_per_doc=max_tokens_per_doc,
                max_tokens_per_query=max_tokens_per_query,
                max_tokens_per_doc_fallback=max_tokens_per_doc_fallback,
                instruction=instruction,
                use_activation=use_activation,
                truncate_prompt_tokens=truncate_prompt_tokens,
                batch_size=batch_size,
                concurrency=concurrency,
                show_progress=show_progress,
                extra_body=extra_body,
                extra_headers=extra_headers,
                timeout=timeout,
                scorer_cache=self._scorer_cache(),
            )
        )

    async def classify(
        self,
        input: Any,
        *,
        use_activation: bool | None = None,
        truncate_prompt_tokens: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        concurrency: int = DEFAULT_CONCURRENCY,
        show_progress: bool = False,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> ClassificationResult:
        """Classify texts (``POST /classify``) with a sequence-classification model.

        Args:
            input: a string or a list of strings.
            use_activation: False returns raw logits instead of probabilities.
            truncate_prompt_tokens: keep only N tokens of each input (-1: model maximum).
            batch_size: texts per request.
            concurrency: requests in flight at once.
            show_progress: draw a progress bar (needs tqdm: ``vllm-tasks[progress]``).
            model: the served model (default: the client's, else the server's first).
            extra_body: extra JSON fields merged into every request.
            extra_headers: extra headers for this call.
            timeout: per-request timeout (default: the client's).

        Returns:
            ClassificationResult: ``.labels``, ``.probs`` (``ndarray[n, num_classes]``), ``.num_classes``.

        Raises:
            InvalidInputError: bad arguments (before any request).
            EndpointNotServed: the model does not serve ``/classify``.

        Example:
            >>> (await client.classify(["great!", "awful"])).labels
            ['positive', 'negative']
        """
        return await self._run(
            scoring.classify_op(
                input,
                model=model or self.model,
                use_activation=use_activation,
                truncate_prompt_tokens=truncate_prompt_tokens,
                batch_size=batch_size,
                concurrency=concurrency,
                show_progress=show_progress,
                extra_body=extra_body,
                extra_headers=extra_headers,
                timeout=timeout,
            )
        )

    async def pool(
        self,
        input: Any,
        *,
        task: str | None = None,
        use_activation: bool | None = None,
        truncate_prompt_tokens: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        concurrency: int = DEFAULT_CONCURRENCY,
        show_progress: bool = False,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> PoolingResult:
        """Run the model's pooler (``POST /pooling``): vectors, class scores or per-token matrices.

        On ``token_embed`` servers (ColBERT, BGE-M3 multi-vector) each input gives a ``[n_tokens, d]``
        matrix; ``vllm_tasks.maxsim(query, doc)`` reproduces the server's late-interaction score.

        Args:
            input: a string or a list of strings.
            task: the pooling task; must be the server's *active* one (``embed``, ``classify``,
                ``token_embed``, ``token_classify``, ...); None uses it.
            use_activation: False skips normalisation/activation.
            truncate_prompt_tokens: keep only N tokens of each input (-1: model maximum).
            batch_size: texts per request.
            concurrency: requests in flight at once.
            show_progress: draw a progress bar (needs tqdm: ``vllm-tasks[progress]``).
            model: the served model (default: the client's, else the server's first).
            extra_body: extra JSON fields merged into every request.
            extra_headers: extra headers for this call.
            timeout: per-request timeout (default: the client's).

        Returns:
            PoolingResult: ``.data``, one ``ndarray`` per input.

        Raises:
            InvalidInputError: bad arguments, or a removed task name (before any request).
            BadRequestError: ``task`` is not the server's active pooling task.

        Example:
            >>> (await client.pool("hello world")).data[0].shape
            (384,)
        """
        return await self._run(
            scoring.pool_op(
                input,
                task=task,
                model=model or self.model,
                use_activation=use_activation,
                truncate_prompt_tokens=truncate_prompt_tokens,
                batch_size=batch_size,
                concurrency=concurrency,
                show_progress=show_progress,
                extra_body=extra_body,
                extra_headers=extra_headers,
                timeout=timeout,
            )
        )

    async def scorer_kind(self, *, model: str | None = None) -> ScorerKind:
        """Which kind of model serves ``/score`` and ``/rerank`` on this server (cached per model).

        Args:
            model: the served model (default: the client's, else the server's first).

        Returns:
            ScorerKind: cross-encoder, bi-encoder, late-interaction or unknown.

        Example:
            >>> await client.scorer_kind()
            <ScorerKind.CROSS_ENCODER: 'cross-encoder'>
        """
        return await self._run(scoring.scorer_kind_op(model or self.model, cache=self._scorer_cache()))
