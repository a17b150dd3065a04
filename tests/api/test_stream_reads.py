"""The event streams' reads: the streams woken together are answered by one query, each with
its own rows in order, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

from bzzz import domain
from bzzz.api.stream_reads import BatchedReads
from bzzz.node import Node
from bzzz.store.database import Database
from bzzz.store.models import EventRow


class _Counted:
    """The node's database, counting the sessions opened through it."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.sessions = 0

    def session(self) -> Any:
        self.sessions += 1
        return self.db.session()


async def _store(node: Node, rows: list[tuple[str, int]]) -> list[int]:
    """Store ``(subscription, n)`` events; their row ids in order."""
    made = [
        EventRow(
            subscription_id=sub_id,
            event_id=f"evt-{sub_id}-{n}",
            event_type="task_assignment",
            payload={"n": n},
            created_at=domain.utcnow(),
        )
        for sub_id, n in rows
    ]
    async with node.db.session() as session:
        session.add_all(made)
        await session.flush()
        return [row.id for row in made]


async def test_streams_asking_together_get_their_own_rows_from_one_read(store_node: Node) -> None:
    ids = await _store(store_node, [("sub-a", 0), ("sub-b", 0), ("sub-a", 1), ("sub-a", 2)])
    db = _Counted(store_node.db)
    reads = BatchedReads(db, batch=2)  # type: ignore[arg-type]

    a, b, a_later, none = await asyncio.gather(
        reads.after("sub-a", 0),
        reads.after("sub-b", 0),
        reads.after("sub-a", ids[0]),
        reads.after("sub-c", 0),
    )

    assert db.sessions == 1
    assert [(row_id, payload["n"]) for row_id, _, payload in a] == [(ids[0], 0), (ids[2], 1)]
    assert [payload["n"] for _, _, payload in b] == [0]
    assert [payload["n"] for _, _, payload in a_later] == [1, 2]
    assert none == []
    alone = await reads.after("sub-a", ids[2])
    assert [(row_id, kind) for row_id, kind, _ in alone] == [(ids[3], "task_assignment")]
