"""Decoders: every vLLM embedding transport into numpy, property-tested."""

from __future__ import annotations

import base64
import contextlib
import json
import random
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vllm_tasks import decoding
from vllm_tasks.decoding import (
    FP8_E4M3_TO_FLOAT16,
    decode_base64_rows,
    decode_bytes_response,
    decode_raw,
    unpackbits,
)
from vllm_tasks.errors import UnexpectedResponse

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
    except UnexpectedResponse:
        return
    assert decoded.ndim == 1


@given(st.text(max_size=40))
def test_decode_base64_never_crashes(text: str) -> None:
    with contextlib.suppress(UnexpectedResponse):
        decode_base64_rows([text])


def test_unknown_dtype_and_bad_length() -> None:
    with pytest.raises(UnexpectedResponse, match="unknown embed_dtype"):
        decode_raw(b"\0" * 4, "int4")
    with pytest.raises(UnexpectedResponse, match="not a whole number"):
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
    with pytest.raises(UnexpectedResponse):
        decode_bytes_response(b"\0" * 16, metadata, expected_items=2, embed_dtype="float32")


def test_bytes_only_splits_evenly() -> None:
    body = np.arange(6, dtype="<f4").tobytes()
    matrix, _ = decode_bytes_response(body, None, expected_items=2, embed_dtype="float32")
    assert matrix.shape == (2, 3)
    with pytest.raises(UnexpectedResponse):
        decode_bytes_response(body, None, expected_items=4, embed_dtype="float32")


def test_unpackbits_binary_and_ubinary_agree() -> None:
    bits = np.random.default_rng(0).integers(0, 2, size=(3, 16)).astype(np.uint8)
    ubinary = np.packbits(bits, axis=1)
    binary = (ubinary.astype(np.int16) - 128).astype(np.int8)
    np.testing.assert_array_equal(unpackbits(ubinary), bits)
    np.testing.assert_array_equal(unpackbits(binary), bits)


def test_base64_helper() -> None:
    values = np.array([0.5, -2.0], dtype="<f4")
    text = base64.b64encode(values.tobytes()).decode()
    np.testing.assert_array_equal(decode_base64_rows([text, text]), np.stack([values, values]))
    with pytest.raises(UnexpectedResponse, match="invalid base64"):
        decode_base64_rows(["not base64!"])
    with pytest.raises(UnexpectedResponse, match="cannot be split into 2 equal vectors"):
        decode_base64_rows([text, base64.b64encode(values[:1].tobytes()).decode()])


# --- `bytes` metadata: the vectorised layout check and the remembered `data` arrays -----------------


def _reference_bytes_decode(
    body: bytes, metadata: str, embed_dtype: str, widen: bool
) -> tuple[np.ndarray, dict[str, object]]:
    """Item by item with the stdlib parser: what decode_bytes_response must agree with."""
    meta = json.loads(metadata)
    items = sorted(meta["data"], key=lambda item: int(item["index"]))
    rows = [
        decode_raw(
            body[item["start"] : item["end"]],
            item.get("embed_dtype", embed_dtype),
            item.get("endianness", "native"),
            widen=widen,
        )
        for item in items
    ]
    return np.stack(rows), meta


def _layout_header(
    n: int,
    width: int,
    dtype: str = "float32",
    *,
    order: list[int] | None = None,
    separators: tuple[str, str] = (", ", ": "),
    **fields: object,
) -> tuple[str, list[dict[str, object]]]:
    """A vLLM-shaped header for n items of `width` bytes; `order[k]` is the index of the k-th block."""
    order = list(range(n)) if order is None else order
    data = [
        {
            "index": index,
            "embed_dtype": dtype,
            "endianness": "native",
            "start": block * width,
            "end": (block + 1) * width,
            "shape": [width // {"float32": 4, "float16": 2}.get(dtype, 1)],
        }
        for block, index in enumerate(order)
    ]
    data.sort(key=lambda item: int(item["index"]))  # type: ignore[call-overload]
    meta = {"id": "embd-1", "created": 1, "model": "m", **fields, "data": data}
    meta.setdefault("usage", {"prompt_tokens": n, "total_tokens": n})
    return json.dumps(meta, separators=separators), data


@pytest.fixture
def fresh_layouts() -> Iterator[None]:
    decoding._LAYOUTS.clear()
    yield
    decoding._LAYOUTS.clear()


def _count_full_parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    original = decoding._uniform_layout

    def counting(items: list[object]) -> object:
        calls[0] += 1
        return original(items)

    monkeypatch.setattr(decoding, "_uniform_layout", counting)
    return calls


def test_remembered_layout_is_reused_with_new_id_and_usage(
    fresh_layouts: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    full_parses = _count_full_parses(monkeypatch)
    vectors = np.arange(12, dtype="<f4").reshape(3, 4)
    body = vectors.tobytes()
    first, _ = _layout_header(3, 16)
    matrix, meta = decode_bytes_response(body, first, expected_items=3, embed_dtype="float32")
    np.testing.assert_array_equal(matrix, vectors)
    assert full_parses == [1] and len(decoding._LAYOUTS[3]) == 1
    second, _ = _layout_header(3, 16, id="embd-2", created=2, usage={"prompt_tokens": 7, "total_tokens": 7})
    matrix, meta = decode_bytes_response(body, second, expected_items=3, embed_dtype="float32")
    np.testing.assert_array_equal(matrix, vectors)
    assert full_parses == [1]  # the `data` array was not parsed again
    assert meta == json.loads(second)
    with pytest.raises(UnexpectedResponse, match="spans bytes"):  # a remembered layout still checks the body
        decode_bytes_response(body[:-4], second, expected_items=3, embed_dtype="float32")


@pytest.mark.parametrize("model", ["modèle", 'quote " and back\\slash', "x" * 200])
def test_remembered_layout_with_escapes_around_it(fresh_layouts: None, model: str) -> None:
    vectors = np.arange(8, dtype="<f4").reshape(2, 4)
    header, _ = _layout_header(2, 16, model=model)
    for _ in range(2):
        matrix, meta = decode_bytes_response(
            vectors.tobytes(), header, expected_items=2, embed_dtype="float32"
        )
        np.testing.assert_array_equal(matrix, vectors)
        assert meta == json.loads(header)


def test_remembered_array_elsewhere_in_the_header_is_not_trusted(fresh_layouts: None) -> None:
    a, b = np.arange(4, dtype="<f4"), np.arange(4, 8, dtype="<f4")
    body = a.tobytes() + b.tobytes()
    in_order, data = _layout_header(2, 16)
    decode_bytes_response(body, in_order, expected_items=2, embed_dtype="float32")
    remembered = json.dumps(data)
    _, swapped = _layout_header(2, 16, order=[1, 0])  # item 0 is the second block
    crafted = [
        # the remembered array under another key, the real one after it
        '{"id": "x", "decoy": ' + remembered + ', "data": ' + json.dumps(swapped) + "}",
        # duplicate keys: the last one wins, as in a full parse
        '{"data": ' + remembered + ', "data": ' + json.dumps(swapped) + "}",
        # the real data after the remembered one, with a NUL escape outside the array
        '{"model": "\\u0000", "data": ' + remembered + ', "data": ' + json.dumps(swapped) + "}",
    ]
    for header in crafted:
        matrix, meta = decode_bytes_response(body, header, expected_items=2, embed_dtype="float32")
        np.testing.assert_array_equal(matrix, np.stack([b, a]))
        assert meta == json.loads(header)
    with_nul = '{"model": "\\u0000", "data": ' + remembered + "}"
    matrix, meta = decode_bytes_response(body, with_nul, expected_items=2, embed_dtype="float32")
    np.testing.assert_array_equal(matrix, np.stack([a, b]))
    assert meta["model"] == "\0"


def test_items_out_of_order_but_contiguous(fresh_layouts: None) -> None:
    vectors = np.arange(12, dtype="<f4").reshape(3, 4)
    _, data = _layout_header(3, 16)
    listed = json.dumps({"model": "m", "data": [data[2], data[0], data[1]]})
    for _ in range(2):
        matrix, meta = decode_bytes_response(
            vectors.tobytes(), listed, expected_items=3, embed_dtype="float32"
        )
        np.testing.assert_array_equal(matrix, vectors)
    assert meta["model"] == "m"


@given(
    n=st.integers(1, 6),
    dim=st.integers(1, 5),
    dtype=st.sampled_from(["float32", "float16", "fp8_e4m3"]),
    shuffle=st.randoms(use_true_random=False),
    permute=st.booleans(),
    compact=st.booleans(),
    widen=st.booleans(),
    model=st.text(max_size=12),
    ids=st.lists(st.text(max_size=8), min_size=3, max_size=3),
)
def test_bytes_response_matches_the_reference(
    n: int,
    dim: int,
    dtype: str,
    shuffle: random.Random,
    permute: bool,
    compact: bool,
    widen: bool,
    model: str,
    ids: list[str],
) -> None:
    size = {"float32": 4, "float16": 2, "fp8_e4m3": 1}[dtype]
    width = dim * size
    order = list(range(n))
    if permute:
        shuffle.shuffle(order)
    body = bytes(shuffle.getrandbits(8) & 0x3F for _ in range(n * width))  # finite values
    separators = (",", ":") if compact else (", ", ": ")
    for request_id in ids:  # the first call may remember the layout, the next ones use it
        header, _ = _layout_header(
            n, width, dtype, order=order, separators=separators, id=request_id, model=model
        )
        expected, expected_meta = _reference_bytes_decode(body, header, dtype, widen)
        matrix, meta = decode_bytes_response(body, header, expected_items=n, embed_dtype=dtype, widen=widen)
        assert matrix.dtype == expected.dtype
        np.testing.assert_array_equal(matrix, expected)
        assert meta == expected_meta


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
    st.sampled_from(["float32", "float16", "bfloat16", "fp8_e5m2", "native", "big"]),
)
json_items = st.dictionaries(
    st.sampled_from(["index", "start", "end", "embed_dtype", "endianness", "shape"]),
    st.one_of(json_scalars, st.integers(0, 24), st.lists(st.integers(0, 8), max_size=2)),
)


@given(
    data=st.one_of(st.lists(json_items, max_size=4), json_scalars),
    body=st.binary(max_size=24),
    expected_items=st.integers(0, 4),
)
def test_bytes_response_only_ever_raises_decode_error(data: object, body: bytes, expected_items: int) -> None:
    header = json.dumps({"model": "m", "data": data})
    for _ in range(2):
        with contextlib.suppress(UnexpectedResponse):
            matrix, _ = decode_bytes_response(
                body, header, expected_items=expected_items, embed_dtype="float32"
            )
            assert matrix.shape[0] == expected_items
