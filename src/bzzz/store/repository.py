"""Reads and writes of the projection, inside one session; rows in, domain dataclasses out.

The rows become dataclasses in ``rows.py``; subscriptions and deliveries are read in
``subscription_repository.py``, the models' ledger in ``llm_repository.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bzzz import domain
from bzzz.domain import ACTIVE_TASK_STATUSES
from bzzz.store.models import (
    ActivityRow,
    AgentRow,
    AppliedEnvelope,
    DeliveryRow,
    EscalationRow,
    EventRow,
    InboxRow,
    MessageRow,
    ParticipantRow,
    ReactionRow,
    SlurpEventRow,
    SlurpSubmissionRow,
    SubscriptionRow,
    TaskRow,
    ThreadRow,
)
from bzzz.store.rows import (
    agent_from_row,
    delivery_from_row,
    escalation_from_row,
    message_from_row,
    slurp_from_row,
    subscription_from_row,
    task_from_row,
    thread_from_row,
)

OPEN_STATUSES = ("active", "paused", "escalated")

WATCHED_STATUSES = ("active", "escalated")


class Repository:
    """Queries over one session (one transaction)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # --- idempotency -------------------------------------------------------------------------

    async def max_applied_seq(self) -> int:
        """The log sequence of the newest applied envelope (0 when none)."""
        value = (await self.session.execute(select(func.max(AppliedEnvelope.seq)))).scalar_one()
        return int(value or 0)

    # --- agents ------------------------------------------------------------------------------

    async def agent(self, agent_id: str) -> domain.Agent | None:
        """One agent by id."""
        row = await self.session.get(AgentRow, agent_id)
        return agent_from_row(row) if row else None

    async def all_agents(self) -> list[domain.Agent]:
        """Every agent (the directory's start-up load)."""
        rows = await self.session.scalars(select(AgentRow))
        return [agent_from_row(row) for row in rows]

    async def activity(self, agent_id: str, limit: int) -> list[domain.Activity]:
        """An agent's recent activity, newest first."""
        rows = await self.session.scalars(
            select(ActivityRow)
            .where(ActivityRow.agent_id == agent_id)
            .order_by(ActivityRow.id.desc())
            .limit(limit)
        )
        return [domain.Activity(r.kind, r.summary, r.ref, r.at) for r in rows]

    # --- tasks -------------------------------------------------------------------------------

    async def tasks(self, agent_id: str, *, active_only: bool, limit: int) -> list[domain.Task]:
        """An agent's tasks, newest first."""
        query = select(TaskRow).where(TaskRow.agent_id == agent_id)
        if active_only:
            query = query.where(TaskRow.status.in_(ACTIVE_TASK_STATUSES))
        rows = await self.session.scalars(query.order_by(TaskRow.start_time.desc()).limit(limit))
        return [task_from_row(r) for r in rows]

    async def tasks_assigned_by(self, assigner: str, *, limit: int) -> list[domain.Task]:
        """Tasks that ``assigner`` gave (to any agent), newest first."""
        query = select(TaskRow).where(TaskRow.assigner == assigner)
        rows = await self.session.scalars(query.order_by(TaskRow.start_time.desc()).limit(limit))
        return [task_from_row(r) for r in rows]

    async def task(self, task_id: str) -> domain.Task | None:
        """One task."""
        row = await self.session.get(TaskRow, task_id)
        return task_from_row(row) if row else None

    async def active_tasks_between(self, assignee: str, assigner: str) -> list[domain.Task]:
        """Active tasks that ``assigner`` gave to ``assignee``."""
        rows = await self.session.scalars(
            select(TaskRow).where(
                TaskRow.agent_id == assignee,
                TaskRow.assigner == assigner,
                TaskRow.status.in_(ACTIVE_TASK_STATUSES),
            )
        )
        return [task_from_row(r) for r in rows]

    # --- messages ----------------------------------------------------------------------------

    async def inbox(self, agent_id: str, limit: int) -> list[domain.Message]:
        """Messages delivered to an agent, newest first."""
        rows = await self.session.scalars(
            select(MessageRow)
            .join(InboxRow, InboxRow.message_id == MessageRow.id)
            .where(InboxRow.agent_id == agent_id)
            .order_by(InboxRow.posted_at.desc(), MessageRow.id.desc())
            .limit(limit)
        )
        return [message_from_row(r) for r in rows]

    async def thread_messages(
        self, thread_id: str, limit: int | None = None
    ) -> list[domain.Message]:
        """A thread's messages, oldest first (the newest ``limit`` when given)."""
        query = select(MessageRow).where(MessageRow.thread_id == thread_id)
        if limit is None:
            rows = await self.session.scalars(query.order_by(MessageRow.id))
            return [message_from_row(r) for r in rows]
        newest = await self.session.scalars(query.order_by(MessageRow.id.desc()).limit(limit))
        return [message_from_row(r) for r in reversed(newest.all())]

    # --- threads -----------------------------------------------------------------------------

    async def thread(self, thread_id: str) -> domain.Thread | None:
        """One thread with its participants and escalation history."""
        row = await self.session.get(ThreadRow, thread_id)
        if row is None:
            return None
        participants = await self.session.scalars(
            select(ParticipantRow)
            .where(ParticipantRow.thread_id == thread_id)
            .order_by(ParticipantRow.joined_at, ParticipantRow.agent_id)
        )
        escalations = await self.session.scalars(
            select(EscalationRow)
            .where(EscalationRow.thread_id == thread_id)
            .order_by(EscalationRow.triggered_at, EscalationRow.id)
        )
        return thread_from_row(row, participants.all(), escalations.all())

    async def message(self, message_id: str) -> domain.Message | None:
        """One message."""
        row = await self.session.get(MessageRow, message_id)
        return message_from_row(row) if row else None

    async def reactions(
        self, thread_id: str, message_ids: Sequence[str] | None = None
    ) -> list[domain.Reaction]:
        """A thread's stances, oldest first; with ``message_ids`` only those taken by or on
        these messages (what a view of them shows, however long the thread)."""
        query = select(ReactionRow).where(ReactionRow.thread_id == thread_id)
        if message_ids is not None:
            ids = list(message_ids)
            query = query.where(
                or_(ReactionRow.message_id.in_(ids), ReactionRow.target_id.in_(ids))
            )
        rows = await self.session.scalars(query.order_by(ReactionRow.id))
        return [
            domain.Reaction(r.message_id, r.target_id, r.agent_id, r.stance, r.source, r.at)
            for r in rows
        ]

    async def idle_threads(self, before: datetime, limit: int = 1000) -> list[str]:
        """Active or paused threads with no activity since ``before`` (escalated ones wait)."""
        rows = await self.session.scalars(
            select(ThreadRow.id)
            .where(ThreadRow.status.in_(("active", "paused")), ThreadRow.last_activity <= before)
            .order_by(ThreadRow.last_activity)
            .limit(limit)
        )
        return list(rows)

    async def thread_facts(
        self, thread_id: str | None = None, *, disagreements: bool = True, tasks: bool = True
    ) -> list[domain.ThreadFacts]:
        """What the escalation rules need, for one thread or every watched thread.

        ``disagreements`` / ``tasks`` False skip what no rule looks at (one query each).
        """
        query = select(
            ThreadRow.id,
            ThreadRow.status,
            ThreadRow.created_at,
            ThreadRow.last_activity,
            ThreadRow.last_progress_at,
            ThreadRow.epoch_at,
        ).where(ThreadRow.status.in_(WATCHED_STATUSES))
        if thread_id is not None:
            query = query.where(ThreadRow.id == thread_id)
        facts = {
            r.id: domain.ThreadFacts(
                thread_id=r.id,
                status=r.status,
                created_at=r.created_at,
                last_activity=r.last_activity,
                last_progress_at=r.last_progress_at or r.created_at,
                epoch_at=r.epoch_at or r.created_at,
            )
            for r in await self.session.execute(query)
        }
        if facts:
            if disagreements:
                await self._add_disagreements(facts, thread_id)
            if tasks:
                await self._add_tasks(facts, thread_id)
            await self._add_open_rules(facts, thread_id)
        return list(facts.values())

    def _watched(self, column: Any, thread_id: str | None) -> Any:
        # One thread: its id; every thread: a join on the watched ones (never a huge IN list).
        if thread_id is not None:
            return column == thread_id
        watched = select(ThreadRow.id).where(ThreadRow.status.in_(WATCHED_STATUSES))
        return column.in_(watched)

    async def _add_disagreements(
        self, facts: dict[str, domain.ThreadFacts], thread_id: str | None
    ) -> None:
        query = select(ReactionRow.thread_id, ReactionRow.at).where(
            ReactionRow.stance == "disagree", self._watched(ReactionRow.thread_id, thread_id)
        )
        for row in await self.session.execute(query):
            fact = facts.get(row.thread_id)
            if fact is not None and row.at >= fact.epoch_at:
                fact.disagreements.append(row.at)

    async def _add_tasks(self, facts: dict[str, domain.ThreadFacts], thread_id: str | None) -> None:
        query = select(TaskRow.thread_id, TaskRow.end_time, TaskRow.status).where(
            TaskRow.status.in_(("completed", "failed")),
            TaskRow.end_time.is_not(None),
            self._watched(TaskRow.thread_id, thread_id),
        )
        for row in await self.session.execute(query):
            fact = facts.get(row.thread_id or "")
            if fact is not None and row.end_time >= fact.epoch_at:
                fact.tasks.append((row.end_time, row.status == "failed"))

    async def _add_open_rules(
        self, facts: dict[str, domain.ThreadFacts], thread_id: str | None
    ) -> None:
        query = select(EscalationRow.thread_id, EscalationRow.rule).where(
            EscalationRow.resolved.is_(False), self._watched(EscalationRow.thread_id, thread_id)
        )
        for row in await self.session.execute(query):
            fact = facts.get(row.thread_id)
            if fact is not None:
                fact.open_rules.add(row.rule)

    # --- escalations and SLURP events ----------------------------------------------------------

    async def escalation(self, escalation_id: str) -> domain.Escalation | None:
        """One escalation."""
        row = await self.session.get(EscalationRow, escalation_id)
        return escalation_from_row(row) if row else None

    async def escalations(
        self, *, open_only: bool = False, origin: str | None = None, limit: int = 100
    ) -> list[domain.Escalation]:
        """Escalations, newest first."""
        query = select(EscalationRow)
        if open_only:
            query = query.where(EscalationRow.resolved.is_(False))
        if origin is not None:
            query = query.where(EscalationRow.origin == origin)
        rows = await self.session.scalars(
            query.order_by(EscalationRow.triggered_at.desc(), EscalationRow.id.desc()).limit(limit)
        )
        return [escalation_from_row(r) for r in rows]

    async def slurp_events(
        self, node_id: str, status: str | None = None, limit: int = 100
    ) -> list[domain.SlurpEvent]:
        """SLURP context events, newest first, with ``node_id``'s submission state."""
        query = select(SlurpEventRow, SlurpSubmissionRow).outerjoin(
            SlurpSubmissionRow, SlurpSubmissionRow.event_id == SlurpEventRow.id
        )
        if status == "remote":
            query = query.where(SlurpEventRow.origin != node_id)
        elif status == "untracked":
            query = query.where(
                SlurpEventRow.origin == node_id, SlurpSubmissionRow.event_id.is_(None)
            )
        elif status is not None:
            query = query.where(
                SlurpEventRow.origin == node_id, SlurpSubmissionRow.status == status
            )
        rows = await self.session.execute(
            query.order_by(SlurpEventRow.created_at.desc(), SlurpEventRow.id.desc()).limit(limit)
        )
        return [slurp_from_row(event, submission, node_id) for event, submission in rows.all()]

    async def consensus_origin(self, thread_id: str) -> str | None:
        """The node whose envelope completed the thread's consensus (None: none recorded)."""
        query = select(ThreadRow.consensus_origin).where(ThreadRow.id == thread_id)
        origin: str | None = (await self.session.execute(query)).scalar_one_or_none()
        return origin

    async def consensus_without_slurp(self, origin: str, limit: int = 100) -> list[str]:
        """Threads whose consensus ``origin`` completed but that have no SLURP event yet."""
        has_event = select(SlurpEventRow.thread_id)
        rows = await self.session.scalars(
            select(ThreadRow.id)
            .where(
                ThreadRow.status == "completed",
                ThreadRow.consensus.is_not(None),
                ThreadRow.consensus_origin == origin,
                ThreadRow.id.not_in(has_event),
            )
            .limit(limit)
        )
        return list(rows)

    async def due_slurp_events(
        self, origin: str, now: datetime, limit: int = 64
    ) -> list[domain.SlurpEvent]:
        """This node's SLURP events whose submission is pending or failed and due again."""
        rows = await self.session.execute(
            select(SlurpEventRow, SlurpSubmissionRow)
            .join(SlurpSubmissionRow, SlurpSubmissionRow.event_id == SlurpEventRow.id)
            .where(
                SlurpEventRow.origin == origin,
                SlurpSubmissionRow.status.in_(("pending", "failed")),
                SlurpSubmissionRow.next_attempt_at <= now,
            )
            .order_by(SlurpSubmissionRow.next_attempt_at)
            .limit(limit)
        )
        return [slurp_from_row(event, submission, origin) for event, submission in rows.all()]

    async def owe_slurp_submission(self, event_id: str, now: datetime) -> None:
        """Note, before its event is published, that this node owes its submission."""
        self.session.add(
            SlurpSubmissionRow(
                event_id=event_id,
                status="pending",
                attempts=0,
                next_attempt_at=now,
                last_error=None,
                created_at=now,
                submitted_at=None,
            )
        )

    async def forget_slurp_submission(self, event_id: str) -> None:
        """Drop the submission of an event the log refused."""
        await self.session.execute(
            delete(SlurpSubmissionRow).where(SlurpSubmissionRow.event_id == event_id)
        )

    async def record_slurp_attempt(
        self,
        event_id: str,
        *,
        status: str,
        next_attempt_at: datetime,
        error: str | None,
        submitted_at: datetime | None,
    ) -> None:
        """Record one submission attempt (node-local bookkeeping, like webhook deliveries)."""
        await self.session.execute(
            update(SlurpSubmissionRow)
            .where(SlurpSubmissionRow.event_id == event_id)
            .values(
                status=status,
                attempts=SlurpSubmissionRow.attempts + 1,
                next_attempt_at=next_attempt_at,
                last_error=error,
                submitted_at=submitted_at,
            )
        )

    async def threads_of(self, agent_ids: Sequence[str], limit: int = 100) -> list[domain.Thread]:
        """Threads any of the agents takes part in (or took), most recently active first."""
        ids = select(ParticipantRow.thread_id).where(ParticipantRow.agent_id.in_(list(agent_ids)))
        return await self._threads(select(ThreadRow).where(ThreadRow.id.in_(ids)), limit)

    async def recent_threads(self, limit: int = 100) -> list[domain.Thread]:
        """The most recently active threads of the network."""
        return await self._threads(select(ThreadRow), limit)

    async def _threads(self, query: Any, limit: int) -> list[domain.Thread]:
        rows = (
            await self.session.scalars(query.order_by(ThreadRow.last_activity.desc()).limit(limit))
        ).all()
        escalations: dict[str, list[EscalationRow]] = {}
        found = await self.session.scalars(
            select(EscalationRow)
            .where(EscalationRow.thread_id.in_([row.id for row in rows]))
            .order_by(EscalationRow.triggered_at, EscalationRow.id)
        )
        for escalation in found:
            escalations.setdefault(escalation.thread_id, []).append(escalation)
        result = []
        for row in rows:
            parts = await self.session.scalars(
                select(ParticipantRow).where(ParticipantRow.thread_id == row.id)
            )
            result.append(thread_from_row(row, parts.all(), escalations.get(row.id, [])))
        return result

    async def count_active_threads(self, creators: Sequence[str] | None = None) -> int:
        """Threads that are not completed (only those ``creators`` created, when given)."""
        query = (
            select(func.count())
            .select_from(ThreadRow)
            .where(ThreadRow.status.in_(("active", "paused", "escalated")))
        )
        if creators is not None:
            query = query.where(ThreadRow.creator.in_(list(creators)))
        return int((await self.session.execute(query)).scalar_one())

    # --- subscriptions, events, deliveries ---------------------------------------------------

    async def subscription(self, subscription_id: str) -> domain.Subscription | None:
        """One subscription."""
        row = await self.session.get(SubscriptionRow, subscription_id)
        return subscription_from_row(row) if row else None

    async def subscription_events(
        self, subscription_id: str, limit: int, after_id: int = 0
    ) -> list[tuple[int, dict[str, Any]]]:
        """Events recorded for a subscription: (sequence, event body), oldest first."""
        rows = await self.session.scalars(
            select(EventRow)
            .where(EventRow.subscription_id == subscription_id, EventRow.id > after_id)
            .order_by(EventRow.id.desc())
            .limit(limit)
        )
        return [(r.id, dict(r.payload)) for r in reversed(rows.all())]

    async def due_deliveries(self, now: datetime, limit: int) -> list[domain.Delivery]:
        """Pending webhook deliveries whose next attempt is due."""
        rows = await self.session.scalars(
            select(DeliveryRow)
            .where(DeliveryRow.status == "pending", DeliveryRow.next_attempt_at <= now)
            .order_by(DeliveryRow.next_attempt_at)
            .limit(limit)
        )
        return [delivery_from_row(r) for r in rows]

    async def next_delivery_time(self) -> datetime | None:
        """When the earliest pending delivery is due."""
        query = select(func.min(DeliveryRow.next_attempt_at)).where(DeliveryRow.status == "pending")
        value = (await self.session.execute(query)).scalar_one_or_none()
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value

    async def deliveries(
        self, status: str | None = None, limit: int = 100
    ) -> list[domain.Delivery]:
        """Deliveries, newest first, optionally of one status (pending, delivered, dead)."""
        query = select(DeliveryRow)
        if status is not None:
            query = query.where(DeliveryRow.status == status)
        rows = await self.session.scalars(query.order_by(DeliveryRow.id.desc()).limit(limit))
        return [delivery_from_row(r) for r in rows]

    async def record_attempt(
        self,
        delivery_id: int,
        *,
        status: str,
        next_attempt_at: datetime,
        error: str | None,
        finished_at: datetime | None,
    ) -> None:
        """Record the outcome of one delivery attempt (of a delivery still pending: one whose
        subscription was marked dead meanwhile stays a dead letter)."""
        await self.session.execute(
            update(DeliveryRow)
            .where(DeliveryRow.id == delivery_id, DeliveryRow.status == "pending")
            .values(
                status=status,
                attempts=DeliveryRow.attempts + 1,
                next_attempt_at=next_attempt_at,
                last_error=error,
                finished_at=finished_at,
            )
        )
