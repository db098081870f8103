"""Batch jobs at corpus scale: stream an input of any size through one or several servers into a file,
resumably (``embed_file`` / ``aembed_file``; ``vllm-tasks embed-file``). See ``docs/jobs.md``.
"""

from __future__ import annotations

from .embed import EmbedFileReport, ReplicaReport, aembed_file, embed_file
from .inputs import text_lines

__all__ = ["EmbedFileReport", "ReplicaReport", "aembed_file", "embed_file", "text_lines"]
