"""Qwen3-ASR on real vLLM against transformers on the same weights: transcribe, its stream, translate,
transcribe_dir, and the WebSocket /v1/realtime session.

Fixture: `qwen3-asr` (a tiny seeded Qwen3ASRForConditionalGeneration, server-fixtures/build_qwen3_asr.py,
served as Qwen3ASRRealtimeGeneration: one server answers /v1/audio/* and /v1/realtime). The reference is
server-fixtures/references.py's ``qwen3_asr``: ``Qwen3ASRProcessor.apply_transcription_request`` and greedy
``generate``, decoded without special tokens. vLLM's text starts with one space that transformers' decode
does not write (the SDK's results drop it; the raw realtime events keep it). The words are noise (random
weights); two recordings give two different texts.

Realtime (vLLM 0.32, ``qwen3_asr_realtime.py``): every 5 s of audio is a new prompt without a language
(``<|im_start|>user\\n<audio><|im_end|>\\n<|im_start|>assistant\\n``) answered with 64 tokens
(``realtime_max_tokens``), after the context so far (``references.py qwen3-asr`` with ``segment_seconds``
reproduces it); the sessions are recorded in tests/data/realtime/ (record.py there).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fixture_table import QWEN3_ASR_MAX_NEW_TOKENS

import vllm_tasks as vt
from tests.contract.speech_checks import over_the_context_goes_in_pieces, transcribe_dir_gives
from tests.zoo import reference as zoo_reference

pytestmark = [
    pytest.mark.contract,
    pytest.mark.vllm_min("0.32.0", "Qwen3ASRRealtimeGeneration as vLLM 0.32 serves it"),
]

DATA = Path(__file__).resolve().parent.parent / "data"
FOX, NUMBERS = DATA / "audio" / "fox.wav", DATA / "audio" / "numbers.wav"
LONG = DATA / "audio" / "long45.wav"
REALTIME = DATA / "realtime"
#: Tokens per realtime segment (vLLM's Qwen3ASRRealtimeGeneration.realtime_max_tokens) and its seconds.
REALTIME_TOKENS, SEGMENT_SECONDS = 64, 5


def _load_recorder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("realtime_record", REALTIME / "record.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


record = _load_recorder()

#: The reference requests, by name (one subprocess computes them all).
REQUESTS: dict[str, dict[str, Any]] = {
    "fox": {"audio": str(FOX), "language": "en", "max_new_tokens": QWEN3_ASR_MAX_NEW_TOKENS},
    "numbers": {"audio": str(NUMBERS), "language": "en", "max_new_tokens": QWEN3_ASR_MAX_NEW_TOKENS},
    "fox-prompt": {
        "audio": str(FOX),
        "language": "en",
        "prompt": "vLLM and Qwen",
        "max_new_tokens": QWEN3_ASR_MAX_NEW_TOKENS,
    },
    "fox-no-language": {"audio": str(FOX), "max_new_tokens": QWEN3_ASR_MAX_NEW_TOKENS},
    "fox-german": {"audio": str(FOX), "language": "de", "max_new_tokens": QWEN3_ASR_MAX_NEW_TOKENS},
    "fox-realtime": {
        "audio": str(FOX),
        "max_new_tokens": REALTIME_TOKENS,
        "segment_seconds": SEGMENT_SECONDS,
    },
    "numbers-realtime": {
        "audio": str(NUMBERS),
        "max_new_tokens": REALTIME_TOKENS,
        "segment_seconds": SEGMENT_SECONDS,
    },
}


@pytest.fixture(scope="module")
def reference() -> dict[str, str]:
    """The transformers text of each REQUESTS entry."""
    answers = zoo_reference("qwen3-asr", "qwen3-asr", list(REQUESTS.values()))
    return {name: answer["text"] for name, answer in zip(REQUESTS, answers, strict=True)}


@pytest.fixture(scope="module")
def asr(vllm_qwen3_asr: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_qwen3_asr.base_url, model=vllm_qwen3_asr.model, timeout=120) as client:
        yield client


def served(text: str) -> str:
    """vLLM's raw text without the one leading space transformers' decode does not write."""
    assert text.startswith(" ") and not text.startswith("  "), repr(text)
    return text[1:]


def test_transcribe_equals_transformers(asr: vt.Client, reference: dict[str, str]) -> None:
    assert reference["fox"] != reference["numbers"]  # the output follows the audio
    assert len(set(reference["fox"].split())) >= 5
    assert asr.transcribe(FOX, language="en").text == reference["fox"]
    assert asr.transcribe(NUMBERS, language="en").text == reference["numbers"]
    # the prompt becomes a system turn (it changes the answer)
    assert reference["fox-prompt"] != reference["fox"]
    assert asr.transcribe(FOX, language="en", prompt="vLLM and Qwen").text == reference["fox-prompt"]


def test_transcribe_stream_equals_transformers(asr: vt.Client, reference: dict[str, str]) -> None:
    with asr.transcribe_stream(NUMBERS, language="en") as stream:
        events = list(stream)
    *deltas, result = events
    assert isinstance(result, vt.types.Transcription)
    assert len(deltas) > 1
    assert "".join(d.text for d in deltas).strip() == reference["numbers"]
    assert result.text == reference["numbers"]


def test_translate_forces_the_target_language_only(asr: vt.Client, reference: dict[str, str]) -> None:
    """vLLM's Qwen3-ASR translation prompt forces ``to_language`` (not ``language``); without one the model
    writes what it detects. The qwen3-asr preset sends ``to_language="en"`` (a translation is into English,
    as OpenAI's route says); ``extra_body`` names another."""
    assert len({reference["fox-no-language"], reference["fox-german"], reference["fox"]}) == 3
    assert asr.translate(FOX, language="fr").text == reference["fox"]
    raw = asr.translate(FOX, preset="generic")
    assert raw.text == reference["fox-no-language"]
    german = asr.translate(FOX, extra_body={"to_language": "de"})
    assert german.text == reference["fox-german"]


def test_audio_over_the_context_goes_in_pieces(asr: vt.Client, tmp_path: Path) -> None:
    """Served as its realtime class, Qwen3-ASR takes a recording whole as one prompt of 13 tokens a second:
    92 s is over the fixture's 1024 tokens (vLLM's 400). The preset sends what fits whole, the rest in
    pieces, so the same call succeeds."""
    over_the_context_goes_in_pieces(asr, tmp_path, copies=2, pieces=4)


def test_transcribe_dir_equals_transformers(
    vllm_qwen3_asr: Any, reference: dict[str, str], tmp_path: Path
) -> None:
    transcribe_dir_gives(vllm_qwen3_asr.base_url, reference, tmp_path)


def _joined(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Server events with session ids and times dropped and each run of deltas joined into one: vLLM puts
    one or several tokens in a delta, depending on how fast the client reads."""
    out: list[dict[str, Any]] = []
    for raw in events:
        event = {k: v for k, v in raw.items() if k not in ("id", "created")}
        delta = event.get("type") == "transcription.delta"
        if delta and out and out[-1].get("type") == "transcription.delta":
            out[-1] = {**out[-1], "delta": out[-1]["delta"] + event["delta"]}
        else:
            out.append(event)
    return out


def test_realtime_session_equals_the_recording_and_transformers(
    vllm_qwen3_asr: Any, reference: dict[str, str]
) -> None:
    """numbers.wav (6.6 s) is two segments: the first 5 s answered as one prompt, then the rest after it."""
    recorded = json.loads((REALTIME / "numbers.json").read_text())
    live = record.transcribe(vllm_qwen3_asr.base_url, vllm_qwen3_asr.model, ["numbers.wav"])
    assert live["client"] == recorded["client"]
    assert _joined(live["server"]) == _joined(recorded["server"])
    created, deltas, done = _joined(live["server"])
    assert created["type"] == "session.created" and done["type"] == "transcription.done"
    assert deltas["delta"] == done["text"]
    assert done["usage"]["completion_tokens"] == 2 * REALTIME_TOKENS
    assert served(done["text"]) == reference["numbers-realtime"]


def test_realtime_errors_leave_the_session_open(vllm_qwen3_asr: Any, reference: dict[str, str]) -> None:
    """Each refused event answers one error event (as recorded in probes.json) and the session goes on to
    transcribe fox.wav (one segment: the offline prompt without a language, 64 tokens)."""
    probes = json.loads((REALTIME / "probes.json").read_text())
    expected = {name: probes[name]["server"][1] for name in ("non_json_frame", "bad_base64", "unknown_model")}
    expected["commit_before_update"] = probes["audio_before_session_update"]["server"][1]
    with record.Session(vllm_qwen3_asr.base_url) as session:
        assert session.receive()["type"] == "session.created"  # type: ignore[index]
        session.send("this is not json")
        assert session.receive() == expected["non_json_frame"]
        session.send({"type": "input_audio_buffer.append", "audio": "%%% not base64 %%%"})
        assert session.receive() == expected["bad_base64"]
        session.send({"type": "session.update", "model": "no-such-model"})
        assert session.receive() == expected["unknown_model"]
        session.send({"type": "input_audio_buffer.commit"})
        assert session.receive() == expected["commit_before_update"]
        session.send({"type": "session.update", "model": vllm_qwen3_asr.model})
        session.send({"type": "input_audio_buffer.commit"})
        for sent, _ in record.appends("fox.wav"):
            session.send(sent)
        session.send({"type": "input_audio_buffer.commit", "final": True})
        session.until("transcription.done")
    done = session.server[-1]
    assert done == json.loads((REALTIME / "fox.json").read_text())["server"][-1]
    assert "".join(e["delta"] for e in session.server if e["type"] == "transcription.delta") == done["text"]
    assert served(done["text"]) == reference["fox-realtime"]
    assert served(done["text"]).startswith(reference["fox-no-language"])
    assert reference["fox-realtime"] != reference["numbers-realtime"]


def test_transcribe_realtime_equals_transformers(asr: vt.Client, reference: dict[str, str]) -> None:
    """The SDK's realtime session on the real route: its deltas join to the final text, which equals
    transformers' segment-by-segment reference for each of two recordings."""
    for path, name in ((FOX, "fox-realtime"), (NUMBERS, "numbers-realtime")):
        with asr.transcribe_realtime(path) as session:
            events = list(session)
        *deltas, result = events
        assert isinstance(result, vt.types.Transcription) and deltas
        assert "".join(d.text for d in deltas).strip() == result.text == reference[name]
    with pytest.raises(vt.NotFoundError) as caught:
        asr.transcribe_realtime(FOX, model="no-such-model").until_done()
    assert caught.value.kind == "model_not_found"
