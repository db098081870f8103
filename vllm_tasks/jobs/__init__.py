"""Batch jobs at corpus scale: stream an input of any size through one or several servers into a file,
resumably (``embed_file`` / ``aembed_file``; ``vllm-tasks embed-file``), and folders of documents or
recordings (``ocr_dir``, ``transcribe_dir``; ``vllm-tasks ocr-dir``, ``transcribe-dir``). See
``docs/jobs.md``.

A job that cannot start or go on raises a :class:`JobError` (:class:`JobMismatch`,
:class:`ReplicaMismatch`, :class:`RowFailed`, :class:`InsufficientDiskSpace`); a finished one returns
its report (:class:`EmbedFileReport`, :class:`FolderJobReport`).
"""

from __future__ import annotations

from ..errors import InsufficientDiskSpace, JobError, JobMismatch, ReplicaMismatch, RowFailed
from .embed import EmbedFileReport, aembed_file, embed_file
from .folders import FolderJobReport
from .inputs import text_lines
from .media import aocr_dir, atranscribe_dir, ocr_dir, transcribe_dir
from .scaffold import ReplicaReport

__all__ = [
    "EmbedFileReport",
    "FolderJobReport",
    "InsufficientDiskSpace",
    "JobError",
    "JobMismatch",
    "ReplicaMismatch",
    "ReplicaReport",
    "RowFailed",
    "aembed_file",
    "aocr_dir",
    "atranscribe_dir",
    "embed_file",
    "ocr_dir",
    "text_lines",
    "transcribe_dir",
]
