"""Decoders for vLLM's embedding transports, straight into numpy (no torch, no per-float objects).

vLLM sends embeddings as JSON floats, as base64 of the raw tensor bytes, or as a raw binary body
(``encoding_format="bytes"``, with a ``metadata`` header giving each item's byte range and shape). The
raw bytes are the tensor cast to ``embed_dtype`` (float32, float16, bfloat16 as its raw bit pattern,
fp8_e4m3 / fp8_e5m2 as one byte each) in ``endianness`` order.
"""

from __future__ import annotations

import base64
import binascii
import json
import sys
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .errors import APIError

EmbedDType = Literal["float32", "float16", "bfloat16", "fp8_e4m3", "fp8_e5m2"]
Endianness = Literal["native", "big", "little"]
EMBED_DTYPES: tuple[EmbedDType, ...] = ("float32", "float16", "bfloat16", "fp8_e4m3", "fp8_e5m2")

_ITEM_SIZE: dict[str, int] = {"float32": 4, "float16": 2, "bfloat16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}


class DecodeError(APIError):
    """The server's embedding payload does not match what it declared (length, shape, dtype)."""


def _fp8_e4m3_table() -> npt.NDArray[np.float16]:
    # float8_e4m3fn (the torch dtype vLLM casts to): bias 7, no infinities, 0x7f/0xff are NaN.
    codes = np.arange(256, dtype=np.uint16)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent = (codes >> 3) & 0x0F
    mantissa = (codes & 0x07).astype(np.float64)
    normal = (1.0 + mantissa / 8.0) * np.exp2(exponent.astype(np.float64) - 7.0)
    subnormal = (mantissa / 8.0) * 2.0**-6
    values = sign * np.where(exponent == 0, subnormal, normal)
    values[(codes & 0x7F) == 0x7F] = np.nan
    return values.astype(np.float16)  # every e4m3 value is exact in float16


FP8_E4M3_TO_FLOAT16 = _fp8_e4m3_table()


def _byte_order(endianness: Endianness | str) -> str:
    # "native" is the server's order; vLLM servers run on little-endian x86/ARM hosts.
    return ">" if endianness == "big" else "<"


def decode_raw(
    raw: bytes | memoryview,
    embed_dtype: EmbedDType | str,
    endianness: Endianness | str = "little",
    *,
    widen: bool = True,
) -> npt.NDArray[Any]:
    """Decode one flat buffer of ``embed_dtype`` values.

    Args:
        raw: the bytes (a view into a larger body is fine: no copy is made for float32/float16).
        embed_dtype: the dtype the server cast to.
        endianness: ``"little"``, ``"big"``, or ``"native"`` (the server's: little-endian).
        widen: True returns float32; False keeps the smallest numpy dtype that holds the values
            exactly (float16 for float16 and fp8, float32 for float32 and bfloat16).

    Returns:
        A 1-D array.

    Raises:
        DecodeError: when the length is not a multiple of the item size or the dtype is unknown.

    Example:
        >>> decode_raw(np.ones(3, "<f2").tobytes(), "float16")
        array([1., 1., 1.], dtype=float32)
    """
    size = _ITEM_SIZE.get(str(embed_dtype))
    if size is None:
        raise DecodeError(f"unknown embed_dtype {embed_dtype!r}; expected one of {', '.join(EMBED_DTYPES)}")
    if len(raw) % size:
        raise DecodeError(
            f"{len(raw)} bytes is not a whole number of {embed_dtype} values ({size} bytes each)"
        )
    order = _byte_order(endianness)
    out: npt.NDArray[Any]
    if embed_dtype == "float32":
        out = np.frombuffer(raw, dtype=f"{order}f4")
    elif embed_dtype == "float16":
        out = np.frombuffer(raw, dtype=f"{order}f2")
    elif embed_dtype == "bfloat16":
        bits = np.frombuffer(raw, dtype=f"{order}u2").astype(np.uint32) << 16
        return bits.view(np.float32)
    elif embed_dtype == "fp8_e4m3":
        out = FP8_E4M3_TO_FLOAT16[np.frombuffer(raw, dtype=np.uint8)]
    else:  # fp8_e5m2 is the upper byte of an IEEE float16
        out = (np.frombuffer(raw, dtype=np.uint8).astype(np.uint16) << 8).view(np.float16)
    if widen:
        return out.astype(np.float32, copy=out.dtype != np.float32 or out.dtype.byteorder == ">")
    if out.dtype.byteorder == ">" or (out.dtype.byteorder == "=" and sys.byteorder == "big"):
        return out.astype(out.dtype.newbyteorder("<"))
    return out


def decode_base64(
    text: str,
    embed_dtype: EmbedDType | str = "float32",
    endianness: Endianness | str = "little",
    *,
    widen: bool = True,
) -> npt.NDArray[Any]:
    """Decode one base64 embedding (vLLM's ``encoding_format="base64"``) into a 1-D array.

    Raises:
        DecodeError: for invalid base64 or a length that does not fit the dtype.
    """
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise DecodeError(f"invalid base64 embedding: {error}") from error
    return decode_raw(raw, embed_dtype, endianness, widen=widen)


def stack_rows(rows: Sequence[npt.NDArray[Any]], dtype: npt.DTypeLike = np.float32) -> npt.NDArray[Any]:
    """Stack equally long 1-D rows into an ``(n, d)`` matrix.

    Raises:
        DecodeError: when the rows differ in length.
    """
    widths = {row.shape[0] for row in rows}
    if len(widths) > 1:
        raise DecodeError(f"the server returned vectors of different widths {sorted(widths)}")
    if not rows:
        return np.empty((0, 0), dtype=dtype)
    return np.stack(rows).astype(dtype, copy=False)


def decode_bytes_response(
    body: bytes,
    metadata: str | None,
    *,
    expected_items: int,
    embed_dtype: EmbedDType | str,
    widen: bool = True,
) -> tuple[npt.NDArray[Any], dict[str, Any]]:
    """Decode an ``encoding_format="bytes"`` (or ``"bytes_only"``) response body.

    Args:
        body: the raw body: every item's bytes concatenated in request order.
        metadata: the ``metadata`` header (JSON with per-item ``start``/``end``/``shape``/``embed_dtype``/
            ``endianness``, plus ``model`` and ``usage``), or ``None`` for ``bytes_only``.
        expected_items: how many inputs the request had.
        embed_dtype: the requested dtype (used when there is no metadata).
        widen: see :func:`decode_raw`.

    Returns:
        ``(matrix, meta)``: the ``(n, d)`` array in request order and the parsed metadata (``{}`` if none).

    Raises:
        DecodeError: when the body does not match the metadata.
    """
    if metadata is None:
        flat = decode_raw(body, embed_dtype, "native", widen=widen)
        if expected_items == 0 or flat.size % expected_items:
            raise DecodeError(f"{flat.size} values cannot be split into {expected_items} equal vectors")
        return flat.reshape(expected_items, -1), {}
    try:
        meta: dict[str, Any] = json.loads(metadata)
        items: list[dict[str, Any]] = meta["data"]
        if any(item["index"] != position for position, item in enumerate(items)):
            items = sorted(items, key=lambda item: int(item["index"]))
    except (ValueError, KeyError, TypeError) as error:
        raise DecodeError(f"unreadable `metadata` header: {error}") from error
    if len(items) != expected_items:
        raise DecodeError(f"the server returned {len(items)} embeddings for {expected_items} inputs")
    view = memoryview(body)
    first = items[0] if items else {}
    width = int(first.get("end", 0)) - int(first.get("start", 0))
    dtype, order, shape = first.get("embed_dtype"), first.get("endianness"), first.get("shape")
    uniform = True
    for position, item in enumerate(items):
        if (
            item["start"] != position * width
            or item.get("embed_dtype") != dtype
            or item.get("endianness") != order
            or item.get("shape") != shape
        ):
            uniform = False
            break
    if uniform and items and int(items[-1]["end"]) <= len(body):
        # The common case: one contiguous block, decoded in a single call.
        end = int(items[-1]["end"])
        flat = decode_raw(
            view[:end], first.get("embed_dtype", embed_dtype), first.get("endianness", "native"), widen=widen
        )
        return flat.reshape(len(items), -1), meta
    rows = []
    for item in items:
        start, end = int(item["start"]), int(item["end"])
        if end > len(body) or start > end:
            raise DecodeError(f"item {item['index']} spans bytes {start}..{end} of a {len(body)}-byte body")
        row = decode_raw(
            view[start:end],
            item.get("embed_dtype", embed_dtype),
            item.get("endianness", "native"),
            widen=widen,
        )
        rows.append(row.reshape(-1))
    return stack_rows(rows, rows[0].dtype if rows else np.float32), meta


def unpackbits(packed: npt.NDArray[Any]) -> npt.NDArray[np.uint8]:
    """Unpack ``/v2/embed`` ``binary`` (int8) or ``ubinary`` (uint8) rows into 0/1 bits, MSB first.

    ``ubinary`` bytes are the bits of ``value >= 0`` packed 8 per byte; ``binary`` is the same byte
    minus 128. The result has 8 times as many columns.

    Example:
        >>> unpackbits(np.array([[128]], dtype=np.uint8))
        array([[1, 0, 0, 0, 0, 0, 0, 0]], dtype=uint8)
    """
    array = np.asarray(packed)
    if array.dtype == np.int8:
        array = (array.astype(np.int16) + 128).astype(np.uint8)
    elif array.dtype != np.uint8:
        array = array.astype(np.uint8)
    return np.unpackbits(array, axis=-1)
