"""Splitting long audio client-side (CPU-bound helpers: the async client offloads them): whether to
split, the pieces cut at quiet points, their uploads in waves, their answers read and completed, and the
streamed requests of a long file's pieces."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import httpx
import numpy as np

from .. import audio as audio_io
from ..calls import CallOptions
from ..transport import Request
from ..types.audio import Transcription
from .merge import ChunkResult, complete_segments, text_missing
from .params import SERVER_CHUNK_SECONDS, ChunkingOptions, ServerFormat, Task, TranscribeParams, build_request
from .parsing import parse_response
from .vad import SpeechMap, keep_speech

logger = logging.getLogger("vllm_tasks")

Requests = Iterable[Request]
"""Requests still to send (a stream's further pieces), built lazily."""
_NO_SAMPLES = np.zeros(0, dtype=np.float32)


def measure(source: audio_io.AudioSource, options: ChunkingOptions, prepare: str) -> float | None:
    """The length of ``source`` in seconds where it decides how the audio is sent, else ``None``
    (``server`` mode, ``prepare="never"``, or no decoder installed: the server decides and splits).

    Reads the header (``chunking="client"`` too, so that an undecodable input fails here, before any
    request).

    Raises:
        InvalidInputError: (``kind="audio_decode"``) the input cannot be decoded.
    """
    if options.mode == "server" or prepare == "never":
        return None
    client_side = options.mode in ("client", "sequential") or options.vad is not None
    if not client_side and source.samples is None and not audio_io.have_decoder():
        return None
    return audio_io.info(source).duration


def should_split(
    source: audio_io.AudioSource, duration: float | None, options: ChunkingOptions, *, limit_seconds: float
) -> bool:
    """Whether to transcribe ``source`` client-side (in pieces or sequential windows): always for
    ``client``/``sequential`` and with ``vad``; for ``auto``, when longer than ``limit_seconds`` or over
    the size limit; never when its length was not measured (:func:`measure`).
    """
    if duration is None:
        return False
    if options.mode in ("client", "sequential") or options.vad is not None:
        return True
    size = source.size()
    return duration > limit_seconds or (size is not None and size > options.size_limit)


def plan_chunks(
    source: audio_io.AudioSource,
    options: ChunkingOptions,
    *,
    max_seconds: float,
    overlap_seconds: float,
    speech: SpeechMap | None = None,
) -> Iterator[audio_io.AudioChunk]:
    """The client-side pieces of ``source`` (of its ``speech`` alone when given: times are then those
    of the kept audio), lazily: decoding happens as the iterator is advanced (advance it off the event
    loop, e.g. with :func:`next_wave`).
    """
    return audio_io.iter_chunks(
        keep_speech(audio_io.iter_samples(source), speech),
        max_seconds=max_seconds,
        search_seconds=min(options.search_seconds, max_seconds / 3),
        overlap_seconds=min(overlap_seconds, max_seconds / 4),
    )


def chunk_seconds(options: ChunkingOptions, fmt: ServerFormat) -> float:
    """The longest piece for this server format (shorter when segments are wanted)."""
    return options.segment_max_seconds if fmt == "verbose_json" else options.max_seconds


def chunk_upload(source: audio_io.AudioSource, chunk: audio_io.AudioChunk) -> audio_io.Upload:
    """The upload of one piece: its samples encoded (FLAC, else WAV), named ``<stem>-NNNN.<ext>``."""
    content, ext, mime = audio_io.encode(chunk.samples)
    stem = source.filename.rsplit(".", 1)[0] or "audio"
    rate = audio_io.TARGET_RATE
    return audio_io.Upload(f"{stem}-{chunk.index:04d}.{ext}", content, mime, len(chunk.samples) / rate)


@dataclass(frozen=True)
class ChunkUpload:
    """A piece and what to upload for it (``None``: silent, not sent)."""

    chunk: audio_io.AudioChunk
    upload: audio_io.Upload | None


def next_wave(
    source: audio_io.AudioSource, chunks: Iterator[audio_io.AudioChunk], size: int
) -> list[ChunkUpload]:
    """Decode the next ``size`` pieces and encode the uploads of the audible ones (CPU-bound).

    Waves bound memory for very long files; an empty list means the input is done.
    """
    return [
        ChunkUpload(chunk, None if chunk.silent else chunk_upload(source, chunk))
        for chunk in itertools.islice(chunks, size)
    ]


def audible(wave: Sequence[ChunkUpload]) -> list[tuple[audio_io.AudioChunk, audio_io.Upload]]:
    """The pieces of a wave that are sent, with their uploads."""
    return [(item.chunk, item.upload) for item in wave if item.upload is not None]


def parse_pieces(
    sent: Sequence[tuple[audio_io.AudioChunk, audio_io.Upload]],
    responses: Sequence[httpx.Response],
    params: TranscribeParams,
    *,
    task: Task,
    model: str | None,
) -> dict[int, Transcription]:
    """The transcriptions of sent pieces, by piece index (each piece's duration filled in)."""
    return {
        chunk.index: parse_response(
            response,
            task=task,
            model=model,
            response_format=params.response_format,
            language=params.language,
            duration=chunk.end - chunk.start,
        )
        for (chunk, _), response in zip(sent, responses, strict=True)
    }


def pieces_missing_text(
    sent: Sequence[tuple[audio_io.AudioChunk, audio_io.Upload]], results: Mapping[int, Transcription]
) -> list[tuple[audio_io.AudioChunk, audio_io.Upload]]:
    """The ``verbose_json`` pieces whose segments lost text (:func:`text_missing`; CPU-bound).

    whisper-base sometimes stops emitting timestamp tokens: vLLM's verbose_json then drops the text
    after the last timestamp pair (or all of it). Such pieces are asked again with json.
    """
    return [(chunk, upload) for chunk, upload in sent if text_missing(chunk, results[chunk.index])]


def complete_pieces(
    results: dict[int, Transcription],
    missing: Sequence[tuple[audio_io.AudioChunk, audio_io.Upload]],
    responses: Sequence[httpx.Response],
    params: TranscribeParams,
    *,
    task: Task,
    model: str | None,
) -> None:
    """Give each piece in ``missing`` the whole text of its json answer (:func:`complete_segments`)."""
    for (chunk, _), response in zip(missing, responses, strict=True):
        full = parse_response(response, task=task, model=model, response_format=params.response_format)
        results[chunk.index] = complete_segments(results[chunk.index], full.text, chunk.end - chunk.start)


def wave_results(wave: Sequence[ChunkUpload], results: Mapping[int, Transcription]) -> list[ChunkResult]:
    """The wave's pieces with their transcriptions; only the timings are kept (samples dropped)."""
    return [
        ChunkResult(replace(item.chunk, samples=_NO_SAMPLES), results.get(item.chunk.index)) for item in wave
    ]


def log_server_chunking(name: str, fmt: ServerFormat, duration: float | None) -> None:
    """Warn (log) that vLLM drops segments of long audio it splits itself."""
    if fmt == "verbose_json" and (duration or 0) > SERVER_CHUNK_SECONDS:
        logger.warning(
            "%s: verbose_json on %.0f s of audio with server-side chunking: vLLM drops the pieces in "
            "which the model emitted no timestamps; use chunking='auto' for complete segments",
            name,
            duration,
        )


# --------------------------------------------------------------------------------------------------
# Streams of client-side pieces
# --------------------------------------------------------------------------------------------------


def stream_requests(
    source: audio_io.AudioSource,
    options: ChunkingOptions,
    params: TranscribeParams,
    call: CallOptions,
    *,
    task: Task,
    model: str | None,
    include_usage: bool = False,
    speech: SpeechMap | None = None,
) -> Iterator[Request]:
    """The streamed requests of ``source``'s audible pieces (of its ``speech`` alone when given),
    without overlap (streamed text cannot be taken back), built lazily: advancing the iterator decodes
    and encodes the next piece (CPU-bound: advance it with :func:`next_request` off the event loop).
    """
    chunks = plan_chunks(source, options, max_seconds=options.max_seconds, overlap_seconds=0.0, speech=speech)
    for chunk in chunks:
        if not chunk.silent:
            upload = chunk_upload(source, chunk)
            yield build_request(
                params,
                call,
                upload,
                task=task,
                model=model,
                fmt="json",
                stream=True,
                include_usage=include_usage,
            )


def next_request(requests: Iterator[Request]) -> Request | None:
    """The next request of a lazy iterator (``None`` when done); building it may decode and encode."""
    return next(requests, None)
