"""Every public method, job and callable taking ``concurrency`` or ``batch_size`` refuses a value that is
not a count (``None``, ``"fast"``, 0, -1, 1.5, ``True``; ``concurrency`` also takes ``"auto"``) with an
``InvalidInputError`` naming the field, before any request."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import vllm_tasks as vt
from vllm_tasks.integrations import ray

from .conftest import BASE

BAD = [None, "fast", 0, -1, 1.5, True]
CALLS: dict[str, tuple[Any, ...]] = {
    "embed": (["a"],),
    "embed_sparse": (["a"],),
    "embed_v2": (["a"],),
    "pool": (["a"],),
    "classify": (["a"],),
    "rerank": ("q", ["d"]),
    "score": ("q", ["d"]),
}


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize("field", ["batch_size", "concurrency"])
@pytest.mark.parametrize("method", sorted(CALLS))
def test_client_methods(method: str, field: str, value: object, make_client: Callable[..., Any]) -> None:
    with pytest.raises(vt.InvalidInputError, match=field):
        getattr(make_client(), method)(*CALLS[method], **{field: value})


@pytest.mark.parametrize("value", BAD)
def test_ocr_pdf_and_transcription_chunking(value: object, make_client: Callable[..., Any]) -> None:
    with pytest.raises(vt.InvalidInputError, match="concurrency"):
        make_client().ocr_pdf(b"%PDF-1.4", concurrency=value)
    with pytest.raises(vt.InvalidInputError, match="concurrency"):
        vt.ChunkingOptions(concurrency=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize("field", ["batch_size", "concurrency"])
def test_embed_file(field: str, value: object, tmp_path: Path) -> None:
    rows = tmp_path / "in.txt"
    rows.write_text("a\nb\n")
    with pytest.raises(vt.InvalidInputError, match=field):
        vt.embed_file(BASE, rows, tmp_path / "out.npy", **{field: value})


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize("job", [vt.ocr_dir, vt.transcribe_dir])
def test_folder_jobs(job: Callable[..., Any], value: object, tmp_path: Path) -> None:
    with pytest.raises(vt.InvalidInputError, match="concurrency"):
        job(BASE, tmp_path, tmp_path / "out", concurrency=value)


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize(
    ("callable_class", "field"),
    [
        (ray.Embedder, "batch_size"),
        (ray.Embedder, "concurrency"),
        (ray.Scorer, "batch_size"),
        (ray.Scorer, "concurrency"),
        (ray.OCR, "concurrency"),
        (ray.OCR, "pdf_concurrency"),
        (ray.Transcriber, "concurrency"),
    ],
)
def test_ray_callables(callable_class: type[Any], field: str, value: object) -> None:
    with pytest.raises(vt.InvalidInputError, match=field):
        callable_class(settings=vt.ClientSettings(BASE), **{field: value})
