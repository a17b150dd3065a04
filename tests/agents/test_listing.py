"""The agent directory on the in-memory bus: a node lists its agents, online and offline."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from bzzz import domain
from bzzz.agents import listing
from bzzz.agents.listing import DirectoryWriter
from bzzz.errors import NetworkError
from bzzz.eventlog import Caller
from bzzz.network.directory import InMemoryDirectory
from bzzz.network.envelope import Envelope
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput
from bzzz.store.directory import AgentDirectory


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


def _agent(agent_id: str, project: str, node_id: str) -> domain.Agent:
    at = datetime(2026, 12, 4, tzinfo=UTC)
    return domain.Agent(
        id=agent_id, role="developer", capabilities=[], specialization=None, max_tasks=1,
        project=project, task=None, status="offline", active_tasks=0, tasks_completed=0,
        tasks_failed=0, performance=1.0, node_id=node_id, session_id="s", created_at=at,
        last_activity=at,
    )  # fmt: skip


def _lost(node_id: str, witness: str, served: list[str] | None) -> Envelope:
    payload: dict[str, object] = {"node_id": node_id, "detected_at": "2026-12-04T00:00:00Z"}
    if served is not None:
        payload["served"] = served
    return Envelope.model_construct(type="node.lost", origin=witness, payload=payload)


async def _written_by(node_id: str, agents: list[domain.Agent], lost: Envelope) -> list[str]:
    directory = InMemoryDirectory()
    writer = DirectoryWriter(directory, AgentDirectory(), node_id, ttl=60)
    writer.changed(agents, [lost])
    await writer.flush()
    _, listed = await directory.agents(None)
    return sorted(agent.id for agent in listed.values())


async def test_a_lost_nodes_agents_are_listed_offline_by_one_writer_each() -> None:
    """The witness writes the offline entries of the projects it serves; a node holding the
    lost node's agents of another project writes those; nobody writes what another does."""
    agents = [_agent("dev-1", "shop", "lost"), _agent("ops-1", "ops", "lost")]
    by_shop_witness = _lost("lost", "witness", ["shop"])
    assert await _written_by("witness", agents[:1], by_shop_witness) == ["dev-1"]
    # A node serving every project holds both: the witness writes shop's, it writes ops'.
    assert await _written_by("star", agents, by_shop_witness) == ["ops-1"]
    # Recorded by an every-project witness: it alone writes them all.
    by_star = _lost("lost", "star", ["*"])
    assert await _written_by("star", agents, by_star) == ["dev-1", "ops-1"]
    assert await _written_by("witness", agents[:1], by_star) == []
    # A node.lost from before witnesses named their projects: every holder writes.
    assert await _written_by("witness", agents[:1], _lost("lost", "star", None)) == ["dev-1"]
    # Another node's agent that went offline on its own node: that node writes it.
    went = Envelope.model_construct(type="agent.offline", origin="other", payload={})
    directory = InMemoryDirectory()
    writer = DirectoryWriter(directory, AgentDirectory(), "star", ttl=60)
    writer.changed([_agent("dev-2", "shop", "other")], [went])
    await writer.flush()
    assert (await directory.agents(None))[1] == {}


class _Flaky(InMemoryDirectory):
    """The directory, refusing the first write of each agent named in ``refuse``."""

    def __init__(self, refuse: set[str]) -> None:
        super().__init__()
        self.refuse = refuse
        self.puts: list[tuple[str, str]] = []

    async def put(self, agent: domain.Agent, ttl: float | None) -> None:
        if agent.id in self.refuse:
            self.refuse.discard(agent.id)
            raise NetworkError(f"the directory did not take {agent.id!r}")
        self.puts.append((agent.id, agent.status))
        await super().put(agent, ttl)


async def test_a_failed_offline_write_is_tried_again() -> None:
    directory = _Flaky({"dev-1"})
    writer = DirectoryWriter(directory, AgentDirectory(), "witness", ttl=60)
    writer.changed([_agent("dev-1", "shop", "lost")], [_lost("lost", "witness", ["shop"])])
    with pytest.raises(NetworkError):
        await writer.flush()
    assert directory.puts == []
    await writer.flush()
    assert directory.puts == [("dev-1", "offline")]


async def test_a_holder_writes_what_the_witness_left_listed_online(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The witness serves shop and writes its agents; it failed (or stopped) before it wrote
    dev-1: the star node, which holds dev-1 too, finds it still listed online and writes it.
    ops-2's entry the other witness did write: nothing more is written for it."""
    online = replace(_agent("dev-1", "shop", "lost"), status="idle")
    done = replace(_agent("ops-2", "ops", "lost"), status="idle")
    directory = _Flaky(set())
    await directory.put(online, 60)
    await directory.put(replace(done, status="offline"), None)
    local = AgentDirectory()
    went = [_agent("dev-1", "shop", "lost"), _agent("ops-2", "ops", "lost")]
    for agent in went:
        local.put(agent)
    writer = DirectoryWriter(directory, local, "star", ttl=60)
    writer.changed(went, [_lost("lost", "witness", ["shop", "ops"])])
    await writer.flush()
    directory.puts.clear()
    assert (await directory.entries([("shop", "dev-1")]))["dev-1"].online

    await writer.check_others()  # noted just now: not due yet
    await writer.flush()
    assert directory.puts == []
    monkeypatch.setattr(listing, "CHECK_OTHERS_AFTER", 0.0)
    await writer.check_others()
    await writer.flush()

    assert directory.puts == [("dev-1", "offline")]
    assert not (await directory.entries([("shop", "dev-1")]))["dev-1"].online


async def test_a_busy_node_renews_its_entries_all_the_same() -> None:
    """Changes noted more often than the renewal interval do not put renewals off: an agent
    that does not change is written again within its TTL."""
    directory = _Flaky(set())
    local = AgentDirectory()
    quiet = replace(_agent("quiet-1", "shop", "me"), status="idle")
    busy = replace(_agent("busy-1", "shop", "me"), status="idle")
    local.put(quiet)
    local.put(busy)
    writer = DirectoryWriter(directory, local, "me", ttl=0.6)  # renewed every 0.3 s
    running = asyncio.create_task(writer.run())
    try:
        async with asyncio.timeout(10):
            while directory.puts.count(("quiet-1", "idle")) < 2:
                writer.changed([busy], [])  # a change every 50 ms: the writer never idles
                await asyncio.sleep(0.05)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
