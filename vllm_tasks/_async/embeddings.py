"""Embedding methods of the asynchronous client: ``embed``, ``embed_sparse`` and ``embed_v2``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import numpy as np

from .. import defaults, embeddings, gates, long_inputs, pooling, sparse, tokenizing
from ..adaptive import Concurrency
from ..batching import smaller_batches
from ..calls import CLIENT_DEFAULT, Batching, CallOptions, TimeoutLike, resolve_model
from ..decoding import EmbedDType, Endianness
from ..errors import (
    BadRequestError,
    ContextLengthExceeded,
    EndpointNotServed,
    InternalServerError,
    InvalidInputError,
    RequestTooLargeError,
)
from ..long_inputs import LongInputs
from ..offload import async_offload
from ..progress import Progress
from ..responses import json_object
from ..server_state import ServerState
from ..transport import logger
from ..types.common import Usage
from ..types.embeddings import (
    EmbeddingChunks,
    EmbeddingResult,
    EmbeddingType,
    EmbedV2Result,
    EncodingFormat,
    Truncate,
)
from ..types.server import ServerInfo
from ..types.sparse import SparseEmbeddingResult, SparseVector
from .base import AsyncClientBase
from .fetching import fetched_media, media_inputs
from .tokenizing import count_longest


class AsyncEmbeddingMethods(AsyncClientBase):
    """``embed`` and ``embed_sparse`` (``/v1/embeddings``), ``embed_v2`` (``/v2/embed``)."""

    async def embed(
        self,
        input: embeddings.EmbedInput | None = None,
        *,
        messages: Sequence[Mapping[str, Any]] | Sequence[Sequence[Mapping[str, Any]]] | None = None,
        images: Any = None,
        dimensions: int | None = None,
        encoding_format: EncodingFormat = "auto",
        embed_dtype: EmbedDType | None = None,
        endianness: Endianness | None = None,
        widen: bool = True,
        truncate_prompt_tokens: int | None = None,
        truncation_side: str | None = None,
        use_activation: bool | None = None,
        normalize: bool | None = None,
        add_special_tokens: bool | None = None,
        prompt: str | None = None,
        prompt_name: str | None = None,
        long_inputs: LongInputs = "error",
        chunk_tokens: int | None = None,
        chunk_overlap: int | None = None,
        batch_size: int = defaults.EMBED_BATCH_SIZE,
        concurrency: Concurrency = defaults.CONCURRENCY,
        show_progress: bool = False,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> EmbeddingResult:
        """Embed texts, token ids or chat-style conversations with ``/v1/embeddings``.

        Long lists are split into batches (``batch_size`` items, bounded in characters), sent with at
        most ``concurrency`` in flight, and merged in input order. The transport defaults to the
        fastest the server's version supports (raw ``bytes`` from vLLM 0.11.1, else ``base64``) and is
        decoded straight into numpy.

        Args:
            input: a string, a list of strings, one tokenized prompt (``list[int]``) or several.
            messages: instead of ``input``: one conversation (list of chat messages) or a list of them,
                for multimodal embedders; a content part ``{"type": "image", "image": x}`` accepts a path,
                bytes, PIL image, array or URL.
            images: instead of ``input``: images to embed (CLIP, SigLIP and other multimodal embedders), one
                vector each: a ``pathlib.Path``, bytes, PIL image, ``uint8`` array or URL, or a list of them;
                sent as one single-image conversation each.
            dimensions: Matryoshka output width (the model must support it).
            encoding_format: ``"auto"``, ``"float"``, ``"base64"``, ``"bytes"`` or ``"bytes_only"``.
            embed_dtype: dtype on the wire for base64/bytes: float32, float16, bfloat16, fp8_e4m3,
                fp8_e5m2 (vLLM >= 0.11.1).
            endianness: ``"native"``, ``"little"`` or ``"big"`` (vLLM >= 0.11.1).
            widen: True gives float32; False keeps the smallest dtype that holds the wire values exactly.
            truncate_prompt_tokens: keep only N tokens of each input; -1 = the model's maximum.
            truncation_side: ``"left"`` or ``"right"`` (vLLM >= 0.18.0).
            use_activation: for embeddings, whether to L2-normalise (server default True).
            normalize: same wish in sentence-transformers' words; sent as the field this server reads.
            add_special_tokens: override the tokenizer default.
            prompt: text put before every input, as sentence-transformers' ``encode(prompt=...)`` (e.g.
                Qwen3-Embedding's ``"Instruct: ...\\nQuery:"`` for queries); texts only.
            prompt_name: one of the model's own prompts (``"query"``, ``"document"``: its
                ``config_sentence_transformers.json`` prompts, which vLLM loads), as sentence-transformers'
                ``encode(prompt_name=...)``. The server applies it: the call goes to ``/v2/embed`` with
                ``input_type`` (vLLM >= 0.18.0), decoded into the same result; texts only, and not with the
                options that route lacks (``encoding_format``, ``embed_dtype``, truncation, ...).
            long_inputs: what to do with a text longer than the model's context: ``"error"`` (the default:
                the server refuses it, ``ContextLengthExceeded``), ``"truncate"`` (keep the model's maximum,
                ``truncate_prompt_tokens=-1``), ``"split_mean"`` (split it by the server's tokens into
                overlapping windows, embed each, and take their token-weighted mean, normalised as the
                model's vectors are; texts only) or ``"late_chunking"`` (vLLM >= 0.33 with a
                ``token_embed`` model: the server pools the document's contextual token states in chunks of
                ``chunk_tokens``; the same weighted mean). ``result.chunks`` holds the chunk vectors.
            chunk_tokens: the window (``split_mean``; default: the context less the special tokens) or chunk
                (``late_chunking``; required) size in tokens.
            chunk_overlap: tokens shared by neighbouring ``split_mean`` windows (default: an eighth of the
                window).
            batch_size: inputs per request. A 502 for ``bytes`` batches over 24 inputs (a proxy refusing
                the answer's per-input ``metadata`` header, e.g. nginx's 4 KiB ``proxy_buffer_size``)
                makes this client send at most 24 per ``bytes`` request from then on, with a warning.
            concurrency: requests in flight, or ``"auto"``: a limit tuned from the answers' latencies
                (it backs off on 429/503 and waits out ``Retry-After``; ``client.usage.concurrency_limit``
                says where it settled).
            show_progress: draw a tqdm bar.
            model: served model name (default: the client's, else the server's first).
            extra_body: extra JSON fields merged into each request.
            extra_headers: extra headers for each request.
            timeout: per-request timeout (default: the client's).

        Returns:
            EmbeddingResult: ``.vectors`` ``ndarray[n, d]`` in input order (``.vector`` for one input).

        Raises:
            InvalidInputError: bad arguments, before any request.
            UnsupportedByServer: a feature the server's vLLM version lacks, before any request.
            ContextLengthExceeded: an input is over ``max_model_len`` (``input_index`` names it).
            BadRequestError: (``kind="matryoshka_not_supported"``) ``dimensions`` on a model or value the
                server refuses; (``kind="input_type_not_supported"``) a ``prompt_name`` the model lacks (the
                message lists the ones it has).
            UnexpectedResponse: (``kind="dimensions_not_applied"``) an older server ignored ``dimensions``.
            EndpointNotServed: the server's model does not serve embeddings.
            UnsupportedByServer: ``long_inputs="late_chunking"`` on vLLM < 0.33, or on a model not served
                with ``token_embed`` active.

        Examples:
            >>> result = await client.embed(["first text", "second text"])
            >>> result.vectors.shape
            (2, 384)
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        params = embeddings.EmbedParams(
            dimensions=dimensions,
            encoding_format=encoding_format,
            embed_dtype=embed_dtype,
            endianness=endianness,
            widen=widen,
            truncate_prompt_tokens=truncate_prompt_tokens,
            truncation_side=truncation_side,
            use_activation=use_activation,
            normalize=normalize,
            add_special_tokens=add_special_tokens,
            prompt=prompt,
            prompt_name=prompt_name,
            long_inputs=long_inputs,
            chunk_tokens=chunk_tokens,
            chunk_overlap=chunk_overlap,
        )
        batching = Batching(batch_size, concurrency, show_progress)
        return await self._embed_inputs(input, messages, images, params=params, call=call, batching=batching)

    async def _embed_request(
        self,
        input: Sequence[str] | None,
        images: Sequence[Any] | None,
        params: embeddings.EmbedParams,
        call: CallOptions,
    ) -> EmbeddingResult:
        """``embed`` of ``input`` (or ``images``) in one request, however many and long they are: a job's
        batch, planned by the job (see :attr:`~vllm_tasks.calls.Batching.one_request`)."""
        batching = Batching(1, 1, one_request=True)
        return await self._embed_inputs(input, None, images, params=params, call=call, batching=batching)

    async def _embed_inputs(
        self,
        input: embeddings.EmbedInput | None,
        messages: Any,
        images: Any,
        *,
        params: embeddings.EmbedParams,
        call: CallOptions,
        batching: Batching,
    ) -> EmbeddingResult:
        """``embed`` once its arguments are checked: the inputs made prompts (media read), then sent."""
        conversations = messages is not None or images is not None
        if conversations:
            field = "images" if images is not None else "messages"
            prompts = await media_inputs(
                self._transport, field, embeddings.embed_inputs, input, messages, images
            )
        else:
            prompts = embeddings.embed_inputs(input, messages, images)
        return self._counted(await self._embed(prompts, params, call, batching, conversations=conversations))

    async def _embed(
        self,
        prompts: list[Any],
        params: embeddings.EmbedParams,
        call: CallOptions,
        batching: Batching,
        *,
        conversations: bool,
    ) -> EmbeddingResult:
        if params.prompt_name is not None:
            texts = embeddings.texts_only(prompts, "prompt_name")
            return await self._embed_with_named_prompt(texts, params, call, batching)
        prompts = embeddings.with_prompt(prompts, params.prompt)
        if params.long_inputs in ("split_mean", "late_chunking"):
            if conversations:
                raise InvalidInputError(
                    "long_inputs", params.long_inputs, "applies to texts, not conversations", ""
                )
            texts = embeddings.texts_only(prompts, f"long_inputs={params.long_inputs!r}")
            if params.long_inputs == "split_mean":
                return await self._embed_split(texts, params, call, batching)
            return await self._embed_late_chunked(texts, params, call, batching)
        if params.long_inputs == "truncate" and params.truncate_prompt_tokens is None:
            params = dataclasses.replace(params, truncate_prompt_tokens=-1)
        state = await self._current_state()
        info = state.info
        assert info is not None  # _current_state read it
        bytes_batch_cap = state.get(embeddings.BYTES_BATCH_CAP, None)
        batch_size, max_chars = batching.caps(len(prompts), defaults.EMBED_MAX_BATCH_CHARS)
        while True:
            header_cap = bytes_batch_cap or defaults.EMBED_BYTES_HEADER_MAX_BATCH
            if batching.one_request and len(prompts) > header_cap and params.encoding_format == "auto":
                # base64 answers carry no per-input header for a proxy or a parser to refuse: one request
                params = dataclasses.replace(params, encoding_format="base64")
            # Planning 50,000 inputs takes ~20 ms: too long for the event loop.
            plan = await async_offload(
                embeddings.plan_embed,
                info,
                prompts,
                params,
                call,
                client_model=self.model,
                batch_size=batch_size,
                conversations=conversations,
                max_chars=max_chars,
                bytes_batch_cap=bytes_batch_cap,
            )
            try:
                responses = await self._send_embed_plan(plan, prompts, batching, info, conversations)
                break
            except RequestTooLargeError:
                # A proxy's or the server's body limit: halve the batches and send again.
                smaller = None if batching.one_request else smaller_batches(plan.batches, plan.sizes)
                if smaller is None:
                    raise
                batch_size, max_chars = smaller
            except InternalServerError as error:
                if not embeddings.header_may_overflow(plan, error):
                    raise
                bytes_batch_cap = defaults.EMBED_BYTES_MAX_BATCH
                self._learn(state, embeddings.BYTES_BATCH_CAP, None, bytes_batch_cap)
                logger.warning(
                    "a 502 for bytes batches of up to %d inputs: a proxy in front of vLLM likely refuses the "
                    "answers' metadata header (nginx: raise proxy_buffer_size); this client now sends at "
                    "most %d inputs per bytes request",
                    max(map(len, plan.batches)),
                    bytes_batch_cap,
                )
        width_key = (str(plan.model or ""), params.dimensions)
        known_width = self._server_state.get(embeddings.EMBEDDING_WIDTH, width_key)
        if _body_bytes(responses) > defaults.OFFLOAD_DECODE_BYTES:
            result = await async_offload(
                embeddings.merge_embeddings, plan, responses, params, info, known_width
            )
        else:
            result = embeddings.merge_embeddings(plan, responses, params, info, known_width)
        if known_width is None:
            self._learn(state, embeddings.EMBEDDING_WIDTH, width_key, int(result.vectors.shape[1]))
        return result

    async def _embed_split(
        self, texts: list[str], params: embeddings.EmbedParams, call: CallOptions, batching: Batching
    ) -> EmbeddingResult:
        """``long_inputs="split_mean"``: texts that fit go as they are, longer ones as overlapping windows of
        their token ids (special tokens around each); each input's vector is its windows' weighted mean."""
        info = await self.server_info()
        name = resolve_model(info, call.model, self.model)
        special = params.add_special_tokens is not False
        tokenize_call = CallOptions(name, None, call.extra_headers, call.timeout)
        asked = [(long_inputs.PROBE, True), (long_inputs.PROBE, False), *((text, False) for text in texts)]
        requests = [
            tokenizing.tokenize_request(text, add_special_tokens=flag, return_token_strs=False, model=name,
                                        call=tokenize_call)
            for text, flag in asked
        ]  # fmt: skip
        responses = await self._send_batches(
            requests, concurrency=batching.concurrency, counts=[], show_progress=False, description="tokenize"
        )
        probe, bare, *bodies = [tokenizing.parse_tokenize(response) for response in responses]
        prefix, suffix = long_inputs.special_tokens(probe.tokens.tolist(), bare.tokens.tolist())
        if not special:
            prefix, suffix = [], []
        plan = long_inputs.plan_split(
            texts, [body.tokens.tolist() for body in bodies], (prefix, suffix), probe.max_model_len, params
        )
        plain = dataclasses.replace(params, long_inputs="error", chunk_tokens=None, chunk_overlap=None)
        results = [
            await self._embed(pieces, plain, call, batching, conversations=False) if pieces else None
            for pieces in (plan.whole, plan.windows)
        ]
        return long_inputs.merge_split(plan, results[0], results[1])

    async def _embed_late_chunked(
        self, texts: list[str], params: embeddings.EmbedParams, call: CallOptions, batching: Batching
    ) -> EmbeddingResult:
        """``long_inputs="late_chunking"``: ``/v1/embeddings`` with ``late_chunking_params`` (vLLM >= 0.33, a
        ``token_embed`` model); each input's vector is its chunks' weighted mean."""
        long_inputs.check_late_chunking(params)
        info = await self.server_info()
        gates.require(info, ["late_chunking"])
        name = resolve_model(info, call.model, self.model) or ""
        fields = {
            "model": name,
            "late_chunking_params": {"chunk_size": params.chunk_tokens},
            "add_special_tokens": params.add_special_tokens,
            "use_activation": params.use_activation,
            **gates.normalize_fields(info, params.normalize),
        }
        fields = {key: value for key, value in fields.items() if value is not None}
        requests, batches = long_inputs.late_chunking_requests(
            texts, fields, call, batch_size=batching.inputs_per_request(len(texts))
        )
        responses = await self._send_batches(
            requests,
            concurrency=batching.concurrency,
            counts=[len(batch) for batch in batches],
            show_progress=batching.show_progress,
            description="embed",
        )
        chunks: list[EmbeddingChunks] = []
        usage = Usage()
        for batch, response in zip(batches, responses, strict=True):
            batch_chunks, batch_usage = long_inputs.parse_late_chunking(response, len(batch), info, name)
            chunks += batch_chunks
            usage += batch_usage
        vectors = np.stack([long_inputs.weighted_mean(c.vectors, c.weights) for c in chunks])
        return EmbeddingResult(
            vectors=vectors, model=name, usage=usage, encoding_format="float", chunks=chunks
        )

    async def _send_embed_plan(
        self,
        plan: embeddings.EmbedPlan,
        prompts: list[Any],
        batching: Batching,
        info: ServerInfo,
        conversations: bool,
    ) -> list[httpx.Response]:
        """Send a plan's requests; on a context-length error, name the input that is too long."""
        try:
            return await self._send_batches(
                plan.requests,
                concurrency=batching.concurrency,
                counts=[len(batch) for batch in plan.batches],
                show_progress=batching.show_progress,
                description="embed",
            )
        except ContextLengthExceeded as error:
            limit = error.max_model_len or info.max_model_len
            if not conversations and limit is not None:
                counts = await count_longest(self._transport, prompts, plan.model)
                embeddings.name_too_long_input(error, prompts, counts, limit)
            raise

    async def embed_sparse(
        self,
        input: embeddings.EmbedInput,
        *,
        truncate_prompt_tokens: int | None = None,
        add_special_tokens: bool | None = None,
        min_weight: float = 0.0,
        top_k: int | None = None,
        return_tokens: bool = False,
        batch_size: int = defaults.SPARSE_BATCH_SIZE,
        concurrency: Concurrency = defaults.CONCURRENCY,
        show_progress: bool = False,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> SparseEmbeddingResult:
        """Sparse vectors (SPLADE, BGE-M3) of texts or token ids: token ids and weights, not a dense row.

        SPLADE: a ``BertForMaskedLM`` checkpoint served with ``--runner pooling --hf-overrides
        '{"architectures": ["BertSpladeSparseEmbeddingModel"]}'`` (vLLM >= 0.11.1). Its ``/v1/embeddings``
        answers one vocabulary-wide row per input (``log(1 + relu(MLM logits))`` max-pooled over the tokens,
        mostly zeros); the client fetches the rows as raw float32, keeps the non-zero weights, and holds the
        dense rows of only ``concurrency`` batches at a time.

        BGE-M3: ``BAAI/bge-m3`` served with ``--hf-overrides '{"architectures": ["BgeM3EmbeddingModel"]}'
        --pooler-config '{"task": "token_classify"}'`` (vLLM >= 0.16.0). ``/v1/embeddings`` answers 501; the
        client then tokenizes the texts (``/tokenize``), reads one weight per token from ``/pooling`` and
        reduces them as FlagEmbedding's ``lexical_weights`` do (special tokens and weights <= 0 left out,
        the largest weight of a repeated id kept). BGE-M3 served with vLLM's sparse IO-processor plugin
        (``--io-processor-plugin bge_m3_sparse_plugin``, installed from vLLM's source tree) refuses
        ``token_classify``; the client then asks the plugin (``/pooling`` ``task=plugin``), which pairs ids
        and weights itself, and reduces its answer the same way. The model's kind is remembered after the
        first call.

        Long lists are batched and sent ``concurrency`` at a time, like ``embed``.

        Args:
            input: a string, a list of strings, one tokenized prompt (``list[int]``) or several.
            truncate_prompt_tokens: keep only N tokens of each input; -1 = the model's maximum (SPLADE only).
            add_special_tokens: override the tokenizer default.
            min_weight: drop weights at or below this (default 0: every non-zero weight).
            top_k: keep only each input's ``top_k`` largest weights.
            return_tokens: also give the token string of every id (``vector.tokens``, ``vector.to_dict()``):
                SPLADE: one ``/detokenize`` request per distinct id, ``concurrency`` at a time; BGE-M3: free.
            batch_size: inputs per request (each answer row is ``4 * vocabulary`` bytes: 122 KB for BERT).
            concurrency: requests in flight, or ``"auto"``: a limit tuned from the answers' latencies
                (it backs off on 429/503 and waits out ``Retry-After``; ``client.usage.concurrency_limit``
                says where it settled).
            show_progress: draw a tqdm bar.
            model: served model name (default: the client's, else the server's first).
            extra_body: extra JSON fields merged into each request.
            extra_headers: extra headers for each request.
            timeout: per-request timeout (default: the client's).

        Returns:
            SparseEmbeddingResult: one :class:`~vllm_tasks.SparseVector` per input (``.indices`` int64
            token ids, ``.values`` float32), ``.to_qdrant()``, ``.to_milvus()``, ``.to_scipy()``.

        Raises:
            InvalidInputError: bad arguments, before any request.
            UnsupportedByServer: (``feature="sparse_embeddings"``) the server is older than vLLM 0.11.1,
                serves neither ``/v1/embeddings`` nor ``/pooling``, its model answered dense embeddings (a
                negative weight) or refused ``token_classify``; the message names the flags that serve
                SPLADE and BGE-M3. A model found not sparse is refused before sending on later calls.
                (``feature="sparse_lexical_weights"``) BGE-M3 on a server older than vLLM 0.16.0.
            InvalidInputError: ``truncate_prompt_tokens`` on BGE-M3 (``token_classify``);
                ``add_special_tokens=False`` on BGE-M3's sparse plugin.
            UnexpectedResponse: (``kind="decode"``) BGE-M3 weights that do not line up with the token ids.
            ContextLengthExceeded: an input is over ``max_model_len`` (``input_index`` names it).

        Examples:
            >>> result = await client.embed_sparse(["the cat sat on the mat"], top_k=64)
            >>> result[0].to_qdrant()
            {'indices': [1010, 1996, ...], 'values': [0.41, 1.02, ...]}
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        params = sparse.SparseEmbedParams(
            truncate_prompt_tokens=truncate_prompt_tokens,
            add_special_tokens=add_special_tokens,
            min_weight=min_weight,
            top_k=top_k,
            return_tokens=return_tokens,
        )
        batching = Batching(batch_size, concurrency, show_progress)
        prompts = embeddings.embed_inputs(input, None)
        return self._counted(await self._embed_sparse(prompts, params, call, batching))

    async def _embed_sparse_request(
        self, input: Sequence[str], params: sparse.SparseEmbedParams, call: CallOptions
    ) -> SparseEmbeddingResult:
        """``embed_sparse`` of ``input`` in one request per step (SPLADE: ``/v1/embeddings``; BGE-M3: its
        ``/tokenize`` requests, then one ``/pooling``), however many and long: a job's batch, planned by the
        job (see :attr:`~vllm_tasks.calls.Batching.one_request`)."""
        batching = Batching(1, 1, one_request=True)
        return self._counted(
            await self._embed_sparse(embeddings.embed_inputs(input, None), params, call, batching)
        )

    async def _embed_sparse(
        self,
        prompts: list[Any],
        params: sparse.SparseEmbedParams,
        call: CallOptions,
        batching: Batching,
    ) -> SparseEmbeddingResult:
        state = await self._current_state()
        info = state.info
        assert info is not None  # _current_state read it
        name = resolve_model(info, call.model, self.model) or ""
        sparse.check_sparse_server(info, name, state.get(sparse.NOT_SPARSE, name))
        source = state.get(sparse.SPARSE_SOURCE, name) or sparse.first_source(info)
        if source == "splade":
            try:
                result = await self._splade(prompts, params, call, batching, state=state, name=name)
            except EndpointNotServed:
                if info.serves_route("/pooling") is False:
                    raise
                source = "lexical"  # BGE-M3 with token_classify active: /v1/embeddings answers 501
            else:
                self._learn(state, sparse.SPARSE_SOURCE, name, "splade")
                return result
        refused: BadRequestError | None = None
        if source == "lexical":
            try:
                result = await self._lexical(prompts, params, call, batching, state=state, name=name)
            except BadRequestError as error:
                if "task" not in str(error):
                    raise
                refused = error  # another active task: BGE-M3 with its sparse plugin, or not sparse at all
            else:
                self._learn(state, sparse.SPARSE_SOURCE, name, "lexical")
                return result
        try:
            result = await self._sparse_plugin(prompts, params, call, batching, info=info, name=name)
        except BadRequestError as error:
            if "task" not in str(error):
                raise
            cause = refused or error
            task = "token_classify" if refused is not None else "its sparse plugin"
            reason = f"model {name!r} does not answer /pooling with task={task} ({cause.message})"
            self._learn(state, sparse.NOT_SPARSE, name, reason)
            raise sparse.not_sparse_error(info, reason) from None
        self._learn(state, sparse.SPARSE_SOURCE, name, "plugin")
        return result

    async def _splade(
        self,
        prompts: list[Any],
        params: sparse.SparseEmbedParams,
        call: CallOptions,
        batching: Batching,
        *,
        state: ServerState,
        name: str,
    ) -> SparseEmbeddingResult:
        """SPLADE: vocabulary-wide rows from ``/v1/embeddings``, sparsified a window at a time."""
        info = state.info
        assert info is not None
        embed_params = params.embed_params()
        batch_size, max_chars = batching.caps(len(prompts), defaults.EMBED_MAX_BATCH_CHARS)
        plan = embeddings.plan_embed(
            info,
            prompts,
            embed_params,
            call,
            client_model=self.model,
            batch_size=batch_size,
            conversations=False,
            max_chars=max_chars,
            bytes_batch_cap=None if batching.one_request else state.get(embeddings.BYTES_BATCH_CAP, None),
        )
        vectors: list[SparseVector] = []
        usage = Usage()
        width: int | None = None
        served: str | None = None
        # One bar for the call, advanced a window at a time (the windows' own sends draw none).
        progress = Progress(len(prompts), enabled=batching.show_progress, description="embed_sparse")
        quiet = Batching(batching.batch_size, batching.concurrency, False)
        try:
            for window in sparse.windows(plan, batching.window):
                responses = await self._send_embed_plan(window, prompts, quiet, info, False)
                decoded = await async_offload(
                    embeddings.merge_embeddings, window, responses, embed_params, info, width
                )
                reason = sparse.dense_reason(decoded.vectors, decoded.model or name)
                if reason is not None:
                    self._learn(state, sparse.NOT_SPARSE, name, reason)
                    raise sparse.not_sparse_error(info, reason)
                vectors += sparse.sparsify(decoded.vectors, min_weight=params.min_weight, top_k=params.top_k)
                usage += decoded.usage
                width = int(decoded.vectors.shape[1])
                served = served or decoded.model
                progress.advance(sum(map(len, window.batches)))
        finally:
            progress.close()
        if params.return_tokens:
            vectors = await self._with_token_strings(vectors, name, call, batching)
        return SparseEmbeddingResult(vectors=vectors, dimension=width or 0, model=served or name, usage=usage)

    async def _lexical(
        self,
        prompts: list[Any],
        params: sparse.SparseEmbedParams,
        call: CallOptions,
        batching: Batching,
        *,
        state: ServerState,
        name: str,
    ) -> SparseEmbeddingResult:
        """BGE-M3: the prompts' token ids from ``/tokenize``, their weights from ``/pooling``
        ``token_classify``, reduced per id as FlagEmbedding does."""
        info = state.info
        assert info is not None
        gates.require(info, [sparse.LEXICAL_FEATURE])
        sparse.lexical_fields(params)
        ids, strings = await self._token_ids(prompts, params, call, batching, name)
        batch_size, max_bytes = batching.caps(len(ids), defaults.SCORE_MAX_REQUEST_BYTES)
        requests, batches = pooling.plan_pooling_requests(
            "/pooling",
            "pooling",
            ids,
            {"model": name, "task": "token_classify"},
            call,
            batch_size=batch_size,
            max_bytes=max_bytes,
        )
        responses = await self._send_batches(
            requests,
            concurrency=batching.concurrency,
            counts=[len(batch) for batch in batches],
            show_progress=batching.show_progress,
            description="embed_sparse",
        )
        vectors: list[SparseVector] = []
        usage = Usage()
        for batch, response in zip(batches, responses, strict=True):
            rows, batch_usage = sparse.parse_lexical(response, len(batch))
            usage += batch_usage
            for i, row in zip(batch, rows, strict=True):
                vectors.append(sparse.lexical_vector(row, ids[i], strings[i], name))
        vectors = sparse.pruned(vectors, params)
        return SparseEmbeddingResult(vectors=vectors, dimension=None, model=name, usage=usage)

    async def _sparse_plugin(
        self,
        prompts: list[Any],
        params: sparse.SparseEmbedParams,
        call: CallOptions,
        batching: Batching,
        *,
        info: ServerInfo,
        name: str,
    ) -> SparseEmbeddingResult:
        """BGE-M3 with vLLM's sparse IO-processor plugin: ``/pooling`` ``task=plugin``, which pairs ids and
        weights on the server."""
        gates.require(info, [sparse.LEXICAL_FEATURE])
        size, max_bytes = batching.caps(len(prompts), defaults.SCORE_MAX_REQUEST_BYTES)
        requests, batches = sparse.plugin_requests(
            prompts, params, name, call, batch_size=size, max_bytes=max_bytes
        )
        responses = await self._send_batches(
            requests,
            concurrency=batching.concurrency,
            counts=[len(batch) for batch in batches],
            show_progress=batching.show_progress,
            description="embed_sparse",
        )
        vectors: list[SparseVector] = []
        usage = Usage()
        for batch, response in zip(batches, responses, strict=True):
            batch_vectors, batch_usage = sparse.parse_plugin(response, len(batch))
            vectors += batch_vectors
            usage += batch_usage
        vectors = sparse.pruned(vectors, params)
        return SparseEmbeddingResult(vectors=vectors, dimension=None, model=name, usage=usage)

    async def _token_ids(
        self,
        prompts: list[Any],
        params: sparse.SparseEmbedParams,
        call: CallOptions,
        batching: Batching,
        name: str,
    ) -> tuple[list[list[int]], list[list[str] | None]]:
        """Each prompt's token ids (and strings, for texts) as the server's tokenizer reads it."""
        if not prompts or not isinstance(prompts[0], str):
            return [list(map(int, prompt)) for prompt in prompts], [None] * len(prompts)
        special = True if params.add_special_tokens is None else params.add_special_tokens
        requests = [
            tokenizing.tokenize_request(
                text, add_special_tokens=special, return_token_strs=True, model=name, call=call
            )
            for text in prompts
        ]
        responses = await self._send_batches(
            requests, concurrency=batching.concurrency, counts=[], show_progress=False, description="tokenize"
        )
        parsed = [tokenizing.parse_tokenize(response) for response in responses]
        return [result.tokens.tolist() for result in parsed], [result.token_strs for result in parsed]

    async def _with_token_strings(
        self, vectors: list[SparseVector], model: str, call: CallOptions, batching: Batching
    ) -> list[SparseVector]:
        """Fetch the string of every distinct token id in ``vectors`` with ``/detokenize``."""
        ids = sorted({int(i) for vector in vectors for i in vector.indices})
        requests = [tokenizing.detokenize_request([i], model=model, call=call) for i in ids]
        responses = await self._send_batches(
            requests,
            concurrency=batching.concurrency,
            counts=[],
            show_progress=False,
            description="detokenize",
        )
        strings = {
            i: tokenizing.parse_detokenize(response) for i, response in zip(ids, responses, strict=True)
        }
        return sparse.with_tokens(vectors, strings)

    async def embed_v2(
        self,
        texts: Sequence[str] | None = None,
        *,
        images: Sequence[Any] | None = None,
        inputs: Sequence[Mapping[str, Any]] | None = None,
        input_type: str | None = None,
        embedding_types: Sequence[EmbeddingType] | None = None,
        output_dimension: int | None = None,
        truncate: Truncate | None = None,
        max_tokens: int | None = None,
        priority: int | None = None,
        batch_size: int = defaults.EMBED_BATCH_SIZE,
        concurrency: Concurrency = defaults.CONCURRENCY,
        show_progress: bool = False,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> EmbedV2Result:
        """Embed with the Cohere-style ``/v2/embed`` route (vLLM >= 0.18.0).

        Args:
            texts: strings to embed.
            images: instead of texts: images (paths, bytes, PIL images, arrays, URLs or data URLs).
            inputs: instead of texts: ``{"content": [parts]}`` items mixing text and images.
            input_type: a task instruction the model defines (e.g. ``"search_query"``).
            embedding_types: any of ``"float"``, ``"binary"``, ``"ubinary"``, ``"base64"`` (default
                ``["float"]``); ``int8``/``uint8`` are refused before sending, as vLLM rejects them.
            output_dimension: Matryoshka width.
            truncate: ``"END"`` (server default), ``"START"`` or ``"NONE"``.
            max_tokens: the truncation length.
            priority: scheduling priority (only with ``--scheduling-policy priority``).
            batch_size: inputs per request.
            concurrency: requests in flight, or ``"auto"``: a limit tuned from the answers' latencies
                (it backs off on 429/503 and waits out ``Retry-After``; ``client.usage.concurrency_limit``
                says where it settled).
            show_progress: draw a tqdm bar.
            extra_body: extra JSON fields merged into each request.
            extra_headers: extra headers for each request.
            timeout: per-request timeout (default: the client's).

        Returns:
            EmbedV2Result: one array per requested type (``.float``, ``.binary``, ``.ubinary``,
            ``.base64``).

        Raises:
            InvalidInputError: bad arguments, before any request.
            UnsupportedByServer: the server is older than vLLM 0.18.0.
            BadRequestError: ``kind="input_type_not_supported"``: ``input_type`` the model defines no
                instruction for; ``kind="matryoshka_not_supported"``: ``output_dimension`` the server refuses.

        Examples:
            >>> result = await client.embed_v2(texts=["hello"], embedding_types=["float", "ubinary"])
            >>> result.ubinary.shape
            (1, 48)
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        batching = Batching(batch_size, concurrency, show_progress)
        params = embeddings.EmbedV2Params(
            input_type=input_type,
            embedding_types=embedding_types,
            output_dimension=output_dimension,
            truncate=truncate,
            max_tokens=max_tokens,
            priority=priority,
        )
        if texts is None:
            field_name, items = await media_inputs(
                self._transport, "inputs", embeddings.v2_inputs, texts, images, inputs
            )
            if field_name == "images":  # bare URLs: checked as the image parts they stand for
                parts = await fetched_media(self._transport, [{"image_url": url} for url in items], "images")
                items = [part["image_url"] for part in parts]
        else:
            field_name, items = embeddings.v2_inputs(texts, images, inputs)
        return self._counted(await self._embed_v2(field_name, items, params, call, batching))

    async def _embed_v2(
        self,
        field_name: str,
        items: list[Any],
        params: embeddings.EmbedV2Params,
        call: CallOptions,
        batching: Batching,
    ) -> EmbedV2Result:
        info = await self.server_info()
        body_fields = params.body_fields()
        types = body_fields["embedding_types"]
        batch_size, max_chars = batching.caps(len(items), defaults.EMBED_MAX_BATCH_CHARS)
        requests, batches = embeddings.plan_embed_v2(
            info,
            field_name,
            items,
            body_fields,
            call,
            client_model=self.model,
            batch_size=batch_size,
            max_chars=max_chars,
        )
        responses = await self._send_batches(
            requests,
            concurrency=batching.concurrency,
            counts=[len(batch) for batch in batches],
            show_progress=batching.show_progress,
            description="embed_v2",
        )
        payloads = [json_object(response, "/v2/embed") for response in responses]
        return embeddings.merge_v2_responses(payloads, types, [len(batch) for batch in batches])

    async def _embed_with_named_prompt(
        self, texts: list[str], params: embeddings.EmbedParams, call: CallOptions, batching: Batching
    ) -> EmbeddingResult:
        """``embed`` with the model's own prompt: ``/v2/embed`` with ``input_type`` (the server puts the
        prompt before each text), its little-endian float32 base64 rows decoded as ``embed`` returns them."""
        name = params.prompt_name or ""
        v2 = embeddings.EmbedV2Params(
            input_type=name, embedding_types=["base64"], output_dimension=params.dimensions
        )
        try:
            result = await self._embed_v2("texts", texts, v2, call, batching)
        except BadRequestError as error:
            embeddings.explain_unknown_prompt(error, name)
            raise
        return embeddings.named_prompt_result(
            result, resolve_model(await self.server_info(), call.model, self.model)
        )


def _body_bytes(responses: list[httpx.Response]) -> int:
    return sum(len(response.content) for response in responses)
