"""The page-quality ladder: olmOCR's policy for a page whose answer is unusable, and for a document with
too many such pages. Pure: ``ocr_pdf``, ``ocr_dir`` and Ray's ``OCR`` send the tries (``_async/ocr.py``).

The policy is olmOCR's (``allenai/olmocr``, ``olmocr/pipeline.py``: ``process_page``, ``try_single_page``,
``process_single_pdf``):

- A try is *valid* when the model stopped by itself (``finish_reason == "stop"``; ``"length"`` is a
  truncated page) and the output format reads it (its validity check). An answer the format cannot read
  counts as no answer at all.
- The first try uses the call's own sampling; try ``k`` (1-based retry) uses ``retry_temperatures[k - 1]``
  (olmOCR: 0.1, 0.1, 0.2, 0.3, 0.5, 0.8, 0.9, 1.0 over eight tries; its first try is at 0.1, the olmOCR
  preset's own temperature).
- Where the first answer says the page is not upright (``is_rotation_valid: false``), the page is sent
  again rotated by its ``rotation_correction`` (PIL's ``ROTATE_90``/``180``/``270``, as olmOCR), and each
  later answer's correction adds to the rotation; other retries keep the page as it is.
- A valid, upright answer is kept at once. After the last try, the last answer is kept if it is valid
  (even if it still asks for a rotation); otherwise the page has *failed*: its markdown is the PDF's own
  text layer (``text_layer_fallback``), or empty.
- A document whose failed pages are more than ``max_page_error_rate`` of its pages has failed.

One difference: a prompt over the model's context (vLLM's 400, :class:`~vllm_tasks.ContextLengthExceeded`)
fails the page at once, where olmOCR sends every try: the prompt's length does not depend on the
temperature, so each try would be refused the same. (olmOCR's parallel burst of the remaining retries when
vLLM's queue is empty is a scheduling choice, left out: the tries here go one after another per page, many
pages at once.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import httpx

from ..errors import ContextLengthExceeded, InvalidInputError, OCRDocumentFailed
from ..images import PreparedImage, prepare_image
from ..server_errors import error_from_response
from ..transport import Request
from ..types.common import Usage
from ..types.ocr import OCRDocument, OCRPage, OCRResult
from ..validation import is_number

Problem = Literal["truncated", "unfinished", "invalid", "context_length"]
"""Why a try's answer is not kept:

- ``"truncated"``: the output hit ``max_tokens`` or the model's context (``finish_reason == "length"``).
- ``"unfinished"``: another ``finish_reason`` than ``"stop"`` (``"abort"``, none).
- ``"invalid"``: the output format's validity check refused the text (read as no answer).
- ``"context_length"``: the server refused the prompt as longer than the model's context (no answer).
"""

OLMOCR_TEMPERATURES = (0.1, 0.1, 0.2, 0.3, 0.5, 0.8, 0.9, 1.0)
"""olmOCR's ``TEMPERATURE_BY_ATTEMPT``: the temperature of each of its eight tries of a page."""
RETRY_TEMPERATURES = OLMOCR_TEMPERATURES[1:]
"""The retries' temperatures (the first try uses the call's own)."""
MAX_PAGE_ERROR_RATE = 0.004
"""olmOCR's default ``--max_page_error_rate``: one failed page in 250."""
ROTATIONS = (0, 90, 180, 270)
"""The rotations a page is sent at (degrees, counter-clockwise as PIL's ``ROTATE_90``)."""
_NO_ANSWER: frozenset[Problem] = frozenset({"invalid", "context_length"})


@dataclass(frozen=True)
class PageQuality:
    """How hard ``ocr_pdf``, ``ocr_dir`` and Ray's ``OCR`` try each page, and when a document has failed
    (olmOCR's page-quality ladder; see :mod:`vllm_tasks.ocr.ladder`). Checked on construction.

    A page whose answer is truncated (``finish_reason == "length"``), over the model's context, or
    refused by the output format's check is tried again at the next temperature, rotated where the model
    says the page is not upright. After the last try it has failed: its markdown is the PDF's own text
    (with ``text_layer_fallback``) or empty. A document with more than ``max_page_error_rate`` of its
    pages failed has failed (``ocr_pdf`` raises :class:`~vllm_tasks.ocr.OCRDocumentFailed`; ``ocr_dir``
    writes no markdown for it and lists it in ``errors.jsonl``). Pass ``quality=None`` for one try per
    page and no verdict.

    Attributes:
        retry_temperatures: the temperature of each retry (the first try uses the call's own); ``()``:
            no retry. Default: olmOCR's, ``(0.1, 0.2, 0.3, 0.5, 0.8, 0.9, 1.0)``: eight tries in all.
        rotate: send a page again rotated when the model reports a ``rotation_correction`` (a format
            with rotation metadata, such as olmOCR's); False ignores what the model says of rotation.
        text_layer_fallback: a failed PDF page's markdown is the text the PDF holds for that page
            (pypdfium2; empty for a scan); False: empty. Either way the page counts as failed.
        max_page_error_rate: the share of a document's pages that may fail (olmOCR's default 0.004: one
            page in 250); ``1.0``: a document never fails, ``0.0``: any failed page fails it.

    Raises:
        InvalidInputError: a temperature that is not a number in [0, 2], a rate outside [0, 1], a flag
            that is not a bool.

    Examples:
        >>> doc = client.ocr_pdf("scan.pdf", quality=vt.ocr.PageQuality(max_page_error_rate=0.05))
        >>> doc.failed_pages
        []
    """

    retry_temperatures: Sequence[float] = RETRY_TEMPERATURES
    rotate: bool = True
    text_layer_fallback: bool = True
    max_page_error_rate: float = MAX_PAGE_ERROR_RATE

    def __post_init__(self) -> None:
        temperatures = self.retry_temperatures
        if isinstance(temperatures, str | bytes) or not isinstance(temperatures, Sequence):
            raise InvalidInputError(
                "retry_temperatures", temperatures, "must be a sequence of numbers", "E.g. (0.1, 0.2, 0.3)."
            )
        for value in temperatures:
            if not is_number(value) or not 0.0 <= value <= 2.0:
                raise InvalidInputError(
                    "retry_temperatures",
                    list(temperatures),
                    f"holds {value!r}, not a temperature from 0 to 2",
                    "Use olmOCR's (the default) or numbers from 0 to 2.",
                )
        object.__setattr__(self, "retry_temperatures", tuple(float(value) for value in temperatures))
        for name in ("rotate", "text_layer_fallback"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidInputError(name, getattr(self, name), "must be True or False", "Pass a bool.")
        rate = self.max_page_error_rate
        if not is_number(rate) or not 0.0 <= rate <= 1.0:
            raise InvalidInputError(
                "max_page_error_rate",
                rate,
                "must be a share from 0 to 1",
                f"olmOCR's default is {MAX_PAGE_ERROR_RATE} (one page in 250).",
            )

    @property
    def tries(self) -> int:
        """Tries per page at most: the first and the retries.

        Examples:
            >>> PageQuality().tries
            8
        """
        return 1 + len(self.retry_temperatures)


@dataclass(frozen=True)
class Answer:
    """What one try of a page gave, as the ladder reads it.

    Attributes:
        problem: why it is not kept, or ``None`` for a valid answer.
        rotation_valid: the model says the page is upright (formats without rotation metadata: True).
        rotation_correction: the rotation it asks for (0, 90, 180, 270).
    """

    problem: Problem | None = None
    rotation_valid: bool = True
    rotation_correction: int = 0

    @property
    def answered(self) -> bool:
        """An answer the format read (olmOCR's ``result is not None``), valid or not."""
        return self.problem not in _NO_ANSWER


@dataclass(frozen=True)
class Try:
    """The next request for a page: its number (0: the first), temperature (``None``: the call's own)
    and rotation (degrees, counter-clockwise)."""

    attempt: int
    temperature: float | None
    rotation: int


@dataclass(frozen=True)
class PageLadder:
    """Where one page stands on the ladder (see :func:`next_try`, :func:`step`).

    Attributes:
        tries: the tries made.
        rotation: the rotation of the next try.
        path: ``first`` (no try yet), ``rotation`` (the first answer asked for a rotation: each answer's
            correction is followed) or ``retry`` (the page is sent as it is).
        last: the last try's answer.
        last_rotation: the rotation the last try was sent at.
        outcome: ``pending``, ``kept`` (the last answer is the page's) or ``failed``.
    """

    tries: int = 0
    rotation: int = 0
    path: Literal["first", "rotation", "retry"] = "first"
    last: Answer | None = None
    last_rotation: int = 0
    outcome: Literal["pending", "kept", "failed"] = "pending"

    @property
    def failure(self) -> Problem | None:
        """Why the page failed (its last answer's problem), or ``None``."""
        return self.last.problem if self.outcome == "failed" and self.last is not None else None


def next_try(quality: PageQuality | None, ladder: PageLadder) -> Try | None:
    """The page's next request, or ``None`` once it is kept or failed (``quality=None``: one try).

    Examples:
        >>> next_try(PageQuality(), PageLadder())
        Try(attempt=0, temperature=None, rotation=0)
        >>> next_try(PageQuality(), PageLadder(tries=1, path="retry"))
        Try(attempt=1, temperature=0.1, rotation=0)
    """
    if ladder.outcome != "pending":
        return None
    temperature = (
        None if ladder.tries == 0 or quality is None else quality.retry_temperatures[ladder.tries - 1]
    )
    return Try(ladder.tries, temperature, ladder.rotation)


def step(quality: PageQuality | None, ladder: PageLadder, answer: Answer) -> PageLadder:
    """The page's state after the answer to its :func:`next_try` (olmOCR's ``process_page``); with
    ``quality=None`` the first answer is kept, whatever it is.

    Examples:
        >>> step(PageQuality(), PageLadder(), Answer()).outcome
        'kept'
        >>> step(PageQuality(), PageLadder(), Answer("truncated")).path
        'retry'
        >>> step(PageQuality(), PageLadder(), Answer(rotation_valid=False, rotation_correction=90)).rotation
        90
    """
    if ladder.outcome != "pending":
        return ladder
    if quality is None:
        return PageLadder(ladder.tries + 1, 0, ladder.path, answer, 0, "kept")
    upright = answer.rotation_valid or not quality.rotate
    tries = ladder.tries + 1
    done = PageLadder(tries, ladder.rotation, ladder.path, answer, ladder.rotation)
    if answer.problem == "context_length":
        return _settled(done, "failed")
    if answer.problem is None and upright:
        return _settled(done, "kept")
    path, rotation = ladder.path, ladder.rotation
    if path == "first":
        path = "rotation" if answer.answered and not upright else "retry"
        rotation = answer.rotation_correction % 360 if path == "rotation" else 0
    elif path == "rotation" and answer.answered:
        rotation = (rotation + answer.rotation_correction) % 360
    moved = PageLadder(tries, rotation, path, answer, ladder.rotation)
    if tries >= quality.tries:
        return _settled(moved, "kept" if answer.problem is None else "failed")
    return moved


def _settled(ladder: PageLadder, outcome: Literal["kept", "failed"]) -> PageLadder:
    return PageLadder(ladder.tries, ladder.rotation, ladder.path, ladder.last, ladder.last_rotation, outcome)


def answer_of(result: OCRResult, check: Callable[[str], str | None]) -> Answer:
    """The ladder's reading of one OCR answer: the output format's ``check`` of its text (a reason:
    ``"invalid"``), its finish reason, and the rotation its metadata reports (olmOCR's front matter:
    ``is_rotation_valid``, ``rotation_correction``; upright without them).

    Examples:
        >>> cut = OCRResult(text="x", markdown="x", blocks=[], usage=Usage(), finish_reason="length",
        ...     truncated=True, model="m", prompt="p", image_size=None, sent_size=None)
        >>> answer_of(cut, lambda text: None).problem
        'truncated'
    """
    metadata = result.metadata or {}
    correction = metadata.get("rotation_correction", 0)
    upright = metadata.get("is_rotation_valid", True) is not False
    # A page the model read but says is turned is an answer (olmOCR turns it), whatever the check says of it.
    if upright and check(result.text) is not None:
        return Answer("invalid")
    problem: Problem | None = None
    if result.finish_reason == "length":
        problem = "truncated"
    elif result.finish_reason != "stop":
        problem = "unfinished"
    return Answer(problem, upright, correction if correction in ROTATIONS else 0)


def failed_result(last: OCRResult | None, text: str, *, model: str, prompt: str) -> OCRResult:
    """The result standing for a failed page: ``text`` (the PDF's text layer, or ``""``) as its text and
    markdown, no blocks, the last answer's sizes.

    Examples:
        >>> failed_result(None, "Total 12", model="m", prompt="p").markdown
        'Total 12'
    """
    return OCRResult(
        text=text,
        markdown=text.strip(),
        blocks=[],
        usage=Usage(),
        finish_reason=None,
        truncated=False,
        model=last.model if last is not None else model,
        prompt=prompt,
        image_size=last.image_size if last is not None else None,
        sent_size=last.sent_size if last is not None else None,
    )


def document_failed(quality: PageQuality | None, failed: int, pages: int) -> bool:
    """Whether a document of ``pages`` pages, ``failed`` of them failed, has failed (olmOCR: more than
    ``max_page_error_rate`` of its pages).

    Examples:
        >>> document_failed(PageQuality(), 1, 250), document_failed(PageQuality(), 1, 249)
        (False, True)
    """
    if quality is None or pages <= 0 or failed <= 0:
        return False
    return failed / pages > quality.max_page_error_rate


def failed_pages_message(failures: Sequence[tuple[int, str]], pages: int, rate: float) -> str:
    """The words for a failed document: how many pages failed, which and why, and the limit.

    Examples:
        >>> failed_pages_message([(2, "truncated")], 3, 0.004)
        '1 of 3 page(s) failed every try (page 2: truncated), over max_page_error_rate=0.004'
    """
    shown = ", ".join(f"page {page}: {why}" for page, why in failures[:10])
    more = f", and {len(failures) - 10} more" if len(failures) > 10 else ""
    return (
        f"{len(failures)} of {pages} page(s) failed every try ({shown}{more}), "
        f"over max_page_error_rate={rate:g}"
    )


DEFAULT_QUALITY = PageQuality()
"""The ladder ``ocr_pdf``, ``ocr_dir`` and Ray's ``OCR`` use by default: olmOCR's."""


def quality_of(value: object, field: str = "quality") -> PageQuality | None:
    """``value`` as the ladder's options: a :class:`PageQuality` as is, a dict of its fields (an
    adapter's config), or ``None`` (one try per page).

    Raises:
        InvalidInputError: another type, or a name that is not a field.

    Examples:
        >>> quality_of({"max_page_error_rate": 0.05}).max_page_error_rate
        0.05
    """
    if value is None or isinstance(value, PageQuality):
        return value
    names = [item.name for item in dataclasses.fields(PageQuality)]
    if not isinstance(value, Mapping) or not set(map(str, value)) <= set(names):
        raise InvalidInputError(
            field,
            value if isinstance(value, Mapping) else type(value).__name__,
            "must be vllm_tasks.ocr.PageQuality, a dict of its fields, or None",
            f"Pass vllm_tasks.ocr.PageQuality(...) (fields: {', '.join(names)}), or None (one try a page).",
        )
    return PageQuality(**value)


def try_request(request: Request, temperature: float | None) -> Request:
    """A page's request for one try: ``temperature`` (``None``: the call's own), and an error status
    returned rather than raised (:func:`read_try` reads it)."""
    if temperature is not None:
        request = dataclasses.replace(request, json={**request.json, "temperature": temperature})
    return dataclasses.replace(request, raise_for_status=False)


def refusal(response: httpx.Response) -> Answer | None:
    """The ladder's reading of a try the server refused: ``Answer("context_length")`` for a prompt over
    the model's context; ``None`` for an answer (a 2xx, read by the caller).

    Raises:
        APIStatusError: any other error status (about the call, not the page: a bad option, a server
            down after the retries).
    """
    if response.status_code < 400:
        return None
    error = error_from_response(response, task="chat")
    if isinstance(error, ContextLengthExceeded):
        return Answer("context_length")
    raise error


def rotated(image: PreparedImage, degrees: int, max_side: int | None) -> PreparedImage:
    """``image`` turned ``degrees`` counter-clockwise (PIL's ``ROTATE_90``/``180``/``270``, as olmOCR
    re-renders a page), encoded for upload; ``image`` itself for 0. CPU-heavy: run it in a worker thread.
    """
    if degrees % 360 == 0:
        return image
    from PIL import Image

    turn = {90: Image.Transpose.ROTATE_90, 180: Image.Transpose.ROTATE_180, 270: Image.Transpose.ROTATE_270}
    turned = prepare_image(image.open_original().transpose(turn[degrees % 360]), max_side=max_side)
    return dataclasses.replace(turned, original=turned.data)


def page_of(
    number: int,
    ladder: PageLadder,
    last: OCRResult | None,
    fallback: str | None,
    *,
    model: str,
    prompt: str,
    spent: Usage | None = None,
) -> OCRPage:
    """The :class:`OCRPage` of a page whose ladder is over: its answer kept, or for a failed page its
    ``fallback`` text (the PDF's text layer; ``None``: none); ``spent``: the tokens of all its tries."""
    spent = spent if ladder.tries > 1 else None
    if ladder.outcome == "kept" and last is not None:
        return OCRPage(
            page=number, result=last, tries=ladder.tries, rotation=ladder.last_rotation, tries_usage=spent
        )
    return OCRPage(
        page=number,
        result=failed_result(last, fallback or "", model=model, prompt=prompt),
        tries=ladder.tries,
        rotation=ladder.last_rotation,
        failure=ladder.failure or "invalid",
        fallback=fallback is not None,
        tries_usage=spent,
    )


def check_document(quality: PageQuality | None, document: OCRDocument) -> OCRDocument:
    """``document``, unless more of its pages failed than ``quality`` allows.

    Raises:
        OCRDocumentFailed: the failed pages are over ``max_page_error_rate`` of the pages.
    """
    failed = [(page.page, page.failure) for page in document.pages if page.failure is not None]
    if quality is None or not document_failed(quality, len(failed), len(document.pages)):
        return document
    message = failed_pages_message(failed, len(document.pages), quality.max_page_error_rate)
    raise OCRDocumentFailed(message, len(document.pages), failed, quality.max_page_error_rate, document)
