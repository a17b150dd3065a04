"""What a dashboard shows across agents: the threads, tasks and SLURP events a caller may read.

The MCP tools answer for one agent (``bzzz_thread list``, ``bzzz_get …/tasks``); a person or
an operator looking at the network wants everything its credential may read at once. The
rules are the agent service's own: a thread is read by its participants, every credential of
its project (the team), its project's admins and (once it escalated to humans) the project's
people; an agent's tasks by its owner and every credential of its project.
"""

from __future__ import annotations

from typing import Any

from bzzz import domain
from bzzz.agents.page import require_project
from bzzz.agents.service import AgentService, thread_project
from bzzz.agents.views import task_info, thread_info
from bzzz.domain import iso
from bzzz.eventlog import Caller
from bzzz.store.database import Database
from bzzz.store.repository import Repository

# The dashboard looks at the most recent threads and events; older ones are a bzzz_get away.
SCANNED_THREADS = 500
SCANNED_SLURP_EVENTS = 500
TASKS_PER_AGENT = 20
SCANNED_AGENTS = 200


class Overview:
    """The network as one caller may see it."""

    def __init__(self, db: Database, agents: AgentService, node_id: str) -> None:
        self._db = db
        self._agents = agents
        self._node_id = node_id

    async def threads(
        self, caller: Caller, limit: int, project: str | None = None
    ) -> list[dict[str, Any]]:
        """The caller's readable threads (of ``project`` only, when named), most recently
        active first, with their SLURP events."""
        require_project(caller.principal, project)
        async with self._db.session() as session:
            repo = Repository(session)
            recent = await repo.recent_threads(SCANNED_THREADS)
            shown = [
                t
                for t in recent
                if self._reads(caller, t) and (project is None or thread_project(t) == project)
            ][:limit]
            slurp = await repo.slurp_events(self._node_id, None, SCANNED_SLURP_EVENTS)
        events: dict[str, list[dict[str, Any]]] = {}
        for event in slurp:
            events.setdefault(event.thread_id, []).append(slurp_info(event))
        return [
            thread_info(t)
            | {
                "open_escalations": sum(
                    1 for e in t.escalation_history if isinstance(e, dict) and not e.get("resolved")
                ),
                "asks_a_human": t.asks_a_human,
                "slurp_events": events.get(t.id, []),
            }
            for t in shown
        ]

    def _reads(self, caller: Caller, thread: domain.Thread) -> bool:
        project = thread.metadata.get("project")
        if not caller.principal.may_see_project(project if isinstance(project, str) else None):
            return False
        return self._agents.may_read_thread(caller, thread)

    async def tasks(
        self, caller: Caller, limit: int, project: str | None = None
    ) -> list[dict[str, Any]]:
        """Tasks of the agents whose tasks the caller reads (owner, its project's credentials),
        and those the caller assigned as itself (an orchestrator follows what it gave), newest
        first; of ``project``'s agents only, when named."""
        require_project(caller.principal, project)
        everyone = self._agents.directory.matching(
            agent_id=None, role=None, project=None, task=None, online_only=False
        )
        readable = sorted(
            (
                agent
                for agent in everyone
                if caller.principal.may_see_project(agent.project)
                and (project is None or agent.project == project)
                and self._agents.may_read_tasks(caller, agent)
            ),
            key=lambda agent: agent.last_activity,
            reverse=True,
        )[:SCANNED_AGENTS]
        found: dict[str, tuple[domain.Task, str | None]] = {}
        async with self._db.session() as session:
            repo = Repository(session)
            for agent in readable:
                tasks = await repo.tasks(agent.id, active_only=False, limit=TASKS_PER_AGENT)
                found.update((task.id, (task, agent.project)) for task in tasks)
            for task in await repo.tasks_assigned_by(caller.principal.actor, limit=limit):
                assignee = self._agents.directory.get(task.agent_id)
                # Only within the caller's projects still (an assignee may move to another,
                # a JWT's projects may shrink).
                if (
                    assignee is not None
                    and caller.principal.may_see_project(assignee.project)
                    and (project is None or assignee.project == project)
                ):
                    found.setdefault(task.id, (task, assignee.project))
        ordered = sorted(found.values(), key=lambda pair: pair[0].start_time, reverse=True)
        return [
            task_info(task) | {"agent_id": task.agent_id, "project": project}
            for task, project in ordered[:limit]
        ]


def slurp_info(event: domain.SlurpEvent) -> dict[str, Any]:
    """A SLURP context event as the dashboard lists it."""
    context = event.event.get("context") if isinstance(event.event, dict) else None
    return {
        "id": event.id,
        "thread_id": event.thread_id,
        "status": event.status,
        "attempts": event.attempts,
        "created_at": iso(event.created_at),
        "submitted_at": iso(event.submitted_at),
        "insights": (context or {}).get("insights", []) if isinstance(context, dict) else [],
    }
