"""The ``vllm-tasks`` console script: operator tools over the same client.

Exit codes: 0 success, 1 the server answered with an error (``ocr-dir``/``transcribe-dir``: some page
or file failed, listed in OUT/errors.jsonl and retried by the next run), 2 the server could not be
reached, 3 a batch job refused to start or go on (another job's checkpoint, servers serving different
models, a full disk, a refused row with --fail-fast), 64 bad usage, 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Literal, cast

import numpy as np

from . import defaults, media_files
from ._sync.client import Client
from .config import ClientSettings
from .errors import (
    APIConnectionError,
    APIError,
    InsufficientDiskSpace,
    InvalidInputError,
    JobError,
    MissingDependency,
    OCRDocumentFailed,
    UnsupportedByServer,
)
from .jobs.inputs import text_lines
from .ocr import OCRParams
from .ocr.ladder import MAX_PAGE_ERROR_RATE, PageQuality
from .ocr.presets import PRESETS
from .types.audio import ResponseFormat, TranscriptionDelta
from .types.server import ProbeReport, TaskStatus

EXIT_OK = 0
EXIT_SERVER_ERROR = 1
EXIT_UNREACHABLE = 2
EXIT_JOB_REFUSED = 3
EXIT_DISK_FULL = 4
EXIT_DIFFERS = 5  # verify: the server's vectors differ from the reference's
EXIT_USAGE = 64
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``vllm-tasks`` (one sub-command per tool)."""
    parser = argparse.ArgumentParser(prog="vllm-tasks", description=__doc__.splitlines()[0])
    parser.add_argument("--api-key", default=None, help="API key (default: env VLLM_API_KEY)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help=f"seconds per request (default: the client's, {defaults.TIMEOUT.read:g})",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    probe = commands.add_parser("probe", help="show which tasks a server serves, and known pitfalls")
    probe.add_argument("url", nargs="?", default=None, help="server root URL (default: env or localhost)")
    probe.add_argument("--json", action="store_true", help="print the report as JSON")
    rerank = commands.add_parser(
        "rerank", help="rank documents (arguments, or one per line from --file / stdin) for a query"
    )
    rerank.add_argument("query", help="the query")
    rerank.add_argument("documents", nargs="*", help="documents (default: one per line from --file)")
    rerank.add_argument("--url", default=None, help="server root URL (default: env or localhost)")
    rerank.add_argument(
        "--file", default=None, help="read documents from this file, one per line ('-': stdin)"
    )
    rerank.add_argument("--top-n", type=int, default=None, help="print only the best N")
    rerank.add_argument("--model", default=None, help="served model name (default: the server's first)")
    rerank.add_argument("--max-tokens-per-doc", type=int, default=None, help="cut each document to N tokens")
    rerank.add_argument("--json", action="store_true", help="print the result as JSON")
    verify = commands.add_parser(
        "verify", help="does the server's embedding model agree with a local copy of it? (and why not)"
    )
    verify.add_argument("url", nargs="?", default=None, help="server root URL (default: env or localhost)")
    verify.add_argument(
        "--reference", required=True, help="the model's sentence-transformers directory (vllm-tasks[verify])"
    )
    verify.add_argument("--file", default=None, help="the sample: one text per line (default: built in)")
    verify.add_argument("--model", default=None, help="served model name (default: the server's first)")
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    add_ocr_parser(commands)
    add_transcribe_parser(commands)
    add_embed_parsers(commands)
    add_folder_parsers(commands)
    return parser


EMBED_FILE_OUT = (
    "the output: .npy matrix or .parquet (its folder made if missing; a path or an fsspec URL), or a vector "
    "store: lancedb://PATH#TABLE, qdrant://PATH#COLLECTION (local mode), qdrant+http://HOST:PORT#COLLECTION"
)


def add_embed_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``embed`` and ``embed-file`` sub-commands' arguments."""
    embed = commands.add_parser(
        "embed", help="embed texts: JSON vectors to stdout, or a .npy file with --out"
    )
    embed.add_argument("texts", nargs="*", help="texts (default: one per line from --file)")
    embed.add_argument("--file", default=None, help="read texts from this file, one per line ('-': stdin)")
    embed.add_argument("--out", default=None, help="write a float32 .npy matrix here instead of JSON")
    embed_file = commands.add_parser(
        "embed-file",
        help="embed a text, JSONL, CSV or Parquet file of any size into .npy or Parquet, resumably",
    )
    add_embed_file_ends(embed_file)
    embed_file.add_argument("--input-format", choices=["text", "jsonl", "csv", "parquet"], default=None)
    embed_file.add_argument("--output-format", choices=["npy", "parquet"], default=None)
    embed_file.add_argument(
        "--text-field", default=None, help="the column / JSON key of the text (default text)"
    )
    embed_file.add_argument(
        "--id-field", default=None, help="the column of each row's id (default: row number)"
    )
    embed_file.add_argument(
        "--keep-column", action="append", default=[], help="copy this input column to a Parquet output"
    )
    embed_file.add_argument(
        "--chunk-rows",
        type=int,
        default=defaults.EMBED_FILE_CHUNK_ROWS,
        help="rows saved per checkpoint (default %(default)s)",
    )
    embed_file.add_argument(
        "--max-batch-tokens",
        type=int,
        default=defaults.JOB_MAX_BATCH_TOKENS,
        help="estimated tokens per request (default %(default)s)",
    )
    embed_file.add_argument(
        "--too-long",
        choices=["report", "truncate"],
        default="report",
        help="over-long rows: report them in OUT.errors.jsonl (default) or truncate them",
    )
    embed_file.add_argument("--fail-fast", action="store_true", help="stop at the first refused row")
    embed_file.add_argument(
        "--sparse",
        action="store_true",
        help="sparse vectors (SPLADE, BGE-M3) into sparse_indices/sparse_values Parquet columns",
    )
    embed_file.add_argument(
        "--multi-vector",
        action="store_true",
        help="one vector per token (a token_embed model: ColBERT, BGE-M3) into a token_embeddings "
        "Parquet column",
    )
    embed_file.add_argument(
        "--images", action="store_true", help="rows name images (paths or URLs): CLIP, ColPali"
    )
    add_job_options(embed_file)
    embed.add_argument("--url", default=None, help="server root URL (default: env or localhost)")
    for sub_parser in (embed, embed_file):
        sub_parser.add_argument(
            "--model", default=None, help="served model name (default: the server's first)"
        )
        sub_parser.add_argument("--dimensions", type=int, default=None, help="Matryoshka output width")
        sub_parser.add_argument(
            "--batch-size",
            type=int,
            default=defaults.EMBED_BATCH_SIZE,
            help="texts per request (default %(default)s)",
        )
        sub_parser.add_argument(
            "--concurrency",
            type=job_concurrency,
            default=defaults.JOB_CONCURRENCY if sub_parser is embed_file else defaults.CONCURRENCY,
            help="requests in flight"
            + (", per server" if sub_parser is embed_file else "")
            + ", or auto: tuned from the answers' latencies (default %(default)s)",
        )


def add_embed_file_ends(parser: argparse.ArgumentParser) -> None:
    """``embed-file``'s input and output (paths or fsspec URLs) and ``--work-dir`` for a URL output."""
    parser.add_argument(
        "source",
        help="the input: text (one text per line), .jsonl, .csv or .parquet; a path or an fsspec URL (s3://...)",
    )
    parser.add_argument(
        "--out",
        required=True,
        help=EMBED_FILE_OUT,
    )
    parser.add_argument(
        "--work-dir",
        default=None,
        help="for a URL --out: the local folder of the job's state and output copy (default: a cache folder)",
    )


def job_concurrency(text: str) -> int | Literal["auto"]:
    """A ``--concurrency`` (``embed``, ``embed-file``, the folder jobs): a whole number, or ``auto``.

    Raises:
        argparse.ArgumentTypeError: anything else (argparse prints it as a usage error).

    Examples:
        >>> job_concurrency("auto"), job_concurrency("8")
        ('auto', 8)
    """
    if text == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a whole number nor auto") from None


def _read_text_lines(path: str) -> list[str]:
    """One text per line, split as ``embed-file`` splits (on ``\\n`` only)."""
    if path == "-":
        return list(text_lines(sys.stdin.buffer, "<stdin>"))
    if "\0" in path:
        raise InvalidInputError("--file", path, "cannot be a path (a NUL byte)", "Pass a text file.")
    with open(path, "rb") as handle:  # not media_files: `--file <(command)` is a FIFO, and fine
        return list(text_lines(handle, path))


def run_embed(args: argparse.Namespace, client: Client) -> int:
    """The ``embed`` sub-command: one JSON array per text on stdout, or a ``.npy`` file."""
    texts = list(args.texts) + (_read_text_lines(args.file) if args.file is not None else [])
    if not texts:
        print("vllm-tasks embed: no texts (pass them as arguments or with --file)", file=sys.stderr)
        return EXIT_USAGE
    vectors = client.embed(
        texts, dimensions=args.dimensions, batch_size=args.batch_size, concurrency=args.concurrency
    ).vectors
    if args.out:
        np.save(args.out, vectors)
        print(f"{args.out}: {vectors.shape[0]} x {vectors.shape[1]} float32", file=sys.stderr)
    else:
        for row in vectors:
            print(json.dumps(row.tolist()))
    return EXIT_OK


def run_embed_file(args: argparse.Namespace, client: Client) -> int:
    """The ``embed-file`` sub-command: a resumable job writing ``.npy`` or Parquet (``--sparse``: Parquet
    sparse columns; ``--multi-vector``: a per-token column; ``--images``: rows naming images).

    Raises:
        InvalidInputError: ``--dimensions`` with ``--sparse`` or ``--multi-vector``.
    """
    from .embeddings import EmbedParams
    from .jobs import embed_file
    from .pooling import PoolParams
    from .sparse import SparseEmbedParams

    kind = "sparse" if args.sparse else "multi-vector" if args.multi_vector else None
    if kind is not None and args.dimensions is not None:
        raise InvalidInputError(
            "dimensions", args.dimensions, f"has no meaning for {kind} vectors", "Drop it."
        )
    params: EmbedParams | SparseEmbedParams | PoolParams = EmbedParams(dimensions=args.dimensions)
    if kind is not None:
        params = SparseEmbedParams() if args.sparse else PoolParams()

    with _job_servers(args, client) as servers:
        report = embed_file(
            servers,
            args.source,
            args.out,
            input_format=args.input_format,
            text_field=args.text_field,
            id_field=args.id_field,
            keep_columns=args.keep_column,
            output_format=args.output_format,
            batch_size=args.batch_size,
            max_batch_tokens=args.max_batch_tokens,
            concurrency=args.concurrency,
            chunk_rows=args.chunk_rows,
            too_long=args.too_long,
            fail_fast=args.fail_fast,
            resume=not args.restart,
            show_progress=args.progress,
            progress_interval=args.progress_interval,
            sparse=args.sparse,
            multi_vector=args.multi_vector,
            images=args.images,
            params=params,
            work_dir=args.work_dir,
        )
    print(report.summary(), file=sys.stderr)
    return EXIT_OK


@contextlib.contextmanager
def _job_servers(args: argparse.Namespace, client: Client) -> Iterator[list[Client]]:
    """A job's servers (the command's client, and one per further ``--url``, closed after), with the
    job's log lines (progress, set-aside servers, failures) on stderr while it runs."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("vllm-tasks: %(message)s"))
    jobs_logger = logging.getLogger("vllm_tasks.jobs")
    jobs_logger.addHandler(handler)
    jobs_logger.setLevel(logging.INFO)
    others = [client.with_options(base_url=url) for url in (args.url or [])[1:]]
    try:
        yield [client, *others]
    finally:
        jobs_logger.removeHandler(handler)
        for other in others:
            other.close()


def run_rerank(args: argparse.Namespace, client: Client) -> int:
    """The ``rerank`` sub-command: prints ``score<TAB>index<TAB>document`` lines, best first."""
    documents = list(args.documents)
    if args.file is not None:
        documents.extend(line for line in _read_text_lines(args.file) if line.strip())
    if not documents:
        print("vllm-tasks rerank: no documents (pass them as arguments or with --file)", file=sys.stderr)
        return EXIT_USAGE
    result = client.rerank(
        args.query,
        documents,
        top_n=args.top_n,
        max_tokens_per_doc=args.max_tokens_per_doc,
        max_tokens_per_doc_fallback="client",
    )
    if args.json:
        hits = [{"index": h.index, "score": h.score, "document": h.document} for h in result.results]
        payload = {"model": result.model, "scorer": result.scorer.value, "results": hits}
        print(json.dumps(payload, indent=2, ensure_ascii=False))
    else:
        for hit in result.results:
            print(f"{hit.score:.6f}\t{hit.index}\t{hit.document}")
    return EXIT_OK


def add_job_options(parser: argparse.ArgumentParser) -> None:
    """The options every resumable job takes: ``--url`` (repeated), ``--restart``, ``--progress``."""
    parser.add_argument(
        "--url",
        action="append",
        default=None,
        help="server root URL; repeat it for several servers of one model (default: env or localhost)",
    )
    parser.add_argument("--restart", action="store_true", help="ignore an earlier run, start over")
    parser.add_argument(
        "--progress",
        action="store_true",
        help="a bar on a terminal, else a log line every --progress-interval s",
    )
    parser.add_argument(
        "--progress-interval",
        type=float,
        default=defaults.JOB_PROGRESS_INTERVAL,
        help="seconds between progress lines (default %(default)g)",
    )


def add_ocr_options(parser: argparse.ArgumentParser) -> None:
    """The OCR options of ``ocr`` and ``ocr-dir``: ``--preset``, ``--task``, ``--prompt``, ``--max-tokens``,
    ``--dpi``, and the page-quality ladder's ``--one-try`` and ``--max-page-error-rate``."""
    parser.add_argument(
        "--preset",
        default=None,
        help=f"the OCR model's preset ({', '.join(PRESETS)}; default: recognised from the served model)",
    )
    parser.add_argument(
        "--task", default=None, help="a task of the preset (deepseek-ocr: markdown, ocr, free, figure, ...)"
    )
    parser.add_argument("--prompt", default=None, help="text sent instead of the task's prompt")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help=f"output tokens per page (default: the preset's, {defaults.OCR_MAX_TOKENS} for DeepSeek-OCR)",
    )
    parser.add_argument(
        "--dpi",
        type=float,
        default=defaults.OCR_PDF_DPI,
        help="PDF rendering resolution (default %(default)g)",
    )
    parser.add_argument(
        "--one-try",
        action="store_true",
        help="one request per page, kept whatever it is (default: a truncated or unreadable page is tried "
        "again at rising temperatures, as olmOCR does)",
    )
    parser.add_argument(
        "--max-page-error-rate",
        type=float,
        default=MAX_PAGE_ERROR_RATE,
        help="share of a PDF's pages that may fail every try before the document fails (default %(default)g)",
    )


def ocr_quality(args: argparse.Namespace) -> PageQuality | None:
    """The page-quality ladder the OCR options ask for (``None`` with ``--one-try``)."""
    return None if args.one_try else PageQuality(max_page_error_rate=args.max_page_error_rate)


def add_ocr_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``ocr`` sub-command's arguments."""
    ocr = commands.add_parser(
        "ocr", help="OCR an image or a PDF with an OCR model: markdown to stdout (or --out), boxes to --boxes"
    )
    ocr.add_argument("file", help="an image (PNG, JPEG, ...), a PDF, or an http(s) image URL")
    ocr.add_argument("--url", default=None, help="server root URL (default: env or localhost)")
    ocr.add_argument("--model", default=None, help="served model name (default: the server's first)")
    ocr.add_argument("--pages", default=None, help="PDF pages, e.g. 1-5 or 2,4,7- (default: all)")
    ocr.add_argument("--out", default=None, help="write the markdown here instead of stdout")
    ocr.add_argument(
        "--boxes", default=None, help="save the image with the layout boxes drawn (PDF: NAME-p<page>.png)"
    )
    add_ocr_options(ocr)
    ocr.add_argument(
        "--concurrency",
        type=int,
        default=defaults.OCR_PDF_CONCURRENCY,
        help="PDF pages in flight (default %(default)s)",
    )
    ocr.add_argument("--progress", action="store_true", help="show a progress bar for PDFs (needs tqdm)")


def _boxes_path(template: str, page: int) -> str:
    stem, dot, suffix = template.rpartition(".")
    return f"{stem}-p{page}.{suffix}" if dot else f"{template}-p{page}.png"


def _starts_like_pdf(path: str) -> bool:
    with media_files.open_regular_file(path, "file", max_bytes=None) as handle:
        return handle.read(5) == b"%PDF-"


def ocr_params(args: argparse.Namespace) -> OCRParams:
    """The OCR options of ``ocr`` and ``ocr-dir`` from their arguments.

    Raises:
        InvalidInputError: a bad option (an unknown preset, an empty prompt, ...).
    """
    given = {"preset": args.preset, "task": args.task, "prompt": args.prompt, "max_tokens": args.max_tokens}
    return OCRParams(**{name: value for name, value in given.items() if value is not None})


def run_ocr(args: argparse.Namespace, client: Client) -> int:
    """The ``ocr`` sub-command: markdown of an image or PDF; truncated pages are reported on stderr."""
    import warnings

    from .ocr import OCRTruncatedWarning

    source = args.file
    is_url = source.startswith(("http://", "https://"))
    is_pdf = not is_url and _starts_like_pdf(source)
    if args.pages is not None and not is_pdf:
        print("vllm-tasks ocr: --pages applies to PDFs only", file=sys.stderr)
        return EXIT_USAGE
    options = ocr_params(args).keywords()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OCRTruncatedWarning)  # reported below, once
        if is_pdf:
            document = client.ocr_pdf(
                source,
                pages=args.pages,
                dpi=args.dpi,
                concurrency=args.concurrency,
                show_progress=args.progress,
                quality=ocr_quality(args),
                **options,
            )
            markdown, truncated = document.markdown, document.truncated_pages
            if args.boxes:
                for page in document.pages:
                    page.result.draw().save(_boxes_path(args.boxes, page.page))
        else:
            result = client.ocr(source, **options)
            markdown, truncated = result.markdown, [1] if result.truncated else []
            if args.boxes:
                result.draw().save(args.boxes)
    if truncated:
        where = f"page(s) {', '.join(map(str, truncated))}" if is_pdf else "the image"
        print(f"vllm-tasks ocr: output hit --max-tokens on {where}: incomplete", file=sys.stderr)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(markdown + "\n")
    else:
        print(markdown)
    return EXIT_OK


def add_transcribe_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``transcribe`` sub-command's arguments."""
    stt = commands.add_parser(
        "transcribe", help="transcribe (or translate) an audio file of any length: text, SRT, VTT or JSON"
    )
    stt.add_argument("file", help="an audio or video file (WAV, FLAC, MP3, OGG, M4A, ...) or an http(s) URL")
    stt.add_argument("--url", default=None, help="server root URL (default: env or localhost)")
    stt.add_argument("--model", default=None, help="served model name (default: the server's first)")
    stt.add_argument(
        "--format",
        default="text",
        choices=["text", "srt", "vtt", "json", "verbose_json", "diarized_json"],
        help="output format (default text); srt/vtt are rendered from the server's segments; "
        "diarized_json needs a diarization model",
    )
    stt.add_argument("--language", default=None, help="spoken language, ISO-639-1 (default: detected)")
    stt.add_argument("--prompt", default=None, help="text to condition the model on")
    stt.add_argument("--translate", action="store_true", help="translate to English instead")
    stt.add_argument("--stream", action="store_true", help="print text as it is decoded (text format only)")
    stt.add_argument(
        "--chunking",
        default="auto",
        choices=["auto", "sequential", "client", "server"],
        help="auto (default): audio over 30 s as sequential; sequential: Whisper's long-form algorithm "
        "(30 s windows one after another); client: pieces cut at pauses, sent concurrently (faster); "
        "server: let vLLM split it",
    )
    stt.add_argument(
        "--concurrency",
        type=int,
        default=defaults.AUDIO_CONCURRENCY,
        help="pieces in flight with --chunking client (default %(default)s)",
    )
    stt.add_argument("--out", default=None, help="write the result here instead of stdout")


def run_transcribe(args: argparse.Namespace, client: Client) -> int:
    """The ``transcribe`` sub-command: prints the transcript in ``--format``."""
    from .transcription import ChunkingOptions

    if args.stream and args.format != "text":
        print("vllm-tasks transcribe: --stream prints text only (drop --format)", file=sys.stderr)
        return EXIT_USAGE
    fmt = cast(ResponseFormat, args.format)
    if args.stream:
        stream_method = client.translate_stream if args.translate else client.transcribe_stream
        with stream_method(args.file, language=args.language, prompt=args.prompt) as stream:
            for event in stream:
                if isinstance(event, TranscriptionDelta) and not args.out:
                    print(event.text, end="", flush=True)
        result = stream.result
        if result is None:  # pragma: no cover - a finished stream always has a result
            return EXIT_SERVER_ERROR
        if not args.out:
            print()
            return EXIT_OK
        output = result.to_text()
    else:
        method = client.translate if args.translate else client.transcribe
        result = method(
            args.file,
            language=args.language,
            prompt=args.prompt,
            response_format=fmt,
            chunking=ChunkingOptions(mode=args.chunking, concurrency=max(1, args.concurrency)),
        )
        output = result.formatted()
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(output if output.endswith("\n") else output + "\n")
    else:
        print(output, end="" if output.endswith("\n") else "\n")
    return EXIT_OK


def add_folder_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``ocr-dir`` and ``transcribe-dir`` sub-commands' arguments."""
    ocr_dir = commands.add_parser(
        "ocr-dir",
        help="OCR every PDF/image under a folder: a .md per document and pages.jsonl, resumably per page",
    )
    ocr_dir.add_argument("source", help="folder of .pdf, .png, .jpg/.jpeg, .webp, .tif/.tiff, .bmp, .gif")
    add_ocr_options(ocr_dir)
    transcribe_dir = commands.add_parser(
        "transcribe-dir",
        help="transcribe every audio file under a folder: .srt/.json/.txt per file, resumably per file",
    )
    transcribe_dir.add_argument("source", help="folder of .wav, .flac, .mp3, .ogg, .opus, .m4a, .mp4, ...")
    transcribe_dir.add_argument(
        "--format",
        action="append",
        choices=["srt", "vtt", "json", "txt"],
        default=None,
        help="a file written per recording; repeat for several (default: srt, json and txt)",
    )
    transcribe_dir.add_argument(
        "--language", default=None, help="spoken language, ISO-639-1 (default: detected)"
    )
    transcribe_dir.add_argument("--prompt", default=None, help="text to condition the model on")
    transcribe_dir.add_argument("--translate", action="store_true", help="translate to English instead")
    transcribe_dir.add_argument(
        "--chunking",
        default="auto",
        choices=["auto", "sequential", "client", "server"],
        help="how files over 30 s are transcribed (default auto: sequential); files run concurrently",
    )
    for sub_parser in (ocr_dir, transcribe_dir):
        sub_parser.add_argument("--out", required=True, help="the output folder (made if missing)")
        sub_parser.add_argument(
            "--model", default=None, help="served model name (default: the server's first)"
        )
        sub_parser.add_argument(
            "--concurrency",
            type=job_concurrency,
            default=defaults.JOB_CONCURRENCY,
            help="requests in flight, per server, or auto: tuned per server from its latencies "
            "(default %(default)s)",
        )
        add_job_options(sub_parser)


def run_folder_job(args: argparse.Namespace, client: Client) -> int:
    """The ``ocr-dir`` and ``transcribe-dir`` sub-commands: exit 0 when every file is done, 1 when some
    page or file failed (listed in OUT/errors.jsonl; the next run retries them)."""
    import warnings

    from .jobs import ocr_dir, transcribe_dir
    from .ocr import OCRTruncatedWarning
    from .transcription import TranscribeParams

    common = {
        "concurrency": args.concurrency,
        "resume": not args.restart,
        "show_progress": args.progress,
        "progress_interval": args.progress_interval,
    }
    with _job_servers(args, client) as servers, warnings.catch_warnings():
        warnings.simplefilter("ignore", OCRTruncatedWarning)  # pages.jsonl says which pages hit max_tokens
        if args.command == "ocr-dir":
            report = ocr_dir(
                servers,
                args.source,
                args.out,
                params=ocr_params(args),
                quality=ocr_quality(args),
                dpi=args.dpi,
                **common,
            )
        else:
            report = transcribe_dir(
                servers,
                args.source,
                args.out,
                formats=args.format or ("srt", "json", "txt"),
                params=TranscribeParams(language=args.language, prompt=args.prompt),
                translate=args.translate,
                chunking=args.chunking,
                **common,
            )
    print(report.summary(), file=sys.stderr)
    return EXIT_OK if report.complete else EXIT_SERVER_ERROR


def format_probe(report: ProbeReport) -> str:
    """A human-readable probe report."""
    info = report.server
    lines = [
        f"server   {info.base_url}",
        f"version  {info.version or 'unknown (hidden)'}",
    ]
    for card in info.models:
        lines.append(f"model    {card.id}  root={card.root}  max_model_len={card.max_model_len}")
    if not info.models:
        lines.append("model    (none listed: /v1/models needs an API key or failed)")
    lines.append(
        "routes   " + ("openapi.json disabled" if info.routes is None else f"{len(info.routes)} mounted")
    )
    lines.append("")
    marks = {
        TaskStatus.SERVED: "yes",
        TaskStatus.NOT_SERVED: "no (404)",
        TaskStatus.INACTIVE: "inactive (501)",
        TaskStatus.UNAUTHORIZED: "unauthorized (401)",
        TaskStatus.ERROR: "error",
    }
    for task in report.tasks:
        detail = f"  {task.detail}" if task.status is TaskStatus.ERROR and task.detail else ""
        lines.append(f"{task.task:<14} {task.path:<26} {marks[task.status]}{detail}")
    if report.advisories:
        lines.append("")
        for advisory in report.advisories:
            ref = f" [{advisory.reference}]" if advisory.reference else ""
            lines.append(f"advisory {advisory.id}: {advisory.message}{ref}")
    return "\n".join(lines)


def run_probe(args: argparse.Namespace, client: Client) -> int:
    """The ``probe`` sub-command: the report as a table (or JSON)."""
    report = client.probe()
    if args.json:
        print(json.dumps(report.model_dump(mode="json"), indent=2, sort_keys=True))
    else:
        print(format_probe(report))
    return EXIT_OK


def run_verify(args: argparse.Namespace, client: Client) -> int:
    """The ``verify`` sub-command: the report (or JSON); exit 5 when the server differs."""
    texts = None
    if args.file is not None:
        texts = [line for line in Path(args.file).read_text(encoding="utf-8").splitlines() if line.strip()]
    report = client.verify(args.reference, texts=texts, model=args.model)
    print(json.dumps(report.model_dump(mode="json"), indent=2) if args.json else str(report))
    return EXIT_OK if report.agrees else EXIT_DIFFERS


COMMANDS: dict[str, Callable[[argparse.Namespace, Client], int]] = {
    "probe": run_probe,
    "verify": run_verify,
    "rerank": run_rerank,
    "ocr": run_ocr,
    "transcribe": run_transcribe,
    "embed": run_embed,
    "embed-file": run_embed_file,
    "ocr-dir": run_folder_job,
    "transcribe-dir": run_folder_job,
}
JOB_COMMANDS = frozenset({"embed-file", "ocr-dir", "transcribe-dir"})
"""Resumable: an interrupted run is continued by the same command."""


def client_settings(args: argparse.Namespace) -> ClientSettings:
    """The client settings the command line gives (every server of a job gets the same but the URL).

    Raises:
        InvalidInputError: a bad URL, key or timeout (the exit code is then 64).
    """
    url = args.url[0] if isinstance(args.url, list) else args.url  # jobs: --url repeated
    return ClientSettings(
        url,
        api_key=args.api_key,
        timeout=defaults.TIMEOUT if args.timeout is None else args.timeout,
        model=getattr(args, "model", None),
        # A probe reports what it sees at once; the task commands retry like any client call.
        max_retries=0 if args.command == "probe" else defaults.MAX_RETRIES,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        with Client.from_settings(client_settings(args)) as client:
            return COMMANDS[args.command](args, client)
    except InsufficientDiskSpace as error:  # before JobError and OSError: it is both
        print(f"vllm-tasks: {error}", file=sys.stderr)
        return EXIT_DISK_FULL
    except JobError as error:
        print(f"vllm-tasks: {error}", file=sys.stderr)
        return EXIT_JOB_REFUSED
    except (InvalidInputError, MissingDependency) as error:
        print(f"vllm-tasks: {error}", file=sys.stderr)
        return EXIT_USAGE
    except APIConnectionError as error:
        print(f"vllm-tasks: server unreachable: {error}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except (APIError, UnsupportedByServer, OCRDocumentFailed) as error:
        print(f"vllm-tasks: {error}", file=sys.stderr)
        return EXIT_SERVER_ERROR
    except BrokenPipeError:  # `vllm-tasks embed ... | head -1`: the reader has what it wanted
        _silence_stdout()
        return EXIT_OK
    except OSError as error:  # an input or output file that cannot be read or written
        print(f"vllm-tasks: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C: one line, no traceback, the shell's code for SIGINT
        again = "; run the same command again to resume" if args.command in JOB_COMMANDS else ""
        print(f"vllm-tasks: interrupted{again}", file=sys.stderr)
        return EXIT_INTERRUPTED


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit raises no second broken pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    raise SystemExit(main())
