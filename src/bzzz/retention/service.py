"""RetentionService: runs retention and erasure through the log, and each node's own upkeep.

How a run travels, so every node purges the same:

1. The origin reads the log and plans what goes (``stream.py``): posts up to a cut-off
   sequence, memories, and for an erasure the agent's posts and the tasks given to it alone.
2. It states the purged posts' stand-ins (``retention.restated``, ``strip.py``) — before any
   purge, so a node that meets the gap finds them (``network/restate.py``).
3. It publishes ``retention.applied`` (the cut-off times) or ``retention.forget`` (the agent);
   every node's projector applies it in log order (``projection.py``): tombstones, deletions.
4. Only then is the log purged (JetStream purge by subject up to the cut-off sequence; single
   deletions for erasure), and each node, on applying step 3, prunes its own audit chain
   (with a signed anchor) and compacts its store (SQLite VACUUM + WAL truncate; PostgreSQL
   VACUUM), so deleted text leaves the disk.

Purging only posts (by sequence, after their state was re-stated) and memories keeps what a
joining node rebuilds from: agents, threads, tasks, tokens, subscriptions and admission never
leave the log.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from ulid import ULID

from bzzz import domain
from bzzz.clock import Clock, SystemClock
from bzzz.config import RetentionSettings
from bzzz.errors import AgentNotFound, BzzzError, InvalidParameters, PermissionDenied
from bzzz.eventlog import EventLog
from bzzz.network import restate
from bzzz.network.base import Bus
from bzzz.principal import ALL, Principal, Scope, principal
from bzzz.retention import projection
from bzzz.retention.audit import prune_chain
from bzzz.retention.projection import RETENTION_APPLIERS
from bzzz.retention.stream import Plan, plan_erasure, plan_retention
from bzzz.retention.strip import chunks
from bzzz.store.batch import register_appliers
from bzzz.store.database import Database
from bzzz.store.models import AgentRow, AppliedEnvelope, RetentionRunRow, TaskRow

logger = logging.getLogger(__name__)

DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class Cutoffs:
    """The times before which content goes; None keeps that kind forever."""

    messages: datetime | None = None
    events: datetime | None = None
    memory: datetime | None = None
    audit: datetime | None = None

    @classmethod
    def of(cls, settings: RetentionSettings, now: datetime) -> Cutoffs:
        """The cut-offs the settings give at ``now``."""

        def before(days: float) -> datetime | None:
            return now - timedelta(seconds=days * DAY) if days else None

        return cls(
            before(settings.messages_days),
            before(settings.events_days),
            before(settings.memory_days),
            before(settings.audit_days),
        )

    def to_json(self) -> dict[str, str | None]:
        """As the envelope carries them."""
        return {
            "messages": domain.iso(self.messages),
            "events": domain.iso(self.events),
            "memory": domain.iso(self.memory),
            "audit": domain.iso(self.audit),
        }


def upkeep_principal(node_id: str) -> Principal:
    """The node itself running its hourly retention: an admin of every project."""
    return principal(f"node:{node_id}", "node", [ALL], [ALL], Scope.ADMIN, f"node {node_id}")


class RetentionService:
    """Retention runs, erasure, and this node's part of both (audit pruning, compaction)."""

    def __init__(
        self,
        db: Database,
        bus: Bus,
        log: EventLog,
        settings: RetentionSettings,
        *,
        clock: Clock | None = None,
    ) -> None:
        # Every node applies the runs in log order; they read the messages a batch staged.
        register_appliers(RETENTION_APPLIERS, reads_staged=True)
        self._db = db
        self._bus = bus
        self._log = log
        self.settings = settings
        self.clock: Clock = clock or SystemClock()
        self._wanted = asyncio.Event()
        self._audit_cutoff: datetime | None = None
        self._upkeep: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self.compactions = 0

    # --- what callers ask for ----------------------------------------------------------------

    async def run(self, by: Principal) -> dict[str, Any]:
        """Apply the retention settings now, on every node and on the log."""
        _require_network_admin(by, "applying retention")
        now = self.clock.now()
        cutoffs = Cutoffs.of(self.settings, now)
        plan = await plan_retention(self._bus, cutoffs.messages, cutoffs.memory, self._log.keyring)
        run_id = str(ULID())
        restated = await self._restate(run_id, plan)
        payload = {
            "run_id": run_id,
            "principal": by.id,
            "cutoffs": cutoffs.to_json(),
            "restated": restated,
            "purges": [list(p) for p in plan.purges],
        }
        outcome = await self._log.emit(projection.APPLIED, projection.KIND, run_id, payload)
        return await self._finish(outcome, plan, restated, {"cutoffs": cutoffs.to_json()})

    async def forget(self, by: Principal, agent_id: str) -> dict[str, Any]:
        """Erase one agent's content on every node and from the log; the agent stays."""
        by.require(Scope.ADMIN, "forgetting an agent")
        async with self._db.session() as session:
            agent = await session.get(AgentRow, agent_id)
            if agent is None:
                raise AgentNotFound(f"no agent '{agent_id[:128]}'", details={"agent_id": agent_id})
            if not by.is_admin_of(agent.project):
                raise PermissionDenied(
                    f"forgetting {agent_id} needs the 'admin' scope over its project",
                    details={"missing": f"project:{agent.project or '*'}"},
                )
            assignments = await _assignment_seqs(session, agent_id)
        plan = await plan_erasure(self._bus, agent_id, assignments, self._log.keyring)
        run_id = str(ULID())
        restated = await self._restate(run_id, plan)
        payload = {"run_id": run_id, "principal": by.id, "agent_id": agent_id}
        outcome = await self._log.emit(projection.FORGET, projection.KIND, run_id, payload)
        return await self._finish(outcome, plan, restated, {"agent_id": agent_id})

    async def _restate(self, run_id: str, plan: Plan) -> int:
        parts = chunks(plan.stand_ins)
        for n, entries in enumerate(parts):
            outcome = await self._log.emit(
                restate.TYPE, restate.KIND, f"{run_id}-{n}", {"run_id": run_id, "entries": entries}
            )
            if not outcome.get("ok"):
                raise BzzzError(f"the network refused the stand-ins: {outcome.get('reason')}")
        return len(plan.stand_ins)

    async def _finish(
        self, outcome: dict[str, Any], plan: Plan, restated: int, shown: dict[str, Any]
    ) -> dict[str, Any]:
        if not outcome.get("ok"):
            raise InvalidParameters(f"the network refused it: {outcome.get('reason')}")
        # The nodes applied (or will apply) the tombstones; now the log lets go of the content.
        for kind, key, before in plan.purges:
            await self._bus.purge(kind, key, before_seq=before)
        for seq in plan.deletions:
            await self._bus.delete(seq)
        await self.settled()
        return {
            **shown,
            "store": outcome.get("counts", {}),
            "stream": {"removed": plan.removed, "restated": restated},
            "node_id": self._log.node_id,
        }

    # --- this node's part: audit pruning and compaction, after each applied run --------------

    def on_outcomes(self, outcomes: dict[str, Any]) -> None:
        """Projector listener: a run or erasure was applied here; do this node's part."""
        applied = [o for o in outcomes.values() if o.get("retention") in ("applied", "forgotten")]
        if not applied:
            return
        for outcome in applied:
            audit = (outcome.get("cutoffs") or {}).get("audit")
            if audit:
                self._audit_cutoff = datetime.fromisoformat(audit)
        self._wanted.set()
        self._idle.clear()
        if self._upkeep is None or self._upkeep.done():
            self._upkeep = asyncio.create_task(self._do_upkeep(), name="bzzz-retention-upkeep")

    async def _do_upkeep(self) -> None:
        try:
            # Any number of runs applied meanwhile (a replay) cost one compaction.
            while self._wanted.is_set():
                self._wanted.clear()
                cutoff, self._audit_cutoff = self._audit_cutoff, None
                if cutoff is not None:
                    await self._prune_audit(cutoff)
                await self._db.compact()
                self.compactions += 1
        except BzzzError:
            logger.warning("retention upkeep failed on this node; the next run tries again")
        finally:
            self._idle.set()

    async def _prune_audit(self, cutoff: datetime) -> None:
        now, node = self.clock.now(), self._log.node_id
        pruned = await self._db.write_apart(lambda s: prune_chain(s, node, cutoff, now))
        logger.info("audit retention pruned %d records of this node", pruned)

    async def settled(self, within: float = 120.0) -> None:
        """Wait until this node's upkeep of the runs applied so far is done."""
        async with asyncio.timeout(within):
            await self._idle.wait()

    async def close(self) -> None:
        """Stop the upkeep (a compaction under way finishes in its thread)."""
        if self._upkeep is not None and not self._upkeep.done():
            self._upkeep.cancel()
            await asyncio.gather(self._upkeep, return_exceptions=True)

    # --- the hourly job ----------------------------------------------------------------------

    async def run_periodically(self) -> None:
        """Apply the settings every ``interval`` seconds while any is set, until cancelled.

        A run is skipped when any node of the network ran one within the interval (the log
        says so): nodes with the same settings do not purge the same content N times.
        """
        while True:
            await asyncio.sleep(self.settings.interval)
            if not self.settings.any() or await self._ran_recently():
                continue
            try:
                await self.run(upkeep_principal(self._log.node_id))
            except BzzzError as exc:
                logger.warning("the retention run failed (%s); trying again later", exc.message)

    async def _ran_recently(self) -> bool:
        async with self._db.session() as session:
            newest = await session.scalar(
                select(RetentionRunRow.at)
                .where(RetentionRunRow.kind == "retention")
                .order_by(RetentionRunRow.at.desc())
                .limit(1)
            )
        if newest is None:
            return False
        return (self.clock.now() - newest).total_seconds() < 0.9 * self.settings.interval


def _require_network_admin(by: Principal, action: str) -> None:
    by.require(Scope.ADMIN, action)
    if not by.all_projects:
        raise PermissionDenied(
            f"{action} touches every project: it needs an admin of every project",
            details={"missing": "project:*"},
        )


async def _assignment_seqs(session: Any, agent_id: str) -> list[int]:
    """Log sequences of the task assignments others gave this agent (task ids name them)."""
    ids = (
        await session.scalars(
            select(TaskRow.id).where(TaskRow.agent_id == agent_id, TaskRow.assigner != agent_id)
        )
    ).all()
    envelope_ids = {task_id.split("-")[1] for task_id in ids if task_id.count("-") >= 2}
    if not envelope_ids:
        return []
    rows = await session.scalars(
        select(AppliedEnvelope.seq).where(AppliedEnvelope.id.in_(sorted(envelope_ids)))
    )
    return [int(seq) for seq in rows.all()]
