"""``ClientSettings``: the one value a client is configured with, and ``FetchLimits``, one of its parts.

Clients are built from it (``Client.from_settings``), expose it (``client.settings``) and derive from it
(``client.with_options``); jobs, the framework adapters, Ray workers and the CLI take and pass nothing
else. It is frozen and pickles (the API key included: a Ray worker needs it), and its ``repr`` never shows
the key, URL credentials or header values.
"""

from __future__ import annotations

import base64
import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

import httpx

from . import defaults
from .errors import InvalidInputError
from .redaction import redact_text, redact_url
from .validation import header_values, int_at_least, is_number, timeout_value
from .version import __version__

TimeoutArg = float | httpx.Timeout | None
TransportName = Literal["auto", "httpx"]
"""``ClientSettings.transport``: ``"auto"`` (urllib3's pool under ``Client`` where installed) or
``"httpx"`` (httpx's own transport)."""


@dataclass(frozen=True)
class FetchLimits:
    """Bounds on downloading user-given image and audio URLs client-side (a client setting).

    Attributes:
        max_bytes: the largest body accepted; a longer one is refused as soon as it passes the cap.
        deadline: seconds the whole download may take (redirects included), however slowly the bytes
            come: a server trickling one byte a second cannot hold the call.
        refuse_private: refuse hosts that resolve to private, loopback, link-local or other non-public
            addresses, redirects to them included (off by default, so local files servers work). With it
            on, the ``http(s)`` image URLs of ``embed``, ``pool``, ``rerank`` and ``score``, which the server
            would fetch unchecked, are fetched by the client too and sent as ``data:`` URLs.
        max_redirects: redirects followed.

    Raises:
        InvalidInputError: a limit that is not a positive number (``max_bytes``, ``max_redirects``: int).

    Examples:
        >>> client = vllm_tasks.Client(fetch_limits=FetchLimits(max_bytes=50_000_000, refuse_private=True))
    """

    max_bytes: int = defaults.FETCH_MAX_BYTES
    deadline: float = defaults.FETCH_DEADLINE
    refuse_private: bool = False
    max_redirects: int = defaults.FETCH_MAX_REDIRECTS

    def __post_init__(self) -> None:
        int_at_least("max_bytes", self.max_bytes, 1, "For example max_bytes=100_000_000.")
        int_at_least("max_redirects", self.max_redirects, 0, "Use 0 to follow none.")
        if not is_number(self.deadline) or not math.isfinite(self.deadline) or self.deadline <= 0:
            raise InvalidInputError("deadline", self.deadline, "must be a positive number", "e.g. 300.")
        if not isinstance(self.refuse_private, bool):
            raise InvalidInputError("refuse_private", self.refuse_private, "must be a bool", "")


@dataclass(frozen=True, init=False)
class ClientSettings:
    """Everything a client is configured with, except an injected ``http_client``: one frozen value.

    Build a client from it with ``Client.from_settings(settings)`` (or ``AsyncClient.from_settings``);
    every client has one (``client.settings``), and ``client.with_options(**changes)`` makes a client
    from a changed copy. It pickles with the API key (a Ray worker or a process pool needs it); its
    ``repr`` shows neither the key, nor credentials in ``base_url``, nor header values.

    Args:
        base_url: the server's root URL. Default: env ``VLLM_TASKS_BASE_URL``, else
            ``http://localhost:8000``. A trailing ``/v1`` is removed (vLLM serves /score at the root).
            ``user:password@`` credentials in it (for a proxy in front of vLLM) are sent as an
            ``Authorization: Basic`` header; the URL requests go to, and that httpx logs, has none.
        api_key: sent as ``Authorization: Bearer``. Default: env ``VLLM_API_KEY``. Refused together
            with URL credentials (only one ``Authorization`` header can be sent).
        model: the served model name to use when a call names none. Default: the server's first.
        timeout: seconds (or an ``httpx.Timeout``) per request; ``None`` waits forever. Stored as an
            ``httpx.Timeout`` (a number ``t`` becomes ``Timeout(t, connect=min(t, 10))``).
        max_retries: retries for connection errors, timeouts, 408/409/429/5xx; 0 disables them.
        headers: extra headers sent with every request.
        fetch_limits: bounds on downloading user-given image/audio URLs (:class:`FetchLimits`; default:
            256 MiB, 300 s, private addresses allowed).
        transport: what sends the requests of the client's own ``httpx`` client (an ``http_client`` you
            pass keeps its own). ``"auto"`` (default): :class:`~vllm_tasks.Urllib3Transport` under
            ``Client`` (more vectors per second than httpx's transport at less CPU per vector, most at
            concurrency 4 and 16: benchmarks/embed_throughput.py) where urllib3 is installed and the
            environment names no proxy
            (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``), else httpx's own; httpx's own under
            ``AsyncClient``. ``"httpx"``: httpx's own transport always. httpx above it is the same
            either way (headers, auth, timeouts, redirects refused, decompression, ``SSL_CERT_FILE``);
            see docs/embeddings.md "Transport".

    Raises:
        InvalidInputError: an invalid value, naming the setting, the value and the fix.

    Examples:
        >>> settings = vt.ClientSettings("http://localhost:8000", api_key="sk-1", model="minilm")
        >>> settings
        ClientSettings(base_url='http://localhost:8000', model='minilm', api_key=set, ...)
        >>> client = vt.Client.from_settings(settings)
        >>> settings.replace(max_retries=0).max_retries
        0
    """

    base_url: str
    api_key: str | None
    model: str | None
    timeout: httpx.Timeout = field(hash=False)
    max_retries: int
    headers: Mapping[str, str] = field(hash=False)
    fetch_limits: FetchLimits
    transport: TransportName

    def __init__(
        self,
        base_url: str | httpx.URL | None = None,
        *,
        api_key: str | None = None,
        model: str | None = None,
        timeout: TimeoutArg = defaults.TIMEOUT,
        max_retries: int = defaults.MAX_RETRIES,
        headers: Mapping[str, str] | None = None,
        fetch_limits: FetchLimits | None = None,
        transport: TransportName = defaults.TRANSPORT,
    ) -> None:
        url = _base_url(base_url)
        key = _api_key(api_key)
        if key is not None and httpx.URL(url).userinfo:
            # URL credentials are sent as Basic auth, in the one Authorization header the Bearer key
            # needs: one of them would silently never be sent.
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
        if fetch_limits is not None and not isinstance(fetch_limits, FetchLimits):
            fix = "e.g. FetchLimits(refuse_private=True)."
            raise InvalidInputError("fetch_limits", fetch_limits, "must be a FetchLimits", fix)
        if transport not in get_args(TransportName):
            fix = 'Use "auto" (urllib3 under Client where installed) or "httpx" (httpx\'s own transport).'
            raise InvalidInputError("transport", transport, "is not a transport name", fix)
        self.__setstate__(
            {
                "base_url": url,
                "api_key": key,
                "model": model,
                "timeout": _timeout(timeout),
                "max_retries": max_retries,
                "headers": dict(headers or {}),
                "fetch_limits": fetch_limits or FetchLimits(),
                "transport": transport,
            }
        )

    def __repr__(self) -> str:
        return (
            f"ClientSettings(base_url={self.display_url!r}, model={self.model!r}, "
            f"api_key={'set' if self.api_key else 'none'}, timeout={self.timeout!r}, "
            f"max_retries={self.max_retries}, headers={sorted(self.headers)!r}, "
            f"fetch_limits={self.fetch_limits!r}, transport={self.transport!r})"
        )

    # A frozen value holds its headers read-only; pickling carries them as a plain dict (the key too).
    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "headers": dict(self.headers)}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, MappingProxyType(value) if name == "headers" else value)

    @property
    def display_url(self) -> str:
        """``base_url`` without credentials (``http://user:KEY@host`` -> ``http://host``)."""
        return redact_url(self.base_url)

    @property
    def request_headers(self) -> dict[str, str]:
        """The headers every request carries: ``User-Agent``, ``headers``, and the key as a Bearer token
        (or ``base_url``'s ``user:password@`` credentials as Basic auth: requests go to
        :attr:`display_url`, so that no URL httpx or the SDK logs holds them)."""
        sent = {"User-Agent": f"vllm-tasks/{__version__}", **self.headers}
        if self.api_key is not None:
            sent["Authorization"] = f"Bearer {self.api_key}"
        else:
            url = httpx.URL(self.base_url)
            if url.userinfo:  # percent-decoded, as httpx's own BasicAuth from a URL
                token = base64.b64encode(f"{url.username}:{url.password}".encode()).decode()
                sent["Authorization"] = f"Basic {token}"
        return sent

    def replace(self, **changes: Any) -> ClientSettings:
        """A copy with some settings changed (checked like new ones).

        Args:
            **changes: new values by setting name (``base_url``, ``api_key``, ``model``, ``timeout``,
                ``max_retries``, ``headers``, ``fetch_limits``, ``transport``).

        Returns:
            ClientSettings: the new value (this one is unchanged).

        Raises:
            InvalidInputError: a name that is not a setting (naming it and the settings), or a bad value.

        Examples:
            >>> settings.replace(base_url="http://gpu2:8000").base_url
            'http://gpu2:8000'
        """
        names = [setting.name for setting in dataclasses.fields(self)]
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise InvalidInputError(
                "options",
                unknown,
                "are not client settings",
                f"Use some of: {', '.join(names)} (an http_client is given to the client, not its settings).",
            )
        return dataclasses.replace(self, **changes)


def _base_url(value: str | httpx.URL | None) -> str:
    if value is None:
        value = os.environ.get(defaults.BASE_URL_ENV) or defaults.BASE_URL
    if not isinstance(value, str | httpx.URL):
        raise InvalidInputError(
            "base_url", value, "must be a string", "Pass a URL such as 'http://localhost:8000'."
        )
    text = str(value).strip().rstrip("/")
    fix = "Pass the server's root URL, e.g. 'http://localhost:8000'."
    try:
        parts = urlsplit(text)
        _ = parts.port  # a port that is not a number in 0-65535 raises here
        httpx.URL(text)
    except (ValueError, httpx.InvalidURL) as error:  # httpx.InvalidURL is not a ValueError
        problem = f"is not a valid URL ({redact_text(str(error))})"
        raise InvalidInputError("base_url", redact_url(text), problem, fix) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError("base_url", redact_url(text), "is not an http(s) URL with a host", fix)
    if any(character.isspace() for character in parts.netloc):
        raise InvalidInputError("base_url", redact_url(text), "has a space in its host", fix)
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
