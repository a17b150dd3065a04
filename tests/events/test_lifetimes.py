"""Subscriptions end: without a webhook with their session (or agents' lease), with one when
removed; only the owner session removes its subscription."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from bzzz.errors import InvalidParameters, PermissionDenied
from bzzz.eventlog import Caller
from bzzz.mcp.server import build_server
from bzzz.node.core import Node
from bzzz.schemas import SubscribeInput, validate_input

from .test_subscribe import announce, events, subscribe


async def unsubscribe(node: Node, session: str, subscription_id: str) -> dict[str, Any]:
    return await node.subscriptions.subscribe(
        Caller(session), SubscribeInput(action="unsubscribe", subscription_id=subscription_id)
    )


async def ids(node: Node) -> list[str]:
    return sorted(s.id for s in await node.subscriptions.subscriptions())


async def test_the_owner_session_unsubscribes_and_no_more_events_are_collected(
    node: Node,
) -> None:
    sub = await subscribe(node, "agent_announcement")
    await announce(node, "arch-1", "architect")

    removed = await unsubscribe(node, "watcher", sub["subscription_id"])
    await announce(node, "arch-2", "architect")

    assert removed["status"] == "removed"
    assert removed["subscription_id"] == sub["subscription_id"]
    assert await ids(node) == []
    with pytest.raises(InvalidParameters):
        await events(node, sub)


async def test_another_session_cannot_remove_a_subscription(node: Node) -> None:
    sub = await subscribe(node, "agent_announcement", callback_webhook="https://example.com/h")

    with pytest.raises(PermissionDenied) as caught:
        await unsubscribe(node, "intruder", sub["subscription_id"])

    assert "another session" in caught.value.message
    assert await ids(node) == [sub["subscription_id"]]


async def test_unsubscribing_an_unknown_or_removed_subscription_is_refused(node: Node) -> None:
    sub = await subscribe(node, "agent_announcement")
    await unsubscribe(node, "watcher", sub["subscription_id"])

    for subscription_id in (sub["subscription_id"], "sub-nope"):
        with pytest.raises(InvalidParameters, match="no subscription"):
            await unsubscribe(node, "watcher", subscription_id)


@pytest.mark.parametrize(
    "params",
    [
        {"action": "unsubscribe"},
        {"action": "unsubscribe", "subscription_id": "sub-1", "event_types": ["network_status"]},
        {"action": "subscribe", "subscription_id": "sub-1", "event_types": ["network_status"]},
        {"action": "subscribe"},
    ],
)
async def test_unsubscribe_and_subscribe_take_their_own_parameters(
    node: Node, params: dict[str, Any]
) -> None:
    with pytest.raises(InvalidParameters):
        await node.subscriptions.subscribe(Caller("watcher"), SubscribeInput(**params))

    assert await ids(node) == []


def test_an_unknown_action_is_refused() -> None:
    with pytest.raises(InvalidParameters, match="'action'"):
        validate_input(SubscribeInput, {"action": "drop", "subscription_id": "sub-1"})


async def test_a_session_ending_ends_its_subscriptions_without_a_webhook(node: Node) -> None:
    plain = await subscribe(node, "agent_announcement")
    hooked = await subscribe(node, "agent_announcement", callback_webhook="https://example.com/h")
    other = await node.subscriptions.subscribe(
        Caller("other"), SubscribeInput(event_types=["agent_announcement"])
    )

    ended = await node.subscriptions.end_for_session("watcher")

    assert ended == 1
    assert await ids(node) == sorted([hooked["subscription_id"], other["subscription_id"]])
    assert plain["subscription_id"] not in await ids(node)
    assert await node.subscriptions.end_for_session("watcher") == 0


async def test_an_agents_lease_ending_ends_the_subscriptions_it_made(node: Node) -> None:
    mine = await node.subscriptions.subscribe(
        Caller("s1"), SubscribeInput(event_types=["thread_created"]), "agent-a"
    )
    kept = await node.subscriptions.subscribe(
        Caller("s1"), SubscribeInput(event_types=["thread_created"]), "agent-b"
    )

    assert await node.subscriptions.end_for_agents(["agent-a"]) == 1
    assert await ids(node) == [kept["subscription_id"]]
    assert mine["subscription_id"] not in await ids(node)


async def test_the_mcp_tool_unsubscribes_for_its_own_session_only(node: Node) -> None:
    server, _ = build_server(node)
    async with Client(server, mode="legacy") as owner, Client(server, mode="legacy") as other:
        made = await owner.call_tool(
            "bzzz_subscribe",
            {"event_types": ["thread_created"], "callback_webhook": "https://example.com/h"},
        )
        assert made.structured_content is not None
        sub_id = made.structured_content["subscription_id"]
        refused = await other.call_tool(
            "bzzz_subscribe", {"action": "unsubscribe", "subscription_id": sub_id}
        )
        kept = await ids(node)
        removed = await owner.call_tool(
            "bzzz_subscribe", {"action": "unsubscribe", "subscription_id": sub_id}
        )

    assert refused.is_error and refused.structured_content is not None
    assert refused.structured_content["code"] == "PERMISSION_DENIED"
    assert kept == [sub_id]
    assert not removed.is_error and removed.structured_content is not None
    assert removed.structured_content["status"] == "removed"
    assert await ids(node) == []


async def test_closing_an_mcp_session_ends_its_plain_subscriptions_but_not_webhooks(
    node: Node,
) -> None:
    server, _ = build_server(node)
    async with Client(server, mode="legacy") as client:
        for args in ({}, {"callback_webhook": "https://example.com/h"}):
            await client.call_tool("bzzz_subscribe", {"event_types": ["thread_created"], **args})
        during = len(await ids(node))

    # The session's teardown emitted the end before the client's exit returned.
    [left] = await node.subscriptions.subscriptions()
    assert during == 2
    assert left.callback_webhook == "https://example.com/h"
