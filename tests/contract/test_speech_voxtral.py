"""Voxtral through vLLM against transformers on the same weights, and what vLLM's Voxtral does with
Whisper's options.

Fixture: `voxtral` (server-fixtures/build_voxtral.py: Voxtral's architecture, tiny, seeded, served in the
mistral format with a 24-token cap). The reference is server-fixtures/references.py's ``voxtral``:
``VoxtralForConditionalGeneration`` with ``VoxtralProcessor.apply_transcription_request``, greedy, 24 new
tokens, decoded without special tokens. vLLM's text starts with the space of the first token (Tekken
words carry their leading space) and the client strips it, so stripped texts are compared. The weights
are scaled so that the text follows the recording: the two recordings give two different texts of many
different tokens.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import vllm_tasks as vt
from tests.contract.speech_checks import over_the_context_goes_in_pieces
from tests.zoo import reference as zoo_reference
from vllm_tasks.types.audio import Transcription, TranscriptionDelta

pytestmark = [
    pytest.mark.contract,
    pytest.mark.vllm_min("0.32.0", "the Voxtral fixture is built and checked on today's vLLM only"),
]

AUDIO = Path(__file__).resolve().parent.parent / "data" / "audio"
FOX, NUMBERS, LONG = (AUDIO / n for n in ("fox.wav", "numbers.wav", "long45.wav"))
RECORDINGS = (FOX, NUMBERS, LONG)
MAX_NEW_TOKENS = 24  # the fixture's --override-generation-config cap


@pytest.fixture(scope="module")
def expected() -> dict[str, str]:
    """transformers' text per recording name (fox.wav, numbers.wav, long45.wav), stripped."""
    answer = zoo_reference(
        "voxtral",
        "voxtral",
        {"audio": [str(p) for p in RECORDINGS], "language": "en", "max_new_tokens": MAX_NEW_TOKENS},
    )
    assert all(len(ids) == MAX_NEW_TOKENS for ids in answer["token_ids"])
    return {p.name: text.strip() for p, text in zip(RECORDINGS, answer["texts"], strict=True)}


@pytest.fixture(scope="module")
def client(vllm_voxtral: Any) -> Iterator[vt.Client]:
    with vt.Client(vllm_voxtral.base_url, timeout=300) as voxtral_client:
        yield voxtral_client


def test_transcriptions_equal_transformers(client: vt.Client, expected: dict[str, str]) -> None:
    assert expected["fox.wav"] != expected["numbers.wav"]  # the text follows the recording
    for path in (FOX, NUMBERS):
        result = client.transcribe(path, language="en")
        assert result.text == expected[path.name], path.name
        assert result.usage is not None and result.usage.seconds is not None


def test_long_audio_in_one_request_equals_transformers(client: vt.Client, expected: dict[str, str]) -> None:
    """45 s sent whole: mistral_common cuts it into two 30 s windows of 375 audio tokens each (vLLM does
    not split Voxtral's audio: its min_energy_split_window_size is None), as transformers does."""
    result = client.transcribe(LONG, language="en", chunking="server")
    assert result.text == expected["long45.wav"]
    assert result.usage is not None and result.usage.seconds == 46
    assert client.transcribe(LONG, language="en").text == expected["long45.wav"]  # the voxtral preset's way


def test_audio_over_the_context_goes_in_pieces(client: vt.Client, tmp_path: Path) -> None:
    """184 s whole is 7 windows of 375 tokens: over the fixture's 2048 (vLLM's 400). The voxtral preset
    sends what fits (120 s) whole and longer audio in pieces, so the same call succeeds."""
    over_the_context_goes_in_pieces(client, tmp_path, copies=4, pieces=7)


def test_stream_deltas_join_to_the_same_text(client: vt.Client, expected: dict[str, str]) -> None:
    events = list(client.transcribe_stream(FOX, language="en"))
    deltas = [e.text for e in events if isinstance(e, TranscriptionDelta)]
    final = events[-1]
    assert isinstance(final, Transcription) and len(deltas) > 1
    assert "".join(deltas).strip() == final.text == expected["fox.wav"]


def test_transcribe_dir_gives_the_same_texts(
    vllm_voxtral: Any, expected: dict[str, str], tmp_path: Path
) -> None:
    source, out = tmp_path / "calls", tmp_path / "text"
    source.mkdir()
    for path in (FOX, NUMBERS):
        shutil.copy(path, source / path.name)
    report = vt.transcribe_dir(
        vllm_voxtral.base_url, source, out, formats=["txt"], params=vt.TranscribeParams(language="en")
    )
    assert report.complete, (out / "errors.jsonl").read_text()
    for path in (FOX, NUMBERS):
        assert (out / f"{path.stem}.txt").read_text().strip() == expected[path.name]


def test_what_vllm_does_with_whisper_options(vllm_voxtral: Any, expected: dict[str, str]) -> None:
    """The raw HTTP answers the speech presets rely on: Voxtral's prompt is mistral_common's transcription
    request (audio, ``lang:xx``, [TRANSCRIBE]), so vLLM ignores ``prompt``, ``timestamp_granularities`` and
    the translation task, has no timed segments, and takes nine languages (others of Whisper's list with a
    warning in its log); ``temperature`` samples."""
    fox = FOX.read_bytes()

    def post(endpoint: str, **fields: Any) -> httpx.Response:
        data = {"model": vllm_voxtral.model, "language": "en", **fields}
        return httpx.post(
            f"{vllm_voxtral.base_url}/v1/audio/{endpoint}",
            data={k: v for k, v in data.items() if v is not None},
            files={"file": ("fox.wav", fox, "audio/wav")},
            timeout=120,
        )

    def text(response: httpx.Response) -> str:
        assert response.status_code == 200, response.text
        return str(response.json()["text"]).strip()

    assert text(post("translations")) == expected["fox.wav"]  # served, but a transcription
    assert text(post("transcriptions", prompt="The quick brown fox")) == expected["fox.wav"]
    assert text(post("transcriptions", **{"timestamp_granularities[]": "word"})) == expected["fox.wav"]
    assert text(post("transcriptions", temperature="1.0", seed="1")) != expected["fox.wav"]  # sampled
    verbose = post("transcriptions", response_format="verbose_json")
    assert verbose.status_code == 400
    assert verbose.json()["error"]["message"] == "Currently do not support verbose_json for voxtral-tiny"
    unknown = post("transcriptions", language="xx")
    assert unknown.status_code == 400
    message = unknown.json()["error"]["message"]
    assert json.dumps(["ar", "nl", "en", "fr", "de", "hi", "it", "pt", "es"]).replace('"', "'") in message
