"""Speech-to-text options and requests: ``TranscribeParams`` (the form fields a caller gives),
``ChunkingOptions`` (how long audio is split client-side), their checks, and the multipart request of
one upload."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
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
from .vad import VadOptions

Task = Literal["transcribe", "translate"]
PATHS: dict[Task, str] = {"transcribe": "/v1/audio/transcriptions", "translate": "/v1/audio/translations"}
TASK_NAMES: dict[Task, TaskName] = {"transcribe": "transcription", "translate": "translation"}
RESPONSE_FORMATS = ("json", "text", "verbose_json", "srt", "vtt", "diarized_json")
SERVER_CHUNK_SECONDS = 30.0
"""Whisper's window: vLLM splits anything longer server-side."""

ChunkingMode = Literal["auto", "server", "client", "sequential"]
CHUNKING_MODES = ("auto", "server", "client", "sequential")
TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
"""Whisper's and faster-whisper's temperature fallback ladder."""


@dataclass(frozen=True)
class SequentialOptions:
    """Whisper's long-form transcription over HTTP (``chunking="sequential"``): 30 s windows decoded one
    after another, each seeking to the end of the last complete segment of the previous one and
    conditioned on its text, with faster-whisper's temperature fallback. Files are independent: a
    folder job (``transcribe_dir``) still transcribes several recordings at once.

    The defaults are faster-whisper's (``transcribe()``'s keyword arguments of the same names).

    Attributes:
        window_seconds: the audio sent per request (Whisper's window is 30 s).
        search_seconds: a window that does not reach the end of the file ends at the quietest 20 ms
            of its last this-many seconds (0: at exactly ``window_seconds``, as Whisper). vLLM applies
            none of Whisper's timestamp rules, so whisper-base often answers a window without
            timestamps; its text then ends where the window does, which should be a pause.
        condition_on_previous_text: send the previous windows' text as ``prompt``.
        prompt_reset_on_temperature: after a window decoded above this temperature, the prompt starts
            over (faster-whisper's rule).
        prompt_max_words: the prompt keeps at most this many of the latest words (Whisper keeps 223
            tokens, about 170 English words; vLLM counts the prompt in ``--max-model-len``).
        temperatures: the fallback ladder; a window is decoded again at the next temperature while its
            decode fails the thresholds below. ``transcribe(temperature=t)`` uses ``t`` alone.
        compression_ratio_threshold: a decode whose text's zlib compression ratio is above this is a
            loop (``None``: not checked).
        log_prob_threshold: a decode whose average token log-probability is below this failed
            (``None``: not checked).
        no_speech_threshold: with ``avg_logprob`` below ``log_prob_threshold``, a window whose
            ``no_speech_prob`` is above this is silence and skipped (only servers that send
            ``no_speech_prob``: vLLM 0.32 sends ``null``).

    Raises:
        InvalidInputError: a window outside (5, 30] s, a negative or decreasing temperature ladder, an
            empty ladder, a threshold of the wrong sign, ``prompt_max_words`` below 0.

    Examples:
        >>> client.transcribe("talk.mp3", chunking=vt.transcription.SequentialOptions(search_seconds=3))
    """

    window_seconds: float = SERVER_CHUNK_SECONDS
    search_seconds: float = defaults.AUDIO_CUT_SEARCH_SECONDS
    condition_on_previous_text: bool = False
    prompt_reset_on_temperature: float = 0.5
    prompt_max_words: int = 150
    temperatures: tuple[float, ...] = TEMPERATURES
    compression_ratio_threshold: float | None = 2.4
    log_prob_threshold: float | None = -1.0
    no_speech_threshold: float | None = 0.6

    def __post_init__(self) -> None:
        if isinstance(self.window_seconds, bool) or not 5 < self.window_seconds <= SERVER_CHUNK_SECONDS:
            raise InvalidInputError(
                "window_seconds", self.window_seconds, "must be in (5, 30]", "Whisper sees 30 s at a time."
            )
        if isinstance(self.search_seconds, bool) or not 0 <= self.search_seconds <= self.window_seconds / 3:
            raise InvalidInputError(
                "search_seconds",
                self.search_seconds,
                "must be in [0, window_seconds / 3]",
                "E.g. 5 (0: windows of exactly window_seconds).",
            )
        if not isinstance(self.condition_on_previous_text, bool):
            raise InvalidInputError(
                "condition_on_previous_text", self.condition_on_previous_text, "must be True or False", ""
            )
        temperatures = tuple(self.temperatures)
        object.__setattr__(self, "temperatures", temperatures)
        if not temperatures or any(
            isinstance(t, bool) or not isinstance(t, int | float) or not 0 <= t <= 2 for t in temperatures
        ):
            raise InvalidInputError(
                "temperatures", temperatures, "must be one or more numbers in [0, 2]", "E.g. (0.0, 0.2, 0.4)."
            )
        if list(temperatures) != sorted(temperatures):
            raise InvalidInputError("temperatures", temperatures, "must increase", "E.g. (0.0, 0.2, 0.4).")
        if isinstance(self.prompt_max_words, bool) or not isinstance(self.prompt_max_words, int):
            raise InvalidInputError("prompt_max_words", self.prompt_max_words, "must be an integer", "")
        if self.prompt_max_words < 0:
            raise InvalidInputError("prompt_max_words", self.prompt_max_words, "must be >= 0", "")
        if self.compression_ratio_threshold is not None and self.compression_ratio_threshold <= 0:
            raise InvalidInputError(
                "compression_ratio_threshold", self.compression_ratio_threshold, "must be > 0", "E.g. 2.4."
            )
        if self.log_prob_threshold is not None and self.log_prob_threshold > 0:
            raise InvalidInputError(
                "log_prob_threshold", self.log_prob_threshold, "must be <= 0 (a log-probability)", "E.g. -1."
            )
        if self.no_speech_threshold is not None and not 0 <= self.no_speech_threshold <= 1:
            raise InvalidInputError(
                "no_speech_threshold", self.no_speech_threshold, "must be a probability in [0, 1]", "E.g. 0.6"
            )


ServerFormat = Literal["json", "verbose_json", "diarized_json"]


@dataclass(frozen=True)
class ChunkingOptions:
    """How long audio is transcribed.

    Attributes:
        mode: ``auto`` (the default) transcribes long audio as the model's preset says
            (:class:`~vllm_tasks.transcription.SpeechPreset`: Whisper's audio over 30 s ``sequential``;
            the other models' audio whole up to vLLM's limits, then in ``client`` pieces) and audio over
            ``size_limit`` bytes in pieces too; ``sequential`` is Whisper's long-form algorithm
            (30 s windows one after another, each seeking on the previous one's timestamps and
            conditioned on its text: :class:`SequentialOptions`); ``client`` splits at quiet points
            up front and sends the pieces concurrently (faster, less accurate); ``server`` sends the
            file whole and lets vLLM split it.
        max_seconds: ``client``: longest piece sent, overlap included (at most 30, Whisper's window).
        segment_max_seconds: ``client``: the limit when segments are wanted
            (``verbose_json``/``srt``/``vtt``): whisper-base emits no timestamps for many 25-30 s
            pieces, so they are kept shorter.
        search_seconds: ``client``: the cut goes at the quietest 20 ms in this many seconds before the
            limit.
        overlap_seconds: ``client``: each piece starts this much before the previous cut; doubled words
            at the join are removed when merging.
        concurrency: ``client``: pieces in flight at once.
        size_limit: an upload larger than this (bytes) is split even when short.
        sequential: the settings of ``sequential`` (and of ``auto`` when it resolves to it).
        vad: find the speech first and drop the rest before windows or pieces are planned
            (:class:`~vllm_tasks.transcription.vad.VadOptions`, faster-whisper's ``vad_filter``);
            segment times stay on the recording's timeline. With ``vad``, ``auto`` transcribes audio of
            any length client-side (``server`` sends it whole, unfiltered). ``None``: off.

    Raises:
        InvalidInputError: an unknown mode, a limit outside (0, 30], a negative overlap, a
            non-positive search window or concurrency, ``sequential`` not a ``SequentialOptions``,
            ``vad`` not a ``VadOptions``.

    Examples:
        >>> await client.transcribe("talk.mp3", chunking=ChunkingOptions(mode="client", concurrency=4))
    """

    mode: ChunkingMode = "auto"
    max_seconds: float = defaults.AUDIO_CHUNK_SECONDS
    segment_max_seconds: float = defaults.AUDIO_SEGMENT_CHUNK_SECONDS
    search_seconds: float = defaults.AUDIO_CUT_SEARCH_SECONDS
    overlap_seconds: float = defaults.AUDIO_CHUNK_OVERLAP_SECONDS
    concurrency: int = defaults.AUDIO_CONCURRENCY
    size_limit: int = defaults.AUDIO_SIZE_LIMIT
    sequential: SequentialOptions = field(default_factory=SequentialOptions)
    vad: VadOptions | None = None

    def __post_init__(self) -> None:
        if self.mode not in CHUNKING_MODES:
            raise InvalidInputError("chunking", self.mode, "unknown mode", _MODES_FIX)
        for name in ("max_seconds", "segment_max_seconds"):
            value = getattr(self, name)
            if not 0 < value <= SERVER_CHUNK_SECONDS:
                raise InvalidInputError(name, value, "must be in (0, 30]", "Whisper sees 30 s at a time.")
        if self.overlap_seconds < 0 or self.search_seconds <= 0:
            raise InvalidInputError("overlap_seconds", self.overlap_seconds, "must be >= 0", "")
        positive_int("concurrency", self.concurrency)
        if not isinstance(self.sequential, SequentialOptions):
            raise InvalidInputError(
                "sequential",
                type(self.sequential).__name__,
                "must be vllm_tasks.transcription.SequentialOptions",
                "Pass sequential=vllm_tasks.transcription.SequentialOptions(...).",
            )
        if self.vad is not None and not isinstance(self.vad, VadOptions):
            raise InvalidInputError(
                "vad",
                type(self.vad).__name__,
                "must be vllm_tasks.transcription.VadOptions or None",
                "Pass vad=vllm_tasks.transcription.VadOptions(...).",
            )


_MODES_FIX = "Use 'auto', 'sequential', 'client' or 'server'."

Chunking = ChunkingMode | ChunkingOptions | SequentialOptions


def chunking_options(chunking: Chunking) -> ChunkingOptions:
    """The options for a ``chunking`` argument (a mode name, ``ChunkingOptions``, or
    ``SequentialOptions`` for ``mode="sequential"`` with those settings).

    Raises:
        InvalidInputError: an unknown mode.

    Examples:
        >>> chunking_options("server").mode
        'server'
        >>> chunking_options(SequentialOptions(condition_on_previous_text=False)).mode
        'sequential'
    """
    if isinstance(chunking, ChunkingOptions):
        return chunking
    if isinstance(chunking, SequentialOptions):
        return ChunkingOptions(mode="sequential", sequential=chunking)
    if chunking not in CHUNKING_MODES:
        raise InvalidInputError("chunking", chunking, "unknown mode", _MODES_FIX)
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
    and an explicit ``client`` or ``sequential`` is refused. Other formats keep ``options``.

    Raises:
        InvalidInputError: ``chunking="client"`` or ``"sequential"`` with ``response_format="diarized_json"``.

    Examples:
        >>> diarized_chunking(TranscribeParams(response_format="diarized_json"), ChunkingOptions()).mode
        'server'
    """
    if params.response_format != "diarized_json":
        return options
    if options.mode in ("client", "sequential"):
        raise InvalidInputError(
            "chunking",
            options.mode,
            "cannot be combined with diarized_json: speaker labels hold within one request only, so "
            "pieces transcribed apart cannot be merged into one set of speakers",
            "Use chunking='server' (or 'auto', which sends diarized_json audio whole).",
        )
    return replace(options, mode="server")


def stream_chunking(options: ChunkingOptions) -> ChunkingOptions:
    """The chunking of a stream: ``sequential`` is refused (each window's timestamps decide where the next
    one starts, and a stream carries text only); ``auto`` splits past vLLM's decode limit into pieces
    streamed one after another.

    Raises:
        InvalidInputError: ``chunking="sequential"`` (or ``SequentialOptions``) with a stream.

    Examples:
        >>> stream_chunking(ChunkingOptions()).mode
        'auto'
    """
    if options.mode == "sequential":
        raise InvalidInputError(
            "chunking",
            "sequential",
            "cannot be streamed: each window starts where the previous one's last timestamp ends, and a "
            "stream carries text only",
            "Use transcribe(..., chunking='sequential'), or stream with chunking='auto'.",
        )
    return options


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
