"""vllm_tasks.integrations.ray in a real local Ray runtime (``ray.init(num_cpus=2)``) against the real
fixtures: 2,000 texts through ``map_batches(Embedder)`` equal ``client.embed`` of the same texts, in order;
a poisoned row isolated in the error column; ``Scorer`` on the `rerank` server, ``Transcriber`` on `stt`,
``OCR`` on `ocr`, a handful of rows each.

Ray's cost on the 2-core CI machine (measured 2026-12-03, other sessions loading it): 3-14 s to start and
about 1.5 s to stop, per server group (the server plugin runs each server's tests together, so the
module-scoped runtime starts once per group, four times in a full run); about 0.7 GiB RSS once started,
1.5 GiB with two actors mapping; the object store is capped at 128 MiB. The tests themselves take about
45 s (2,000 texts, embedded twice), 13 s, 5 s, 18 s and 40 s. Teardown checks that no Ray process is left.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray
import ray.data
from PIL import Image, ImageDraw

import vllm_tasks as vt
from vllm_tasks.integrations.ray import OCR, Embedder, Scorer, Transcriber

pytestmark = pytest.mark.integration

AUDIO = Path(__file__).resolve().parents[1] / "data" / "audio"
RAY_PROCESSES = ("raylet", "gcs_server", "ray::", "default_worker.py", "dashboard", "log_monitor.py")


def ray_processes() -> list[str]:
    """Ray's live processes on this machine (by command line): what a runtime leaves when it is not shut
    down. Zombies (state Z: exited, not yet reaped by the init process they were handed to) do not count."""
    listing = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True, check=True)
    rows = [line.split(None, 2) for line in listing.stdout.splitlines()[1:]]
    return [
        " ".join(row)
        for row in rows
        if len(row) == 3 and not row[1].startswith("Z") and any(name in row[2] for name in RAY_PROCESSES)
    ]


def wait_for_ray_processes_to_exit(before: list[str], seconds: float = 15.0) -> list[str]:
    """The Ray processes not there ``before``, once they are gone or ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while (left := [p for p in ray_processes() if p not in before]) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


@pytest.fixture(scope="module")
def ray_runtime() -> Iterator[None]:
    """A local Ray runtime: 2 CPUs, a 128 MiB object store, no dashboard, no usage stats; shut down after,
    with no process left."""
    before = ray_processes()
    started = time.perf_counter()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=128 * 1024**2,
            log_to_driver=False,
            configure_logging=False,
        )
        context = ray.data.DataContext.get_current()
        context.execution_options.preserve_order = True  # rows come back in dataset order
        context.enable_progress_bars = False
        print(f"Ray runtime started in {time.perf_counter() - started:.1f} s")  # shown with -rA
        try:
            yield
        finally:
            stopping = time.perf_counter()
            ray.shutdown()
            left = wait_for_ray_processes_to_exit(before)
            print(f"Ray runtime stopped in {time.perf_counter() - stopping:.1f} s")
    assert left == []


def mapped(dataset: ray.data.Dataset, cls: type, batch_size: int, **kwargs: Any) -> list[dict[str, Any]]:
    """``dataset.map_batches(cls)`` on one actor (half a CPU: the server needs the cores), collected."""
    return dataset.map_batches(
        cls,
        fn_constructor_kwargs=kwargs,
        batch_size=batch_size,
        compute=ray.data.ActorPoolStrategy(size=1),
        num_cpus=0.5,
    ).take_all()


def corpus(count: int) -> list[str]:
    """Texts of varied lengths (5 to 60 words), all under MiniLM's 256 tokens."""
    words = [
        "river",
        "bank",
        "money",
        "loan",
        "water",
        "fish",
        "stone",
        "bridge",
        "market",
        "bread",
        "music",
        "song",
        "child",
        "village",
    ]
    return [
        f"passage {i}: " + " ".join(words[(i * 7 + k) % len(words)] for k in range(5 + i % 56))
        for i in range(count)
    ]


def test_2000_texts_through_map_batches_equal_client_embed_in_order(
    ray_runtime: None, vllm_embed: Any
) -> None:
    texts = corpus(2000)
    dataset = ray.data.from_items([{"id": i, "text": text} for i, text in enumerate(texts)])
    rows = dataset.map_batches(
        Embedder,
        fn_constructor_kwargs={"base_url": vllm_embed.base_url, "model": vllm_embed.model, "concurrency": 2},
        batch_size=256,
        compute=ray.data.ActorPoolStrategy(size=2),
        num_cpus=0.5,
    ).take_all()
    assert [row["id"] for row in rows] == list(range(2000))
    assert [row["text"] for row in rows] == texts
    vectors = np.stack([row["embedding"] for row in rows])
    with vt.Client(vllm_embed.base_url) as client:
        expected = client.embed(texts).vectors
    assert vectors.dtype == np.float32 and vectors.shape == expected.shape == (2000, 384)
    np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-6)


def test_a_poisoned_row_goes_to_the_error_column_and_the_others_are_embedded(
    ray_runtime: None, vllm_embed: Any, tmp_path: Path
) -> None:
    texts: list[str | None] = list(corpus(20))
    texts[6] = "word " * 400  # over max_model_len 256: the real server refuses it
    texts[13] = None
    dataset = ray.data.from_items([{"id": i, "text": text} for i, text in enumerate(texts)])
    kwargs = {"base_url": vllm_embed.base_url, "on_error": "column"}
    rows = mapped(dataset, Embedder, batch_size=5, **kwargs)
    errors = [row["error"] for row in rows]
    assert [i for i, error in enumerate(errors) if error] == [6, 13]
    assert errors[6].startswith("ContextLengthExceeded: ") and "256" in errors[6]
    assert re.match(r"InvalidInputError: text\[\d\]=None: is a NoneType", errors[13])  # [row in its batch]
    good = [i for i in range(20) if i not in (6, 13)]
    with vt.Client(vllm_embed.base_url) as client:
        expected = client.embed([texts[i] for i in good]).vectors
    vectors = np.stack([row["embedding"] for row in rows])
    np.testing.assert_allclose(vectors[good], expected, rtol=0, atol=1e-6)
    assert np.isnan(vectors[[6, 13]]).all()
    # batches without an error and with one agree on the column's type: written and read back as one
    dataset.map_batches(
        Embedder, fn_constructor_kwargs=kwargs, batch_size=5, compute=ray.data.ActorPoolStrategy(size=1)
    ).write_parquet(str(tmp_path / "out"))
    assert ray.data.read_parquet(str(tmp_path / "out")).count() == 20


def test_scorer_on_the_rerank_server_equals_client_score(ray_runtime: None, vllm_rerank: Any) -> None:
    queries = [f"Where is the {w}?" for w in ("river", "market", "bridge", "village")] * 10
    documents = corpus(40)
    dataset = ray.data.from_items(
        [{"query": q, "document": d} for q, d in zip(queries, documents, strict=True)]
    )
    rows = mapped(dataset, Scorer, batch_size=16, base_url=vllm_rerank.base_url)
    scores = np.array([row["score"] for row in rows])
    with vt.Client(vllm_rerank.base_url) as client:
        expected = client.score(queries, documents).scores
    assert scores.shape == (40,)
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-6)


def test_transcriber_on_the_stt_server_equals_client_transcribe(ray_runtime: None, vllm_stt: Any) -> None:
    paths = [str(AUDIO / name) for name in ("fox.wav", "numbers.wav", "french.wav")]
    dataset = ray.data.read_binary_files(paths, include_paths=True)
    rows = mapped(
        dataset, Transcriber, batch_size=2, base_url=vllm_stt.base_url, audio_column="bytes", concurrency=2
    )
    by_path = {os.path.basename(row["path"]): row["transcript"] for row in rows}
    with vt.Client(vllm_stt.base_url) as client:
        expected = {os.path.basename(path): client.transcribe(path).text for path in paths}
    assert by_path == expected
    assert "quick brown fox" in by_path["fox.wav"].lower()


def page(text: str) -> bytes:
    image = Image.new("RGB", (320, 240), "white")
    ImageDraw.Draw(image).text((20, 20), text, fill="black")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_ocr_on_the_ocr_server_equals_client_ocr(ray_runtime: None, vllm_ocr: Any) -> None:
    """The tiny model's text is meaningless but deterministic (greedy): the Ray rows equal the SDK's."""
    images = [page(text) for text in ("Invoice 42", "Total 99.00")]  # seconds per image on 2 cores
    dataset = ray.data.from_items([{"image": image} for image in images] + [{"image": b"not an image"}])
    rows = mapped(
        dataset,
        OCR,
        batch_size=2,
        base_url=vllm_ocr.base_url,
        max_tokens=4,
        blocks_column="blocks",
        on_error="column",
    )
    with vt.Client(vllm_ocr.base_url) as client, warnings.catch_warnings():
        warnings.simplefilter("ignore", vt.OCRTruncatedWarning)  # 4 tokens: every page is cut short
        expected = [client.ocr(image, max_tokens=4).markdown for image in images]
    assert [row["markdown"] for row in rows] == [*expected, ""]
    assert [row["error"] for row in rows][:2] == ["", ""] and rows[2]["error"].startswith("ImageError")
    assert all(row["blocks"].startswith("[") for row in rows[:2]) and rows[2]["blocks"] == ""
