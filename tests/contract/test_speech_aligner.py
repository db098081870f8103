"""Word timestamps through vLLM's forced aligner against transformers on the same weights.

Fixture: `qwen3-aligner` (a tiny seeded Qwen3-ForcedAligner in the release's layout, served as
``Qwen3ASRForcedAlignerForTokenClassification`` with ``--runner pooling --trust-request-chat-template``).
The reference is server-fixtures/references.py's ``qwen3_aligner``: transformers'
``Qwen3ASRForTokenClassification`` on the same weights, ``split_words_for_alignment``, vLLM's prompt, the
argmax class at each ``<timestamp>`` and ``decode_forced_alignment``'s times.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import vllm_tasks as vt
from tests.zoo import reference as zoo_reference
from vllm_tasks.testing import FakeVLLM
from vllm_tasks.testing.wire import Reply
from vllm_tasks.transcription import alignment

pytestmark = [
    pytest.mark.contract,
    pytest.mark.vllm_min("0.32.0", "Qwen3ASRForcedAlignerForTokenClassification"),
]

AUDIO = Path(__file__).resolve().parents[1] / "data" / "audio"
RECORDED = Path(__file__).resolve().parents[1] / "recorded" / "stt"
TRANSCRIPTS = json.loads((AUDIO / "transcripts.json").read_text())
RECORDINGS = ("fox.wav", "numbers.wav")
#: One text aligned with both recordings: the answers differ by the audio alone.
TEXT = TRANSCRIPTS["fox.wav"]


@pytest.fixture(scope="module")
def reference() -> dict[tuple[str, str], dict[str, Any]]:
    """transformers' alignment of each recording with its own transcript and with TEXT (one subprocess)."""
    requests = [
        {"audio": str(AUDIO / name), "text": text, "language": "English"}
        for name in RECORDINGS
        for text in (TRANSCRIPTS[name], TEXT)
    ]
    answers = zoo_reference("qwen3-aligner", "qwen3-aligner", requests)
    return {(Path(r["audio"]).name, r["text"]): answer for r, answer in zip(requests, answers, strict=True)}


@pytest.fixture(scope="module")
def aligner(vllm_qwen3_aligner: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_qwen3_aligner.base_url, model=vllm_qwen3_aligner.model, timeout=120) as client:
        yield client


def expected(answer: dict[str, Any]) -> list[tuple[str, float, float]]:
    """The reference's word times, capped at the audio's end as ``align`` documents."""
    end = math.floor(answer["duration"] * 1000) / 1000
    return [(w["text"], min(w["start_time"], end), min(w["end_time"], end)) for w in answer["words"]]


@pytest.mark.parametrize("name", RECORDINGS)
def test_align_equals_transformers(
    aligner: vt.Client, reference: dict[tuple[str, str], dict[str, Any]], name: str
) -> None:
    for text in (TRANSCRIPTS[name], TEXT):
        answer = reference[(name, text)]
        before = aligner.usage.prompt_tokens
        result = aligner.align(AUDIO / name, text, language="en")
        assert (
            aligner.usage.prompt_tokens - before == answer["prompt_tokens"]
        )  # the same prompt, audio included
        assert [(w.word, w.start, w.end) for w in result.words] == expected(answer)


def test_the_answer_depends_on_the_audio(reference: dict[tuple[str, str], dict[str, Any]]) -> None:
    """The same words with two recordings: two different sequences of time classes (so the equality above
    is not that of a constant answer)."""
    classes = [reference[(name, TEXT)]["classes"] for name in RECORDINGS]
    assert len(classes[0]) == len(classes[1]) == 2 * len(TEXT.split())
    assert classes[0] != classes[1]


def test_a_long_transcription_is_aligned_window_by_window(aligner: vt.Client) -> None:
    """A 46 s recording's segments (FakeVLLM's transcript) aligned by the real aligner: one request per
    window, one word per word of the text, times never going back and within the audio."""
    with FakeVLLM(tasks={"transcription"}) as stt, vt.Client(stt.url) as client:
        result = client.transcribe(AUDIO / "long45.wav", response_format="verbose_json", aligner=aligner)
    duration = result.duration or 0.0
    windows = alignment.align_windows(result, duration)
    assert len(windows) >= 2
    assert result.words is not None
    assert [w.word for w in result.words] == [
        w for window in windows for w in alignment.split_words(window.text)
    ]
    flat = [t for w in result.words for t in (w.start, w.end)]
    assert all(a <= b for a, b in itertools.pairwise(flat))
    assert flat[0] >= 0.0 and flat[-1] <= duration
    for window in windows:
        inside = [w for w in result.words if window.start <= w.start <= w.end <= window.end]
        assert len(inside) == len(alignment.split_words(window.text))


def test_real_whisper_segments_are_aligned_in_order(aligner: vt.Client) -> None:
    """whisper-base's own verbose_json answer for long45.wav (recorded from the `stt` fixture: one segment,
    29.8-44.8 s) aligned by the real aligner: every word of the segment once, in order, within it."""
    recorded = json.loads((RECORDED / "transcription_verbose_json_long.json").read_text())["response"]

    def whisper(reply: Reply) -> Reply:
        return Reply(200, recorded["body_text"].encode(), {"content-type": "application/json"})

    with FakeVLLM(tasks={"transcription"}) as stt, vt.Client(stt.url) as client:
        stt.mutate(whisper, path="/v1/audio/transcriptions", times=None)
        result = client.transcribe(
            AUDIO / "long45.wav", response_format="verbose_json", chunking="server", aligner=aligner
        )
    (segment,) = result.segments
    assert result.words is not None
    assert [w.word for w in result.words] == alignment.split_words(segment.text)
    flat = [t for w in result.words for t in (w.start, w.end)]
    assert all(a <= b for a, b in itertools.pairwise(flat))
    assert segment.start <= flat[0] and flat[-1] <= segment.end
