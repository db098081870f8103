"""The forced aligner's pure parts (``vllm_tasks.transcription.alignment``): words split as transformers
splits them, the request vLLM's recipe sends, the ``<timestamp>`` rows, the out-of-order repair
transformers applies, and the decoding of per-token time classes into word times."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from vllm_tasks import InvalidInputError, UnexpectedResponse
from vllm_tasks.calls import CallOptions
from vllm_tasks.transcription import alignment
from vllm_tasks.types import Transcription, TranscriptionSegment, TranscriptionWord

#: transformers 5.19 ``Qwen3ASRProcessor.split_words_for_alignment(text, None)`` on the same texts.
TRANSFORMERS_WORDS = [
    (
        "one, two, three, four, five. The meeting starts at ten o'clock.",
        ["one", "two", "three", "four", "five", "The", "meeting", "starts", "at", "ten", "o'clock"],
    ),
    ("你好，世界！Hello 3.14 world", ["你", "好", "世", "界", "Hello", "314", "world"]),
    (
        "  Bonjour. Je m'appelle Marie et j'habite à Paris.",
        ["Bonjour", "Je", "m'appelle", "Marie", "et", "j'habite", "à", "Paris"],
    ),
    ("e-mail: a_b@c.d — ok?", ["email", "abcd", "ok"]),
    ("Привет мир 2026", ["Привет", "мир", "2026"]),
]

#: transformers 5.19 ``processing_qwen3_asr._fix_timestamps`` on the same values (float32 input).
TRANSFORMERS_REPAIRS = [
    ([80, 4000, 160, 240], [80, 80, 160, 240]),
    ([80, 160, 0, 400], [80, 160, 160, 400]),
    (
        [80, 160, 240, 320, 0, 0, 0, 800, 880, 960, 1040],
        [80, 160, 240, 320, 440, 560, 680, 800, 880, 960, 1040],
    ),
    ([500, 80, 160], [80, 80, 160]),
    ([0, 0, 0], [0, 0, 0]),
    ([1600, 1600, 29360, 29360, 1600, 1600], [1600, 1600, 29360, 29360, 29360, 29360]),
    ([400, 320, 240, 160, 80], [400, 400, 400, 400, 400]),
    ([80, 0, 0, 0, 0], [0, 0, 0, 0, 0]),
    (
        [1280, 3760, 1760, 4000, 3520, 4800, 4240, 3760, 3280, 4720, 2640, 80],
        [1280, 3760, 3760, 4000, 4000, 4240, 4240, 4240, 4720, 4720, 4720, 4720],
    ),
    (
        [3920, 4800, 1200, 3280, 240, 4560, 800, 560, 1840, 2400],
        [240, 240, 240, 240, 240, 240, 800, 800, 1840, 2400],
    ),
    ([1920, 2720, 480, 2880, 1200, 0], [1920, 2720, 2720, 2880, 2880, 2880]),
    ([2080, 1360, 880, 4640, 4400, 3920], [2080, 2080, 4640, 4640, 4640, 4640]),
    ([800, 3840, 4080, 320, 640, 3120, 3120, 2240, 640], [320, 320, 320, 320, 640, 3120, 3120, 3120, 3120]),
    ([0, 4400, 0, 1040, 3920], [0, 0, 0, 1040, 3920]),
]


@pytest.mark.parametrize(("text", "words"), TRANSFORMERS_WORDS)
def test_words_are_split_as_transformers_splits_them(text: str, words: list[str]) -> None:
    assert alignment.split_words(text) == words


def test_a_list_of_words_is_kept_as_given_without_punctuation() -> None:
    assert alignment.split_words(["こんにちは", "世界!"], "ja") == ["こんにちは", "世界"]


@pytest.mark.parametrize(
    ("text", "language", "field"),
    [
        ("", None, "text"),
        ("?! --", None, "text"),
        (["ok", "?!"], None, "text[1]"),
        (42, None, "text"),
        ("こんにちは世界", "ja", "text"),
        ("안녕하세요 세계", "Korean", "text"),
        ("hallo", "nl", "language"),
    ],
)
def test_what_cannot_be_aligned_is_refused_before_any_request(
    text: object, language: str, field: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        alignment.split_words(text, language)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_languages_are_read_as_codes_or_names() -> None:
    assert alignment.aligner_language("EN") == "English"
    assert alignment.aligner_language(" cantonese ") == "Cantonese"
    assert alignment.aligner_language(None) is None


def test_the_request_is_vllms_recipe() -> None:
    """vLLM's examples/pooling/token_classify/forced_alignment_online.py: one user message with the prompt as
    text and the audio as ``audio_url``, ``task: token_classify``, the raw-content chat template."""
    call = CallOptions(extra_body={"priority": 1}, extra_headers={"X-A": "b"})
    request = alignment.align_request(["hello", "world"], "data:audio/flac;base64,AA==", model="m",
                                      encoding_format="bytes", call=call)  # fmt: skip
    assert request.path == "/pooling"
    assert request.json == {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "<|audio_start|><|audio_pad|><|audio_end|>"
                        "hello<timestamp><timestamp>world<timestamp><timestamp>",
                    },
                    {"type": "audio_url", "audio_url": {"url": "data:audio/flac;base64,AA=="}},
                ],
            }
        ],
        "task": "token_classify",
        "chat_template": "{{ messages[0]['content'] }}",
        "encoding_format": "bytes",
        "priority": 1,
    }


def test_timestamp_rows_count_from_the_end_of_the_answer() -> None:
    # words' part: "a"=5, <ts>=9 <ts>=9, "b"=6 7, <ts> <ts>; 40 rows: 31 audio and chat tokens before it
    assert alignment.timestamp_rows([5, 9, 9, 6, 7, 9, 9], 2, 38) == [32, 33, 36, 37]


@pytest.mark.parametrize(
    ("ids", "words", "rows", "problem"),
    [
        ([5, 9, 9, 6, 9], 2, 40, "3 <timestamp> tokens for 2 words"),  # a tokenizer without the marker
        ([5, 9, 9], 1, 2, "2 rows"),  # an answer shorter than the words' part
        ([], 1, 10, "no token ids"),
    ],
)
def test_rows_that_do_not_fit_the_words_are_refused(
    ids: list[int], words: int, rows: int, problem: str
) -> None:
    with pytest.raises(UnexpectedResponse, match=problem):
        alignment.timestamp_rows(ids, words, rows)


@pytest.mark.parametrize(("values", "repaired"), TRANSFORMERS_REPAIRS)
def test_out_of_order_times_are_repaired_as_transformers_repairs_them(
    values: list[int], repaired: list[int]
) -> None:
    assert alignment.repair_timestamps(values) == repaired


@given(st.lists(st.integers(0, 5000), max_size=60))
def test_repaired_times_never_go_back(values: list[int]) -> None:
    repaired = alignment.repair_timestamps([v * 80 for v in values])
    assert len(repaired) == len(values)
    assert all(a <= b for a, b in itertools.pairwise(repaired))
    assert all(min(values, default=0) * 80 <= r <= max(values, default=0) * 80 for r in repaired)


@settings(max_examples=200, deadline=None)
@given(
    words=st.integers(1, 12),
    extra=st.integers(0, 20),
    classes=st.integers(1, 64),
    duration=st.floats(0.0, 60.0),
    offset=st.floats(0.0, 3600.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_decoded_words_are_one_per_word_in_order_within_the_audio(
    words: int, extra: int, classes: int, duration: float, offset: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(2 * words + extra, classes)).astype(np.float32)
    rows = sorted(rng.choice(scores.shape[0], size=2 * words, replace=False).tolist())
    names = [f"w{i}" for i in range(words)]
    timed = alignment.decode_alignment(scores, rows, names, segment_ms=80, duration=duration, offset=offset)
    assert [w.word for w in timed] == names
    times = [t for w in timed for t in (w.start, w.end)]
    assert all(a <= b for a, b in itertools.pairwise(times))
    assert all(offset <= t <= offset + duration for t in times)


@given(
    arrays(np.float32, st.tuples(st.integers(0, 6), st.integers(0, 4)), elements=st.floats(-1, 1, width=32))
)
def test_a_matrix_without_the_rows_is_refused(scores: np.ndarray) -> None:
    if scores.shape[0] >= 4 and scores.shape[1] > 0:
        return
    with pytest.raises(UnexpectedResponse):
        alignment.decode_alignment(scores, [0, 1, 2, 3], ["a", "b"], segment_ms=80, duration=1.0)


def test_times_past_the_audio_are_capped_at_its_end() -> None:
    scores = np.zeros((2, 500), np.float32)
    scores[0, 20] = scores[1, 367] = 1.0  # 1.6 s and 29.36 s in 3.7723125 s of audio
    (word,) = alignment.decode_alignment(scores, [0, 1], ["fox"], segment_ms=80, duration=3.7723125)
    assert (word.start, word.end) == (1.6, 3.772)


def test_a_transcription_is_aligned_in_windows_of_whole_segments() -> None:
    segments = [
        TranscriptionSegment(id=i, start=start, end=end, text=text)
        for i, (start, end, text) in enumerate(
            [(0, 12, "a b"), (12, 25, "c"), (25, 40, "d e"), (40, 41, "...")]
        )
    ]
    result = Transcription(text="a b c d e ...", segments=segments)
    windows = alignment.align_windows(result, 41.5)
    assert windows == [alignment.AlignWindow(0, 25, "a b c"), alignment.AlignWindow(25, 41, "d e ...")]
    assert alignment.align_windows(Transcription(text="...", segments=[]), 3.0) == []


def test_srt_and_vtt_write_a_cue_per_word() -> None:
    words = [
        TranscriptionWord(word="Hello", start=0.32, end=0.56),
        TranscriptionWord(word="<b>", start=0.56, end=1),
    ]
    segment = TranscriptionSegment(id=0, start=0.0, end=1.0, text="Hello <b>")
    result = Transcription(text="Hello <b>", segments=[segment], words=words)
    assert result.to_srt(words=True) == (
        "1\n00:00:00,320 --> 00:00:00,560\nHello\n\n2\n00:00:00,560 --> 00:00:01,000\n<b>\n"
    )
    assert "00:00:00.560 --> 00:00:01.000\n&lt;b&gt;" in result.to_vtt(words=True)
    assert result.to_srt() == "1\n00:00:00,000 --> 00:00:01,000\nHello <b>\n"
    assert result.model_copy(update={"words": None}).to_srt(words=True) == result.to_srt()


def test_segment_ms_must_be_a_positive_number() -> None:
    for value in (0, -80, math.nan, math.inf, True, "80"):
        with pytest.raises(InvalidInputError):
            alignment.check_segment_ms(value)  # type: ignore[arg-type]
    assert alignment.check_segment_ms(80) == 80.0
