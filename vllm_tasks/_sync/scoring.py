# GENERATED from vllm_tasks/_async/scoring.py by scripts/unasync.py: do not edit.
"""Scoring methods of the synchronous client: ``rerank``, ``score``, ``scorer_kind``.

The pure parts (input checks, planning, merging) are in ``vllm_tasks.scoring``, the scorer-kind probe in
``vllm_tasks.scorer_kind``; ``classify`` and ``pool`` are in ``_async/pooling.py``;
``vllm_tasks/_sync/scoring.py`` is generated from this file by ``scripts/unasync.py``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import httpx

from .. import defaults, scoring
from ..adaptive import Concurrency
from ..batching import plan_batches, smaller_batches
from ..calls import CLIENT_DEFAULT, Batching, CallOptions, TimeoutLike, max_model_len, resolve_model
from ..errors import BadRequestError, ContextLengthExceeded, InternalServerError, RequestTooLargeError
from ..listwise import listwise_prompt
from ..offload import sync_offload
from ..retries import TRANSIENT_STATUSES
from ..score_template import (
    SCORE_TEMPLATE_MISSING,
    named_like_llm_reranker,
    template_check_requests,
    template_missing,
    warn_template_missing,
)
from ..scorer_kind import (
    SCORER_KIND,
    needs_list_probe,
    scorer_from_embed_probe,
    scorer_from_list_probe,
    scorer_from_probe,
    scorer_probe_request,
)
from ..scoring import Fallback, ScoreInput, ScoringSetup
from ..transport import Request, answered
from ..types.scoring import RerankResult, ScoreResult, ScorerKind
from ..types.server import ServerInfo
from ..validation import int_at_least
from .base import ClientBase
from .fetching import fetched_media
from .tokenizing import count_longest, longest_fitting_prefix, truncate_texts

logger = logging.getLogger("vllm_tasks")

Sent = tuple[list[httpx.Response], list[range], ScorerKind]
"""A scoring call's answers, the batches they answer, and the scorer kind."""


class ScoringMethods(ClientBase):
    """``rerank``, ``score``: ``/rerank``, ``/score``; ``scorer_kind``: which kind of model scores."""

    def rerank(
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
        batch_size: int = defaults.SCORE_BATCH_SIZE,
        concurrency: Concurrency = defaults.CONCURRENCY,
        show_progress: bool = False,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> RerankResult:
        """Rank documents by relevance to a query (``POST /rerank``), highest score first.

        Long lists are split into requests of at most ``batch_size`` documents, sent ``concurrency`` at a
        time, and merged into one global ranking. The merge is exact: a cross-encoder, a bi-encoder and a
        late-interaction model score each (query, document) pair independently. A listwise reranker
        (jina-reranker-v3) reads the whole list at once: its list is sent in one request, never split.

        Args:
            query: a string, or a multimodal input (see ``documents``).
            documents: strings; dicts whose ``text_field`` holds the text; objects with such an
                attribute; images (``pathlib.Path``, bytes, file objects, PIL images, numpy arrays);
                ``{"content": [parts]}``; or lists mixing text and images (one multimodal document).
                Not token ids: vLLM's ``/rerank`` has no token-id form (``InvalidInputError``).
            top_n: return only the best N; 0 or None returns all.
            text_field: the key (or attribute) of a document's text.
            max_tokens_per_doc: cut each text document to N tokens (vLLM >= 0.20.0).
            max_tokens_per_query: cut the query to N tokens (vLLM >= 0.20.0).
            max_tokens_per_doc_fallback: on older servers, ``"client"`` cuts texts with the server's
                tokenizer (``/tokenize`` + ``/detokenize``); ``"error"`` raises ``UnsupportedByServer``.
            instruction: for instruction-following rerankers (vLLM >= 0.20.0).
            use_activation: cross-encoders only: False returns raw logits instead of sigmoid scores.
            truncate_prompt_tokens: keep only the last N tokens of each pair's prompt (-1: model maximum).
            batch_size: documents per request (not for a listwise model: its list goes whole).
            concurrency: requests in flight, or ``"auto"``: a limit tuned from the answers' latencies
                (it backs off on 429/503 and waits out ``Retry-After``; ``client.usage.concurrency_limit``
                says where it settled).
            show_progress: draw a progress bar (needs tqdm: ``vllm-tasks[progress]``).
            model: the served model (default: the client's, else the server's first).
            extra_body: extra JSON fields merged into every request.
            extra_headers: extra headers for this call.
            timeout: per-request timeout (default: the client's).

        Returns:
            RerankResult: ``.results`` (``index`` in your list, ``score``, your ``document``), sorted;
            ``.scorer`` says whether the scores are cross-encoder probabilities, bi-encoder cosines,
            unbounded late-interaction MaxSim sums or listwise cosines.

        Raises:
            InvalidInputError: bad arguments (before any request).
            UnsupportedByServer: a field the server's vLLM version lacks.
            EndpointNotServed: the model does not serve ``/rerank``.
            ContextLengthExceeded: a document (a listwise model: the whole list) over the model's context;
                the message names it (a listwise list: how many of the first documents fit).

        Examples:
            >>> result = client.rerank("capital of France?", ["Paris is...", "Bananas..."], top_n=1)
            >>> result.results[0].document
            'Paris is...'
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        batching = Batching(batch_size, concurrency, show_progress)
        params = scoring.RerankParams(
            text_field=text_field,
            max_tokens_per_doc=max_tokens_per_doc,
            max_tokens_per_query=max_tokens_per_query,
            max_tokens_per_doc_fallback=max_tokens_per_doc_fallback,
            instruction=instruction,
            use_activation=use_activation,
            truncate_prompt_tokens=truncate_prompt_tokens,
        )
        int_at_least("top_n", top_n, 0, "Use 0 or None to return every document.")
        docs, pairs = sync_offload(scoring.rerank_inputs, query, documents, params.text_field)
        pairs = self._fetched_media(pairs)
        setup = self._prepare_scoring(pairs, params, call, batching)
        responses, batches, scorer = self._send_scoring(
            setup, batching, lambda batches: scoring.plan_rerank_requests(setup, batches, top_n)
        )
        return self._counted(
            scoring.merge_rerank(responses, batches, docs, top_n=top_n, model=setup.model, scorer=scorer)
        )

    def score(
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
        batch_size: int = defaults.SCORE_BATCH_SIZE,
        concurrency: Concurrency = defaults.CONCURRENCY,
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
            text_1: one input or a list (list/tuple) of inputs; inputs are as for ``rerank`` (not
                token ids: vLLM's ``/score`` has no token-id form).
            text_2: one input or a list of inputs.
            text_field: the key (or attribute) of a dict input's text.
            max_tokens_per_doc: cut each ``text_2`` text to N tokens (vLLM >= 0.20.0).
            max_tokens_per_query: cut each ``text_1`` text to N tokens (vLLM >= 0.20.0).
            max_tokens_per_doc_fallback: ``"client"`` or ``"error"``, as for ``rerank``.
            instruction: for instruction-following rerankers (vLLM >= 0.20.0).
            use_activation: cross-encoders only: False returns raw logits.
            truncate_prompt_tokens: keep only N tokens of each prompt (-1: model maximum).
            batch_size: pairs per request.
            concurrency: requests in flight, or ``"auto"``: a limit tuned from the answers' latencies
                (it backs off on 429/503 and waits out ``Retry-After``; ``client.usage.concurrency_limit``
                says where it settled).
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

        Examples:
            >>> (client.score("capital of France?", ["Paris", "Bananas"])).scores
            array([0.86, 0.01])
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        batching = Batching(batch_size, concurrency, show_progress)
        params = scoring.RerankParams(
            text_field=text_field,
            max_tokens_per_doc=max_tokens_per_doc,
            max_tokens_per_query=max_tokens_per_query,
            max_tokens_per_doc_fallback=max_tokens_per_doc_fallback,
            instruction=instruction,
            use_activation=use_activation,
            truncate_prompt_tokens=truncate_prompt_tokens,
        )
        pairs = self._fetched_media(sync_offload(scoring.score_inputs, text_1, text_2, params.text_field))
        setup = self._prepare_scoring(pairs, params, call, batching)
        keys = scoring.score_keys(setup.info)
        try:
            responses, batches, scorer = self._send_scoring(
                setup, batching, lambda batches: scoring.plan_score_requests(setup, batches, keys)
            )
        except BadRequestError as error:
            if not scoring.wants_text_1_text_2(error, setup.info, keys):
                raise
            responses, batches, scorer = self._send_scoring(
                setup,
                batching,
                lambda batches: scoring.plan_score_requests(setup, batches, ("text_1", "text_2")),
            )
        result = scoring.merge_scores(responses, batches, model=setup.model, scorer=scorer)
        return self._counted(result.keep_inputs(pairs.firsts, pairs.seconds, pairs.mode))

    def scorer_kind(self, *, model: str | None = None) -> ScorerKind:
        """Which kind of model serves ``/score`` and ``/rerank`` on this server (cached per model).

        Args:
            model: the served model (default: the client's, else the server's first).

        Returns:
            ScorerKind: cross-encoder, bi-encoder, late-interaction, listwise or unknown.

        Examples:
            >>> client.scorer_kind()
            <ScorerKind.CROSS_ENCODER: 'cross-encoder'>
        """
        info = self.server_info()
        return self._scorer_kind_of(info, resolve_model(info, model, self.model), CLIENT_DEFAULT)

    def _scorer_kind_of(self, info: ServerInfo, name: str | None, timeout: TimeoutLike) -> ScorerKind:
        """The model's scorer kind, probed once per model with ``/pooling`` on its own.

        The probe never travels alongside scoring requests: vLLM 0.11 and 0.16 die ("split_with_sizes
        expects split_sizes to sum exactly to ...") when a ``/pooling`` and a ``/rerank`` request share
        an engine batch. The lock keeps concurrent calls on this client from probing beside each other's
        batches.
        """
        key = name or ""
        kind = self._server_state.get(SCORER_KIND, key)
        if kind is None:
            with self._discovery_lock:
                seen = self._server_state
                kind = seen.get(SCORER_KIND, key)
                if kind is None:
                    # answered(): an overloaded server's 429/503 after the retries raises, never
                    # becomes a kind kept for the client's life
                    response = answered(self._transport.send(scorer_probe_request(name, timeout)))
                    kind = scorer_from_probe(response, info)
                    if kind is None:  # an old server answered per token: ask whether the model embeds
                        request = scorer_probe_request(name, timeout, task="embed")
                        kind = scorer_from_embed_probe(answered(self._transport.send(request)))
                    elif needs_list_probe(kind, response):  # a listwise reranker needs two inputs
                        request = scorer_probe_request(name, timeout, listwise=True)
                        kind = scorer_from_list_probe(answered(self._transport.send(request)))
                    self._learn(seen, SCORER_KIND, key, kind)
        return kind

    # ----------------------------------------------------------------------------------------------
    # The flow rerank and score share
    # ----------------------------------------------------------------------------------------------

    def _fetched_media(self, pairs: scoring.ScorePairs) -> scoring.ScorePairs:
        """``pairs`` with their image URLs fetched by the client under ``refuse_private`` (see
        :func:`~vllm_tasks._async.fetching.fetched_media`)."""
        first, second = pairs.fields
        firsts = fetched_media(self._transport, pairs.firsts, first)
        seconds = fetched_media(self._transport, pairs.seconds, second)
        return dataclasses.replace(pairs, firsts=firsts, seconds=seconds)

    def _prepare_scoring(
        self, pairs: scoring.ScorePairs, params: scoring.RerankParams, call: CallOptions, batching: Batching
    ) -> ScoringSetup:
        """Check the call against the server (token limits, gates) and cut texts client-side if asked."""
        info = self.server_info()
        kinds = self._server_state.all_of(SCORER_KIND)
        setup = scoring.plan_scoring(info, pairs, params, call, client_model=self.model, scorer_kinds=kinds)
        if (setup.model or "") not in kinds:
            kind = self._scorer_kind_of(info, setup.model, call.timeout)
            # Again, knowing the kind now: multimodal late interaction has its own gate.
            kinds = {**kinds, setup.model or "": kind}
            setup = scoring.plan_scoring(
                info, pairs, params, call, client_model=self.model, scorer_kinds=kinds
            )
        self._check_score_template(info, setup.model, call.timeout)
        limits = setup.client_limits
        firsts = self._truncate(setup, pairs.firsts, limits.get("max_tokens_per_query"), batching)
        seconds = self._truncate(setup, pairs.seconds, limits.get("max_tokens_per_doc"), batching)
        return setup.with_inputs(firsts, seconds)

    def _check_score_template(self, info: ServerInfo, model: str | None, timeout: TimeoutLike) -> None:
        """Once per model whose name says an LLM reranker with a score template (a cross-encoder): warn with
        ``ScoreTemplateMissingWarning`` when the server reads pairs without a score template (three small
        requests, ``vllm_tasks.score_template``)."""
        key = model or ""
        state = self._server_state
        if state.knows(SCORE_TEMPLATE_MISSING, key) or not named_like_llm_reranker(info, model):
            return
        if state.get(SCORER_KIND, key) is not ScorerKind.CROSS_ENCODER:
            return
        with self._discovery_lock:
            seen = self._server_state
            if seen.knows(SCORE_TEMPLATE_MISSING, key):
                return
            responses = self._transport.send_all(template_check_requests(model, timeout), concurrency=1)
            if any(response.status_code in TRANSIENT_STATUSES for response in responses):
                # no answer to keep: checked again by the next call
                logger.warning("the score template check of %r got no answer (the server is busy)", model)
                return
            missing = template_missing(responses)
            self._learn(seen, SCORE_TEMPLATE_MISSING, key, missing)
        if missing:
            # stacklevel: _check_score_template < _prepare_scoring < rerank / score < the caller
            warn_template_missing(model, stacklevel=4, info=info)

    def _truncate(
        self, setup: ScoringSetup, inputs: list[ScoreInput], limit: int | None, batching: Batching
    ) -> list[ScoreInput]:
        if not limit:
            return inputs
        positions, texts = scoring.split_texts(inputs)
        cut = truncate_texts(
            self._transport,
            texts,
            limit,
            setup.model,
            concurrency=batching.concurrency,
            headers=setup.call.extra_headers,
            timeout=setup.call.timeout,
        )
        return scoring.replace_texts(inputs, positions, cut)

    def _send_scoring(
        self, setup: ScoringSetup, batching: Batching, build: Callable[[list[range]], list[Request]]
    ) -> Sent:
        """Send the call's requests in batches; after a 413, split the batches in half and send again.

        A listwise reranker's list (one query, its documents) goes in one request whatever the batch size or
        its bytes: each of its scores depends on the whole list.
        """
        kind = self._scorer_kind_of(setup.info, setup.model, setup.call.timeout)
        scoring.refuse_listwise_truncation(kind, setup.fields)
        sizes = scoring.json_sizes(setup.pairs.seconds)
        if scoring.is_one_list(kind, setup.pairs):
            batches = [range(len(sizes))]
            try:
                responses = self._send_explained(setup, build(batches), batches, batching, kind)
            except RequestTooLargeError as error:
                scoring.explain_list_not_split(error)
                raise
            return responses, batches, kind
        batch_size, max_bytes = batching.batch_size, defaults.SCORE_MAX_REQUEST_BYTES
        while True:
            batches = plan_batches(sizes, batch_size, max_bytes)
            try:
                responses = self._send_explained(setup, build(batches), batches, batching, kind)
            except RequestTooLargeError:
                smaller = smaller_batches(batches, sizes)
                if smaller is None:
                    raise
                batch_size, max_bytes = smaller
                continue
            return responses, batches, kind

    def _send_explained(
        self,
        setup: ScoringSetup,
        requests: list[Request],
        batches: Sequence[range],
        batching: Batching,
        kind: ScorerKind,
    ) -> list[httpx.Response]:
        """Send ``requests`` in bounded concurrency; explain length errors."""
        try:
            responses = self._send_batches(
                requests,
                concurrency=batching.concurrency,
                counts=[len(batch) for batch in batches],
                show_progress=batching.show_progress,
                description=setup.pairs.fields[1],
            )
        except ContextLengthExceeded as error:
            if scoring.is_one_list(kind, setup.pairs):
                self._explain_list_too_long(error, setup)
            else:
                self._name_too_long(error, setup, kind)
            raise
        except InternalServerError as error:
            scoring.explain_query_too_long(error)
            raise
        return responses

    def _explain_list_too_long(self, error: ContextLengthExceeded, setup: ScoringSetup) -> None:
        """Say on ``error`` how many of a listwise list's first documents fit the context (``/tokenize``)."""
        limit = error.max_model_len or max_model_len(setup.info, setup.model)
        query, documents = setup.pairs.firsts[0], setup.pairs.seconds
        fitting = None
        if limit is not None and isinstance(query, str) and all(isinstance(doc, str) for doc in documents):
            instruction = setup.fields.get("instruction")
            texts = [str(doc) for doc in documents]
            fitting = longest_fitting_prefix(
                self._transport,
                lambda count: listwise_prompt(query, texts[:count], instruction),
                len(texts),
                limit,
                setup.model,
            )
        scoring.explain_list_too_long(error, len(documents), fitting, limit)

    def _name_too_long(
        self, error: ContextLengthExceeded, setup: ScoringSetup, kind: ScorerKind | None
    ) -> None:
        """Name the input that made a pair too long (measured with ``/tokenize``) and how to cut it."""
        limit = error.max_model_len or max_model_len(setup.info, setup.model)
        first_counts: dict[int, int] = {}
        second_counts: dict[int, int] = {}
        if limit is not None:
            first_counts = count_longest(self._transport, setup.pairs.firsts, setup.model)
            second_counts = count_longest(self._transport, setup.pairs.seconds, setup.model)
        scoring.name_too_long_pair(error, setup.pairs, first_counts, second_counts, limit=limit, kind=kind)

    # ----------------------------------------------------------------------------------------------
    # classify and pool
    # ----------------------------------------------------------------------------------------------
