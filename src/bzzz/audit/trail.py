"""AuditTrail: records queued by the callers, appended in batches, chain heads signed and published.

A tool call only puts its record on a queue; one background task appends what has queued in
one transaction (reading the chain's last link inside it, so another process appending to
the same database — a CLI command — keeps the chain whole), and publishes a signed head on
the log at least every ``every`` records or ``interval`` seconds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from bzzz.audit.projection import AUDIT_APPLIERS
from bzzz.audit.records import GENESIS, Action, chain, head_bytes
from bzzz.clock import Clock, SystemClock
from bzzz.errors import BzzzError
from bzzz.network.identity import NodeIdentity
from bzzz.store.batch import register_appliers
from bzzz.store.database import Database
from bzzz.store.models import AuditAnchorRow, AuditRecordRow

logger = logging.getLogger(__name__)

HEAD_TYPE = "audit.head"
HEAD_KIND = "audit"
MAX_BATCH = 500
# How long the writer lets records gather before a batch: one commit for many calls instead
# of one per call (each commit contends with the projector for SQLite's one writer).
LINGER = 0.05

Publish = Callable[[str, str, str, dict[str, Any]], Awaitable[Any]]


class TrailState(StrEnum):
    """Where a trail is in its life."""

    NEW = "new"
    RUNNING = "running"
    CLOSED = "closed"


def last_link(session: Session, node_id: str) -> tuple[int, str]:
    """The seq and hash of a node's newest record: (0, GENESIS) for an empty chain."""
    row = session.execute(
        select(AuditRecordRow.seq, AuditRecordRow.hash)
        .where(AuditRecordRow.node_id == node_id)
        .order_by(AuditRecordRow.seq.desc())
        .limit(1)
    ).first()
    if row is not None:
        return int(row[0]), str(row[1])
    # Retention may have pruned every record: the chain goes on after its anchor.
    anchor = session.get(AuditAnchorRow, node_id)
    return (anchor.seq, anchor.hash) if anchor is not None else (0, GENESIS)


def append(session: Session, node_id: str, actions: list[Action]) -> tuple[int, str]:
    """Chain ``actions`` after the newest record, in one transaction; the new head."""
    seq, prev = last_link(session, node_id)
    rows = []
    for action in actions:
        seq += 1
        record = chain(node_id, seq, prev, action)
        rows.append(record.to_json())
        prev = record.hash
    # One executemany, not an ORM object per record: a batch of 500 is one statement.
    session.execute(insert(AuditRecordRow), rows)
    return seq, prev


def head_payload(identity: NodeIdentity, seq: int, hash_: str) -> dict[str, Any]:
    """The ``audit.head`` envelope's payload: the head and the node's signature of it."""
    return {
        "node_id": identity.node_id,
        "seq": seq,
        "hash": hash_,
        "public_key": identity.public_key_b64,
        "signature": identity.sign(head_bytes(identity.node_id, seq, hash_)),
    }


class AuditTrail:
    """This node's audit trail (``record`` never waits for the database)."""

    def __init__(
        self,
        db: Database,
        identity: NodeIdentity,
        publish: Publish | None,
        *,
        clock: Clock | None = None,
        every: int = 100,
        interval: float = 10.0,
        linger: float = LINGER,
    ) -> None:
        # Every node keeps every node's signed heads: the store applies ``audit.head``.
        register_appliers(AUDIT_APPLIERS)
        self.db = db
        self.identity = identity
        self.clock: Clock = clock or SystemClock()
        self._publish = publish
        self._every = every
        self._interval = interval
        self._linger = linger
        self._queue: asyncio.Queue[Action] = asyncio.Queue()
        self._due = asyncio.Event()
        self._head: tuple[int, str] | None = None
        self._published = 0
        self._unsigned = 0
        self.state = TrailState.NEW
        self.dropped = 0
        # Off (audit.enabled = false) records nothing: a benchmark's baseline, not a deployment.
        self.enabled = True

    @property
    def node_id(self) -> str:
        """The node whose chain this is."""
        return self.identity.node_id

    def record(self, action: Action) -> None:
        """Queue one action for the chain (returns at once)."""
        if not self.enabled:
            return
        if self.state is TrailState.CLOSED:
            logger.warning("audit record after close: %s", action.action)
        self._queue.put_nowait(action)

    async def run(self) -> None:
        """Append queued records and publish heads until cancelled."""
        if self.state is not TrailState.NEW:
            raise RuntimeError(f"the audit trail cannot run from state {self.state}")
        self.state = TrailState.RUNNING
        async with asyncio.TaskGroup() as group:
            group.create_task(self._write_loop())
            group.create_task(self._head_loop())

    async def flush(self) -> None:
        """Wait until every record queued so far is in the database."""
        await self._queue.join()

    async def head(self) -> tuple[int, str]:
        """The chain's newest (seq, hash)."""
        return await self.db.write_apart(lambda s: last_link(s, self.node_id))

    async def close(self, *, publish: bool) -> None:
        """Append what is queued; with ``publish``, sign and publish the final head."""
        running = self.state is TrailState.RUNNING
        self.state = TrailState.CLOSED
        try:
            async with asyncio.timeout(5):
                if running:
                    # The writer may hold a batch while it lingers: let it store everything.
                    await self._queue.join()
                else:
                    await self._write(self._drain([]))
                if publish:
                    await self.publish_head()
        except (BzzzError, TimeoutError):
            logger.warning("the audit trail could not be flushed on close")

    def _drain(self, batch: list[Action]) -> list[Action]:
        while len(batch) < MAX_BATCH and not self._queue.empty():
            batch.append(self._queue.get_nowait())
        return batch

    async def _write_loop(self) -> None:
        while True:
            first = await self._queue.get()
            if self._queue.qsize() < MAX_BATCH:
                await asyncio.sleep(self._linger)
            batch = self._drain([first])
            try:
                await self._write(batch)
            except BzzzError:
                # Counted in ``dropped`` and logged; the trail goes on with the next batch.
                continue

    async def _write(self, batch: list[Action]) -> None:
        if not batch:
            return
        try:
            self._head = await self._append(batch)
            self._unsigned += len(batch)
            if self._unsigned >= self._every:
                self._due.set()
        finally:
            for _ in batch:
                self._queue.task_done()

    async def _append(self, batch: list[Action]) -> tuple[int, str]:
        for attempt in range(3):
            try:
                return await self.db.write_apart(lambda s: append(s, self.node_id, batch))
            except BzzzError:
                # Another process appended the same seq (PostgreSQL): read the chain again.
                if attempt == 2:
                    self.dropped += len(batch)
                    logger.error("%d audit records could not be stored", len(batch))
                    raise
        raise AssertionError("unreachable")

    async def _head_loop(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self._interval):
                    await self._due.wait()
            except TimeoutError:
                pass
            self._due.clear()
            try:
                await self.publish_head()
            except BzzzError:
                logger.warning("could not publish the audit chain head; trying again later")

    async def publish_head(self) -> bool:
        """Sign the newest head and publish it on the log, unless it is published already."""
        self._unsigned = 0
        seq, hash_ = self._head or await self.head()
        if seq == 0 or seq == self._published or self._publish is None:
            return False
        payload = head_payload(self.identity, seq, hash_)
        await self._publish(HEAD_TYPE, HEAD_KIND, self.node_id, payload)
        self._published = seq
        return True
