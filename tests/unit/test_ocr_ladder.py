"""The page-quality ladder's policy (``vllm_tasks.ocr.ladder``), held to olmOCR's ``process_page``.

``olmocr_process_page`` below is olmOCR's sequential retry loop (allenai/olmocr, olmocr/pipeline.py,
``process_page`` at f7cfe4c2), its network calls replaced by a list of answers: the ladder's state machine
must send the same tries (temperature, rotation) and keep or fail the page as it does.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

import vllm_tasks as vt
from vllm_tasks import pdf
from vllm_tasks.errors import BadRequestError, InvalidInputError
from vllm_tasks.images import prepare_image
from vllm_tasks.ocr import ladder
from vllm_tasks.ocr.formats import no_problem
from vllm_tasks.ocr.ladder import Answer, PageLadder, PageQuality
from vllm_tasks.types.common import Usage
from vllm_tasks.types.ocr import OCRDocument, OCRPage, OCRResult

from ..pdfs import text_pdf

# olmOCR's TEMPERATURE_BY_ATTEMPT and default --max_page_retries
OLMOCR_TEMPERATURES = [0.1, 0.1, 0.2, 0.3, 0.5, 0.8, 0.9, 1.0]
OLMOCR_MAX_RETRIES = 8


@dataclass
class Result:
    """olmOCR's PageResult, as far as process_page reads it."""

    is_valid: bool
    is_rotation_valid: bool
    rotation_correction: int


def olmocr_process_page(
    answers: list[Result | None], max_retries: int
) -> tuple[list[tuple[float, int]], bool]:
    """olmOCR's process_page (its sequential path): the (temperature, rotation) of each try, and whether
    the page is kept (else: the fallback). ``answers[attempt]`` is try_single_page's result."""
    sent: list[tuple[float, int]] = []

    def try_single_page(attempt: int, rotation: int) -> Result | None:
        sent.append((OLMOCR_TEMPERATURES[min(attempt, len(OLMOCR_TEMPERATURES) - 1)], rotation))
        return answers[attempt]

    retry_attempts = list(range(1, max_retries))
    cumulative_rotation = 0
    result = try_single_page(0, cumulative_rotation)
    if result is not None and not result.is_rotation_valid:
        cumulative_rotation = result.rotation_correction % 360
    if result is not None and result.is_valid and result.is_rotation_valid:
        return sent, True
    if result is not None and not result.is_rotation_valid:
        for attempt in retry_attempts:
            result = try_single_page(attempt, cumulative_rotation)
            if result is not None and result.is_valid and result.is_rotation_valid:
                return sent, True
            if result is not None:
                cumulative_rotation = (cumulative_rotation + result.rotation_correction) % 360
        return sent, result is not None and result.is_valid
    for attempt in retry_attempts:
        result = try_single_page(attempt, cumulative_rotation)
        if result is not None and result.is_valid and result.is_rotation_valid:
            return sent, True
    return sent, result is not None and result.is_valid


def run_ladder(
    quality: PageQuality, answers: list[Answer]
) -> tuple[list[tuple[float | None, int]], PageLadder]:
    state = PageLadder()
    sent: list[tuple[float | None, int]] = []
    while (attempt := ladder.next_try(quality, state)) is not None:
        sent.append((attempt.temperature, attempt.rotation))
        state = ladder.step(quality, state, answers[attempt.attempt])
    return sent, state


def as_olmocr(answer: Answer) -> Result | None:
    if not answer.answered:
        return None
    return Result(answer.problem is None, answer.rotation_valid, answer.rotation_correction)


ANSWERS = st.builds(
    Answer,
    st.sampled_from([None, None, "truncated", "unfinished", "invalid"]),
    st.booleans(),
    st.sampled_from(ladder.ROTATIONS),
)


@given(st.lists(ANSWERS, min_size=8, max_size=8), st.integers(1, 8))
def test_the_ladder_sends_and_keeps_as_olmocr_does(answers: list[Answer], tries: int) -> None:
    quality = PageQuality(retry_temperatures=OLMOCR_TEMPERATURES[1:tries])
    sent, state = run_ladder(quality, answers)
    expected, kept = olmocr_process_page([as_olmocr(a) for a in answers], tries)
    # the first try uses the call's own temperature: olmOCR's is its preset's, 0.1
    assert [(0.1 if t is None else t, r) for t, r in sent] == expected
    assert state.outcome == ("kept" if kept else "failed")
    assert state.tries == len(sent) <= quality.tries
    if kept:
        assert state.last == answers[len(sent) - 1] and state.last_rotation == sent[-1][1]
    else:
        assert state.failure == answers[len(sent) - 1].problem


def test_olmocr_defaults() -> None:
    quality = PageQuality()
    assert [0.1, *quality.retry_temperatures] == OLMOCR_TEMPERATURES
    assert quality.tries == OLMOCR_MAX_RETRIES
    assert quality.max_page_error_rate == 0.004  # olmOCR's --max_page_error_rate
    assert quality.rotate and quality.text_layer_fallback
    assert quality == ladder.DEFAULT_QUALITY


def test_a_truncated_page_climbs_the_temperatures_then_fails() -> None:
    sent, state = run_ladder(PageQuality(), [Answer("truncated")] * 8)
    assert sent == [(None, 0), (0.1, 0), (0.2, 0), (0.3, 0), (0.5, 0), (0.8, 0), (0.9, 0), (1.0, 0)]
    assert (state.outcome, state.failure, state.tries) == ("failed", "truncated", 8)


def test_a_page_kept_on_its_third_try() -> None:
    sent, state = run_ladder(PageQuality(), [Answer("truncated"), Answer("invalid"), Answer()])
    assert sent == [(None, 0), (0.1, 0), (0.2, 0)]
    assert (state.outcome, state.tries, state.failure) == ("kept", 3, None)


def test_rotation_follows_each_correction() -> None:
    answers = [
        Answer(rotation_valid=False, rotation_correction=90),
        Answer(rotation_valid=False, rotation_correction=180),
        Answer("invalid"),  # no answer: the rotation stays
        Answer(),
    ]
    sent, state = run_ladder(PageQuality(), answers)
    assert sent == [(None, 0), (0.1, 90), (0.2, 270), (0.3, 270)]
    assert (state.outcome, state.last_rotation) == ("kept", 270)


def test_a_rotation_asked_after_a_first_failure_is_not_followed() -> None:
    """olmOCR's other path: once the first answer was upright (or none), retries keep the page as is."""
    answers = [Answer("truncated"), Answer(rotation_valid=False, rotation_correction=90), Answer()]
    sent, _ = run_ladder(PageQuality(), answers)
    assert [rotation for _, rotation in sent] == [0, 0, 0]


def test_a_valid_answer_that_still_asks_for_a_rotation_is_kept_after_the_last_try() -> None:
    askew = Answer(rotation_valid=False, rotation_correction=90)
    sent, state = run_ladder(PageQuality(retry_temperatures=(0.1, 0.2)), [askew] * 3)
    assert [rotation for _, rotation in sent] == [0, 90, 180]
    assert (state.outcome, state.last_rotation) == ("kept", 180)
    _, ignored = run_ladder(PageQuality(rotate=False), [askew])
    assert (ignored.outcome, ignored.tries) == ("kept", 1)


def test_a_prompt_over_the_context_fails_at_once() -> None:
    sent, state = run_ladder(PageQuality(), [Answer("context_length")] * 8)
    assert len(sent) == 1 and (state.outcome, state.failure) == ("failed", "context_length")


def test_no_quality_keeps_the_first_answer_whatever_it_is() -> None:
    state = ladder.step(None, PageLadder(), Answer("truncated"))
    assert (state.outcome, state.tries) == ("kept", 1)
    assert ladder.next_try(None, state) is None


@pytest.mark.parametrize(
    ("failed", "pages", "over"),
    [(0, 1, False), (1, 250, False), (1, 249, True), (1, 1, True), (2, 500, False)],
)
def test_a_document_fails_over_the_rate(failed: int, pages: int, over: bool) -> None:
    assert ladder.document_failed(PageQuality(), failed, pages) is over
    assert ladder.document_failed(None, failed, pages) is False
    assert ladder.document_failed(PageQuality(max_page_error_rate=1.0), pages, pages) is False


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"retry_temperatures": "hot"}, "retry_temperatures"),
        ({"retry_temperatures": [0.1, math.nan]}, "retry_temperatures"),
        ({"retry_temperatures": [2.5]}, "retry_temperatures"),
        ({"retry_temperatures": [True]}, "retry_temperatures"),
        ({"max_page_error_rate": 1.5}, "max_page_error_rate"),
        ({"max_page_error_rate": -0.1}, "max_page_error_rate"),
        ({"rotate": "yes"}, "rotate"),
        ({"text_layer_fallback": 1}, "text_layer_fallback"),
    ],
)
def test_bad_options_are_refused(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        PageQuality(**fields)
    assert caught.value.field == field


def test_quality_of() -> None:
    assert ladder.quality_of(None) is None
    assert ladder.quality_of({"retry_temperatures": [0.5]}) == PageQuality(retry_temperatures=(0.5,))
    for bad in (42, {"tries": 3}):
        with pytest.raises(InvalidInputError, match="PageQuality"):
            ladder.quality_of(bad)


def chat_error(status: int, message: str) -> httpx.Response:
    body = {"error": {"message": message, "type": "BadRequestError", "param": None, "code": status}}
    return httpx.Response(status, json=body, request=httpx.Request("POST", "http://h/v1/chat/completions"))


def test_refusal_reads_only_a_prompt_over_the_context_as_the_page_s() -> None:
    # vLLM 0.32's answer to an image prompt over the context (recorded from the `ocr` fixture started with
    # --max-model-len 200: DeepSeek-OCR's "Free OCR." and a 320 x 240 page, 279 prompt tokens).
    recorded = chat_error(400, "Input length (279) exceeds model's maximum context length (200).")
    assert ladder.refusal(recorded) == Answer("context_length")
    renderer = (
        "This model's maximum context length is 8192 tokens. However, your prompt contains 9001 input tokens"
    )
    assert ladder.refusal(chat_error(400, renderer)) == Answer("context_length")
    assert ladder.refusal(httpx.Response(200, json={})) is None
    # ... and its answer to max_tokens over max_model_len: the call's options, raised
    with pytest.raises(BadRequestError, match="max_tokens=4096 cannot be greater"):
        ladder.refusal(chat_error(400, "max_tokens=4096 cannot be greater than max_model_len=200."))


def result(finish_reason: str | None) -> OCRResult:
    return OCRResult(text="x", markdown="x", blocks=[], usage=Usage(), finish_reason=finish_reason,
                     truncated=finish_reason == "length", model="m", prompt="p", image_size=(2, 1),
                     sent_size=(2, 1))  # fmt: skip


def test_answer_of_reads_the_finish_reason_the_format_s_check_and_the_rotation() -> None:
    reasons = [ladder.answer_of(result(r), no_problem).problem for r in ("stop", "length", "abort", None)]
    assert reasons == [None, "truncated", "unfinished", "unfinished"]
    assert ladder.answer_of(result("stop"), lambda text: "front matter missing") == Answer("invalid")
    turned = result("stop").model_copy(
        update={"metadata": {"is_rotation_valid": False, "rotation_correction": 270}}
    )
    assert ladder.answer_of(turned, no_problem) == Answer(None, False, 270)
    # a format whose check also refuses a turned page (its reason names the turn): still an answer to turn
    assert ladder.answer_of(turned, lambda text: "the page is not upright") == Answer(None, False, 270)
    odd = result("length").model_copy(update={"metadata": {"rotation_correction": 45}})
    assert ladder.answer_of(odd, no_problem) == Answer("truncated", True, 0)


def test_rotated_turns_the_page_as_pil_does() -> None:
    image = Image.new("RGB", (4, 2), "white")
    image.putpixel((0, 0), (255, 0, 0))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    prepared = prepare_image(buffer.getvalue(), max_side=None)
    assert ladder.rotated(prepared, 0, None) is prepared
    turned = ladder.rotated(prepared, 90, None)
    assert turned.size == (2, 4) and turned.original == turned.data
    expected = image.transpose(Image.Transpose.ROTATE_90)
    got = Image.open(io.BytesIO(turned.data)).convert("RGB")
    assert got.tobytes() == expected.tobytes()
    assert got.getpixel((0, 3)) == (255, 0, 0)  # the top-left corner went to the bottom-left


def test_text_layer_reads_each_page_s_own_text() -> None:
    document = text_pdf(["Hello page one", "Second page text"])
    assert [pdf.text_layer(document, n) for n in (1, 2)] == ["Hello page one", "Second page text"]
    with pytest.raises(InvalidInputError, match="2-page PDF"):
        pdf.text_layer(document, 3)


def test_a_failed_page_stands_as_its_fallback_and_fails_the_document() -> None:
    failed = PageLadder(tries=8, last=Answer("truncated"), last_rotation=0, outcome="failed")
    page = ladder.page_of(2, failed, result("length"), "Second page text", model="m", prompt="p")
    assert (page.result.markdown, page.failure, page.fallback, page.tries) == (
        "Second page text",
        "truncated",
        True,
        8,
    )
    assert page.result.image_size == (2, 1) and page.result.blocks == [] and not page.result.truncated
    bare = ladder.page_of(2, failed, None, None, model="m", prompt="p")
    assert (bare.result.markdown, bare.fallback) == ("", False)
    kept = OCRPage(page=1, result=result("stop"))
    document = OCRDocument(pages=[kept, page], markdown="", usage=Usage(), truncated_pages=[])
    with pytest.raises(
        vt.ocr.OCRDocumentFailed, match=r"1 of 2 page\(s\) failed every try \(page 2: truncated\)"
    ) as caught:
        ladder.check_document(PageQuality(), document)
    assert caught.value.failed_pages == [(2, "truncated")] and caught.value.document is document
    assert caught.value.scope == "row"
    assert ladder.check_document(PageQuality(max_page_error_rate=0.5), document) is document
    assert ladder.check_document(None, document) is document
