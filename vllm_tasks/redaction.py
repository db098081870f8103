"""Removing credentials from URLs and text before they reach a message, a repr or a log line.

A URL's secrets are its ``user:password@`` and its query's values (a proxy's ``?key=``, a signed URL's
signature): both are removed from what is shown; the request itself goes to the real URL
(:func:`route_url`).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

HIDDEN = "***"
"""What a query value is replaced by."""


def redact_url(url: str, *, query: bool = True) -> str:
    """``url`` without its credentials (``http://user:KEY@host:8000/x`` -> ``http://host:8000/x``) and,
    unless ``query`` is False, with each query value hidden (``?key=SECRET`` -> ``?key=***``).

    Args:
        url: the URL.
        query: hide the query's values too (False where the URL must still work, as an audio
            player's ``src``).

    Examples:
        >>> redact_url("http://user:KEY@host:8000/v1")
        'http://host:8000/v1'
        >>> redact_url("https://proxy/v1?key=SECRET&region=eu")
        'https://proxy/v1?key=***&region=***'
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # not parseable as a URL: remove anything that looks like a secret
        return redact_text(url)
    netloc = parts.netloc
    if parts.username is not None or parts.password is not None:
        netloc = parts.hostname or ""
        if ":" in netloc:  # IPv6
            netloc = f"[{netloc}]"
        if port is not None:
            netloc = f"{netloc}:{port}"
    shown_query = _hidden_query(parts.query) if query else parts.query
    if netloc == parts.netloc and shown_query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, shown_query, parts.fragment))


def route_url(base_url: str, path: str) -> str:
    """The URL a request to the server's route ``path`` goes to: ``base_url``'s path, then ``path``, then
    ``base_url``'s query; without ``user:password@`` (sent as a header: httpx logs the URL).

    Examples:
        >>> route_url("https://user:pw@proxy/vllm?key=K", "/v1/embeddings")
        'https://proxy/vllm/v1/embeddings?key=K'
    """
    parts = urlsplit(redact_url(base_url, query=False))
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + path, parts.query, ""))


# scheme://userinfo@ : the greedy run stops at the end of the authority, so a password holding an
# unescaped "@" is removed whole.
_USERINFO_RE = re.compile(r"\b([A-Za-z][A-Za-z0-9+.\-]*://)[^\s/?#'\"<>]*@")
# scheme://authority/path? then the query, up to a space, a quote, a bracket or the fragment.
_QUERY_RE = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s?#'\"<>]*\?)([^\s#'\"<>]*)")


def redact_text(text: str) -> str:
    """``text`` with the credentials and query values of every URL in it removed.

    Examples:
        >>> redact_text("GET http://user:KEY@host:8000/health?key=KEY failed")
        'GET http://host:8000/health?key=*** failed'
    """
    if "@" in text:
        text = _USERINFO_RE.sub(r"\1", text)
    if "?" in text:
        text = _QUERY_RE.sub(lambda match: match[1] + _hidden_query(match[2]), text)
    return text


def _hidden_query(query: str) -> str:
    """``a=1&b&c=`` -> ``a=***&***&c=``: each value (or bare item) hidden, the names kept."""
    if not query:
        return query
    hidden = []
    for item in query.split("&"):
        name, equals, value = item.partition("=")
        hidden.append(f"{name}={HIDDEN}" if equals and value else item if equals or not name else HIDDEN)
    return "&".join(hidden)
