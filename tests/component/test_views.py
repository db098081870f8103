"""Notebook views (``_repr_html_``, ``to_html``, ``__repr__``) of the results, on both clients.

What they promise: user text is escaped everywhere, every view is bounded whatever the size of the result,
and the references a result keeps for its view (audio, score inputs) change neither ``model_dump`` nor
pickles nor equality.
"""

from __future__ import annotations

import base64
import io
import pickle
import re
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageDraw

import vllm_tasks as vt
from vllm_tasks import defaults, views
from vllm_tasks.audio import sniff_audio
from vllm_tasks.testing import FakeVLLM, grounding_output
from vllm_tasks.types.audio import audio_player
from vllm_tasks.types.embeddings import norm_stats
from vllm_tasks.types.ocr import OCRBlock
from vllm_tasks.types.server import ServerInfo

from ..clients import stream_result

ROOT = Path(__file__).resolve().parents[2]
FOX = ROOT / "tests" / "data" / "audio" / "fox.wav"
EVIL = "<script>alert('x')</script>\"><img src=x onerror=alert(1)>"
DOCS = ["Paris is the capital of France.", "Bananas are yellow.", "France is in Europe."]


def assert_escaped(html: str) -> None:
    """No markup from EVIL survives: neither the script tag nor an attribute broken out of."""
    assert "<script" not in html.lower()
    assert "<img" not in html.lower()
    assert "&quot;&gt;&lt;img" in html  # the quote that would close an attribute is escaped too


def page_image(size: tuple[int, int] = (320, 240)) -> Image.Image:
    image = Image.new("RGB", size, "white")
    ImageDraw.Draw(image).text((20, 20), "Hello OCR", fill="black")
    return image


def png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


# --------------------------------------------------------------------------------------------------
# Results from both clients
# --------------------------------------------------------------------------------------------------


def test_embedding_view_and_repr(make_client: Any, fake_vllm: FakeVLLM) -> None:
    result = make_client(fake_vllm.url).embed(["hello world", "vLLM serves embeddings"])
    html = result._repr_html_()
    assert "EmbeddingResult" in html and "float32[2, 384]" in html
    assert "unit length (normalized)" in html  # the fake's vectors are normalised, as vLLM's are
    assert "fake-model" in html and "bytes" in html  # model and transport
    assert f"prompt tokens: <b>{result.usage.prompt_tokens}" in html
    text = repr(result)
    assert text.startswith("EmbeddingResult(vectors=float32[2, 384], model='fake-model'")
    assert "encoding_format='bytes'" in text and len(text) < 300


def test_rerank_view_escapes_documents_and_ranks_them(make_client: Any, fake_vllm: FakeVLLM) -> None:
    documents = [*DOCS, EVIL]
    result = make_client(fake_vllm.url).rerank(f"capital of France? {EVIL}", documents)
    html = result._repr_html_()
    assert_escaped(html)
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    ranked = re.findall(r"<tr><td[^>]*>(\d+)</td><td[^>]*>(\d+)</td>", html)
    assert [int(index) for _, index in ranked] == result.indices
    assert "RerankResult — 4 hits" in html
    assert "more not shown" not in html
    assert repr(result).startswith("RerankResult(results=[4 hits: ")


def test_score_view_ranks_pairs_with_their_texts(make_client: Any, fake_vllm: FakeVLLM) -> None:
    result = make_client(fake_vllm.url).score("capital of France?", [*DOCS, EVIL])
    html = result._repr_html_()
    assert_escaped(html)
    assert "text_1: capital of France?" in html
    order = [int(pair) for pair in re.findall(r"<tr><td[^>]*>\d+</td><td[^>]*>(\d+)</td>", html)]
    assert order == sorted(range(4), key=lambda i: -result.scores[i])
    for document in DOCS:
        assert views.esc(document) in html
    assert repr(result).startswith("ScoreResult(scores=float64[4] [")


def test_probe_view(make_client: Any, fake_vllm: FakeVLLM) -> None:
    report = make_client(fake_vllm.url).probe()
    html = report._repr_html_()
    assert "ProbeReport" in html and "vLLM: <b>0.32.0</b>" in html
    for probe in report.tasks:
        assert f"<code>{probe.path}</code>" in html
    assert html.count(">served</span>") == len(report.served_tasks)
    for advisory in report.advisories:
        assert advisory.id in html
    assert repr(report).startswith(f"ProbeReport(server='{fake_vllm.url}', version='0.32.0', served=[")


def test_transcription_keeps_a_path_by_reference_and_plays_it(make_client: Any, fake_vllm: FakeVLLM) -> None:
    result = make_client(fake_vllm.url).transcribe(str(FOX))
    html = result._repr_html_()
    assert '<audio controls preload="metadata" src="data:audio/wav;base64,' in html
    embedded = re.search(r"base64,([A-Za-z0-9+/=]+)", html)
    assert embedded is not None and base64.b64decode(embedded.group(1)) == FOX.read_bytes()
    assert result._audio.value == str(FOX.absolute())  # a string: the bytes are not held
    assert "Transcription — " in html and "The quick brown fox" in html
    assert repr(result).startswith("Transcription(text='The quick brown fox")


def test_transcription_keeps_small_bytes_not_file_objects(make_client: Any, fake_vllm: FakeVLLM) -> None:
    client = make_client(fake_vllm.url)
    data = FOX.read_bytes()
    from_bytes = client.transcribe(data)
    assert from_bytes._audio.value is data  # the caller's object, not a copy
    assert from_bytes.player().size == len(data)
    with FOX.open("rb") as handle:
        from_file = client.transcribe(handle)
    assert from_file._audio.value is None
    assert "<audio" not in from_file._repr_html_()
    with pytest.raises(ValueError, match="keeps no audio"):
        from_file.player()
    assert from_file.player(data).mime == "audio/wav"  # the explicit way


def test_large_bytes_are_not_kept_alive(
    make_client: Any, fake_vllm: FakeVLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(defaults, "VIEW_MAX_MEDIA_BYTES", 1000)
    result = make_client(fake_vllm.url).transcribe(FOX.read_bytes())
    assert result._audio.value is None


def test_audio_over_the_media_cap_is_named_not_embedded(make_client: Any, fake_vllm: FakeVLLM) -> None:
    result = make_client(fake_vllm.url).transcribe(FOX)
    assert "<audio" in result.to_html()
    small = result.to_html(max_media_bytes=1000)
    assert "<audio" not in small and "audio not shown" in small and "max_bytes=1,000" in small
    assert len(small) < 2000


def test_stream_result_keeps_the_path(make_client: Any, fake_vllm: FakeVLLM) -> None:
    client = make_client(fake_vllm.url)
    stream = client.transcribe_stream(FOX)
    result = stream_result(client, stream)
    assert result._audio.value == str(FOX.absolute())
    assert "<audio" in result._repr_html_()


@pytest.mark.fake_vllm(model="deepseek-ocr")
def test_ocr_view_draws_the_boxes_over_the_page(make_client: Any, fake_vllm: FakeVLLM) -> None:
    result = make_client(fake_vllm.url).ocr(page_image())
    html = result._repr_html_()
    boxes = sum(len(block.boxes) for block in result.blocks)
    assert boxes > 0 and html.count("<rect ") == boxes
    assert '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 320 240"' in html
    assert '<image href="data:image/png;base64,' in html
    assert views.esc(result.markdown.splitlines()[0]) in html
    assert repr(result).startswith("OCRResult(markdown=")


# --------------------------------------------------------------------------------------------------
# Escaping
# --------------------------------------------------------------------------------------------------


def test_every_view_escapes_user_and_server_text() -> None:
    usage = vt.types.Usage(prompt_tokens=3, total_tokens=3)
    transcription = vt.types.Transcription(
        text=EVIL,
        model=EVIL,
        language=EVIL,
        segments=[vt.types.TranscriptionSegment(start=0.0, end=1.0, text=EVIL)],
    )
    block = OCRBlock(label=EVIL, text=EVIL, boxes=[(1, 2, 3, 4)], boxes_normalized=[(1, 2, 3, 4)])
    ocr = vt.types.OCRResult(
        text=EVIL,
        markdown=EVIL,
        blocks=[block],
        usage=usage,
        finish_reason=EVIL,
        truncated=False,
        model=EVIL,
        prompt="",
        image_size=(10, 10),
        sent_size=(10, 10),
    )
    card = vt.types.ModelCard(id=EVIL, root=EVIL)
    info = ServerInfo(base_url="http://h", version=EVIL, models=(card,), routes=None)
    report = vt.types.ProbeReport(
        server=info,
        tasks=(vt.types.TaskProbe(task=EVIL, path=EVIL, status=vt.types.TaskStatus.ERROR, detail=EVIL),),
        advisories=(vt.types.Advisory(id=EVIL, message=EVIL, reference="javascript:alert(1)"),),
    )
    rerank = vt.types.RerankResult(
        results=[vt.types.RerankHit(index=0, score=1.0, document={"text": EVIL})],
        model=EVIL,
        scorer=vt.types.ScorerKind.CROSS_ENCODER,
    )
    vectors = np.ones((1, 2), np.float32)
    embedding = vt.types.EmbeddingResult(vectors=vectors, model=EVIL, usage=usage, encoding_format=EVIL)
    score = vt.types.ScoreResult(scores=np.array([0.5]), model=EVIL, scorer=vt.types.ScorerKind.BI_ENCODER)
    score.keep_inputs([EVIL], [EVIL], "1:1")
    for result in (transcription, ocr, report, rerank, embedding, score):
        html = result._repr_html_()
        assert_escaped(html)
        assert "&lt;script&gt;" in html, type(result).__name__
    assert 'href="javascript' not in report._repr_html_()


def test_a_reference_link_is_http_only() -> None:
    info = ServerInfo(base_url="http://h", version="0.32.0", models=(), routes=None)
    links = (
        vt.types.Advisory(id="a", message="m", reference="https://github.com/vllm-project/vllm/issues/1"),
        vt.types.Advisory(id="b", message="m", reference="javascript:alert(1)"),
    )
    html = vt.types.ProbeReport(server=info, tasks=(), advisories=links).to_html()
    assert 'href="https://github.com/vllm-project/vllm/issues/1"' in html
    assert 'href="javascript' not in html and "(javascript:alert(1))" in html


# --------------------------------------------------------------------------------------------------
# Bounded size
# --------------------------------------------------------------------------------------------------


def test_a_100000_document_rerank_view_stays_small() -> None:
    long_document = "word " * 20_000  # 100 KB each: the whole ranking is 10 GB of text by reference
    hits = [
        vt.types.RerankHit(index=i, score=1 - i / 100_000, document=long_document) for i in range(100_000)
    ]
    result = vt.types.RerankResult(results=hits, model="m", scorer=vt.types.ScorerKind.CROSS_ENCODER)
    html = result._repr_html_()
    assert len(html) < 60_000
    assert html.count("<tr>") == 1 + defaults.VIEW_MAX_ROWS
    assert "… 99,950 more hits not shown" in html
    assert len(result.to_html(max_rows=200)) < 200_000
    assert len(repr(result)) < 400


def test_a_100000_pair_score_view_shows_the_top_pairs() -> None:
    rng = np.random.default_rng(0)
    scores = rng.random(100_000)
    texts = [f"document {i}" for i in range(100_000)]
    result = vt.types.ScoreResult(scores=scores, model="m", scorer=vt.types.ScorerKind.CROSS_ENCODER)
    result.keep_inputs(["query"], texts, "1:N")
    html = result.to_html(max_rows=10)
    shown = [int(pair) for pair in re.findall(r"<tr><td[^>]*>\d+</td><td[^>]*>(\d+)</td>", html)]
    assert shown == list(np.argsort(-scores)[:10])
    assert all(f"document {i}<" in html for i in shown)
    assert "99,990 more pairs not shown" in html and len(html) < 20_000


def test_huge_embeddings_transcripts_and_pages_stay_small() -> None:
    vectors = np.ones((100_000, 64), np.float32) / 8
    embedding = vt.types.EmbeddingResult(
        vectors=vectors, model="m", usage=vt.types.Usage(), encoding_format="float"
    )
    assert len(embedding._repr_html_()) < 10_000
    segments = [vt.types.TranscriptionSegment(start=i, end=i + 1, text="x" * 5000) for i in range(100_000)]
    transcription = vt.types.Transcription(text="y" * 1_000_000, segments=segments)
    html = transcription._repr_html_()
    assert len(html) < 120_000 and "99,950 more segments not shown" in html
    plain = vt.types.Transcription(text="y" * 1_000_000)
    html = plain._repr_html_()
    assert len(html) < 25_000 and "showing 20,000 of 1,000,000 characters" in html
    boxes = [(0, 0, 5, 5)] * 3
    block = OCRBlock(label="text", text="z" * 10_000, boxes=boxes, boxes_normalized=boxes)
    ocr = vt.types.OCRResult(
        text="",
        markdown="m" * 1_000_000,
        blocks=[block] * 10_000,
        usage=vt.types.Usage(),
        finish_reason="length",
        truncated=True,
        model="m",
        prompt="",
        image_size=None,
        sent_size=None,
    )
    html = ocr._repr_html_()
    assert len(html) < 80_000 and "9,950 more blocks not shown" in html and "cut short by max_tokens" in html


def test_a_large_page_image_is_shown_as_a_smaller_copy(make_client: Any, fake_vllm: FakeVLLM) -> None:
    rng = np.random.default_rng(1)
    noise = Image.fromarray(rng.integers(0, 255, (1800, 1800, 3), dtype=np.uint8))  # ~9.7 MB as PNG
    result = make_client(fake_vllm.url).ocr(noise, preset="deepseek-ocr")
    assert len(result._image.data) > defaults.VIEW_MAX_MEDIA_BYTES
    html = result._repr_html_()
    assert '<image href="data:image/jpeg;base64,' in html
    assert len(html) < defaults.VIEW_MAX_MEDIA_BYTES
    assert 'viewBox="0 0 1800 1800"' in html  # the boxes keep the page's pixel coordinates


# --------------------------------------------------------------------------------------------------
# model_dump, pickles and equality are unchanged
# --------------------------------------------------------------------------------------------------


def test_kept_references_are_not_dumped_pickled_or_compared(make_client: Any, fake_vllm: FakeVLLM) -> None:
    client = make_client(fake_vllm.url)
    data = FOX.read_bytes()
    kept = client.transcribe(data)
    assert kept._audio.value is data
    plain = vt.types.Transcription.model_validate(kept.model_dump())
    assert plain._audio.value is None
    assert kept.model_dump() == plain.model_dump()
    assert kept.to_json() == plain.to_json()
    assert kept == plain  # the attachment never makes two results unequal
    pickled = pickle.dumps(kept)
    assert data[:64] not in pickled and len(pickled) < len(data) // 10
    restored = pickle.loads(pickled)
    assert restored == kept and restored._audio.value is None

    from_path = client.transcribe(FOX)
    assert str(FOX) not in pickle.dumps(from_path).decode("latin-1")
    assert from_path.model_copy()._audio.value == str(FOX.absolute())


def test_score_inputs_are_not_dumped_or_pickled(make_client: Any, fake_vllm: FakeVLLM) -> None:
    result = make_client(fake_vllm.url).score("capital of France?", DOCS)
    assert result._inputs.value is not None
    assert set(result.model_dump()) == {"scores", "model", "scorer", "usage"}
    restored = pickle.loads(pickle.dumps(result))
    assert restored._inputs.value is None
    assert np.array_equal(restored.scores, result.scores) and restored.model == result.model
    assert "texts not kept" in restored.to_html()
    assert DOCS[0].encode() not in pickle.dumps(result)


def test_results_round_trip_through_pickle_and_dump(make_client: Any, fake_vllm: FakeVLLM) -> None:
    client = make_client(fake_vllm.url)
    for result in (client.rerank("capital?", DOCS), client.probe(), client.transcribe(FOX)):
        assert pickle.loads(pickle.dumps(result)) == result
        assert type(result).model_validate(result.model_dump()) == result
    embedding = client.embed(DOCS)
    restored = pickle.loads(pickle.dumps(embedding))
    assert np.array_equal(restored.vectors, embedding.vectors)
    assert set(embedding.model_dump()) == {"vectors", "model", "usage", "encoding_format", "chunks"}
    ocr = client.ocr(page_image(), preset="deepseek-ocr")
    assert pickle.loads(pickle.dumps(ocr)).model_dump() == ocr.model_dump()


# --------------------------------------------------------------------------------------------------
# Pieces
# --------------------------------------------------------------------------------------------------


def test_audio_player_inputs(tmp_path: Path) -> None:
    samples = np.sin(np.linspace(0, 200, 8000)).astype(np.float32)
    player = audio_player((samples, 8000))
    assert player.mime == "audio/wav"
    data = base64.b64decode(player.html.split("base64,")[1].split('"')[0])
    with wave.open(io.BytesIO(data)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getnframes()) == (8000, 1, 8000)
    stereo = audio_player((np.zeros((2, 400), np.int16), 8000))
    with wave.open(io.BytesIO(base64.b64decode(stereo.html.split("base64,")[1].split('"')[0]))) as wav:
        assert wav.getnchannels() == 2
    url = audio_player('https://audio.example/a.mp3?x="><script>')
    assert url.html.startswith('<audio controls preload="none" src="https://audio.example/a.mp3?x=&quot;&gt;')
    with pytest.raises(ValueError, match="over max_bytes=10"):
        audio_player(FOX.read_bytes(), max_bytes=10)
    with pytest.raises(ValueError, match=r"missing\.wav.*cannot be read"):
        audio_player(tmp_path / "missing.wav")
    with pytest.raises(TypeError):
        audio_player(io.BytesIO(b"x"))
    with pytest.raises(ValueError, match="empty"):
        audio_player((np.zeros(0, np.float32), 8000))
    assert sniff_audio(b"fLaC....") == "audio/flac"
    assert sniff_audio(b"ID3.....") == "audio/mpeg"
    assert sniff_audio(b"....", "talk.ogg") == "audio/ogg"


def test_describe_cells() -> None:
    assert views.describe({"text": "Paris", "id": 7}) == "Paris"
    parts = {"content": [{"type": "text", "text": "a chart"}, {"type": "image_url", "image_url": {}}]}
    assert views.describe(parts) == "a chart [image_url]"
    assert views.describe(page_image((64, 32))) == "[image 64×32]"
    assert views.describe(b"\x00" * 2048) == "[2,048 bytes]"
    assert views.describe(np.zeros((3, 4), np.float32)) == "[array float32[3, 4]]"
    assert views.describe("x" * 500, 10) == "x" * 9 + "…"
    assert len(views.describe({"a": "b" * 10_000, "c": list(range(10_000))})) <= defaults.VIEW_MAX_CELL_CHARS


def test_norm_summary_flags_unnormalised_and_nonfinite_vectors() -> None:
    vectors = np.array([[3.0, 4.0], [np.nan, 1.0], [0.0, 1.0]], dtype=np.float16)
    result = vt.types.EmbeddingResult(
        vectors=vectors, model="m", usage=vt.types.Usage(), encoding_format="float"
    )
    html = result._repr_html_()
    assert "min 1 · mean 3 · max 5" in html and "unit length" not in html
    assert "1 vector with NaN or infinite values" in html
    assert norm_stats(np.zeros((0, 3))) is None
    assert norm_stats(np.zeros(3)) is None


def test_attachment_semantics() -> None:
    kept = views.Attachment(b"audio")
    assert kept == views.Attachment() and kept != b"audio"
    assert pickle.loads(pickle.dumps(kept)).value is None
    import copy

    assert copy.deepcopy(kept).value is kept.value
    with pytest.raises(TypeError):
        hash(kept)


def test_ocr_without_its_image_shows_markdown_and_boxes() -> None:
    output = grounding_output([("title", (10, 10, 900, 80), "Report <b>")])
    with FakeVLLM(model="deepseek-ocr", ocr_output=output) as fake, vt.Client(fake.url) as client:
        result = client.ocr(png_bytes(page_image()))
    bare = vt.types.OCRResult.model_validate(result.model_dump())  # made elsewhere: no image at hand
    html = bare._repr_html_()
    assert "<svg" not in html and "Report &lt;b&gt;" in html
    assert "[3, 2, 288, 19]" in html  # the box in pixels of the 320 x 240 page
