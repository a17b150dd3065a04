"""bzzz_subscribe: subscriptions to the five event types, filtered by address."""

from __future__ import annotations

from typing import Any

import pytest

from bzzz.config import load_settings
from bzzz.domain import EVENT_TYPES
from bzzz.errors import ErrorCode, InvalidParameters
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, PostInput, SubscribeInput, ThreadInput, validate_input


async def subscribe(node: Node, *event_types: str, **params: Any) -> dict[str, Any]:
    return await node.subscriptions.subscribe(
        Caller("watcher"), SubscribeInput(event_types=list(event_types), **params)
    )


async def events(node: Node, subscription: dict[str, Any]) -> list[dict[str, Any]]:
    collected = await node.subscriptions.events(LOCAL_CALLER, subscription["subscription_id"])
    found: list[dict[str, Any]] = collected["events"]
    return found


async def announce(node: Node, agent_id: str, role: str, **fields: Any) -> None:
    await node.agents.announce(
        Caller(f"session-{agent_id}"), AnnounceInput(agent_id=agent_id, role=role, **fields)
    )


async def test_a_subscription_to_every_event_type_is_active(node: Node) -> None:
    result = await subscribe(node, *EVENT_TYPES, filter_address="bzzz://*:architect@*")

    assert result["success"] is True
    assert result["subscription_id"].startswith("sub-")
    assert result["event_types"] == list(EVENT_TYPES)
    assert result["filter_address"] == "bzzz://*:architect@*"
    assert result["status"] == "active"
    assert result["subscribed_at"].endswith("Z")
    assert result["resource_uri"] == f"bzzz://subscriptions/{result['subscription_id']}"
    assert "webhook_secret" not in result


async def test_an_unknown_event_type_lists_the_valid_ones(node: Node) -> None:
    with pytest.raises(InvalidParameters) as caught:
        await subscribe(node, "agent_announcement", "agent_sneezed")

    assert caught.value.code == ErrorCode.INVALID_PARAMETERS
    assert "agent_sneezed" in caught.value.message
    for valid in EVENT_TYPES:
        assert valid in caught.value.message
    assert caught.value.details["valid"] == list(EVENT_TYPES)


def test_an_empty_event_type_list_is_refused() -> None:
    with pytest.raises(InvalidParameters) as caught:
        validate_input(SubscribeInput, {"event_types": []})

    assert "'event_types'" in caught.value.message


async def test_a_malformed_filter_address_is_refused(node: Node) -> None:
    with pytest.raises(InvalidParameters):
        await subscribe(node, "agent_announcement", filter_address="bzzz://a:b:c")


async def test_announcements_reach_subscriptions_whose_filter_covers_them(node: Node) -> None:
    architects = await subscribe(node, "agent_announcement", filter_address="bzzz://*:architect@*")
    everyone = await subscribe(node, "agent_announcement")
    threads_only = await subscribe(node, "thread_created")

    await announce(node, "arch-1", "architect")
    await announce(node, "rev-1", "reviewer")

    seen = await events(node, architects)
    assert [(e["event_type"], e["data"]["agent"]["id"]) for e in seen] == [
        ("agent_announcement", "arch-1")
    ]
    assert seen[0]["data"]["action"] == "announced"
    assert seen[0]["address"] == "bzzz://arch-1:architect@*:*"
    assert seen[0]["subscription_id"] == architects["subscription_id"]
    assert [e["data"]["agent"]["id"] for e in await events(node, everyone)] == ["arch-1", "rev-1"]
    assert await events(node, threads_only) == []


async def test_events_before_the_subscription_are_not_collected(node: Node) -> None:
    await announce(node, "early", "architect")

    sub = await subscribe(node, "agent_announcement")
    await announce(node, "late", "architect")

    assert [e["data"]["agent"]["id"] for e in await events(node, sub)] == ["late"]


async def test_an_agent_going_offline_is_an_announcement_event(node: Node) -> None:
    await announce(node, "arch-1", "architect")
    sub = await subscribe(node, "agent_announcement")

    await node.agents.session_ended(Caller("session-arch-1"))

    [event] = await events(node, sub)
    assert event["data"]["action"] == "offline"
    assert event["data"]["agent"]["status"] == "offline"


async def test_task_assignments_are_events_at_the_assignees_address(node: Node) -> None:
    await announce(node, "boss", "architect")
    await announce(node, "dev", "developer", project="api")
    await announce(node, "rev", "reviewer")
    to_dev = await subscribe(node, "task_assignment", filter_address="bzzz://dev")
    any_task = await subscribe(node, "task_assignment")

    await node.conversations.post(
        Caller("session-boss"),
        PostInput(
            target_address="bzzz://*",
            message_type="task_assignment",
            content={"description": "review"},
        ),
    )

    [event] = await events(node, to_dev)
    assert event["data"]["agent_id"] == "dev"
    assert event["data"]["assigner"] == "boss"
    assert event["address"] == "bzzz://dev:developer@api:*"
    assert sorted(e["data"]["agent_id"] for e in await events(node, any_task)) == ["dev", "rev"]


async def test_a_created_thread_is_an_event(node: Node) -> None:
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")
    sub = await subscribe(node, "thread_created", filter_address="bzzz://*:architect@*")

    created = await node.conversations.thread(
        Caller("session-arch"), ThreadInput(action="create", participants=["dev"], topic="API")
    )

    [event] = await events(node, sub)
    assert event["data"]["thread_id"] == created["thread_id"]
    assert event["data"]["participants"] == ["arch", "dev"]
    assert event["data"]["creator"] == "arch"


async def test_a_node_joining_and_leaving_is_a_network_status_event(
    node: Node, memory_bus: InMemoryBus
) -> None:
    sub = await subscribe(node, "network_status")
    # Another process on the node's data directory: admitted by the directory's key.
    other_settings = load_settings(
        environ={}, overrides={"node": {"data_dir": str(node.settings.node.data_dir)}}
    )

    async with Node(other_settings, bus=memory_bus) as other:
        other_id = other.node_id
    await node.projector.wait_for_sequence(await memory_bus.last_sequence(), within=5)

    seen = [(e["data"]["node_id"], e["data"]["status"]) for e in await events(node, sub)]
    assert seen == [(other_id, "admitted"), (other_id, "online"), (other_id, "offline")]


async def test_events_of_an_unknown_subscription_are_refused(node: Node) -> None:
    with pytest.raises(InvalidParameters):
        await node.subscriptions.events(LOCAL_CALLER, "sub-nope")


async def test_a_webhook_subscription_returns_the_secret_to_check_signatures(node: Node) -> None:
    result = await subscribe(
        node, "agent_announcement", callback_webhook="https://hooks.example.com/bzzz"
    )

    assert result["callback_webhook"] == "https://hooks.example.com/bzzz"
    assert len(result["webhook_secret"]) == 64
    assert "X-Bzzz-Signature" in result["signature_header"]


@pytest.mark.parametrize(
    "url",
    [
        "ftp://hooks.example.com/x",
        "hooks.example.com/x",
        "http://",
        "http://user:secret@hooks.example.com/x",
        "javascript:alert(1)",
    ],
)
async def test_a_bad_webhook_url_is_refused(node: Node, url: str) -> None:
    with pytest.raises(InvalidParameters) as caught:
        await subscribe(node, "agent_announcement", callback_webhook=url)

    assert "callback_webhook" in caught.value.message
    await announce(node, "arch-1", "architect")
    assert await node.subscriptions.deliveries() == []
