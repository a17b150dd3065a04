"""Reads of escalations' paging: the pages and acknowledgements of escalations, due deliveries."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from bzzz.store.models import EscalationAckRow, EscalationPageRow, ThreadRow


class PagingRepository:
    """Queries over one session (one transaction)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def pages(self, escalation_ids: Sequence[str]) -> dict[str, list[EscalationPageRow]]:
        """The pages of each escalation, by step."""
        found: dict[str, list[EscalationPageRow]] = {i: [] for i in escalation_ids}
        if not escalation_ids:
            return found
        rows = await self.session.scalars(
            select(EscalationPageRow)
            .where(EscalationPageRow.escalation_id.in_(list(escalation_ids)))
            .order_by(EscalationPageRow.escalation_id, EscalationPageRow.step)
        )
        for row in rows:
            found[row.escalation_id].append(row)
        return found

    async def acks(self, escalation_ids: Sequence[str]) -> dict[str, EscalationAckRow]:
        """The acknowledgement of each escalation that has one."""
        if not escalation_ids:
            return {}
        rows = await self.session.scalars(
            select(EscalationAckRow).where(EscalationAckRow.escalation_id.in_(list(escalation_ids)))
        )
        return {row.escalation_id: row for row in rows}

    async def due_pages(self, origin: str, now: datetime, limit: int) -> list[EscalationPageRow]:
        """This node's pages whose delivery is due (never tried, or failed and due again)."""
        rows = await self.session.scalars(
            select(EscalationPageRow)
            .where(
                EscalationPageRow.origin == origin,
                EscalationPageRow.status.in_(("pending", "failed")),
                or_(
                    EscalationPageRow.next_attempt_at.is_(None),
                    EscalationPageRow.next_attempt_at <= now,
                ),
            )
            .order_by(EscalationPageRow.paged_at)
            .limit(limit)
        )
        return list(rows)

    async def next_attempt(self, origin: str) -> datetime | None:
        """When this node's next failed delivery is due again (None: none waits)."""
        rows = await self.session.scalars(
            select(EscalationPageRow.next_attempt_at)
            .where(
                EscalationPageRow.origin == origin,
                EscalationPageRow.status.in_(("pending", "failed")),
                EscalationPageRow.next_attempt_at.is_not(None),
            )
            .order_by(EscalationPageRow.next_attempt_at)
            .limit(1)
        )
        return rows.first()

    async def sending(self, origin: str) -> list[EscalationPageRow]:
        """This node's pages whose delivery was under way (when it stopped, if it is starting)."""
        rows = await self.session.scalars(
            select(EscalationPageRow).where(
                EscalationPageRow.origin == origin, EscalationPageRow.status == "sending"
            )
        )
        return list(rows)

    async def thread_projects(self, thread_ids: Sequence[str]) -> dict[str, str | None]:
        """The project of each thread (None: it has none), in one query."""
        if not thread_ids:
            return {}
        rows = await self.session.execute(
            select(ThreadRow.id, ThreadRow.metadata_).where(ThreadRow.id.in_(list(thread_ids)))
        )
        found: dict[str, str | None] = {}
        for thread_id, metadata in rows:
            project = (metadata or {}).get("project")
            found[thread_id] = project if isinstance(project, str) else None
        return found

    async def resolvers(self, thread_ids: Sequence[str]) -> dict[str, list[dict[str, str]]]:
        """Each thread's resolutions (who resolved its escalations, and when), oldest first."""
        if not thread_ids:
            return {}
        rows = await self.session.execute(
            select(ThreadRow.id, ThreadRow.decision_log).where(ThreadRow.id.in_(list(thread_ids)))
        )
        return {
            thread_id: [
                {"by": str(e.get("by")), "at": str(e.get("at"))}
                for e in log or []
                if isinstance(e, dict) and e.get("kind") == "resolution"
            ]
            for thread_id, log in rows
        }
