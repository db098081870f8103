"""Hostile inputs: paths that are not regular files (FIFO, ``/dev/zero`` and a symlink to it, a directory),
names with NUL bytes, undecodable bytes or over NAME_MAX, a huge (sparse) file, ``data:`` URLs of the wrong
type, private addresses in several spellings, and result objects holding what a server should never send
(NaN, negative ids, a dimension below an index, a 0-token matrix, markup in cue text).

Each is registered as a :class:`Call` with no answer cases: its ``check`` says whether a returned value is
right (``None``: only a typed error is).
"""

# ruff: noqa: PLW0108  (the lambdas build each hostile object inside the judged call, not at import)
from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pydantic

import vllm_tasks as vt
from vllm_tasks._backends import SyncBackend
from vllm_tasks.types import (
    Alignment,
    OCRBlock,
    OCRResult,
    PoolingResult,
    ProbeReport,
    RerankHit,
    RerankResult,
    ScoreResult,
    ScorerKind,
    ServerInfo,
    ServerVersion,
    SparseEmbeddingResult,
    SparseVector,
    TaskStatus,
    Transcription,
    TranscriptionSegment,
    TranscriptionWord,
    Usage,
)

from .registry import TEXTS, Call, Env, png, register

TYPED = (vt.VLLMTasksError,)
BUILT = (vt.VLLMTasksError, pydantic.ValidationError)
"""Errors accepted where the hostile value is a result object built by hand: its constructor's validation
error is the documented refusal."""

# ------------------------------------------------------------------------------------- hostile paths


def fifo(tmp: Path) -> Path:
    path = tmp / "pipe.png"
    os.mkfifo(path)
    return path


def dev_zero_link(tmp: Path) -> Path:
    path = tmp / "zero.png"
    path.symlink_to("/dev/zero")
    return path


def directory(tmp: Path) -> Path:
    path = tmp / "folder.png"
    path.mkdir()
    return path


def huge(tmp: Path) -> Path:
    """A 4 GiB file that uses no disk (sparse): a PNG header, then holes."""
    path = tmp / "huge.png"
    path.write_bytes(png()[:64])
    os.truncate(path, 4 << 30)
    return path


def release(tmp: Path) -> None:
    """Wake a call stuck opening or reading a FIFO under ``tmp`` (a writer opens and closes it: EOF)."""
    for path in tmp.rglob("*"):
        if path.is_fifo():
            with contextlib.suppress(OSError):
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


HOSTILE_PATHS: dict[str, Callable[[Path], Any]] = {
    "fifo": fifo,
    "dev-zero": lambda tmp: "/dev/zero",
    "dev-zero-link": dev_zero_link,
    "directory": directory,
    "nul-byte": lambda tmp: str(tmp / "a\x00b.png"),
    "non-utf8-name": lambda tmp: os.fsdecode(bytes(tmp) + b"/\xff\xfe.png"),
    "over-name-max": lambda tmp: tmp / ("n" * 300 + ".png"),
    "huge-sparse-file": huge,
}
"""Image or audio paths no entry point may hang on, read whole, or fail on untyped."""

WRONG_DATA_URLS = {
    "data-text-plain": "data:text/plain;base64," + "aGVsbG8gd29ybGQ=",
    "data-html": "data:text/html,<script>alert(1)</script>",
    "data-not-base64": "data:image/png;base64,@@@not-base64@@@",
}
PRIVATE_URLS = {
    "loopback": "http://127.0.0.1/a.png",
    "loopback-decimal": "http://2130706433/a.png",
    "loopback-hex": "http://0x7f.0.0.1/a.png",
    "loopback-v6": "http://[::1]/a.png",
    "v4-mapped": "http://[::ffff:127.0.0.1]/a.png",
    "nat64": "http://[64:ff9b::7f00:1]/a.png",
    "6to4": "http://[2002:7f00:1::]/a.png",
    "metadata": "http://169.254.169.254/latest/meta-data",
    "private-10": "http://10.0.0.1/a.png",
    "localhost": "http://localhost/a.png",
    "zero": "http://0.0.0.0/a.png",
}
"""User-given URLs that ``FetchLimits(refuse_private=True)`` must refuse, in several spellings."""


def refused(value: Any) -> bool:
    """No returned value is right: only a typed error is."""
    return False


# --------------------------------------------------------------------------------- result objects


def sparse(indices: list[int], values: list[float], dimension: int | None = None) -> SparseEmbeddingResult:
    vector = SparseVector(indices=np.array(indices, np.int64), values=np.array(values, np.float32))
    return SparseEmbeddingResult(vectors=[vector], dimension=dimension, model="m", usage=Usage())


def pooling(*rows: Any) -> PoolingResult:
    return PoolingResult(data=[np.asarray(row, np.float32) for row in rows], model="m", usage=Usage())


def transcription(text: str, start: float = 0.0, end: float = 1.0) -> Transcription:
    segment = TranscriptionSegment(id=0, start=start, end=end, text=text)
    return Transcription(text=text, segments=[segment], task="transcribe", response_format="verbose_json")


MARKUP = "<b>fish & chips</b> --> <script>alert(1)</script>"


def escaped(text: str) -> bool:
    """Cue or page text shown as text: no live tag, no bare ``-->`` or ``&`` from the input."""
    return "<script>alert" not in text and "<b>fish" not in text and "fish & chips" not in text


def finite_numbers(value: Any) -> bool:
    array = np.asarray(value, np.float64)
    return bool(np.isfinite(array).all())


def strict_json(text: str) -> bool:
    def refuse(constant: str) -> Any:
        raise ValueError(constant)

    try:
        json.loads(text, parse_constant=refuse)
    except ValueError:
        return False
    return True


def no_nan_text(text: str) -> bool:
    return "nan" not in text.lower().replace("nano", "")


def empty_probe() -> ProbeReport:
    return ProbeReport(server=ServerInfo(base_url="http://x", models=()), tasks=(), advisories=())


def conversion(name: str, label: str, run: Callable[[], Any], check: Callable[[Any], bool] = refused) -> None:
    register(f"types.{name}", Call(lambda env: run(), None, label=label, check=check, errors=BUILT))


ocr_result = OCRResult(
    text=MARKUP,
    markdown=MARKUP,
    blocks=[OCRBlock(label="image", text=MARKUP, boxes=[(-50, -50, 10**6, 10**6)], boxes_normalized=[])],
    usage=Usage(),
    model="m",
    prompt="p",
    finish_reason="stop",
    truncated=False,
    image_size=(64, 48),
    sent_size=(64, 48),
)

# sparse vectors: an index past the dimension, negative ids, NaN weights
conversion(
    "SparseEmbeddingResult.to_scipy",
    "dimension-below-an-index",
    lambda: sparse([5, 30000], [1, 2]).to_scipy(100),
)
conversion("SparseEmbeddingResult.to_scipy", "dimension-zero", lambda: sparse([5], [1]).to_scipy(0))
conversion(
    "SparseEmbeddingResult.to_dense",
    "dimension-below-an-index",
    lambda: sparse([5, 30000], [1, 2]).to_dense(100),
)
conversion("SparseEmbeddingResult.to_dense", "negative-dimension", lambda: sparse([5], [1]).to_dense(-1))
conversion("SparseEmbeddingResult.to_milvus", "negative-ids", lambda: sparse([-3, 2], [1, 2]).to_milvus())
conversion(
    "SparseEmbeddingResult.to_qdrant", "nan-weights", lambda: sparse([1, 2], [math.nan, 2]).to_qdrant()
)
conversion("SparseVector.to_dict", "negative-ids", lambda: sparse([-1, 2], [1, 2]).vectors[0].to_dict())
conversion(
    "SparseVector.to_milvus", "nan-weights", lambda: sparse([1, 2], [math.nan, 1]).vectors[0].to_milvus()
)
conversion(
    "SparseVector.to_qdrant", "inf-weights", lambda: sparse([1, 2], [math.inf, 1]).vectors[0].to_qdrant()
)
# per-token matrices: no tokens, ragged, a zero vector
conversion("PoolingResult.mean", "zero-tokens", lambda: pooling(np.zeros((0, 4))).mean(), finite_numbers)
conversion("PoolingResult.mean", "ragged", lambda: pooling(np.ones((3, 4)), np.ones((2, 5))).mean())
conversion("PoolingResult.normalized", "zero-vector", lambda: pooling(np.zeros((2, 4))).normalized().data,
           finite_numbers)  # fmt: skip
# transcripts: NaN and negative times, markup in cue text
conversion(
    "Transcription.to_srt", "nan-times", lambda: transcription("hi", math.nan, 1.0).to_srt(), no_nan_text
)
conversion("Transcription.to_srt", "negative-times", lambda: transcription("hi", -5.0, -1.0).to_srt(),
           lambda text: "-0" not in text and "--:" not in text)  # fmt: skip
conversion("Transcription.to_vtt", "markup", lambda: transcription(MARKUP).to_vtt(), escaped)
conversion(
    "Transcription.to_vtt", "nan-times", lambda: transcription("hi", 0.0, math.nan).to_vtt(), no_nan_text
)
conversion("Transcription.to_json", "nan-times", lambda: transcription("hi", math.nan).to_json(), strict_json)
conversion("Transcription.to_html", "markup", lambda: transcription(MARKUP).to_html(), escaped)
conversion(
    "Transcription.formatted", "nan-times", lambda: transcription("hi", math.nan).formatted(), no_nan_text
)
conversion(
    "Transcription.to_text", "markup", lambda: transcription(MARKUP).to_text(), lambda text: MARKUP in text
)
# pages and rankings shown as HTML: markup in text, NaN scores
conversion("OCRResult.to_html", "markup", ocr_result.to_html, escaped)
conversion("RerankResult.to_html", "markup-and-nan", lambda: RerankResult(
    results=[RerankHit(index=0, score=math.nan, document=MARKUP)], model="m", scorer=ScorerKind.CROSS_ENCODER,
    usage=Usage(), num_requests=1).to_html(), escaped)  # fmt: skip
conversion("ScoreResult.to_html", "nan", lambda: ScoreResult(
    scores=np.array([math.nan]), model="<script>", scorer=ScorerKind.CROSS_ENCODER, usage=Usage()).to_html(),
    escaped)  # fmt: skip
conversion("ScoreResult.keep_inputs", "lengths-differ", lambda: ScoreResult(
    scores=np.array([0.5, 0.2]), model="m", scorer=ScorerKind.CROSS_ENCODER, usage=Usage()
).keep_inputs(["q"], ["a", "b", "c"], "one-to-many"))  # fmt: skip
conversion("EmbeddingResult.to_html", "nan", lambda: vt.types.EmbeddingResult(
    vectors=np.array([[math.nan, 1.0]], np.float32), model="<script>", usage=Usage(), encoding_format="float"
).to_html(), escaped)  # fmt: skip
conversion("ProbeReport.status", "unknown-task", lambda: empty_probe().status("no-such-task"),
           lambda value: isinstance(value, TaskStatus))  # fmt: skip
conversion("ProbeReport.to_html", "empty", lambda: empty_probe().to_html(),
           lambda value: isinstance(value, str))  # fmt: skip
conversion(
    "ServerInfo.model_card",
    "unknown-model",
    lambda: ServerInfo(base_url="http://x", models=()).model_card("nope"),
)
conversion("ServerInfo.serves_route", "traversal", lambda: ServerInfo(
    base_url="http://x", models=(), routes=frozenset({"/v1/models"})).serves_route("/../v1/models\x00"),
    lambda value: value in (False, None))  # fmt: skip
conversion("ServerVersion.parse", "garbage", lambda: ServerVersion.parse("v\x00-💥-1e999"),
           lambda value: isinstance(value, ServerVersion) and not value.known)  # fmt: skip
conversion("ServerVersion.at_least", "garbage", lambda: ServerVersion.parse("0.11").at_least("not-a-version"),
           lambda value: value is False)  # fmt: skip
conversion("ServerVersion.sort_key", "unknown", lambda: ServerVersion.parse("").sort_key(),
           lambda value: isinstance(value, tuple))  # fmt: skip


register(
    "maxsim",
    Call(lambda env: vt.maxsim(["a", "b"], ["c"]), None, label="strings", check=refused),
    Call(lambda env: vt.maxsim([[math.nan, 1.0]], [[1.0, 0.0]]), None, label="nan", check=refused),
    Call(lambda env: vt.maxsim(np.ones((2, 3)), np.ones((2, 4))), None, label="widths-differ", check=refused),
    Call(
        lambda env: vt.maxsim(np.ones((0, 3)), np.ones((2, 3))), None, label="no-query-tokens", check=refused
    ),
)
register(
    "unpackbits",
    Call(lambda env: vt.unpackbits(np.array([[0.5, 1.5]])), None, label="floats", check=refused),
    Call(lambda env: vt.unpackbits(np.array([[-1, 300]])), None, label="out-of-byte-range", check=refused),
)

# ---------------------------------------------------------------------------- paths given to results


def _path_calls(name: str, make: Callable[[Path], Any]) -> None:
    """``make``'s hostile path given to every entry point that reads an image or audio path."""

    def client(invoke: Callable[[vt.Client, Any], Any], server: str = "all") -> Call:
        def run(env: Env) -> Any:
            with vt.Client.from_settings(env.settings()) as c:
                return invoke(c, make(env.tmp))

        return Call(run, server, label=name, check=refused)

    def local(invoke: Callable[[Any], Any]) -> Call:
        return Call(lambda env: invoke(make(env.tmp)), None, label=name, check=refused, errors=TYPED)

    register("types.OCRResult.crop", local(lambda path: ocr_result.crop(image=path)))
    register("types.OCRResult.draw", local(lambda path: ocr_result.draw(image=path)))
    register("types.Transcription.player", local(lambda path: transcription("hi").player(path)))
    register("Client.embed", client(lambda c, path: c.embed(images=[path])))
    register("Client.rerank", client(lambda c, path: c.rerank("q", [Path(path)])))
    register("Client.ocr", client(lambda c, path: c.ocr(path), "ocr"))
    register("Client.transcribe", client(lambda c, path: c.transcribe(path)))
    register("Client.align", client(lambda c, path: c.align(path, "hello there"), "aligner"))
    register("Client.transcribe_realtime", client(lambda c, path: c.transcribe_realtime(path).until_done()))


for _name, _make in HOSTILE_PATHS.items():
    _path_calls(_name, _make)


def _url_calls(name: str, url: str) -> None:
    """A user-given URL with ``FetchLimits(refuse_private=True)``: refused, never fetched or sent on."""

    def run(invoke: Callable[[vt.Client], Any]) -> Callable[[Env], Any]:
        def call(env: Env) -> Any:
            limits = vt.FetchLimits(refuse_private=True)
            with vt.Client.from_settings(env.settings().replace(fetch_limits=limits)) as c:
                return invoke(c)

        return call

    register("Client.embed", Call(run(lambda c: c.embed(images=[url])), label=name, check=refused))
    document = {"content": [{"type": "image_url", "image_url": {"url": url}}]}
    register("Client.rerank", Call(run(lambda c: c.rerank("q", [document])), label=name, check=refused))
    register("Client.ocr", Call(run(lambda c: c.ocr(url)), "ocr", label=name, check=refused))
    register("Client.transcribe", Call(run(lambda c: c.transcribe(url)), label=name, check=refused))
    register("Client.align", Call(run(lambda c: c.align(url, "hi")), "aligner", label=name, check=refused))
    realtime = run(lambda c: c.transcribe_realtime(url).until_done())
    register("Client.transcribe_realtime", Call(realtime, label=name, check=refused))


for _name, _url in {**PRIVATE_URLS, **WRONG_DATA_URLS}.items():
    _url_calls(_name, _url)

# ------------------------------------------------------------------------------- settings and params

register(
    "ClientSettings.replace",
    Call(lambda env: vt.ClientSettings("http://h").replace(max_retries=-1), None, label="negative-retries",
         check=refused),
    Call(lambda env: repr(vt.ClientSettings("http://h").replace(base_url="http://u:pw@h/?key=s3cr3t")), None,
         label="secret-in-url", check=lambda text: "s3cr3t" not in text and ":pw@" not in text),
)  # fmt: skip
for _params in ("EmbedParams", "EmbedV2Params", "PoolParams", "ClassifyParams", "SparseEmbedParams",
                "RerankParams", "OCRParams", "TranscribeParams"):  # fmt: skip
    _cls = getattr(vt, _params)
    register(f"{_params}.of",
             Call(lambda env, cls=_cls: cls.of({"no_such_field": 1}), None, label="unknown-field",
                  check=refused),
             Call(lambda env, cls=_cls: cls.of(42), None, label="not-a-mapping", check=refused))  # fmt: skip
    # No arguments: views of a params object that `of` (or its constructor) validated.
    for _view in ("changed", "keywords", "fields", "body_fields", "embed_params"):
        if hasattr(_cls, _view):
            register(f"{_params}.{_view}")

register(
    "OCRParams.using",
    Call(lambda env: vt.OCRParams().using("no-such-preset"), None, label="unknown-preset", check=refused),
    Call(lambda env: vt.OCRParams().using(42), None, label="not-a-preset", check=refused),  # type: ignore[arg-type]
    Call(lambda env: vt.OCRParams(preset="generic").using("deepseek-ocr"), None, label="second-preset",
         check=refused),
)  # fmt: skip


def _ocr_pdf_quality(quality: Any) -> Callable[[Env], Any]:
    """``ocr_pdf`` with a page-quality ladder it must refuse before opening the PDF or sending."""

    def call(env: Env) -> Any:
        with vt.Client("http://127.0.0.1:9") as client:
            return client.ocr_pdf(b"not a pdf", quality=quality)

    return call


for _label, _quality in {
    "quality-not-options": 42,
    "quality-unknown-field": {"tries": 3},
    "quality-rate-over-1": {"max_page_error_rate": 2},
    "quality-temperature-text": {"retry_temperatures": "hot"},
    "quality-temperature-nan": {"retry_temperatures": [math.nan]},
}.items():
    register("Client.ocr_pdf", Call(_ocr_pdf_quality(_quality), None, label=_label, check=refused))

# ------------------------------------------------------------------------- after an over-cap wait

PROMPT = 5.0
"""Seconds a call may take after another one on the same client was refused an over-cap wait."""
SLEEP = SyncBackend.sleep
"""The client's own sleep (the component tier's ``no_sleep`` records sleeps instead: a wait the client
held on to would not show)."""


def _after_over_cap(env: Env) -> str:
    """A ``concurrency="auto"`` call answered ``429`` with a ``Retry-After`` past the cap (refused, typed),
    then calls on the same client (another route, then the same one): they must be answered, promptly."""
    assert env.fake is not None
    env.fake.fail(429, path="/v1/embeddings", times=1, retry_after="99999999999")
    with mock.patch.object(SyncBackend, "sleep", SLEEP), vt.Client.from_settings(env.settings()) as client:
        try:
            client.embed(TEXTS, batch_size=1, concurrency="auto")
        except vt.VLLMTasksError:
            pass
        else:
            return "the over-cap wait was not refused"
        finally:
            env.fake.clear_faults()
        start = time.monotonic()
        client.rerank("query", TEXTS, concurrency="auto")
        client.embed(TEXTS, batch_size=1, concurrency="auto")
        elapsed = time.monotonic() - start
    return "prompt" if elapsed < PROMPT else f"answered after {elapsed:.1f} s"


register(
    "Client.embed",
    Call(_after_over_cap, label="after-over-cap-retry-after", check=lambda v: v == "prompt", errors=()),
)

# ------------------------------------------------------------------------------- forced alignment


def _aligned(invoke: Callable[[vt.Client], Any]) -> Callable[[Env], Any]:
    def run(env: Env) -> Any:
        with vt.Client.from_settings(env.settings()) as client:
            return invoke(client)

    return run


_FOX = Path(__file__).resolve().parents[1] / "data" / "audio" / "fox.wav"
_BAD_ALIGN_ARGS: dict[str, Callable[[vt.Client], Any]] = {
    "empty-text": lambda c: c.align(_FOX, ""),
    "punctuation-only": lambda c: c.align(_FOX, "?! ... --"),
    "word-without-letters": lambda c: c.align(_FOX, ["fine", "?!"]),
    "not-text": lambda c: c.align(_FOX, 42),  # type: ignore[arg-type]
    "japanese-one-string": lambda c: c.align(_FOX, "こんにちは世界", language="ja"),
    "unsupported-language": lambda c: c.align(_FOX, "hallo", language="nl"),
    "nan-segment-ms": lambda c: c.align(_FOX, "hi", segment_ms=math.nan),
    "zero-segment-ms": lambda c: c.align(_FOX, "hi", segment_ms=0),
    "silence-only": lambda c: c.align((np.zeros(0, np.float32), 16000), "hi"),
}
for _label, _invoke in _BAD_ALIGN_ARGS.items():
    register("Client.align", Call(_aligned(_invoke), "aligner", label=_label, check=refused))
register(
    "Client.transcribe",
    Call(_aligned(lambda c: c.transcribe(_FOX, aligner=object())), "aligner", label="aligner-not-a-client",  # type: ignore[arg-type]
         check=refused),
)  # fmt: skip


def alignment(word: str, start: float = 0.0, end: float = 1.0) -> Alignment:
    return Alignment(words=[TranscriptionWord(word=word, start=start, end=end)], text=word)


conversion("Alignment.to_srt", "nan-times", lambda: alignment("hi", math.nan).to_srt(), no_nan_text)
conversion("Alignment.to_srt", "negative-times", lambda: alignment("hi", -5.0, -1.0).to_srt(),
           lambda text: "-0" not in text and "--:" not in text)  # fmt: skip
conversion("Alignment.to_vtt", "markup", lambda: alignment(MARKUP).to_vtt(), escaped)
conversion("Alignment.to_vtt", "end-before-start", lambda: alignment("hi", 2.0, 1.0).to_vtt(),
           lambda text: "00:00:02.000 --> 00:00:02.000" in text)  # fmt: skip
_NAN_WORD = TranscriptionWord.model_construct(word="hi", start=math.nan, end=1.0)  # past validation
conversion("Transcription.to_srt", "words-nan-times",
           lambda: transcription("hi").model_copy(update={"words": [_NAN_WORD]}).to_srt(words=True),
           no_nan_text)  # fmt: skip
