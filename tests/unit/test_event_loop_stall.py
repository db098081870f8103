"""``AsyncClient`` keeps the event loop serving while it decodes, resamples and encodes inputs.

A ticker task sleeps 1 ms in a loop while a call runs against a fast fake server (pytest-httpx), and
records what the event loop's thread did between two of its wake-ups: CPU-heavy work done on the event
loop shows up as CPU time of that thread. That measure is the one asserted on because other processes
competing for the CPUs do not move it: a full CI run once descheduled the process for 21-42 ms in every
try (wall-clock gaps), while the same code's gaps were 4-10 ms on a quiet machine. It is not proof
against everything: in one later full run the loop thread itself used 26-93 ms of CPU per gap (4-14 ms
rerun alone right after). The wall-clock gap has a loose limit of its own, for a worker thread that
holds the GIL for long (time the loop waits, not computes).

To add a case: build the inputs, answer the task's requests with :func:`fake_server`, then
``result, tickers = run_with_ticker(lambda client: client.some_call(...))`` and
``assert_responsive(tickers, "what")``.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import numpy as np
from pytest_httpx import HTTPXMock

import vllm_tasks as vt

from ..clients import Ticker
from .conftest import BASE
from .recorded import RECORDED, recorded_json, recorded_response

T = TypeVar("T")

STALL_LIMIT = 0.020
"""The most CPU time the event loop's thread may spend between two ticks (seconds)."""

WALL_LIMIT = 0.250
"""The longest wall-clock gap between two ticks (seconds): a GIL held by a worker for long."""


Answer = Callable[[httpx.Request], httpx.Response]


def fake_server(httpx_mock: HTTPXMock, fixture: str, answer: Answer, *, latency: float = 0.001) -> None:
    """A fast fake vLLM server: discovery as the recorded ``fixture`` answered it, every other request
    by ``answer(request)``, after ``latency`` seconds (a fast local network).

    Answers arrive in a later turn of the event loop, as network answers do: an in-process mock that
    never suspends would run every request of a call in one turn of the loop, a stall no real server
    causes. One catch-all callback keeps pytest-httpx's own work per request small (no URL matching).
    """
    discovery = {"/version": "version", "/v1/models": "models", "/openapi.json": "openapi"}
    has_openapi = (RECORDED / fixture / "openapi.json").exists()

    async def respond(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(latency)
        name = discovery.get(request.url.path)
        if name == "openapi" and not has_openapi:
            return httpx.Response(404, json={"detail": "Not Found"})
        if name is not None:
            return recorded_response(fixture, name)
        return answer(request)

    httpx_mock.add_callback(respond, is_reusable=True)


def run_with_ticker(
    call: Callable[[vt.AsyncClient], Awaitable[T]], *, attempts: int = 3, **client_args: Any
) -> tuple[T, list[Ticker]]:
    """Run ``call(client)`` on a fresh event loop (and client) with a :class:`Ticker` beside it, up to
    ``attempts`` times until one run stays under both limits; returns the last result and the tickers of
    every run.

    A busy machine can make a run's wall-clock gaps long (and, less often, its CPU times: caches shared
    with other processes); work done on the event loop is long in every run. Discovery (``server_info``)
    runs before the ticker starts: only the call itself is measured.
    """

    async def main() -> tuple[T, Ticker]:
        async with vt.AsyncClient(BASE, max_retries=0, **client_args) as client:
            await client.server_info()
            async with Ticker() as ticker:
                result = await call(client)
        return result, ticker

    tickers: list[Ticker] = []
    while True:
        result, ticker = asyncio.run(main())
        tickers.append(ticker)
        if within_limits(ticker) or len(tickers) >= attempts:
            return result, tickers


def within_limits(ticker: Ticker) -> bool:
    """Whether a run stayed under :data:`STALL_LIMIT` (CPU) and :data:`WALL_LIMIT` (wall clock)."""
    return ticker.longest_cpu < STALL_LIMIT and ticker.longest < WALL_LIMIT


def assert_responsive(tickers: list[Ticker], what: str) -> None:
    """Fail when no run stayed within the limits; prints each run's measures (``-s``)."""
    runs = ", ".join(
        f"{t.longest_cpu * 1000:.1f} ms CPU / {t.longest * 1000:.1f} ms wall ({t.ticks} ticks)"
        for t in tickers
    )
    print(f"\n{what}: the event loop's longest stall per run: {runs}")
    best = min(tickers, key=lambda ticker: (not within_limits(ticker), ticker.longest_cpu))
    assert best.ticks > 0
    assert best.longest_cpu < STALL_LIMIT, (
        f"{what} ran {best.longest_cpu * 1000:.1f} ms of CPU work on the event loop at a stretch"
    )
    assert best.longest < WALL_LIMIT, f"{what} kept the event loop waiting for {best.longest * 1000:.1f} ms"


# ------------------------------------------------------------------------------------ transcription


def speech_like(seconds: float, rate: int, channels: int = 2, seed: int = 0) -> np.ndarray:
    """``(frames, channels)`` float32: noise bursts of 1.5-4 s separated by 0.3-0.8 s pauses."""
    rng = np.random.default_rng(seed)
    total = int(seconds * rate)
    envelope = np.zeros(total, dtype=np.float32)
    at = 0
    while at < total:
        burst = int(rng.uniform(1.5, 4.0) * rate)
        envelope[at : at + burst] = rng.uniform(0.05, 0.2)
        at += burst + int(rng.uniform(0.3, 0.8) * rate)
    mono = rng.standard_normal(total, dtype=np.float32) * envelope
    return np.stack([mono * (0.9 + 0.1 * c) for c in range(channels)], axis=1)


def answer_transcription(request: httpx.Request) -> httpx.Response:
    assert request.url.path == "/v1/audio/transcriptions"
    return httpx.Response(200, json={"text": " words.", "usage": {"type": "duration", "seconds": 30}})


def test_transcribe_of_five_minutes_in_memory_keeps_the_loop_serving(httpx_mock: HTTPXMock) -> None:
    fake_server(httpx_mock, "stt", answer_transcription)
    rate = 44_100
    samples = speech_like(300.0, rate)
    result, tickers = run_with_ticker(lambda client: client.transcribe((samples, rate), language="en"))
    assert result.requests >= 10  # chunked client-side: 5 minutes in pieces of at most 30 s
    assert result.text.startswith("words.") and result.duration is not None and result.duration > 299
    assert_responsive(tickers, "transcribe(5 min, 44.1 kHz stereo array)")


# ------------------------------------------------------------------------------------------------ OCR


def a4_report_pdf(path: Path, pages: int, dpi: int = 144) -> Path:
    """A ``pages``-page A4 PDF whose pages are ``dpi``-pixel-per-inch scans: text lines, a table, a logo."""
    from PIL import Image, ImageDraw

    size = (595 * dpi // 72, 842 * dpi // 72)  # A4 is 595 x 842 points
    scans = []
    for number in range(1, pages + 1):
        scan = Image.new("RGB", size, "white")
        draw = ImageDraw.Draw(scan)
        draw.text((100, 80), f"Quarterly report, page {number}", fill="black")
        draw.ellipse((900, 60, 1060, 180), fill=(200, 40, 40))
        for line in range(40):
            text = f"{line:02d} The quick brown fox jumps over the lazy dog; total {number * line * 17} EUR."
            draw.text((100, 200 + line * 28), text, fill="black")
        draw.rectangle((100, 1380, 1090, 1600), outline="navy", width=4)
        for column in range(1, 5):
            draw.line((100 + column * 198, 1380, 100 + column * 198, 1600), fill="navy", width=2)
        scans.append(scan)
    scans[0].save(path, "PDF", save_all=True, append_images=scans[1:], resolution=dpi)
    return path


def answer_ocr(request: httpx.Request) -> httpx.Response:
    """The n-gram processor check as the recorded DeepSeek-OCR server answered it; each page: a title."""
    assert request.url.path == "/v1/chat/completions"
    if len(request.content) < 1000 and json.loads(request.content).get("vllm_xargs") == {"ngram_size": 0}:
        return recorded_response("ocr", "chat_ngram_check_400")
    answer = recorded_json("ocr", "chat_markdown")
    answer["choices"][0]["message"]["content"] = (
        "<|ref|>title<|/ref|><|det|>[[80, 40, 600, 60]]<|/det|>\n# Report\n"
    )
    answer["choices"][0]["finish_reason"] = "stop"
    return httpx.Response(200, json=answer)


def test_ocr_pdf_of_ten_a4_pages_keeps_the_loop_serving(httpx_mock: HTTPXMock, tmp_path: Path) -> None:
    """Rendering (pypdfium2) and PNG-encoding ten 1190 x 1684 pages take about a second of CPU: all of it
    in worker threads, a wave of pages at a time."""
    fake_server(httpx_mock, "ocr", answer_ocr)
    pdf = a4_report_pdf(tmp_path / "report.pdf", 10)
    document, tickers = run_with_ticker(lambda client: client.ocr_pdf(pdf, concurrency=4))
    assert [page.page for page in document.pages] == list(range(1, 11))
    assert document.pages[0].result.image_size == (1190, 1684)
    assert document.markdown.count("# Report") == 10
    assert_responsive(tickers, "ocr_pdf(10 A4 pages at 144 dpi)")


# ------------------------------------------------------------------------------------------ embeddings

WIDTH = 384


def answer_embeddings(request: httpx.Request) -> httpx.Response:
    """A ``bytes`` answer as vLLM 0.32 sends it: float32 rows, their ranges in the ``metadata`` header."""
    body = json.loads(request.content)
    assert request.url.path == "/v1/embeddings" and body["encoding_format"] == "bytes"
    count, row = len(body["input"]), WIDTH * 4
    items = [
        {"index": i, "embed_dtype": "float32", "endianness": "native", "start": i * row, "end": (i + 1) * row}
        | {"shape": [WIDTH]}
        for i in range(count)
    ]
    metadata = {
        "id": "embd-1",
        "created": 0,
        "model": "minilm",
        "data": items,
        "usage": {"prompt_tokens": count},
    }
    vectors = np.full((count, WIDTH), 0.5, dtype=np.float32)
    return httpx.Response(
        200,
        content=vectors.tobytes(),
        headers={"content-type": "application/octet-stream", "metadata": json.dumps(metadata)},
    )


def test_embed_of_fifty_thousand_texts_keeps_the_loop_serving(httpx_mock: HTTPXMock) -> None:
    """Planning 782 requests (~20 ms) and decoding 77 MB of vectors run in worker threads; the requests
    go out through a few workers, not one task per request."""
    fake_server(httpx_mock, "embed", answer_embeddings)
    texts = [f"passage {i}: the quick brown fox jumps over the lazy dog" for i in range(50_000)]
    gc.collect()
    gc.freeze()  # the test process's own heap is not the SDK's: a full GC pass over it is not counted
    try:
        result, tickers = run_with_ticker(lambda client: client.embed(texts, concurrency=4))
    finally:
        gc.unfreeze()
    assert result.vectors.shape == (50_000, WIDTH) and float(result.vectors[-1, 0]) == 0.5
    assert_responsive(tickers, "embed(50,000 texts, bytes transport)")
