"""Webhook targets: every spelling of an address normalised, then classified and checked."""

from __future__ import annotations

import ipaddress

import pytest

from bzzz.access.service import serves_loopback_only
from bzzz.errors import InvalidParameters
from bzzz.events.targets import (
    Reach,
    TargetPolicy,
    address_reach,
    parse_target,
)

# Spellings of loopback (and of other private hosts) that a naive check lets through.
LOOPBACK_SPELLINGS = {
    "plain": "http://127.0.0.1/hook",
    "decimal": "http://2130706433/hook",
    "hex": "http://0x7f000001/hook",
    "hex-dotted": "http://0x7f.0x0.0x0.0x1/hook",
    "octal": "http://0177.0.0.1/hook",
    "octal-long": "http://017700000001/hook",
    "short": "http://127.1/hook",
    "short-three": "http://127.0.1/hook",
    "other-loopback": "http://127.255.255.254:9000/hook",
    "mapped-dotted": "http://[::ffff:127.0.0.1]/hook",
    "mapped-hex": "http://[::ffff:7f00:1]/hook",
    "ipv6-loopback": "http://[::1]:8080/hook",
    "ipv6-long": "http://[0:0:0:0:0:0:0:1]/hook",
    "compatible": "http://[::127.0.0.1]/hook",
    "nat64": "http://[64:ff9b::7f00:1]/hook",
    "6to4": "http://[2002:7f00:1::]/hook",
    "localhost": "http://localhost:8080/hook",
    "localhost-dot": "http://localhost./hook",
    "localhost-dots": "http://localhost../hook",
    "localhost-upper": "http://LOCALHOST/hook",
    "localhost-sub": "http://api.localhost/hook",
    "localhost-fullwidth": "http://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/hook",
    "digits-fullwidth": "http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/hook",
    "ideographic-dots": "http://127\u30020\u30020\u30021/hook",
    "percent": "http://%31%32%37.0.0.1/hook",
    "percent-localhost": "http://%6c%6f%63%61%6c%68%6f%73%74/hook",
    "trailing-dot-ip": "http://127.0.0.1./hook",
    "private-10": "http://10.0.0.8/hook",
    "private-172": "http://172.16.3.4/hook",
    "private-192": "https://192.168.1.1/hook",
    "cgnat": "http://100.64.0.1/hook",
    "ula": "http://[fd12:3456::1]/hook",
    "mapped-private": "http://[::ffff:10.0.0.1]/hook",
    "dot-local": "http://printer.local/hook",
    "dot-internal": "http://db.corp.internal/hook",
}

FORBIDDEN_SPELLINGS = {
    "metadata": "http://169.254.169.254/latest/meta-data",
    "metadata-decimal": "http://2852039166/latest",
    "metadata-hex": "http://0xa9fea9fe/latest",
    "link-local": "http://169.254.1.1/",
    "link-local-v6": "http://[fe80::1]/",
    "mapped-link-local": "http://[::ffff:169.254.169.254]/",
    "mapped-link-local-hex": "http://[::ffff:a9fe:a9fe]/",
    "unspecified": "http://0.0.0.0:8080/",
    "zero": "http://0/",
    "unspecified-v6": "http://[::]/",
    "this-network": "http://0.1.2.3/",
    "gce-name": "http://metadata.google.internal/computeMetadata/v1/",
    "gce-name-upper": "http://METADATA.GOOGLE.INTERNAL./computeMetadata/v1/",
    "metadata-bare": "http://metadata/",
    "aws-v6": "http://[fd00:ec2::254]/",
    "alibaba": "http://100.100.100.200/",
    "multicast": "http://224.0.0.1/",
    "broadcast": "http://255.255.255.255/",
}

MALFORMED = {
    "userinfo": "http://a@127.0.0.1/",
    "userinfo-password": "http://user:pw@hooks.example.com/",
    "backslash": "http://127.0.0.1\\@example.com/",
    "bad-octal": "http://0189.0.0.1/",
    "too-many-parts": "http://1.2.3.4.5/",
    "overflow": "http://4294967296/",
    "overflow-part": "http://1.2.3.256/",
    "numeric-tld": "http://example.0x7f/",
    "empty-label": "http://127..1/",
    "zone": "http://[fe80::1%25eth0]/",
    "bad-ipv6": "http://[::ffff:zz]/",
    "bad-port": "http://example.com:99999/",
    "no-host": "http:///hook",
    "space": "http://exa mple.com/",
    "scheme": "ftp://example.com/",
}

PUBLIC = ["https://hooks.example.com/bzzz", "http://93.184.216.34/", "https://[2606:4700::1]/x"]

shared = TargetPolicy(allow_private=False, loopback_only=False)
loopback_node = TargetPolicy(allow_private=False, loopback_only=True)
allowing = TargetPolicy(allow_private=True, loopback_only=False)


@pytest.mark.parametrize("url", LOOPBACK_SPELLINGS.values(), ids=LOOPBACK_SPELLINGS.keys())
def test_every_spelling_of_a_private_host_is_refused_on_a_shared_node(url: str) -> None:
    with pytest.raises(InvalidParameters) as caught:
        shared.check_url(url)

    assert "loopback or private" in caught.value.message
    assert caught.value.details == {"field": "callback_webhook"}


@pytest.mark.parametrize("url", LOOPBACK_SPELLINGS.values(), ids=LOOPBACK_SPELLINGS.keys())
def test_private_hosts_are_allowed_on_a_loopback_node_or_with_allow_private(url: str) -> None:
    assert loopback_node.check_url(url).host
    assert allowing.check_url(url).host


@pytest.mark.parametrize("url", FORBIDDEN_SPELLINGS.values(), ids=FORBIDDEN_SPELLINGS.keys())
def test_link_local_metadata_and_unspecified_targets_are_never_allowed(url: str) -> None:
    for policy in (shared, loopback_node, allowing):
        with pytest.raises(InvalidParameters) as caught:
            policy.check_url(url)
        assert "never allowed" in caught.value.message


@pytest.mark.parametrize("url", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_and_ambiguous_hosts_are_refused(url: str) -> None:
    with pytest.raises(InvalidParameters) as caught:
        allowing.check_url(url)

    assert caught.value.message.startswith("callback_webhook")


@pytest.mark.parametrize("url", PUBLIC)
def test_public_targets_are_allowed_everywhere(url: str) -> None:
    assert shared.check_url(url).host


@pytest.mark.parametrize(
    ("url", "host", "address"),
    [
        ("http://2130706433/", "127.0.0.1", "127.0.0.1"),
        ("http://0x7f000001/", "127.0.0.1", "127.0.0.1"),
        ("http://0177.0.0.1/", "127.0.0.1", "127.0.0.1"),
        ("http://127.1/", "127.0.0.1", "127.0.0.1"),
        ("http://10.1/", "10.0.0.1", "10.0.0.1"),
        ("http://[::ffff:7f00:1]/", "::ffff:7f00:1", "::ffff:7f00:1"),
        ("http://LOCALHOST./", "localhost", None),
        ("http://B\u00fccher.Example/", "xn--bcher-kva.example", None),
    ],
)
def test_hosts_are_normalised_to_one_spelling(url: str, host: str, address: str | None) -> None:
    target = parse_target(url)

    assert target.host == host
    assert target.address == (ipaddress.ip_address(address) if address else None)


def test_a_target_keeps_its_port_path_and_query_and_names_its_host_header() -> None:
    target = parse_target("https://Hooks.Example.com:8443/a/b?x=1")

    assert (target.scheme, target.port, target.path) == ("https", 8443, "/a/b?x=1")
    assert target.authority == "hooks.example.com:8443"
    assert parse_target("http://[::1]/").authority == "[::1]"
    assert parse_target("http://example.com").path == "/"


@pytest.mark.parametrize(
    ("address", "reach"),
    [
        ("8.8.8.8", Reach.PUBLIC),
        ("127.0.0.1", Reach.PRIVATE),
        ("192.0.2.1", Reach.PRIVATE),
        ("169.254.169.254", Reach.FORBIDDEN),
        ("::ffff:169.254.0.1", Reach.FORBIDDEN),
        ("2001:4860:4860::8888", Reach.PUBLIC),
        ("::ffff:8.8.8.8", Reach.PUBLIC),
    ],
)
def test_addresses_are_classified_with_what_they_embed(address: str, reach: Reach) -> None:
    assert address_reach(ipaddress.ip_address(address)) is reach


@pytest.mark.parametrize(
    ("host", "stdio", "loopback"),
    [
        ("127.0.0.1", False, True),
        ("::1", False, True),
        ("[::1]", False, True),
        ("localhost", False, True),
        ("0.0.0.0", False, False),
        ("::", False, False),
        ("10.0.0.5", False, False),
        ("bzzz.example.com", False, False),
        ("0.0.0.0", True, True),
    ],
)
def test_a_node_serves_loopback_alone_on_a_loopback_bind_or_stdio(
    host: str, stdio: bool, loopback: bool
) -> None:
    assert serves_loopback_only(host, stdio=stdio) is loopback


async def test_a_name_is_checked_on_every_address_it_resolves_to() -> None:
    target = parse_target("https://hooks.example.com/x")

    async def rebinding(host: str, port: int) -> list[str]:
        assert (host, port) == ("hooks.example.com", 443)
        return ["93.184.216.34", "127.0.0.1"]

    async def public(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "2606:2800:220:1::1"]

    address, why = await shared.pin(target, rebinding)
    assert str(address) == "127.0.0.1"
    assert why is not None and "loopback or private" in why

    address, why = await shared.pin(target, public)
    assert (str(address), why) == ("93.184.216.34", None)
