"""Default settings, in one place."""

from __future__ import annotations

import httpx

BASE_URL = "http://localhost:8000"
BASE_URL_ENV = "VLLM_TASKS_BASE_URL"
API_KEY_ENV = "VLLM_API_KEY"

TIMEOUT = httpx.Timeout(600.0, connect=10.0)
"""Pooling a large batch or transcribing a long file on a busy server can take minutes."""

MAX_RETRIES = 2
RETRY_INITIAL_DELAY = 0.5
RETRY_MAX_DELAY = 8.0
RETRY_AFTER_CAP = 60.0
"""A ``Retry-After`` longer than this is ignored in favour of the normal backoff."""

HEALTH_POLL_INTERVAL = 1.0
PROBE_TIMEOUT = 30.0
