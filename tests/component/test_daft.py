"""vllm_tasks.integrations.daft in real Daft queries (the local native runner) against one FakeVLLM.

Each front's column equals the SDK's direct call row for row (the rows' inputs differ, and so do their
answers), and a refused row is a null value with its error in the row, not a failed query: ``embed_text``
and ``embed_image`` through ``VLLMProvider``, and the ``@daft.cls`` classes ``Scorer``, ``Transcriber`` and
``OCR``. One FakeVLLM serves every task for the module (an OCR model's name, so the chat route answers as
DeepSeek-OCR; transcripts and pages name the upload they answer).
"""

from __future__ import annotations

import hashlib
import io
import logging
import pickle
from collections.abc import Iterator
from pathlib import Path

import daft
import numpy as np
import pytest
from daft import DataType, col
from daft.exceptions import DaftCoreException
from daft.functions import embed_image, embed_text
from PIL import Image, ImageDraw

import vllm_tasks as vt
from vllm_tasks.integrations.daft import OCR, Reranker, Scorer, Transcriber, VLLMProvider
from vllm_tasks.testing import FakeVLLM, ReceivedRequest, grounding_output

from ..fakes import FakeFixture

AUDIO = Path(__file__).resolve().parents[1] / "data" / "audio"
LONG = "word " * 600  # over the fake's context (512 tokens): the server refuses it
TEXTS = ["Paris is the capital of France.", "Bananas are yellow.", "The river floods in spring."]


def heard(request: ReceivedRequest) -> str:
    """A transcript that names the upload it answers."""
    content = request.files["file"].content
    return f" A recording of {len(content)} bytes, digest {hashlib.sha256(content).hexdigest()[:12]}."


def read_page(request: ReceivedRequest) -> str:
    """DeepSeek-OCR output that names the image it answers."""
    digest = hashlib.sha256(repr(request.json.get("messages")).encode()).hexdigest()[:12]
    return grounding_output([("title", (40, 30, 960, 120), f"# Scan {digest}")])


@pytest.fixture(scope="module", autouse=True)
def native_runner() -> None:
    """Daft's local native runner, whatever ran before: with a Ray runtime up in this process (the Ray
    tests' session fixture), Daft would otherwise pick its Ray runner, whose workers' logs and warnings
    these tests do not see."""
    try:
        daft.set_runner_native()
    except DaftCoreException:  # set once per process: by an earlier test, which must have set this one
        assert daft.get_or_infer_runner_type() == "native", "Daft's runner is Ray; these tests need native"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeVLLM]:
    with FakeVLLM(model="deepseek-ocr", transcript=heard, ocr_output=read_page) as server:
        yield server


@pytest.fixture
def settings(fake: FakeVLLM) -> vt.ClientSettings:
    fake.clear_faults()
    fake.clear_requests()
    return vt.ClientSettings(fake.url, max_retries=0)


def page(text: str) -> bytes:
    image = Image.new("RGB", (160, 80), "white")
    ImageDraw.Draw(image).text((10, 30), text, fill="black")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_embed_text_equals_client_embed_and_a_refused_row_is_null(
    settings: vt.ClientSettings, fake: FakeVLLM, caplog: pytest.LogCaptureFixture
) -> None:
    provider = VLLMProvider(settings, params={"encoding_format": "float"})
    df = daft.from_pydict({"text": [TEXTS[0], LONG, TEXTS[1], None, TEXTS[2]]})
    with caplog.at_level(logging.WARNING, "vllm_tasks.integrations.daft"):
        embedded = df.with_column(
            "vector", embed_text(col("text"), provider=provider, dimensions=128, prompt="passage: ")
        )
        vectors = embedded.to_pydict()["vector"]
    assert embedded.schema()["vector"].dtype == DataType.embedding(DataType.float32(), 128)  # the probe's
    sent = [r.json for r in fake.received("/v1/embeddings")]
    with vt.Client.from_settings(settings) as client:
        expected = client.embed(TEXTS, dimensions=128, prompt="passage: ").vectors
    assert vectors[1] is None and vectors[3] is None  # refused by the server, a null: never the query
    got = np.stack([vectors[0], vectors[2], vectors[4]])
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert not np.allclose(got[0], got[1])  # each row its own answer
    assert {b["dimensions"] for b in sent} == {128} and {b["encoding_format"] for b in sent} == {"float"}
    assert all(text.startswith("passage: ") for body in sent for text in body["input"])
    assert "2 of 5 rows refused" in caplog.text and "ContextLengthExceeded" in caplog.text


def test_embed_image_equals_client_embed_images(settings: vt.ClientSettings) -> None:
    df = daft.from_pydict({"png": [page("first"), page("second"), b"not an image"]})
    df = df.with_column("image", col("png").decode_image(on_error="null"))
    out = df.with_column("vector", embed_image(col("image"), provider=VLLMProvider(settings))).to_pydict()
    with vt.Client.from_settings(settings) as client:
        expected = client.embed(images=out["image"][:2]).vectors
    assert out["vector"][2] is None
    np.testing.assert_allclose(np.stack(out["vector"][:2]), expected, atol=1e-6)
    assert not np.allclose(expected[0], expected[1])


def test_a_model_without_matryoshka_gets_no_dimensions_and_long_texts_are_truncated_by_the_server(
    fake_embed: FakeFixture,
) -> None:
    settings = vt.ClientSettings(fake_embed.base_url, max_retries=0)
    provider = VLLMProvider(settings)
    df = daft.from_pydict({"text": [TEXTS[0], LONG]})
    embedded = df.with_column("vector", embed_text(col("text"), provider=provider, long_inputs="truncate"))
    vectors = embedded.to_pydict()["vector"]
    sent = [r.json for r in fake_embed.fake.received("/v1/embeddings")]
    assert embedded.schema()["vector"].dtype == DataType.embedding(DataType.float32(), 384)  # the server's
    assert all("dimensions" not in body and body["truncate_prompt_tokens"] == -1 for body in sent)
    with vt.Client.from_settings(settings) as client:
        expected = client.embed([TEXTS[0], LONG], long_inputs="truncate").vectors
    np.testing.assert_allclose(np.stack(vectors), expected, atol=1e-6)
    with pytest.raises(vt.BadRequestError) as refused:  # when the expression is built, not mid-query
        embed_text(col("text"), provider=provider, dimensions=128)
    assert refused.value.kind == "matryoshka_not_supported"


def test_provider_options_that_are_not_the_sdks_are_refused(settings: vt.ClientSettings) -> None:
    provider = VLLMProvider(settings)
    with pytest.raises(vt.InvalidInputError, match="batch_token_limit"):
        embed_text(col("text"), provider=provider, batch_token_limit=300_000)
    with pytest.raises(vt.InvalidInputError, match="batch_size"):
        VLLMProvider(settings, batch_size=0)


def test_scorer_equals_client_score_and_a_refused_pair_is_an_error_cell(settings: vt.ClientSettings) -> None:
    queries = ["capital of France?", "what colour are bananas?", "capital of France?", "floods?"]
    documents = [TEXTS[0], TEXTS[1], LONG, TEXTS[2]]
    scorer = Scorer(settings, batch_size=2)
    df = daft.from_pydict({"query": queries, "document": documents})
    rows = df.select(scorer(col("query"), col("document")).unnest()).to_pydict()
    with vt.Client.from_settings(settings) as client:
        expected = client.score([queries[i] for i in (0, 1, 3)], [documents[i] for i in (0, 1, 3)]).scores
    assert rows["score"][2] is None and rows["error"][2].startswith("ContextLengthExceeded")
    np.testing.assert_allclose([rows["score"][i] for i in (0, 1, 3)], expected, atol=1e-9)
    assert len(set(expected.tolist())) == 3 and [rows["error"][i] for i in (0, 1, 3)] == [None] * 3
    one_query = df.select(scorer("capital of France?", col("document"))["score"]).to_pydict()["score"]
    with vt.Client.from_settings(settings) as client:
        assert one_query[0] == pytest.approx(client.score("capital of France?", TEXTS[0]).scores[0])


def test_reranker_equals_client_rerank_row_by_row(settings: vt.ClientSettings) -> None:
    queries = ["capital of France?", "what colour are bananas?", "floods?", "q"]
    candidates = [TEXTS, list(reversed(TEXTS)), [TEXTS[2], LONG], [TEXTS[0], None]]
    df = daft.from_pydict({"query": queries, "candidates": candidates})
    rows = df.select(Reranker(settings, top_n=2)(col("query"), col("candidates")).unnest()).to_pydict()
    with vt.Client.from_settings(settings) as client:
        expected = [client.rerank(queries[row], candidates[row], top_n=2).results for row in (0, 1)]
    assert [[(hit["index"], hit["document"]) for hit in ranking] for ranking in rows["ranking"][:2]] == [
        [(hit.index, hit.document) for hit in hits] for hits in expected
    ]
    np.testing.assert_allclose(
        [[hit["score"] for hit in ranking] for ranking in rows["ranking"][:2]],
        [[hit.score for hit in hits] for hits in expected],
        atol=1e-9,
    )
    assert expected[0][0].document != expected[1][0].document  # each row its own ranking
    assert rows["ranking"][2:] == [None, None] and rows["error"][:2] == [None, None]
    assert rows["error"][2].startswith("ContextLengthExceeded") and rows["error"][3].startswith(
        "InvalidInput"
    )


def test_transcriber_equals_client_transcribe_row_by_row(settings: vt.ClientSettings) -> None:
    paths = [AUDIO / "fox.wav", AUDIO / "numbers.wav"]
    df = daft.from_pydict({"audio": [path.read_bytes() for path in paths] + [b"not audio", None]})
    rows = df.select(Transcriber(settings, concurrency=2)(col("audio")).unnest()).to_pydict()
    with vt.Client.from_settings(settings) as client:
        expected = [client.transcribe(path).text for path in paths]
    assert rows["text"] == [*expected, None, None] and expected[0] != expected[1]
    assert rows["error"][:2] == [None, None]
    assert rows["error"][2].startswith("InvalidInputError") and "None" in rows["error"][3]


def test_ocr_equals_client_ocr_row_by_row(settings: vt.ClientSettings) -> None:
    images = [page("Invoice 42"), page("Total 99.00")]
    df = daft.from_pydict({"image": [*images, b"not an image"]})
    rows = df.select(OCR(settings, params={"max_tokens": 200})(col("image")).unnest()).to_pydict()
    with vt.Client.from_settings(settings) as client:
        expected = [client.ocr(image, max_tokens=200).markdown for image in images]
    assert rows["markdown"] == [*expected, None] and expected[0] != expected[1]
    assert rows["error"][:2] == [None, None] and rows["error"][2].startswith("InvalidInputError")


def test_an_error_that_is_not_a_rows_fails_the_query(settings: vt.ClientSettings, fake: FakeVLLM) -> None:
    fake.fail(401, path="/score")
    df = daft.from_pydict({"query": ["q"], "document": ["d"]})
    with pytest.raises(vt.AuthenticationError):
        df.select(Scorer(settings)(col("query"), col("document"))).collect()


def test_bad_arguments_raise_when_made_and_instances_pickle_their_settings(
    settings: vt.ClientSettings,
) -> None:
    with pytest.raises(vt.InvalidInputError, match="concurrency"):
        Transcriber(settings, concurrency=0)
    with pytest.raises(vt.InvalidInputError, match="settings"):
        OCR("http://localhost:8000")  # type: ignore[arg-type]
    copy = pickle.loads(pickle.dumps(Scorer(settings)))  # the arguments travel; the copy builds its client
    scores = copy(daft.Series.from_pylist(["q", "q"]), daft.Series.from_pylist(TEXTS[:2]))
    assert [row["error"] for row in scores] == [None, None]
