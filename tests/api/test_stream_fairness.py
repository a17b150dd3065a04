"""Streams woken together never starve each other: a stream far ahead in its subscription and
one that has seen nothing yet each get their new event from the shared read (a read cut at its
limit by one subscription's old rows once left both waiting for ever: the task assigned while
a dashboard was open never reached its Live events). On SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio

from sqlalchemy import func, select

from bzzz.api.stream import BATCH, _SharedReads
from bzzz.eventlog import Caller
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, PostInput, SubscribeInput
from bzzz.store.models import EventRow

EARLIER = 2 * BATCH + 10  # more old rows of one subscription than a shared read holds


async def _assign(node: Node, agent: str, n: int) -> None:
    await node.conversations.post(
        Caller("s-boss"),
        PostInput(target_address=f"bzzz://{agent}", message_type="task_assignment",
                  content={"type": "documentation", "description": f"t{n}"}),
    )  # fmt: skip


async def test_a_stream_ahead_and_a_fresh_one_each_get_their_new_event(store_node: Node) -> None:
    node = store_node
    await node.agents.announce(Caller("s-boss"), AnnounceInput(agent_id="boss", role="lead"))
    for worker in ("w1", "w2"):
        await node.agents.announce(
            Caller(f"s-{worker}"), AnnounceInput(agent_id=worker, role="dev", max_tasks=1000)
        )
    every = await node.subscriptions.subscribe(
        Caller("dashboard-1"), SubscribeInput(event_types=["task_assignment"])
    )
    w2 = await node.subscriptions.subscribe(
        Caller("dashboard-2"),
        SubscribeInput(event_types=["task_assignment"], filter_address="bzzz://w2"),
    )
    for n in range(EARLIER):
        await _assign(node, "w1", n)
    async with node.db.session() as session:
        seen = await session.scalar(
            select(func.max(EventRow.id)).where(
                EventRow.subscription_id == every["subscription_id"]
            )
        )
    await _assign(node, "w2", EARLIER)

    reads = _SharedReads(node.db)
    async with asyncio.timeout(10):
        (ahead, _), (fresh, _) = await asyncio.gather(
            reads.after(every["subscription_id"], int(seen or 0)),
            reads.after(w2["subscription_id"], 0),
        )

    assert [kind for _, kind, _ in ahead] == ["task_assignment"]
    assert [kind for _, kind, _ in fresh] == ["task_assignment"]
    assert f'"t{EARLIER}"' in ahead[0][2] and f'"t{EARLIER}"' in fresh[0][2]
