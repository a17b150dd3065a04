"""bzzz_announce: agents join the network as their session's, and leave with it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bzzz.config import Settings
from bzzz.errors import ErrorCode, InvalidParameters
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, GetInput, LookupInput, PostInput, validate_input


async def announce(node: Node, session: str, agent_id: str, role: str, **fields: Any) -> Any:
    params = AnnounceInput(agent_id=agent_id, role=role, **fields)
    return await node.agents.announce(Caller(session), params)


async def agent_info(node: Node, agent_id: str) -> dict[str, Any]:
    got = await node.agents.get(LOCAL_CALLER, GetInput(address=f"bzzz://{agent_id}"))
    info: dict[str, Any] = got["content"]["agent_info"]
    return info


@pytest.fixture
async def small_node(settings: Settings, memory_bus: InMemoryBus) -> AsyncIterator[Node]:
    """A node on a network that holds at most two online agents."""
    settings.agents.max_agents = 2
    async with Node(settings, bus=memory_bus) as running:
        yield running


async def test_announce_returns_the_idle_agent_with_its_address(node: Node) -> None:
    result = await announce(
        node,
        "session-a",
        "architect-001",
        "architect",
        capabilities=["system_design", "architecture_review"],
        specialization="distributed_systems",
        project="myproject",
    )

    assert result["success"] is True
    assert result["message"] == "Agent architect-001 (architect) announced to BZZZ network"
    agent = result["agent"]
    assert agent["id"] == "architect-001"
    assert agent["role"] == "architect"
    assert agent["capabilities"] == ["system_design", "architecture_review"]
    assert agent["specialization"] == "distributed_systems"
    assert agent["status"] == "idle"
    assert agent["available"] is True
    assert agent["max_tasks"] == 3
    assert agent["address"] == "bzzz://architect-001:architect@myproject:*"
    assert 0 <= agent["performance"] <= 1


async def test_the_same_session_re_announcing_updates_the_agent(node: Node) -> None:
    await announce(node, "session-a", "dev-1", "developer", capabilities=["python"])

    result = await announce(
        node, "session-a", "dev-1", "reviewer", capabilities=["go"], max_tasks=5
    )

    assert result["agent"]["role"] == "reviewer"
    info = await agent_info(node, "dev-1")
    assert (info["role"], info["capabilities"], info["max_tasks"]) == ("reviewer", ["go"], 5)
    found = await node.agents.lookup(LOCAL_CALLER, LookupInput(semantic_address="bzzz://*:*@*:*"))
    assert [m["id"] for m in found["matches"]] == ["dev-1"]


async def test_another_session_cannot_take_a_live_agent_id(node: Node) -> None:
    await announce(node, "session-a", "architect-001", "architect")

    with pytest.raises(InvalidParameters) as caught:
        await announce(node, "session-b", "architect-001", "reviewer")

    assert caught.value.code == ErrorCode.INVALID_PARAMETERS
    assert "Agent ID already exists" in caught.value.message
    info = await agent_info(node, "architect-001")
    assert info["role"] == "architect"


async def test_an_ended_session_takes_its_agents_offline(node: Node) -> None:
    await announce(node, "session-a", "a-1", "developer")
    await announce(node, "session-a", "a-2", "tester")
    await announce(node, "session-b", "b-1", "developer")

    gone = await node.agents.session_ended(Caller("session-a"))

    assert sorted(gone) == ["a-1", "a-2"]
    assert (await agent_info(node, "a-1"))["status"] == "offline"
    assert (await agent_info(node, "a-2"))["available"] is False
    assert (await agent_info(node, "b-1"))["status"] == "idle"


async def test_ending_a_session_that_announced_nothing_changes_nothing(node: Node) -> None:
    await announce(node, "session-a", "a-1", "developer")

    assert await node.agents.session_ended(Caller("session-x")) == []
    assert (await agent_info(node, "a-1"))["status"] == "idle"


async def test_another_session_may_announce_an_agent_whose_session_ended(node: Node) -> None:
    await announce(node, "session-a", "architect-001", "architect")
    await node.agents.session_ended(Caller("session-a"))

    result = await announce(node, "session-b", "architect-001", "architect")

    assert result["agent"]["status"] == "idle"
    # The new session now acts as the agent; the old one does not.
    assert [a.id for a in await node.agents.agents_of(Caller("session-b"))] == ["architect-001"]
    assert await node.agents.agents_of(Caller("session-a")) == []


@pytest.mark.parametrize("reserved", ["subscriptions", "node", "Network", "PEERS"])
async def test_reserved_agent_ids_are_refused(node: Node, reserved: str) -> None:
    with pytest.raises(InvalidParameters) as caught:
        await announce(node, "session-a", reserved, "developer")

    assert "reserved" in caught.value.message
    found = await node.agents.lookup(LOCAL_CALLER, LookupInput(semantic_address="bzzz://*"))
    assert found["count"] == 0


async def test_the_network_refuses_agents_beyond_max_agents(small_node: Node) -> None:
    await announce(small_node, "s1", "a-1", "developer")
    await announce(small_node, "s2", "a-2", "developer")

    with pytest.raises(InvalidParameters) as caught:
        await announce(small_node, "s3", "a-3", "developer")

    assert "maximum of 2" in caught.value.message
    found = await small_node.agents.lookup(LOCAL_CALLER, LookupInput(semantic_address="bzzz://*"))
    assert [m["id"] for m in found["matches"]] == ["a-1", "a-2"]


async def test_an_offline_agent_makes_room_under_max_agents(small_node: Node) -> None:
    await announce(small_node, "s1", "a-1", "developer")
    await announce(small_node, "s2", "a-2", "developer")
    await small_node.agents.session_ended(Caller("s1"))

    result = await announce(small_node, "s3", "a-3", "developer")

    assert result["agent"]["status"] == "idle"


async def test_an_offline_agent_coming_back_counts_against_max_agents(small_node: Node) -> None:
    await announce(small_node, "s1", "a-1", "developer")
    await announce(small_node, "s2", "a-2", "developer")
    await small_node.agents.session_ended(Caller("s1"))
    await announce(small_node, "s3", "a-3", "developer")

    with pytest.raises(InvalidParameters) as caught:
        await announce(small_node, "s1", "a-1", "developer")

    assert "maximum of 2" in caught.value.message
    online = await small_node.agents.lookup(
        LOCAL_CALLER,
        LookupInput(semantic_address="bzzz://*", filter_criteria={"availability": True}),
    )
    assert [m["id"] for m in online["matches"]] == ["a-2", "a-3"]


async def test_re_announcing_keeps_the_agents_tasks(node: Node) -> None:
    await announce(node, "s-boss", "boss", "architect")
    await announce(node, "s-dev", "dev", "developer")
    await node.conversations.post(
        Caller("s-boss"),
        PostInput(
            target_address="bzzz://dev",
            message_type="task_assignment",
            content={"description": "write the parser"},
        ),
    )

    result = await announce(node, "s-dev", "dev", "developer", capabilities=["parsing"])

    assert result["agent"]["status"] == "busy"
    assert result["agent"]["active_tasks"] == 1


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"role": "architect"}, "agent_id"),
        ({"agent_id": "a-1"}, "role"),
        ({"agent_id": "a 1", "role": "architect"}, "agent_id"),
        ({"agent_id": "a-1", "role": "architect", "max_tasks": 0}, "max_tasks"),
        ({"agent_id": "a-1", "role": "architect", "colour": "red"}, "colour"),
    ],
)
def test_bad_announce_parameters_name_the_field(arguments: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidParameters) as caught:
        validate_input(AnnounceInput, arguments)

    assert f"'{field}'" in caught.value.message
    assert caught.value.code == ErrorCode.INVALID_PARAMETERS
