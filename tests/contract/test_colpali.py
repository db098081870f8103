"""ColPali on real vLLM (``ColPaliForRetrieval``: PaliGemma's SigLIP and Gemma with a multi-vector head)
against transformers on the same weights (the `colpali` fixture: tiny, seeded, server-fixtures/build_zoo.py):
page images and texts in, one vector per patch or token out, MaxSim scores for image documents.

vLLM 0.32 runs PaliGemma's decoder causally; transformers (and colpali-engine) attend both ways over the
prompt. The per-token vectors therefore equal transformers' with causal attention, not its default: the last
test pins that, so a vLLM that changes it is noticed (docs/families.md, "ColPali")."""

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

TEXTS = ["what is the revenue in the table", "a red square"]


@pytest.fixture(scope="module")
def pages() -> list[Path]:
    # Fixed paths with the same pixels every run, so the reference answer is kept (tests/zoo.py).
    folder = cache_dir() / "test-images"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    rows = np.where(np.arange(48) % 6 < 2, 255, 30).astype(np.uint8)
    pictures = {
        "page-noise": Image.fromarray(rng.integers(0, 256, (64, 48, 3), dtype=np.uint8)),
        "page-red": Image.new("RGB", (40, 56), (230, 20, 10)),
        "page-rows": Image.fromarray(np.broadcast_to(rows[:, None, None], (48, 40, 3)).copy()),
    }
    paths = []
    for name, picture in pictures.items():
        paths.append(folder / f"{name}.png")
        picture.save(paths[-1])
    return paths


def _matrices(answer: dict[str, Any], key: str) -> list[np.ndarray]:
    return [np.array(matrix, dtype=np.float32) for matrix in answer[key]]


@pytest.fixture(scope="module")
def expected(pages: list[Path]) -> dict[str, list[np.ndarray]]:
    answer = reference(
        "colpali", "colpali", {"texts": TEXTS, "images": [str(p) for p in pages], "causal": True}
    )
    return {key: _matrices(answer, key) for key in ("texts", "images")}


def test_page_images_and_texts_equal_transformers_token_by_token(
    vllm_colpali: Any, pages: list[Path], expected: dict[str, list[np.ndarray]]
) -> None:
    with vt.Client(vllm_colpali.base_url) as client:
        images = client.pool(images=pages)
        texts = client.pool(TEXTS)
        as_json = client.pool(images=pages[:1], encoding_format="float")
    assert [matrix.shape for matrix in images.data] == [(18, 16)] * 3  # 16 patches, <bos>, newline
    for got, want in zip([*images.data, *texts.data], [*expected["images"], *expected["texts"]], strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_array_equal(as_json.data[0], images.data[0])  # bytes and JSON carry the same floats
    assert images.usage.prompt_tokens == 3 * 18


def test_image_documents_are_ranked_by_maxsim_of_the_reference_vectors(
    vllm_colpali: Any, pages: list[Path], expected: dict[str, list[np.ndarray]]
) -> None:
    query = TEXTS[0]
    with vt.Client(vllm_colpali.base_url) as client:
        ranked = client.rerank(query, [*pages, TEXTS[1]])
        scores = client.score(query, pages).scores
    assert ranked.scorer is ScorerKind.LATE_INTERACTION
    documents = [*expected["images"], expected["texts"][1]]
    maxsims = [vt.maxsim(expected["texts"][0], document) for document in documents]
    assert [hit.index for hit in ranked.results] == sorted(range(4), key=lambda i: -maxsims[i])
    np.testing.assert_allclose(
        [hit.score for hit in sorted(ranked.results, key=lambda h: h.index)], maxsims, atol=1e-4
    )
    np.testing.assert_allclose(scores, maxsims[:3], atol=1e-4)


def test_vllm_runs_the_decoder_causally_where_transformers_attends_both_ways(
    vllm_colpali: Any, pages: list[Path], expected: dict[str, list[np.ndarray]]
) -> None:
    both_ways = reference("colpali", "colpali", {"texts": TEXTS, "images": [str(pages[0])], "causal": False})
    with vt.Client(vllm_colpali.base_url) as client:
        served = client.pool(images=pages[:1]).data[0]
    transformers_default = _matrices(both_ways, "images")[0]
    gap = np.abs(served - transformers_default).max()
    assert gap > 1e-2, "vLLM now attends both ways over ColPali's prompt: update docs/families.md"
    np.testing.assert_allclose(served, expected["images"][0], atol=1e-5)


def test_a_page_indexing_job_writes_the_reference_patch_vectors(
    vllm_colpali: Any, pages: list[Path], expected: dict[str, list[np.ndarray]], tmp_path: Path
) -> None:
    source = tmp_path / "pages.jsonl"
    source.write_text("".join(f'{{"page": "{path}"}}\n' for path in pages))  # absolute paths
    out = tmp_path / "pages.parquet"
    report = vt.embed_file(
        vllm_colpali.base_url, source, out, text_field="page", images=True, multi_vector=True
    )
    column = pq.read_table(out).column("token_embeddings").to_pylist()
    assert (report.texts, report.failed_rows, report.dimensions) == (len(pages), 0, 16)
    for got, want in zip(column, expected["images"], strict=True):
        np.testing.assert_allclose(np.array(got, np.float32), want, atol=1e-5)
