"""Speech presets: recognised from the served model, overridable, and what each refuses before sending."""

from __future__ import annotations

from typing import Any

import pytest

import vllm_tasks as vt
from vllm_tasks import transcription
from vllm_tasks.transcription import (
    GENERIC,
    QWEN3_ASR,
    VOXTRAL,
    WHISPER,
    ChunkingOptions,
    SpeechPreset,
    TranscribeParams,
    check_preset,
    speech_preset,
)
from vllm_tasks.types.server import ModelCard, ServerInfo


def served(name: str, root: str | None = None) -> ServerInfo:
    return ServerInfo(
        base_url="http://h", version="0.32.0", models=(ModelCard(id=name, root=root),), routes=None
    )


@pytest.mark.parametrize(
    ("name", "root", "expected"),
    [
        ("openai/whisper-large-v3-turbo", None, "whisper"),
        ("distil-whisper/distil-large-v3", None, "whisper"),
        ("asr", "mistralai/Voxtral-Mini-3B-2507", "voxtral"),
        ("mistralai/Voxtral-Small-24B-2507", None, "voxtral"),
        ("Qwen/Qwen3-ASR-1.7B", None, "qwen3-asr"),
        ("qwen3_asr_tiny", None, "qwen3-asr"),
        ("ibm-granite/granite-speech-3.3-8b", None, "granite-speech"),
        ("zai-org/GLM-ASR-Nano-2512", None, "glm-asr"),
        ("my-speech-model", "/models/my-speech-model", "generic"),
    ],
)
def test_recognised_from_name_or_root(name: str, root: str | None, expected: str) -> None:
    assert speech_preset(served(name, root), None).name == expected
    assert speech_preset(served(name, root), name).name == expected


def test_the_callers_choice_wins() -> None:
    info = served("mistralai/Voxtral-Mini-3B-2507")
    assert speech_preset(info, None, "whisper") is WHISPER
    custom = SpeechPreset(
        name="mine", pattern="mine", segments=False, prompt=True, translate=False, long_form="server"
    )
    assert speech_preset(info, None, custom) is custom


@pytest.mark.parametrize("choice", ["whisperx", "", 3])
def test_an_unknown_choice_is_refused_with_the_names(choice: Any) -> None:
    with pytest.raises(vt.InvalidInputError) as caught:
        speech_preset(served("whisper"), None, choice)
    assert caught.value.field == "preset"
    if isinstance(choice, str):
        assert "'voxtral'" in str(caught.value) and "'qwen3-asr'" in str(caught.value)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": ""}, "preset.name"),
        ({"pattern": "("}, "preset.pattern"),
        ({"long_form": "client"}, "preset.long_form"),
        ({"long_form": "sequential", "segments": False}, "preset.long_form"),
    ],
)
def test_a_preset_is_checked(fields: dict[str, Any], field: str) -> None:
    base: dict[str, Any] = {
        "name": "x",
        "pattern": "x",
        "segments": True,
        "prompt": True,
        "translate": True,
        "long_form": "server",
    }
    with pytest.raises(vt.InvalidInputError) as caught:
        SpeechPreset(**{**base, **fields})
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("preset", "params", "task", "chunking", "field"),
    [
        (VOXTRAL, {"prompt": "Hi"}, "transcribe", "auto", "prompt"),
        (VOXTRAL, {}, "translate", "auto", "task"),
        (VOXTRAL, {"response_format": "srt"}, "transcribe", "auto", "response_format"),
        (QWEN3_ASR, {"response_format": "verbose_json"}, "transcribe", "auto", "response_format"),
        (
            QWEN3_ASR,
            {"timestamp_granularities": ["segment"]},
            "transcribe",
            "auto",
            "timestamp_granularities",
        ),
        (QWEN3_ASR, {}, "transcribe", "sequential", "chunking"),
    ],
)
def test_what_a_model_refuses_is_refused_before_sending(
    preset: SpeechPreset, params: dict[str, Any], task: Any, chunking: Any, field: str
) -> None:
    with pytest.raises(vt.InvalidInputError) as caught:
        check_preset(preset, TranscribeParams(**params), transcription.chunking_options(chunking), task=task)
    assert caught.value.field == field
    assert preset.name in str(caught.value) and "preset=" in str(caught.value)


@pytest.mark.parametrize(
    ("preset", "params", "task"),
    [
        (WHISPER, {"prompt": "Hi", "response_format": "srt"}, "translate"),
        (QWEN3_ASR, {"prompt": "Hi"}, "translate"),
        (GENERIC, {"prompt": "Hi", "response_format": "verbose_json"}, "translate"),
    ],
)
def test_what_a_model_accepts_passes(preset: SpeechPreset, params: dict[str, Any], task: Any) -> None:
    check_preset(preset, TranscribeParams(**params), ChunkingOptions(), task=task)


def test_long_audio_strategy_per_preset() -> None:
    assert transcription.split_seconds(WHISPER, stream=False) == 30.0
    assert transcription.split_seconds(WHISPER, stream=True) == 600.0
    assert transcription.split_seconds(VOXTRAL, stream=False) == 600.0
    assert transcription.split_seconds(GENERIC, stream=False) == 600.0


def test_voxtral_audio_sent_whole_fits_the_served_context() -> None:
    """Voxtral's recording is one prompt of 375 tokens per started 30 s window: 4 windows leave the
    transcript its tokens in 2048, 86 fill 32768 (over vLLM's 10-minute decode limit, which binds)."""
    assert transcription.split_seconds(VOXTRAL, stream=False, max_model_len=2048) == 120.0
    assert transcription.split_seconds(VOXTRAL, stream=True, max_model_len=2048) == 120.0
    assert transcription.split_seconds(VOXTRAL, stream=False, max_model_len=2048, max_tokens=24) == 150.0
    assert transcription.split_seconds(VOXTRAL, stream=False, max_model_len=32768) == 600.0
    assert transcription.split_seconds(VOXTRAL, stream=False, max_model_len=300) == 30.0
    assert transcription.split_seconds(QWEN3_ASR, stream=False, max_model_len=2048) == 120.0
    assert transcription.split_seconds(QWEN3_ASR, stream=False, max_model_len=65536) == 600.0
    assert transcription.split_seconds(GENERIC, stream=False, max_model_len=2048) == 600.0
    assert transcription.split_seconds(transcription.GLM_ASR, stream=False, max_model_len=1024) == 30.0
    assert (
        transcription.split_seconds(transcription.GRANITE_SPEECH, stream=False, max_model_len=1024) == 600.0
    )


def test_a_translation_names_its_target_where_the_model_reads_one() -> None:
    call = vt.calls.CallOptions(extra_body={"seed": 1})
    assert transcription.preset_call(QWEN3_ASR, call, task="translate").extra_body == {
        "to_language": "en",
        "seed": 1,
    }
    mine = vt.calls.CallOptions(extra_body={"to_language": "de"})
    assert transcription.preset_call(QWEN3_ASR, mine, task="translate").extra_body == {"to_language": "de"}
    assert transcription.preset_call(QWEN3_ASR, call, task="transcribe") is call
    assert transcription.preset_call(WHISPER, call, task="translate") is call
