"""Removing credentials from URLs and text before they reach a message, a repr or a log line."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit


def redact_url(url: str) -> str:
    """``url`` without its credentials (``http://user:KEY@host:8000/x`` -> ``http://host:8000/x``).

    Examples:
        >>> redact_url("http://user:KEY@host:8000/v1")
        'http://host:8000/v1'
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # not parseable as a URL: remove anything that looks like userinfo
        return redact_text(url)
    if parts.username is not None or parts.password is not None:
        host = parts.hostname or ""
        if ":" in host:  # IPv6
            host = f"[{host}]"
        if port is not None:
            host = f"{host}:{port}"
        return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return url


# scheme://userinfo@ : the greedy run stops at the end of the authority, so a password holding an
# unescaped "@" is removed whole.
_USERINFO_RE = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#'\"<>]*@")


def redact_text(text: str) -> str:
    """``text`` with the credentials of every URL in it removed.

    Examples:
        >>> redact_text("GET http://user:KEY@host:8000/health failed")
        'GET http://host:8000/health failed'
    """
    return _USERINFO_RE.sub(r"\1", text) if "@" in text else text
