"""Inputs that used to go out unchecked or misread: each is a typed InvalidInputError before any request
(issue 11, "inputs sent unchecked or misread"). Every client test runs on both clients."""

from __future__ import annotations

import io
import math
import os
import wave
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from pytest_httpx import HTTPXMock

import vllm_tasks as vt
from vllm_tasks import defaults


def no_requests(httpx_mock: HTTPXMock) -> None:
    assert httpx_mock.get_requests() == []


# ------------------------------------------------------------------------------------------ embeddings


@pytest.mark.parametrize("value", [[b"hello"], [bytearray(b"hi")], ["text", b"bytes"], [memoryview(b"x")]])
def test_bytes_are_not_sent_as_token_ids(value: Any, make_client: Any, httpx_mock: HTTPXMock) -> None:
    with pytest.raises(vt.InvalidInputError, match="is bytes, not text") as raised:
        make_client().embed(value)
    assert raised.value.field.startswith("input[")
    no_requests(httpx_mock)


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("encoding_format", "json"),
        ("encoding_format", 5),
        ("encoding_format", None),
        ("endianness", "BIG"),
        ("endianness", 1),
        ("truncation_side", "middle"),
        ("truncation_side", True),
        ("truncate_prompt_tokens", -2),
        ("truncate_prompt_tokens", "10"),
        ("truncate_prompt_tokens", True),
        ("truncate_prompt_tokens", 1.5),
    ],
)
def test_embed_options_of_the_wrong_type_or_value(
    argument: str, value: Any, make_client: Any, httpx_mock: HTTPXMock
) -> None:
    with pytest.raises(vt.InvalidInputError) as raised:
        make_client().embed(["a"], **{argument: value})
    assert raised.value.field == argument
    no_requests(httpx_mock)


def test_valid_embed_options_are_accepted() -> None:
    from vllm_tasks.embeddings import EmbedParams

    params = EmbedParams(
        encoding_format="bytes_only", endianness="big", truncation_side="left", truncate_prompt_tokens=-1
    )
    assert params.truncate_prompt_tokens == -1


# ------------------------------------------------------------------------------- per-call tail, headers


@pytest.mark.parametrize(
    "timeout", [-1, 0, -0.5, math.nan, math.inf, "10", True, httpx.Timeout(-1.0), httpx.Timeout(5, read=0)]
)
def test_bad_per_call_timeouts(timeout: Any, make_client: Any, httpx_mock: HTTPXMock) -> None:
    client = make_client()
    with pytest.raises(vt.InvalidInputError, match="timeout"):
        client.embed(["a"], timeout=timeout)
    with pytest.raises(vt.InvalidInputError, match="timeout"):
        client.rerank("q", ["d"], timeout=timeout)
    no_requests(httpx_mock)


def test_good_per_call_timeouts_pass() -> None:
    from vllm_tasks.calls import CallOptions

    for timeout in (None, 5, 2.5, httpx.Timeout(5.0), httpx.Timeout(None)):
        assert CallOptions(timeout=timeout).timeout is timeout


@pytest.mark.parametrize(
    "headers",
    [{"X-Id": 5}, {"X-Id": b"bytes"}, {5: "x"}, {"X-Id": "a\r\nX-Injected: 1"}, {"X-Name": "é"}, {"": "x"}],
)
def test_bad_extra_headers(headers: Any, make_client: Any, httpx_mock: HTTPXMock) -> None:
    with pytest.raises(vt.InvalidInputError, match="extra_headers") as raised:
        make_client().embed(["a"], extra_headers=headers)
    assert "a\r\n" not in str(raised.value)  # a header value (maybe a secret) is not echoed
    no_requests(httpx_mock)


@pytest.mark.parametrize("headers", [{"X-Id": 5}, {"X-Id": None}, {5: "x"}])
def test_non_string_client_headers_are_refused_at_construction(headers: Any, make_client: Any) -> None:
    with pytest.raises(vt.InvalidInputError, match="headers"):
        make_client(headers=headers)


# ------------------------------------------------------------------------------------------------- PDF


def pdf_with_page(width_points: float, height_points: float) -> bytes:
    import pypdfium2

    document = pypdfium2.PdfDocument.new()
    document.new_page(width_points, height_points)
    buffer = io.BytesIO()
    document.save(buffer)
    document.close()
    return buffer.getvalue()


def test_a_huge_pdf_page_is_refused_before_rendering(make_client: Any, httpx_mock: HTTPXMock) -> None:
    """A 200 x 200 inch page at 144 dpi is 28800 x 28800 pixels (3.3 GB as a bitmap): refused, naming
    the page and the largest dpi that fits, instead of a MemoryError."""
    with pytest.raises(vt.InvalidInputError, match=r"page 1.*28800 x 28800 pixels") as raised:
        make_client().ocr_pdf(pdf_with_page(14400, 14400))
    assert "at most 50" in str(raised.value)  # sqrt(1e8) / 200 inches = 50 dpi
    no_requests(httpx_mock)


def test_the_page_limit_comes_from_defaults(
    make_client: Any, httpx_mock: HTTPXMock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(defaults, "PDF_MAX_PAGE_PIXELS", 1_000_000)  # a Letter page at 144 dpi is 1.9 M
    with pytest.raises(vt.InvalidInputError, match="over the 1,000,000-pixel limit"):
        make_client().ocr_pdf(pdf_with_page(612, 792), dpi=144)
    no_requests(httpx_mock)


# ----------------------------------------------------------------------------------------------- audio


def wav_file(path: Path, rate: int, frames: int, channels: int = 1) -> Path:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(channels)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(np.zeros(frames * channels, dtype="<i2").tobytes())
    return path


@pytest.mark.parametrize("rate", [1, 8, 999])
def test_an_absurd_sample_rate_is_refused(rate: int, make_client: Any, httpx_mock: HTTPXMock) -> None:
    """16000 samples at 1 Hz are 4.4 hours of "audio": 582 requests. Refused instead."""
    with pytest.raises(vt.InvalidInputError, match=f"sample rate of {rate} Hz is below 1000 Hz"):
        make_client().transcribe((np.zeros(16000, dtype=np.float32), rate))
    no_requests(httpx_mock)


def test_an_absurd_sample_rate_in_a_file_header_is_refused(
    make_client: Any, httpx_mock: HTTPXMock, tmp_path: Path
) -> None:
    path = wav_file(tmp_path / "slow.wav", rate=1, frames=16000)
    with pytest.raises(vt.InvalidInputError, match="sample rate of 1 Hz"):
        make_client().transcribe(path)
    no_requests(httpx_mock)


def test_8khz_audio_is_still_accepted() -> None:
    from vllm_tasks import audio

    source = audio.resolve((np.zeros(8000, dtype=np.float32), 8000))
    assert audio.info(source).sample_rate == 8000


def sparse_file(path: Path, size: int) -> Path:
    with open(path, "wb") as out:
        out.truncate(size)  # sparse: no disk, no memory
    return path


@pytest.mark.parametrize("prepare", ["never", "auto"])
def test_a_file_over_the_upload_limit_is_refused_before_it_is_read(
    prepare: str, make_client: Any, httpx_mock: HTTPXMock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """chunking="server" sends the file whole: one over vLLM's upload limit (25 MiB) is refused before
    being read (a 10 GB file used to be read whole into memory)."""
    from vllm_tasks import audio

    path = sparse_file(tmp_path / "huge.bin", defaults.AUDIO_SIZE_LIMIT + 1)
    if prepare == "auto":  # a decoder reads the header of a 16 kHz mono WAV: sent as is, so checked
        path = wav_file(tmp_path / "huge.wav", rate=16000, frames=100)
        monkeypatch.setattr(audio.AudioSource, "size", lambda self: defaults.AUDIO_SIZE_LIMIT + 1)
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail(f"{self} was read"))
    with pytest.raises(vt.InvalidInputError, match="over the server's upload limit of 26214400 bytes"):
        make_client().transcribe(path, chunking="server", prepare=prepare)
    no_requests(httpx_mock)


def test_a_ten_gigabyte_file_is_refused_without_reading_it(
    make_client: Any, httpx_mock: HTTPXMock, tmp_path: Path
) -> None:
    path = sparse_file(tmp_path / "ten.bin", 10 * 1024**3)
    if os.stat(path).st_blocks * 512 > 1024**2:  # pragma: no cover (a file system without sparse files)
        pytest.skip("no sparse files here")
    with pytest.raises(vt.InvalidInputError, match="10,737,418,240 bytes"):
        make_client().transcribe(path, chunking="server", prepare="never")
    no_requests(httpx_mock)


def test_audio_too_long_to_decode_whole_is_refused(
    make_client: Any, httpx_mock: HTTPXMock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(defaults, "AUDIO_MAX_DECODED_SECONDS", 1.0)
    path = wav_file(tmp_path / "stereo.wav", rate=44100, frames=88200, channels=2)
    with pytest.raises(vt.InvalidInputError, match="over 1 s to decode in memory"):
        make_client().transcribe(path, chunking="server")
    no_requests(httpx_mock)
