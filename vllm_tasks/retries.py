"""The retry policy shared by the sync and async transports (pure functions, no I/O)."""

from __future__ import annotations

import datetime
import email.utils
import random
import re
import time
from dataclasses import dataclass

from tenacity import RetryCallState

from . import defaults
from .errors import APIConnectionError, APIStatusError

RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
"""Statuses worth a retry. 501 and 505 are deterministic answers, so they are not retried."""

TRANSIENT_STATUSES = RETRYABLE_STATUSES - {500}
"""Statuses that say nothing about the request itself: the server (or a gateway before it) could not
answer now. A probe that still gets one after its retries has no answer to keep; a 500 is the server's
own answer (it ran the request and failed), which a probe may read."""


def is_retryable(error: BaseException) -> bool:
    """Whether a failed attempt should be retried: connection errors, timeouts, 408/409/429/5xx."""
    if isinstance(error, APIConnectionError):
        return True
    return isinstance(error, APIStatusError) and error.status_code in RETRYABLE_STATUSES


_DELTA = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?)\s*")
"""A wait in seconds (or milliseconds): RFC 9110's ``delta-seconds``, with a fraction allowed (as the
``retry-after-ms`` header of OpenAI-compatible servers sends). No sign, exponent, ``inf`` or ``nan``."""


def retry_after_seconds(headers: dict[str, str] | object, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` may be delta-seconds or an HTTP date (a date without a zone is read as GMT). A value
    that is no wait (0, a date past), negative or unparseable gives ``None``: the normal backoff applies.
    A huge one is returned as it is (``inf`` past a float's range): over the cap, it ends the retries
    (:meth:`Backoff.refuses_wait`).

    Args:
        headers: the answer's headers (anything with ``get``; other values give ``None``).
        now: the time to count an HTTP date from (default: ``time.time()``).

    Examples:
        >>> retry_after_seconds({"retry-after": "2"}), retry_after_seconds({"retry-after-ms": "1500"})
        (2.0, 1.5)
        >>> retry_after_seconds({"retry-after": "0"}), retry_after_seconds({"retry-after": "-1"})
        (None, None)
    """
    get = getattr(headers, "get", None)
    if get is None:
        return None
    millis = _delta(get("retry-after-ms"))
    if millis:  # no wait there (0, garbage): Retry-After may still name one
        return millis / 1000.0
    value = get("retry-after")
    if not isinstance(value, str):
        return None
    seconds = _delta(value)
    if seconds is None:
        seconds = _until(value, time.time() if now is None else now)
    return seconds if seconds is not None and seconds > 0 else None


def _delta(value: object) -> float | None:
    """``value`` as a number of :data:`_DELTA`'s form, else None."""
    match = _DELTA.fullmatch(value) if isinstance(value, str) else None
    return float(match.group(1)) if match else None


def _until(value: str, now: float) -> float | None:
    """Seconds from ``now`` to the HTTP date ``value`` (negative when past), or None when it is none."""
    try:
        when = email.utils.parsedate_to_datetime(value)
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.UTC)
        return when.timestamp() - now
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff with jitter that honours ``Retry-After`` up to a cap (a longer
    ``Retry-After`` ends the retries: :meth:`refuses_wait`)."""

    initial: float = defaults.RETRY_INITIAL_DELAY
    maximum: float = defaults.RETRY_MAX_DELAY
    retry_after_cap: float = defaults.RETRY_AFTER_CAP

    def delay(self, attempt: int, error: BaseException | None) -> float:
        """Seconds to wait before retry number ``attempt`` (1 for the first retry).

        A server's ``Retry-After`` wins when it is at most ``retry_after_cap``; otherwise the delay is
        ``initial * 2**(attempt-1)``, capped at ``maximum``, minus up to 25 % random jitter.
        """
        if isinstance(error, APIStatusError):
            asked = retry_after_seconds(error.headers)
            if asked is not None and asked <= self.retry_after_cap:
                return asked
        base = min(self.initial * 2 ** (attempt - 1), self.maximum)
        return float(base * (1 - 0.25 * random.random()))

    def refuses_wait(self, error: BaseException) -> bool:
        """Whether ``error`` asks (``Retry-After``) for a longer wait than ``retry_after_cap``.

        Such an error ends the retries: retrying sooner than the server asked would only repeat the
        refusal. The error is annotated in place: ``retry_after`` (seconds asked) and a message that
        names the wait and the cap.
        """
        if not isinstance(error, APIStatusError):
            return False
        asked = retry_after_seconds(error.headers)
        if asked is None or asked <= self.retry_after_cap:
            return False
        if getattr(error, "retry_after", None) is not None:
            return True  # annotated already
        error.retry_after = asked  # type: ignore[attr-defined]
        error.message = (
            f"{error.message} (the server asked to wait {asked:g} s, over the client's cap of "
            f"{self.retry_after_cap:g} s: not retried; try again later)"
        )
        error.args = (error.message,)
        return True

    def __call__(self, state: RetryCallState) -> float:
        """tenacity ``wait`` hook."""
        error = state.outcome.exception() if state.outcome is not None else None
        return self.delay(state.attempt_number, error)
