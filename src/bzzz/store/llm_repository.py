"""Reads of the cost ledger and of hosted agents' memories (rows in, plain data out)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bzzz.store.models import CostRow, KnowledgeRow, MemoryRow, MessageRow


@dataclass(frozen=True, slots=True)
class ModelSpend:
    """One model's share of a period in the ledger."""

    model: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_nanos: int


@dataclass(frozen=True, slots=True)
class Memory:
    """One remembered episode or thread memory."""

    id: str
    agent_id: str
    project: str
    kind: str
    thread_id: str | None
    topic: str
    participants: list[str]
    summary: str
    outcome: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Knowledge:
    """One entry of a project's knowledge (a decision, an insight, an episode's summary)."""

    id: str
    project: str
    kind: str
    source: str
    text: str
    created_at: datetime


def _knowledge(row: KnowledgeRow) -> Knowledge:
    return Knowledge(row.id, row.project, row.kind, row.source, row.text, row.created_at)


def _memory(row: MemoryRow) -> Memory:
    return Memory(
        id=row.id,
        agent_id=row.agent_id,
        project=row.project,
        kind=row.kind,
        thread_id=row.thread_id,
        topic=row.topic,
        participants=list(row.participants),
        summary=row.summary,
        outcome=row.outcome,
        created_at=row.created_at,
    )


class LLMRepository:
    """Queries over one session."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def spent(self, node_id: str, day: str, month: str) -> tuple[int, int]:
        """What a node has spent (nano-USD) on ``day`` and in ``month``."""
        totals = []
        for column, value in ((CostRow.day, day), (CostRow.month, month)):
            query = select(func.coalesce(func.sum(CostRow.cost_nanos), 0)).where(
                CostRow.node_id == node_id, column == value
            )
            totals.append(int((await self.session.execute(query)).scalar_one()))
        return totals[0], totals[1]

    async def usage(self, period: str, value: str, node_id: str | None) -> list[ModelSpend]:
        """Per-model calls, tokens and cost of a day or month (one node's, or everyone's)."""
        column = CostRow.day if period == "day" else CostRow.month
        query = (
            select(
                CostRow.model,
                func.count(),
                func.coalesce(func.sum(CostRow.prompt_tokens), 0),
                func.coalesce(func.sum(CostRow.completion_tokens), 0),
                func.coalesce(func.sum(CostRow.cost_nanos), 0),
            )
            .where(column == value)
            .group_by(CostRow.model)
            .order_by(CostRow.model)
        )
        if node_id is not None:
            query = query.where(CostRow.node_id == node_id)
        rows = await self.session.execute(query)
        return [ModelSpend(m, int(c), int(p), int(o), int(n)) for m, c, p, o, n in rows]

    async def daily_totals(self, since_day: str, node_id: str | None) -> list[tuple[str, int, int]]:
        """(day, calls, cost nano-USD) of each day from ``since_day`` on that has any cost."""
        query = (
            select(CostRow.day, func.count(), func.coalesce(func.sum(CostRow.cost_nanos), 0))
            .where(CostRow.day >= since_day)
            .group_by(CostRow.day)
            .order_by(CostRow.day)
        )
        if node_id is not None:
            query = query.where(CostRow.node_id == node_id)
        rows = await self.session.execute(query)
        return [(str(day), int(calls), int(nanos)) for day, calls, nanos in rows]

    async def memories(self, agent_id: str, project: str, limit: int) -> list[Memory]:
        """An agent's newest episodes in one project, newest first."""
        rows = await self.session.scalars(
            select(MemoryRow)
            .where(
                MemoryRow.agent_id == agent_id,
                MemoryRow.project == project,
                MemoryRow.kind == "episode",
            )
            .order_by(MemoryRow.created_at.desc(), MemoryRow.id.desc())
            .limit(limit)
        )
        return [_memory(r) for r in rows]

    async def thread_memories(self, project: str, thread_id: str, limit: int) -> list[Memory]:
        """A thread's memories within one project, newest first."""
        rows = await self.session.scalars(
            select(MemoryRow)
            .where(
                MemoryRow.project == project,
                MemoryRow.thread_id == thread_id,
                MemoryRow.kind == "thread",
            )
            .order_by(MemoryRow.created_at.desc(), MemoryRow.id.desc())
            .limit(limit)
        )
        return [_memory(r) for r in rows]

    async def thread_projects(self, thread_id: str) -> set[str]:
        """The projects a thread's work was for, as far as its tasks and memories say."""
        found: set[str] = set()
        contents = await self.session.scalars(
            select(MessageRow.content).where(
                MessageRow.thread_id == thread_id,
                MessageRow.message_type == "task_assignment",
            )
        )
        for content in contents:
            data = content.get("task_data") if isinstance(content, dict) else None
            for holder in (data, content):
                if isinstance(holder, dict) and isinstance(holder.get("project"), str):
                    found.add(holder["project"])
                    break
        projects = await self.session.scalars(
            select(MemoryRow.project).where(MemoryRow.thread_id == thread_id).distinct()
        )
        found.update(projects)
        return found

    async def knowledge_after(
        self, project: str, after: tuple[datetime, str] | None, limit: int
    ) -> list[Knowledge]:
        """A project's knowledge in the order it was learnt, after ``(created_at, id)``."""
        query = select(KnowledgeRow).where(KnowledgeRow.project == project)
        if after is not None:
            at, last = after
            query = query.where(
                (KnowledgeRow.created_at > at)
                | ((KnowledgeRow.created_at == at) & (KnowledgeRow.id > last))
            )
        rows = await self.session.scalars(
            query.order_by(KnowledgeRow.created_at, KnowledgeRow.id).limit(limit)
        )
        return [_knowledge(r) for r in rows]
