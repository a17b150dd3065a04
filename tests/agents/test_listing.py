"""The agent directory on the in-memory bus: a node lists its agents, online and offline."""

from __future__ import annotations

from bzzz.eventlog import Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node import Node
from bzzz.schemas import AnnounceInput


async def _listed(bus: InMemoryBus, project: str | None) -> list[tuple[str, str]]:
    _, agents = await bus.directory.agents(project)
    return sorted((a.id, a.status) for a in agents.values())


async def test_a_node_lists_its_agents_and_keeps_them_listed_offline(
    node: Node, memory_bus: InMemoryBus
) -> None:
    await node.agents.announce(
        Caller("s1"), AnnounceInput(agent_id="dev-1", role="developer", project="shop")
    )
    await node.agents.announce(Caller("s1"), AnnounceInput(agent_id="ops-1", role="ops"))
    await node.listing.writer.flush()
    assert await _listed(memory_bus, "shop") == [("dev-1", "idle")]
    assert await _listed(memory_bus, None) == [("dev-1", "idle"), ("ops-1", "idle")]
    assert await memory_bus.directory.project_of("ops-1") == "_"

    # The stores keep offline agents (a lookup lists them): the directory does too.
    await node.agents.session_ended(Caller("s1"))
    await node.listing.writer.flush()
    assert await _listed(memory_bus, None) == [("dev-1", "offline"), ("ops-1", "offline")]
    assert await memory_bus.directory.project_of("dev-1") == "shop"


async def test_an_id_taken_again_in_another_project_is_listed_there_alone(
    node: Node, memory_bus: InMemoryBus
) -> None:
    await node.agents.announce(
        Caller("s1"), AnnounceInput(agent_id="dev-1", role="developer", project="shop")
    )
    await node.agents.session_ended(Caller("s1"))  # offline: its id is free again
    await node.listing.writer.flush()
    assert await _listed(memory_bus, "shop") == [("dev-1", "offline")]

    await node.agents.announce(
        Caller("s2"), AnnounceInput(agent_id="dev-1", role="tester", project="ops")
    )
    await node.listing.writer.flush()

    assert await _listed(memory_bus, None) == [("dev-1", "idle")]
    assert await _listed(memory_bus, "ops") == [("dev-1", "idle")]
    assert await memory_bus.directory.project_of("dev-1") == "ops"
