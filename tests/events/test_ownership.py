"""Who may make and end a subscription: a webhook needs 'write'; a subscription is ended only by
its maker (its session, its credential, or the agent_handle of a sessionless caller) or a named
admin of its projects. A refused call changes nothing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bzzz.access.keys import STATELESS, principal_key
from bzzz.api.app import build_app
from bzzz.errors import PermissionDenied
from bzzz.eventlog import Caller
from bzzz.mcp.server import build_server
from bzzz.node.core import Node
from bzzz.principal import ALL, Principal, Scope, principal
from bzzz.schemas import AnnounceInput, SubscribeInput

READER = principal("token:reader", "token", ["p1"], [ALL], Scope.READ, "reader")
WRITER = principal("token:writer", "token", ["p1"], [ALL], Scope.WRITE, "writer")
COLLEAGUE = principal("token:colleague", "token", ["p1"], [ALL], Scope.WRITE, "colleague")
ADMIN_P1 = principal("token:admin1", "token", ["p1"], [ALL], Scope.ADMIN, "admin of p1")
ADMIN_P2 = principal("token:admin2", "token", ["p2"], [ALL], Scope.ADMIN, "admin of p2")
HOOK = "https://example.com/hook"
WITHIN = 30.0


def as_(who: Principal) -> Caller:
    return Caller(principal_key(who), who)


async def subscription_ids(node: Node) -> list[str]:
    return sorted(s.id for s in await node.subscriptions.subscriptions())


async def unsubscribe(node: Node, caller: Caller, subscription_id: str) -> dict[str, Any]:
    params = SubscribeInput(action="unsubscribe", subscription_id=subscription_id)
    return await node.subscriptions.subscribe(caller, params)


async def test_a_read_token_cannot_make_a_webhook_and_nothing_is_queued(node: Node) -> None:
    with pytest.raises(PermissionDenied) as refused:
        await node.subscriptions.subscribe(
            as_(READER),
            SubscribeInput(event_types=["agent_announcement"], callback_webhook=HOOK),
        )
    await node.agents.announce(
        as_(WRITER), AnnounceInput(agent_id="dev-1", role="developer", project="p1")
    )

    assert refused.value.details["missing"] == "scope:write"
    assert await subscription_ids(node) == []
    assert await node.subscriptions.deliveries() == []


async def test_a_read_token_follows_events_without_a_webhook(node: Node) -> None:
    made = await node.subscriptions.subscribe(
        as_(READER), SubscribeInput(event_types=["agent_announcement"])
    )
    await node.agents.announce(
        as_(WRITER), AnnounceInput(agent_id="dev-1", role="developer", project="p1")
    )
    collected = await node.subscriptions.events(as_(READER), made["subscription_id"])
    removed = await unsubscribe(node, as_(READER), made["subscription_id"])

    assert [e["data"]["agent"]["id"] for e in collected["events"]] == ["dev-1"]
    assert removed["status"] == "removed"


async def test_a_write_token_makes_a_webhook_subscription(node: Node) -> None:
    made = await node.subscriptions.subscribe(
        as_(WRITER), SubscribeInput(event_types=["agent_announcement"], callback_webhook=HOOK)
    )

    assert made["callback_webhook"] == HOOK
    assert await subscription_ids(node) == [made["subscription_id"]]


async def test_only_the_maker_or_an_admin_of_its_project_ends_a_subscription(node: Node) -> None:
    made = await node.subscriptions.subscribe(
        as_(WRITER), SubscribeInput(event_types=["agent_announcement"], callback_webhook=HOOK)
    )
    sub_id = made["subscription_id"]

    for intruder in (COLLEAGUE, ADMIN_P2, READER):
        with pytest.raises(PermissionDenied):
            await unsubscribe(node, as_(intruder), sub_id)
    with pytest.raises(PermissionDenied):
        await unsubscribe(node, Caller(STATELESS), sub_id)  # anonymous: no one's admin
    kept = await subscription_ids(node)
    removed = await unsubscribe(node, as_(ADMIN_P1), sub_id)

    assert kept == [sub_id]
    assert removed["status"] == "removed"
    assert await subscription_ids(node) == []


async def test_a_sessionless_callers_subscription_is_its_handles(node: Node) -> None:
    """Two clients without session or credential: only the handle's holder ends its own."""
    announce = AnnounceInput(agent_id="watcher-x", role="watcher")
    handle_x = (await node.agents.announce(Caller(STATELESS), announce))["agent_handle"]
    other = AnnounceInput(agent_id="watcher-y", role="watcher")
    handle_y = (await node.agents.announce(Caller(STATELESS), other))["agent_handle"]
    made = await node.subscriptions.subscribe(
        Caller(STATELESS, handle=handle_x),
        SubscribeInput(event_types=["agent_announcement"], callback_webhook=HOOK),
    )
    sub_id = made["subscription_id"]

    for intruder in (Caller(STATELESS), Caller(STATELESS, handle=handle_y)):
        with pytest.raises(PermissionDenied):
            await unsubscribe(node, intruder, sub_id)
    kept = await subscription_ids(node)
    removed = await unsubscribe(node, Caller(STATELESS, handle=handle_x), sub_id)

    assert kept == [sub_id]
    assert removed["status"] == "removed"


@contextlib.asynccontextmanager
async def stateless_clients(node: Node, count: int) -> AsyncIterator[list[Client]]:
    """``count`` default (2026-07-28, sessionless) MCP clients of the node's app, without
    credential, over streamable HTTP on loopback."""
    server, _ = build_server(node)
    app = build_app(node, server, "127.0.0.1")
    url = "http://127.0.0.1:7331/mcp"
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(server.session_manager.run())
        clients = []
        for _ in range(count):
            http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), timeout=WITHIN)
            await stack.enter_async_context(http)
            client = Client(streamable_http_client(url, http_client=http))
            clients.append(await stack.enter_async_context(client))
        yield clients


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with asyncio.timeout(WITHIN):
        result = await client.call_tool(tool, arguments)
    assert result.structured_content is not None, result
    return dict(result.structured_content)


async def test_a_second_sessionless_client_cannot_end_the_first_ones_subscription(
    node: Node,
) -> None:
    async with stateless_clients(node, 2) as (first, second):
        announced = await call(first, "bzzz_announce", {"agent_id": "x", "role": "watcher"})
        handle = announced["agent_handle"]
        made = await call(
            first,
            "bzzz_subscribe",
            {"event_types": ["agent_announcement"], "callback_webhook": "http://127.0.0.1:9/h",
             "agent_handle": handle},
        )  # fmt: skip
        sub_id = made["subscription_id"]
        unsubscribe = {"action": "unsubscribe", "subscription_id": sub_id}
        bare = await call(second, "bzzz_subscribe", unsubscribe)
        theirs = await call(second, "bzzz_announce", {"agent_id": "y", "role": "watcher"})
        own_handle = await call(
            second, "bzzz_subscribe", unsubscribe | {"agent_handle": theirs["agent_handle"]}
        )
        kept = await subscription_ids(node)
        queued = len(await node.subscriptions.deliveries())  # y's announcement, for x's hook
        removed = await call(first, "bzzz_subscribe", unsubscribe | {"agent_handle": handle})

    assert (bare["code"], own_handle["code"]) == ("PERMISSION_DENIED", "PERMISSION_DENIED")
    assert kept == [sub_id]
    assert queued == 1
    assert removed["status"] == "removed"
    assert await subscription_ids(node) == []
