"""CLIP on real vLLM (CLIPEmbeddingModel) against transformers on the same weights (the `clip` fixture: a
tiny seeded CLIPModel with its processor, server-fixtures/build_zoo.py): texts and images in one space,
and images as rerank/score documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from fixture_pins import cache_dir
from PIL import Image

import vllm_tasks as vt
from tests.zoo import reference
from vllm_tasks.types.scoring import ScorerKind

pytestmark = pytest.mark.contract

TEXTS = ["a photo of a cat", "a red square", "the blue sky"]
COLOURS = {"red": (255, 0, 0), "blue": (20, 40, 230), "stripes": None}


@pytest.fixture(scope="module")
def images() -> list[Path]:
    # Fixed paths with the same pixels every run, so the reference answer is kept (tests/zoo.py).
    folder = cache_dir() / "test-images"
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, colour in COLOURS.items():
        if colour is None:
            pixels = np.zeros((48, 40, 3), np.uint8)
            pixels[::4] = (250, 250, 0)
            image = Image.fromarray(pixels)
        else:
            image = Image.new("RGB", (40, 40), colour)
        paths.append(folder / f"{name}.png")
        image.save(paths[-1])
    return paths


@pytest.fixture(scope="module")
def expected(images: list[Path]) -> dict[str, np.ndarray]:
    answer = reference("clip", "clip", {"texts": TEXTS, "images": [str(p) for p in images]})
    return {name: np.array(vectors) for name, vectors in answer.items()}


def test_texts_and_images_equal_transformers(
    vllm_clip: Any, images: list[Path], expected: dict[str, np.ndarray]
) -> None:
    with vt.Client(vllm_clip.base_url) as client:
        texts = client.embed(TEXTS).vectors
        pictures = client.embed(images=images).vectors
        one = client.embed(images=images[0]).vectors
    np.testing.assert_allclose(texts, expected["texts"], atol=1e-4)
    np.testing.assert_allclose(pictures, expected["images"], atol=1e-4)
    np.testing.assert_allclose(one, expected["images"][:1], atol=1e-4)


def test_images_are_ranked_by_the_models_cosine(
    vllm_clip: Any, images: list[Path], expected: dict[str, np.ndarray]
) -> None:
    with vt.Client(vllm_clip.base_url) as client:
        result = client.rerank("a red square", [*images, "a photo of a cat"])
        scores = client.score("a red square", images).scores
    assert result.scorer is ScorerKind.BI_ENCODER
    cosines = [*(expected["images"] @ expected["texts"][1]), expected["texts"][0] @ expected["texts"][1]]
    assert [hit.index for hit in result.results] == sorted(range(4), key=lambda i: -cosines[i])
    np.testing.assert_allclose(
        [hit.score for hit in sorted(result.results, key=lambda h: h.index)], cosines, atol=1e-4
    )
    np.testing.assert_allclose(scores, cosines[:3], atol=1e-4)


def test_an_image_job_writes_the_reference_vectors(
    vllm_clip: Any, images: list[Path], expected: dict[str, np.ndarray], tmp_path: Path
) -> None:
    # paths relative to the list's folder, as a photo folder's index names them
    source = images[0].parent / "clip-images.txt"
    source.write_text("".join(f"{path.name}\n" for path in images))
    out = tmp_path / "images.parquet"
    report = vt.embed_file(vllm_clip.base_url, source, out, images=True)
    column = pq.read_table(out).column("embedding").to_pylist()
    assert (report.texts, report.failed_rows) == (len(images), 0)
    np.testing.assert_allclose(np.array(column, np.float32), expected["images"], atol=1e-4)
