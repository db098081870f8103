"""Speech-to-text options and requests: ``TranscribeParams`` (the form fields a caller gives),
``ChunkingOptions`` (how long audio is split client-side), their checks, and the multipart request of
one upload."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from .. import audio as audio_io
from .. import defaults, gates
from ..calls import CallOptions, TaskParams
from ..errors import InvalidInputError
from ..tasks import TaskName
from ..transport import Request
from ..types.audio import ResponseFormat
from ..types.server import ServerInfo
from ..validation import positive_int

Task = Literal["transcribe", "translate"]
PATHS: dict[Task, str] = {"transcribe": "/v1/audio/transcriptions", "translate": "/v1/audio/translations"}
TASK_NAMES: dict[Task, TaskName] = {"transcribe": "transcription", "translate": "translation"}
RESPONSE_FORMATS = ("json", "text", "verbose_json", "srt", "vtt", "diarized_json")
SERVER_CHUNK_SECONDS = 30.0
"""Whisper's window: vLLM splits anything longer server-side."""

ChunkingMode = Literal["auto", "server", "client"]
ServerFormat = Literal["json", "verbose_json", "diarized_json"]


@dataclass(frozen=True)
class ChunkingOptions:
    """How long audio is split client-side.

    Attributes:
        mode: ``auto`` splits audio over 30 s (or over ``size_limit`` bytes) client-side; ``client``
            always splits; ``server`` sends the file whole and lets vLLM split it.
        max_seconds: longest piece sent, overlap included (at most 30, Whisper's window).
        segment_max_seconds: the limit when segments are wanted (``verbose_json``/``srt``/``vtt``):
            whisper-base emits no timestamps for many 25-30 s pieces, so they are kept shorter.
        search_seconds: the cut goes at the quietest 20 ms in this many seconds before the limit.
        overlap_seconds: each piece starts this much before the previous cut; doubled words at the
            join are removed when merging.
        concurrency: pieces in flight at once.
        size_limit: an upload larger than this (bytes) is split even when short.

    Raises:
        InvalidInputError: an unknown mode, a limit outside (0, 30], a negative overlap, a
            non-positive search window or concurrency.

    Examples:
        >>> await client.transcribe("talk.mp3", chunking=ChunkingOptions(concurrency=4))
    """

    mode: ChunkingMode = "auto"
    max_seconds: float = defaults.AUDIO_CHUNK_SECONDS
    segment_max_seconds: float = defaults.AUDIO_SEGMENT_CHUNK_SECONDS
    search_seconds: float = defaults.AUDIO_CUT_SEARCH_SECONDS
    overlap_seconds: float = defaults.AUDIO_CHUNK_OVERLAP_SECONDS
    concurrency: int = defaults.AUDIO_CONCURRENCY
    size_limit: int = defaults.AUDIO_SIZE_LIMIT

    def __post_init__(self) -> None:
        if self.mode not in ("auto", "server", "client"):
            raise InvalidInputError(
                "chunking", self.mode, "unknown mode", "Use 'auto', 'server' or 'client'."
            )
        for name in ("max_seconds", "segment_max_seconds"):
            value = getattr(self, name)
            if not 0 < value <= SERVER_CHUNK_SECONDS:
                raise InvalidInputError(name, value, "must be in (0, 30]", "Whisper sees 30 s at a time.")
        if self.overlap_seconds < 0 or self.search_seconds <= 0:
            raise InvalidInputError("overlap_seconds", self.overlap_seconds, "must be >= 0", "")
        positive_int("concurrency", self.concurrency)


Chunking = ChunkingMode | ChunkingOptions


def chunking_options(chunking: Chunking) -> ChunkingOptions:
    """The options for a ``chunking`` argument (a mode name or the options themselves).

    Raises:
        InvalidInputError: an unknown mode.

    Examples:
        >>> chunking_options("server").mode
        'server'
    """
    if isinstance(chunking, ChunkingOptions):
        return chunking
    if chunking not in ("auto", "server", "client"):
        raise InvalidInputError("chunking", chunking, "unknown mode", "Use 'auto', 'server' or 'client'.")
    return ChunkingOptions(mode=chunking)


@dataclass(frozen=True)
class TranscribeParams(TaskParams):
    """The speech-to-text options of ``transcribe``, ``translate`` and their streams; each field is their
    keyword argument of the same name (see :meth:`~vllm_tasks.Client.transcribe`). ``transcribe_dir``, the
    LangChain loader and Ray's ``Transcriber`` take one as ``params=``. The checks that need no server
    run when the request is built (:func:`validate`: they depend on the task and on streaming).

    The call's model, ``extra_body``, ``extra_headers`` and ``timeout`` travel apart, in
    :class:`~vllm_tasks.calls.CallOptions`.

    Examples:
        >>> params = vt.TranscribeParams(language="de", temperature=0.0)
        >>> client.translate("interview.mp3", **params.keywords()).text
        >>> vt.transcribe_dir(client, "calls", "calls-text", params=params)
    """

    language: str | None = None
    prompt: str | None = None
    response_format: ResponseFormat = "json"
    temperature: float | None = None
    timestamp_granularities: Sequence[str] | None = None
    use_beam_search: bool | None = None
    n: int | None = None
    length_penalty: float | None = None
    seed: int | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    max_completion_tokens: int | None = None
    vllm_xargs: Mapping[str, Any] | None = None


def segment_keywords(params: TranscribeParams, field: str = "params") -> dict[str, Any]:
    """The keyword arguments of a ``transcribe``/``translate`` call whose caller needs the timed segments
    (a folder job, a loader, Ray's ``segments_column``): ``params``' with ``response_format`` set to
    ``verbose_json``.

    Raises:
        InvalidInputError: ``params`` sets another ``response_format`` (the caller's own output decides).

    Examples:
        >>> segment_keywords(TranscribeParams(language="de"))
        {'language': 'de', 'response_format': 'verbose_json'}
    """
    if params.response_format != "json":
        raise InvalidInputError(
            f"{field}.response_format",
            params.response_format,
            "is set here: the segments are needed, and every output is rendered from them",
            "Drop response_format from the params.",
        )
    return {**params.keywords(), "response_format": "verbose_json"}


# --------------------------------------------------------------------------------------------------
# Request building
# --------------------------------------------------------------------------------------------------


def validate(params: TranscribeParams, *, task: Task, stream: bool) -> None:
    """Client-side checks that need no server.

    Raises:
        InvalidInputError: unknown ``response_format``, beam search with streaming, ``n`` without beam
            search, a format a stream cannot produce, ``diarized_json`` for a translation, bad
            ``timestamp_granularities``.

    Examples:
        >>> validate(TranscribeParams(response_format="srt"), task="transcribe", stream=False)
    """
    if params.response_format not in RESPONSE_FORMATS:
        raise InvalidInputError(
            "response_format", params.response_format, "unknown format", f"Use one of {RESPONSE_FORMATS}."
        )
    if params.response_format == "diarized_json" and task == "translate":
        raise InvalidInputError(
            "response_format",
            "diarized_json",
            "translations have no speaker segments (vLLM allows diarized_json on transcriptions only)",
            "Use transcribe(..., response_format='diarized_json'), or another format for translate().",
        )
    if stream and params.use_beam_search:
        raise InvalidInputError(
            "use_beam_search",
            True,
            "cannot be combined with streaming (vLLM answers 400)",
            "Use transcribe() for beam search, or drop use_beam_search.",
        )
    if stream and params.response_format not in ("json", "text"):
        raise InvalidInputError(
            "response_format",
            params.response_format,
            "a stream only carries text",
            "Stream with 'json'/'text', or use transcribe() for segments, speakers, SRT and VTT.",
        )
    if params.n is not None and params.n != 1 and not params.use_beam_search:
        raise InvalidInputError("n", params.n, "is the beam width; vLLM ignores it without beam search", "")
    if params.timestamp_granularities is not None:
        _validate_granularities(params.timestamp_granularities, task)


def _validate_granularities(granularities: Sequence[str], task: Task) -> None:
    if isinstance(granularities, str):
        raise InvalidInputError("timestamp_granularities", granularities, "must be a list", "")
    if task == "translate":
        raise InvalidInputError("timestamp_granularities", granularities, "translations have none", "")
    for item in granularities:
        if item not in ("word", "segment"):
            raise InvalidInputError("timestamp_granularities", item, "unknown", "Use 'word' or 'segment'.")


def diarized_chunking(params: TranscribeParams, options: ChunkingOptions) -> ChunkingOptions:
    """The chunking of a call: ``diarized_json`` audio is always sent whole.

    Speaker labels hold within one request only (``S01`` of one piece need not be ``S01`` of the
    next), so pieces transcribed apart cannot be merged into one set of speakers: ``auto`` becomes
    ``server`` for ``diarized_json`` (the server's own limits apply: 25 MiB, 600 s of audio by default)
    and an explicit ``client`` is refused. Other formats keep ``options``.

    Raises:
        InvalidInputError: ``chunking="client"`` with ``response_format="diarized_json"``.

    Examples:
        >>> diarized_chunking(TranscribeParams(response_format="diarized_json"), ChunkingOptions()).mode
        'server'
    """
    if params.response_format != "diarized_json":
        return options
    if options.mode == "client":
        raise InvalidInputError(
            "chunking",
            "client",
            "cannot be combined with diarized_json: speaker labels hold within one request only, so "
            "pieces transcribed apart cannot be merged into one set of speakers",
            "Use chunking='server' (or 'auto', which sends diarized_json audio whole).",
        )
    return replace(options, mode="server")


def check_server(params: TranscribeParams, info: ServerInfo) -> None:
    """Version gates for the request's features.

    Raises:
        UnsupportedByServer: beam search on vLLM < 0.18.0; ``diarized_json`` on vLLM < 0.27.0.
    """
    features = []
    if params.use_beam_search:
        features.append("transcription_beam_search")
    if params.response_format == "diarized_json":
        features.append("diarized_json")
    gates.require(info, features)


def _form_value(value: Any) -> str | list[str]:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return json.dumps(dict(value))
    if isinstance(value, list | tuple):
        return [str(_form_value(item)) for item in value]
    return str(value)


def server_format(response_format: ResponseFormat) -> ServerFormat:
    """What to ask vLLM for: segments for verbose_json/srt/vtt, speaker segments for diarized_json,
    else json (``text`` also answers JSON).

    Examples:
        >>> server_format("srt")
        'verbose_json'
    """
    if response_format == "diarized_json":
        return "diarized_json"
    return "verbose_json" if response_format in ("verbose_json", "srt", "vtt") else "json"


def form_fields(
    params: TranscribeParams,
    call: CallOptions,
    *,
    model: str | None,
    fmt: ServerFormat,
    stream: bool = False,
    include_usage: bool = False,
) -> dict[str, str | list[str]]:
    """The multipart form fields (strings; ``timestamp_granularities[]`` with its brackets); a stream
    asks for the final usage chunk with ``include_usage``.

    ``call.extra_body`` is merged last (dicts sent as JSON).

    Examples:
        >>> form_fields(TranscribeParams(language="en"), CallOptions(), model="whisper", fmt="json")
        {'model': 'whisper', 'language': 'en', 'response_format': 'json'}
    """
    fields: dict[str, Any] = {
        "model": model,
        "language": params.language,
        "prompt": params.prompt,
        "response_format": fmt,
        "temperature": params.temperature,
        "use_beam_search": params.use_beam_search,
        "n": params.n,
        "length_penalty": params.length_penalty,
        "seed": params.seed,
        "top_p": params.top_p,
        "top_k": params.top_k,
        "min_p": params.min_p,
        "repetition_penalty": params.repetition_penalty,
        "max_completion_tokens": params.max_completion_tokens,
        "vllm_xargs": params.vllm_xargs,
    }
    if params.timestamp_granularities:
        fields["timestamp_granularities[]"] = list(params.timestamp_granularities)
    if stream:
        fields["stream"] = True
        if include_usage:
            fields["stream_include_usage"] = True
    if call.extra_body:
        fields.update(call.extra_body)
    return {key: _form_value(value) for key, value in fields.items() if value is not None}


def build_request(
    params: TranscribeParams,
    call: CallOptions,
    upload: audio_io.Upload,
    *,
    task: Task,
    model: str | None,
    fmt: ServerFormat,
    stream: bool = False,
    include_usage: bool = False,
) -> Request:
    """The multipart ``Request`` for one upload."""
    return Request(
        "POST",
        PATHS[task],
        data=form_fields(params, call, model=model, fmt=fmt, stream=stream, include_usage=include_usage),
        files={"file": (upload.filename, upload.content, upload.content_type)},
        headers=call.extra_headers,
        timeout=call.timeout,
        task=TASK_NAMES[task],
    )
