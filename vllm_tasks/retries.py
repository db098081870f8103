"""The retry policy shared by the sync and async transports (pure functions, no I/O)."""

from __future__ import annotations

import email.utils
import random
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


def retry_after_seconds(headers: dict[str, str] | object, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` may be delta-seconds or an HTTP date. Returns ``None`` when absent or unparseable.
    """
    get = getattr(headers, "get", None)
    if get is None:
        return None
    millis = get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


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
