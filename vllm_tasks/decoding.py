"""Decoders for vLLM's embedding transports, straight into numpy (no torch, no per-float objects).

vLLM sends embeddings as JSON floats, as base64 of the raw tensor bytes, or as a raw binary body
(``encoding_format="bytes"``, with a ``metadata`` header giving each item's byte range and shape). The
raw bytes are the tensor cast to ``embed_dtype`` (float32, float16, bfloat16 as its raw bit pattern,
fp8_e4m3 / fp8_e5m2 as one byte each) in ``endianness`` order.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import math
import operator
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

import numpy as np
import numpy.typing as npt
import orjson

from .errors import InvalidInputError, UnexpectedResponse

_json_loads: Callable[[str], Any] = orjson.loads

EmbedDType = Literal["float32", "float16", "bfloat16", "fp8_e4m3", "fp8_e5m2"]
Endianness = Literal["native", "big", "little"]
EMBED_DTYPES: tuple[EmbedDType, ...] = ("float32", "float16", "bfloat16", "fp8_e4m3", "fp8_e5m2")
ENDIANNESS: tuple[Endianness, ...] = ("native", "big", "little")
FINITE_DTYPES = frozenset({"float32", "bfloat16", "json"})
"""Wire dtypes whose values must be finite. A float16 or fp8 cast of a healthy model's output can
overflow to inf or NaN (float16 above 65504, fp8_e4m3 above 448), so those are not checked."""

_ITEM_SIZE: dict[str, int] = {"float32": 4, "float16": 2, "bfloat16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}


def decode_error(message: str, *, method: str | None = None, url: str | None = None) -> UnexpectedResponse:
    """An :class:`~vllm_tasks.UnexpectedResponse` (``kind="decode"``): the server's embedding payload does not
    match what it declared (length, shape, dtype).

    Examples:
        >>> decode_error("bad widths").kind
        'decode'
    """
    return UnexpectedResponse(message, kind="decode", method=method, url=url)


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
        UnexpectedResponse: (``kind="decode"``)
            when the length is not a multiple of the item size or the dtype is unknown.

    Examples:
        >>> decode_raw(np.ones(3, "<f2").tobytes(), "float16")
        array([1., 1., 1.], dtype=float32)
    """
    size = _ITEM_SIZE.get(str(embed_dtype))
    if size is None:
        raise decode_error(f"unknown embed_dtype {embed_dtype!r}; expected one of {', '.join(EMBED_DTYPES)}")
    if len(raw) % size:
        raise decode_error(
            f"{len(raw)} bytes is not a whole number of {embed_dtype} values ({size} bytes each)"
        )
    if endianness not in ENDIANNESS:
        raise decode_error(f"unknown endianness {endianness!r}; expected one of {', '.join(ENDIANNESS)}")
    order = _byte_order(endianness)
    out: npt.NDArray[Any]
    if embed_dtype == "float32":
        out = check_finite(np.frombuffer(raw, dtype=f"{order}f4"), embed_dtype)
    elif embed_dtype == "float16":
        out = np.frombuffer(raw, dtype=f"{order}f2")
    elif embed_dtype == "bfloat16":
        bits = np.frombuffer(raw, dtype=f"{order}u2").astype(np.uint32) << 16
        return check_finite(bits.view(np.float32), embed_dtype)
    elif embed_dtype == "fp8_e4m3":
        out = FP8_E4M3_TO_FLOAT16[np.frombuffer(raw, dtype=np.uint8)]
    else:  # fp8_e5m2 is the upper byte of an IEEE float16
        out = (np.frombuffer(raw, dtype=np.uint8).astype(np.uint16) << 8).view(np.float16)
    if widen:
        return out.astype(np.float32, copy=out.dtype != np.float32 or out.dtype.byteorder == ">")
    if out.dtype.byteorder == ">" or (out.dtype.byteorder == "=" and sys.byteorder == "big"):
        return out.astype(out.dtype.newbyteorder("<"))
    return out


def check_finite(values: npt.NDArray[Any], embed_dtype: str = "float32") -> npt.NDArray[Any]:
    """``values`` unchanged, after checking that every value is finite (for :data:`FINITE_DTYPES`).

    Two SIMD passes (``min``/``max`` propagate NaN and show infinities), no temporary array.

    Raises:
        UnexpectedResponse: (``kind="decode"``)
            naming the first row (of a 2-D array) or position holding NaN or infinity.

    Examples:
        >>> check_finite(np.array([1.0, 2.0], dtype=np.float32))
        array([1., 2.], dtype=float32)
    """
    if embed_dtype not in FINITE_DTYPES or values.size == 0:
        return values
    if np.isfinite(values.min()) and np.isfinite(values.max()):
        return values
    bad = np.argwhere(~np.isfinite(values))[0]
    where = f"row {bad[0]}" if values.ndim == 2 else f"position {bad[0]}"
    raise decode_error(
        f"the server sent a non-finite value (NaN or infinity) at {where} of {embed_dtype} embeddings; "
        "the payload is corrupt or the model produced invalid output"
    )


def decode_base64_rows(
    texts: Sequence[str],
    embed_dtype: EmbedDType | str = "float32",
    endianness: Endianness | str = "little",
    *,
    widen: bool = True,
) -> npt.NDArray[Any]:
    """Decode base64 embeddings (vLLM's ``encoding_format="base64"``, one string per input) into an
    ``(n, d)`` matrix, in one ``np.frombuffer`` over the joined bytes.

    Raises:
        UnexpectedResponse: (``kind="decode"``)
            for a string that is not valid base64, rows of different or zero widths, or a
            non-finite value (see :func:`check_finite`).

    Examples:
        >>> decode_base64_rows(["AAAAPwAAAMA="])
        array([[ 0.5, -2. ]], dtype=float32)
    """
    try:
        parts = [base64.b64decode(text, validate=True) for text in texts]
    except (binascii.Error, ValueError, TypeError) as error:
        raise decode_error(f"invalid base64 embedding: {error}") from error
    widths = set(map(len, parts))
    if len(widths) != 1 or 0 in widths:
        raise decode_error(
            f"{sum(widths)} bytes cannot be split into {len(texts)} equal vectors (row sizes "
            f"{sorted(widths)[:5]} bytes)"
        )
    flat = decode_raw(b"".join(parts), embed_dtype, endianness, widen=widen)
    return flat.reshape(len(texts), -1)


def float_rows(rows: Sequence[Any], dtype: npt.DTypeLike = np.float32) -> npt.NDArray[Any]:
    """JSON rows of numbers as an ``(n, d)`` array: every row a list of ``d > 0`` numbers (no bools,
    strings or nesting), every value finite once cast to ``dtype``.

    Raises:
        UnexpectedResponse: (``kind="decode"``)
            naming what is wrong.

    Examples:
        >>> float_rows([[1, 2.5]])
        array([[1. , 2.5]], dtype=float32)
    """
    if not all(isinstance(row, list) for row in rows):
        raise decode_error("every vector must be a list of numbers")
    widths = set(map(len, rows))
    if len(widths) != 1 or 0 in widths:
        raise decode_error(f"the server returned vectors of widths {sorted(widths)[:10]}: not one width > 0")
    kinds: set[type] = set()
    for row in rows:
        kinds.update(map(type, row))
    if not kinds <= {float, int}:
        names = sorted(kind.__name__ for kind in kinds - {float, int})
        raise decode_error(f"vectors hold values that are not numbers ({', '.join(names)})")
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported as non-finite below
            matrix = np.asarray(rows, dtype=dtype)
    except (ValueError, OverflowError) as error:
        raise decode_error(f"vectors hold numbers out of range: {error}") from None
    return check_finite(matrix, "json")


def stack_rows(rows: Sequence[npt.NDArray[Any]], dtype: npt.DTypeLike = np.float32) -> npt.NDArray[Any]:
    """Stack equally long 1-D rows into an ``(n, d)`` matrix.

    Raises:
        UnexpectedResponse: (``kind="decode"``)
            when the rows differ in length.
    """
    widths = {row.shape[0] for row in rows}
    if len(widths) > 1:
        raise decode_error(f"the server returned vectors of different widths {sorted(widths)}")
    if not rows:
        return np.empty((0, 0), dtype=dtype)
    return np.stack(rows).astype(dtype, copy=False)


def decode_bytes_response(
    body: bytes,
    metadata: str | None,
    *,
    expected_items: int,
    embed_dtype: EmbedDType | str,
    endianness: Endianness | str = "native",
    widen: bool = True,
) -> tuple[npt.NDArray[Any], dict[str, Any]]:
    """Decode an ``encoding_format="bytes"`` (or ``"bytes_only"``) response body.

    The common layout (items in index order, equally long, back to back, one dtype and byte order) is
    decoded with one ``np.frombuffer``; its ``data`` list is remembered, so a later header that repeats
    it verbatim (the same batch size, dtype and width) only has its other fields parsed.

    Every item is checked: indices exactly ``0..n-1``, byte ranges that tile the body exactly (no gap,
    overlap or slack), a known dtype and byte order, a ``shape`` of ``[d]`` with ``d`` the values its
    bytes hold, the same ``d > 0`` for every item, finite values (:func:`check_finite`).

    Args:
        body: the raw body: every item's bytes concatenated in request order.
        metadata: the ``metadata`` header (JSON with per-item ``start``/``end``/``shape``/``embed_dtype``/
            ``endianness``, plus ``model`` and ``usage``), or ``None`` for ``bytes_only``.
        expected_items: how many inputs the request had.
        embed_dtype: the requested dtype (used when there is no metadata).
        endianness: the requested byte order (used when there is no metadata).
        widen: see :func:`decode_raw`.

    Returns:
        ``(matrix, meta)``: the ``(n, d)`` array in request order and the parsed metadata (``{}`` if none).
        ``meta["data"]``'s dicts may be shared between calls: treat them as read-only.

    Raises:
        UnexpectedResponse: (``kind="decode"``)
            when the body does not match the metadata or the request.
    """
    if expected_items <= 0:
        raise decode_error(f"cannot decode a response for {expected_items} inputs")
    if metadata is None:
        flat = decode_raw(body, embed_dtype, endianness, widen=widen)
        if not flat.size or flat.size % expected_items:
            raise decode_error(f"{flat.size} values cannot be split into {expected_items} equal vectors")
        return flat.reshape(expected_items, -1), {}
    view = memoryview(body)
    known = _known_layout(metadata, expected_items, len(body))
    if known is not None:
        return _decode_block(view, known[1], widen), known[0]
    meta = _parse_metadata(metadata)
    items: list[Any] = meta["data"]
    if len(items) != expected_items:
        raise decode_error(f"the server returned {len(items)} embeddings for {expected_items} inputs")
    layout = _uniform_layout(items)
    if layout is not None and layout.end == len(body):
        _remember_layout(metadata, items, layout)
        return _decode_block(view, layout, widen), meta
    checked = _checked_items(items, embed_dtype, len(body))
    return _decode_items(view, checked, widen), meta


def _parse_metadata(metadata: str) -> dict[str, Any]:
    try:
        meta = _json_loads(metadata)
    except ValueError as error:
        raise decode_error(f"unreadable `metadata` header: {error}") from error
    if not isinstance(meta, dict) or not isinstance(meta.get("data"), list):
        raise decode_error(f"the `metadata` header has no `data` list: {metadata[:200]!r}")
    return meta


@dataclass(frozen=True)
class _Item:
    """One checked ``metadata`` item."""

    start: int
    end: int
    embed_dtype: str
    endianness: str
    shape: tuple[int, ...]


def _holds(shape: Any, values: int, any_shape: bool) -> bool:
    """Whether ``shape`` is ``[values]``, or (``any_shape``) positive sizes whose product is ``values``;
    every size a JSON integer (``4.0`` or ``true`` equal 4 and 1 in Python, but are not what vLLM writes).
    """
    if not isinstance(shape, list) or not shape or not all(type(size) is int and size > 0 for size in shape):
        return False
    return math.prod(shape) == values if any_shape else shape == [values]


def decode_bytes_tensors(
    body: bytes, metadata: str | None, *, expected_items: int
) -> tuple[list[npt.NDArray[Any]], dict[str, Any]]:
    """Decode a ``/pooling`` ``encoding_format="bytes"`` body: one array per item in the shape its
    ``metadata`` entry declares (``[d]``, ``[n_tokens, d]``, ``[n_tokens]``, ...), float32 or wider.

    Every item is checked as by :func:`decode_bytes_response`, except that the shapes may differ between
    items (a per-token matrix has as many rows as its input has tokens) and may have any rank: each must
    hold exactly the values its bytes hold.

    Args:
        body: the raw body: every item's bytes concatenated in request order.
        metadata: the ``metadata`` header (its per-item ``shape`` is what gives a matrix its rows).
        expected_items: how many inputs the request had.

    Returns:
        ``(arrays, meta)``: the arrays in request order and the parsed metadata.

    Raises:
        UnexpectedResponse: (``kind="decode"``) no metadata, or a body that does not match it.

    Examples:
        >>> meta = '{"data": [{"index": 0, "start": 0, "end": 24, "shape": [2, 3]}]}'
        >>> decode_bytes_tensors(np.ones(6, "=f4").tobytes(), meta, expected_items=1)[0][0].shape
        (2, 3)
    """
    if metadata is None:
        raise decode_error("a bytes answer without its `metadata` header: the arrays' shapes are unknown")
    meta = _parse_metadata(metadata)
    items: list[Any] = meta["data"]
    if len(items) != expected_items:
        raise decode_error(f"the server returned {len(items)} arrays for {expected_items} inputs")
    view = memoryview(body)
    arrays = [
        decode_raw(view[item.start : item.end], item.embed_dtype, item.endianness).reshape(item.shape)
        for item in _checked_items(items, "float32", len(body), any_shape=True)
    ]
    return arrays, meta


def _checked_items(
    items: list[Any], embed_dtype: str, body_size: int, *, any_shape: bool = False
) -> list[_Item]:
    """The items in index order, each checked (see :func:`decode_bytes_response`); ``any_shape`` takes
    shapes of any rank and size (see :func:`decode_bytes_tensors`) instead of one ``[d]`` for all.

    Raises:
        UnexpectedResponse: (``kind="decode"``)
            naming the first item that is wrong.
    """
    by_index: dict[int, _Item] = {}
    widths: set[int] = set()
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            raise decode_error(f"`metadata` item {position} is not an object: {str(item)[:100]!r}")
        index, start, end = item.get("index"), item.get("start"), item.get("end")
        if not (type(index) is int and type(start) is int and type(end) is int):
            raise decode_error(f"`metadata` item {position} needs integer index, start and end: {item}")
        if index in by_index or not 0 <= index < len(items):
            indices = [entry.get("index") if isinstance(entry, dict) else None for entry in items]
            raise decode_error(f"`metadata` indices must be exactly 0..{len(items) - 1}, got {indices[:20]}")
        dtype = item.get("embed_dtype", embed_dtype)
        size = _ITEM_SIZE.get(dtype) if isinstance(dtype, str) else None
        if size is None:
            raise decode_error(f"`metadata` item {index}: unknown embed_dtype {dtype!r}")
        order = item.get("endianness", "native")
        if order not in ENDIANNESS:
            raise decode_error(f"`metadata` item {index}: unknown endianness {order!r}")
        values, rest = divmod(end - start, size)
        if start < 0 or end > body_size or values <= 0 or rest:
            raise decode_error(
                f"`metadata` item {index} spans bytes {start}..{end} of a {body_size}-byte body: not a "
                f"positive whole number of {dtype} values"
            )
        shape = item.get("shape")
        if not _holds(shape, values, any_shape):
            raise decode_error(
                f"`metadata` item {index} declares shape {shape!r} but its {end - start} bytes "
                f"hold {values} {dtype} values"
            )
        widths.add(values)
        by_index[index] = _Item(start, end, dtype, order, tuple(cast(list[int], shape)))
    if len(widths) > 1 and not any_shape:
        raise decode_error(f"the server returned vectors of different widths {sorted(widths)}")
    _check_tiling(list(by_index.values()), body_size)
    return [by_index[index] for index in range(len(items))]


def _check_tiling(items: list[_Item], body_size: int) -> None:
    """The items' byte ranges must cover ``body[0:body_size]`` exactly once."""
    position = 0
    for item in sorted(items, key=lambda entry: entry.start):
        if item.start != position:
            what = "overlap" if item.start < position else "gap"
            raise decode_error(f"the `metadata` byte ranges {what} at byte {min(item.start, position)}")
        position = item.end
    if position != body_size:
        raise decode_error(f"the `metadata` items cover {position} bytes of a {body_size}-byte body")


@dataclass(frozen=True)
class _Layout:
    """Items ``0..count-1`` back to back in ``body[:end]``, all of one ``embed_dtype`` and ``endianness``."""

    count: int
    end: int
    embed_dtype: str
    endianness: Any
    text: str = ""
    """The header's ``data`` array exactly as the server wrote it (set once remembered)."""
    items: tuple[dict[str, Any], ...] = ()
    """``text`` parsed."""


_ITEM_FIELDS = operator.itemgetter("index", "start", "end", "embed_dtype", "endianness", "shape")


def _uniform_layout(items: list[Any]) -> _Layout | None:
    """The layout when the items are in index order, equally wide, contiguous from byte 0 and shaped
    ``[d]`` as their bytes say, else None (the per-item path then names the fault).

    Vectorised over the items (C-level ``map``/``zip`` and tuple comparisons, no per-item Python code);
    anything unusual (a missing key, a float offset, mixed dtypes) returns None for the per-item path.
    """
    try:
        rows = list(map(_ITEM_FIELDS, items))
    except (KeyError, TypeError):
        return None
    if not rows:
        return None
    _, start, end, dtype, order, shape = rows[0]
    if type(start) is not int or type(end) is not int or not isinstance(dtype, str):
        return None
    width, count = end - start, len(rows)
    size = _ITEM_SIZE.get(dtype)
    if start != 0 or width <= 0 or size is None or width % size:
        return None
    if type(shape) is not list or len(shape) != 1 or type(shape[0]) is not int or shape[0] != width // size:
        return None
    indices, starts, ends, dtypes, orders, shapes = zip(*rows, strict=True)
    if (
        indices != tuple(range(count))
        or starts != tuple(range(0, count * width, width))
        or ends != tuple(range(width, (count + 1) * width, width))
        or dtypes.count(dtype) != count
        or orders.count(order) != count
        or shapes.count(shape) != count
        # Equality takes 4.0 or True for an int: the types are compared too (shapes are all [d] here).
        or set(map(type, itertools.chain(indices, starts, ends, itertools.chain.from_iterable(shapes))))
        != {int}
    ):
        return None
    return _Layout(count, count * width, dtype, order)


def _decode_block(view: memoryview, layout: _Layout, widen: bool) -> npt.NDArray[Any]:
    flat = decode_raw(view[: layout.end], layout.embed_dtype, layout.endianness, widen=widen)
    return flat.reshape(layout.count, -1)


def _decode_items(view: memoryview, items: list[_Item], widen: bool) -> npt.NDArray[Any]:
    """Decode checked items (any order in the body, mixed dtypes) into rows in index order."""
    rows = [
        decode_raw(view[item.start : item.end], item.embed_dtype, item.endianness, widen=widen)
        for item in items
    ]
    dtypes = {row.dtype for row in rows}
    return stack_rows(rows, np.float32 if len(dtypes) > 1 else rows[0].dtype)


# Remembered `data` arrays, by item count. vLLM writes the same `data` text for every response of one
# batch size, dtype and width (only `id`, `created` and `usage` change), so a header that contains a
# remembered array verbatim needs only its other fields parsed.
_LAYOUTS: dict[int, tuple[_Layout, ...]] = {}
_LAYOUTS_PER_COUNT = 2
_LAYOUT_COUNTS = 16
_LAYOUT_HEAD = 64
_DATA_KEY = re.compile(r'"data"\s*:\s*(?=\[)')
_ARRAY_END = re.compile(r"\}\s*\]")
# Stands in for the remembered array while the rest of the header is parsed. Its value holds a NUL, which
# JSON can only write as the escape \u0000 (both parsers reject raw control characters): when the text
# around the array has no such escape, no other string can parse to the stand-in, so finding it as the
# top-level "data" proves the array sat there, outside any string, as the value a full parse would keep.
_SLOT_JSON = '"\\u0000vllm_tasks:data"'
_SLOT = "\x00vllm_tasks:data"
_NUL_ESCAPE = "\\u0000"


def _known_layout(metadata: str, count: int, body_size: int) -> tuple[dict[str, Any], _Layout] | None:
    """``(meta, layout)`` when ``metadata`` holds a remembered ``data`` array as its top-level ``data``."""
    for layout in _LAYOUTS.get(count, ()):
        at = metadata.find(layout.text[:_LAYOUT_HEAD])
        if at < 0 or not metadata.startswith(layout.text, at):
            continue
        before, after = metadata[:at], metadata[at + len(layout.text) :]
        if layout.end != body_size or _NUL_ESCAPE in before or _NUL_ESCAPE in after:
            return None
        try:
            meta = _json_loads(before + _SLOT_JSON + after)
        except ValueError:
            return None
        if not isinstance(meta, dict) or meta.get("data") != _SLOT:
            return None
        meta["data"] = list(layout.items)
        return meta, layout
    return None


def _remember_layout(metadata: str, items: list[dict[str, Any]], layout: _Layout) -> None:
    """Remember the exact text of ``metadata``'s ``data`` array (already parsed as ``items``)."""
    key = _DATA_KEY.search(metadata)
    close = _ARRAY_END.search(metadata, key.end()) if key else None
    if key is None or close is None:
        return
    text = metadata[key.end() : close.end()]
    known = _LAYOUTS.get(layout.count, ())
    if any(entry.text == text for entry in known):
        return  # remembered, but this header could not use it (e.g. a \u0000 elsewhere)
    try:
        if _json_loads(text) != items:
            return
    except ValueError:
        return
    if len(_LAYOUTS) >= _LAYOUT_COUNTS and layout.count not in _LAYOUTS:
        _LAYOUTS.clear()
    remembered = replace(layout, text=text, items=tuple(items))
    _LAYOUTS[layout.count] = (remembered, *known)[:_LAYOUTS_PER_COUNT]


def unpackbits(packed: npt.NDArray[Any]) -> npt.NDArray[np.uint8]:
    """Unpack ``/v2/embed`` ``binary`` (int8) or ``ubinary`` (uint8) rows into 0/1 bits, MSB first.

    ``ubinary`` bytes are the bits of ``value >= 0`` packed 8 per byte; ``binary`` is the same byte
    minus 128. The result has 8 times as many columns.

    Args:
        packed: int8 (``binary``) or uint8 (``ubinary``) rows; other integer types are read as ``ubinary``
            bytes (0 to 255).

    Raises:
        InvalidInputError: not integers (floats, strings), or integers that are not bytes.

    Examples:
        >>> unpackbits(np.array([[128]], dtype=np.uint8))
        array([[1, 0, 0, 0, 0, 0, 0, 0]], dtype=uint8)
    """
    array = np.asarray(packed)
    if array.dtype == np.int8:
        array = (array.astype(np.int16) + 128).astype(np.uint8)
    elif array.dtype != np.uint8:
        if array.dtype.kind not in "iu" or (array.size and (array.min() < 0 or array.max() > 255)):
            raise InvalidInputError(
                "packed",
                f"{array.dtype}[{', '.join(map(str, array.shape))}]",
                "is not packed bits: bytes 0 to 255 (ubinary), or int8 (binary)",
                "Pass the result's .binary or .ubinary rows as they are.",
            )
        array = array.astype(np.uint8)
    return np.unpackbits(array, axis=-1)
