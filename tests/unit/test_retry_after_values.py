"""``Retry-After`` and ``retry-after-ms`` values a server or proxy may send: each gives a sane wait. 0, a
negative number, a date past and garbage give ``None`` (the normal backoff), an HTTP date is counted from
now, and a huge value is kept (over the cap: the retries end)."""

from __future__ import annotations

import email.utils

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import vllm_tasks as vt
from vllm_tasks.retries import Backoff, retry_after_seconds

NOW = 1_800_000_000.0
BACKOFF = Backoff(initial=0.5, maximum=8, retry_after_cap=60)


def asked(value: str, name: str = "retry-after") -> float | None:
    return retry_after_seconds({name: value}, now=NOW)


def first_delay(headers: dict[str, str]) -> float:
    error = vt.ServiceUnavailableError("busy", status_code=503, headers=httpx.Headers(headers))
    return BACKOFF.delay(1, error)


@given(st.text())
def test_any_text_gives_none_or_a_positive_wait(value: str) -> None:
    for name in ("retry-after", "retry-after-ms"):
        seconds = asked(value, name)
        assert seconds is None or seconds > 0


@given(st.integers(min_value=-(10**6), max_value=0))
def test_zero_and_negative_seconds_give_the_normal_backoff(seconds: int) -> None:
    assert asked(str(seconds)) is None and asked(str(seconds), "retry-after-ms") is None
    assert 0.375 <= first_delay({"retry-after": str(seconds)}) <= 0.5


@given(st.integers(min_value=1, max_value=60))
def test_seconds_within_the_cap_are_waited(seconds: int) -> None:
    assert asked(str(seconds)) == seconds
    assert asked(str(seconds * 1000), "retry-after-ms") == seconds
    assert first_delay({"retry-after": str(seconds)}) == seconds


@given(st.integers(min_value=61, max_value=10**400))
def test_a_huge_wait_is_over_the_cap_and_ends_the_retries(seconds: int) -> None:
    value = asked(str(seconds))
    assert value is not None and value > BACKOFF.retry_after_cap
    error = vt.ServiceUnavailableError(
        "busy", status_code=503, headers=httpx.Headers({"retry-after": str(seconds)})
    )
    assert BACKOFF.refuses_wait(error)


@given(st.integers(min_value=1, max_value=10**8))
def test_an_http_date_ahead_is_counted_from_now(ahead: int) -> None:
    date = email.utils.formatdate(NOW + ahead, usegmt=True)
    assert asked(date) == pytest.approx(ahead, abs=1)
    assert asked(date.replace("GMT", "-0000")) == pytest.approx(ahead, abs=1)  # no zone: GMT


@given(st.integers(min_value=0, max_value=10**9))
def test_an_http_date_past_gives_the_normal_backoff(ago: int) -> None:
    assert asked(email.utils.formatdate(NOW - ago, usegmt=True)) is None


@pytest.mark.parametrize(
    "value", ["soon", "", "nan", "inf", "-inf", "1e3", "0x10", "1_000", "٣", "5, 7", "Wed, 99 Foo 2026",
              "Mon, 01 Jan 99999 00:00:00 GMT"],
)  # fmt: skip
def test_garbage_gives_the_normal_backoff(value: str) -> None:
    assert asked(value) is None
    if value.isascii():  # httpx refuses other header values
        assert 0.375 <= first_delay({"retry-after": value}) <= 0.5


def test_a_useless_retry_after_ms_leaves_retry_after_to_decide() -> None:
    assert retry_after_seconds(httpx.Headers({"retry-after-ms": "0", "retry-after": "3"})) == 3
    assert retry_after_seconds(httpx.Headers({"retry-after-ms": "soon", "retry-after": "3"})) == 3
    assert retry_after_seconds(httpx.Headers({"retry-after-ms": "1500", "retry-after": "3"})) == 1.5
