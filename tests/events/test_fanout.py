"""The cost of a mass disconnect grows with the events delivered, not agents x subscriptions."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from contextlib import AsyncExitStack
from typing import Any

from mcp import Client
from sqlalchemy import func, select

from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.mcp.server import build_server
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, SubscribeInput
from bzzz.store.models import Base

CROWD = 1000
BOUND = 60  # seconds: generous on a shared 2-core machine; the old fan-out took minutes


async def in_chunks(calls: Iterable[Awaitable[Any]], size: int = 100) -> None:
    pending = list(calls)
    for first in range(0, len(pending), size):
        await asyncio.gather(*pending[first : first + size])


async def rows(node: Node) -> dict[str, int]:
    counts = {}
    async with node.db.session() as session:
        for table in Base.metadata.sorted_tables:
            counted = await session.scalar(select(func.count()).select_from(table))
            counts[table.name] = int(counted or 0)
    return counts


async def crowd(node: Node, session: str) -> None:
    """``CROWD`` agents of ``session`` (a re-announce of one it holds updates it)."""
    caller = Caller(session)
    await in_chunks(
        node.agents.announce(caller, AnnounceInput(agent_id=f"agent-{n}", role="worker"))
        for n in range(CROWD)
    )


async def subscriptions(node: Node, session: str, *, per_agent: bool) -> None:
    caller = Caller(session)
    await in_chunks(
        node.subscriptions.subscribe(
            caller,
            SubscribeInput(
                event_types=["agent_announcement"],
                filter_address=f"bzzz://agent-{n}" if per_agent else None,
            ),
        )
        for n in range(CROWD)
    )


def added(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {name: after[name] - before[name] for name in after if after[name] != before[name]}


async def test_a_session_with_many_agents_and_subscriptions_disconnects_in_bounded_rows(
    node: Node,
) -> None:
    server, sessions = build_server(node)
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(Client(server, mode="legacy"))
        await client.call_tool("bzzz_announce", {"agent_id": "agent-0", "role": "worker"})
        [key] = sessions.connections
        await crowd(node, key)
        await subscriptions(node, key, per_agent=False)
        before = await rows(node)
        assert before["subscriptions"] == CROWD
        async with asyncio.timeout(BOUND):
            await stack.aclose()  # the session ends: its subscriptions, then its agents
        after = await rows(node)

    offline = [a for a in node.agents.directory.matching(**_ANY) if a.status == "offline"]
    assert len(offline) == CROWD
    change = added(before, after)
    assert change.get("subscription_events", 0) == 0
    assert change.get("webhook_deliveries", 0) == 0
    assert change["subscriptions"] == -CROWD
    # One activity row per agent and the two envelopes (end, offline): nothing per pair.
    assert sum(n for n in change.values() if n > 0) <= CROWD + 10


async def test_a_disconnect_seen_by_another_sessions_subscriptions_costs_what_they_match(
    node: Node,
) -> None:
    await crowd(node, "crowd")
    await subscriptions(node, "watcher", per_agent=True)  # each follows one agent
    before = await rows(node)

    async with asyncio.timeout(BOUND):
        await node.subscriptions.end_for_session("crowd")
        gone = await node.agents.session_ended(Caller("crowd"))

    change = added(before, await rows(node))
    assert len(gone) == CROWD
    # Each subscription got its own agent's offline event, and nothing else.
    assert change["subscription_events"] == CROWD
    watched = await node.subscriptions.subscriptions()
    sample = await node.subscriptions.events(LOCAL_CALLER, watched[0].id)
    [event] = sample["events"]
    assert watched[0].filter_address == f"bzzz://{event['data']['agent']['id']}"


_ANY: dict[str, Any] = {"agent_id": None, "role": None, "project": None, "task": None}
