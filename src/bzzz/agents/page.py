"""One agent's page on the dashboard: who it is, how it has done, and its work, in one read.

The rules are the agent service's own, applied part by part:
- the agent is seen by every credential of its project (else it does not exist: AGENT_NOT_FOUND);
- its inbox only by its owner (the token that announced it, the session holding it) and its
  project's admins: others get ``{"readable": false}``, never the messages;
- its tasks by its project's team (``may_read_tasks``), its reservations by everyone who sees
  it (as ``bzzz_reserve list`` shows them), its threads each by who may read that thread.

Every list is bounded (the constants below), so a page costs the same for a busy agent.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from bzzz import domain
from bzzz.agents.service import AgentService
from bzzz.agents.suggestions import agent_not_found
from bzzz.agents.views import agent_info, message_info, task_info
from bzzz.clock import Clock
from bzzz.domain import iso
from bzzz.errors import PermissionDenied
from bzzz.eventlog import Caller
from bzzz.principal import Principal
from bzzz.store.database import Database
from bzzz.store.repository import Repository

# The newest this many of each are shown; older ones are a bzzz_get (with paging) away.
PAGE_MESSAGES = 50
PAGE_TASKS = 50
PAGE_THREADS = 50
# Threads scanned for the readable ones (a thread the viewer may not read is skipped).
SCANNED_THREADS = 200
# Performance over time: completed and failed tasks per day of the last PERFORMANCE_DAYS,
# from the agent's newest PERFORMANCE_TASKS tasks.
PERFORMANCE_DAYS = 14
PERFORMANCE_TASKS = 500


def require_project(who: Principal, project: str | None) -> None:
    """PERMISSION_DENIED when a view is narrowed to a project the caller is not granted."""
    if project is not None and not who.may_see_project(project):
        raise PermissionDenied(
            f"this credential is not granted the project '{project}'",
            details={"missing": f"project:{project}", "field": "project"},
        )


class AgentPage:
    """An agent as the dashboard's agent page shows it."""

    def __init__(self, db: Database, agents: AgentService, node_id: str, clock: Clock) -> None:
        self._db = db
        self._agents = agents
        self._node_id = node_id
        self._clock = clock

    async def page(
        self, caller: Caller, agent_id: str, project: str | None = None
    ) -> dict[str, Any]:
        """The agent, its lease, performance over time, inbox, tasks, reservations, threads."""
        who = caller.principal
        require_project(who, project)
        agent = self._agents.visible_agent(who, agent_id)
        if agent is None or (project is not None and agent.project != project):
            raise agent_not_found(
                self._agents.directory, who, agent_id, f"no agent '{agent_id}'", project
            )
        reads_inbox = self._agents.may_read(caller, agent)
        reads_tasks = self._agents.may_read_tasks(caller, agent)
        async with self._db.session() as session:
            repo = Repository(session)
            tasks = (
                await repo.tasks(agent.id, active_only=False, limit=PERFORMANCE_TASKS)
                if reads_tasks
                else []
            )
            inbox = await repo.inbox(agent.id, PAGE_MESSAGES) if reads_inbox else []
            threads = await repo.threads_of([agent.id], limit=SCANNED_THREADS)
        readable = [t for t in threads if self._agents.may_read_thread(caller, t)]
        held = await self._agents.reservations_of(agent.id) if self._agents.reservations_of else []
        now = self._clock.now()
        return {
            "success": True,
            "agent": agent_info(agent)
            | {"tasks_completed": agent.tasks_completed, "tasks_failed": agent.tasks_failed},
            "lease": self._lease(agent),
            "performance": {
                "current": agent.performance,
                "days": performance_days(tasks, now) if reads_tasks else [],
            },
            "inbox": {
                "readable": reads_inbox,
                "messages": [message_info(m) for m in inbox],
            },
            "tasks": {
                "readable": reads_tasks,
                "tasks": [task_row(t, now) for t in tasks[:PAGE_TASKS]],
            },
            "reservations": held,
            "threads": [thread_row(t) for t in readable[:PAGE_THREADS]],
            "hidden_threads": len(threads) - len(readable),
            "retrieved_at": iso(now),
        }

    def _lease(self, agent: domain.Agent) -> dict[str, Any]:
        """Whether it lives by a lease, and (on the node that holds it) how much is left."""
        held_here = agent.node_id == self._node_id
        # Only the node holding the agent keeps its lease; elsewhere it is not known.
        left = self._agents.leases.remaining(agent) if held_here else None
        return {
            "online": agent.online,
            "node_id": agent.node_id,
            "held_here": held_here,
            "lease_bound": left is not None,
            "lease_seconds": self._agents.leases.seconds if left is not None else None,
            "seconds_left": round(left, 1) if left is not None and agent.online else None,
        }


def task_row(task: domain.Task, now: datetime) -> dict[str, Any]:
    """A task with how long it took (or has run so far)."""
    end = task.end_time or now
    return task_info(task) | {
        "agent_id": task.agent_id,
        "duration_seconds": round(max((end - task.start_time).total_seconds(), 0.0), 3),
        "finished": task.end_time is not None,
    }


def thread_row(thread: domain.Thread) -> dict[str, Any]:
    """A thread as the agent page lists it."""
    return {
        "id": thread.id,
        "topic": thread.topic,
        "status": thread.status,
        "participants": thread.active_participants,
        "message_count": thread.message_count,
        "last_activity": iso(thread.last_activity),
    }


def performance_days(tasks: list[domain.Task], now: datetime) -> list[dict[str, Any]]:
    """Finished tasks per day (UTC) of the last PERFORMANCE_DAYS, oldest first: completed,
    failed and the ratio of completed (None on a day without a finished task)."""
    today = now.date()
    first = today - timedelta(days=PERFORMANCE_DAYS - 1)
    counts = {first + timedelta(days=i): [0, 0] for i in range(PERFORMANCE_DAYS)}
    for task in tasks:
        if task.end_time is None:
            continue
        day = counts.get(task.end_time.date())
        if day is not None:
            day[0 if task.status == domain.TaskStatus.COMPLETED.value else 1] += 1
    return [
        {
            "day": day.isoformat(),
            "completed": done,
            "failed": failed,
            "ratio": round(done / (done + failed), 3) if done + failed else None,
        }
        for day, (done, failed) in counts.items()
    ]
