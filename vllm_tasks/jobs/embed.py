"""``embed_file`` / ``aembed_file``: embed a corpus of any size into ``.npy`` or Parquet, resumably; dense
vectors (``embed``) or, with ``sparse=True``, sparse ones (``embed_sparse``, Parquet only).

Work happens in ``OUT.partial/`` next to the output: the matrix (or Parquet parts), ``state.json`` (the
checkpoint) and ``errors.jsonl``. When every row is done the result is renamed to ``OUT``, refused rows
go to ``OUT.errors.jsonl`` (row, id, status, the server's message), ids to ``OUT.ids.jsonl`` (``.npy``
with an ``id_field``), and ``OUT.manifest.json`` records the model, the servers, the shape and timings.
The input and the output may be fsspec URLs (:mod:`~vllm_tasks.jobs.locations`): a remote output is
made so in a local work folder, then uploaded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

import orjson

from .. import defaults
from ..adaptive import Concurrency
from ..calls import CLIENT_DEFAULT, CallOptions, TimeoutLike, plain
from ..embeddings import EmbedParams
from ..errors import InvalidInputError, JobError, JobMismatch
from ..pooling import PoolParams
from ..sparse import SparseEmbedParams
from ..types.server import ServerInfo
from ..validation import positive_int
from .engine import EmbedRun, Plan
from .files import read_no_follow, write_atomically
from .inputs import InputSpec, check_regular, file_digest, parquet_types, read_chunks, scan
from .locations import RemoteFile, Target
from .outputs import NpySink, ParquetSink, Sink
from .progress import JobProgress
from .replicas import Replica, ReplicaPool, Servers, run_in_own_loop
from .scaffold import Describe, JobSettings, ReplicaReport, job_servers, replica_reports, served_section
from .state import Checkpoint, Progress, check_same_job, job_lock, write_json
from .stores import STORE_KINDS, StoreTarget, store_target
from .vectors import DENSE, MULTI_VECTOR, SPARSE, Vectors

OutputFormat = Literal["npy", "parquet", "lancedb", "qdrant"]
TooLong = Literal["report", "truncate"]

TRANSPORT_FIELDS = frozenset({"encoding_format"})
"""``EmbedParams`` fields that do not change the vectors: not in the fingerprint."""


@dataclass(frozen=True)
class EmbedFileReport:
    """What :func:`embed_file` did.

    Attributes:
        out: the output written (``.npy`` or Parquet); for a LanceDB or Qdrant output, the name its job
            files are made from (``PATH/TABLE``: ``PATH/TABLE.manifest.json``, ...).
        texts: rows in it.
        dimensions: the embedding width (sparse: the vocabulary's when the server states it, else 0).
        chunks_sent: chunks embedded by this run.
        chunks_resumed: chunks found done by earlier runs.
        failed_rows: rows the server refused (NaN rows in ``.npy``, null vectors in Parquet).
        errors_file: the refused rows (row, id, status, message), or ``None`` when there are none.
        manifest: the manifest file.
        already_complete: the job was finished before this run; nothing was sent or written.
        seconds: this run's wall time.
        replicas: per server, what it did in this run.
        vectors: what the rows are: ``"dense"`` (an ``embedding`` column or a ``.npy`` matrix), ``"sparse"``
            (``sparse_indices``/``sparse_values`` columns) or ``"multi-vector"`` (a ``token_embeddings``
            column of per-token vectors).
        url: where the output was uploaded when ``out`` is an fsspec URL (shown without credentials;
            ``out``, ``errors_file`` and ``manifest`` are then their copies in the work folder), else
            ``None``.
        store: the LanceDB table or Qdrant collection the rows went to, as ``out`` named it
            (``"lancedb://./db#docs"``), else ``None``.
    """

    out: Path
    texts: int
    dimensions: int
    chunks_sent: int
    chunks_resumed: int
    failed_rows: int
    errors_file: Path | None
    manifest: Path
    already_complete: bool
    seconds: float
    replicas: tuple[ReplicaReport, ...]
    vectors: str = "dense"
    url: str | None = None
    store: str | None = None

    @property
    def sparse(self) -> bool:
        """Whether the rows are sparse vectors."""
        return self.vectors == SPARSE.name

    def summary(self) -> str:
        """One line for a terminal, e.g. ``"corpus.npy: 100000 x 384 float32, 3 chunk(s) resumed"``
        (sparse: ``"corpus.parquet: 100000 sparse vectors (30522 ids)"``)."""
        shape = f"{self.texts} x {self.dimensions} float32"
        if self.sparse:
            shape = f"{self.texts} sparse vectors" + (f" ({self.dimensions} ids)" if self.dimensions else "")
        elif self.vectors == MULTI_VECTOR.name:
            shape = f"{self.texts} per-token matrices x {self.dimensions} float32"
        where = self.store or self.url or self.out
        if self.already_complete:
            return f"{where}: already complete ({shape}); nothing to do"
        parts = [f"{where}: {shape}"]
        if self.chunks_resumed:
            parts.append(f"{self.chunks_resumed} chunk(s) resumed")
        if self.failed_rows:
            parts.append(f"{self.failed_rows} row(s) refused, see {self.errors_file}")
        rates = ", ".join(f"{r.url} {r.rows_per_second:,.0f} rows/s" for r in self.replicas if r.rows)
        return ", ".join(parts) + (f" ({rates})" if rates else "")


@dataclass(frozen=True)
class _Paths:
    out: Path
    work: Path
    manifest: Path
    errors: Path
    ids: Path
    lock: Path
    store: StoreTarget | None = None
    """The table the rows go to (the other paths are the job's own files beside it), else ``None``."""

    @classmethod
    def of(cls, out: Path, store: StoreTarget | None = None) -> _Paths:
        return cls(
            out,
            out.with_name(out.name + ".partial"),
            out.with_name(out.name + ".manifest.json"),
            out.with_name(out.name + ".errors.jsonl"),
            out.with_name(out.name + ".ids.jsonl"),
            out.with_name(out.name + ".lock"),
            store,
        )

    @property
    def output(self) -> str:
        """The output as the user named it (a file path, or a store URL)."""
        return self.store.url if self.store is not None else str(self.out)

    def check_apart_from(self, source: Path | RemoteFile) -> None:
        """Refuse an output that would overwrite the input, or that exists and is not a regular file.

        Raises:
            InvalidInputError: naming ``out`` and the fix.
        """
        for path in (self.out, self.manifest, self.errors, self.ids):
            if (
                isinstance(source, Path)
                and path.exists()
                and source.exists()
                and os.path.samefile(path, source)
            ):
                raise InvalidInputError(
                    "out", str(self.out), f"would overwrite the input {source}", "Write the output elsewhere."
                )
        if self.out.exists() and not self.out.is_file():
            raise InvalidInputError(
                "out", str(self.out), "exists and is not a regular file", "Name a file path for the output."
            )


async def aembed_file(
    client: Servers,
    source: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    input_format: str | None = None,
    text_field: str | None = None,
    id_field: str | None = None,
    keep_columns: Iterable[str] = (),
    output_format: OutputFormat | None = None,
    sparse: bool = False,
    multi_vector: bool = False,
    images: bool = False,
    params: EmbedParams | SparseEmbedParams | PoolParams | None = None,
    batch_size: int = defaults.EMBED_BATCH_SIZE,
    max_batch_tokens: int = defaults.JOB_MAX_BATCH_TOKENS,
    concurrency: Concurrency = defaults.JOB_CONCURRENCY,
    chunk_rows: int = defaults.EMBED_FILE_CHUNK_ROWS,
    too_long: TooLong = "report",
    fail_fast: bool = False,
    resume: bool = True,
    show_progress: bool = False,
    progress_interval: float = defaults.JOB_PROGRESS_INTERVAL,
    retry_replica_after: float = defaults.JOB_REPLICA_RETRY_AFTER,
    give_up_after: float = defaults.JOB_GIVE_UP_AFTER,
    model: str | None = None,
    extra_body: Mapping[str, Any] | None = None,
    extra_headers: Mapping[str, str] | None = None,
    timeout: TimeoutLike = CLIENT_DEFAULT,
    work_dir: str | os.PathLike[str] | None = None,
) -> EmbedFileReport:
    """Embed every row of a text, JSONL, CSV or Parquet file into ``.npy`` or Parquet, resumably.

    Async-first: ``embed_file`` (same arguments) runs this in its own event loop; call ``aembed_file``
    from async code, so that the job shares the application's loop.

    Args:
        client: the server(s): a ``Client``/``AsyncClient``, a root URL, or a list of them; batches go to
            the one with the fewest requests in flight; all must serve the same model.
        source: the input. Plain text is one text per line, split on ``\\n`` only (empty lines are rows).
            A path, or an fsspec URL (``s3://``, ``gs://``, ``hf://``; the ``fsspec`` extra and the
            protocol's package), read as a stream.
        out: the output: ``.npy`` (a float32 matrix, row ``i`` = input row ``i``) or ``.parquet``; its
            folder is made when missing. An fsspec URL is made in ``work_dir`` and uploaded when the job
            is complete, with its errors, ids and manifest (last). Or a vector store
            (:mod:`vllm_tasks.jobs.stores`): a LanceDB table, ``"lancedb://PATH#TABLE"``, or a Qdrant
            collection, ``"qdrant://PATH#COLLECTION"`` (local mode) or
            ``"qdrant+http://HOST:PORT#COLLECTION"``: one row (point) per input row, keyed by its ``row``
            number, written as chunks finish; a resumed run never stores a row twice, and a run that
            starts over replaces the table.
        input_format: ``text``, ``jsonl``, ``csv`` or ``parquet`` (default: from the suffix; else text).
        text_field: the column or JSON key holding the text (default ``text``).
        id_field: the column holding each row's id (default: the row number).
        keep_columns: other input columns copied to a Parquet output (a LanceDB table, a Qdrant payload).
        output_format: ``npy`` or ``parquet`` (default: ``parquet`` for a ``.parquet`` suffix; a store
            URL's own for one).
        sparse: sparse vectors (``embed_sparse``: SPLADE, BGE-M3's lexical weights) into two Parquet
            columns, ``sparse_indices: list<int64>`` (token ids) and ``sparse_values: list<float32>``
            (their weights), instead of dense ones; Parquet or Qdrant output only (LanceDB has no sparse
            vectors: refused before anything is sent).
        multi_vector: one vector per token (``pool`` on a ``token_embed`` model: ColBERT, BGE-M3's
            multi-vector head, Jina v4 as vllm-retrieval) into a ``token_embeddings`` Parquet column,
            ``list<fixed_size_list<float32>[width]>``; Parquet, LanceDB or Qdrant (MAX_SIM) output only.
        images: each row names an image instead of holding a text: a file path (a relative one is read
            from the input file's folder) or an ``http(s)``/``data:`` URL. The images are embedded with
            ``embed(images=...)`` (CLIP, SigLIP: one vector each) or, with ``multi_vector``,
            ``pool(images=...)`` (ColPali: one vector per patch); one image per request. A row whose file
            is missing or is not an image is refused (the errors file). Not with ``sparse``.
        params: the vector options of every ``embed`` call (``EmbedParams(dimensions=256,
            normalize=True)``, checked before anything is read or sent), of every ``embed_sparse``
            call with ``sparse`` (``SparseEmbedParams(top_k=128)``; ``return_tokens`` is refused: token
            strings are not stored), or of every ``pool`` call with ``multi_vector``
            (``PoolParams(use_activation=False)``); default: the server's.
        batch_size: the most rows per request (1 for ``images``).
        max_batch_tokens: the most estimated tokens (about 3 characters each) per request.
        concurrency: requests in flight per server, or ``"auto"`` (the default): each server's own limit,
            tuned from its answers' latencies, backing off on 429/503 (where it settled: the progress
            line, ``report.replicas[i].concurrency`` and the manifest; see docs/jobs.md). A number fixes
            it.
        chunk_rows: rows per checkpoint (fixed for a job: a resumed job keeps its first value).
        too_long: over-long rows: ``report`` (the server refuses them; they go to the errors file) or
            ``truncate`` (cut to the model's context: ``truncate_prompt_tokens=-1``).
        fail_fast: stop at the first refused row (:class:`RowFailed`) instead of recording it.
        resume: continue an unfinished run of the same job; False starts over.
        show_progress: a tqdm bar on a terminal, else a log line (logger ``vllm_tasks.jobs``, INFO) every
            ``progress_interval`` seconds.
        progress_interval: seconds between progress log lines.
        retry_replica_after: seconds a failing server is first set aside (doubling while it fails).
        give_up_after: stop when every server has failed and none answered for this many seconds.
        model: the served model (default: the client's, else the server's first).
        extra_body: extra JSON fields for every request (part of the job's options: a resumed job must
            send the same).
        extra_headers: extra headers for every request.
        timeout: per-request timeout (default: the client's).
        work_dir: for an fsspec URL ``out``: the local folder of the job's working state (checkpoint,
            parts, lock) and the finished output's copy (default: a folder under
            ``~/.cache/vllm-tasks/jobs`` keyed by the URL). Not for a local ``out``.

    Returns:
        EmbedFileReport.

    Raises:
        InvalidInputError: an empty or unreadable input, a bad option; ``sparse`` or ``multi_vector`` with a
            ``.npy`` output, or both; ``sparse`` into LanceDB; ``images`` with ``sparse`` or with a text
            prompt; a store URL without its ``#TABLE``.
        UnsupportedByServer: ``multi_vector`` with a model that answers one vector per text.
        JobMismatch: an earlier run (unfinished, or finished) of this output had another input, model
            or vector option, or dense where this run asks for sparse vectors (or the reverse); names what
            changed.
        ReplicaMismatch: the servers serve different models.
        InsufficientDiskSpace: the output does not fit on its disk (before writing any row), or the
            disk filled up during the run (progress is kept: run again once there is room).
        JobError: a symlink where the lock or a work file goes (never followed), or an output folder
            that cannot be written (naming it); see :mod:`vllm_tasks.jobs.files`.
        RowFailed: with ``fail_fast``, the first refused row.
        JobError: an fsspec URL that failed while read or written (its message shows the URL without
            credentials); progress is kept: run again to resume (or to upload).
        UnexpectedResponse: (``kind="decode"``) a server kept answering batches of another width (or
            vocabulary) than the job's probe found, naming the rows and both widths; a server that does
            it once is set aside and the batch sent again, and nothing of such an answer is written.
        APIError: a fatal answer (401, 404, ...), or every server down for ``give_up_after`` seconds.
            Progress up to there is kept; run again to resume.

    Examples:
        >>> report = await aembed_file(["http://gpu1:8000", "http://gpu2:8000"], "docs.jsonl", "docs.parquet",
        ...                            text_field="body", id_field="doc_id", keep_columns=["title"])
        >>> report.summary()
        'docs.parquet: 1000000 x 1024 float32 (gpu1:8000 2,310 rows/s, gpu2:8000 2,290 rows/s)'
        >>> await aembed_file("http://splade:8000", "docs.jsonl", "sparse.parquet", sparse=True)
        >>> await aembed_file("http://colbert:8000", "docs.jsonl", "tokens.parquet", multi_vector=True)
        >>> await aembed_file("http://clip:8000", "photos.csv", "photos.parquet", text_field="path",
        ...                   images=True)
        >>> await aembed_file("http://colpali:8000", "pages.txt", "pages.parquet", images=True,
        ...                   multi_vector=True)
    """
    spec = InputSpec.create(
        source, format=input_format, text_field=text_field, id_field=id_field, keep_columns=keep_columns
    )
    paths, target = _output_paths(out, work_dir, spec)
    chosen_output = _output_format(output_format, paths)
    vectors = _vectors(sparse, multi_vector, chosen_output, output_format, paths.out)
    if paths.store is not None:
        paths.store.check(spec, vectors)
    _check_output_columns(spec, chosen_output, vectors)
    chosen_params = _job_params(params, too_long, vectors)
    _check_images(images, vectors, chosen_params)
    plan = Plan(
        1 if images else positive_int("batch_size", batch_size),
        positive_int("max_batch_tokens", max_batch_tokens),
        chosen_params,
        CallOptions(model, extra_body, extra_headers, timeout),
        bool(fail_fast),
        vectors,
        _image_folder(spec) if images else None,
    )
    positive_int("chunk_rows", chunk_rows)
    settings = JobSettings(concurrency, show_progress, progress_interval, retry_replica_after, give_up_after)
    rows, digest = await asyncio.to_thread(scan, spec)
    if rows == 0:
        raise InvalidInputError("source", str(spec.path), "has no rows", "Pass a file with one text per row.")
    async with job_servers(client, settings, _describe(plan), out=paths.output) as servers:
        fingerprint = {
            "input": {"sha256": digest, "rows": rows, "format": spec.format, **_fields(spec, images)},
            "model": servers.served,
            "options": _fingerprinted(chosen_params, extra_body),
            # only sparse jobs say so: dense checkpoints of earlier versions stay resumable
            "output": {"format": chosen_output, **_kind_record(vectors)},
        }
        report = await _locked_run(
            paths,
            spec,
            fingerprint,
            resume=resume,
            chunk_rows=chunk_rows,
            output=chosen_output,
            plan=plan,
            pool=servers.pool,
            settings=settings,
        )
    url = None if target is None else await asyncio.to_thread(target.publish)
    return report if url is None else dataclasses.replace(report, url=url)


def _output_paths(
    out: str | os.PathLike[str], work_dir: str | os.PathLike[str] | None, spec: InputSpec
) -> tuple[_Paths, Target | None]:
    """The job's files for ``out`` (a path, a vector store or an fsspec URL) and, for a URL, its upload
    target; checked not to be the input.

    Raises:
        InvalidInputError: ``out`` is the input or not a regular file; ``work_dir`` with an output that is
            not an fsspec URL; what :func:`store_target` and :meth:`Target.of` raise.
    """
    store = store_target(out)
    target: Target | None = None
    if store is None:
        target = Target.of(out, work_dir)
        local = target.local
    elif work_dir is not None:
        raise InvalidInputError(
            "work_dir", str(work_dir), "is for an fsspec URL output, not a vector store", "Drop work_dir."
        )
    else:
        local = store.job_path
    paths = _Paths.of(local, store)
    check_regular(spec.path)
    paths.check_apart_from(spec.path)
    if target is not None:
        target.check_apart_from(spec.path)
    return paths, target


def _image_folder(spec: InputSpec) -> Path:
    """The folder an image job reads relative image paths from: the input's.

    Raises:
        InvalidInputError: the input is an fsspec URL (images are read from local files or http URLs).
    """
    if isinstance(spec.path, RemoteFile):
        raise InvalidInputError(
            "images",
            True,
            f"reads its images next to a local input, not {spec.path}",
            "Copy the input (and its images) to a local folder first.",
        )
    return spec.path.parent


async def _locked_run(
    paths: _Paths,
    spec: InputSpec,
    fingerprint: dict[str, Any],
    *,
    resume: bool,
    chunk_rows: int,
    output: OutputFormat,
    plan: Plan,
    pool: ReplicaPool,
    settings: JobSettings,
) -> EmbedFileReport:
    """Holding the job's lock (its folder made when missing): the finished report, or the checkpoint
    resumed (or started) and run."""
    with job_lock(paths.lock, paths.output):
        finished = _finished_job(paths, fingerprint, resume)
        if finished is not None:
            return finished
        rows = fingerprint["input"]["rows"]
        progress = Progress.open(
            paths.work,
            fingerprint,
            out=paths.output,
            resume=resume,
            rows=rows,
            width=fingerprint["model"]["width"],
            chunk_rows=chunk_rows,
        )
        if not progress.resumed:
            paths.manifest.unlink(missing_ok=True)  # an older finished output is no longer this job's
        bar = JobProgress(
            rows,
            progress.state.done_rows(),
            pool.replicas,
            enabled=settings.show_progress,
            interval=settings.progress_interval,
            description="embed",
        )
        return await _run(paths, spec, progress, output=output, pool=pool, plan=plan, bar=bar)


async def _run(
    paths: _Paths,
    spec: InputSpec,
    progress: Progress,
    *,
    output: OutputFormat,
    pool: ReplicaPool,
    plan: Plan,
    bar: JobProgress,
) -> EmbedFileReport:
    """Run the engine over what is left, then move the result into place."""
    started = time.monotonic()
    checkpoint = progress.state
    resumed = len(checkpoint.done)
    work_data = paths.work / ("data.npy" if output == "npy" else "parts")
    sink: Sink | None = None
    chunks_sent = 0
    try:
        if len(checkpoint.done) < checkpoint.chunks or work_data.exists():
            sink = _sink(output, paths, spec, checkpoint, plan.vectors)
            checkpoint.runs += 1
            engine = EmbedRun(
                spec, sink=sink, progress=progress, pool=pool, plan=plan, bar=bar, out=paths.output
            )
            chunks_sent = (await engine.run()).chunks_sent
    finally:
        if sink is not None:
            sink.close()
        bar.close()
    # else: an earlier run was stopped after moving the finished result into place: only the rest is left
    return await asyncio.to_thread(
        _finish,
        paths,
        spec=spec,
        sink=sink,
        progress=progress,
        pool=pool,
        seconds=time.monotonic() - started,
        chunks_sent=chunks_sent,
        resumed=resumed,
        vectors=plan.vectors,
    )


embed_file = run_in_own_loop(aembed_file)
embed_file.__name__ = embed_file.__qualname__ = "embed_file"
embed_file.__doc__ = """Embed every row of a text, JSONL, CSV or Parquet file into ``.npy`` or Parquet (sync).

The sync entry point of :func:`aembed_file`: the same arguments, result and errors; it runs the job in
its own event loop (so it cannot be called from a running loop: await ``aembed_file`` there).

Examples:
    >>> with vt.Client("http://localhost:8000") as client:
    ...     report = vt.embed_file(client, "corpus.txt", "corpus.npy", show_progress=True)
    >>> report.summary()
    'corpus.npy: 100000 x 384 float32 (localhost:8000 2,480 rows/s)'
"""


def _check_output_columns(spec: InputSpec, output: OutputFormat, vectors: Vectors) -> None:
    """Refuse kept columns that would be two columns of a Parquet output (the id, the vectors').

    Raises:
        InvalidInputError: naming the column.
    """
    if output != "parquet":
        return
    seen = {spec.id_field or "row", *vectors.columns}
    for name in spec.keep_columns:
        if name in seen:
            raise InvalidInputError(
                "keep_columns",
                name,
                "would be a second column of that name in the output (its id, or its vectors in "
                f"{' and '.join(map(repr, vectors.columns))})",
                "Drop it from keep_columns, or rename the column in the input.",
            )
        seen.add(name)


def _output_format(chosen: str | None, paths: _Paths) -> OutputFormat:
    if paths.store is not None:
        if chosen not in (None, paths.store.kind):
            raise InvalidInputError(
                "output_format", chosen, f"is not where out names ({paths.store.url})", "Leave it unset."
            )
        return paths.store.kind
    if chosen is None:
        return "parquet" if paths.out.suffix.lower() in (".parquet", ".pq") else "npy"
    if chosen not in ("npy", "parquet"):
        raise InvalidInputError(
            "output_format",
            chosen,
            "is not npy or parquet",
            "Pass npy or parquet (a LanceDB or Qdrant output is named by out: lancedb://PATH#TABLE).",
        )
    return "parquet" if chosen == "parquet" else "npy"


def _kind_record(vectors: Vectors) -> dict[str, bool]:
    """The fingerprint's record of the rows' kind; only sparse and multi-vector jobs say so, so that dense
    checkpoints of earlier versions stay resumable."""
    return {} if vectors is DENSE else {vectors.name.replace("-", "_"): True}


def _vectors(
    sparse: bool, multi_vector: bool, output: OutputFormat, output_format: str | None, out: Path
) -> Vectors:
    """Dense, sparse or per-token rows; the last two only into Parquet.

    Raises:
        InvalidInputError: ``sparse`` or ``multi_vector`` not a bool, both set, or either with a ``.npy``
            output (naming ``output_format`` when it chose that, else ``out``).
    """
    for name, flag, fix in (
        ("sparse", sparse, "Pass sparse=True for SPLADE."),
        ("multi_vector", multi_vector, "Pass multi_vector=True for a token_embed model."),
    ):
        if not isinstance(flag, bool):
            raise InvalidInputError(name, flag, "must be True or False", fix)
    if sparse and multi_vector:
        raise InvalidInputError(
            "multi_vector", True, "cannot be combined with sparse=True", "Choose one kind of vectors per job."
        )
    if not (sparse or multi_vector):
        return DENSE
    if output == "npy":
        field, value = ("output_format", output_format) if output_format is not None else ("out", str(out))
        held = "sparse vectors (a .npy matrix would be vocabulary-wide)"
        if multi_vector:
            held = "per-token matrices (their rows have as many vectors as tokens)"
        raise InvalidInputError(
            field,
            value,
            f"cannot hold {held}",
            "Write Parquet: an out path ending in .parquet, or output_format='parquet'.",
        )
    return SPARSE if sparse else MULTI_VECTOR


def _job_params(
    params: object, too_long: str, vectors: Vectors
) -> EmbedParams | SparseEmbedParams | PoolParams:
    """The vector options of every call of the job (``EmbedParams``; ``SparseEmbedParams`` for sparse
    vectors, ``PoolParams`` for per-token ones), ``too_long="truncate"`` folded in.

    Raises:
        InvalidInputError: ``params`` of the other kind, a bad ``too_long``, ``return_tokens``.
    """
    kinds: dict[str, type[EmbedParams | SparseEmbedParams | PoolParams]] = {
        SPARSE.name: SparseEmbedParams,
        MULTI_VECTOR.name: PoolParams,
    }
    chosen = kinds.get(vectors.name, EmbedParams).of(params)
    if too_long not in get_args(TooLong):
        raise InvalidInputError("too_long", too_long, "is not report or truncate", "Pass one of them.")
    if too_long == "truncate" and chosen.truncate_prompt_tokens is None:
        chosen = dataclasses.replace(chosen, truncate_prompt_tokens=-1)
    if isinstance(chosen, SparseEmbedParams) and chosen.return_tokens:
        raise InvalidInputError(
            "return_tokens",
            True,
            "is not stored by embed_file",
            "Leave it False; the output keeps token ids.",
        )
    return chosen


def _fingerprinted(
    params: EmbedParams | SparseEmbedParams | PoolParams, extra_body: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The options a resumed job must share: the vector options that differ from the defaults and
    ``extra_body`` (not the model, compared on its own, nor how answers travel)."""
    options = {name: value for name, value in params.changed().items() if name not in TRANSPORT_FIELDS}
    if extra_body:
        options["extra_body"] = plain(extra_body)
    return options


def _fields(spec: InputSpec, images: bool) -> dict[str, Any]:
    """How rows are read from the input; only image jobs say so (text checkpoints of earlier versions stay
    resumable)."""
    named = {"images": True} if images else {}
    if spec.format == "text":
        return named
    return {
        "text_field": spec.text_field,
        "id_field": spec.id_field,
        "keep_columns": list(spec.keep_columns),
        **named,
    }


def _check_images(
    images: object, vectors: Vectors, params: EmbedParams | SparseEmbedParams | PoolParams
) -> None:
    """Refuse what an image job cannot do, before anything is read or sent.

    Raises:
        InvalidInputError: ``images`` not a bool, with ``sparse``, or with a text prompt.
    """
    if not isinstance(images, bool):
        raise InvalidInputError("images", images, "must be True or False", "Pass images=True for image rows.")
    if not images:
        return
    if vectors is SPARSE:
        raise InvalidInputError(
            "images", True, "cannot be combined with sparse=True (sparse vectors are of texts)", "Drop one."
        )
    for name in ("prompt", "prompt_name"):
        if getattr(params, name, None) is not None:
            raise InvalidInputError(
                name,
                getattr(params, name),
                "is for texts, not image rows",
                f"Leave {name} unset with images.",
            )


def _describe(plan: Plan) -> Describe:
    """What ``embed_file`` records of a server's model: name, weights, width and its probe vector (dense or
    sparse, as the job's)."""

    async def describe(replica: Replica, info: ServerInfo) -> dict[str, Any]:
        name = plan.call.model or replica.client.model or info.default_model
        root = next((card.root for card in info.models if card.id == name), None)
        result = await plan.probe(replica.client)
        width, probe = plan.vectors.width(result), plan.vectors.probe(result)
        return {"model": name, "root": root, "width": width, "probe": probe}

    return describe


def _finished_job(paths: _Paths, fingerprint: dict[str, Any], resume: bool) -> EmbedFileReport | None:
    """The report of a finished job with this fingerprint (a no-op re-run), else ``None``.

    Raises:
        JobMismatch: the finished output was made from another input, model or options.
    """
    if not (resume and (paths.out.exists() or paths.store is not None) and paths.manifest.exists()):
        return None
    manifest = orjson.loads(read_no_follow(paths.manifest))
    check_same_job(paths.output, manifest.get("fingerprint", {}), fingerprint)
    shutil.rmtree(paths.work, ignore_errors=True)  # left by a run stopped after writing the manifest
    return EmbedFileReport(
        out=paths.out,
        texts=int(manifest["rows"]),
        dimensions=int(manifest["width"]),
        chunks_sent=0,
        chunks_resumed=int(manifest["chunks"]),
        failed_rows=int(manifest["failed_rows"]),
        errors_file=paths.errors if manifest["failed_rows"] else None,
        manifest=paths.manifest,
        already_complete=True,
        seconds=0.0,
        replicas=(),
        vectors=str(manifest.get("vectors", DENSE.name)),
        store=paths.output if paths.store is not None else None,
    )


def _sink(
    output: OutputFormat, paths: _Paths, spec: InputSpec, checkpoint: Checkpoint, vectors: Vectors
) -> Sink:
    if output == "npy":
        return NpySink(paths.work / "data.npy", checkpoint.rows, checkpoint.width, resume=True)
    if output in STORE_KINDS:
        assert paths.store is not None
        return paths.store.sink(spec, vectors, checkpoint.width, checkpoint.done, checkpoint.chunk_rows)
    id_name = spec.id_field or "row"
    total = checkpoint.rows * vectors.row_bytes(checkpoint.width)
    types = parquet_types(spec)
    return ParquetSink(paths.work / "parts", checkpoint.width, types, id_name, total, vectors=vectors)


def _finish(
    paths: _Paths,
    *,
    spec: InputSpec,
    sink: Sink | None,
    progress: Progress,
    pool: ReplicaPool,
    seconds: float,
    chunks_sent: int,
    resumed: int,
    vectors: Vectors,
) -> EmbedFileReport:
    """Move the complete result into place (unless ``sink`` is ``None``: it is there already) with its
    errors, ids and manifest; remove the work folder (last: a run stopped before can finish again).

    Raises:
        JobError: a chunk was not embedded (the input gave fewer rows than counted), or the input
            changed during the run; nothing is moved into place.
    """
    checkpoint = progress.state
    missing = checkpoint.chunks - len(checkpoint.done)
    if missing:
        raise JobError(
            f"{paths.out}: {missing} of {checkpoint.chunks} chunks were not embedded: {spec.path} gave fewer "
            f"rows than the {checkpoint.rows} counted; nothing was moved into place. Run the job again."
        )
    if sink is not None:
        if file_digest(spec.path) != checkpoint.fingerprint["input"]["sha256"]:
            raise JobMismatch(paths.output, [f"input content changed during the run ({spec.path})"])
        sink.finish(paths.out, checkpoint.rows)
    refused = progress.refused_rows()
    if refused:
        write_atomically(paths.errors, b"".join(orjson.dumps(row) + b"\n" for row in refused))
    else:
        paths.errors.unlink(missing_ok=True)
    if (
        spec.id_field is not None
        and paths.store is None
        and paths.out.suffix.lower() not in (".parquet", ".pq")
    ):
        ids = (
            b"".join(orjson.dumps(row_id) + b"\n" for row_id in chunk.ids)
            for chunk in read_chunks(spec, checkpoint.chunk_rows)
        )
        write_atomically(paths.ids, ids)
    reports = replica_reports(pool, seconds)
    write_json(
        paths.manifest,
        {
            "kind": "embed",
            "complete": True,
            "source": str(spec.path),
            "output": paths.output,
            "rows": checkpoint.rows,
            "chunks": checkpoint.chunks,
            "chunk_rows": checkpoint.chunk_rows,
            "width": checkpoint.width,
            "dtype": "float32",
            "vectors": vectors.name,
            "failed_rows": len(refused),
            **served_section(checkpoint.fingerprint, pool.replicas, reports),
            "timings": {
                "seconds": round(checkpoint.seconds, 3),
                "runs": checkpoint.runs,
                "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            },
        },
    )
    shutil.rmtree(paths.work, ignore_errors=True)
    return EmbedFileReport(
        out=paths.out,
        texts=checkpoint.rows,
        dimensions=checkpoint.width,
        chunks_sent=chunks_sent,
        chunks_resumed=resumed,
        failed_rows=len(refused),
        errors_file=paths.errors if refused else None,
        manifest=paths.manifest,
        already_complete=False,
        seconds=seconds,
        replicas=reports,
        vectors=vectors.name,
        store=paths.output if paths.store is not None else None,
    )
