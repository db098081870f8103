"""``ocr_dir`` / ``aocr_dir`` and ``transcribe_dir`` / ``atranscribe_dir``: a folder of PDFs and images
into markdown, a folder of recordings into subtitles and transcripts, resumably (see ``folders``).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from .. import defaults, pdf
from ..adaptive import Concurrency
from ..calls import CallOptions
from ..integrations._common import block_metadata
from ..ocr import OCRParams, ladder
from ..ocr.ladder import PageQuality
from ..ocr.presets import OCRPreset
from ..transcription import (
    Chunking,
    ChunkingOptions,
    TranscribeParams,
    chunking_options,
    segment_keywords,
    speech_preset,
)
from ..types.audio import Transcription
from ..validation import positive_number
from .folders import (
    JOB_FILES,
    Document,
    FolderJob,
    FolderJobReport,
    OutputFolder,
    Unit,
    run_folder_job,
    validate_formats,
)
from .replicas import JobClient, Servers, run_in_own_loop
from .scaffold import JobSettings

PDF_SUFFIXES = frozenset({".pdf"})
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".tif", ".tiff", ".bmp", ".gif"})
OCR_SUFFIXES = PDF_SUFFIXES | IMAGE_SUFFIXES
"""What ``ocr_dir`` takes (any case)."""
AUDIO_SUFFIXES = frozenset(
    {".wav", ".flac", ".mp3", ".ogg", ".oga", ".opus", ".m4a", ".aac", ".webm", ".mp4", ".mkv", ".mov"}
)
"""What ``transcribe_dir`` takes (any case; video files are read for their audio track)."""
TRANSCRIPT_FORMATS = ("srt", "vtt", "json", "txt")
PAGE_SEPARATOR = "\n\n---\n\n"
"""Between a PDF's pages in its markdown file (as ``OCRDocument.markdown``)."""


class _OCRJob(FolderJob):
    kind, suffixes, unit = "ocr", OCR_SUFFIXES, "page"
    own_files = (*JOB_FILES, "pages.jsonl")
    output_suffixes = (".md",)

    def __init__(self, params: OCRParams, dpi: float, quality: PageQuality | None) -> None:
        self._params, self._dpi, self._quality = params, dpi, quality

    @property
    def fingerprint(self) -> dict[str, Any]:
        # Not the ladder's options: a page kept under any of them is the model's valid answer, and a run
        # with others (more tries, another error rate) goes on with the pages left and failed.
        return {**self._params.changed(), "dpi": self._dpi}

    def done(self, record: dict[str, Any]) -> bool:
        """A page that failed every try, or (with the ladder on) one saved truncated, is tried again."""
        return record.get("failure") is None and not (self._quality is not None and record.get("truncated"))

    def rejected(self, document: Document, records: list[dict[str, Any]]) -> str | None:
        """Too many failed pages (over ``max_page_error_rate``): the document's markdown is not written."""
        failed = [(record["page"] or 1, record["failure"]) for record in records if record.get("failure")]
        if self._quality is None or not ladder.document_failed(self._quality, len(failed), len(records)):
            return None
        return ladder.failed_pages_message(failed, len(records), self._quality.max_page_error_rate)

    def max_bytes(self, document: Document) -> int | None:
        """An image is capped (``defaults.IMAGE_MAX_BYTES``); a PDF is read page by page."""
        return None if _is_pdf(document.path) else defaults.IMAGE_MAX_BYTES

    def units(self, document: Document) -> list[Unit]:
        if not _is_pdf(document.path):
            return [1]
        with pdf.PDFIUM_LOCK:
            opened = pdf.open_pdf(document.path)
            try:
                pages = len(opened)
                pdf.check_page_sizes(opened, range(1, pages + 1), self._dpi)
            finally:
                opened.close()
        return list(range(1, pages + 1))

    async def process(self, client: JobClient, document: Document, unit: Unit) -> dict[str, Any]:
        image: Any = document.path
        source = None
        if unit is not None and _is_pdf(document.path):
            source = document.path
            image = await _render_page(document.path, unit or 1, self._dpi)
        page = await client._ocr_page(
            image, self._params, CallOptions(), self._quality, source=source, page=unit or 1
        )
        result = page.result
        return {
            "document": document.relative,
            "page": unit,
            "markdown": result.markdown,
            "blocks": [block_metadata(block) for block in result.blocks],
            "image_size": list(result.image_size) if result.image_size is not None else None,
            "truncated": result.truncated,
            "finish_reason": result.finish_reason,
            "model": result.model,
            "preset": result.preset,
            "metadata": result.metadata,
            "usage": (page.tries_usage or result.usage).model_dump(),
            "tries": page.tries,
            "rotation": page.rotation,
            "failure": page.failure,
            "fallback": page.fallback,
        }

    def render(self, document: Document, records: list[dict[str, Any]]) -> dict[str, bytes]:
        markdown = PAGE_SEPARATOR.join(record["markdown"] for record in records)
        return {".md": markdown.encode() + b"\n"}

    def finish(self, out: OutputFolder, done: Iterator[tuple[Document, list[dict[str, Any]]]]) -> None:
        """``OUT/pages.jsonl``: every page of every finished document, in order (streamed, renamed)."""
        out.write_chunks(
            "pages.jsonl", (orjson.dumps(record) + b"\n" for _, records in done for record in records)
        )


def _is_pdf(path: Path) -> bool:
    """A PDF by its first bytes, whatever its suffix (a ``.pdf`` that is not one fails to open)."""
    if path.suffix.lower() in PDF_SUFFIXES:
        return True
    with path.open("rb") as handle:
        return handle.read(5) == b"%PDF-"


async def _render_page(path: Path, page: int, dpi: float) -> Any:
    """One PDF page as a PIL image, rendered in a worker thread."""
    from ..offload import async_offload

    def render() -> Any:
        _, pages = pdf.render_pages(path, [page], dpi)
        for _, image in pages:
            return image
        return None  # pragma: no cover - render_pages yields the page asked for

    return await async_offload(render)


class _TranscribeJob(FolderJob):
    kind, suffixes, unit = "transcribe", AUDIO_SUFFIXES, "file"

    def __init__(
        self, params: TranscribeParams, translate: bool, formats: Sequence[str], chunking: ChunkingOptions
    ) -> None:
        self._params, self._translate, self._formats = params, translate, formats
        self._chunking = chunking

    @property
    def output_suffixes(self) -> tuple[str, ...]:
        return tuple(f".{fmt}" for fmt in self._formats)

    @property
    def fingerprint(self) -> dict[str, Any]:
        # The chunking joins the fingerprint only when it is not the default: earlier runs resume.
        chunking = {} if self._chunking == ChunkingOptions() else {"chunking": repr(self._chunking)}
        return {**self._params.changed(), "translate": self._translate, **chunking}

    def max_bytes(self, document: Document) -> int | None:
        return defaults.AUDIO_MAX_FILE_BYTES

    def units(self, document: Document) -> list[Unit]:
        return [None]

    def process(self, client: JobClient, document: Document, unit: Unit) -> Awaitable[dict[str, Any]]:
        return self._transcript(client, document)

    async def _transcript(self, client: JobClient, document: Document) -> dict[str, Any]:
        """The recording's transcript, with timed segments where the model gives them (a model without,
        such as Voxtral, gives its text: SRT and VTT then hold one cue)."""
        method = client.translate if self._translate else client.transcribe
        preset = speech_preset(await client.server_info(), client.model)
        keywords = segment_keywords(self._params) if preset.segments is not False else self._params.keywords()
        return await _transcript_record(method(document.path, chunking=self._chunking, **keywords))

    def render(self, document: Document, records: list[dict[str, Any]]) -> dict[str, bytes]:
        result = Transcription.model_validate(records[0])
        rendered = {"srt": result.to_srt, "vtt": result.to_vtt, "json": result.to_json, "txt": result.to_text}
        return {f".{fmt}": rendered[fmt]().rstrip("\n").encode() + b"\n" for fmt in self._formats}

    def finish(self, out: OutputFolder, done: Iterator[tuple[Document, list[dict[str, Any]]]]) -> None:
        """Nothing: each recording's files are all its outputs."""


async def _transcript_record(call: Awaitable[Transcription]) -> dict[str, Any]:
    record: dict[str, Any] = (await call).model_dump(mode="json", exclude_none=True)
    return record


async def aocr_dir(
    client: Servers,
    source: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    params: OCRParams | None = None,
    preset: str | OCRPreset | None = None,
    quality: PageQuality | None = ladder.DEFAULT_QUALITY,
    dpi: float = defaults.OCR_PDF_DPI,
    concurrency: Concurrency = defaults.JOB_CONCURRENCY,
    resume: bool = True,
    show_progress: bool = False,
    progress_interval: float = defaults.JOB_PROGRESS_INTERVAL,
    retry_replica_after: float = defaults.JOB_REPLICA_RETRY_AFTER,
    give_up_after: float = defaults.JOB_GIVE_UP_AFTER,
) -> FolderJobReport:
    """OCR every PDF and image under a folder into markdown, page by page, resumably.

    Takes ``.pdf``, ``.png``, ``.jpg``/``.jpeg``, ``.webp``, ``.tif``/``.tiff``, ``.bmp`` and ``.gif``
    (any case) in ``source`` and its subfolders (hidden ones skipped). Writes, under ``out``:
    ``<relative path>.md`` per document (its pages joined with ``---``, once every page is done),
    ``pages.jsonl`` (one line per page: ``document``, ``page``, ``markdown``, ``blocks`` with labels and
    pixel boxes, ``image_size``, ``truncated``, ``finish_reason``, ``model``, ``preset``, ``metadata``
    (what the model said of the page besides its text, e.g. olmOCR's rotation and language), ``usage``
    (of every try), and the page-quality ladder's ``tries``, ``rotation``, ``failure``, ``fallback``),
    ``errors.jsonl``
    (``document``, ``page``, ``error``: pages that failed in this run, and documents with too many failed
    pages, ``page`` null) and ``manifest.json``. Every page is saved as it finishes: a run after
    ``kill -9`` or Ctrl-C redoes no finished page; failed pages are tried again. A document the job
    cannot take (its name not UTF-8, its output's name too long for the file system, unreadable, deleted
    during the run) fails alone, listed in ``errors.jsonl``. One run per ``out`` at a time. Async-first:
    ``ocr_dir`` (same arguments) runs this in its own event loop.

    Args:
        client: the server(s): a ``Client``/``AsyncClient``, a root URL, or a list of them (pages go to
            the one with the fewest in flight; all must serve the same model).
        source: the folder of documents; or an fsspec folder URL (``s3://bucket/scans/``: the ``fsspec``
            extra), whose documents are copied to a local cache folder first (changed ones only).
        out: the output folder (made if missing; inside ``source`` is fine: it is skipped). Only files
            the job wrote there are ever overwritten.
        params: the OCR options of every page (``vllm_tasks.OCRParams(prompt="free", max_tokens=2048)``:
            the preset, output tokens per page (a page cut short says ``truncated`` in ``pages.jsonl``),
            the n-gram guard, ``max_side``, ...; see :meth:`AsyncClient.ocr`), checked before any
            request; default: the served model's preset's.
        preset: the OCR model preset (``"deepseek-ocr"``, ``"generic"``, ... or an ``OCRPreset``; see
            ``docs/ocr.md``), as ``params.preset``; default: recognised from the served model.
        quality: the page-quality ladder (``vllm_tasks.ocr.PageQuality``; default: olmOCR's): a page whose
            answer is truncated, over the context or refused by the output format is tried again at
            rising temperatures (rotated where the model says so); a page that fails every try is saved
            with its ``failure`` and its PDF's own text (``fallback``), listed in ``errors.jsonl`` and
            tried again by the next run; a document with more failed pages than ``max_page_error_rate``
            allows gets no markdown file and is listed in ``errors.jsonl``. Not part of the job's
            options: a run with another ladder resumes. ``None``: one try per page, kept whatever it is.
        dpi: PDF rendering resolution.
        concurrency: pages in flight per server, or ``"auto"`` (the default: tuned per server from its
            latencies, reported in ``report.replicas``); a number fixes it.
        resume: continue an earlier run in ``out``; False starts over.
        show_progress: a tqdm bar on a terminal, else a log line every ``progress_interval`` seconds.
        progress_interval: seconds between progress log lines.
        retry_replica_after: seconds a failing server is first set aside (doubling while it fails).
        give_up_after: stop when every server has failed and none answered for this many seconds.

    Returns:
        FolderJobReport.

    Raises:
        InvalidInputError: not a folder, no document in it, two documents with the same output name
            (``a.pdf`` and ``a.png``), an ``out`` that is ``source`` or not a folder, a file in ``out``
            where the job would write that it did not write (checked before any request), a bad option.
        JobError: another run is writing ``out`` (naming its pid).
        JobMismatch: the earlier run in ``out`` served another model or had other OCR options.
        ReplicaMismatch: the servers serve different models.
        APIError: a fatal answer (401, 404, ...), or every server down for ``give_up_after`` seconds.

    Examples:
        >>> report = await aocr_dir(["http://gpu1:8000", "http://gpu2:8000"], "scans", "scans-md")
        >>> report.summary()
        'scans-md: 12/12 file(s) done, 230 page(s)'
    """
    job = _OCRJob(OCRParams.of(params).using(preset), positive_number("dpi", dpi), ladder.quality_of(quality))
    return await run_folder_job(
        job,
        client,
        source,
        out,
        resume=resume,
        settings=JobSettings(
            concurrency, show_progress, progress_interval, retry_replica_after, give_up_after
        ),
    )


async def atranscribe_dir(
    client: Servers,
    source: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    formats: Iterable[str] = ("srt", "json", "txt"),
    params: TranscribeParams | None = None,
    translate: bool = False,
    chunking: Chunking = "auto",
    concurrency: Concurrency = defaults.JOB_CONCURRENCY,
    resume: bool = True,
    show_progress: bool = False,
    progress_interval: float = defaults.JOB_PROGRESS_INTERVAL,
    retry_replica_after: float = defaults.JOB_REPLICA_RETRY_AFTER,
    give_up_after: float = defaults.JOB_GIVE_UP_AFTER,
) -> FolderJobReport:
    """Transcribe (or translate) every audio file under a folder into subtitles and text, resumably.

    Takes ``.wav``, ``.flac``, ``.mp3``, ``.ogg``/``.oga``, ``.opus``, ``.m4a``, ``.aac``, ``.webm``,
    ``.mp4``, ``.mkv`` and ``.mov`` (any case) in ``source`` and its subfolders (hidden ones skipped).
    Writes, under ``out``, ``<relative path>.srt``, ``.json`` and ``.txt`` per file (or the ``formats``
    asked: ``srt``, ``vtt``, ``json``, ``txt``), ``errors.jsonl`` (``document``, ``page`` (null),
    ``error``: files that failed in this run) and ``manifest.json``. Each file is saved as it finishes
    (long files are transcribed as :meth:`AsyncClient.transcribe` does, ``chunking="auto"``: Whisper's
    sequential windows, one file's after another, ``concurrency`` files at once): a run after ``kill -9``
    or Ctrl-C redoes no finished file; failed ones are tried again; formats added later are rendered
    from the saved results without a request. A recording the job cannot take (its name not UTF-8, an
    output's name too long for the file system, unreadable, deleted during the run) fails alone, listed
    in ``errors.jsonl``. One run per ``out`` at a time. Async-first: ``transcribe_dir`` runs this in its
    own loop.

    Args:
        client: the server(s): a ``Client``/``AsyncClient``, a root URL, or a list of them.
        source: the folder of recordings; or an fsspec folder URL (``s3://bucket/calls/``: the ``fsspec``
            extra), whose recordings are copied to a local cache folder first (changed ones only).
        out: the output folder (made if missing). Only files the job wrote there are ever overwritten.
        formats: the files written per recording.
        params: the speech options of every file (``vllm_tasks.TranscribeParams(language="de",
            prompt=..., temperature=...)``; see :meth:`AsyncClient.transcribe`); its ``response_format``
            is the job's (``formats`` says what is written). Default: the server's.
        translate: translate to English (``/v1/audio/translations``) instead.
        chunking: how files over 30 s are transcribed (``"auto"``, ``"sequential"``, ``"client"``,
            ``"server"``, ``ChunkingOptions`` or ``SequentialOptions``; see
            :meth:`AsyncClient.transcribe`); checked before any request. A non-default value is part of
            the job's options (a run with another one does not resume it).
        concurrency: files in flight per server, or ``"auto"`` (the default: tuned per server from its
            latencies, reported in ``report.replicas``); a number fixes it.
        resume: continue an earlier run in ``out``; False starts over.
        show_progress: a tqdm bar on a terminal, else a log line every ``progress_interval`` seconds.
        progress_interval: seconds between progress log lines.
        retry_replica_after: seconds a failing server is first set aside (doubling while it fails).
        give_up_after: stop when every server has failed and none answered for this many seconds.

    Returns:
        FolderJobReport.

    Raises:
        InvalidInputError: not a folder, no audio in it, two files with the same output name, a file
            whose output would be a job file (``manifest.wav`` -> ``manifest.json``), an ``out`` that is
            ``source`` or not a folder, a file in ``out`` where the job would write that it did not
            write (checked before any request), an unknown format, a bad option.
        JobError: another run is writing ``out`` (naming its pid).
        JobMismatch: the earlier run in ``out`` served another model or had other options.
        ReplicaMismatch: the servers serve different models.
        APIError: a fatal answer (401, 404, ...), or every server down for ``give_up_after`` seconds.

    Examples:
        >>> report = await atranscribe_dir("http://localhost:8000", "calls", "calls-text", formats=["srt"])
        >>> report.summary()
        'calls-text: 40/40 file(s) done, 40 file(s)'
    """
    params = TranscribeParams.of(params)
    segment_keywords(params)  # refuses a response_format: the job writes every format from the segments
    job = _TranscribeJob(
        params,
        bool(translate),
        validate_formats(list(formats), TRANSCRIPT_FORMATS),
        chunking_options(chunking),
    )
    return await run_folder_job(
        job,
        client,
        source,
        out,
        resume=resume,
        settings=JobSettings(
            concurrency, show_progress, progress_interval, retry_replica_after, give_up_after
        ),
    )


ocr_dir = run_in_own_loop(aocr_dir)
ocr_dir.__name__ = ocr_dir.__qualname__ = "ocr_dir"
ocr_dir.__doc__ = """OCR every PDF and image under a folder into markdown, page by page, resumably (sync).

The sync entry point of :func:`aocr_dir`: the same arguments, result and errors, run in its own event
loop (await ``aocr_dir`` from async code).

Examples:
    >>> with vt.Client("http://localhost:8000") as client:
    ...     report = vt.ocr_dir(client, "scans", "scans-md", show_progress=True)
    >>> report.summary()
    'scans-md: 12/12 file(s) done, 230 page(s)'
"""

transcribe_dir = run_in_own_loop(atranscribe_dir)
transcribe_dir.__name__ = transcribe_dir.__qualname__ = "transcribe_dir"
transcribe_dir.__doc__ = """Transcribe every audio file under a folder into .srt/.json/.txt, resumably (sync).

The sync entry point of :func:`atranscribe_dir`: the same arguments, result and errors, run in its own
event loop.

Examples:
    >>> report = vt.transcribe_dir("http://localhost:8000", "calls", "calls-text")
    >>> report.summary()
    'calls-text: 40/40 file(s) done, 40 file(s)'
"""
