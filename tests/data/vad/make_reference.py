"""Records faster-whisper's ``get_speech_timestamps`` on seeded speech probabilities (its Silero model
replaced by the given probabilities) into ``speech_timestamps.json``, the reference of
``tests/unit/test_vad.py``. Needs faster-whisper (``pip install -e '.[bench-accuracy]'``):

    .venv/bin/python tests/data/vad/make_reference.py
"""

import json
import math
from pathlib import Path

import numpy as np
from faster_whisper import vad

CASES = [
    {},
    {"min_silence_duration_ms": 500, "speech_pad_ms": 200},
    {"threshold": 0.6, "neg_threshold": 0.2, "min_speech_duration_ms": 250},
    {"max_speech_duration_s": 5.0, "min_silence_duration_ms": 300},
    {"max_speech_duration_s": 3.0, "speech_pad_ms": 30, "min_silence_duration_ms": 100},
    {"speech_pad_ms": 0, "min_silence_duration_ms": 0},
]


def probabilities(rng: np.random.Generator) -> np.ndarray:
    """Stretches of speech and non-speech (1-120 windows each) with noisy probabilities."""
    out: list[float] = []
    speaking = bool(rng.integers(2))
    while len(out) < 1500:
        length = int(rng.integers(1, 120))
        centre = rng.uniform(0.55, 1.0) if speaking else rng.uniform(0.0, 0.45)
        out += list(np.clip(rng.normal(centre, 0.2, length), 0, 1))
        speaking = not speaking
    return np.round(np.asarray(out, dtype=np.float64), 4)


def main() -> None:
    rng = np.random.default_rng(35)
    records = []
    for case in range(24):
        probs = probabilities(rng)
        total = len(probs) * 512 - int(rng.integers(0, 512))
        options = CASES[case % len(CASES)]
        vad.get_vad_model = lambda probs=probs: lambda audio: probs[: len(audio) // 512]
        regions = vad.get_speech_timestamps(np.zeros(total, np.float32), vad.VadOptions(**options))
        records.append(
            {
                "options": {k: (None if v == math.inf else v) for k, v in options.items()},
                "probabilities": [float(p) for p in probs],
                "total": total,
                "regions": [[r["start"], r["end"]] for r in regions],
            }
        )
    out = Path(__file__).with_name("speech_timestamps.json")
    out.write_text(json.dumps(records, separators=(",", ":")))


if __name__ == "__main__":
    main()
