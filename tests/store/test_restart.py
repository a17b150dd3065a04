"""A restarted node keeps its state; a new node replays the log to the same state."""

from __future__ import annotations

from pathlib import Path

import pytest

from bzzz.config import Settings, load_settings
from bzzz.errors import InvalidParameters
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, GetInput, LookupInput, ThreadInput

from .support import BOOKKEEPING, NODE_LOCAL, run_main_flows, snapshot


async def test_a_restarted_node_keeps_all_state(
    store_node: Node, settings: Settings, memory_bus: InMemoryBus
) -> None:
    flows = await run_main_flows(store_node)
    node_id = store_node.node_id
    await store_node.stop()

    async with Node(settings, bus=memory_bus) as again:
        assert again.node_id == node_id
        # The durable consumer resumed where it was: nothing was applied a second time.
        assert again.projector.rejected["replayed"] == 0

        agents = await again.agents.lookup(LOCAL_CALLER, LookupInput(semantic_address="bzzz://*"))
        assert sorted(m["id"] for m in agents["matches"]) == ["boss", "dev", "rev"]
        # Their sessions did not survive the restart; the agents did.
        assert {m["status"] for m in agents["matches"]} == {"offline"}
        dev = await again.agents.get(LOCAL_CALLER, GetInput(address="bzzz://dev/tasks"))
        assert [(t["id"], t["status"]) for t in dev["content"]["tasks"]] == [
            (flows.done_task, "completed")
        ]
        assert dev["content"]["agent_info"]["performance"] > 0.9
        rev = await again.agents.get(LOCAL_CALLER, GetInput(address="bzzz://rev"))
        assert [t["id"] for t in rev["content"]["current_tasks"]] == [flows.open_task]
        boss = await again.agents.get(LOCAL_CALLER, GetInput(address="bzzz://boss/inbox"))
        assert len(boss["content"]["messages"]) == 3

        thread = await again.agents.get(
            LOCAL_CALLER, GetInput(address=f"bzzz://*/threads/{flows.thread_id}")
        )
        content = thread["content"]["thread"]
        assert content["participants"] == ["boss", "dev"]
        question, decision = content["messages"]
        assert (question["id"], decision["messageType"]) == (flows.question_id, "decision")
        assert content["summary"] is not None

        # A subscription without a webhook ended with its session (the node's stop); the
        # webhook subscription lives on with what it collected and its queue.
        with pytest.raises(InvalidParameters, match="no subscription"):
            await again.subscriptions.events(LOCAL_CALLER, flows.subscription_id)
        events = await again.subscriptions.events(LOCAL_CALLER, flows.webhook_subscription_id)
        assert len(events["events"]) == 2
        deliveries = await again.subscriptions.deliveries()
        assert len(deliveries) == 2
        assert {d.status for d in deliveries} == {"pending"}

        # A session may take its agent back and carry on where it left off.
        await again.agents.announce(
            Caller("s-dev2"), AnnounceInput(agent_id="dev", role="developer")
        )
        listed = await again.conversations.thread(Caller("s-dev2"), ThreadInput(action="list"))
        assert [t["id"] for t in listed["result"]] == [flows.thread_id]


async def test_a_new_node_replays_the_log_to_the_same_state(
    store_node: Node, memory_bus: InMemoryBus, tmp_path: Path
) -> None:
    await run_main_flows(store_node)
    fresh = load_settings(environ={}, overrides={"node": {"data_dir": str(tmp_path / "fresh")}})

    async with Node(fresh, bus=memory_bus) as newcomer:
        await store_node.projector.wait_for_sequence(await memory_bus.last_sequence(), within=10)
        skip = BOOKKEEPING | NODE_LOCAL

        assert await snapshot(newcomer, skip) == await snapshot(store_node, skip)
        assert newcomer.node_id != store_node.node_id
