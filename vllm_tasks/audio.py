"""Audio inputs: accepted forms, decoding, mono 16 kHz normalisation, encoding (and WAV for the notebook
player), and chunking long audio.

Accepted inputs (:data:`AudioInput`): a path (``str`` or ``os.PathLike``), ``bytes``, a binary file object,
``(numpy array, sample_rate)``, or an ``http(s)://`` URL (fetched by the client, only when given one).

Decoding uses soundfile (libsndfile: WAV, FLAC, OGG, MP3, ...) and falls back to PyAV (M4A/AAC, video
containers, anything FFmpeg reads); both are optional and imported only when needed
(``pip install 'vllm-tasks[audio]'``; decoding without either raises
:class:`~vllm_tasks.errors.MissingDependency`). Long files are read block by block, so chunking a 2-hour
file holds at most one chunk of samples in memory.

Everything here is synchronous and CPU-bound: ``AsyncClient`` runs it through
:func:`~vllm_tasks.offload.async_offload`.
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
import re
import wave
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
import numpy.typing as npt

from . import defaults, media_files
from .dependencies import require
from .errors import InvalidInputError, MissingDependency

TARGET_RATE = 16_000
"""Whisper's sample rate: audio is mixed to mono and resampled to this before upload or chunking."""

Samples = npt.NDArray[np.float32]
AudioInput = str | os.PathLike[str] | bytes | bytearray | memoryview | IO[bytes] | tuple[Any, int]
"""A path, bytes, a binary file object, ``(numpy array, sample_rate)``, or an http(s) URL string."""

PrepareMode = Literal["auto", "always", "never"]
"""``auto``: decode and normalise when a decoder is installed (else send the bytes as they are);
``always``: decode and normalise, failing without soundfile/PyAV; ``never``: send the bytes unchanged."""

_UPLOAD_AS_IS = {"WAV", "FLAC"}


@dataclass(frozen=True)
class AudioSource:
    """An input resolved to one of: a local ``path``, in-memory ``data``, or decoded ``samples``.

    Attributes:
        name: how messages name it (the path, ``"<bytes>"``, the URL, ...); also the upload filename.
    """

    name: str
    path: Path | None = None
    data: bytes | None = None
    samples: Samples | None = None
    sample_rate: int | None = None

    @property
    def filename(self) -> str:
        """The upload file name (the base name of a path or URL, else ``audio``)."""
        base = os.path.basename(self.name.split("?")[0]) if not self.name.startswith("<") else ""
        return base or "audio"

    def size(self) -> int | None:
        """Bytes to upload as is (file size or data length); ``None`` for samples."""
        if self.path is not None:
            return self.path.stat().st_size
        return len(self.data) if self.data is not None else None

    def read_bytes(self) -> bytes:
        """The raw bytes (a path is read, as a regular file within ``defaults.AUDIO_MAX_FILE_BYTES``);
        samples have none.

        Raises:
            InvalidInputError: ``kind="audio_decode"``: the path no longer names a readable regular file;
                ``kind="argument"``: the file grew over the cap.
        """
        if self.path is not None:
            return media_files.read_regular_file(self.path, "audio", **_PATH_RULES)
        if self.data is None:
            raise ValueError("an array source has no encoded bytes")
        return self.data


@dataclass(frozen=True)
class AudioInfo:
    """What a decoder says about an input before reading it all."""

    sample_rate: int
    channels: int
    duration: float
    """Seconds (0.0 when the container does not say)."""
    format: str
    """Container/codec as the decoder names it: ``WAV``, ``FLAC``, ``MP3``, ``mov,mp4,m4a,...``."""


@dataclass(frozen=True)
class Upload:
    """What goes into the multipart ``file`` part."""

    filename: str
    content: bytes
    content_type: str
    duration: float | None


@dataclass(frozen=True)
class AudioChunk:
    """A piece of a long input, ready to upload.

    Attributes:
        index: 0-based position.
        start: where the uploaded samples begin, in seconds from the start of the file (segment
            times from the server are offset by this).
        own_start: where this chunk's own span begins (``start`` plus the overlap, except for the first).
        end: where it ends (the next chunk's ``own_start``).
        samples: mono float32 at 16 kHz.
        silent: True when the chunk has no audible signal (it is not sent: Whisper invents text for
            silence).
    """

    index: int
    start: float
    own_start: float
    end: float
    samples: Samples
    silent: bool = False


def is_url(audio: object) -> bool:
    """Whether ``audio`` is an http(s) URL string."""
    return isinstance(audio, str) and audio.lower().startswith(("http://", "https://"))


def resolve(audio: AudioInput) -> AudioSource:
    """Classify an input (URLs excluded: fetch them first and pass the bytes with ``name=url``).

    Raises:
        InvalidInputError: ``kind="audio_decode"``: a path that does not exist, cannot be read or names
            no regular file (a folder, a FIFO, a device; see :mod:`vllm_tasks.media_files`), an empty
            input; ``kind="argument"``: an unsupported type, a malformed ``(array, rate)`` pair, a file
            over ``defaults.AUDIO_MAX_FILE_BYTES``.
    """
    if isinstance(audio, tuple):
        return _from_array(audio)
    if isinstance(audio, bytes | bytearray | memoryview):
        data = bytes(audio)
        if not data:
            raise InvalidInputError.audio_decode("<bytes>", "the input is empty (0 bytes)")
        return AudioSource(name="<bytes>", data=data)
    if isinstance(audio, str | os.PathLike):
        path = Path(audio)
        if media_files.check_regular_file(path, "audio", **_PATH_RULES) == 0:
            raise InvalidInputError.audio_decode(str(path), "the file is empty (0 bytes)")
        return AudioSource(name=str(path), path=path)
    if hasattr(audio, "read"):
        name = getattr(audio, "name", None)
        label = str(name) if isinstance(name, str) else "<file object>"
        try:
            content = audio.read()
        except OSError as error:
            raise InvalidInputError.audio_decode(label, f"reading failed: {error}") from error
        if isinstance(content, str):
            raise InvalidInputError("audio", audio, "is a text-mode file", "Open it with mode 'rb'.")
        if not content:
            raise InvalidInputError.audio_decode(label, "the file object returned no bytes")
        return AudioSource(name=label, data=bytes(content))
    raise InvalidInputError(
        "audio",
        audio,
        f"unsupported type {type(audio).__name__}",
        "Pass a path, bytes, a binary file object, (numpy array, sample_rate) or an http(s) URL.",
    )


def from_url_bytes(url: str, data: bytes) -> AudioSource:
    """The source for bytes downloaded from ``url``."""
    if not data:
        raise InvalidInputError.audio_decode(url, "the URL returned no bytes")
    return AudioSource(name=url, data=data)


def _audio_refusal(field: str, path: str, problem: str, fix: str) -> InvalidInputError:
    return InvalidInputError.audio_decode(path, problem)


def _over_audio_cap(field: str, value: object, max_bytes: int, size: str) -> InvalidInputError:
    return InvalidInputError(
        field,
        value,
        f"is larger ({size}) than the cap on audio files of {max_bytes:,} bytes "
        "(defaults.AUDIO_MAX_FILE_BYTES)",
        "Pass an audio file (or cut it into pieces).",
    )


_PATH_RULES: dict[str, Any] = {
    "max_bytes": defaults.AUDIO_MAX_FILE_BYTES,
    "too_large": _over_audio_cap,
    "refused": _audio_refusal,
}
"""How an audio path is checked and read (:mod:`vllm_tasks.media_files`)."""


def _from_array(pair: tuple[Any, int]) -> AudioSource:
    if len(pair) != 2:
        raise InvalidInputError("audio", pair, "a tuple must be (array, sample_rate)", "")
    array, rate = pair
    if isinstance(rate, bool) or not isinstance(rate, int | np.integer) or rate <= 0:
        raise InvalidInputError("audio[1]", rate, "the sample rate must be a positive int", "e.g. 16000")
    check_sample_rate("audio[1]", int(rate))
    samples = np.asarray(array)
    if samples.ndim not in (1, 2) or samples.size == 0:
        raise InvalidInputError(
            "audio[0]", samples.shape, "must be a non-empty 1-D (mono) or 2-D (frames, channels) array", ""
        )
    if np.issubdtype(samples.dtype, np.integer):
        scale = float(np.iinfo(samples.dtype).max) + 1.0
        floats = samples.astype(np.float32) / scale
    elif np.issubdtype(samples.dtype, np.floating):
        floats = samples.astype(np.float32)
    else:
        raise InvalidInputError("audio[0]", samples.dtype, "must hold integer or float samples", "")
    if not np.all(np.isfinite(floats)):
        raise InvalidInputError("audio[0]", "NaN/inf", "samples must be finite", "")
    if floats.ndim == 2 and floats.shape[0] < floats.shape[1] and floats.shape[0] <= 8:
        floats = floats.T  # (channels, frames) given; soundfile's layout is (frames, channels)
    return AudioSource(name="<array>", samples=to_mono(floats), sample_rate=int(rate))


# --------------------------------------------------------------------------------------------------
# Decoders (optional dependencies, imported lazily)
# --------------------------------------------------------------------------------------------------


def _soundfile() -> Any | None:
    """soundfile, or ``None`` when it (or libsndfile) is not installed."""
    try:
        return require("soundfile", "audio", "decoding audio")
    except MissingDependency:
        return None


def _pyav() -> Any | None:
    """PyAV, or ``None`` when it is not installed."""
    try:
        return require("av", "audio", "decoding audio")
    except MissingDependency:
        return None


def have_decoder() -> bool:
    """Whether soundfile or PyAV is importable."""
    return _soundfile() is not None or _pyav() is not None


def _open_target(source: AudioSource) -> str | io.BytesIO:
    if source.path is not None:
        return str(source.path)
    return io.BytesIO(source.data or b"")


def check_sample_rate(field: str, rate: int) -> None:
    """Refuse a sample rate below ``defaults.AUDIO_MIN_SAMPLE_RATE`` (1000 Hz).

    At 1 Hz a few thousand samples are hours of "audio": hundreds of requests for nothing.

    Raises:
        InvalidInputError: naming the rate.

    Examples:
        >>> check_sample_rate("audio[1]", 16000)
    """
    minimum = defaults.AUDIO_MIN_SAMPLE_RATE
    if rate < minimum:
        raise InvalidInputError(
            field,
            rate,
            f"a sample rate of {rate} Hz is below {minimum} Hz, too low for speech",
            "Pass the audio's real sample rate (e.g. 16000), or fix the file's header.",
        )


def info(source: AudioSource) -> AudioInfo:
    """Sample rate, channels, duration and format, read from the header (soundfile, then PyAV).

    Raises:
        InvalidInputError: (``kind="audio_decode"``) neither decoder can read it (the reasons of both are
            in the message).
        InvalidInputError: the sample rate is below ``defaults.AUDIO_MIN_SAMPLE_RATE``.
        MissingDependency: neither soundfile nor PyAV is installed (arrays need none).
    """
    meta = _header(source)
    if meta.sample_rate > 0:  # PyAV may not know it (0): the decoder then decides
        check_sample_rate(f"audio ({source.name})", meta.sample_rate)
    return meta


def _header(source: AudioSource) -> AudioInfo:
    if source.samples is not None:
        rate = source.sample_rate or TARGET_RATE
        return AudioInfo(rate, 1, len(source.samples) / rate, "array")
    reasons: list[str] = []
    sf = _soundfile()
    if sf is not None:
        try:
            meta = sf.info(_open_target(source))
            if meta.frames > 0 and meta.samplerate > 0:
                return AudioInfo(meta.samplerate, meta.channels, meta.frames / meta.samplerate, meta.format)
            reasons.append("soundfile: no audio frames")
        except Exception as error:
            reasons.append(f"soundfile: {_reason(error)}")
    av = _pyav()
    if av is not None:
        try:
            with av.open(_open_target(source)) as container:
                if not container.streams.audio:
                    raise ValueError("no audio stream")
                stream = container.streams.audio[0]
                duration = 0.0
                if stream.duration is not None and stream.time_base is not None:
                    duration = float(stream.duration * stream.time_base)
                elif container.duration is not None:
                    duration = container.duration / 1_000_000
                name = str(container.format.name)
                return AudioInfo(int(stream.rate or 0), int(stream.channels or 1), duration, name)
        except Exception as error:
            reasons.append(f"PyAV: {_reason(error)}")
    if not reasons:
        raise MissingDependency("soundfile", "audio", f"decoding {source.name}")
    raise InvalidInputError.audio_decode(source.name, "; ".join(reasons))


def _reason(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    text = re.sub(r"^Error opening .*?: ", "", text.splitlines()[0])  # soundfile repeats the BytesIO repr
    return text.replace(": '<none>'", "")[:200]


def to_mono(samples: npt.NDArray[Any]) -> Samples:
    """Average the channels of a ``(frames, channels)`` array (1-D arrays are returned as float32)."""
    array = np.asarray(samples, dtype=np.float32)
    if array.ndim == 2 and array.shape[1] > 1:
        # Channel by channel: ``mean(axis=1)`` over a few channels is ten times slower on long audio.
        mixed = array[:, 0].copy()
        for channel in range(1, array.shape[1]):
            mixed += array[:, channel]
        mixed *= np.float32(1.0 / array.shape[1])
        return mixed
    if array.ndim == 2:
        array = array[:, 0]
    return np.ascontiguousarray(array, dtype=np.float32)


class Resampler:
    """Streaming resampler to 16 kHz: low-pass FIR (when downsampling) then linear interpolation.

    Blocks are processed with carried state, so the output of many small blocks equals the output of
    one big block. Good enough for speech recognition (Whisper only looks below 8 kHz).
    """

    def __init__(self, source_rate: int, target_rate: int = TARGET_RATE, taps: int = 63) -> None:
        self.source_rate = source_rate
        self.target_rate = target_rate
        self.step = source_rate / target_rate
        self._pos = 0.0
        self._buffer: Samples = np.zeros(0, dtype=np.float32)
        self._filter: Samples | None = None
        self._tail: Samples = np.zeros(0, dtype=np.float32)
        self._skip = 0  # the filter's delay: leading filtered samples to drop
        if source_rate > target_rate:
            cutoff = 0.45 * target_rate / source_rate  # cycles per source sample
            n = np.arange(taps) - (taps - 1) / 2
            kernel = 2 * cutoff * np.sinc(2 * cutoff * n) * np.hamming(taps)
            self._filter = (kernel / kernel.sum()).astype(np.float32)
            self._tail = np.zeros(taps - 1, dtype=np.float32)
            self._skip = (taps - 1) // 2

    def process(self, block: Samples, *, final: bool = False) -> Samples:
        """Resample the next block; ``final=True`` flushes what is left."""
        if self.source_rate == self.target_rate:
            return np.asarray(block, dtype=np.float32)
        data = np.asarray(block, dtype=np.float32)
        if self._filter is not None:
            padded = np.concatenate([self._tail, data])
            if final:
                padded = np.concatenate([padded, np.zeros((len(self._filter) - 1) // 2, dtype=np.float32)])
            filtered = np.convolve(padded, self._filter, mode="valid").astype(np.float32)
            self._tail = padded[-(len(self._filter) - 1) :]
            if self._skip:
                dropped = min(self._skip, len(filtered))
                filtered = filtered[dropped:]
                self._skip -= dropped
            if not self._buffer.size and not filtered.size:
                return np.zeros(0, dtype=np.float32)
            data = filtered
        buffer = np.concatenate([self._buffer, data])
        last = len(buffer) - (1 if final else 2)
        if last < self._pos or not buffer.size:
            self._buffer = buffer
            return np.zeros(0, dtype=np.float32)
        count = math.floor((last - self._pos) / self.step) + 1
        positions = self._pos + self.step * np.arange(count)
        left = np.floor(positions).astype(np.int64)
        frac = (positions - left).astype(np.float32)
        right = np.minimum(left + 1, len(buffer) - 1)
        out = buffer[left] * (1 - frac) + buffer[right] * frac
        next_pos = self._pos + self.step * count
        drop = min(math.floor(next_pos), len(buffer))
        self._buffer = buffer[drop:]
        self._pos = next_pos - drop
        result: Samples = out.astype(np.float32)
        return result


def iter_samples(
    source: AudioSource, *, block_seconds: float = defaults.AUDIO_DECODE_BLOCK_SECONDS
) -> Iterator[Samples]:
    """Decode ``source`` block by block as mono float32 at 16 kHz (bounded memory).

    A generator: the decoding happens as it is advanced.

    Raises:
        InvalidInputError: (``kind="audio_decode"``) the input cannot be decoded.
        MissingDependency: no decoder is installed (arrays need none), or only soundfile is and it
            cannot read this format (PyAV would).
    """
    if source.samples is not None:
        resampler = Resampler(source.sample_rate or TARGET_RATE)
        step = int((source.sample_rate or TARGET_RATE) * block_seconds)
        for begin in range(0, len(source.samples), step):
            yield resampler.process(source.samples[begin : begin + step])
        yield resampler.process(np.zeros(0, dtype=np.float32), final=True)
        return
    meta = info(source)  # raises InvalidInputError with the reason
    sf = _soundfile()
    if sf is not None and meta.format != "array" and _soundfile_reads(sf, source):
        yield from _soundfile_blocks(sf, source, block_seconds)
        return
    av = _pyav()
    if av is None:
        raise MissingDependency("av", "audio", f"decoding {meta.format} audio ({source.name})")
    yield from _pyav_blocks(av, source)


def _soundfile_reads(sf: Any, source: AudioSource) -> bool:
    try:
        sf.info(_open_target(source))
    except Exception:
        return False
    return True


def _soundfile_blocks(sf: Any, source: AudioSource, block_seconds: float) -> Iterator[Samples]:
    try:
        with sf.SoundFile(_open_target(source)) as handle:
            resampler = Resampler(handle.samplerate)
            frames = max(1, int(handle.samplerate * block_seconds))
            while True:
                block = handle.read(frames, dtype="float32", always_2d=True)
                if not len(block):
                    break
                yield resampler.process(to_mono(block))
            yield resampler.process(np.zeros(0, dtype=np.float32), final=True)
    except InvalidInputError:
        raise
    except Exception as error:
        raise InvalidInputError.audio_decode(source.name, f"soundfile: {_reason(error)}") from error


def _pyav_blocks(av: Any, source: AudioSource) -> Iterator[Samples]:
    try:
        with av.open(_open_target(source)) as container:
            stream = container.streams.audio[0]
            resampler = av.AudioResampler(format="flt", layout="mono", rate=TARGET_RATE)
            for frame in container.decode(stream):
                for out in resampler.resample(frame):
                    yield out.to_ndarray().reshape(-1).astype(np.float32)
            for out in resampler.resample(None):
                yield out.to_ndarray().reshape(-1).astype(np.float32)
    except InvalidInputError:
        raise
    except Exception as error:
        raise InvalidInputError.audio_decode(source.name, f"PyAV: {_reason(error)}") from error


def decode(source: AudioSource) -> Samples:
    """The whole input as mono float32 at 16 kHz.

    Raises:
        InvalidInputError: (``kind="audio_decode"``) the input cannot be decoded, or holds no samples.
    """
    blocks = [block for block in iter_samples(source) if block.size]
    if not blocks:
        raise InvalidInputError.audio_decode(source.name, "no audio samples")
    return np.concatenate(blocks)


# --------------------------------------------------------------------------------------------------
# Encoding and uploads
# --------------------------------------------------------------------------------------------------


def encode(samples: Samples, rate: int = TARGET_RATE) -> tuple[bytes, str, str]:
    """Encode mono samples as FLAC (soundfile) or 16-bit WAV (standard library): ``(bytes, ext, mime)``."""
    clipped = np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0)
    sf = _soundfile()
    if sf is not None:
        buffer = io.BytesIO()
        sf.write(buffer, clipped, rate, format="FLAC", subtype="PCM_16")
        return buffer.getvalue(), "flac", "audio/flac"
    return wav_bytes(clipped, rate), "wav", "audio/wav"


def sniff_audio(data: bytes, name: str = "") -> str:
    """The MIME type of encoded audio, from its first bytes (else from ``name``'s extension)."""
    head = data[:16]
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "audio/wav"
    signatures = ((b"fLaC", "audio/flac"), (b"OggS", "audio/ogg"), (b"ID3", "audio/mpeg"))
    for magic, mime in signatures:
        if head.startswith(magic):
            return mime
    if head[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"):
        return "audio/mpeg"
    if head[4:8] == b"ftyp":
        return "audio/mp4"
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "audio/webm"
    extensions = {".wav": "audio/wav", ".flac": "audio/flac", ".mp3": "audio/mpeg", ".ogg": "audio/ogg"}
    return extensions.get(os.path.splitext(name)[1].lower(), "application/octet-stream")


def wav_bytes(samples: Any, rate: int) -> bytes:
    """16-bit PCM WAV of ``samples`` (1-D mono, or 2-D frames × channels; floats in -1..1 or integers).

    Used for uploads without soundfile (:func:`encode`) and by the notebook's audio player.

    Raises:
        ValueError: an array of another shape.

    Examples:
        >>> wav_bytes(np.zeros(16000, np.float32), 16000)[:4]
        b'RIFF'
    """
    array = np.asarray(samples)
    if array.ndim == 2 and array.shape[0] < array.shape[1] and array.shape[0] <= 8:
        array = array.T  # (channels, frames) given
    if array.ndim not in (1, 2):
        raise ValueError(f"audio samples must be a 1-D or 2-D array, not shape {array.shape}")
    if np.issubdtype(array.dtype, np.integer):
        floats = array.astype(np.float64) / (float(np.iinfo(array.dtype).max) + 1.0)
    else:
        floats = array.astype(np.float64)
    pcm = (np.clip(np.nan_to_num(floats), -1.0, 1.0) * 32767.0).round().astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1 if pcm.ndim == 1 else pcm.shape[1])
        out.setsampwidth(2)
        out.setframerate(int(rate))
        out.writeframes(pcm.tobytes())
    return buffer.getvalue()


def _stem(name: str) -> str:
    stem = os.path.splitext(name)[0]
    return stem or "audio"


_SPLIT_FIX = (
    "Use chunking='auto', 'sequential' or 'client' (sent client-side in small pieces), or raise "
    "ChunkingOptions.size_limit if the server accepts larger uploads."
)


def check_upload_size(source: AudioSource, size_limit: int = defaults.AUDIO_SIZE_LIMIT) -> None:
    """Refuse an input to be uploaded as it is when it is over ``size_limit`` bytes, before reading it.

    Raises:
        InvalidInputError: naming the size and the limit.

    Examples:
        >>> check_upload_size(AudioSource(name="<bytes>", data=b"RIFF..."))
    """
    size = source.size()
    if size is not None and size > size_limit:
        raise InvalidInputError(
            "audio",
            source.name,
            f"is {size} bytes, over the server's upload limit of {size_limit} bytes (vLLM's "
            "VLLM_MAX_AUDIO_CLIP_FILESIZE_MB, 25 MiB by default); it was not read",
            _SPLIT_FIX,
        )


def prepare_upload(
    source: AudioSource, prepare: PrepareMode = "auto", *, size_limit: int = defaults.AUDIO_SIZE_LIMIT
) -> Upload:
    """What to upload for ``source``.

    ``never`` sends the bytes untouched. ``auto``/``always`` check that the audio decodes (so that an
    unreadable file fails here, naming the file and the reason, instead of as a server 400) and send WAV
    or FLAC that is already mono 16 kHz as is; anything else is decoded, mixed to mono, resampled to
    16 kHz and re-encoded (FLAC, or WAV without soundfile). Without soundfile and PyAV, ``auto`` sends
    the bytes untouched and ``always`` raises.

    Inputs sent as they are must fit ``size_limit`` (vLLM refuses larger uploads): a larger one is
    refused before it is read. One decoded whole must be under ``defaults.AUDIO_MAX_DECODED_SECONDS``.

    Raises:
        InvalidInputError: (``kind="audio_decode"``) the input cannot be decoded.
        InvalidInputError: too large to send whole (split it client-side: ``chunking="auto"``).
        MissingDependency: ``prepare="always"`` without a decoder.
    """
    if source.samples is not None:
        content, ext, mime = encode(decode(source))
        return Upload(
            f"{_stem(source.filename)}.{ext}", content, mime, len(source.samples) / (source.sample_rate or 1)
        )
    if prepare == "never" or (prepare == "auto" and not have_decoder()):
        check_upload_size(source, size_limit)
        return Upload(source.filename, source.read_bytes(), "application/octet-stream", None)
    meta = info(source)
    if meta.format.upper() in _UPLOAD_AS_IS and meta.channels == 1 and meta.sample_rate == TARGET_RATE:
        check_upload_size(source, size_limit)
        return Upload(source.filename, source.read_bytes(), f"audio/{meta.format.lower()}", meta.duration)
    if meta.duration > defaults.AUDIO_MAX_DECODED_SECONDS:
        raise InvalidInputError(
            "audio",
            source.name,
            f"is {meta.duration:.0f} s long: over {defaults.AUDIO_MAX_DECODED_SECONDS:.0f} s to decode in "
            "memory and send whole",
            _SPLIT_FIX,
        )
    samples = decode(source)
    content, ext, mime = encode(samples)
    return Upload(f"{_stem(source.filename)}.{ext}", content, mime, len(samples) / TARGET_RATE)


# --------------------------------------------------------------------------------------------------
# Chunking
# --------------------------------------------------------------------------------------------------

FRAME = TARGET_RATE // 50  # 20 ms energy frames
SILENCE_RMS = 1e-3
"""A chunk whose loudest 20 ms frame is below this RMS (about -60 dBFS) counts as silent."""


def quietest_point(samples: Samples, lo: int, hi: int) -> int:
    """The sample index (between ``lo`` and ``hi``) at the centre of the quietest 20 ms frame."""
    lo, hi = max(0, lo), min(len(samples), hi)
    if hi - lo < FRAME:
        return hi
    window = samples[lo:hi]
    frames = len(window) // FRAME
    energy = (window[: frames * FRAME].reshape(frames, FRAME) ** 2).mean(axis=1)
    # The latest of the quietest frames (ties): longer chunks, fewer requests.
    best = frames - 1 - int(np.argmin(energy[::-1]))
    return lo + best * FRAME + FRAME // 2


def peak_rms(samples: Samples) -> float:
    """The RMS of the loudest 20 ms frame (0.0 for no samples)."""
    if not samples.size:
        return 0.0
    frames = len(samples) // FRAME
    if frames == 0:
        return float(np.sqrt((samples**2).mean()))
    return float(np.sqrt((samples[: frames * FRAME].reshape(frames, FRAME) ** 2).mean(axis=1)).max())


def is_silent(samples: Samples) -> bool:
    """Whether no 20 ms frame of ``samples`` reaches :data:`SILENCE_RMS`."""
    if not samples.size:
        return True
    frames = len(samples) // FRAME
    if frames == 0:
        return bool(np.sqrt((samples**2).mean()) < SILENCE_RMS)
    rms = np.sqrt((samples[: frames * FRAME].reshape(frames, FRAME) ** 2).mean(axis=1))
    return bool(rms.max() < SILENCE_RMS)


def iter_chunks(
    blocks: Iterator[Samples],
    *,
    max_seconds: float = defaults.AUDIO_CHUNK_SECONDS,
    search_seconds: float = defaults.AUDIO_CUT_SEARCH_SECONDS,
    overlap_seconds: float = defaults.AUDIO_CHUNK_OVERLAP_SECONDS,
    min_seconds: float = defaults.AUDIO_MIN_CHUNK_SECONDS,
) -> Iterator[AudioChunk]:
    """Split a stream of 16 kHz mono blocks into chunks of at most ``max_seconds`` (overlap included).

    Each cut is placed at the quietest 20 ms frame of the last ``search_seconds`` before the limit, so
    words are rarely cut; the next chunk starts ``overlap_seconds`` before the cut. A tail shorter than
    ``min_seconds`` is appended to the previous chunk's span (not sent again).
    """
    limit = int(max_seconds * TARGET_RATE)
    overlap = int(overlap_seconds * TARGET_RATE)
    search = int(search_seconds * TARGET_RATE)
    if limit <= overlap + search:
        raise InvalidInputError(
            "max_seconds", max_seconds, "must exceed overlap_seconds + search_seconds", "Use e.g. 30."
        )
    buffer: Samples = np.zeros(0, dtype=np.float32)
    buffer_start = 0  # file sample index of buffer[0]
    own_start = 0  # where the current chunk's own span starts
    pending: AudioChunk | None = None  # held back until we know whether a too-short tail follows
    for block in blocks:
        if not block.size:
            continue
        buffer = np.concatenate([buffer, block])
        while len(buffer) > limit:
            cut = quietest_point(buffer, limit - search, limit)
            piece = buffer[:cut]
            if pending is not None:
                yield pending
            index = 0 if pending is None else pending.index + 1
            pending = AudioChunk(
                index,
                buffer_start / TARGET_RATE,
                own_start / TARGET_RATE,
                (buffer_start + cut) / TARGET_RATE,
                piece,
                is_silent(piece),
            )
            own_start = buffer_start + cut
            keep_from = max(0, cut - overlap)
            buffer = buffer[keep_from:]
            buffer_start += keep_from
    total = buffer_start + len(buffer)
    if pending is not None and total - own_start < min_seconds * TARGET_RATE:
        # A sliver after the last cut: the previous chunk's span ends at the end of the file instead.
        yield dataclasses.replace(pending, end=total / TARGET_RATE)
        return
    if pending is not None:
        yield pending
    index = 0 if pending is None else pending.index + 1
    yield AudioChunk(
        index,
        buffer_start / TARGET_RATE,
        own_start / TARGET_RATE,
        total / TARGET_RATE,
        buffer,
        is_silent(buffer),
    )
