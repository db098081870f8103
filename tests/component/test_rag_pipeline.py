"""A LangChain RAG chain end to end on FakeVLLM: OCR a PDF (VLLMOCRLoader, a fake like `ocr`) -> split ->
embed into InMemoryVectorStore (VLLMEmbeddings, `embed`) -> retrieve -> rerank (VLLMReranker, `rerank`).

The three fakes run at once, so the chain is one test. The OCR fake reads the page it is sent: it tells
the PDF's pages apart by their pixels and answers each page's drawn paragraphs as grounded text blocks
(with the boxes they were drawn in), so the loader's documents carry the true text and the chain runs on
what the loader produced. The embed fake's vectors follow word overlap, so each question retrieves the
paragraph that shares its words; the rerank order and scores must equal the SDK's own ``rerank``; the
loader's metadata must survive split, embed, retrieve and rerank. The truncated-page flags (``max_tokens``
reached) are tested in test_langchain.py (test_ocr_loader_truncated_pages_are_marked).
"""

from __future__ import annotations

import asyncio
import base64
import io
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
from vllm_tasks.testing import grounding_output
from vllm_tasks.testing.wire import ReceivedRequest

from ..fakes import FakeFixture, fake_like

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
PAGE_SIZE = (300, 400)  # points: the PDF is saved at 72 dpi, one pixel a point
DPI = 96

Box = tuple[int, int, int, int]


def draw_page(paragraphs: list[str]) -> tuple[Image.Image, list[Box]]:
    """A white page with its paragraphs drawn in black, wrapped at 40 characters, and each paragraph's
    box on DeepSeek-OCR's 0-999 scale."""
    image = Image.new("RGB", PAGE_SIZE, "white")
    draw = ImageDraw.Draw(image)
    boxes: list[Box] = []
    y = 20
    for paragraph in paragraphs:
        lines, line = [], ""
        for word in paragraph.split():
            if len(line) + len(word) > 40:
                lines.append(line)
                line = ""
            line = f"{line} {word}".strip()
        lines.append(line)
        drawn = []
        for number, text in enumerate(lines):
            draw.text((15, y + 14 * number), text, fill="black")
            drawn.append(draw.textbbox((15, y + 14 * number), text))
        x1, y1 = min(b[0] for b in drawn), min(b[1] for b in drawn)
        x2, y2 = max(b[2] for b in drawn), max(b[3] for b in drawn)
        width, height = PAGE_SIZE
        boxes.append((x1 * 999 // width, y1 * 999 // height, x2 * 999 // width, y2 * 999 // height))
        y += 14 * (len(lines) - 1) + 30
    return image, boxes


DRAWN = {number: draw_page(paragraphs) for number, paragraphs in PAGES.items()}


def read_page(request: ReceivedRequest) -> str:
    """The OCR fake's answer: the drawn page nearest the image sent, as one grounded block per paragraph
    (a request without an image, such as the SDK's processor check, gets nothing)."""
    urls = [
        part["image_url"]["url"]
        for message in request.json["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]
    if not urls:
        return ""
    sent = Image.open(io.BytesIO(base64.b64decode(urls[0].split(",", 1)[1])))
    pixels = np.asarray(sent.convert("L").resize(PAGE_SIZE), dtype=np.float32)
    distance = {
        number: float(np.abs(pixels - np.asarray(image.convert("L"), dtype=np.float32)).mean())
        for number, (image, _boxes) in DRAWN.items()
    }
    number = min(distance, key=distance.__getitem__)
    return grounding_output(
        ("text", box, paragraph) for paragraph, box in zip(PAGES[number], DRAWN[number][1], strict=True)
    )


def make_pdf(path: Path) -> Path:
    """The drawn pages as a PDF of 300 x 400 pt pages (rendered at 96 dpi: 400 x 534 px)."""
    images = [image for image, _boxes in DRAWN.values()]
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


def test_ocr_split_embed_retrieve_rerank(
    fake_embed: FakeFixture, fake_rerank: FakeFixture, tmp_path: Path
) -> None:
    pdf = make_pdf(tmp_path / "facts.pdf")

    # OCR: one Document per page, with the page's text, blocks and the loader's metadata.
    with fake_like("ocr", ocr_output=read_page) as ocr:
        options = {"base_url": ocr.base_url, "dpi": DPI, "concurrency": 2}
        pages = VLLMOCRLoader(pdf, **options).load()
        [again] = asyncio.run(VLLMOCRLoader(pdf, pages=[2], **options).aload())
    assert [(d.metadata["page"], d.metadata["page_label"]) for d in pages] == [(0, "1"), (1, "2")]
    for doc, (number, paragraphs) in zip(pages, PAGES.items(), strict=True):
        assert doc.page_content == "\n\n".join(paragraphs)
        assert doc.metadata["source"] == str(pdf) and doc.metadata["model"] == ocr.model
        assert doc.metadata["image_size"] == [400, 534]  # 300 x 400 pt at 96 dpi, rounded up
        assert doc.metadata["truncated"] is False and doc.metadata["finish_reason"] == "stop"
        blocks = [(b["label"], b["text"], b["boxes_normalized"]) for b in doc.metadata["blocks"]]
        assert blocks == [
            ("text", p, [list(box)]) for p, box in zip(paragraphs, DRAWN[number][1], strict=True)
        ]
    assert again.metadata == pages[1].metadata and again.page_content == pages[1].page_content

    # Split, embed, retrieve: each question finds the paragraph that answers it, from the right page.
    chunks = ParagraphSplitter().transform_documents(pages)
    assert len(chunks) == 4
    store = InMemoryVectorStore(VLLMEmbeddings(base_url=fake_embed.base_url))
    store.add_documents(list(chunks))
    for question, (page, paragraph) in QUESTIONS.items():
        [best] = store.similarity_search(question, k=1)
        assert best.page_content == PAGES[page][paragraph], question
        assert best.metadata["page_label"] == str(page) and best.metadata["chunk"] == paragraph
    [(hit, score)] = asyncio.run(store.asimilarity_search_with_score(RERANK_QUERY, k=1))
    with vt.Client(fake_embed.base_url) as client:
        vectors = client.embed([RERANK_QUERY, hit.page_content]).vectors
    assert score == pytest.approx(float(vectors[0] @ vectors[1] / np.prod(np.linalg.norm(vectors, axis=1))))
    candidates = store.similarity_search(RERANK_QUERY, k=4)

    # Rerank: the SDK's order and scores; the OCR loader's metadata survived the whole chain.
    reranker = VLLMReranker(base_url=fake_rerank.base_url, top_n=2)
    ranked = reranker.compress_documents(candidates, RERANK_QUERY)
    with vt.Client(fake_rerank.base_url) as client:
        expected = client.rerank(RERANK_QUERY, [c.page_content for c in candidates], top_n=2)
    assert [d.page_content for d in ranked] == [candidates[i].page_content for i in expected.indices]
    assert [d.metadata["relevance_score"] for d in ranked] == pytest.approx(list(expected.scores), abs=1e-6)
    assert ranked[0].page_content == PAGES[2][1]
    for doc in ranked:
        page = pages[doc.metadata["page"]]
        assert doc.metadata["source"].endswith("facts.pdf")
        assert doc.metadata == {
            **page.metadata,
            "chunk": PAGES[int(page.metadata["page_label"])].index(doc.page_content),
            "relevance_score": doc.metadata["relevance_score"],
        }
