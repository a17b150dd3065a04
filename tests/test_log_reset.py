"""A store kept over a log that was reset (a new stream) replays the new log and works on."""

from __future__ import annotations

from bzzz.config import Settings
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, LookupInput


async def test_a_node_over_a_reset_log_starts_and_applies_new_changes(settings: Settings) -> None:
    async with Node(settings, bus=InMemoryBus()) as node:
        for n in range(3):
            await node.agents.announce(
                Caller(f"s{n}"), AnnounceInput(agent_id=f"old-{n}", role="reviewer")
            )

    async with Node(settings, bus=InMemoryBus()) as node:
        await node.agents.announce(Caller("s9"), AnnounceInput(agent_id="new-1", role="reviewer"))
        found = await node.agents.lookup(
            LOCAL_CALLER, LookupInput(semantic_address="bzzz://*:reviewer@*")
        )

    ids = {m["id"]: m["status"] for m in found["matches"]}
    assert ids["new-1"] == "idle"
    assert {ids[f"old-{n}"] for n in range(3)} == {"offline"}
