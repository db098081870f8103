"""Decoders: every vLLM embedding transport into numpy, property-tested."""

from __future__ import annotations

import base64
import contextlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vllm_tasks.decoding import (
    FP8_E4M3_TO_FLOAT16,
    DecodeError,
    decode_base64,
    decode_bytes_response,
    decode_raw,
    unpackbits,
)

finite32 = hnp.arrays(np.float32, st.integers(1, 64), elements=st.floats(-1e4, 1e4, width=32))


@given(finite32, st.sampled_from(["little", "big"]))
def test_float32_round_trip(values: np.ndarray, endianness: str) -> None:
    order = "<" if endianness == "little" else ">"
    decoded = decode_raw(values.astype(f"{order}f4").tobytes(), "float32", endianness)
    assert decoded.dtype == np.float32
    np.testing.assert_array_equal(decoded, values)


@given(finite32, st.sampled_from(["little", "big"]), st.booleans())
def test_float16_round_trip(values: np.ndarray, endianness: str, widen: bool) -> None:
    order = "<" if endianness == "little" else ">"
    half = values.astype(f"{order}f2")
    decoded = decode_raw(half.tobytes(), "float16", endianness, widen=widen)
    assert decoded.dtype == (np.float32 if widen else np.float16)
    np.testing.assert_array_equal(decoded.astype(np.float32), half.astype(np.float32))


@given(finite32, st.sampled_from(["little", "big"]))
def test_bfloat16_is_the_top_half_of_float32(values: np.ndarray, endianness: str) -> None:
    order = "<" if endianness == "little" else ">"
    bits = (values.view(np.uint32) >> 16).astype(f"{order}u2")
    decoded = decode_raw(bits.tobytes(), "bfloat16", endianness)
    expected = (values.view(np.uint32) & 0xFFFF0000).view(np.float32)
    np.testing.assert_array_equal(decoded, expected)


def test_fp8_e4m3_known_values() -> None:
    table = FP8_E4M3_TO_FLOAT16.astype(np.float32)
    assert table[0x38] == 1.0
    assert table[0xB8] == -1.0
    assert table[0x7E] == 448.0  # the largest finite e4m3fn value
    assert table[0x01] == 2.0**-9  # the smallest subnormal
    assert table[0x08] == 2.0**-6  # the smallest normal
    assert np.isnan(table[0x7F]) and np.isnan(table[0xFF])
    assert np.isfinite(np.delete(table, [0x7F, 0xFF])).all()


@given(st.binary(min_size=1, max_size=64), st.booleans())
def test_fp8_e5m2_equals_float16_top_byte(raw: bytes, widen: bool) -> None:
    decoded = decode_raw(raw, "fp8_e5m2", widen=widen)
    expected = (np.frombuffer(raw, np.uint8).astype(np.uint16) << 8).view(np.float16)
    np.testing.assert_array_equal(decoded.astype(np.float32), expected.astype(np.float32))
    assert decoded.dtype == (np.float32 if widen else np.float16)


@given(st.binary(max_size=64), st.sampled_from(["float32", "float16", "bfloat16", "fp8_e4m3", "fp8_e5m2"]))
def test_decode_raw_never_crashes_on_arbitrary_bytes(raw: bytes, dtype: str) -> None:
    try:
        decoded = decode_raw(raw, dtype)
    except DecodeError:
        return
    assert decoded.ndim == 1


@given(st.text(max_size=40))
def test_decode_base64_never_crashes(text: str) -> None:
    with contextlib.suppress(DecodeError):
        decode_base64(text)


def test_unknown_dtype_and_bad_length() -> None:
    with pytest.raises(DecodeError, match="unknown embed_dtype"):
        decode_raw(b"\0" * 4, "int4")
    with pytest.raises(DecodeError, match="not a whole number"):
        decode_raw(b"\0" * 3, "float16")


def test_bytes_response_with_non_contiguous_items() -> None:
    a = np.arange(4, dtype="<f4")
    b = np.arange(4, 8, dtype="<f4")
    body = b.tobytes() + a.tobytes()
    metadata = (
        '{"model": "m", "usage": {"prompt_tokens": 3}, "data": ['
        '{"index": 1, "embed_dtype": "float32", "endianness": "little", "start": 0, "end": 16, "shape": [4]},'
        '{"index": 0, "embed_dtype": "float32", "endianness": "little", "start": 16, "end": 32,'
        ' "shape": [4]}]}'
    )
    matrix, meta = decode_bytes_response(body, metadata, expected_items=2, embed_dtype="float32")
    np.testing.assert_array_equal(matrix, np.stack([a, b]))
    assert meta["model"] == "m"


@pytest.mark.parametrize(
    "metadata",
    [
        "not json",
        '{"data": []}',
        '{"data": [{"index": 0, "start": 0, "end": 999, "shape": [4], "embed_dtype": "float32"},'
        ' {"index": 1, "start": 0, "end": 4, "shape": [1], "embed_dtype": "float16"}]}',
    ],
)
def test_bytes_response_mismatch_raises(metadata: str) -> None:
    with pytest.raises(DecodeError):
        decode_bytes_response(b"\0" * 16, metadata, expected_items=2, embed_dtype="float32")


def test_bytes_only_splits_evenly() -> None:
    body = np.arange(6, dtype="<f4").tobytes()
    matrix, _ = decode_bytes_response(body, None, expected_items=2, embed_dtype="float32")
    assert matrix.shape == (2, 3)
    with pytest.raises(DecodeError):
        decode_bytes_response(body, None, expected_items=4, embed_dtype="float32")


def test_unpackbits_binary_and_ubinary_agree() -> None:
    bits = np.random.default_rng(0).integers(0, 2, size=(3, 16)).astype(np.uint8)
    ubinary = np.packbits(bits, axis=1)
    binary = (ubinary.astype(np.int16) - 128).astype(np.int8)
    np.testing.assert_array_equal(unpackbits(ubinary), bits)
    np.testing.assert_array_equal(unpackbits(binary), bits)


def test_base64_helper() -> None:
    values = np.array([0.5, -2.0], dtype="<f4")
    np.testing.assert_array_equal(decode_base64(base64.b64encode(values.tobytes()).decode()), values)
