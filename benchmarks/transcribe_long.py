"""Long audio: client-side chunking vs one server-chunked request vs openai-python, on the `stt` fixture.

    .venv/bin/python benchmarks/transcribe_long.py                 # starts the stt CPU fixture
    .venv/bin/python benchmarks/transcribe_long.py --url http://127.0.0.1:8000 --model whisper-base

Builds a ~5-minute file by concatenating the committed espeak-ng fixtures (long45.wav and friends, with
short pauses), then transcribes it three ways, each with ``json`` (text) and ``verbose_json`` (segments):

- ``vllm_tasks chunked``: ``client.transcribe(path)`` -- split client-side at pauses, pieces in flight
  concurrently (``ChunkingOptions.concurrency``), merged;
- ``vllm_tasks server``: ``client.transcribe(path, chunking="server")`` -- one request, vLLM splits it;
- ``openai-python``: ``OpenAI(base_url=.../v1).audio.transcriptions.create(...)`` -- one request.

Prints one table: wall time and its ratio to the server-chunked request, the reference words recovered,
and the share of the file covered by segments (with the longest stretch no segment covers).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parent.parent
AUDIO = ROOT / "tests" / "data" / "audio"
sys.path.insert(0, str(ROOT / "server-fixtures"))
sys.path.insert(0, str(ROOT))

import vllm_tasks as vt  # noqa: E402

NUMBER_WORDS = dict(enumerate(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight"]))
NUMBER_WORDS.update({9: "nine", 10: "ten"})


def words(text: str) -> list[str]:
    out = []
    for word in re.findall(r"[\w']+", text.lower()):
        out.append(NUMBER_WORDS.get(int(word), word) if word.isdigit() else word)
    return out


def words_recovered(reference: str, hypothesis: str) -> float:
    """Share of the reference's words found, in order, in the hypothesis (longest common subsequence)."""
    ref, hyp = words(reference), words(hypothesis)
    previous = [0] * (len(hyp) + 1)
    for word in ref:
        current = [0]
        for j, other in enumerate(hyp):
            current.append(previous[j] + 1 if word == other else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1] / max(1, len(ref))


def build_file(seconds: float, out: Path) -> tuple[float, str]:
    """Concatenate fixtures (0.6 s pauses) until ``seconds``; returns (duration, reference text)."""
    reference = json.loads((AUDIO / "transcripts.json").read_text())
    order = ["long45.wav", "fox.wav", "numbers.wav"]
    pause = np.zeros(int(0.6 * 16000), dtype=np.float32)
    pieces: list[np.ndarray] = []
    texts: list[str] = []
    total = 0.0
    i = 0
    while total < seconds:
        name = order[i % len(order)]
        samples, rate = sf.read(AUDIO / name, dtype="float32")
        assert rate == 16000
        pieces += [samples, pause]
        texts.append(reference[name])
        total += len(samples) / rate + 0.6
        i += 1
    sf.write(out, np.concatenate(pieces), 16000, subtype="PCM_16")
    return total, " ".join(texts)


def coverage(segments: list[tuple[float, float]], duration: float) -> tuple[float, float]:
    """(share of the file inside some segment, longest stretch outside every segment) in seconds."""
    if not segments:
        return 0.0, duration
    covered, gap, cursor = 0.0, 0.0, 0.0
    for start, end in sorted(segments):
        if start > cursor:
            gap = max(gap, start - cursor)
        covered += max(0.0, end - max(start, cursor))
        cursor = max(cursor, end)
    gap = max(gap, duration - cursor)
    return covered / duration, gap


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def run(base_url: str, model: str | None, seconds: float, concurrency: int) -> None:
    from openai import OpenAI

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "long.wav"
        duration, reference = build_file(seconds, path)
        size = path.stat().st_size / 1e6
        print(f"file: {duration:.1f} s, {size:.1f} MB, {len(words(reference))} reference words")
        client = vt.Client(base_url, model=model, timeout=900)
        oai = OpenAI(base_url=base_url + "/v1", api_key="EMPTY", timeout=900, max_retries=0)
        served = model or client.server_info().default_model or ""
        client.transcribe(AUDIO / "fox.wav", language="en")  # warm-up
        options = vt.ChunkingOptions(mode="client", concurrency=concurrency)

        def ours(fmt: str, chunking: Any) -> Callable[[], tuple[str, list[tuple[float, float]], int]]:
            def call() -> tuple[str, list[tuple[float, float]], int]:
                result = client.transcribe(path, language="en", response_format=fmt, chunking=chunking)  # type: ignore[arg-type]
                return result.text, [(s.start, s.end) for s in result.segments], result.requests

            return call

        def openai(fmt: str) -> Callable[[], tuple[str, list[tuple[float, float]], int]]:
            def call() -> tuple[str, list[tuple[float, float]], int]:
                with path.open("rb") as handle:
                    result = oai.audio.transcriptions.create(
                        model=served,
                        file=handle,
                        language="en",
                        response_format=fmt,  # type: ignore[arg-type]
                    )
                segments = [(s.start, s.end) for s in getattr(result, "segments", None) or []]
                return result.text, segments, 1

            return call

        rows = []
        for fmt in ("json", "verbose_json"):
            for label, fn in (
                ("vllm_tasks chunked", ours(fmt, options)),
                ("vllm_tasks server", ours(fmt, "server")),
                ("openai-python", openai(fmt)),
            ):
                seconds_taken, (text, segments, requests) = timed(fn)
                share, gap = coverage(segments, duration)
                rows.append(
                    {
                        "method": label,
                        "format": fmt,
                        "wall_s": seconds_taken,
                        "requests": requests,
                        "words": words_recovered(reference, text),
                        "double_spaces": text.count("  "),
                        "segments": len(segments),
                        "coverage": share,
                        "gap": gap,
                    }
                )
                print(f"  {label:<20} {fmt:<13} {seconds_taken:6.1f} s", flush=True)
        client.close()

    print()
    header = (
        f"{'method':<20} {'format':<13} {'wall s':>7} {'vs server':>9} {'reqs':>5} {'words':>6} "
        f"{'2x spc':>6} {'segs':>5} {'covered':>8} {'max gap s':>9}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        base = next(r for r in rows if r["method"] == "vllm_tasks server" and r["format"] == row["format"])
        segs = "-" if row["format"] == "json" and row["method"] != "vllm_tasks chunked" else row["segments"]
        cover = f"{row['coverage']:.0%}" if segs != "-" else "-"
        gap = f"{row['gap']:.1f}" if segs != "-" else "-"
        ratio = row["wall_s"] / base["wall_s"]
        print(
            f"{row['method']:<20} {row['format']:<13} {row['wall_s']:7.1f} {ratio:8.2f}x "
            f"{row['requests']:>5} {row['words']:6.0%} {row['double_spaces']:>6} "
            f"{segs!s:>5} {cover:>8} {gap:>9}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a running stt server (default: start the stt CPU fixture)")
    ap.add_argument("--model", default=None)
    ap.add_argument("--seconds", type=float, default=300.0, help="length of the test file (default 300)")
    ap.add_argument("--concurrency", type=int, default=8, help="client-side pieces in flight (default 8)")
    args = ap.parse_args()
    if args.url:
        run(args.url.rstrip("/"), args.model, args.seconds, args.concurrency)
        return 0
    from launcher import FixtureServer

    with FixtureServer("stt") as server:
        print(f"stt fixture ready in {server.start_seconds:.1f} s, RSS {server.rss_mib():.0f} MiB")
        run(server.base_url, server.model, args.seconds, args.concurrency)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
