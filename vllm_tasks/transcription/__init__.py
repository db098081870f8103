"""Speech-to-text (``/v1/audio/transcriptions`` and ``/v1/audio/translations``): pure code, no I/O.

One module per concern: :mod:`.params` (``TranscribeParams``, ``ChunkingOptions``, checks, the multipart
request), :mod:`.sequential` (Whisper's long-form algorithm: windows decoded one after another),
:mod:`.presets` (what each speech model family accepts and how its long audio goes),
:mod:`.parsing` (answers read into a ``Transcription``), :mod:`.merge` (joining the pieces of
long audio), :mod:`.stream` (the event stream parser), :mod:`.chunking` (splitting long audio
client-side) and :mod:`.vad` (finding speech first: ``ChunkingOptions(vad=VadOptions())``). The
client's flows (``vllm_tasks/_async/audio.py``) call these and run the CPU-bound ones (decoding,
resampling, encoding) through :func:`~vllm_tasks.offload.async_offload`.

What vLLM 0.32 does and this package corrects (measured with whisper-base on the CPU fixture):

- audio over 30 s is split server-side; ``json`` joins the pieces with a double space, a stream ends
  once per piece, and ``verbose_json`` silently drops every piece in which the model emitted no
  timestamp tokens. ``chunking="auto"`` therefore transcribes such audio client-side, in Whisper's
  sequential 30 s windows (:mod:`.sequential`); ``chunking="client"`` cuts it at quiet points up front,
  transcribes the pieces concurrently and merges them (no doubled words or spaces, segment times offset,
  segments covering the whole file).
- the Whisper ``prompt`` is corrupt (vllm#53206: ``<|prev|>`` for ``<|startofprev|>``), no timestamp
  logit rules are applied, ``no_speech_prob`` is ``null``: see :mod:`.sequential`.
- ``srt`` / ``vtt`` are refused (400): they are rendered client-side from ``verbose_json`` segments
  (``Transcription.to_srt``, ``to_vtt``).
- uploads over ``VLLM_MAX_AUDIO_CLIP_FILESIZE_MB`` (25 MiB) are refused: chunking keeps every upload small.
"""

from .chunking import (
    ChunkUpload,
    Requests,
    audible,
    chunk_seconds,
    chunk_upload,
    complete_pieces,
    log_server_chunking,
    measure,
    next_request,
    next_wave,
    parse_pieces,
    pieces_missing_text,
    plan_chunks,
    should_split,
    stream_requests,
    wave_results,
)
from .merge import ChunkResult, complete_segments, merge_chunks, merge_texts, overlap_words, text_missing
from .params import (
    CHUNKING_MODES,
    PATHS,
    RESPONSE_FORMATS,
    SERVER_CHUNK_SECONDS,
    TASK_NAMES,
    TEMPERATURES,
    Chunking,
    ChunkingMode,
    ChunkingOptions,
    SequentialOptions,
    ServerFormat,
    Task,
    TranscribeParams,
    build_request,
    check_server,
    chunking_options,
    diarized_chunking,
    form_fields,
    segment_keywords,
    server_format,
    stream_chunking,
    validate,
)
from .parsing import clean_text, keep_audio, parse_body, parse_response
from .presets import (
    GENERIC,
    GLM_ASR,
    GRANITE_SPEECH,
    PRESETS,
    QWEN3_ASR,
    VOXTRAL,
    WHISPER,
    Prepared,
    PresetChoice,
    SpeechPreset,
    check_preset,
    long_form,
    preset_call,
    preset_named,
    speech_preset,
    split_seconds,
)
from .sequential import (
    Attempt,
    SampleReader,
    SequentialDecoder,
    Window,
    compression_ratio,
    empty_decode,
    window_logprob,
    window_upload,
)
from .stream import StreamParser
from .vad import SpeechMap, VadOptions, find_speech, keep_speech, on_timeline

__all__ = [
    "CHUNKING_MODES",
    "GENERIC",
    "GLM_ASR",
    "GRANITE_SPEECH",
    "PATHS",
    "PRESETS",
    "QWEN3_ASR",
    "RESPONSE_FORMATS",
    "SERVER_CHUNK_SECONDS",
    "TASK_NAMES",
    "TEMPERATURES",
    "VOXTRAL",
    "WHISPER",
    "Attempt",
    "ChunkResult",
    "ChunkUpload",
    "Chunking",
    "ChunkingMode",
    "ChunkingOptions",
    "Prepared",
    "PresetChoice",
    "Requests",
    "SampleReader",
    "SequentialDecoder",
    "SequentialOptions",
    "ServerFormat",
    "SpeechMap",
    "SpeechPreset",
    "StreamParser",
    "Task",
    "TranscribeParams",
    "VadOptions",
    "Window",
    "audible",
    "build_request",
    "check_preset",
    "check_server",
    "chunk_seconds",
    "chunk_upload",
    "chunking_options",
    "clean_text",
    "complete_pieces",
    "complete_segments",
    "compression_ratio",
    "diarized_chunking",
    "empty_decode",
    "find_speech",
    "form_fields",
    "keep_audio",
    "keep_speech",
    "log_server_chunking",
    "long_form",
    "measure",
    "merge_chunks",
    "merge_texts",
    "next_request",
    "next_wave",
    "on_timeline",
    "overlap_words",
    "parse_body",
    "parse_pieces",
    "parse_response",
    "pieces_missing_text",
    "plan_chunks",
    "preset_call",
    "preset_named",
    "segment_keywords",
    "server_format",
    "should_split",
    "speech_preset",
    "split_seconds",
    "stream_chunking",
    "stream_requests",
    "text_missing",
    "validate",
    "wave_results",
    "window_logprob",
    "window_upload",
]
