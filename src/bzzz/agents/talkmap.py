"""Who talks to whom: the dashboard's live map, counted from the store at a bounded cost.

Nodes are the agents the caller sees (its projects, or one of them), edges the messages and
task assignments delivered between two of them in a window of at most 24 hours, groups the
threads the caller may read that were active in the window. The counts come from the inbox
(one row per delivery, indexed by agent and time) joined to the messages, read in ONE query
that stops after ``MAX_DELIVERIES`` rows: a window with more deliveries answers
``truncated: true`` with the counts of the rows read (read in index order: agent by agent,
not a sample). An edge's messages come from the newest ``EDGE_SCANNED`` deliveries to each of
its two agents. Counts are metadata of the caller's
own projects; the messages behind an edge (``edge``) are listed only where the caller may
read them: a thread's message by who reads the thread, another by who reads the inbox of
its recipient or of its sender (owner, project admin); the rest are counted as hidden.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from bzzz import domain
from bzzz.agents.page import require_project
from bzzz.agents.service import AgentService
from bzzz.agents.suggestions import agent_not_found
from bzzz.agents.views import message_info
from bzzz.clock import Clock
from bzzz.domain import iso
from bzzz.errors import InvalidParameters
from bzzz.eventlog import Caller
from bzzz.store.database import Database
from bzzz.store.models import InboxRow, MessageRow
from bzzz.store.repository import Repository
from bzzz.store.rows import message_from_row

# The windows a map counts over; 24 hours is the most.
WINDOWS = {"15m": 15 * 60, "1h": 60 * 60, "24h": 24 * 60 * 60}
# The most agents drawn (the most recently active first).
MAX_AGENTS = 200
# The most deliveries (inbox rows) one map reads; past it the answer says truncated.
MAX_DELIVERIES = 5000
# The most recent threads looked at for groups, and the most groups drawn.
SCANNED_THREADS = 200
MAX_GROUPS = 50
# The most messages an edge lists (newest first), and the most deliveries it reads each way
# (the newest of the recipient's in the window, whoever sent them).
EDGE_MESSAGES = 100
EDGE_SCANNED = 5000


def window_seconds(window: str) -> int:
    """The length of a named window; INVALID_PARAMETERS for another name."""
    if window not in WINDOWS:
        raise InvalidParameters(
            f"window must be one of {', '.join(WINDOWS)}",
            details={"field": "window", "allowed": list(WINDOWS)},
        )
    return WINDOWS[window]


class TalkMap:
    """The map of who talks to whom, as one caller may see it."""

    def __init__(self, db: Database, agents: AgentService, clock: Clock) -> None:
        self._db = db
        self._agents = agents
        self._clock = clock

    def _visible(self, caller: Caller, project: str | None) -> list[domain.Agent]:
        who = caller.principal
        everyone = self._agents.directory.matching(
            agent_id=None, role=None, project=None, task=None, online_only=False
        )
        shown = [
            a
            for a in everyone
            if who.may_see_project(a.project) and (project is None or a.project == project)
        ]
        shown.sort(key=lambda a: a.last_activity, reverse=True)
        return shown[:MAX_AGENTS]

    def projects(self, caller: Caller) -> dict[str, Any]:
        """The projects the caller may narrow a view to: its grants, or (granted every
        project) those its visible agents belong to."""
        who = caller.principal
        if not who.all_projects:
            return {"success": True, "projects": sorted(who.projects), "every": False}
        everyone = self._agents.directory.matching(
            agent_id=None, role=None, project=None, task=None, online_only=False
        )
        named = {a.project for a in everyone if a.project is not None}
        return {"success": True, "projects": sorted(named), "every": True}

    async def map(self, caller: Caller, window: str, project: str | None = None) -> dict[str, Any]:
        """Nodes, edges with counts, thread groups; ``truncated`` when the cap was reached."""
        require_project(caller.principal, project)
        since = self._clock.now() - timedelta(seconds=window_seconds(window))
        agents = self._visible(caller, project)
        ids = {a.id for a in agents}
        async with self._db.session() as session:
            query = (
                select(InboxRow.agent_id, MessageRow.sender, MessageRow.message_type)
                .join(MessageRow, MessageRow.id == InboxRow.message_id)
                .where(InboxRow.agent_id.in_(sorted(ids)), InboxRow.posted_at >= since)
                .limit(MAX_DELIVERIES + 1)
            )
            rows = (await session.execute(query)).all() if ids else []
            threads = await Repository(session).recent_threads(SCANNED_THREADS)
        truncated = len(rows) > MAX_DELIVERIES
        edges: dict[tuple[str, str], dict[str, Any]] = {}
        for recipient, sender, kind in rows[:MAX_DELIVERIES]:
            if sender not in ids or sender == recipient:
                continue  # a principal (not an agent), one the caller does not see, itself
            key = (sender, recipient) if sender < recipient else (recipient, sender)
            edge = edges.setdefault(key, _edge(sender, recipient))
            edge["tasks" if kind == "task_assignment" else "messages"] += 1
            forward = sender == edge["source"]
            edge["source_to_target" if forward else "target_to_source"] += 1
        groups = [
            {
                "thread_id": t.id,
                "topic": t.topic,
                "status": t.status,
                "members": [m for m in t.active_participants if m in ids],
            }
            for t in threads
            if t.last_activity >= since and self._agents.may_read_thread(caller, t)
        ]
        groups = [g for g in groups if len(g["members"]) >= 1][:MAX_GROUPS]
        talking = {name for pair in edges for name in pair}
        in_groups = {m for g in groups for m in g["members"]}
        nodes = [
            {
                "id": a.id,
                "role": a.role,
                "project": a.project,
                "status": a.status,
            }
            for a in agents
            if a.online or a.last_activity >= since or a.id in talking or a.id in in_groups
        ]
        return {
            "success": True,
            "window": window,
            "since": iso(since),
            "project": project,
            "nodes": sorted(nodes, key=lambda n: (n["project"] or "", n["id"])),
            "edges": sorted(edges.values(), key=lambda e: (e["source"], e["target"])),
            "groups": groups,
            "scanned": min(len(rows), MAX_DELIVERIES),
            "truncated": truncated,
            "limits": {"deliveries": MAX_DELIVERIES, "agents": MAX_AGENTS, "groups": MAX_GROUPS},
        }

    async def edge(
        self, caller: Caller, a: str, b: str, window: str, project: str | None = None
    ) -> dict[str, Any]:
        """The messages delivered between agents ``a`` and ``b`` in the window that the caller
        may read, newest first (at most EDGE_MESSAGES), and how many it may not."""
        who = caller.principal
        require_project(who, project)
        since = self._clock.now() - timedelta(seconds=window_seconds(window))
        pair = []
        for agent_id in (a, b):
            agent = self._agents.visible_agent(who, agent_id)
            if agent is None or (project is not None and agent.project != project):
                raise agent_not_found(
                    self._agents.directory, who, agent_id, f"no agent '{agent_id}'", project
                )
            pair.append(agent)
        async with self._db.session() as session:
            rows = [
                *await _delivered(session, sender=a, recipient=b, since=since),
                *await _delivered(session, sender=b, recipient=a, since=since),
            ]
            rows.sort(key=lambda row: (row[1], row[0].id), reverse=True)
            rows = rows[:EDGE_MESSAGES]
            thread_ids = {row[0].thread_id for row in rows if row[0].thread_id}
            repo = Repository(session)
            threads = {tid: await repo.thread(tid) for tid in sorted(thread_ids)}
        agents = {agent.id: agent for agent in pair}
        shown: list[dict[str, Any]] = []
        for row, _, recipient in rows:
            message = message_from_row(row)
            if self._reads(caller, message, agents, threads.get(message.thread_id or "")):
                shown.append(message_info(message) | {"recipient": recipient})
        return {
            "success": True,
            "agents": [a, b],
            "window": window,
            "since": iso(since),
            "messages": shown,
            "hidden": len(rows) - len(shown),
            "limit": EDGE_MESSAGES,
        }

    def _reads(
        self,
        caller: Caller,
        message: domain.Message,
        agents: dict[str, domain.Agent],
        thread: domain.Thread | None,
    ) -> bool:
        if message.thread_id:
            return thread is not None and self._agents.may_read_thread(caller, thread)
        ends: Sequence[domain.Agent | None] = [agents.get(message.sender)] + [
            agents.get(r) for r in message.recipients
        ]
        return any(agent is not None and self._agents.may_read(caller, agent) for agent in ends)


async def _delivered(
    session: AsyncSession, *, sender: str, recipient: str, since: datetime
) -> list[tuple[MessageRow, datetime, str]]:
    """The messages ``sender`` sent ``recipient`` since then, newest first, among the newest
    EDGE_SCANNED deliveries to ``recipient`` (its inbox index, read backwards)."""
    recent = (
        select(InboxRow.message_id, InboxRow.posted_at)
        .where(InboxRow.agent_id == recipient, InboxRow.posted_at >= since)
        .order_by(InboxRow.posted_at.desc())
        .limit(EDGE_SCANNED)
        .subquery()
    )
    query = (
        select(MessageRow, recent.c.posted_at)
        .join(recent, recent.c.message_id == MessageRow.id)
        .where(MessageRow.sender == sender)
        .order_by(recent.c.posted_at.desc())
        .limit(EDGE_MESSAGES)
    )
    return [(row, at, recipient) for row, at in (await session.execute(query)).all()]


def _edge(sender: str, recipient: str) -> dict[str, Any]:
    source, target = sorted((sender, recipient))
    return {
        "source": source,
        "target": target,
        "messages": 0,
        "tasks": 0,
        "source_to_target": 0,
        "target_to_source": 0,
    }
