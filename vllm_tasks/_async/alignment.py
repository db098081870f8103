"""``align`` of the asynchronous client: word timestamps from a forced aligner on ``/pooling``.

The pure parts (words, prompt, request, decoding, windows) are in :mod:`vllm_tasks.transcription.alignment`;
``vllm_tasks/_sync/alignment.py`` is generated from this file by ``scripts/unasync.py``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .. import audio as audio_io
from .. import pooling, tokenizing
from ..audio import AudioInput
from ..calls import CLIENT_DEFAULT, CallOptions, TimeoutLike, resolve_model
from ..errors import InvalidInputError
from ..offload import async_offload
from ..transcription import alignment
from ..types.audio import Alignment, Transcription, TranscriptionWord
from .base import AsyncClientBase
from .fetching import fetch_input


class AsyncAlignmentMethods(AsyncClientBase):
    """``align``: a forced aligner's word timestamps (Qwen3-ForcedAligner on ``/pooling``)."""

    async def align(
        self,
        audio: AudioInput,
        text: str | Sequence[str],
        *,
        language: str | None = None,
        segment_ms: float = alignment.SEGMENT_MS,
        model: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: TimeoutLike = CLIENT_DEFAULT,
    ) -> Alignment:
        """Time each word of a known text in an audio (``POST /pooling``, ``token_classify``) with a forced
        aligner: Qwen3-ForcedAligner served as vLLM's recipe has it::

            vllm serve Qwen/Qwen3-ForcedAligner-0.6B --runner pooling --trust-request-chat-template \\
                --hf-overrides '{"architectures": ["Qwen3ASRForcedAlignerForTokenClassification"]}'

        The text is split into words as transformers splits it (each CJK ideograph alone, punctuation
        dropped); the audio is sent as mono 16 kHz FLAC; the words' part of the prompt is tokenized by the
        server (``/tokenize``) to find its ``<timestamp>`` rows. Times out of order are repaired as
        transformers repairs them, and capped at the audio's end.

        Args:
            audio: a path, bytes, a binary file object, ``(numpy array, sample_rate)`` or an http(s) URL
                (downloaded by the client). Qwen3-ForcedAligner takes up to 5 minutes.
            text: what is said in the audio, or a list of its words (needed for Japanese and Korean,
                which transformers splits with nagisa / soynlp).
            language: ISO code or English name of a language the aligner supports (``zh``, ``en``, ``yue``,
                ``fr``, ``de``, ``it``, ``ja``, ``ko``, ``pt``, ``ru``, ``es``); ``None``: split as above.
            segment_ms: milliseconds per time class (the model's ``timestamp_segment_time``, 80).
            model: the served model (default: the client's, else the server's first).
            extra_body: extra JSON fields merged into the ``/pooling`` request.
            extra_headers: extra headers for this call.
            timeout: per-request timeout (default: the client's).

        Returns:
            Alignment: ``.words`` (one :class:`~vllm_tasks.types.TranscriptionWord` per word: ``word``,
            ``start``, ``end`` in seconds), ``.duration``, ``.to_srt()``, ``.to_vtt()``.

        Raises:
            InvalidInputError: no word in ``text``, Japanese or Korean text as one string, an unsupported
                ``language``, a bad ``segment_ms``; (``kind="audio_decode"``) the audio cannot be decoded.
            BadRequestError: the server was started without ``--trust-request-chat-template`` (its message
                says so), or its model is not a token classifier.
            UnexpectedResponse: (``kind="decode"``) the answer's rows do not hold two ``<timestamp>`` rows
                per word, or hold a value that is not finite.

        Examples:
            >>> alignment = await client.align("fox.wav", "The quick brown fox", language="en")
            >>> [(w.word, w.start, w.end) for w in alignment.words][:2]
            [('The', 0.24, 0.4), ('quick', 0.4, 0.72)]
        """
        call = CallOptions(model, extra_body, extra_headers, timeout)
        words = alignment.split_words(text, language)
        segment = alignment.check_segment_ms(segment_ms)
        samples = await self._aligner_samples(audio, call)
        duration = samples.size / audio_io.TARGET_RATE
        info = await self.server_info()
        name = resolve_model(info, call.model, self.model)
        timed = await self._align_samples(samples, words, segment_ms=segment, model=name, call=call)
        return alignment.alignment_result(
            timed,
            text if isinstance(text, str) else " ".join(text),
            language=alignment.aligner_language(language),
            duration=duration,
            model=name,
        )

    async def _aligner_samples(self, audio: AudioInput, call: CallOptions) -> audio_io.Samples:
        """The input as mono 16 kHz samples (decoded off the event loop; a URL downloaded first)."""
        if audio_io.is_url(audio):
            url = str(audio)
            data = await fetch_input(
                self._transport, url, field="audio", kind="audio_fetch", timeout=call.timeout
            )
            source = audio_io.from_url_bytes(url, data)
        else:
            source = await async_offload(audio_io.resolve, audio)
        return await async_offload(audio_io.decode, source)

    async def _align_samples(
        self,
        samples: audio_io.Samples,
        words: list[str],
        *,
        segment_ms: float,
        model: str | None,
        call: CallOptions,
        offset: float = 0.0,
    ) -> list[TranscriptionWord]:
        """One ``/tokenize`` of the words' part of the prompt and one ``/pooling``: the words' times."""
        encoded, _, mime = await async_offload(audio_io.encode, samples)
        url = f"data:{mime};base64,{base64.b64encode(encoded).decode('ascii')}"
        request = tokenizing.tokenize_request(
            alignment.timestamp_text(words),
            add_special_tokens=False,
            return_token_strs=False,
            model=model,
            call=CallOptions(timeout=call.timeout, extra_headers=call.extra_headers),
        )
        ids = tokenizing.parse_tokenize(await self._transport.send(request)).tokens.tolist()
        wire = pooling.pool_wire_format(await self.server_info(), "auto")
        response = await self._transport.send(
            alignment.align_request(words, url, model=model, encoding_format=wire, call=call)
        )
        result = self._counted(pooling.merge_pool([response], [range(1)], model))
        scores = result.data[0]
        rows = alignment.timestamp_rows(ids, len(words), scores.shape[0] if scores.ndim == 2 else 0)
        duration = samples.size / audio_io.TARGET_RATE
        return alignment.decode_alignment(
            scores, rows, words, segment_ms=segment_ms, duration=duration, offset=offset
        )

    async def _word_times(
        self, audio: AudioInput, result: Transcription, *, language: str | None, call: CallOptions
    ) -> Transcription:
        """``result`` with ``words``: each window of its segments aligned in one request
        (:func:`~vllm_tasks.transcription.alignment.align_windows`)."""
        samples = await self._aligner_samples(audio, call)
        duration = samples.size / audio_io.TARGET_RATE
        name = resolve_model(await self.server_info(), None, self.model)
        words: list[TranscriptionWord] = []
        for window in alignment.align_windows(result, duration):
            first, last = (round(t * audio_io.TARGET_RATE) for t in (window.start, window.end))
            piece = np.ascontiguousarray(samples[first:last])
            if piece.size == 0:
                continue
            split = alignment.split_words(window.text, language)
            words += await self._align_samples(
                piece, split, segment_ms=alignment.SEGMENT_MS, model=name, call=call, offset=window.start
            )
        return alignment.with_words(result, words)


def checked_aligner(aligner: object, language: str | None) -> AsyncAlignmentMethods:
    """``transcribe``'s ``aligner`` argument checked before any request: a client (of this I/O style) and a
    language the aligner supports.

    Raises:
        InvalidInputError: another object, or an unsupported ``language``.
    """
    if not isinstance(aligner, AsyncAlignmentMethods):
        raise InvalidInputError(
            "aligner",
            type(aligner).__name__,
            "is not a client of the same kind as this one",
            "Pass a client of the forced-aligner server (sync for sync, async for async).",
        )
    alignment.aligner_language(language)
    return aligner
