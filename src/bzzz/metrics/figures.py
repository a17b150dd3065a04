"""The seed's and the design's figures, derived from the store (the same on every node).

Every rate here is read from what the log projected (agents, tasks, threads, escalations, the
cost ledger), so a restarted node, another node and the CLI all compute the same figures; no
service counts anything for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import distinct, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bzzz.domain import AgentStatus, TaskStatus
from bzzz.llm.types import TASK_TYPES
from bzzz.store.models import (
    AgentRow,
    CostRow,
    EscalationRow,
    MessageRow,
    TaskRow,
    ThreadRow,
)

# Upper bounds (seconds) of the response-time histogram: seconds to a day.
RESPONSE_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 14400.0, 86400.0)
_ONLINE = (AgentStatus.IDLE.value, AgentStatus.BUSY.value)


def ratio(part: int, whole: int) -> float | None:
    """part/whole rounded, None when there is nothing to divide by."""
    return round(part / whole, 4) if whole else None


@dataclass(slots=True)
class Figures:
    """What the store says, counted (the rates are properties over these counts)."""

    agents: dict[str, int] = field(default_factory=dict)
    agents_available: int = 0
    tasks: dict[str, int] = field(default_factory=dict)
    # Assignment-to-completion times of the completed tasks, in seconds.
    response_times: list[float] = field(default_factory=list)
    threads: int = 0
    threads_escalated: int = 0
    threads_to_humans: int = 0
    escalations: int = 0
    discussions: int = 0
    consensus_reached: int = 0
    interactions: int = 0
    cost_nanos: int = 0
    task_cost_nanos: int = 0
    costed_tasks: int = 0

    @property
    def agents_total(self) -> int:
        """Every agent the network knows."""
        return sum(self.agents.values())

    @property
    def agent_availability(self) -> float | None:
        """Agents online with a free task slot, over every agent."""
        return ratio(self.agents_available, self.agents_total)

    @property
    def finished_tasks(self) -> int:
        """Completed and failed tasks."""
        done = self.tasks.get(TaskStatus.COMPLETED.value, 0)
        return done + self.tasks.get(TaskStatus.FAILED.value, 0)

    @property
    def task_completion_rate(self) -> float | None:
        """Completed tasks over finished (completed + failed) ones."""
        return ratio(self.tasks.get(TaskStatus.COMPLETED.value, 0), self.finished_tasks)

    @property
    def average_response_seconds(self) -> float | None:
        """Mean time from a task's assignment to its completion."""
        if not self.response_times:
            return None
        return round(sum(self.response_times) / len(self.response_times), 3)

    @property
    def cost_per_interaction(self) -> float | None:
        """USD per model call in the ledger."""
        return round(self.cost_nanos / self.interactions / 1e9, 9) if self.interactions else None

    @property
    def cost_per_task(self) -> float | None:
        """USD of task work over the tasks hosted agents finished."""
        if not self.costed_tasks:
            return None
        return round(self.task_cost_nanos / self.costed_tasks / 1e9, 9)

    def to_json(self) -> dict[str, Any]:
        """The figures as `bzzz metrics --json` and ``metrics_json`` show them."""
        return {
            "agent_availability": {
                "ratio": self.agent_availability,
                "available": self.agents_available,
                "total": self.agents_total,
                "by_status": dict(sorted(self.agents.items())),
            },
            "task_completion_rate": {
                "ratio": self.task_completion_rate,
                "by_status": dict(sorted(self.tasks.items())),
            },
            "average_response_time": {
                "seconds": self.average_response_seconds,
                "tasks": len(self.response_times),
            },
            "thread_escalation_rate": {
                "ratio": ratio(self.threads_escalated, self.threads),
                "escalated": self.threads_escalated,
                "threads": self.threads,
                "escalations": self.escalations,
            },
            "escalation_rate": {
                "ratio": ratio(self.threads_to_humans, self.threads),
                "to_humans": self.threads_to_humans,
                "threads": self.threads,
            },
            "consensus_success_rate": {
                "ratio": ratio(self.consensus_reached, self.discussions),
                "reached": self.consensus_reached,
                "discussions": self.discussions,
            },
            "cost_per_interaction": {
                "usd": self.cost_per_interaction,
                "interactions": self.interactions,
                "total_usd": round(self.cost_nanos / 1e9, 9),
            },
            "cost_per_task": {
                "usd": self.cost_per_task,
                "tasks": self.costed_tasks,
                "task_usd": round(self.task_cost_nanos / 1e9, 9),
            },
        }


async def read_figures(session: AsyncSession) -> Figures:
    """Count everything the figures need, in a few aggregate queries."""
    figures = Figures()
    await _agents(session, figures)
    await _tasks(session, figures)
    await _threads(session, figures)
    await _costs(session, figures)
    return figures


async def _agents(session: AsyncSession, figures: Figures) -> None:
    rows = await session.execute(select(AgentRow.status, func.count()).group_by(AgentRow.status))
    figures.agents = {str(status): int(n) for status, n in rows.all()}
    available = select(func.count()).where(
        AgentRow.status.in_(_ONLINE), AgentRow.active_tasks < AgentRow.max_tasks
    )
    figures.agents_available = int((await session.execute(available)).scalar_one())


async def _tasks(session: AsyncSession, figures: Figures) -> None:
    rows = await session.execute(select(TaskRow.status, func.count()).group_by(TaskRow.status))
    figures.tasks = {str(status): int(n) for status, n in rows.all()}
    done = await session.execute(
        select(TaskRow.start_time, TaskRow.end_time).where(
            TaskRow.status == TaskStatus.COMPLETED.value, TaskRow.end_time.is_not(None)
        )
    )
    figures.response_times = [
        max(0.0, (end - start).total_seconds()) for start, end in done.all() if end is not None
    ]


async def _threads(session: AsyncSession, figures: Figures) -> None:
    figures.threads = int((await session.execute(select(func.count(ThreadRow.id)))).scalar_one())
    escalated = select(func.count(distinct(EscalationRow.thread_id)))
    figures.threads_escalated = int((await session.execute(escalated)).scalar_one())
    figures.escalations = int(
        (await session.execute(select(func.count(EscalationRow.id)))).scalar_one()
    )
    # "Require human intervention": an escalation whose actions tell a human.
    actions = await session.execute(select(EscalationRow.thread_id, EscalationRow.actions))
    figures.threads_to_humans = len(
        {thread for thread, acts in actions.all() if _tells_a_human(acts)}
    )
    # A collaborative discussion: a thread where someone proposed a decision.
    discussions = select(func.count(distinct(MessageRow.thread_id))).where(
        MessageRow.message_type == "decision", MessageRow.thread_id.is_not(None)
    )
    figures.discussions = int((await session.execute(discussions)).scalar_one())
    reached = select(func.count(ThreadRow.id)).where(ThreadRow.consensus_origin.is_not(None))
    figures.consensus_reached = int((await session.execute(reached)).scalar_one())


def _tells_a_human(actions: Any) -> bool:
    return any(isinstance(a, dict) and a.get("type") == "notify_human" for a in actions or [])


async def _costs(session: AsyncSession, figures: Figures) -> None:
    total = await session.execute(select(func.count(CostRow.id), func.sum(CostRow.cost_nanos)))
    calls, nanos = total.one()
    figures.interactions, figures.cost_nanos = int(calls or 0), int(nanos or 0)
    task_work = CostRow.purpose.in_(TASK_TYPES)
    spent = select(func.sum(CostRow.cost_nanos)).where(task_work)
    figures.task_cost_nanos = int((await session.execute(spent)).scalar_one() or 0)
    workers = select(CostRow.agent_id).where(task_work, CostRow.agent_id.is_not(None)).distinct()
    finished = select(func.count(TaskRow.id)).where(
        TaskRow.agent_id.in_(workers),
        TaskRow.status.in_((TaskStatus.COMPLETED.value, TaskStatus.FAILED.value)),
    )
    figures.costed_tasks = int((await session.execute(finished)).scalar_one())
