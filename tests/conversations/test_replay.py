"""Threads replayed from the signed log: ``bzzz_get`` with ``as_of``, and the replay's list."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bzzz.clock import ManualClock
from bzzz.errors import InvalidParameters, ThreadNotFound
from bzzz.eventlog import LOCAL_CALLER
from bzzz.network.memory import InMemoryBus
from bzzz.node import Node
from bzzz.schemas import GetInput

from .conftest import NodeFactory, announce, open_thread, say


async def trio(node: Node) -> str:
    await announce(node, "arch", "architect")
    await announce(node, "dev", "developer")
    await announce(node, "rev", "reviewer")
    return await open_thread(node, "arch", "dev", "rev", topic="Storage engine")


async def read(node: Node, thread_id: str, as_of: Any = None) -> dict[str, Any]:
    got = await node.agents.get(
        LOCAL_CALLER,
        GetInput(address=f"bzzz://*/threads/{thread_id}", max_history=50, as_of=as_of),
    )
    content: dict[str, Any] = got["content"]
    return content


async def decide(node: Node, clock: ManualClock, thread_id: str) -> str:
    """A decision every participant agrees with (the thread completes); its message id."""
    await say(node, "dev", thread_id, "Postgres has what reporting needs.")
    clock.advance(10)
    decision = await say(node, "arch", thread_id, "We use PostgreSQL.", kind="decision")
    clock.advance(10)
    await say(node, "dev", thread_id, "Yes.", reply_to=decision["message_id"], stance="agree")
    clock.advance(10)
    await say(node, "rev", thread_id, "Agreed.", reply_to=decision["message_id"], stance="agree")
    message_id: str = decision["message_id"]
    return message_id


async def test_a_thread_read_as_of_before_its_decision_shows_the_state_then(
    make_node: NodeFactory, clock: ManualClock
) -> None:
    async with make_node() as node:
        thread_id = await trio(node)
        clock.advance(10)
        await decide(node, clock, thread_id)
        entries = [e.to_json() for e in await node.agents.history.entries(thread_id)]  # type: ignore[union-attr]
        posts = [e for e in entries if e["type"] == "message.posted"]
        # Just before the last agreement: by time, and by sequence.
        before_time = await read(node, thread_id, as_of=posts[2]["time"])
        before_seq = await read(node, thread_id, as_of=posts[3]["seq"] - 1)
        live = await read(node, thread_id)
        now = await read(node, thread_id, as_of=entries[-1]["seq"])

    for then in (before_time, before_seq):
        thread = then["thread"]
        assert thread["status"] == "active"
        assert thread["consensus"] is None
        assert [m["content"] for m in thread["messages"]] == [
            "Postgres has what reporting needs.", "We use PostgreSQL.", "Yes.",
        ]
        [decision] = thread["decision_log"]
        assert decision["status"] == "proposed"
        assert sorted(decision["agreed"]) == ["arch", "dev"]
        assert [r["agent_id"] for r in thread["messages"][1]["reactions"]] == ["dev"]
    assert before_seq["as_of"]["sequence"] == posts[3]["seq"] - 1
    assert live["thread"]["status"] == "completed"
    assert now["thread"] == live["thread"]
    assert now["as_of"]["sequence"] == entries[-1]["seq"]
