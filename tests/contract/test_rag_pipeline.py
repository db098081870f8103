"""A LangChain RAG chain end to end on the real CPU fixtures: OCR a PDF (VLLMOCRLoader, `ocr` server) ->
split -> embed into InMemoryVectorStore (VLLMEmbeddings, `embed`) -> retrieve -> rerank (VLLMReranker,
`rerank`).

Only one vLLM server runs at a time, so the chain is three tests, one per server, handing their output on
through ``STAGES`` (module state) and marked ``pipeline_stage(n)``: tests/integration/conftest.py puts the
servers' groups in stage order, also when the whole suite runs (where the `embed` group would otherwise
come first). A stage whose input is missing (its predecessor failed or was deselected) skips.

What is asserted where: the OCR fixture's language model is tiny and random (docs/ocr.md), so its text
means nothing -- stage 1 checks what is deterministic (one Document per page, page numbers, sizes, the
truncation flags, blocks as lists, the async path equal to the sync one) and then stands in each page's
true text (the text drawn on the page) for the model's output, keeping the loader's metadata. The embed
fixture is real MiniLM: stage 2 checks that each question retrieves the paragraph that answers it, from
the right page. The rerank fixture's head is random: stage 3 checks the order and scores equal the SDK's
own ``rerank`` and that the OCR metadata survived the whole chain.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import BaseDocumentTransformer, Document
from langchain_core.vectorstores import InMemoryVectorStore
from PIL import Image, ImageDraw

import vllm_tasks as vt
from vllm_tasks.integrations.langchain import VLLMEmbeddings, VLLMOCRLoader, VLLMReranker

pytestmark = pytest.mark.integration

#: The text drawn on each page of the PDF: two paragraphs per page.
PAGES = {
    1: [
        "The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
        "Photosynthesis lets plants turn sunlight, water and carbon dioxide into glucose.",
    ],
    2: [
        "The Pacific is the largest and deepest ocean on Earth.",
        "Python is a programming language created by Guido van Rossum in 1991.",
    ],
}
QUESTIONS = {  # question -> (page, paragraph index) that answers it
    "When was the Eiffel Tower completed?": (1, 0),
    "How do plants make glucose?": (1, 1),
    "Which ocean is the largest?": (2, 0),
    "Who created the Python programming language?": (2, 1),
}
RERANK_QUERY = "Who created the Python programming language?"

STAGES: dict[str, Any] = {}


def stage_input(name: str) -> Any:
    if name not in STAGES:
        pytest.skip(f"the previous stage of the chain did not produce {name!r} (it failed or was deselected)")
    return STAGES[name]


def make_pdf(path: Path) -> Path:
    """Two 300 x 400 pt pages with their paragraphs drawn in black (rendered at 96 dpi: 400 x 534 px)."""
    images = []
    for paragraphs in PAGES.values():
        image = Image.new("RGB", (300, 400), "white")
        draw = ImageDraw.Draw(image)
        y = 20
        for paragraph in paragraphs:
            words, line = paragraph.split(), ""
            for word in words:
                if len(line) + len(word) > 40:
                    draw.text((15, y), line, fill="black")
                    y, line = y + 14, ""
                line = f"{line} {word}".strip()
            draw.text((15, y), line, fill="black")
            y += 30
        images.append(image)
    images[0].save(path, format="PDF", save_all=True, append_images=images[1:], resolution=72)
    return path


class ParagraphSplitter(BaseDocumentTransformer):
    """langchain-core has no text splitter (they live in langchain-text-splitters): split on blank lines,
    keep the metadata, number the chunks."""

    def transform_documents(self, documents: Sequence[Document], **kwargs: Any) -> Sequence[Document]:
        chunks = []
        for doc in documents:
            for number, text in enumerate(p for p in doc.page_content.split("\n\n") if p.strip()):
                chunks.append(Document(page_content=text.strip(), metadata={**doc.metadata, "chunk": number}))
        return chunks


@pytest.mark.pipeline_stage(1)
def test_stage_1_ocr_the_pdf(vllm_ocr: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    pdf = make_pdf(tmp_path_factory.mktemp("rag") / "facts.pdf")
    options = {"base_url": vllm_ocr.base_url, "dpi": 96, "max_tokens": 8, "concurrency": 1}
    with pytest.warns(vt.OCRTruncatedWarning):  # 8 tokens: the tiny model would write until the limit
        pages = VLLMOCRLoader(pdf, **options).load()
    assert [(d.metadata["page"], d.metadata["page_label"]) for d in pages] == [(0, "1"), (1, "2")]
    for doc in pages:
        assert doc.metadata["source"] == str(pdf) and doc.metadata["model"] == vllm_ocr.model
        assert doc.metadata["image_size"] == [400, 534]
        assert doc.metadata["truncated"] is True and doc.metadata["finish_reason"] == "length"
        assert isinstance(doc.metadata["blocks"], list) and isinstance(doc.page_content, str)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vt.OCRTruncatedWarning)
        [again] = asyncio.run(VLLMOCRLoader(pdf, pages=[2], **options).aload())
    assert again.metadata == pages[1].metadata and again.page_content == pages[1].page_content  # greedy
    # The model's text is noise: stand in the text drawn on each page, keep what the loader found.
    STAGES["documents"] = [
        Document(
            page_content="\n\n".join(PAGES[int(doc.metadata["page_label"])]),
            metadata={**doc.metadata, "ocr_markdown": doc.page_content},
        )
        for doc in pages
    ]


@pytest.mark.pipeline_stage(2)
def test_stage_2_split_embed_retrieve(vllm_embed: Any) -> None:
    chunks = ParagraphSplitter().transform_documents(stage_input("documents"))
    assert len(chunks) == 4
    embeddings = VLLMEmbeddings(base_url=vllm_embed.base_url)
    store = InMemoryVectorStore(embeddings)
    store.add_documents(list(chunks))
    for question, (page, paragraph) in QUESTIONS.items():
        [best] = store.similarity_search(question, k=1)
        assert best.page_content == PAGES[page][paragraph], question
        assert best.metadata["page_label"] == str(page) and best.metadata["chunk"] == paragraph
    [(hit, score)] = asyncio.run(store.asimilarity_search_with_score(RERANK_QUERY, k=1))
    with vt.Client(vllm_embed.base_url) as client:
        vectors = client.embed([RERANK_QUERY, hit.page_content]).vectors
    assert score == pytest.approx(float(vectors[0] @ vectors[1] / np.prod(np.linalg.norm(vectors, axis=1))))
    STAGES["candidates"] = store.similarity_search(RERANK_QUERY, k=4)


@pytest.mark.pipeline_stage(3)
def test_stage_3_rerank(vllm_rerank: Any) -> None:
    candidates = stage_input("candidates")
    ranked = VLLMReranker(base_url=vllm_rerank.base_url, top_n=2).compress_documents(candidates, RERANK_QUERY)
    with vt.Client(vllm_rerank.base_url) as client:
        expected = client.rerank(RERANK_QUERY, [c.page_content for c in candidates], top_n=2)
    assert [d.page_content for d in ranked] == [candidates[i].page_content for i in expected.indices]
    assert [d.metadata["relevance_score"] for d in ranked] == pytest.approx(list(expected.scores), abs=1e-6)
    for doc in ranked:  # what the OCR loader wrote is still there after split, embed, retrieve, rerank
        assert doc.metadata["source"].endswith("facts.pdf")
        assert {"page", "page_label", "blocks", "image_size", "ocr_markdown", "chunk"} <= set(doc.metadata)
