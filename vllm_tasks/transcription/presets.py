"""Speech model presets: what each speech-to-text model family served by vLLM accepts, and how its long
audio is transcribed. Data, chosen once per call from the served model's name (or given by the caller).

Each fact is read from vLLM 0.32's model code (``vllm/model_executor/models/<family>.py``: the class's
``supports_segment_timestamp``, what ``get_generation_prompt`` reads, ``get_speech_to_text_config``) and
checked on the CPU fixtures where one exists (docs/speech-to-text.md, "Models").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

from .. import audio as audio_io
from .. import defaults
from ..calls import CallOptions
from ..discovery import model_matches
from ..errors import InvalidInputError
from ..types.server import ServerInfo
from .params import ChunkingOptions, Task, TranscribeParams

LongForm = Literal["sequential", "server"]


@dataclass(frozen=True)
class SpeechPreset:
    """What one speech model family accepts on ``/v1/audio/*``, and how its long audio is transcribed.

    A capability of ``None`` is not known (the generic preset): the request is sent as asked and the
    server decides.

    Attributes:
        name: the preset's name (``transcribe(..., preset="voxtral")``).
        pattern: a regular expression (case-insensitive) matched against the served model's name and its
            ``/v1/models`` root, e.g. ``mistralai/Voxtral-Mini-3B-2507``.
        segments: the server answers ``verbose_json`` with timed segments (only Whisper in vLLM 0.32; the
            others answer 400), which ``srt``/``vtt``, ``timestamp_granularities`` and
            ``chunking="sequential"`` need.
        prompt: the model reads ``prompt`` (Voxtral's, Granite Speech's and GLM-ASR's request builders
            drop it, which would silently change nothing).
        translate: the model serves ``/v1/audio/translations`` (Voxtral's prompt has no task: a
            "translation" would be a transcription).
        long_form: what ``chunking="auto"`` does with audio over ``window_seconds``: ``sequential``
            (Whisper's long-form algorithm, client-side) or ``server`` (the file is sent whole and vLLM
            splits it at quiet points, or the model encodes it in windows itself). Audio over vLLM's
            decode limit (10 minutes) or its upload limit (25 MiB) is split client-side either way.
        window_seconds: the audio the model sees at once.
        translate_to: the ``to_language`` a translation sends where the model reads it (Qwen3-ASR,
            Granite Speech and GLM-ASR write the target language into their prompt; without it they are
            told no target); ``extra_body={"to_language": ...}`` names another.
        window_tokens: prompt tokens per started window of audio, where the whole recording is one
            prompt (Voxtral: 375, 12.5 per second), so that audio sent whole fits the served context
            (``max_model_len``); ``None``: vLLM splits it, each piece a prompt of its own.
        prompt_tokens: the prompt's tokens beside the audio, where ``window_tokens`` is set.
        serve_flags: the ``vllm serve`` flags the model needs (shown in errors and docs).

    Examples:
        >>> VOXTRAL.prompt, VOXTRAL.long_form
        (False, 'server')
    """

    name: str
    pattern: str
    segments: bool | None
    prompt: bool | None
    translate: bool | None
    long_form: LongForm
    window_seconds: float = 30.0
    translate_to: str | None = None
    window_tokens: int | None = None
    prompt_tokens: int = 0
    serve_flags: str = ""

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise InvalidInputError("preset.name", self.name, "must be a non-empty string", "")
        try:
            re.compile(self.pattern)
        except (re.error, TypeError) as error:
            raise InvalidInputError(
                "preset.pattern", self.pattern, f"is not a regular expression: {error}", ""
            ) from error
        if self.long_form not in ("sequential", "server"):
            raise InvalidInputError(
                "preset.long_form", self.long_form, "unknown", "Use 'sequential' or 'server'."
            )
        if self.long_form == "sequential" and not self.segments:
            raise InvalidInputError(
                "preset.long_form",
                "sequential",
                "needs a model with timed segments (segments=True)",
                "Use long_form='server'.",
            )


WHISPER = SpeechPreset(
    name="whisper",
    pattern=r"whisper",
    segments=True,
    prompt=True,
    translate=True,
    long_form="sequential",
)
"""Whisper: long audio in sequential windows, chosen by ``benchmarks/transcribe_accuracy.py`` (the lowest
mean and worst-case WER of the SDK's modes on its four recordings: 7.9% and 11.9%; client-side pieces
11.9% and 21.6%; see docs/speech-to-text.md)."""
VOXTRAL = SpeechPreset(
    name="voxtral",
    pattern=r"voxtral",
    segments=False,
    prompt=False,
    translate=False,
    long_form="server",
    window_tokens=375,
    prompt_tokens=8,  # mistral_common's request: begin, audio markers, lang:xx, [TRANSCRIBE]
    serve_flags="--tokenizer-mode mistral --config-format mistral --load-format mistral",
)
QWEN3_ASR = SpeechPreset(
    name="qwen3-asr",
    pattern=r"qwen3[-_ ]?asr",
    segments=False,
    prompt=True,
    translate=True,
    long_form="server",
    translate_to="en",
    # Served as Qwen3ASRRealtimeGeneration (the same checkpoint), vLLM never splits: the recording is one
    # prompt of 13 tokens per second. The offline class splits at 30 s, where this only costs earlier pieces.
    window_tokens=390,
    prompt_tokens=32,
)
GRANITE_SPEECH = SpeechPreset(
    name="granite-speech",
    pattern=r"granite[-_ ]?speech",
    segments=False,
    prompt=False,
    translate=True,
    long_form="server",
    translate_to="en",
)
GLM_ASR = SpeechPreset(
    name="glm-asr",
    pattern=r"glm[-_ ]?asr",
    segments=False,
    prompt=False,
    translate=True,
    long_form="server",
    translate_to="en",
    # vLLM takes up to 655 s (the processor's max_audio_len) as one prompt of 12.5 tokens a second.
    window_tokens=375,
    prompt_tokens=20,
)
GENERIC = SpeechPreset(
    name="generic",
    pattern=r"(?!)",
    segments=None,
    prompt=None,
    translate=None,
    long_form="server",
)
"""Any other speech model: requests are sent as asked, long audio whole (vLLM splits it)."""

PRESETS: tuple[SpeechPreset, ...] = (WHISPER, VOXTRAL, QWEN3_ASR, GRANITE_SPEECH, GLM_ASR, GENERIC)
"""Every speech preset, in the order a served model is matched against them."""

PresetChoice = str | SpeechPreset | None
"""A call's ``preset=``: a preset, a preset's name, or ``None`` (recognised from the served model)."""


def preset_named(name: str, presets: Sequence[SpeechPreset] = PRESETS) -> SpeechPreset:
    """The preset called ``name``.

    Raises:
        InvalidInputError: no preset has that name (the message lists them).

    Examples:
        >>> preset_named("voxtral").name
        'voxtral'
    """
    for preset in presets:
        if preset.name == name:
            return preset
    names = ", ".join(repr(preset.name) for preset in presets)
    raise InvalidInputError(
        "preset", name, "is not a speech preset", f"Use one of {names}, or a SpeechPreset."
    )


def speech_preset(info: ServerInfo, model: str | None, choice: PresetChoice = None) -> SpeechPreset:
    """The preset of a call: ``choice`` when given, else the first whose pattern matches the served
    model's name or root, else :data:`GENERIC`.

    Args:
        info: the server's description (its model cards).
        model: the served model the call names (``None``: the server's first).
        choice: the caller's ``preset=``.

    Raises:
        InvalidInputError: ``choice`` names no preset or is not a :class:`SpeechPreset`.

    Examples:
        >>> from vllm_tasks.types.server import ModelCard
        >>> card = ModelCard(id="voxtral", root="mistralai/Voxtral-Mini-3B-2507")
        >>> info = ServerInfo(base_url="http://h", version=None, models=(card,), routes=None)
        >>> speech_preset(info, None).name, speech_preset(info, None, "whisper").name
        ('voxtral', 'whisper')
    """
    if isinstance(choice, SpeechPreset):
        return choice
    if isinstance(choice, str):
        return preset_named(choice)
    if choice is not None:
        raise InvalidInputError(
            "preset", choice, "must be a preset name or a SpeechPreset", "Pass e.g. preset='whisper'."
        )
    name = model or info.default_model
    for preset in PRESETS:
        if model_matches(info, preset.pattern, name):
            return preset
    return GENERIC


def _refuse(preset: SpeechPreset, field: str, value: object, problem: str, fix: str) -> InvalidInputError:
    return InvalidInputError(field, value, f"{problem} ({preset.name} preset)", fix)


def check_preset(
    preset: SpeechPreset, params: TranscribeParams, options: ChunkingOptions, *, task: Task
) -> None:
    """Refuse, before sending, what the preset's model would refuse or silently ignore.

    Raises:
        InvalidInputError: ``prompt`` for a model that drops it; a translation by a model without one;
            ``verbose_json``/``srt``/``vtt``, ``timestamp_granularities`` or ``chunking="sequential"``
            for a model without timed segments.

    Examples:
        >>> check_preset(WHISPER, TranscribeParams(prompt="Hi"), ChunkingOptions(), task="transcribe")
    """
    other = "Pass preset= to name another model family if this is not the model served."
    if params.prompt is not None and preset.prompt is False:
        raise _refuse(
            preset, "prompt", params.prompt, "the model does not read a prompt", "Drop prompt. " + other
        )
    if task == "translate" and preset.translate is False:
        raise _refuse(
            preset,
            "task",
            "translate",
            "the model does not translate: vLLM would return a transcription",
            "Use transcribe(). " + other,
        )
    if preset.segments is not False:
        return
    if params.response_format in ("verbose_json", "srt", "vtt"):
        raise _refuse(
            preset,
            "response_format",
            params.response_format,
            "the model gives no timed segments (vLLM answers 400 to verbose_json)",
            "Use 'json' or 'text' (word times: aligner=, a forced aligner's client). " + other,
        )
    if params.timestamp_granularities:
        raise _refuse(
            preset,
            "timestamp_granularities",
            list(params.timestamp_granularities),
            "the model gives no timestamps",
            "Drop timestamp_granularities (word times: aligner=, a forced aligner's client). " + other,
        )
    if options.mode == "sequential":
        raise _refuse(
            preset,
            "chunking",
            "sequential",
            "Whisper's long-form algorithm needs timed segments",
            "Use chunking='auto', 'server' or 'client'. " + other,
        )


def split_seconds(
    preset: SpeechPreset, *, stream: bool, max_model_len: int | None = None, max_tokens: int | None = None
) -> float:
    """How long audio may be before ``chunking="auto"`` transcribes it client-side: the model's window
    for a ``sequential`` preset; else vLLM's decode limit, or less where the whole recording is one prompt
    (``window_tokens``) that must fit ``max_model_len`` with ``max_tokens`` (default
    :data:`~vllm_tasks.defaults.AUDIO_OUTPUT_TOKENS`) left to write. A stream: the same without the
    sequential window.

    Examples:
        >>> split_seconds(WHISPER, stream=False), split_seconds(VOXTRAL, stream=False)
        (30.0, 600.0)
        >>> split_seconds(VOXTRAL, stream=False, max_model_len=2048)  # 4 windows of 375 tokens fit
        120.0
    """
    if preset.long_form == "sequential" and not stream:
        return preset.window_seconds
    limit = defaults.AUDIO_STREAM_LIMIT_SECONDS
    if preset.window_tokens and max_model_len:
        room = max_model_len - preset.prompt_tokens - (max_tokens or defaults.AUDIO_OUTPUT_TOKENS)
        windows = max(room // preset.window_tokens, 1)
        limit = min(limit, windows * preset.window_seconds)
    return limit


def long_form(options: ChunkingOptions, preset: SpeechPreset) -> Literal["client", "sequential"]:
    """How audio that is split client-side is transcribed: ``sequential`` windows or ``client`` pieces
    (``auto``: sequential where the preset says so, else pieces).

    Examples:
        >>> long_form(ChunkingOptions(), WHISPER), long_form(ChunkingOptions(), VOXTRAL)
        ('sequential', 'client')
    """
    if options.mode == "auto":
        return "sequential" if preset.long_form == "sequential" else "client"
    return "client" if options.mode == "client" else "sequential"


def preset_call(preset: SpeechPreset, call: CallOptions, *, task: Task) -> CallOptions:
    """The call's options with what the preset adds to each request: a translation's ``to_language``
    where the model reads it (the caller's ``extra_body`` wins).

    Examples:
        >>> preset_call(QWEN3_ASR, CallOptions(), task="translate").extra_body
        {'to_language': 'en'}
    """
    if task != "translate" or preset.translate_to is None:
        return call
    return replace(call, extra_body={"to_language": preset.translate_to, **(call.extra_body or {})})


class Prepared(NamedTuple):
    """A speech call ready to send: its audio, chunking, the upload (``None``: split client-side), the
    model named, its preset and the call's options as the preset completes them."""

    source: audio_io.AudioSource
    options: ChunkingOptions
    upload: audio_io.Upload | None
    model: str | None
    preset: SpeechPreset
    call: CallOptions
