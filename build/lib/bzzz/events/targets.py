"""Where a webhook may point: every spelling of its host normalised, then classified.

A callback URL can name one address in many ways (``2130706433``, ``0x7f000001``,
``0177.0.0.1``, ``127.1``, ``[::ffff:7f00:1]``, ``LOCALHOST.``, full-width digits,
percent-encoding). The check runs on one normal form: the IPv4 or IPv6 address the host stands
for (numeric forms read as ``inet_aton`` reads them, addresses embedded in IPv6 unwrapped), or
a lower-case ASCII name without trailing dots. Names are checked again on every address they
resolve to when a delivery is made, and the delivery connects to the address it checked, so a
name that resolves elsewhere between the check and the connection (DNS rebinding) reaches
nothing it was not allowed to.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import unquote, urlsplit

import idna

from bzzz.errors import InvalidParameters

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# host, port -> the addresses it resolves to (textual); injectable for tests.
Resolver = Callable[[str, int], Awaitable[list[str]]]


class Reach(StrEnum):
    """What a target is: anyone's, the inside of a network, or never to be called."""

    PUBLIC = "public"
    PRIVATE = "private"  # loopback, RFC 1918, unique-local, shared (CGNAT) and the like
    FORBIDDEN = "forbidden"  # unspecified, link-local, metadata, multicast, reserved


_FORBIDDEN_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "169.254.0.0/16",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::/128",
        "fe80::/10",
        "ff00::/8",
    )
)
# Cloud metadata and platform endpoints outside the link-local range.
_METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("fd00:ec2::254", "100.100.100.200", "168.63.129.16")
)
_FORBIDDEN_NAMES = ("metadata", "instance-data")
_PRIVATE_NAMES = ("localhost", "localhost.localdomain")
_PRIVATE_SUFFIXES = (".localhost", ".local", ".internal", ".localdomain", ".home.arpa")
_NAME = re.compile(r"^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_-]{1,63})*$")
_NUMBER = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")
# Dots that IDNA (UTS 46) reads as label separators.
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})


@dataclass(frozen=True, slots=True)
class Target:
    """A callback URL in normal form: its host is an address or a lower-case ASCII name."""

    scheme: str
    host: str
    port: int
    path: str  # path and query, as given
    address: IPAddress | None

    @property
    def authority(self) -> str:
        """The Host header: the host as normalised, and the port unless it is the default."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def _refuse(why: str) -> InvalidParameters:
    return InvalidParameters(f"callback_webhook {why}", details={"field": "callback_webhook"})


def parse_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """``host`` read as ``inet_aton`` reads it (decimal, 0x hex, 0-octal, 1 to 4 parts).

    None when it is not numeric; InvalidParameters when it looks numeric but is no address
    (resolvers disagree on such hosts, so none is let through).
    """
    parts = host.split(".")
    if not _NUMBER.match(parts[-1]):
        return None
    # A numeric last label makes the host an IPv4 address (as browsers read it) or nothing.
    if len(parts) > 4 or not all(_NUMBER.match(p) for p in parts):
        raise _refuse(f"host {host!r} is not a valid IPv4 address")
    values = []
    for part in parts:
        try:
            if part.startswith("0x"):
                values.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part.startswith("0"):
                values.append(int(part, 8))
            else:
                values.append(int(part, 10))
        except ValueError:
            raise _refuse(f"host {host!r} is not a valid IPv4 address") from None
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(values)):
        raise _refuse(f"host {host!r} is not a valid IPv4 address")
    number = last
    for index, value in enumerate(head):
        number += value << (8 * (3 - index))
    return ipaddress.IPv4Address(number)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, compatible, NAT64, 6to4, Teredo)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    packed = int(address)
    if packed >> 32 == 0 and packed > 1:  # ::a.b.c.d (IPv4-compatible, deprecated)
        return ipaddress.IPv4Address(packed & 0xFFFFFFFF)
    if packed >> 32 == 0x0064FF9B << 64:  # 64:ff9b::/96 (NAT64)
        return ipaddress.IPv4Address(packed & 0xFFFFFFFF)
    return None


def address_reach(address: IPAddress) -> Reach:
    """Public, private or forbidden; an IPv6 address carrying an IPv4 one is the stricter."""
    if address in _METADATA_ADDRESSES or any(address in n for n in _FORBIDDEN_NETWORKS):
        return Reach.FORBIDDEN
    if address.is_multicast or (address.version == 4 and address.is_reserved):
        return Reach.FORBIDDEN
    reach = Reach.PUBLIC if address.is_global else Reach.PRIVATE
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded_ipv4(address)
        if inner is not None:
            inner_reach = address_reach(inner)
            if inner_reach is not Reach.PUBLIC:
                return inner_reach
    return reach


def name_reach(name: str) -> Reach:
    """What a host name says by itself (its addresses are checked when it is resolved)."""
    first = name.split(".", 1)[0]
    if first in _FORBIDDEN_NAMES:
        return Reach.FORBIDDEN
    if name in _PRIVATE_NAMES or name.endswith(_PRIVATE_SUFFIXES):
        return Reach.PRIVATE
    return Reach.PUBLIC


def normalise_host(raw: str) -> tuple[str, IPAddress | None]:
    """(normal host, its address if it is one): the one spelling every check runs on."""
    host = unquote(raw)
    if host.startswith("[") and host.endswith("]"):
        return _ipv6_literal(host[1:-1])
    host = unicodedata.normalize("NFKC", host).translate(_DOTS).casefold()
    host = unicodedata.normalize("NFKC", host).rstrip(".")
    if not host:
        raise _refuse("has no host")
    if not host.isascii():
        try:
            host = idna.encode(host, uts46=True).decode("ascii")
        except idna.IDNAError:
            raise _refuse(f"host {raw!r} is not a valid host name") from None
    if ":" in host:
        return _ipv6_literal(host)
    ipv4 = parse_ipv4(host)
    if ipv4 is not None:
        return str(ipv4), ipv4
    if not _NAME.match(host):
        raise _refuse(f"host {raw!r} is not a valid host name")
    return host, None


def _ipv6_literal(text: str) -> tuple[str, IPAddress]:
    if "%" in text:
        raise _refuse("must not name an IPv6 zone")
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        raise _refuse(f"host [{text}] is not a valid IPv6 address") from None
    return str(address), address


def parse_target(url: str) -> Target:
    """A callback URL in normal form; InvalidParameters when it is malformed."""
    # urlsplit silently drops CR/LF/TAB; a stored URL must be exactly what was checked.
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in url) or "\\" in url:
        raise _refuse("must not contain spaces, backslashes or control characters")
    try:
        parts = urlsplit(url)
    except ValueError:  # a bracketed host that is no IPv6 address
        raise _refuse("has a malformed host") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise _refuse("must be an absolute http:// or https:// URL")
    if "@" in parts.netloc:
        raise _refuse("must not embed credentials")
    netloc = parts.netloc
    raw_host, port_text = netloc, ""
    if netloc.startswith("["):
        raw_host, _, rest = netloc.partition("]")
        raw_host += "]"
        if rest and not rest.startswith(":"):
            raise _refuse("has a malformed host")
        port_text = rest[1:]
    elif ":" in netloc:
        raw_host, _, port_text = netloc.rpartition(":")
    default = 443 if parts.scheme == "https" else 80
    if port_text and (not port_text.isdigit() or not 0 < int(port_text) < 65536):
        raise _refuse("has an invalid port")
    host, address = normalise_host(raw_host)
    path = parts.path or "/"
    if parts.query:
        path += f"?{parts.query}"
    return Target(parts.scheme, host, int(port_text) if port_text else default, path, address)


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the system resolver gives ``host`` (TCP)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class TargetPolicy:
    """Which targets this node may call: never forbidden ones; private ones when allowed."""

    def __init__(self, *, allow_private: bool, loopback_only: bool) -> None:
        # A node that serves loopback alone is someone's own machine: its receivers are local.
        self.private_allowed = allow_private or loopback_only

    def refusal(self, reach: Reach, what: str) -> str | None:
        """Why ``what`` of this reach may not be called; None when it may."""
        if reach is Reach.FORBIDDEN:
            return f"{what} is link-local, metadata, unspecified or reserved: never allowed"
        if reach is Reach.PRIVATE and not self.private_allowed:
            return (
                f"{what} is loopback or private; allowed only on a node that serves loopback "
                "alone, or with webhooks.allow_private"
            )
        return None

    def check_url(self, url: str) -> Target:
        """The target of a callback URL as given at subscribe; InvalidParameters if refused."""
        target = parse_target(url)
        if target.address is not None:
            reach = address_reach(target.address)
        else:
            reach = name_reach(target.host)
        why = self.refusal(reach, f"host {target.host}")
        if why is not None:
            raise _refuse(f"refused: {why}")
        return target

    async def pin(self, target: Target, resolver: Resolver) -> tuple[IPAddress, str | None]:
        """(the address to connect to, None) or (…, why not): every resolved one is checked.

        Raises OSError when the name does not resolve (a delivery failure, retried).
        """
        if target.address is not None:
            addresses: list[IPAddress] = [target.address]
        else:
            resolved = await resolver(target.host, target.port)
            addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in resolved]
            if not addresses:
                raise OSError(f"{target.host} resolved to no address")
        for address in addresses:
            why = self.refusal(address_reach(address), f"callback address {address}")
            if why is not None:
                return address, why
        return addresses[0], None
