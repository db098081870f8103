# GENERATED from vllm_tasks/_async/pooling.py by scripts/unasync.py: do not edit.
"""Pooling methods of the synchronous client: ``classify``, ``pool``, ``token_classify``, ``reward``.

The pure parts (input checks, planning, merging, ``maxsim``) are in ``vllm_tasks.pooling``;
``vllm_tasks/_sync/pooling.py`` is generated from this file by ``scripts/unasync.py``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

import httpx

from .. import defaults, gates, pooling, tokenizing
from ..adaptive import Concurrency
from ..calls import CLIENT_DEFAULT, Batching, CallOptions, TimeoutLike, resolve_model
from ..offload import sync_offload
from ..pooling import PoolEncodingFormat
from ..reward import RewardModelKind, RewardParams, require_reward, reward_result
from ..tasks import TaskName
from ..token_classification import (
    Aggregation,
    TokenClassifyParams,
    check_server_tokens,
    load_tokenizer,
    token_classification,
    token_texts,
)
from ..types.reward import RewardResult
from ..types.scoring import ClassificationResult, PoolingResult, TokenClassificationResult
from .base import ClientBase
from .fetching import media_inputs

T = TypeVar("T")


class PoolingMethods(ClientBase):
    """``classify``, ``pool``, ``token_classify``, ``reward``: ``/classify``, ``/pooling``."""

    def classify(
        self,
        input: Any,
        *,
        multi_label: bool | None = None,
        threshold: float = 0.5,
        top_k: int | None = None,
        label_names: Sequence[str] | None = None,
        use_activation: bool | None = None,
        truncate_prompt_tokens: int | None = None,
        batch_size: int = defaults.SCORE_BATCH_SIZE,
        concurrency: Concurrency = defaults.CONCURRENCY,
        show_progress: bool = False,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> ClassificationResult:
        """Classify texts or token ids (``POST /classify``) with a sequence-classification model.

        Args:
            input: a string, a list of strings, one tokenized prompt (``list[int]``) or several
                (``list[list[int]]``); token ids are sent as they are, without tokenizing.
            multi_label: whether the model is multi-label (each class its own sigmoid, served where its
                config has ``problem_type: multi_label_classification``): its labels are then every class
                over ``threshold``. None decides from the answer, as vLLM does not say: multi-label when
                there are two classes or more, every probability is in 0..1 and some input's probabilities
                sum to more than 0.001 away from 1 (one softmax sums to 1); never for raw logits.
            threshold: a multi-label model's probability a label must be over (of a logit: its sigmoid).
            top_k: at most this many labels per input, most probable first: a single-label model's
                ``top_k`` most probable, a multi-label model's best ``top_k`` over ``threshold``.
            label_names: every class's name in class order (the model's ``id2label``); vLLM names only
                each input's most probable class, so without them other classes are named where another
                input's most probable class names them, else ``None``.
            use_activation: False returns raw logits instead of probabilities.
            truncate_prompt_tokens: keep only N tokens of each input (-1: model maximum).
            batch_size: inputs per request.
            concurrency: requests in flight, or ``"auto"``: a limit tuned from the answers' latencies
                (it backs off on 429/503 and waits out ``Retry-After``; ``client.usage.concurrency_limit``
                says where it settled).
            show_progress: draw a progress bar (needs tqdm: ``vllm-tasks[progress]``).
            model: the served model (default: the client's, else the server's first).
            extra_body: extra JSON fields merged into every request.
            extra_headers: extra headers for this call.
            timeout: per-request timeout (default: the client's).

        Returns:
            ClassificationResult: ``.labels`` (a single-label model's most probable label per input; a
            list per input for a multi-label model or with ``top_k``), ``.predictions`` (the same as
            :class:`~vllm_tasks.types.ClassLabel` lists: index, name, score), ``.probs``
            (``ndarray[n, num_classes]``), ``.num_classes``, ``.multi_label``.

        Raises:
            InvalidInputError: bad arguments (before any request); ``label_names`` of another length than
                the model's classes.
            EndpointNotServed: the model does not serve ``/classify``.
            BadRequestError: token ids sent to an early ``/classify`` that read text only
                (``input: list[str] | str`` before its completion-style request form).

        Examples:
            >>> (client.classify(["great!", "awful"])).labels
            ['positive', 'negative']
            >>> (client.classify(["a match in parliament"], multi_label=True)).labels
            [['politics', 'sports']]
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        batching = Batching(batch_size, concurrency, show_progress)
        params = pooling.ClassifyParams(
            use_activation=use_activation,
            truncate_prompt_tokens=truncate_prompt_tokens,
            multi_label=multi_label,
            threshold=threshold,
            top_k=top_k,
            label_names=None if label_names is None else cast(tuple[str, ...], label_names),
        )
        prompts = pooling.pool_inputs(input)
        return self._counted(
            self._pool(
                "/classify",
                "classify",
                prompts,
                params.fields(),
                call=call,
                batching=batching,
                merge=functools.partial(pooling.merge_classify, params=params),
            )
        )

    def pool(
        self,
        input: Any = None,
        *,
        images: Any = None,
        messages: Sequence[Mapping[str, Any]] | Sequence[Sequence[Mapping[str, Any]]] | None = None,
        task: str | None = None,
        use_activation: bool | None = None,
        truncate_prompt_tokens: int | None = None,
        encoding_format: PoolEncodingFormat = "auto",
        batch_size: int = defaults.SCORE_BATCH_SIZE,
        concurrency: Concurrency = defaults.CONCURRENCY,
        show_progress: bool = False,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> PoolingResult:
        """Run the model's pooler (``POST /pooling``): vectors, class scores or per-token matrices.

        On ``token_embed`` servers (ColBERT, BGE-M3 multi-vector, ColPali) each input gives a
        ``[n_tokens, d]`` matrix; ``vllm_tasks.maxsim(query, doc)`` reproduces the server's late-interaction
        score. Page images (``images=``) go one per request, as vLLM's ``/pooling`` takes one conversation;
        a ColPali page gives one row per image patch and prompt token.

        Args:
            input: a string, a list of strings, one tokenized prompt (``list[int]``) or several
                (``list[list[int]]``).
            images: instead of ``input``: images (paths, bytes, PIL images, arrays, URLs) for a multimodal
                pooling model, one chat-style conversation each.
            messages: instead of ``input``: one chat-style conversation or a list of them (text and image
                parts), one request each.
            task: the pooling task; must be the server's *active* one (``embed``, ``classify``,
                ``token_embed``, ``token_classify``, ...); None uses it.
            use_activation: False skips normalisation/activation.
            truncate_prompt_tokens: keep only N tokens of each input (-1: model maximum).
            encoding_format: ``"auto"`` (the default) has the arrays sent as raw float32 bytes where the
                server's vLLM has that transport (0.11.1+), else as JSON; ``"float"`` always JSON;
                ``"bytes"`` always binary (an error on an older server).
            batch_size: inputs per request.
            concurrency: requests in flight, or ``"auto"``: a limit tuned from the answers' latencies
                (it backs off on 429/503 and waits out ``Retry-After``; ``client.usage.concurrency_limit``
                says where it settled).
            show_progress: draw a progress bar (needs tqdm: ``vllm-tasks[progress]``).
            model: the served model (default: the client's, else the server's first).
            extra_body: extra JSON fields merged into every request.
            extra_headers: extra headers for this call.
            timeout: per-request timeout (default: the client's).

        Returns:
            PoolingResult: ``.data``, one ``ndarray`` per input.

        Raises:
            InvalidInputError: bad arguments, not exactly one of ``input``, ``images`` and ``messages``, or
                a removed task name (before any request).
            UnsupportedByServer: ``encoding_format="bytes"`` on a vLLM older than 0.11.1.
            BadRequestError: ``task`` is not the server's active pooling task.

        Examples:
            >>> (client.pool("hello world")).data[0].shape
            (384,)
            >>> (client.pool(images=[Path("page.png")])).data[0].shape  # ColPali: patches + prompt
            (1030, 128)
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        batching = Batching(batch_size, concurrency, show_progress)
        params = pooling.PoolParams(
            task=task,
            use_activation=use_activation,
            truncate_prompt_tokens=truncate_prompt_tokens,
            encoding_format=encoding_format,
        )
        return self._pool_inputs(input, messages, images, params=params, call=call, batching=batching)

    def _pool_request(
        self,
        input: Sequence[str] | None,
        images: Sequence[Any] | None,
        params: pooling.PoolParams,
        call: CallOptions,
    ) -> PoolingResult:
        """``pool`` of ``input`` in one request, however many and long (``images``: one request each, as
        ``/pooling`` takes one conversation): a job's batch, planned by the job (see
        :attr:`~vllm_tasks.calls.Batching.one_request`)."""
        batching = Batching(1, 1, one_request=True)
        return self._pool_inputs(input, None, images, params=params, call=call, batching=batching)

    def _pool_inputs(
        self,
        input: Any,
        messages: Any,
        images: Any,
        *,
        params: pooling.PoolParams,
        call: CallOptions,
        batching: Batching,
    ) -> PoolingResult:
        """``pool`` once its arguments are checked: the inputs made prompts (media read), then sent."""
        if images is None and messages is None:
            prompts, conversations = pooling.pool_prompts(input, messages, images)
        else:
            field = "images" if images is not None else "messages"
            prompts, conversations = media_inputs(
                self._transport, field, pooling.pool_prompts, input, messages, images
            )
        wire_format = pooling.pool_wire_format(self.server_info(), params.encoding_format)
        return self._counted(
            self._pool(
                "/pooling",
                "pooling",
                prompts,
                {**params.fields(), "encoding_format": wire_format},
                call=call,
                batching=batching,
                merge=pooling.merge_pool,
                conversations=conversations,
            )
        )

    def token_classify(
        self,
        texts: str | Sequence[str],
        *,
        aggregation: Aggregation | None = "simple",
        ignore_labels: Sequence[str] = ("O",),
        label_names: Sequence[str] | None = None,
        tokenizer: Any = None,
        batch_size: int = defaults.SCORE_BATCH_SIZE,
        concurrency: Concurrency = defaults.CONCURRENCY,
        show_progress: bool = False,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> TokenClassificationResult:
        """Find entities (NER) with a token-classification model (``POST /pooling``, task
        ``token_classify``): the spans transformers' ``pipeline("token-classification",
        aggregation_strategy=aggregation)`` gives on the same weights, in characters of your text.

        The texts are tokenized here with the model's fast tokenizer (needs ``vllm-tasks[tokenizer]``): its
        offsets are exact for your text, which the server's ``/tokenize`` (no offsets) cannot give; the
        token ids go to the server as they are, and one ``/tokenize`` of the first text checks that the
        tokenizer is the server's. The server's raw logits (``use_activation=False``, vLLM >= 0.12) are
        turned into probabilities with a softmax, as the pipeline does.

        Args:
            texts: a string or a list of strings.
            aggregation: ``"simple"`` (adjacent tokens of one type join, ``B-`` starts a new entity),
                ``"first"``, ``"average"`` or ``"max"`` (each word first gets one label: its first token's,
                its tokens' mean scores' or its most confident token's; then as ``"simple"``), or None (one
                entity per token, labelled with its own tag).
            ignore_labels: labels left out of the result (default ``("O",)``, outside any entity).
            label_names: the model's labels in class order (default: ``id2label`` of the ``config.json``
                beside the tokenizer).
            tokenizer: the model's directory (``tokenizer.json``, ``config.json``), its ``tokenizer.json``,
                a ``tokenizers.Tokenizer`` or a transformers fast tokenizer; None: the served model's path
                (``/v1/models`` ``root``) where it is a directory on this machine.
            batch_size: inputs per request.
            concurrency: requests in flight, or ``"auto"``: a limit tuned from the answers' latencies.
            show_progress: draw a progress bar (needs tqdm: ``vllm-tasks[progress]``).
            model: the served model (default: the client's, else the server's first).
            extra_body: extra JSON fields merged into every request.
            extra_headers: extra headers for this call.
            timeout: per-request timeout (default: the client's).

        Returns:
            TokenClassificationResult: ``.entities``, per text a list of
            :class:`~vllm_tasks.types.TokenEntity` (``label``, ``score``, ``start``, ``end``, ``text``).

        Raises:
            InvalidInputError: bad arguments; no tokenizer found, or one that is not the server's; label
                names missing or of another count than the model's labels.
            MissingDependency: ``tokenizers`` is not installed.
            UnsupportedByServer: a vLLM older than 0.12 (no raw logits).
            BadRequestError: the model's active pooling task is not ``token_classify``, or a text is
                longer than the model's context.

        Examples:
            >>> result = client.token_classify(["Ada Lovelace lived in London."])
            >>> [(e.label, e.text) for e in result.entities[0]]
            [('PER', 'Ada Lovelace'), ('LOC', 'London')]
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        batching = Batching(batch_size, concurrency, show_progress)
        params = TokenClassifyParams(
            aggregation=aggregation,
            ignore_labels=cast(tuple[str, ...], ignore_labels),
            label_names=None if label_names is None else cast(tuple[str, ...], label_names),
        )
        inputs = token_texts(texts)
        info = self.server_info()
        name = resolve_model(info, call.model, self.model)
        gates.require(info, ["use_activation"])
        try:
            root = info.model_card(name).root
        except KeyError:
            root = None
        local = sync_offload(load_tokenizer, tokenizer, root)
        encodings = sync_offload(lambda: [local.encode(text) for text in inputs])
        check = tokenizing.tokenize_request(
            inputs[0], add_special_tokens=True, return_token_strs=False, model=name, call=call
        )
        server_tokens = tokenizing.parse_tokenize(self._transport.send(check))
        check_server_tokens(encodings[0].ids, server_tokens.tokens.tolist())
        fields = {"task": "token_classify", "use_activation": False}
        wire_format = pooling.pool_wire_format(info, "auto")
        pooled = self._pool(
            "/pooling",
            "pooling",
            [list(encoding.ids) for encoding in encodings],
            {**fields, "encoding_format": wire_format},
            call=call,
            batching=batching,
            merge=pooling.merge_pool,
        )
        return self._counted(token_classification(inputs, encodings, pooled, local, params))

    def reward(
        self,
        messages: Sequence[Mapping[str, Any]] | Sequence[Sequence[Mapping[str, Any]]],
        *,
        kind: RewardModelKind = "auto",
        use_activation: bool = False,
        concurrency: Concurrency = defaults.CONCURRENCY,
        show_progress: bool = False,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> RewardResult:
        """Score conversations with a reward model (``POST /pooling`` with ``messages``).

        Each conversation goes through the server's chat template (no generation prompt, vLLM's default
        on ``/pooling``), one request each. A sequence (outcome) reward model (Skywork-Reward-V2, any
        ``*ForSequenceClassification``; ``classify`` active) gives one value per conversation; a token
        reward model (InternLM2-Reward, ``Qwen2ForRewardModel``) or a process reward model
        (``Qwen2ForProcessRewardModel``, ``STEP`` pooling; ``token_classify`` active) one row per token or
        step.

        Args:
            messages: one conversation (a list of chat messages, ``{"role", "content"}``) or a list of them.
            kind: ``"auto"`` (the server's active pooling task decides; vLLM >= 0.19), ``"sequence"``
                (sends ``task="classify"``) or ``"token"`` (``task="token_classify"``).
            use_activation: False (the default) returns the reward head's raw output, as the model's own
                code does; True applies the server's activation (sigmoid for one label, softmax over a
                process reward model's labels).
            concurrency: requests in flight, or ``"auto"``: a limit tuned from the answers' latencies.
            show_progress: draw a progress bar (needs tqdm: ``vllm-tasks[progress]``).
            model: the served model (default: the client's, else the server's first).
            extra_body: extra JSON fields merged into every request (``chat_template``,
                ``chat_template_kwargs``, ``add_generation_prompt``, ...).
            extra_headers: extra headers for this call.
            timeout: per-request timeout (default: the client's).

        Returns:
            RewardResult: ``.scores`` (one reward per conversation, for one-label models), ``.rewards``
            (the arrays), ``.kind``.

        Raises:
            InvalidInputError: bad arguments or an empty conversation (before any request).
            UnsupportedByServer: ``kind="auto"`` on vLLM < 0.19.0, any kind on vLLM < 0.12.0 (before any
                request).
            BadRequestError: ``kind`` names a task the server does not run (vLLM: "Try switching the model's
                pooling_task"), or the model has no chat template.
            UnexpectedResponse: the answer's granularity is not the ``kind`` asked for.

        Examples:
            >>> chat = [{"role": "user", "content": "2 + 2?"}, {"role": "assistant", "content": "4"}]
            >>> (client.reward(chat)).score
            3.03
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        params = RewardParams(kind=kind, use_activation=use_activation)
        prompts, _ = media_inputs(self._transport, "messages", pooling.pool_prompts, None, messages, None)
        info = self.server_info()
        require_reward(info, params.kind)
        wire_format = pooling.pool_wire_format(info, "auto")
        pooled = self._pool(
            "/pooling",
            "pooling",
            prompts,
            {**params.fields(), "encoding_format": wire_format},
            call=call,
            batching=Batching(1, concurrency, show_progress),
            merge=pooling.merge_pool,
            conversations=True,
        )
        return self._counted(reward_result(pooled, params.kind))

    def _pool(
        self,
        path: str,
        task: TaskName,
        prompts: list[Any],
        fields: Mapping[str, Any],
        *,
        call: CallOptions,
        batching: Batching,
        merge: Callable[[list[httpx.Response], list[range], str | None], T],
        conversations: bool = False,
    ) -> T:
        """Send ``prompts`` (texts, token ids or, with ``conversations``, chat-style conversations) to
        ``/classify`` or ``/pooling`` in batches and ``merge`` the answers."""
        info = self.server_info()
        if fields.get("use_activation") is not None:
            gates.require(info, ["use_activation"])
        name = resolve_model(info, call.model, self.model)
        batch_size, max_bytes = batching.caps(len(prompts), defaults.SCORE_MAX_REQUEST_BYTES)
        requests, batches = pooling.plan_pooling_requests(
            path,
            task,
            prompts,
            {"model": name, **fields},
            call,
            batch_size=batch_size,
            conversations=conversations,
            max_bytes=max_bytes,
        )
        responses = self._send_batches(
            requests,
            concurrency=batching.concurrency,
            counts=[len(batch) for batch in batches],
            show_progress=batching.show_progress,
            description=path.strip("/"),
        )
        if sum(len(response.content) for response in responses) > defaults.OFFLOAD_DECODE_BYTES:
            return sync_offload(merge, responses, batches, name)
        return merge(responses, batches, name)
