"""Pure parts of downloading user-given URLs (images, audio) within ``FetchLimits``: the request sent to
another host, the size cap, private-address checks, redirect hops, the deadline's error.

The download itself, written once, is ``vllm_tasks/_async/fetching.py`` (generated into ``_sync/``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

import httpx

from .errors import InputFetchError
from .version import __version__


def third_party_request(url: str, timeout: float) -> httpx.Request:
    """A GET of ``url`` built without the client: none of its headers, cookies or auth go to a
    third-party host. ``timeout`` bounds each phase (connect, each read).

    Raises:
        InputFetchError: ``url`` is not a valid URL.
    """
    try:
        return httpx.Request(
            "GET",
            url,
            headers={"User-Agent": f"vllm-tasks/{__version__}"},
            extensions={"timeout": httpx.Timeout(timeout).as_dict()},
        )
    except httpx.InvalidURL as error:
        raise InputFetchError("url", url, f"not a valid URL ({error})") from None


class CappedBody:
    """A fetched body, collected chunk by chunk, refused as soon as it passes ``max_bytes``."""

    def __init__(self, url: str, max_bytes: int, response: httpx.Response) -> None:
        self.url = url
        self.max_bytes = max_bytes
        self.response_head = response
        self.chunks: list[bytes] = []
        self.size = 0
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise self._too_large(f"it declares {int(declared)} bytes")

    def _too_large(self, detail: str) -> InputFetchError:
        return InputFetchError(
            "url",
            self.url,
            f"the body is over the {self.max_bytes}-byte cap of FetchLimits.max_bytes ({detail})",
        )

    def add(self, chunk: bytes) -> None:
        """Keep ``chunk``, or raise ``InputFetchError`` if it takes the body over the cap."""
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise self._too_large(f"{self.size} bytes read so far")
        self.chunks.append(chunk)

    def response(self) -> httpx.Response:
        """The response with its (decoded) body in memory."""
        head = self.response_head
        framing = {"content-encoding", "content-length", "transfer-encoding"}
        headers = [(k, v) for k, v in head.headers.multi_items() if k.lower() not in framing]
        return httpx.Response(
            head.status_code, headers=headers, content=b"".join(self.chunks), request=head.request
        )


def host_and_port(url: str, target: str) -> tuple[str, int]:
    """The host and port ``target`` (``url`` or a hop it redirected to) connects to."""
    try:
        parsed = httpx.URL(target)
    except httpx.InvalidURL as error:
        raise InputFetchError("url", url, f"not a valid URL ({error})") from None
    if not parsed.host:
        raise InputFetchError("url", url, f"{target} has no host")
    return parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80)


def refuse_private(url: str, host: str, infos: Sequence[tuple[Any, ...]]) -> None:
    """Refuse a host that resolves to any non-public address (FetchLimits.refuse_private)."""
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not address.is_global or address.is_multicast:
            raise InputFetchError(
                "url",
                url,
                f"the host {host} resolves to {address}, a private, loopback or otherwise non-public "
                "address, refused by FetchLimits(refuse_private=True)",
            )


def unresolvable(url: str, host: str, error: OSError) -> InputFetchError:
    """The error for a host that does not resolve (checked only with ``refuse_private``)."""
    return InputFetchError("url", url, f"the host {host} cannot be resolved ({error})")


def next_hop(url: str, response: httpx.Response, hops: int, limit: int) -> str:
    """The target of a redirect, checked (http(s) only, at most ``limit`` of them)."""
    if hops >= limit:
        raise InputFetchError("url", url, f"more than {limit} redirects")
    target = response.url.join(response.headers["location"])
    if target.scheme not in ("http", "https"):
        raise InputFetchError("url", url, f"redirected to a {target.scheme}: URL, not http(s)")
    return str(target)


def past_deadline(url: str, seconds: float) -> InputFetchError:
    """The error for a download that passed ``FetchLimits.deadline``."""
    return InputFetchError("url", url, f"the download took over the {seconds:g} s deadline (FetchLimits)")


def undecodable(url: str, error: httpx.DecodingError) -> InputFetchError:
    """The error for a body whose content encoding (gzip, ...) does not decode."""
    return InputFetchError("url", url, f"the body does not decode ({error})")
