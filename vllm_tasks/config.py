"""Validation of client constructor arguments, shared by ``Client`` and ``AsyncClient``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from . import defaults
from .errors import InvalidInputError, redact_url
from .validation import header_values, int_at_least, is_number, timeout_value
from .version import __version__

TimeoutArg = float | httpx.Timeout | None


@dataclass(frozen=True)
class ClientConfig:
    """Validated settings of a client. ``repr`` never shows the API key or URL credentials.

    ``base_url`` keeps any ``user:password@`` for requests (httpx sends it as Basic auth);
    ``display_url`` is the same URL without them, for reprs, messages and reports.
    """

    base_url: str
    api_key: str | None
    model: str | None
    timeout: httpx.Timeout
    max_retries: int
    headers: dict[str, str]

    def __repr__(self) -> str:
        key = "set" if self.api_key else "none"
        return f"ClientConfig(base_url={self.display_url!r}, model={self.model!r}, api_key={key})"

    @property
    def display_url(self) -> str:
        """``base_url`` without credentials (``http://user:KEY@host`` -> ``http://host``)."""
        return redact_url(self.base_url)

    @classmethod
    def create(
        cls,
        base_url: str | httpx.URL | None,
        *,
        api_key: str | None,
        model: str | None,
        timeout: TimeoutArg,
        max_retries: int,
        headers: Mapping[str, str] | None,
    ) -> ClientConfig:
        """Validate constructor arguments (falling back to the environment) into a config.

        Raises:
            InvalidInputError: naming the argument, the value and the fix.
        """
        url = _base_url(base_url)
        key = _api_key(api_key)
        if key is not None and httpx.URL(url).userinfo:
            # httpx turns URL credentials into Basic auth, which replaces the Bearer header: the key
            # would silently never be sent.
            raise InvalidInputError(
                "base_url",
                redact_url(url),
                "has user:password credentials and an api_key is set too (only one can be sent)",
                "Put the key in api_key= (or VLLM_API_KEY) and drop the credentials from the URL, or unset "
                "the key when the URL's credentials are what a proxy in front of vLLM needs.",
            )
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise InvalidInputError(
                "model", model, "must be a non-empty string", "Pass a served model name or None."
            )
        int_at_least("max_retries", max_retries, 0, "Use 0 to disable retries.")
        if headers is not None and not isinstance(headers, Mapping):
            raise InvalidInputError("headers", headers, "must be a mapping", "Pass a dict of header values.")
        header_values("headers", headers)
        all_headers = {"User-Agent": f"vllm-tasks/{__version__}", **(headers or {})}
        if key is not None:
            all_headers["Authorization"] = f"Bearer {key}"
        return cls(
            base_url=url,
            api_key=key,
            model=model,
            timeout=_timeout(timeout),
            max_retries=max_retries,
            headers=all_headers,
        )


def _base_url(value: str | httpx.URL | None) -> str:
    if value is None:
        value = os.environ.get(defaults.BASE_URL_ENV) or defaults.BASE_URL
    if not isinstance(value, str | httpx.URL):
        raise InvalidInputError(
            "base_url", value, "must be a string", "Pass a URL such as 'http://localhost:8000'."
        )
    text = str(value).strip().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError(
            "base_url",
            redact_url(text),
            "is not an http(s) URL with a host",
            "Pass the server's root URL, e.g. 'http://localhost:8000'.",
        )
    # vLLM serves /score, /rerank, /health at the root: a URL copied from an OpenAI setup ends in /v1.
    if text.endswith("/v1"):
        text = text[: -len("/v1")]
    return text


def _api_key(value: str | None) -> str | None:
    if value is None:
        value = os.environ.get(defaults.API_KEY_ENV) or None
        if value is None:
            return None
    if not isinstance(value, str):
        # The value itself is never echoed: it may be a secret of the wrong type.
        raise InvalidInputError(
            "api_key", f"<{type(value).__name__}>", "must be a string", "Pass the key as a str, or None."
        )
    key = value.strip()
    if not key or any(ch in key for ch in "\r\n"):
        raise InvalidInputError(
            "api_key", "<redacted>", "must be a non-empty single-line string", "Check how the key was read."
        )
    return key


def _timeout(value: TimeoutArg) -> httpx.Timeout:
    if isinstance(value, httpx.Timeout):
        timeout_value("timeout", value)  # each part None or a positive finite number
        return value
    if value is None:
        return httpx.Timeout(None)
    if not is_number(value) or not value > 0 or value == float("inf"):
        raise InvalidInputError(
            "timeout",
            value,
            "must be a positive number of seconds, an httpx.Timeout, or None for no timeout",
            "For example timeout=120.",
        )
    return httpx.Timeout(float(value), connect=min(float(value), defaults.TIMEOUT.connect or 10.0))
