"""Pure parts of downloading user-given URLs (images, audio) within ``FetchLimits``: the request sent to
another host, the size cap, private-address checks, redirect hops, the deadline's error.

The download itself, written once, is ``vllm_tasks/_async/fetching.py`` (generated into ``_sync/``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from .errors import InputFetchError
from .version import __version__


def third_party_request(url: str, timeout: float, address: str | None = None) -> httpx.Request:
    """A GET of ``url`` built without the client: none of its headers, cookies or auth go to a
    third-party host. ``timeout`` bounds each phase (connect, each read).

    ``address``: an IP address of the host, already checked (``FetchLimits.refuse_private``): the request
    goes to it, not to whatever a second lookup of the name would answer (DNS rebinding), with the URL's
    ``Host`` header; over https the server's certificate is still checked against the host's name (httpcore
    sends it as the TLS server name, ``sni_hostname``, which ``ssl`` verifies the certificate against).

    Raises:
        InputFetchError: ``url`` is not a valid URL.
    """
    try:
        target = httpx.URL(url)
        headers = {"User-Agent": f"vllm-tasks/{__version__}"}
        extensions: dict[str, Any] = {"timeout": httpx.Timeout(timeout).as_dict()}
        if address is not None:
            headers["Host"] = target.netloc.decode("ascii")  # host[:port], as httpx sends it
            extensions["sni_hostname"] = target.raw_host.decode("ascii")
            target = target.copy_with(host=address)
        return httpx.Request("GET", target, headers=headers, extensions=extensions)
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


REOPENS = 8
"""How many times a GET to a checked address over https is sent, each on a pooled connection checked for
another host name (``checked_for_another_name``), before it is refused."""


def checked_for_another_name(response: httpx.Response) -> bool:
    """Whether a GET sent to a checked address (``third_party_request``'s ``address``) over https came on a
    pooled connection whose certificate was checked for another host name at that address: the pool keys
    connections by address, not by name, so that name's certificate was never checked.
    """
    name = response.request.extensions.get("sni_hostname")
    stream = response.extensions.get("network_stream")
    tls = stream.get_extra_info("ssl_object") if name is not None and stream is not None else None
    return tls is not None and tls.server_hostname != name


def host_and_port(url: str, target: str) -> tuple[str, int]:
    """The host and port ``target`` (``url`` or a hop it redirected to) connects to."""
    try:
        parsed = httpx.URL(target)
    except httpx.InvalidURL as error:
        raise InputFetchError("url", url, f"not a valid URL ({error})") from None
    if not parsed.host:
        raise InputFetchError("url", url, f"{target} has no host")
    return parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80)


def public_addresses(url: str, host: str, infos: Sequence[tuple[Any, ...]]) -> list[str]:
    """The addresses ``host`` resolved to (``infos``, from ``getaddrinfo``), in the resolver's order, to
    connect to; a host with any non-public address is refused (``FetchLimits.refuse_private``). An IPv6
    address that carries an IPv4 one (:func:`embedded_ipv4`) is refused when that one is not public.

    Raises:
        InputFetchError: an address is private, loopback, link-local or otherwise not public, or there
            is none.
    """
    addresses: dict[str, None] = {}
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        carried = embedded_ipv4(address) if isinstance(address, ipaddress.IPv6Address) else []
        for checked in (address, *carried):
            if not _is_public(checked):
                shown = address if checked is address else f"{address} (carrying {checked})"
                raise InputFetchError(
                    "url",
                    url,
                    f"the host {host} resolves to {shown}, a private, loopback or otherwise non-public "
                    "address, refused by FetchLimits(refuse_private=True)",
                )
        addresses[str(address)] = None
    if not addresses:
        raise InputFetchError("url", url, f"the host {host} resolves to no address")
    return list(addresses)


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")
"""RFC 8215's local-use NAT64 prefix: where it carries an IPv4 address depends on the network's own prefix
length, so every address in it is refused as not public."""
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")


def _is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    local_nat64 = isinstance(address, ipaddress.IPv6Address) and address in _LOCAL_NAT64
    return address.is_global and not address.is_multicast and not local_nat64


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries, which a gateway or a host's stack may connect to:
    IPv4-mapped (``::ffff:a.b.c.d``), IPv4-translated (``::ffff:0:a.b.c.d``), IPv4-compatible
    (``::a.b.c.d``), NAT64 (``64:ff9b::a.b.c.d``), 6to4 (``2002:AABB:CCDD::``) and Teredo (``2001::/32``:
    its server and its de-obfuscated client).

    Examples:
        >>> embedded_ipv4(ipaddress.IPv6Address("64:ff9b::7f00:1"))
        [IPv4Address('127.0.0.1')]
        >>> embedded_ipv4(ipaddress.IPv6Address("2002:c0a8:101::1"))
        [IPv4Address('192.168.1.1')]
    """
    low = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address in _NAT64 or address in _IPV4_TRANSLATED:
        return [low]
    if address in _IPV4_COMPATIBLE and int(address) > 1:  # not :: nor ::1, which are checked as they are
        return [low]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    return []


MEDIA_PARTS = ("image_url", "audio_url", "video_url")
"""The content parts whose URL the server fetches."""


def remote_media(value: Any, field: str) -> dict[str, tuple[str, str]]:
    """Every ``http(s)`` URL of a content part (:data:`MEDIA_PARTS`) in ``value`` (lists, tuples and
    mappings, nested): URL -> (where it first is, for messages; its part type).

    Examples:
        >>> remote_media([{"content": [{"type": "image_url", "image_url": {"url": "https://a/b.png"}}]}], "x")
        {'https://a/b.png': ('x[0].content[0]', 'image_url')}
    """
    found: dict[str, tuple[str, str]] = {}
    _find_media(value, field, found)
    return found


def with_media_urls(value: Any, urls: Mapping[str, str]) -> Any:
    """``value`` rebuilt (it is not changed) with each content part's URL that is a key of ``urls`` replaced
    by its value.

    Examples:
        >>> with_media_urls([{"image_url": {"url": "https://a/b.png"}}], {"https://a/b.png": "data:..."})
        [{'image_url': {'url': 'data:...'}}]
    """
    if isinstance(value, list | tuple):
        return type(value)(with_media_urls(item, urls) for item in value)
    if not isinstance(value, Mapping):
        return value
    rebuilt = {key: with_media_urls(item, urls) for key, item in value.items()}
    for kind in MEDIA_PARTS:
        url = _part_url(value, kind)
        if url is not None and url.strip() in urls:
            inner = value[kind]
            sent = urls[url.strip()]
            rebuilt[kind] = {**inner, "url": sent} if isinstance(inner, Mapping) else sent
    return rebuilt


def _find_media(value: Any, field: str, found: dict[str, tuple[str, str]]) -> None:
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if isinstance(item, Mapping | list | tuple):
                _find_media(item, f"{field}[{index}]", found)
        return
    if not isinstance(value, Mapping):
        return
    for kind in MEDIA_PARTS:
        url = _part_url(value, kind)
        if url is not None and url.strip().lower().startswith(("http://", "https://")):
            found.setdefault(url.strip(), (field, kind))
    for key, item in value.items():
        if isinstance(item, Mapping | list | tuple):
            _find_media(item, f"{field}.{key}", found)


def _part_url(part: Mapping[Any, Any], kind: str) -> str | None:
    """The URL of a ``{"type": kind, kind: {"url": ...}}`` part (or ``{kind: "..."}``), else ``None``."""
    if kind not in part or part.get("type", kind) != kind:
        return None
    inner = part[kind]
    url = inner.get("url") if isinstance(inner, Mapping) else inner
    return url if isinstance(url, str) else None


def unresolvable(url: str, host: str, error: OSError) -> InputFetchError:
    """The error for a host that does not resolve (checked only with ``refuse_private``)."""
    return InputFetchError("url", url, f"the host {host} cannot be resolved ({error})")


def next_hop(url: str, target: str, response: httpx.Response, hops: int, limit: int) -> str:
    """The target of ``target``'s redirect, checked (http(s) only, at most ``limit`` of them).

    A relative ``Location`` is joined to ``target`` (the URL asked for, with its host name), not to the
    response's URL (the address connected to, with ``refuse_private``).
    """
    if hops >= limit:
        raise InputFetchError("url", url, f"more than {limit} redirects")
    location = httpx.URL(target).join(response.headers["location"])
    if location.scheme not in ("http", "https"):
        raise InputFetchError("url", url, f"redirected to a {location.scheme}: URL, not http(s)")
    return str(location)


def past_deadline(url: str, seconds: float) -> InputFetchError:
    """The error for a download that passed ``FetchLimits.deadline``."""
    return InputFetchError("url", url, f"the download took over the {seconds:g} s deadline (FetchLimits)")


def undecodable(url: str, error: httpx.DecodingError) -> InputFetchError:
    """The error for a body whose content encoding (gzip, ...) does not decode."""
    return InputFetchError("url", url, f"the body does not decode ({error})")
