"""Announcements applied many to a batch end as they do one to a batch.

A batch reads the rows its announcements name in one query before it applies them, and finds
the rows it adds without flushing: the same ids, look-alikes, holders and offline agents must
give the same outcomes and rows as when each envelope is a batch of its own.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bzzz import domain
from bzzz.network.envelope import Envelope, seal
from bzzz.network.identity import NodeIdentity
from bzzz.store.batch import BatchContext, apply_batch
from bzzz.store.database import Database
from bzzz.store.models import AgentRow
from bzzz.store.projection import ProjectionLimits

NODE = NodeIdentity.generate()
# Each envelope a second after the one made before it: last activity follows the log.
CLOCK = itertools.count()
T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _sealed(kind: str, subject: str, payload: dict[str, Any]) -> Envelope:
    at = T0 + timedelta(seconds=next(CLOCK))
    return seal(NODE, "main", kind, subject, payload, now=at)


def _announced(agent_id: str, session: str, role: str = "architect", **extra: Any) -> Envelope:
    payload = {"agent_id": agent_id, "role": role, "capabilities": ["x"], "session_id": session,
               "max_tasks": 3, "metadata": {}, **extra}  # fmt: skip
    return _sealed("agent.announced", f"bzzz.main.p._.agent.{agent_id}", payload)


def _offline(agent_id: str, session: str) -> Envelope:
    payload = {"agent_ids": [agent_id], "session_id": session, "reason": "session ended"}
    return _sealed("agent.offline", f"bzzz.main.p._.agent.{agent_id}", payload)


def _posted(sender: str, recipient: str) -> Envelope:
    payload = {"message_id": f"m-{next(CLOCK)}", "sender": sender, "message_type": "data",
               "target_address": f"bzzz://{recipient}", "priority": "medium",
               "content": {"n": 1}, "recipients": [recipient]}  # fmt: skip
    return _sealed("message.posted", f"bzzz.main.p._.msg.{sender}", payload)


# Applied before the batches under test: rows the batch finds in the store, not in itself.
BEFORE = [_announced("PRE-1", "s1"), _announced("Gone", "s1"), _offline("Gone", "s1")]

BATCH = [
    _posted("PRE-1", "Gone"),  # older than PRE-1's announcement below: overwritten by it
    _announced("ISO-A", "s1"),
    _announced("iso-a", "s2"),  # a look-alike of a row this batch added: refused
    _announced("ISO-A", "s1", role="reviewer"),  # its own session: updated
    _announced("ISO-A", "s2"),  # held by s1: refused
    _announced("pre-1", "s2"),  # a look-alike of a stored row: refused
    _announced("PRE-1", "s1", role="tester"),  # a stored row, updated
    _announced("gone", "s2"),  # the stored look-alike is offline: free
    _offline("ISO-A", "s1"),
    _announced("iso-a", "s2"),  # ISO-A is offline now: free
    _announced("Gone", "s1"),  # a look-alike is live since this batch: refused
    _announced("B", "s1"),
    _posted("B", "PRE-1"),  # newer than B's announcement: B's last activity
]
MALFORMED = _announced("C", "s1", max_tasks=0)


async def _state(url: str, batches: list[list[Envelope]]) -> tuple[list[Any], list[Any]]:
    """Apply ``batches`` in turn (fast path, else envelope by envelope as the projector
    does); the outcomes in order and the agent rows."""
    if url.startswith("sqlite"):
        Path(url.split(":///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
    db = Database(url)
    await db.open()
    outcomes: list[Any] = []
    seq = 0
    try:
        for envelopes in [[env] for env in BEFORE] + batches:
            numbered = [(env, seq := seq + 1) for env in envelopes]
            ctx = BatchContext(NODE.node_id, ProjectionLimits(), None)
            try:
                result = await db.write(lambda s, n=numbered, c=ctx: apply_batch(s, n, c))
            except Exception:
                result = await db.write(
                    lambda s, n=numbered, c=ctx: apply_batch(s, n, c, isolate=True)
                )
            outcomes += [result.outcomes[env.id] for env in envelopes]
        async with db.session() as session:
            rows = (await session.scalars(select(AgentRow).order_by(AgentRow.id))).all()
            agents = [
                (r.id, r.role, r.status, r.session_id, r.canonical_id, r.last_activity)
                for r in rows
            ]
    finally:
        await db.close()
    return outcomes[len(BEFORE) :], agents


@pytest.mark.parametrize("malformed", [False, True], ids=["fast", "isolated"])
async def test_announcements_in_one_batch_end_as_one_to_a_batch(
    new_store: Callable[[str], Awaitable[str]], malformed: bool
) -> None:
    envelopes = [*BATCH, MALFORMED] if malformed else BATCH
    together = await _state(await new_store("together"), [envelopes])
    apart = await _state(await new_store("apart"), [[env] for env in envelopes])

    assert together == apart
    outcomes, agents = together
    refused = [n for n, outcome in enumerate(outcomes) if not outcome["ok"]]
    assert refused == [2, 4, 5, 10, 13] if malformed else [2, 4, 5, 10]
    last_activity = {a[0]: a[5] for a in agents}
    assert last_activity["B"] == envelopes[12].timestamp  # its post, after its announcement
    assert last_activity["PRE-1"] == envelopes[6].timestamp  # its announcement, after its post
    assert {a[0]: a[1:3] for a in agents} == {
        "B": ("architect", "idle"),
        "Gone": ("architect", domain.AgentStatus.OFFLINE.value),
        "ISO-A": ("reviewer", domain.AgentStatus.OFFLINE.value),
        "PRE-1": ("tester", "idle"),
        "gone": ("architect", "idle"),
        "iso-a": ("architect", "idle"),
    }
