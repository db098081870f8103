"""``align`` and ``transcribe(..., aligner=)`` over real HTTP against FakeVLLM's forced aligner (vLLM 0.32's
``/pooling`` answer shape: one row of time-class scores per prompt token, audio tokens included)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import vllm_tasks as vt
from vllm_tasks.testing import FakeVLLM
from vllm_tasks.testing.wire import Reply
from vllm_tasks.transcription import alignment

AUDIO = Path(__file__).resolve().parents[1] / "data" / "audio"
TEXT = "the quick brown fox jumps over the lazy dog"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeVLLM]:
    """An aligner that also transcribes (one server for both roles); JSON answers (vLLM before 0.11.1 has no
    binary ``/pooling``), so that the tests can rewrite rows."""
    with FakeVLLM(model="aligner", aligner=True, width=500, version="0.11.0") as server:
        yield server


@pytest.fixture(autouse=True)
def clean(fake: FakeVLLM) -> None:
    fake.clear_faults()
    fake.clear_requests()


def times(result: vt.types.Alignment) -> list[tuple[str, float, float]]:
    return [(w.word, w.start, w.end) for w in result.words]


def test_two_recordings_give_two_alignments(fake: FakeVLLM) -> None:
    with vt.Client(fake.url) as client:
        fox = client.align(AUDIO / "fox.wav", TEXT, language="en")
        numbers = client.align(AUDIO / "numbers.wav", TEXT, language="en")
    assert [w.word for w in fox.words] == TEXT.split() == [w.word for w in numbers.words]
    assert times(fox) != times(numbers)
    assert fox.duration == pytest.approx(3.7723125) and numbers.duration == pytest.approx(6.6179375)
    assert (fox.language, fox.model) == ("English", "aligner")
    # the fake spreads the words evenly over the audio: 3.77 s / 9 words, in 80 ms classes
    assert times(fox)[:2] == [("the", 0.0, 0.4), ("quick", 0.4, 0.8)]


def test_the_sync_and_async_clients_agree(fake: FakeVLLM) -> None:
    async def aligned() -> vt.types.Alignment:
        async with vt.AsyncClient(fake.url) as client:
            return await client.align(AUDIO / "fox.wav", TEXT)

    with vt.Client(fake.url) as client:
        assert times(asyncio.run(aligned())) == times(client.align(AUDIO / "fox.wav", TEXT))


def test_the_requests_are_vllms_recipe(fake: FakeVLLM) -> None:
    with vt.Client(fake.url) as client:
        client.align(AUDIO / "fox.wav", "Hello, world!")
    (tokenize,) = fake.received("/tokenize")
    assert tokenize.json == {
        "model": "aligner",
        "prompt": "Hello<timestamp><timestamp>world<timestamp><timestamp>",
        "add_special_tokens": False,
    }
    (pooling,) = fake.received("/pooling")
    body = pooling.json
    assert (body["task"], body["chat_template"]) == ("token_classify", "{{ messages[0]['content'] }}")
    text, audio = body["messages"][0]["content"]
    assert text["text"].startswith("<|audio_start|><|audio_pad|><|audio_end|>Hello<timestamp>")
    assert audio["audio_url"]["url"].startswith("data:audio/flac;base64,")


def _rewrite_rows(change: Any) -> Any:
    def mutation(reply: Reply) -> Reply:
        payload = json.loads(reply.body)
        payload["data"][0]["data"] = change(payload["data"][0]["data"])
        return Reply(reply.status, json.dumps(payload).encode(), reply.headers)

    return mutation


def test_too_few_rows_are_refused(fake: FakeVLLM) -> None:
    fake.mutate(_rewrite_rows(lambda rows: rows[:3]), path="/pooling")
    with vt.Client(fake.url) as client, pytest.raises(vt.UnexpectedResponse, match="3 rows"):
        client.align(AUDIO / "fox.wav", TEXT)


def test_more_leading_rows_are_more_audio_tokens(fake: FakeVLLM) -> None:
    """The words' rows are counted from the end: rows before them (audio tokens) change nothing."""
    with vt.Client(fake.url) as client:
        clean = client.align(AUDIO / "fox.wav", TEXT)
        fake.mutate(_rewrite_rows(lambda rows: rows[:1] * 50 + rows), path="/pooling")
        assert times(client.align(AUDIO / "fox.wav", TEXT)) == times(clean)


def test_times_out_of_order_are_repaired(fake: FakeVLLM) -> None:
    """The marker rows in reverse order (a confused model): the times are repaired as transformers repairs
    them, never going back."""

    def reverse_markers(rows: list[list[float]]) -> list[list[float]]:
        # the words' part ends the prompt: each of the 9 one-token words, then its two markers
        head, tail = rows[: -3 * 9], rows[-3 * 9 :]
        markers = [row for i, row in enumerate(tail) if i % 3]
        backwards = iter(markers[::-1])
        return head + [row if i % 3 == 0 else next(backwards) for i, row in enumerate(tail)]

    with vt.Client(fake.url) as client:
        clean = client.align(AUDIO / "fox.wav", TEXT)
        fake.mutate(_rewrite_rows(reverse_markers), path="/pooling")
        result = client.align(AUDIO / "fox.wav", TEXT)
    flat = [t for w in result.words for t in (w.start, w.end)]
    assert all(a <= b for a, b in itertools.pairwise(flat))
    assert times(result) != times(clean)
    # falling but for ties (a word's end is the next one's start): the first tie, the last word's start
    # and the end before it, is the longest non-decreasing run, and transformers' repair spreads it
    assert flat == [clean.words[-1].start] * len(flat)


def test_a_server_without_trusted_templates_is_named(fake: FakeVLLM) -> None:
    message = (
        "Chat template is passed with request, but --trust-request-chat-template is not set. Refused "
        "request with untrusted chat template."
    )
    fake.fail(400, path="/pooling", times=1, message=message)
    with (
        vt.Client(fake.url) as client,
        pytest.raises(vt.BadRequestError, match="trust-request-chat-template"),
    ):
        client.align(AUDIO / "fox.wav", TEXT)


def test_transcribe_fills_words_one_aligner_call_per_window(fake: FakeVLLM) -> None:
    with vt.Client(fake.url) as client:
        result = client.transcribe(AUDIO / "long45.wav", response_format="verbose_json", aligner=client)
    windows = alignment.align_windows(result, result.duration or 0.0)
    assert len(windows) >= 2
    assert len(fake.received("/pooling")) == len(windows)
    assert result.words is not None
    assert [w.word for w in result.words] == [
        word for window in windows for word in alignment.split_words(window.text)
    ]
    flat = [t for w in result.words for t in (w.start, w.end)]
    assert all(a <= b for a, b in itertools.pairwise(flat))
    assert flat[0] >= 0.0 and flat[-1] <= (result.duration or 0.0)
    assert result.to_srt(words=True).count(" --> ") == len(result.words)


def test_an_aligner_of_the_other_kind_is_refused_before_transcribing(fake: FakeVLLM) -> None:
    async def transcribe() -> None:
        async with vt.AsyncClient(fake.url) as client:
            await client.transcribe(AUDIO / "fox.wav", aligner=vt.Client(fake.url))  # type: ignore[arg-type]

    with pytest.raises(vt.InvalidInputError, match="aligner"):
        asyncio.run(transcribe())
    assert not fake.received("/v1/audio/transcriptions")


@pytest.mark.parametrize(("name", "text", "rows"), [("fox.wav", TEXT, 78), ("numbers.wav", TEXT, 115)])
def test_the_fake_answers_as_many_rows_as_vllm(fake: FakeVLLM, name: str, text: str, rows: int) -> None:
    """vLLM 0.32's qwen3-aligner fixture answered 78 and 115 rows (49 and 86 audio tokens) for these
    (tests/contract/test_speech_aligner.py checks the same count against transformers' prompt)."""
    with vt.Client(fake.url) as client:
        client.align(AUDIO / name, text)
        assert client.usage.prompt_tokens == rows
