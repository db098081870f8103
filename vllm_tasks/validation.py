"""Checks of caller-given arguments, shared by every task: each failure is an ``InvalidInputError``
naming the argument, the value and the fix.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeGuard, cast, overload

import httpx

from .errors import InvalidInputError


def positive_int(field: str, value: object) -> int:
    """Check a count argument (``batch_size``, ``concurrency``, ...): an int >= 1.

    Raises:
        InvalidInputError: for anything else (``None`` and ``bool`` included).

    Examples:
        >>> positive_int("batch_size", 8)
        8
    """
    return _required_int(field, value, 1, f"For example {field}=8.")


def concurrency_setting(field: str, value: object) -> int | Literal["auto"]:
    """Check a ``concurrency`` argument: an int >= 1, or ``"auto"`` (a limit tuned from the answers).

    Raises:
        InvalidInputError: for anything else (``None``, ``0``, ``"fast"``, ``2.5``, ``True``), naming the
            field.

    Examples:
        >>> concurrency_setting("concurrency", "auto"), concurrency_setting("concurrency", 8)
        ('auto', 8)
    """
    if value == "auto" and isinstance(value, str):
        return "auto"
    return _required_int(field, value, 1, f'Pass a whole number >= 1 (e.g. {field}=8) or {field}="auto".')


@overload
def int_at_least(field: str, value: None, minimum: int, fix: str = "") -> None: ...
@overload
def int_at_least(field: str, value: object, minimum: int, fix: str = "") -> int: ...
def int_at_least(field: str, value: object, minimum: int, fix: str = "") -> int | None:
    """Check an optional integer argument: ``None`` passes, else an int >= ``minimum``.

    Raises:
        InvalidInputError: for a bool, a non-int or a value below ``minimum``.

    Examples:
        >>> int_at_least("top_n", 3, 0)
        3
    """
    return None if value is None else _required_int(field, value, minimum, fix)


def _required_int(field: str, value: object, minimum: int, fix: str) -> int:
    """``value`` when it is an int >= ``minimum`` (not a bool); else ``InvalidInputError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInputError(field, value, f"must be an integer >= {minimum}", fix)
    return value


def number_in_range(field: str, value: object, low: float, high: float, fix: str = "") -> float:
    """Check a number argument (int or float, not bool) within ``[low, high]``.

    Raises:
        InvalidInputError: for a bool, a non-number or a value outside the range.

    Examples:
        >>> number_in_range("dpi", 144, 18, 1200)
        144.0
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise InvalidInputError(field, value, f"must be a number from {low:g} to {high:g}", fix)
    return float(value)


def is_number(value: object) -> TypeGuard[int | float]:
    """Whether ``value`` is an int or a float (``bool`` is not a number here).

    Examples:
        >>> is_number(2.5), is_number(True)
        (True, False)
    """
    return not isinstance(value, bool) and isinstance(value, int | float)


def positive_number(field: str, value: object, fix: str = "") -> float:
    """Check a number argument (seconds, a rate) that must be > 0.

    Raises:
        InvalidInputError: for a bool, a non-number, zero or a negative value.

    Examples:
        >>> positive_number("timeout", 30)
        30.0
    """
    if not is_number(value) or not value > 0:
        raise InvalidInputError(field, value, "must be a positive number", fix)
    return float(value)


def timeout_value(field: str, value: object) -> object:
    """Check a timeout argument: ``None`` (wait forever), a positive finite number of seconds, or an
    ``httpx.Timeout`` whose parts are each ``None`` or such a number.

    Raises:
        InvalidInputError: for a bool, a string, zero, a negative, NaN or infinite value.

    Examples:
        >>> timeout_value("timeout", 30)
        30
    """
    if value is None:
        return value
    if isinstance(value, httpx.Timeout):
        for part, seconds in value.as_dict().items():
            if seconds is not None and not _finite_positive(seconds):
                raise InvalidInputError(
                    f"{field}.{part}", seconds, "must be a positive number of seconds or None", _TIMEOUT_FIX
                )
        return value
    if not _finite_positive(value):
        raise InvalidInputError(
            field, value, "must be a positive number of seconds, an httpx.Timeout, or None", _TIMEOUT_FIX
        )
    return value


_TIMEOUT_FIX = "For example timeout=120 (seconds), or None to wait forever."


def _finite_positive(value: object) -> bool:
    return is_number(value) and math.isfinite(value) and value > 0


def header_values(field: str, headers: Mapping[Any, Any] | None) -> None:
    """Check HTTP headers given by the caller: ``str`` names and values, ASCII, on one line.

    httpx would fail on anything else inside the request (or, for a line break, send a second header).

    Raises:
        InvalidInputError: naming the header, e.g. ``extra_headers['X-Id']``.

    Examples:
        >>> header_values("headers", {"X-Team": "search"})
    """
    for name, value in (headers or {}).items():
        for what, text in (("names", name), ("values", value)):
            if not isinstance(text, str):
                raise InvalidInputError(
                    f"{field}[{name!r}]",
                    type(text).__name__,
                    f"header {what} must be str",
                    "Pass e.g. {'X-Id': str(value)}.",
                )
            empty_name = what == "names" and not text
            if empty_name or not text.isascii() or any(ch in text for ch in "\r\n\0"):
                # A value is never echoed: it may be a secret (an Authorization header).
                raise InvalidInputError(
                    f"{field}[{name!r}]",
                    text if what == "names" else "<not shown>",
                    f"header {what} must be ASCII text on one line" + (", not empty" if empty_name else ""),
                    "Encode other text (e.g. percent-encoding) before putting it in a header.",
                )


def token_ids(field: str, value: Sequence[object]) -> list[int]:
    """Check one pre-tokenized prompt: a non-empty list of token ids, each an int >= 0.

    ``bool`` is not a token id (``True`` would go out as ``true``), nor is a float or a numpy integer.

    Raises:
        InvalidInputError: an empty list (naming ``field``), or the first bad id (naming ``field[j]``).

    Examples:
        >>> token_ids("input[0]", (101, 7592, 102))
        [101, 7592, 102]
    """
    ids = list(value)
    if not ids:
        raise InvalidInputError(
            field, ids, "must be a non-empty list of token ids (ints >= 0)", "Pass at least one token id."
        )
    for index, token in enumerate(ids):
        if isinstance(token, bool) or not isinstance(token, int) or token < 0:
            raise InvalidInputError(
                f"{field}[{index}]", token, "must be a token id (an int >= 0)", "Token ids are plain ints."
            )
    return cast(list[int], ids)
