"""The registry of every public entry point, and how the harness attacks each.

``public_names()`` is computed by introspection: the public methods of ``vt.Client``/``vt.AsyncClient``, the
functions and the public methods of the classes in ``vt.__all__``, ``vllm_tasks.jobs.__all__`` and
``vllm_tasks.types.__all__`` (methods defined in vllm_tasks only: pydantic's, ``str``'s and ``Enum``'s own are
not the SDK's), the integrations' classes (the Ray callables by their ``__call__``) and functions (the Spark
UDF factories), and the CLI's subcommands. ``tests/unit/test_hostile_registry.py`` fails when a public name
is not in :data:`REGISTRY`, or when the registry names something that no longer exists.

Not scanned, on purpose:
- dunder and private names (``__init__``, ``_parse``): not entry points;
- ``vllm_tasks.testing``: the test kit itself (it *is* the hostile server);
- exception classes' methods (``__reduce__``, ``__str__``): raised by the SDK, not called by users;
- properties (``.vector``, ``.indices``): plain views of fields, attacked through the calls that make them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import inspect
import io
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

import vllm_tasks as vt
import vllm_tasks.jobs
import vllm_tasks.types
from vllm_tasks import cli
from vllm_tasks.testing import EMBEDDING_TASKS, LISTWISE_TASKS, OCR_TASKS, FakeVLLM, token_classifier_files

from .answers import BODY_CASES, ROW_CASES, TRANSIENT_CASES, VECTOR_CASES, WS_CASES
from .run import afinished, finished

INTEGRATIONS = ("langchain", "lancedb", "llama_index", "ray", "daft", "spark")

SERVERS: dict[str, dict[str, Any]] = {
    "all": {},
    "ocr": {"model": "deepseek-ocr", "tasks": OCR_TASKS},
    "sparse": {"tasks": EMBEDDING_TASKS, "sparse": True, "width": 1000},
    "lexical": {"tasks": frozenset({"embed", "embed_v2", "pooling"}), "lexical": True, "width": 64},
    "listwise": {"tasks": LISTWISE_TASKS, "scorer": "listwise", "width": 64},
    "late": {"tasks": EMBEDDING_TASKS, "scorer": "late-interaction", "width": 16},
    "aligner": {"aligner": True, "width": 500},
    # classifiers (token_classify; multi-label classify)
    "ner": {"token_classifier": True, "labels": ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")},
    "multilabel": {"multi_label": True, "labels": ("sports", "politics", "science", "arts")},
    "reward": {"reward": "sequence"},
    "token-reward": {"reward": "token"},
}
"""The FakeVLLM servers the entries run against, by name (one of each per test module)."""


@contextlib.contextmanager
def started_servers() -> Iterator[dict[str, FakeVLLM]]:
    """One started FakeVLLM per :data:`SERVERS` entry, stopped afterwards."""
    servers = {name: FakeVLLM(**settings).start() for name, settings in SERVERS.items()}
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()


# ------------------------------------------------------------------------------------- public names


def _defined_here(value: Any) -> bool:
    function = getattr(value, "__func__", value)
    return callable(function) and str(getattr(function, "__module__", "")).startswith("vllm_tasks")


def _methods(cls: type) -> list[str]:
    """``cls``'s public methods (class and static included, properties not) defined in vllm_tasks."""
    names = []
    for name in dir(cls):
        if name.startswith("_"):
            continue
        static = inspect.getattr_static(cls, name)
        if isinstance(static, property | functools.cached_property):
            continue
        if _defined_here(getattr(cls, name, None)):
            names.append(name)
    return names


def _module_names(module: ModuleType, prefix: str) -> Iterator[str]:
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value):
            if issubclass(value, BaseException):
                continue
            yield from (f"{prefix}{name}.{method}" for method in _methods(value))
            if callable(inspect.getattr_static(value, "__call__", None)) and "__call__" in value.__dict__:
                yield f"{prefix}{name}.__call__"
        elif inspect.isfunction(value):
            yield f"{prefix}{name}"


def cli_commands() -> list[str]:
    parser = cli.build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return [f"cli {name}" for action in actions for name in action.choices]


def public_names() -> set[str]:
    """Every public entry point, by the name the registry files it under."""
    names = set(_module_names(vt, ""))
    job_names = _module_names(vllm_tasks.jobs, "jobs.")
    names |= {name for name in job_names if name.split(".")[1] not in vt.__all__}  # vt re-exports the fronts
    names |= set(_module_names(vllm_tasks.types, "types."))
    for integration in INTEGRATIONS:
        module = __import__(f"vllm_tasks.integrations.{integration}", fromlist=["__all__"])
        names |= set(_module_names(module, f"integrations.{integration}."))
    return names | set(cli_commands())


def resolve(name: str) -> Any:
    """The object a registry name stands for (raises when it no longer exists)."""
    if name.startswith("cli "):
        if name not in cli_commands():
            raise LookupError(name)
        return name
    parts = name.split(".")
    module: Any = vt
    if parts[0] in ("jobs", "types"):
        module, parts = getattr(vt, parts[0]), parts[1:]
    elif parts[0] == "integrations":
        module = __import__(f"vllm_tasks.integrations.{parts[1]}", fromlist=["__all__"])
        parts = parts[2:]
    value = module
    for part in parts:
        value = getattr(value, part)
    return value


# -------------------------------------------------------------------------------------------- calls


@dataclass
class Env:
    """Where one call runs: its FakeVLLM (``None`` for a call without a server) and a fresh folder."""

    fake: FakeVLLM | None
    tmp: Path

    @property
    def url(self) -> str:
        assert self.fake is not None, "this call has no server"
        return self.fake.url

    def settings(self) -> vt.ClientSettings:
        return vt.ClientSettings(self.url, max_retries=2, timeout=10.0)

    def client(self) -> vt.Client:
        return vt.Client.from_settings(self.settings())

    def aclient(self) -> vt.AsyncClient:
        return vt.AsyncClient.from_settings(self.settings())


@dataclass(frozen=True)
class Call:
    """One way the harness calls an entry point.

    Attributes:
        run: makes the call in ``Env`` and returns what it gave (a comparable value).
        server: the :data:`SERVERS` entry it runs against (``None``: no server, a pure conversion).
        cases: the hostile answers (``answers.ANSWER_CASES``) it is attacked with; the right result is the
            same call's on a clean server.
        label: tells several calls of one entry apart.
        check: for a hostile-input call (``cases`` empty): whether a returned value is right (an error
            of ``errors`` is always accepted).
        errors: the typed errors accepted.
        accepts: for a call whose result reports what the server said (``probe``, ``scorer_kind``): given
            the clean result, whether another result is right after a broken (not transient) answer.
    """

    run: Callable[[Env], Any]
    server: str | None = "all"
    cases: tuple[str, ...] = ()
    label: str = ""
    check: Callable[[Any], bool] | None = None
    errors: tuple[type[BaseException], ...] = (vt.VLLMTasksError,)
    accepts: Callable[[Any], Callable[[Any], bool]] | None = None


CLIENT_CASES = VECTOR_CASES + ROW_CASES + BODY_CASES + TRANSIENT_CASES
REGISTRY: dict[str, list[Call]] = {}
"""Every public entry point's calls. An empty list: nothing hostile reaches it, the comment says why."""


def register(name: str, *calls: Call) -> None:
    REGISTRY.setdefault(name, []).extend(calls)


def client_twins(
    method: str,
    invoke: Callable[[Callable[..., Any], Env], Any],
    *,
    server: str = "all",
    cases: Sequence[str] = CLIENT_CASES,
    label: str = "",
    check: Callable[[Any], Callable[[Any], bool]] | None = None,
) -> None:
    """Register ``Client.method`` and ``AsyncClient.method`` with the same call (``invoke(bound, env)``);
    the async twin gets the cases of :data:`ASYNC_CASES` among ``cases``."""

    def sync(env: Env) -> Any:
        with env.client() as client:
            return finished(invoke(getattr(client, method), env))

    def run_async(env: Env) -> Any:
        async def go() -> Any:
            async with env.aclient() as client:
                return await afinished(invoke(getattr(client, method), env))

        return asyncio.run(go())

    register(f"Client.{method}", Call(sync, server, tuple(cases), label, accepts=check))
    twin_cases = tuple(case for case in cases if case in ASYNC_CASES)
    if twin_cases:  # a call with no cases would be taken for a hostile input's
        register(f"AsyncClient.{method}", Call(run_async, server, twin_cases, label, accepts=check))


@functools.cache
def png(shade: int = 255) -> bytes:
    """A 64x48 grey PNG (white by default; another ``shade`` for another image)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (shade, shade, shade)).save(buffer, format="PNG")
    return buffer.getvalue()


@functools.cache
def pdf() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), "white").save(buffer, format="PDF")
    return buffer.getvalue()


@functools.cache
def wav() -> bytes:
    return (Path(__file__).resolve().parents[1] / "data" / "audio" / "fox.wav").read_bytes()


class Reference:
    """A verify() reference that agrees with FakeVLLM's model."""

    prompts: Mapping[str, str] = {}
    pooling = "lasttoken"
    normalizes = True
    max_tokens: int | None = 512

    def __init__(self, fake: FakeVLLM) -> None:
        self.fake = fake

    def encode(self, texts: Sequence[str], prompt_name: str | None = None) -> npt.NDArray[Any]:
        return np.stack([self.fake.vector(text) for text in texts])

    def pooled(self, texts: Sequence[str]) -> dict[str, npt.NDArray[Any]]:
        other = -np.stack([self.fake.vector(text + " other") for text in texts])
        return {"mean": other, "cls": other}


TEXTS = ["hello world", "second text here", "a third one"]
LONG_TEXT = " ".join(f"w{i}" for i in range(600))
CHAT = [{"role": "user", "content": "what is two plus two"}, {"role": "assistant", "content": "four"}]
PLAIN = BODY_CASES + TRANSIENT_CASES
"""The cases of every call: broken bodies and transient failures."""
NUMBERS = ("nan", "inf", *PLAIN)
UNINDEXED = (*NUMBERS, "width", "row-missing")
"""Rows without an ``index`` (``/v2/embed``'s lists): a duplicate or a new order cannot be told from the
answer."""
SCORES = tuple(case for case in CLIENT_CASES if case != "width")
ASYNC_CASES = frozenset({"transient", "truncated", "nan", "row-missing", "ws-truncated", "ws-dropped"})
"""The async twin runs the same generated code as the sync one but for the I/O backend: it gets one case
of each family (the whole set runs on the sync twin), to keep the harness inside its time budget."""


def server_report(clean: Any) -> Callable[[Any], bool]:
    """A probe's answer to a broken answer: a report of what the server said (any report)."""
    return lambda value: isinstance(value, vt.types.ProbeReport)


def kind_or_unknown(clean: Any) -> Callable[[Any], bool]:
    """A scorer kind read from a broken answer: the clean one, or UNKNOWN (never another kind)."""
    return lambda value: value in (clean, vt.types.ScorerKind.UNKNOWN)


client_twins("embed", lambda m, env: m(TEXTS))
client_twins("embed", lambda m, env: m(images=[png(), png()]), label="images")
client_twins("embed_v2", lambda m, env: m(TEXTS), cases=UNINDEXED)
client_twins("embed_sparse", lambda m, env: m(TEXTS), server="sparse")
client_twins("embed_sparse", lambda m, env: m(TEXTS), server="lexical", label="lexical")
client_twins("score", lambda m, env: m("query", ["a doc", "b doc"]), cases=SCORES)
client_twins("rerank", lambda m, env: m("query", ["a doc", "b doc", "c"]), cases=SCORES)
client_twins("rerank", lambda m, env: m("query", ["a doc", "b doc", "c"], batch_size=1), server="listwise",
             label="listwise", cases=SCORES)  # fmt: skip
client_twins("classify", lambda m, env: m(["good", "bad"]))
# classifiers: a multi-label model's labels over the threshold; entities from per-token label scores, the
# tokenizer matching the fake's written into the call's folder
client_twins("classify", lambda m, env: m(["good", "bad"], top_k=2), server="multilabel", label="multi-label")
NER_TEXTS = ["Ada Lovelace lived in London.", "Paris is big."]


def ner_tokenizer(env: Env) -> Path:
    return token_classifier_files(env.tmp / "ner", NER_TEXTS, SERVERS["ner"]["labels"])


client_twins("token_classify", lambda m, env: m(NER_TEXTS, tokenizer=ner_tokenizer(env)), server="ner")
client_twins("token_classify", lambda m, env: m(NER_TEXTS, aggregation="first", tokenizer=ner_tokenizer(env)),
             server="ner", label="first")  # fmt: skip
client_twins("pool", lambda m, env: m(["hello world", "x"]), server="late")
# one input a request: the second answer is the second batch, the one made wider
client_twins("pool", lambda m, env: m(["hello world", "x"], batch_size=1), server="late", label="batches",
             cases=("batch-wider",))  # fmt: skip
# long inputs: /tokenize answers, then the windows of the over-long text as token ids and the short ones
client_twins("embed", lambda m, env: m([TEXTS[0], LONG_TEXT], long_inputs="split_mean"), label="split-mean")
# reward models: one conversation a request (one row an answer: no row to drop, repeat or reorder), a value
# (sequence) or one row per token (token) each; the second answer made wider must not pass
client_twins("reward", lambda m, env: m([CHAT, CHAT[:1]]), server="reward", cases=(*NUMBERS, "batch-wider"))
client_twins("reward", lambda m, env: m([CHAT, CHAT[:1]]), server="token-reward", label="token",
             cases=(*NUMBERS, "batch-wider"))  # fmt: skip
client_twins("tokenize", lambda m, env: m("hello world"), cases=PLAIN)
client_twins("detokenize", lambda m, env: m([1, 2, 3]), cases=PLAIN)
client_twins("transcribe", lambda m, env: m(wav()), cases=PLAIN)
# segments carry no index: one missing or twice cannot be told from the answer
client_twins("transcribe", lambda m, env: m(wav(), response_format="verbose_json"), cases=NUMBERS,
             label="verbose")  # fmt: skip
# one binary answer of one per-token matrix: no second row or item to drop, repeat or narrow (too few or
# too many rows: tests/component/test_align_answers.py)
client_twins("align", lambda m, env: m(wav(), "the quick brown fox jumps"), server="aligner", cases=NUMBERS)
# the server aligns its own transcript: the aligner is the transcribing client itself
client_twins("transcribe", lambda m, env: m(wav(), response_format="verbose_json", aligner=m.__self__),
             server="aligner", label="aligner", cases=NUMBERS)  # fmt: skip
# voice activity detection first: the answer's segment times are mapped back onto the recording
VAD = vt.transcription.ChunkingOptions(vad=vt.transcription.VadOptions(detector="energy"))
client_twins("transcribe", lambda m, env: m(wav(), response_format="verbose_json", chunking=VAD),
             cases=NUMBERS, label="vad")  # fmt: skip
client_twins("translate", lambda m, env: m(wav()), cases=PLAIN)
client_twins("transcribe_stream", lambda m, env: m(wav()), cases=PLAIN)
client_twins("translate_stream", lambda m, env: m(wav()), cases=PLAIN)
# the audio goes out over the /v1/realtime WebSocket: its handshake gets the transient statuses, its session
# the hostile servers of WS_CASES
client_twins("transcribe_realtime", lambda m, env: m(wav()), cases=TRANSIENT_CASES + WS_CASES)
client_twins("ocr", lambda m, env: m(png()), server="ocr", cases=PLAIN)
client_twins("ocr_pdf", lambda m, env: m(pdf()), server="ocr", cases=PLAIN)
client_twins("check_ngram_processor", lambda m, env: m(), server="ocr", cases=TRANSIENT_CASES)
client_twins("probe", lambda m, env: m(), cases=NUMBERS, check=server_report)
client_twins("server_info", lambda m, env: m(), cases=PLAIN)
client_twins("scorer_kind", lambda m, env: m(), cases=NUMBERS, check=kind_or_unknown)
UNORDERED = tuple(case for case in CLIENT_CASES if case != "rows-reordered")
client_twins("scorer_kind", lambda m, env: m(), server="listwise", label="listwise", cases=UNORDERED,
             check=kind_or_unknown)  # fmt: skip
client_twins("wait_until_ready", lambda m, env: m(5.0, interval=0.01), cases=TRANSIENT_CASES)
client_twins("verify", lambda m, env: m(Reference(env.fake), texts=TEXTS))  # type: ignore[arg-type]

# Local to the client: they send nothing (the calls they make are the entries above).
for _method in ("close", "with_options", "from_settings"):
    register(f"Client.{_method}")
    register(f"AsyncClient.{_method}")


def size() -> tuple[int, int]:
    """(calls, attacks): the registry's calls, and the (call, case) pairs the harness runs."""
    calls = [call for calls in REGISTRY.values() for call in calls]
    return len(calls), sum(len(call.cases) or 1 for call in calls)


from . import inputs, integrations, jobs  # noqa: E402, F401  (they register their calls)
