"""Fetching a remote card: well-formed, signed right, and only where the SSRF rules allow."""

from __future__ import annotations

import pytest

from bzzz.a2a.cards import fetch_card
from bzzz.a2a.guard import guarded_client
from bzzz.errors import InvalidParameters, NetworkError
from bzzz.events.targets import TargetPolicy

from .remote import remote_agent

pytestmark = pytest.mark.integration

LOOPBACK = TargetPolicy(allow_private=False, loopback_only=True)


async def test_a_signed_card_verifies_and_names_its_json_rpc_endpoint() -> None:
    async with remote_agent(signed=True) as remote, guarded_client(LOOPBACK, 5) as http:
        card = await fetch_card(http, remote.url, require_signature=True)
    assert card.signed and card.name == "Echo Agent"
    assert card.endpoint == f"{remote.url}/" and card.protocol_version == "1.0"


async def test_a_tampered_card_is_refused_for_its_bad_signature() -> None:
    async with (
        remote_agent(signed=True, tampered=True) as remote,
        guarded_client(LOOPBACK, 5) as http,
    ):
        with pytest.raises(InvalidParameters, match="bad signature"):
            await fetch_card(http, remote.url)


async def test_an_unsigned_card_is_refused_when_a_signature_is_required() -> None:
    async with remote_agent() as remote, guarded_client(LOOPBACK, 5) as http:
        assert not (await fetch_card(http, remote.url)).signed
        with pytest.raises(InvalidParameters, match="not signed"):
            await fetch_card(http, remote.url, require_signature=True)


async def test_an_answer_that_is_no_a2a_card_is_refused() -> None:
    async with remote_agent() as remote, guarded_client(LOOPBACK, 5) as http:
        with pytest.raises(NetworkError, match="not an A2A agent card"):
            await fetch_card(http, f"{remote.url}/nothing-here")
    async with remote_agent(signed=True) as remote, guarded_client(LOOPBACK, 5) as http:
        # JSON, but not a card: the agent's key set.
        with pytest.raises(InvalidParameters, match="needs a name and an interface"):
            await fetch_card(http, f"{remote.url}/jwks.json")


async def test_a_node_serving_more_than_loopback_reaches_no_private_host() -> None:
    public = TargetPolicy(allow_private=False, loopback_only=False)
    async with remote_agent() as remote, guarded_client(public, 5) as http:
        with pytest.raises(InvalidParameters, match="loopback or private"):
            await fetch_card(http, remote.url)
    async with guarded_client(LOOPBACK, 5) as http:
        with pytest.raises(InvalidParameters, match="never allowed"):
            await fetch_card(http, "http://169.254.169.254/")
        with pytest.raises(NetworkError, match="unreachable"):
            await fetch_card(http, "http://127.0.0.1:9/")
