"""Granite Speech through vLLM against transformers on the same weights: transcribe, translate,
transcribe_dir.

Fixture: `granite-speech` (server-fixtures/build_granite_speech.py: GraniteSpeechForConditionalGeneration,
tiny, seeded, 24-token cap; transformers' feature extractor runs on the torchaudio stand-in on both sides).
The reference is server-fixtures/references.py's ``granite_speech``: greedy ``generate`` on the prompt vLLM's
``get_generation_prompt`` writes, decoded without special tokens. vLLM's text starts with one space that
transformers' decode does not write; the SDK drops it. The words are noise (random weights); two
recordings give two different texts, and the translation prompt a third.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixture_table import GRANITE_SPEECH_MAX_NEW_TOKENS

import vllm_tasks as vt
from tests.contract.speech_checks import transcribe_dir_gives
from tests.zoo import reference as zoo_reference

pytestmark = [
    pytest.mark.contract,
    pytest.mark.vllm_min("0.32.0", "the Granite Speech fixture is built and checked on today's vLLM only"),
]

AUDIO = Path(__file__).resolve().parent.parent / "data" / "audio"
FOX, NUMBERS = AUDIO / "fox.wav", AUDIO / "numbers.wav"

#: The reference requests, by name (one subprocess computes them all).
REQUESTS: dict[str, dict[str, Any]] = {
    "fox": {"audio": str(FOX), "task": "transcribe"},
    "numbers": {"audio": str(NUMBERS), "task": "transcribe"},
    # vLLM names the target from ISO 639-1: the preset's to_language="en" is "English".
    "numbers-english": {"audio": str(NUMBERS), "task": "translate", "to_language": "English"},
}


@pytest.fixture(scope="module")
def reference() -> dict[str, str]:
    """The transformers text of each REQUESTS entry."""
    requests = [{**r, "max_new_tokens": GRANITE_SPEECH_MAX_NEW_TOKENS} for r in REQUESTS.values()]
    answers = zoo_reference("granite-speech", "granite-speech", requests)
    assert all(len(answer["ids"]) == GRANITE_SPEECH_MAX_NEW_TOKENS for answer in answers)
    return {name: answer["text"] for name, answer in zip(REQUESTS, answers, strict=True)}


@pytest.fixture(scope="module")
def granite(vllm_granite_speech: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_granite_speech.base_url, timeout=120) as client:
        yield client


def test_transcribe_equals_transformers(granite: vt.Client, reference: dict[str, str]) -> None:
    assert reference["fox"] != reference["numbers"]  # the output follows the audio
    assert len(set(reference["fox"].split())) >= 5
    assert granite.transcribe(FOX, language="en").text == reference["fox"]
    assert granite.transcribe(NUMBERS, language="en").text == reference["numbers"]


def test_translate_equals_transformers(granite: vt.Client, reference: dict[str, str]) -> None:
    """The granite-speech preset sends ``to_language="en"``, which vLLM writes into the prompt."""
    assert reference["numbers-english"] != reference["numbers"]
    assert granite.translate(NUMBERS).text == reference["numbers-english"]


def test_transcribe_dir_equals_transformers(
    vllm_granite_speech: Any, reference: dict[str, str], tmp_path: Path
) -> None:
    transcribe_dir_gives(vllm_granite_speech.base_url, reference, tmp_path)
