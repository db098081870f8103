"""Every tunable of the SDK in one place: batch sizes, concurrency, timeouts and limits.

Task modules, the clients and the CLI read their defaults from here; nothing else holds a literal.
"""

from __future__ import annotations

from typing import Literal

import httpx

# --- Client -----------------------------------------------------------------------------------------
BASE_URL = "http://localhost:8000"
BASE_URL_ENV = "VLLM_TASKS_BASE_URL"
API_KEY_ENV = "VLLM_API_KEY"

TIMEOUT = httpx.Timeout(600.0, connect=10.0)
"""Pooling a large batch or transcribing a long file on a busy server can take minutes."""

TRANSPORT: Literal["auto"] = "auto"
"""The HTTP transport under the client's own ``httpx`` client (``ClientSettings.transport``): urllib3's
pool for ``Client`` where installed and no proxy is set, else httpx's own."""
MAX_RETRIES = 2
RETRY_INITIAL_DELAY = 0.5
RETRY_MAX_DELAY = 8.0
RETRY_AFTER_CAP = 60.0
"""The longest ``Retry-After`` honoured: a server asking for a longer wait ends the retries with its error
(``retry_after`` says what it asked), instead of being retried sooner than it asked."""

HEALTH_POLL_INTERVAL = 1.0
READY_TIMEOUT = 600.0
"""``wait_until_ready()``: a large model can take minutes to load."""
PROBE_TIMEOUT = 30.0
PROBE_CONCURRENCY = 3
"""Task routes probed at once by ``probe()``."""
FETCH_TIMEOUT = 60.0
"""Downloading a user-given image or audio URL client-side: the longest wait for each read."""
FETCH_MAX_BYTES = 256 * 1024 * 1024
"""A user-given URL's body larger than this is refused (``FetchLimits.max_bytes``): an endless body must
not fill the memory."""
FETCH_DEADLINE = 300.0
"""Seconds a whole user-URL download may take, redirects included (``FetchLimits.deadline``): a server
trickling one byte a second must not hold the call forever."""
FETCH_MAX_REDIRECTS = 10
"""Redirects followed when fetching a user-given URL."""
PROCESSOR_CHECK_TIMEOUT = 30.0
"""The one-token request that tells whether DeepSeek-OCR's n-gram processor is loaded."""

# --- Batching (embeddings, scoring) -------------------------------------------------------------------
CONCURRENCY = 4
"""Requests in flight at once when a call is split into several."""
JOB_CONCURRENCY: Literal["auto"] = "auto"
"""Requests in flight per server in the jobs (``embed_file``, ``ocr_dir``, ``transcribe_dir``): ``"auto"``,
a limit tuned per server from vLLM's ``/metrics`` where served, else from its answers' latencies
(``vllm_tasks.adaptive``)."""
EMBED_BATCH_SIZE = 64
"""Inputs per ``/v1/embeddings`` or ``/v2/embed`` request."""
SPARSE_BATCH_SIZE = 16
"""Inputs per ``embed_sparse`` request: each answer row is vocabulary-wide (122 KB of float32 for BERT)."""
EMBED_MAX_BATCH_CHARS = 200_000
"""An embedding batch is also cut when its texts reach this many characters, so a request stays bounded."""
EMBED_BYTES_MAX_BATCH = 24
"""Inputs per ``encoding_format="bytes"`` request once a 502 showed a proxy in front. vLLM puts one
``metadata`` header entry per input (about 110 bytes) in that answer; a default nginx
(``proxy_buffer_size`` 4 KiB) answers 502 "upstream sent too big header" past about 34 entries."""
EMBED_BYTES_HEADER_MAX_BATCH = 512
"""Inputs per ``encoding_format="bytes"`` request at most. vLLM writes one ``metadata`` header entry per
input (about 110-120 bytes) into one header line: ``http.client`` (under urllib3, ``Client``'s default
transport) reads lines of up to 64 KiB, httpx's h11 header blocks of up to 100 KiB; 512 entries stay under
both (a bigger ``batch_size`` is sent as several requests)."""
SCORE_BATCH_SIZE = 128
"""Documents (or pairs) per ``/rerank``, ``/score``, ``/classify`` or ``/pooling`` request."""
SCORE_MAX_REQUEST_BYTES = 8 * 1024 * 1024
"""A scoring request's JSON body stays under this (images make documents large); the Rust front end and
many proxies refuse bodies over 32 MiB."""
LOCATE_MAX_TOKENIZE = 32
"""At most this many ``/tokenize`` calls (the longest inputs) are spent naming an over-long input."""
OFFLOAD_DECODE_BYTES = 1 << 20
"""``AsyncClient`` decodes response bodies larger than this in a worker thread, not on the event loop."""

# --- Jobs ---------------------------------------------------------------------------------------------
EMBED_FILE_CHUNK_ROWS = 4096
"""Rows per checkpointed chunk of ``embed_file`` (one Parquet row group of the output)."""
JOB_MAX_BATCH_TOKENS = 32_768
"""Estimated tokens per request of a job (about 3 characters each), besides ``batch_size``."""
JOB_PROGRESS_INTERVAL = 30.0
"""Seconds between a job's progress log lines when stderr is not a terminal."""
JOB_REPLICA_RETRY_AFTER = 5.0
"""Seconds a failing server of a job is first set aside (doubling while it keeps failing)."""
JOB_GIVE_UP_AFTER = 120.0
"""A job stops when every server has failed and none has answered for this many seconds."""

# --- Speech to text -----------------------------------------------------------------------------------
AUDIO_CONCURRENCY = 8
"""Client-side audio pieces transcribed at once."""
AUDIO_SIZE_LIMIT = 25 * 1024 * 1024
"""vLLM's default ``VLLM_MAX_AUDIO_CLIP_FILESIZE_MB`` (25 MiB)."""
AUDIO_MAX_FILE_BYTES = 3 << 30
"""An audio file path over this (3 GiB) is refused before it is opened: four hours of 48 kHz 16-bit stereo
WAV are 2.6 GiB; a larger "audio file" is most likely not one (a disk image, a sparse file)."""
AUDIO_STREAM_LIMIT_SECONDS = 600.0
"""vLLM's default ``VLLM_MAX_AUDIO_DECODE_DURATION_S``: a stream of longer audio is split client-side."""
AUDIO_OUTPUT_TOKENS = 448
"""Tokens left for the transcript when a whole recording must fit the context as one prompt (Voxtral):
Whisper's decoder length, ample for 30 s of speech."""
AUDIO_CHUNK_SECONDS = 30.0
"""Longest client-side piece, overlap included (Whisper's window)."""
AUDIO_SEGMENT_CHUNK_SECONDS = 20.0
"""Longest piece when segments are wanted: whisper-base emits no timestamps for many 25-30 s pieces."""
AUDIO_CUT_SEARCH_SECONDS = 5.0
"""A cut goes at the quietest 20 ms within this many seconds before the piece's limit."""
AUDIO_CHUNK_OVERLAP_SECONDS = 0.5
"""Each piece starts this much before the previous cut (doubled words are removed when merging)."""
AUDIO_MIN_CHUNK_SECONDS = 0.2
"""A tail shorter than this after the last cut joins the previous piece."""
AUDIO_DECODE_BLOCK_SECONDS = 10.0
"""Audio is decoded and resampled in blocks of this many seconds (bounded memory)."""
AUDIO_MIN_SAMPLE_RATE = 1000
"""Audio at a lower sample rate is refused (a 1 Hz rate makes hours of "audio" from a few samples)."""
AUDIO_MAX_DECODED_SECONDS = 4 * 3600.0
"""Audio sent whole (``chunking="server"``) is decoded in memory first: longer audio (about 0.9 GiB of
16 kHz float32) is refused; client-side chunking decodes it piece by piece instead."""

# --- OCR ----------------------------------------------------------------------------------------------
OCR_MAX_TOKENS = 4096
OCR_PDF_DPI = 144.0
PDF_MAX_PAGE_PIXELS = 100_000_000
"""A PDF page larger than this at the requested dpi (about 400 MB as a bitmap) is refused before rendering."""
OCR_PDF_CONCURRENCY = 4
IMAGE_MAX_SIDE = 4096
"""Images with a longer side are downscaled before upload (DeepSeek-OCR tiles at 1024 px anyway)."""
IMAGE_MAX_BYTES = 64 * 1024 * 1024
"""An image file (a path or a file object) larger than this is refused before it is read
(``kind="image_too_large"``): sent as it is, it would make a request body of over 85 MiB of base64."""

# --- Notebook views (``_repr_html_``) -------------------------------------------------------------------
VIEW_MAX_ROWS = 50
"""Rows a result's HTML view shows (hits, pairs, segments, blocks); the rest are counted, not rendered."""
VIEW_MAX_CELL_CHARS = 300
"""Characters of one document (or segment, block) a table cell shows before it is cut with an ellipsis."""
VIEW_MAX_TEXT_CHARS = 20_000
"""Characters of a transcript or an OCR page's markdown an HTML view shows."""
VIEW_MAX_MEDIA_BYTES = 8 * 1024 * 1024
"""Audio or a page image larger than this is not embedded in an HTML view (a notebook keeps every output)."""
VIEW_MAX_NORM_ROWS = 100_000
"""An embedding view summarises the norms of at most this many vectors (the first ones)."""
VIEW_IMAGE_MAX_SIDE = 1600
"""A page image over ``VIEW_MAX_MEDIA_BYTES`` is shown as a copy this many pixels on its longest side."""
