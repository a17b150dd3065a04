"""Applying an envelope again changes nothing, on SQLite and on PostgreSQL."""

from __future__ import annotations

import pytest
from ulid import ULID

from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.node.core import Node
from bzzz.schemas import GetInput, PostInput

from .support import RecordingBus, run_main_flows, snapshot


@pytest.fixture
def memory_bus() -> RecordingBus:
    """The node's log, remembering what was published so the test can publish it again."""
    return RecordingBus()


async def republish(node: Node, bus: RecordingBus, envelopes: list[tuple[str, bytes]]) -> None:
    """Publish the same bytes again under new message ids and wait until they are applied."""
    for subject, data in envelopes:
        await bus.publish(subject, data, f"again-{ULID()}")
    await node.projector.wait_for_sequence(await bus.last_sequence(), within=10)


async def test_replaying_the_whole_log_changes_nothing(
    store_node: Node, memory_bus: RecordingBus
) -> None:
    await run_main_flows(store_node)
    before = await snapshot(store_node)
    log = list(memory_bus.published)
    assert len(log) > 10  # the flows' envelopes, as published

    await republish(store_node, memory_bus, log)

    assert await snapshot(store_node) == before
    assert store_node.projector.rejected["replayed"] == len(log)


async def test_a_task_assignment_applied_twice_creates_one_task(
    store_node: Node, memory_bus: RecordingBus
) -> None:
    flows = await run_main_flows(store_node)
    await store_node.conversations.post(
        Caller("s-boss"),
        PostInput(target_address="bzzz://dev", message_type="task_assignment", content={}),
    )
    assignment = memory_bus.published[-1]

    # Twice in one batch, then once more in a batch of its own.
    await republish(store_node, memory_bus, [assignment, assignment])
    await republish(store_node, memory_bus, [assignment])

    dev = await store_node.agents.get(LOCAL_CALLER, GetInput(address="bzzz://dev"))
    assert dev["content"]["agent_info"]["active_tasks"] == 1
    assert len(dev["content"]["current_tasks"]) == 1
    inbox = await store_node.agents.get(LOCAL_CALLER, GetInput(address="bzzz://dev/inbox"))
    kinds = [m["message_type"] for m in inbox["content"]["messages"]]
    assert kinds.count("task_assignment") == 2  # the one from the flows, and this one
    events = await store_node.subscriptions.events(LOCAL_CALLER, flows.subscription_id)
    assert [e["event_type"] for e in events["events"]].count("task_assignment") == 3
