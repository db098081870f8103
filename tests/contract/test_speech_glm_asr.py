"""GLM-ASR through vLLM against transformers on the same weights: transcribe, translate,
transcribe_dir.

Fixture: `glm-asr` (server-fixtures/build_glm_asr.py: GlmAsrForConditionalGeneration, tiny, seeded,
24-token cap). The reference is server-fixtures/references.py's ``glm_asr``: greedy ``generate`` on the
prompt vLLM's ``get_generation_prompt`` writes (not ``apply_transcription_request``'s), decoded without
special tokens. vLLM's text starts with one space that
transformers' decode does not write; the SDK drops it. The words are noise (random weights); two
recordings give two different texts, and the translation prompt a third.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixture_table import GLM_ASR_MAX_NEW_TOKENS

import vllm_tasks as vt
from tests.contract.speech_checks import over_the_context_goes_in_pieces, transcribe_dir_gives
from tests.zoo import reference as zoo_reference

pytestmark = [
    pytest.mark.contract,
    pytest.mark.vllm_min("0.32.0", "the GLM-ASR fixture is built and checked on today's vLLM only"),
]

AUDIO = Path(__file__).resolve().parent.parent / "data" / "audio"
FOX, NUMBERS, LONG = AUDIO / "fox.wav", AUDIO / "numbers.wav", AUDIO / "long45.wav"

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
    requests = [{**r, "max_new_tokens": GLM_ASR_MAX_NEW_TOKENS} for r in REQUESTS.values()]
    answers = zoo_reference("glm-asr", "glm-asr", requests)
    assert all(len(answer["ids"]) == GLM_ASR_MAX_NEW_TOKENS for answer in answers)
    return {name: answer["text"] for name, answer in zip(REQUESTS, answers, strict=True)}


@pytest.fixture(scope="module")
def glm(vllm_glm_asr: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_glm_asr.base_url, timeout=120) as client:
        yield client


def test_transcribe_equals_transformers(glm: vt.Client, reference: dict[str, str]) -> None:
    assert reference["fox"] != reference["numbers"]  # the output follows the audio
    assert len(set(reference["fox"].split())) >= 5
    assert glm.transcribe(FOX, language="en").text == reference["fox"]
    assert glm.transcribe(NUMBERS, language="en").text == reference["numbers"]


def test_translate_equals_transformers(glm: vt.Client, reference: dict[str, str]) -> None:
    """The glm-asr preset sends ``to_language="en"``, which vLLM writes into the prompt."""
    assert reference["numbers-english"] != reference["numbers"]
    assert glm.translate(NUMBERS).text == reference["numbers-english"]


def test_transcribe_dir_equals_transformers(
    vllm_glm_asr: Any, reference: dict[str, str], tmp_path: Path
) -> None:
    transcribe_dir_gives(vllm_glm_asr.base_url, reference, tmp_path)


def test_audio_over_the_context_goes_in_pieces(glm: vt.Client, tmp_path: Path) -> None:
    """vLLM takes up to 655 s of GLM-ASR's audio as one prompt of 12.5 tokens a second: 92 s is over the
    fixture's 1024 tokens (vLLM's 400). The glm-asr preset sends what fits whole, the rest in pieces."""
    over_the_context_goes_in_pieces(glm, tmp_path, copies=2, pieces=4)
