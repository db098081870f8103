"""Resumable batch jobs that stream to disk: embed a text file of any size into a ``.npy`` matrix.

The output is a memory-mapped ``.npy`` file of shape ``(lines, d)``; row ``i`` is the embedding of line
``i``. Texts are read and sent one chunk at a time, so memory stays bounded, and after every chunk the
job records its progress next to the output (``OUT.progress.json``). Run it again after a crash or a
Ctrl-C and it continues with the first chunk that is not on disk yet.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import defaults
from ._sync.client import Client
from .errors import InvalidInputError
from .progress import Progress
from .validation import positive_int


@dataclass(frozen=True)
class EmbedFileReport:
    """What :func:`embed_file` did.

    Attributes:
        out: the ``.npy`` file written.
        texts: rows in it (lines of the source).
        dimensions: the embedding width.
        chunks_sent: chunks embedded by this run.
        chunks_resumed: chunks found already done from an earlier run.
    """

    out: Path
    texts: int
    dimensions: int
    chunks_sent: int
    chunks_resumed: int


def _read_lines(source: Path, start: int) -> Iterator[str]:
    with source.open(encoding="utf-8") as handle:
        for line in itertools.islice(handle, start, None):
            yield line.rstrip("\r\n")


def _fingerprint(source: Path, chunk_lines: int, options: dict[str, Any]) -> str:
    stat = source.stat()
    key = json.dumps(
        [str(source.resolve()), stat.st_size, stat.st_mtime_ns, chunk_lines, options], default=str
    )
    return hashlib.sha256(key.encode()).hexdigest()


def _write_progress(path: Path, state: dict[str, Any]) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(state))
    os.replace(temporary, path)  # atomic: a crash leaves the old or the new state, never half of one


def embed_file(
    client: Client,
    source: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    chunk_lines: int = defaults.EMBED_FILE_CHUNK_LINES,
    resume: bool = True,
    show_progress: bool = False,
    **embed_options: Any,
) -> EmbedFileReport:
    """Embed every line of a UTF-8 text file into a float32 ``.npy`` matrix, resumably.

    Args:
        client: the client to embed with.
        source: the text file, one text per line (empty lines are embedded too, so rows match lines).
        out: the ``.npy`` file to write (opened with ``numpy.load(out, mmap_mode="r")``).
        chunk_lines: lines read and embedded per step; each step is saved before the next.
        resume: continue a job that an earlier run left unfinished (same source, same options); False
            starts over.
        show_progress: draw a tqdm bar.
        **embed_options: passed to :meth:`Client.embed` (``model``, ``dimensions``, ``batch_size``,
            ``concurrency``, ``truncate_prompt_tokens``, ...).

    Returns:
        EmbedFileReport.

    Raises:
        InvalidInputError: for an empty or unreadable source, or options ``embed`` refuses.
        APIError: whatever the server answered; progress up to the failing chunk is kept.

    Examples:
        >>> embed_file(client, "corpus.txt", "corpus.npy", batch_size=64, concurrency=4)
        EmbedFileReport(out=PosixPath('corpus.npy'), texts=100000, dimensions=384, ...)
    """
    chunk_lines = positive_int("chunk_lines", chunk_lines)
    if "input" in embed_options or "messages" in embed_options:
        raise InvalidInputError("input", "...", "comes from the source file", "Drop input=/messages=.")
    source_path, out_path = Path(source), Path(out)
    try:
        with source_path.open(encoding="utf-8") as handle:
            total = sum(1 for _ in handle)
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidInputError("source", str(source_path), f"cannot be read ({error})", "") from error
    if total == 0:
        raise InvalidInputError(
            "source", str(source_path), "has no lines", "Pass a file with one text per line."
        )
    progress_path = out_path.with_name(out_path.name + ".progress.json")
    fingerprint = _fingerprint(source_path, chunk_lines, embed_options)
    done = 0
    matrix: np.memmap[Any, np.dtype[np.float32]] | None = None
    if resume and progress_path.exists() and out_path.exists():
        state = json.loads(progress_path.read_text())
        if state.get("fingerprint") == fingerprint:
            done = int(state["chunks_done"])
            matrix = np.lib.format.open_memmap(out_path, mode="r+")
    chunks = -(-total // chunk_lines)
    resumed = done
    bar = Progress(total, enabled=show_progress, description="embed-file")
    bar.advance(min(done * chunk_lines, total))
    lines = _read_lines(source_path, done * chunk_lines)
    try:
        for chunk in range(done, chunks):
            texts = list(itertools.islice(lines, chunk_lines))
            vectors = client.embed(texts, **embed_options).vectors
            if matrix is None:
                matrix = np.lib.format.open_memmap(
                    out_path, mode="w+", dtype=np.float32, shape=(total, vectors.shape[1])
                )
            start = chunk * chunk_lines
            matrix[start : start + len(texts)] = vectors
            matrix.flush()
            _write_progress(
                progress_path, {"fingerprint": fingerprint, "chunks_done": chunk + 1, "texts": total}
            )
            bar.advance(len(texts))
    finally:
        bar.close()
    assert matrix is not None  # total > 0, so at least one chunk ran or was resumed
    progress_path.unlink(missing_ok=True)
    return EmbedFileReport(
        out=out_path,
        texts=total,
        dimensions=int(matrix.shape[1]),
        chunks_sent=chunks - resumed,
        chunks_resumed=resumed,
    )
