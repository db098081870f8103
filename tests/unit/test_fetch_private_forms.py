"""``FetchLimits(refuse_private=True)`` sees through IPv6 addresses that carry an IPv4 one: NAT64
(``64:ff9b::/96``; the local-use ``64:ff9b:1::/48`` refused whole), 6to4 (``2002::/16``), IPv4-mapped,
IPv4-translated, IPv4-compatible and Teredo (its obfuscated client) forms of 127.0.0.1, 10.x, 172.16.x,
192.168.x and 169.254.x are refused like the IPv4 address; the same forms of a public address pass."""

from __future__ import annotations

import ipaddress
import socket

import pytest

import vllm_tasks as vt
from vllm_tasks import fetching

PRIVATE_V4 = ["127.0.0.1", "10.1.2.3", "172.16.0.9", "192.168.1.1", "169.254.169.254", "0.0.0.0"]
PUBLIC_V4 = ["8.8.8.8", "93.184.216.34"]


def teredo(client: str, server: str = "65.54.227.120") -> str:
    """A Teredo address (``2001:0::/32``) for ``client``, obfuscated (bits inverted) as Teredo writes it."""
    obfuscated = int(ipaddress.IPv4Address(client)) ^ 0xFFFFFFFF
    value = (0x20010000 << 96) | (int(ipaddress.IPv4Address(server)) << 64) | (0x8000 << 48) | obfuscated
    return str(ipaddress.IPv6Address(value))


def spellings(v4: str) -> dict[str, str]:
    """Each IPv6 form that carries ``v4``, by name."""
    high, low = divmod(int(ipaddress.IPv4Address(v4)), 1 << 16)
    return {
        "nat64": f"64:ff9b::{v4}",
        "nat64-hex": f"64:ff9b::{high:x}:{low:x}",
        "6to4": f"2002:{high:x}:{low:x}::",
        "6to4-host": f"2002:{high:x}:{low:x}:1::5",
        "mapped": f"::ffff:{v4}",
        "translated": f"::ffff:0:{v4}",
        "compatible": f"::{v4}",
        "teredo": teredo(v4),
    }


def infos(address: str) -> list[tuple[object, ...]]:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    return [(family, socket.SOCK_STREAM, 6, "", (address, 80))]


@pytest.mark.parametrize(
    "address",
    [
        pytest.param(form, id=f"{v4}-{name}")
        for v4 in PRIVATE_V4
        for name, form in spellings(v4).items()
        if not (v4 == "0.0.0.0" and name == "compatible")  # "::", unspecified, refused as it is
    ]
    + [pytest.param("64:ff9b:1::a00:1", id="local-use-nat64"), pytest.param("::", id="unspecified")],
)
def test_an_ipv6_form_of_a_private_address_is_refused(address: str) -> None:
    with pytest.raises(vt.InputFetchError, match="non-public address"):
        fetching.public_addresses("http://h/a.png", "h", infos(address))


@pytest.mark.parametrize(
    "address",
    [
        pytest.param(form, id=f"{v4}-{name}")
        for v4 in PUBLIC_V4
        for name, form in spellings(v4).items()
        if name not in ("teredo", "compatible", "translated")  # not global, whatever they carry
    ],
)
def test_an_ipv6_form_of_a_public_address_passes(address: str) -> None:
    assert fetching.public_addresses("http://h/a.png", "h", infos(address))


@pytest.mark.parametrize(
    ("address", "carried"),
    [
        ("64:ff9b::7f00:1", ["127.0.0.1"]),
        ("2002:7f00:1::", ["127.0.0.1"]),
        ("::ffff:0:a00:1", ["10.0.0.1"]),
        ("::c0a8:101", ["192.168.1.1"]),
        (teredo("192.168.1.1"), ["65.54.227.120", "192.168.1.1"]),
        ("2606:4700::1111", []),
        ("::1", []),
    ],
)
def test_embedded_ipv4(address: str, carried: list[str]) -> None:
    found = fetching.embedded_ipv4(ipaddress.IPv6Address(address))
    assert [str(v4) for v4 in found] == carried
