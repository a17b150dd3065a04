"""bzzz_get: an agent, its inbox, its tasks, its threads, or one thread, by address."""

from __future__ import annotations

from typing import Any

import pytest

from bzzz.errors import AgentNotFound, ErrorCode, InvalidParameters, ThreadNotFound
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, GetInput, PostInput, ThreadInput


async def announce(node: Node, agent_id: str, role: str, **fields: Any) -> None:
    await node.agents.announce(
        Caller(f"session-{agent_id}"), AnnounceInput(agent_id=agent_id, role=role, **fields)
    )


async def post(node: Node, sender: str, target: str, kind: str = "text", **content: Any) -> Any:
    return await node.conversations.post(
        Caller(f"session-{sender}"),
        PostInput(target_address=target, message_type=kind, content=content or {"text": "hi"}),
    )


async def get(node: Node, address: str, **options: Any) -> dict[str, Any]:
    return await node.agents.get(LOCAL_CALLER, GetInput(address=address, **options))


@pytest.fixture
async def team(node: Node) -> Node:
    """An architect and a developer on one project."""
    await announce(node, "arch", "architect", project="proj", capabilities=["design"])
    await announce(node, "dev", "developer", project="proj")
    return node


async def test_an_agent_address_returns_its_info_activity_and_tasks(team: Node) -> None:
    await post(team, "arch", "bzzz://dev", "task_assignment", description="build the API")

    result = await get(team, "bzzz://dev:developer@proj")

    assert result["success"] is True
    content = result["content"]
    assert content["agent_info"]["id"] == "dev"
    assert content["agent_info"]["status"] == "busy"
    assert [t["description"] for t in content["current_tasks"]] == ["build the API"]
    assert content["current_tasks"][0]["status"] == "pending"
    assert content["current_tasks"][0]["assigner"] == "arch"
    kinds = [a["type"] for a in content["recent_activity"]]
    assert kinds == ["message_received", "announced"]
    assert result["metadata"]["content_type"] == "agent_data"
    assert result["retrieved_at"].endswith("Z")


async def test_recent_activity_holds_at_most_max_history_entries(team: Node) -> None:
    for n in range(5):
        await post(team, "arch", "bzzz://dev", text=f"note {n}")

    result = await get(team, "bzzz://dev", max_history=3)
    none = await get(team, "bzzz://dev", max_history=0)

    activity = result["content"]["recent_activity"]
    assert len(activity) == 3
    assert all(a["type"] == "message_received" for a in activity)
    assert none["content"]["recent_activity"] == []


async def test_metadata_is_included_only_when_asked(team: Node) -> None:
    with_meta = await get(team, "bzzz://arch")
    without = await get(team, "bzzz://arch", include_metadata=False)

    assert with_meta["metadata"]["version"] == "1.0"
    assert with_meta["metadata"]["last_updated"] is not None
    assert "metadata" not in without


async def test_inbox_lists_messages_to_the_agent_newest_first(team: Node) -> None:
    await post(team, "arch", "bzzz://dev", text="first")
    await post(team, "arch", "bzzz://dev", text="second")
    await post(team, "dev", "bzzz://arch", text="to the architect")

    result = await get(team, "bzzz://dev/inbox")

    messages = result["content"]["messages"]
    assert [m["content"]["text"] for m in messages] == ["second", "first"]
    assert all(m["sender"] == "arch" for m in messages)
    assert result["metadata"]["content_type"] == "inbox"


async def test_tasks_lists_every_task_of_the_agent(team: Node) -> None:
    first = await post(team, "arch", "bzzz://dev", "task_assignment", description="one")
    await post(team, "arch", "bzzz://dev", "task_assignment", description="two")
    await post(team, "dev", "bzzz://arch", "task_complete", task_id=first["tasks"]["dev"])

    result = await get(team, "bzzz://dev/tasks")
    current = await get(team, "bzzz://dev")

    statuses = {t["description"]: t["status"] for t in result["content"]["tasks"]}
    assert statuses == {"one": "completed", "two": "pending"}
    assert [t["description"] for t in current["content"]["current_tasks"]] == ["two"]


async def test_threads_lists_the_agents_threads(team: Node) -> None:
    created = await team.conversations.thread(
        Caller("session-arch"), ThreadInput(action="create", participants=["dev"], topic="API")
    )

    result = await get(team, "bzzz://dev/threads")

    threads = result["content"]["threads"]
    assert [t["id"] for t in threads] == [created["thread_id"]]
    assert threads[0]["participants"] == ["arch", "dev"]


async def test_a_thread_path_returns_the_thread_with_its_messages(team: Node) -> None:
    created = await team.conversations.thread(
        Caller("session-arch"), ThreadInput(action="create", participants=["dev"], topic="API")
    )
    thread_id = created["thread_id"]
    await team.conversations.post(
        Caller("session-dev"),
        PostInput(
            target_address="bzzz://*",
            message_type="question",
            content={"text": "REST or gRPC?"},
            thread_id=thread_id,
        ),
    )

    result = await get(team, f"bzzz://*:*@*:*/threads/{thread_id}")
    by_agent = await get(team, f"bzzz://arch/threads/{thread_id}")

    thread = result["content"]["thread"]
    assert thread["topic"] == "API"
    assert thread["message_count"] == 1
    assert [(m["sender"], m["messageType"], m["content"]) for m in thread["messages"]] == [
        ("dev", "question", "REST or gRPC?")
    ]
    assert result["metadata"]["content_type"] == "thread"
    assert by_agent["content"]["thread"]["id"] == thread_id


async def test_an_unknown_agent_is_agent_not_found(team: Node) -> None:
    with pytest.raises(AgentNotFound) as caught:
        await get(team, "bzzz://nobody")

    assert caught.value.code == ErrorCode.AGENT_NOT_FOUND


async def test_an_agent_at_another_role_is_agent_not_found(team: Node) -> None:
    with pytest.raises(AgentNotFound):
        await get(team, "bzzz://dev:architect@*")


async def test_an_unknown_thread_is_thread_not_found(team: Node) -> None:
    with pytest.raises(ThreadNotFound) as caught:
        await get(team, "bzzz://dev/threads/thread-nope")

    assert caught.value.code == ErrorCode.THREAD_NOT_FOUND


async def test_an_unknown_path_is_invalid_parameters(team: Node) -> None:
    with pytest.raises(InvalidParameters) as caught:
        await get(team, "bzzz://dev/secrets")

    assert "/inbox" in caught.value.message


async def test_a_wildcard_agent_without_a_thread_path_is_invalid_parameters(team: Node) -> None:
    with pytest.raises(InvalidParameters) as caught:
        await get(team, "bzzz://*:developer@proj")

    assert "bzzz_lookup" in caught.value.message
