"""``classify``, ``pool`` and ``reward`` of the asynchronous client: ``/classify`` and ``/pooling``.

The pure parts (input checks, planning, merging, ``maxsim``) are in ``vllm_tasks.pooling``;
``vllm_tasks/_sync/pooling.py`` is generated from this file by ``scripts/unasync.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from .. import defaults, gates, pooling
from ..adaptive import Concurrency
from ..calls import CLIENT_DEFAULT, Batching, CallOptions, TimeoutLike, resolve_model
from ..offload import async_offload
from ..pooling import PoolEncodingFormat
from ..reward import RewardModelKind, RewardParams, require_reward, reward_result
from ..tasks import TaskName
from ..types.reward import RewardResult
from ..types.scoring import ClassificationResult, PoolingResult
from .base import AsyncClientBase
from .fetching import media_inputs

T = TypeVar("T")


class AsyncPoolingMethods(AsyncClientBase):
    """``classify``, ``pool``, ``reward``: ``/classify``, ``/pooling``."""

    async def classify(
        self,
        input: Any,
        *,
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
            ClassificationResult: ``.labels``, ``.probs`` (``ndarray[n, num_classes]``), ``.num_classes``.

        Raises:
            InvalidInputError: bad arguments (before any request).
            EndpointNotServed: the model does not serve ``/classify``.
            BadRequestError: token ids sent to an early ``/classify`` that read text only
                (``input: list[str] | str`` before its completion-style request form).

        Examples:
            >>> (await client.classify(["great!", "awful"])).labels
            ['positive', 'negative']
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        batching = Batching(batch_size, concurrency, show_progress)
        params = pooling.ClassifyParams(
            use_activation=use_activation, truncate_prompt_tokens=truncate_prompt_tokens
        )
        prompts = pooling.pool_inputs(input)
        return self._counted(
            await self._pool(
                "/classify",
                "classify",
                prompts,
                params.fields(),
                call=call,
                batching=batching,
                merge=pooling.merge_classify,
            )
        )

    async def pool(
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
            >>> (await client.pool("hello world")).data[0].shape
            (384,)
            >>> (await client.pool(images=[Path("page.png")])).data[0].shape  # ColPali: patches + prompt
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
        if images is None and messages is None:
            prompts, conversations = pooling.pool_prompts(input, messages, images)
        else:
            field = "images" if images is not None else "messages"
            prompts, conversations = await media_inputs(
                self._transport, field, pooling.pool_prompts, input, messages, images
            )
        wire_format = pooling.pool_wire_format(await self.server_info(), params.encoding_format)
        return self._counted(
            await self._pool(
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

    async def reward(
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
            >>> (await client.reward(chat)).score
            3.03
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        params = RewardParams(kind=kind, use_activation=use_activation)
        prompts, _ = await media_inputs(
            self._transport, "messages", pooling.pool_prompts, None, messages, None
        )
        info = await self.server_info()
        require_reward(info, params.kind)
        wire_format = pooling.pool_wire_format(info, "auto")
        pooled = await self._pool(
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

    async def _pool(
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
        info = await self.server_info()
        if fields.get("use_activation") is not None:
            gates.require(info, ["use_activation"])
        name = resolve_model(info, call.model, self.model)
        requests, batches = pooling.plan_pooling_requests(
            path,
            task,
            prompts,
            {"model": name, **fields},
            call,
            batch_size=batching.batch_size,
            conversations=conversations,
        )
        responses = await self._send_batches(
            requests,
            concurrency=batching.concurrency,
            counts=[len(batch) for batch in batches],
            show_progress=batching.show_progress,
            description=path.strip("/"),
        )
        if sum(len(response.content) for response in responses) > defaults.OFFLOAD_DECODE_BYTES:
            return await async_offload(merge, responses, batches, name)
        return merge(responses, batches, name)
