"""Speech presets against FakeVLLM: the served model's family decides how long audio goes and what is refused
before sending; a folder job on a model without timed segments asks for text."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import vllm_tasks as vt
from vllm_tasks.testing import SPEECH_TASKS, FakeVLLM

AUDIO = Path(__file__).resolve().parents[1] / "data" / "audio"
LONG = AUDIO / "long45.wav"  # 45 s: one Whisper window is 30 s


def uploads(fake: FakeVLLM) -> int:
    return len(fake.received("/v1/audio/transcriptions"))


def formats(fake: FakeVLLM) -> set[str]:
    return {str(r.form["response_format"]) for r in fake.received("/v1/audio/transcriptions")}


def test_whisper_long_audio_goes_in_sequential_windows() -> None:
    with (
        FakeVLLM(model="openai/whisper-base", tasks=SPEECH_TASKS) as fake,
        vt.Client(fake.url) as client,
    ):
        client.transcribe(LONG, language="en")
        assert uploads(fake) >= 2
        assert formats(fake) == {"verbose_json"}


@pytest.mark.parametrize("model", ["mistralai/Voxtral-Mini-3B-2507", "Qwen/Qwen3-ASR-1.7B", "my-asr"])
def test_other_models_get_long_audio_whole(model: str) -> None:
    with (
        FakeVLLM(model=model, tasks=SPEECH_TASKS, segments=False, max_model_len=32768) as fake,
        vt.Client(fake.url) as client,
    ):
        result = client.transcribe(LONG, language="en")
        assert uploads(fake) == 1 and result.text
        assert formats(fake) == {"json"}


def test_voxtral_audio_over_its_context_goes_in_pieces(tmp_path: Path) -> None:
    """With 1024 tokens of context, Voxtral takes one 30 s window with room to write: 45 s goes in pieces."""
    with (
        FakeVLLM(model="voxtral", tasks=SPEECH_TASKS, segments=False, max_model_len=1024) as fake,
        vt.Client(fake.url) as client,
    ):
        client.transcribe(LONG, language="en")
        assert uploads(fake) == 2
        fake.clear_requests()
        client.transcribe(AUDIO / "fox.wav", language="en")
        assert uploads(fake) == 1


def test_the_served_model_refuses_what_its_preset_refuses() -> None:
    """The refusals are the server's too: FakeVLLM answers vLLM's 400, the preset refuses before sending."""
    with (
        FakeVLLM(model="mistralai/Voxtral-Mini-3B-2507", tasks=SPEECH_TASKS, segments=False) as fake,
        vt.Client(fake.url) as client,
    ):
        with pytest.raises(vt.BadRequestError, match="do not support verbose_json"):
            client.transcribe(AUDIO / "fox.wav", response_format="verbose_json", preset="generic")
        fake.clear_requests()
        for call in (
            lambda: client.transcribe(AUDIO / "fox.wav", response_format="srt"),
            lambda: client.transcribe(AUDIO / "fox.wav", prompt="Fox."),
            lambda: client.translate(AUDIO / "fox.wav"),
            lambda: client.transcribe(LONG, chunking="sequential"),
        ):
            with pytest.raises(vt.InvalidInputError, match="voxtral preset"):
                call()
        assert uploads(fake) == 0


def test_the_callers_preset_wins() -> None:
    with FakeVLLM(model="my-asr", tasks=SPEECH_TASKS) as fake, vt.Client(fake.url) as client:
        client.transcribe(LONG, language="en", preset="whisper")
        assert uploads(fake) >= 2
        with pytest.raises(vt.InvalidInputError, match="voxtral preset"):
            client.transcribe(LONG, prompt="Hi", preset="voxtral")


def test_transcribe_dir_on_a_model_without_segments(tmp_path: Path) -> None:
    source = tmp_path / "calls"
    source.mkdir()
    for name in ("fox.wav", "numbers.wav"):
        shutil.copy(AUDIO / name, source / name)
    with (
        FakeVLLM(model="mistralai/Voxtral-Mini-3B-2507", tasks=SPEECH_TASKS, segments=False) as fake,
        vt.Client(fake.url) as client,
    ):
        report = vt.transcribe_dir(client, source, tmp_path / "out", formats=["txt", "srt"])
        assert report.failed == () and report.documents_done == 2
        assert formats(fake) == {"json"}
    srt = (tmp_path / "out" / "fox.srt").read_text()
    assert srt.startswith("1\n00:00:00,000 --> ") and srt.count("-->") == 1
