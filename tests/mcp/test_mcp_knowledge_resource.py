"""The resource bzzz://PROJECT/knowledge: read as bzzz_get reads it, updated when a fact of its
project is stated, agreed or superseded (legacy resources/subscribe and 2026 listen)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_checks import ClientFactory
from test_mcp_resources import WAIT, UpdateInbox

from bzzz.eventlog import Caller
from bzzz.mcp.knowledge import knowledge_uri
from bzzz.mcp.listen import may_follow
from bzzz.node.core import Node
from bzzz.principal import LOCAL, Principal, Scope

pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")

SHOP = "bzzz://shop/knowledge"


async def _state(node: Node, project: str, obj: str) -> dict[str, Any]:
    fact: dict[str, Any] = await node.knowledge.state(
        Caller("mcp-test", LOCAL), project, "checkout retries", "carry", obj
    )
    return fact


async def _read(client: Client, uri: str) -> dict[str, Any]:
    result = await client.read_resource(uri)
    [contents] = result.contents
    assert contents.mime_type == "application/json"
    found: dict[str, Any] = json.loads(contents.text)
    return found


async def test_the_resource_shows_the_projects_facts_and_no_others(
    connect: ClientFactory, node: Node
) -> None:
    await _state(node, "shop", "idempotency keys")
    await _state(node, "garden", "GARDEN-ONLY")
    async with connect() as client:
        listed = await client.list_resource_templates()
        read = await _read(client, SHOP)
        as_bzzz_get_names_it = await _read(client, "bzzz://*@shop/knowledge")

    assert "bzzz://{project}/knowledge" in {t.uri_template for t in listed.resource_templates}
    assert read["project"] == "shop"
    assert [f["object"] for f in read["facts"]] == ["idempotency keys"]
    assert as_bzzz_get_names_it["facts"] == read["facts"]


async def test_a_subscribed_session_hears_when_a_fact_of_its_project_changes(
    connect: ClientFactory, node: Node
) -> None:
    updates = UpdateInbox()
    async with connect(message_handler=updates) as watcher:
        await watcher.subscribe_resource(SHOP)
        await _state(node, "garden", "not heard")
        await _state(node, "shop", "no keys")
        await updates.wait_for(SHOP)
        await _state(node, "shop", "idempotency keys")  # supersedes the first
        await updates.wait_for(SHOP, times=2)
        read = await _read(watcher, SHOP)

    assert set(updates.uris) == {SHOP}
    assert [f["object"] for f in read["facts"]][:1] == ["idempotency keys"]


async def test_a_2026_listener_hears_the_projects_facts_change(mcp_server: Any, node: Node) -> None:
    server, _ = mcp_server
    async with (
        Client(server) as watcher,
        watcher.listen(resource_subscriptions=[SHOP]) as stream,
    ):
        await _state(node, "shop", "idempotency keys")
        with anyio.fail_after(WAIT):
            event = await stream.__anext__()

    assert str(event.uri) == SHOP


async def test_only_who_may_read_the_project_is_told_of_its_facts() -> None:
    garden = Principal("token:g", "token", frozenset({"garden"}), frozenset({"*"}), Scope.WRITE)
    caller = Caller("k", garden)

    assert await may_follow(None, caller, knowledge_uri("garden"))  # type: ignore[arg-type]
    assert not await may_follow(None, caller, knowledge_uri("shop"))  # type: ignore[arg-type]
