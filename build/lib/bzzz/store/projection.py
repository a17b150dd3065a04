"""Applies envelopes to the store, deterministically: every node reaches the same state.

Rules that decide between competing writers (an agent id already held, a full task queue, the
thread limit) are decided here, in log order, so every node decides the same way; the origin
reads the outcome to answer its caller.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, func, select
from sqlalchemy.orm import Session

from bzzz import domain
from bzzz.address import agent_address
from bzzz.domain import ACTIVE_TASK_STATUSES, AgentStatus, TaskStatus, canonical_agent_id
from bzzz.network.envelope import Envelope
from bzzz.store.models import (
    ActivityRow,
    AgentRow,
    InboxRow,
    MessageRow,
    ParticipantRow,
    TaskRow,
    ThreadRow,
)

Outcome = dict[str, Any]


@dataclass(slots=True)
class Applied:
    """What applying one envelope did: the outcome for the origin, events for subscribers."""

    outcome: Outcome
    events: list[domain.Event] = field(default_factory=list)


Applier = Callable[[Session, Envelope, "ProjectionLimits"], Applied]


@dataclass(frozen=True, slots=True)
class ProjectionLimits:
    """Limits every node enforces identically (they come from the network's settings)."""

    max_active_threads: int = 100
    max_agents: int = 100_000


def _event(
    envelope: Envelope, type_: str, address: str, data: dict[str, Any], n: int = 0
) -> domain.Event:
    suffix = f"-{n}" if n else ""
    return domain.Event(
        id=f"evt-{envelope.id}{suffix}",
        type=type_,
        address=address,
        data=data,
        timestamp=envelope.timestamp,
    )


def _address_of(row: AgentRow) -> str:
    return agent_address(row.id, row.role, row.project, row.task)


def _agent_json(row: AgentRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "role": row.role,
        "capabilities": list(row.capabilities),
        "specialization": row.specialization,
        "project": row.project,
        "task": row.task,
        "status": row.status,
        "node_id": row.node_id,
    }


def _refresh_status(row: AgentRow) -> None:
    if row.status in (AgentStatus.OFFLINE.value, AgentStatus.ERROR.value):
        return
    row.status = AgentStatus.BUSY.value if row.active_tasks > 0 else AgentStatus.IDLE.value


def _performance(completed: int, failed: int) -> float:
    # A prior of 0.9 over 5 pseudo-tasks: new agents start credible, evidence moves them.
    return round((completed + 4.5) / (completed + failed + 5), 4)


# A task answered within this time costs no performance; slower answers weigh it down.
TARGET_RESPONSE_MS = 30_000


def _weigh_response_time(agent: AgentRow, response_ms: Any) -> None:
    """Fold a reported response time into the agent's performance (hosted agents report it)."""
    if not isinstance(response_ms, int | float) or isinstance(response_ms, bool) or response_ms < 0:
        return
    metadata = dict(agent.metadata_ or {})
    previous = metadata.get("response_ms_avg")
    average = float(response_ms) if previous is None else 0.8 * float(previous) + 0.2 * response_ms
    metadata["response_ms_avg"] = round(average, 3)
    agent.metadata_ = metadata
    speed = 1.0 if average <= TARGET_RESPONSE_MS else max(0.5, TARGET_RESPONSE_MS / average)
    agent.performance = round(agent.performance * speed, 4)


# Column sizes of the values a peer's payload puts into rows (see store/models.py).
ID_LENGTH = 64
NAME_LENGTH = 128
ADDRESS_LENGTH = 1024
CANONICAL_LENGTH = 512


def _text(value: Any, limit: int, name: str) -> str:
    """A payload string that fits its column; anything else rejects the envelope.

    Staged rows are written after the appliers ran, outside any savepoint: a value the database
    refuses there would fail the whole batch, so it is refused here (as a bad payload) instead.
    """
    if not isinstance(value, str) or not value or len(value) > limit:
        raise ValueError(f"{name} must be a non-empty string of at most {limit} characters")
    return value


def _optional_text(value: Any, limit: int, name: str) -> str | None:
    return None if value is None else _text(value, limit, name)


def _check_names(value: Any, name: str) -> list[str]:
    if not isinstance(value, list):
        raise TypeError(f"{name} must be a list")
    return [_text(item, NAME_LENGTH, name) for item in value]


def _check_announcement(p: dict[str, Any]) -> None:
    """Validate an agent.announced payload before any row is touched."""
    for name in ("agent_id", "role", "session_id"):
        _text(p[name], NAME_LENGTH, name)
    for name in ("project", "task"):
        _optional_text(p.get(name), NAME_LENGTH, name)
    _optional_text(p.get("specialization"), 256, "specialization")
    _check_names(p.get("capabilities") or [], "capabilities")
    max_tasks = p.get("max_tasks", 3)
    if not isinstance(max_tasks, int) or isinstance(max_tasks, bool) or max_tasks < 1:
        raise ValueError("max_tasks must be a positive integer")
    if not isinstance(p.get("metadata") or {}, dict):
        raise TypeError("metadata must be an object")


_MESSAGES = cast(Table, MessageRow.__table__)
# Built once: a statement built per call costs more in SQLAlchemy than its execution in SQLite.
_MESSAGE_EXISTS = select(_MESSAGES.c.id).where(_MESSAGES.c.id == bindparam("message_id"))


def _check_message(session: Session, p: dict[str, Any]) -> list[str]:
    """Validate a message.posted payload; return its recipients without repeats."""
    message_id = _text(p["message_id"], ID_LENGTH, "message_id")
    _text(p["sender"], NAME_LENGTH, "sender")
    _text(p["target_address"], ADDRESS_LENGTH, "target_address")
    _text(p["message_type"], ID_LENGTH, "message_type")
    _optional_text(p.get("thread_id"), ID_LENGTH, "thread_id")
    _optional_text(p.get("reply_to"), ID_LENGTH, "reply_to")
    if p["priority"] not in domain.PRIORITIES:
        raise ValueError(f"priority must be one of {', '.join(domain.PRIORITIES)}")
    if not isinstance(p["content"], dict):
        raise TypeError("content must be an object")
    recipients = _check_names(p["recipients"], "recipients")
    staged = session.info.setdefault(STAGED_MESSAGE_IDS, set())
    known: set[str] | None = session.info.get(STORED_MESSAGE_IDS)
    if known is not None:
        # The batch looked up all its message ids at once (apply_batch).
        exists = message_id in known
    else:
        # Core, not session.get: no autoflush and no ORM load on the hottest path of the log.
        stored = session.connection().execute(_MESSAGE_EXISTS, {"message_id": message_id})
        exists = stored.first() is not None
    if message_id in staged or exists:
        raise ValueError(f"message {message_id} exists already")
    staged.add(message_id)
    return list(dict.fromkeys(recipients))


STAGED = "bzzz_staged_rows"
STAGED_MESSAGE_IDS = "bzzz_staged_message_ids"
# Message ids of a batch that the store already holds, looked up once per batch.
STORED_MESSAGE_IDS = "bzzz_stored_message_ids"


def stage(session: Session, model: type[Any], **values: Any) -> None:
    """Queue an insert-only row; the batch writes each table's rows in one executemany."""
    session.info.setdefault(STAGED, {}).setdefault(model, []).append(values)


SEEN = "bzzz_agents_seen"


def touch_agent(session: Session, agent_id: str, at: datetime) -> None:
    """Record an agent's last activity (one UPDATE per agent and batch, no ORM load)."""
    session.info.setdefault(SEEN, {})[agent_id] = at


def _activity(
    session: Session, agent_id: str, kind: str, summary: str, ref: str | None, at: datetime
) -> None:
    stage(session, ActivityRow, agent_id=agent_id, kind=kind, summary=summary[:500], ref=ref, at=at)


# --- agents ----------------------------------------------------------------------------------


ONLINE = "bzzz_online_agents"


def online_agents(session: Session) -> int:
    """How many agents are online: the batch's running count, else counted in the database."""
    known = session.info.get(ONLINE)
    if known is None:
        counted = session.execute(
            select(func.count()).select_from(AgentRow).where(AgentRow.status != "offline")
        )
        known = session.info[ONLINE] = int(counted.scalar_one())
    return int(known)


def _count_online(session: Session, delta: int) -> None:
    if session.info.get(ONLINE) is not None:
        session.info[ONLINE] += delta


def _same_holder(row: AgentRow, origin: str, session_id: str) -> bool:
    """Whether ``session_id`` at ``origin`` holds the agent of ``row``.

    A principal's or handle's key holds its agents through any node; a session key only on
    the node whose session it is.
    """
    if row.session_id != session_id:
        return False
    return row.node_id == origin or domain.network_wide_key(session_id)


_AGENTS = cast(Table, AgentRow.__table__)
# Agents holding another spelling of an id (built once, like _MESSAGE_EXISTS).
_LOOK_ALIKES = select(_AGENTS.c.id).where(
    _AGENTS.c.canonical_id == bindparam("canonical"), _AGENTS.c.id != bindparam("agent_id")
)
# Canonical id -> ids announced in this batch (not flushed yet, so not in the query above).
CANONICAL = "bzzz_canonical_ids"


def _canonical_id(session: Session, agent_id: str) -> str | None:
    """The id's canonical form, or None when a live agent holds a look-alike of it."""
    canonical = canonical_agent_id(agent_id)
    if len(canonical) > CANONICAL_LENGTH:
        raise ValueError(f"agent_id must stay under {CANONICAL_LENGTH} characters in NFKC form")
    batch: dict[str, set[str]] = session.info.setdefault(CANONICAL, {})
    # Core, so no flush: the common case (no other spelling) costs one indexed query.
    stored = session.connection().execute(
        _LOOK_ALIKES, {"canonical": canonical, "agent_id": agent_id}
    )
    others = {str(row[0]) for row in stored} | batch.get(canonical, set())
    others.discard(agent_id)
    for other in sorted(others):
        # The row as this batch left it (it may have gone offline in an unflushed change).
        row = session.get(AgentRow, other)
        if row is not None and row.status != AgentStatus.OFFLINE.value:
            return None
    batch.setdefault(canonical, set()).add(agent_id)
    return canonical


def apply_agent_announced(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Create or update an agent unless a live agent of another session holds the id.

    Ids are compared in canonical form (NFKC, case-folded): while ``ISO-A`` is online, no one
    announces ``iso-a``, its own session included.
    """
    p = env.payload
    _check_announcement(p)
    canonical = _canonical_id(session, p["agent_id"])
    if canonical is None:
        return Applied({"ok": False, "reason": "exists", "look_alike": True})
    row = session.get(AgentRow, p["agent_id"])
    at = env.timestamp
    held = row is not None and row.status != AgentStatus.OFFLINE.value
    if held and row is not None and not _same_holder(row, env.origin, p["session_id"]):
        return Applied({"ok": False, "reason": "exists", "holder_node": row.node_id})
    if not held:
        # The limit counts online agents: one coming back from offline needs room like a new one.
        if online_agents(session) >= limits.max_agents:
            return Applied({"ok": False, "reason": "max_agents"})
        _count_online(session, 1)
    if row is None:
        row = AgentRow(
            id=p["agent_id"],
            created_at=at,
            active_tasks=0,
            tasks_completed=0,
            tasks_failed=0,
            performance=_performance(0, 0),
        )
        session.add(row)
    row.canonical_id = canonical
    row.role = p["role"]
    row.capabilities = list(p.get("capabilities") or [])
    row.specialization = p.get("specialization")
    row.max_tasks = int(p.get("max_tasks", 3))
    row.project = p.get("project")
    row.task = p.get("task")
    row.node_id = env.origin
    row.session_id = p["session_id"]
    row.metadata_ = dict(p.get("metadata") or {})
    row.last_activity = at
    row.status = AgentStatus.IDLE.value
    _refresh_status(row)
    _activity(session, row.id, "announced", f"announced as {row.role}", env.id, at)
    event = _event(
        env,
        "agent_announcement",
        _address_of(row),
        {"action": "announced", "agent": _agent_json(row)},
    )
    return Applied({"ok": True, "status": row.status}, [event])


def apply_agent_offline(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Mark agents offline, but only those still held by the origin's named session."""
    p = env.payload
    _check_names(p["agent_ids"], "agent_ids")
    _text(p["session_id"], NAME_LENGTH, "session_id")
    _text(p.get("reason", "session ended"), 500, "reason")
    events = []
    went: list[str] = []
    for n, agent_id in enumerate(p["agent_ids"]):
        row = session.get(AgentRow, agent_id)
        if row is None or row.status == AgentStatus.OFFLINE.value:
            continue
        if row.node_id != env.origin or row.session_id != p["session_id"]:
            continue
        row.status = AgentStatus.OFFLINE.value
        _count_online(session, -1)
        row.last_activity = env.timestamp
        went.append(agent_id)
        _activity(
            session, agent_id, "offline", p.get("reason", "session ended"), env.id, env.timestamp
        )
        events.append(
            _event(
                env,
                "agent_announcement",
                _address_of(row),
                {
                    "action": "offline",
                    "agent": _agent_json(row),
                    "reason": p.get("reason", "session ended"),
                },
                n,
            )
        )
    return Applied({"ok": True, "offline": went}, events)


# --- messages and tasks ----------------------------------------------------------------------


def _assign_task(
    session: Session, env: Envelope, recipient: str, index: int
) -> tuple[str | None, str | None, AgentRow | None]:
    """Create the task for one recipient; (task id, refusal reason, agent row)."""
    row = session.get(AgentRow, recipient)
    if row is None:
        return None, "agent not found", None
    if row.status == AgentStatus.OFFLINE.value:
        return None, "agent is offline", row
    if row.active_tasks >= row.max_tasks:
        return None, f"agent is at max_tasks ({row.max_tasks})", row
    p = env.payload
    content = p["content"]
    task_id = f"task-{env.id}-{index}"
    session.add(
        TaskRow(
            id=task_id,
            agent_id=recipient,
            assigner=p["sender"],
            type=str(content.get("task_type") or content.get("type") or "generic")[:ID_LENGTH],
            description=str(content.get("description") or content.get("title") or "")[:4000],
            status=TaskStatus.PENDING.value,
            priority=p["priority"],
            data=dict(content.get("task_data") or content.get("data") or {}),
            thread_id=p.get("thread_id"),
            message_id=p["message_id"],
            progress=None,
            result=None,
            error=None,
            start_time=env.timestamp,
            end_time=None,
        )
    )
    row.active_tasks += 1
    _refresh_status(row)
    return task_id, None, row


def _update_task(session: Session, env: Envelope) -> Outcome:
    p = env.payload
    task = session.get(TaskRow, p["task_id"])
    if task is None:
        return {"ok": False, "reason": "task not found"}
    if task.agent_id != p["sender"]:
        return {"ok": False, "reason": "only the assignee may update a task"}
    if task.status not in ACTIVE_TASK_STATUSES:
        return {"ok": False, "reason": f"task is already {task.status}"}
    content = p["content"]
    kind = p["message_type"]
    if task.thread_id is None and isinstance(content.get("thread_id"), str):
        # The assignee names the thread where the work happens (a collaborative review).
        task.thread_id = _text(content["thread_id"], ID_LENGTH, "thread_id")
    if kind == "task_progress":
        task.status = TaskStatus.IN_PROGRESS.value
        task.progress = dict(content)
        return {"ok": True, "task_id": task.id, "task_status": task.status}
    task.status = TaskStatus.COMPLETED.value if kind == "task_complete" else TaskStatus.FAILED.value
    task.end_time = env.timestamp
    if kind == "task_complete":
        task.result = content.get("result", content)
    else:
        task.error = str(content.get("error") or content.get("reason") or "failed")[:4000]
    agent = session.get(AgentRow, task.agent_id)
    if agent is not None:
        agent.active_tasks = max(0, agent.active_tasks - 1)
        if kind == "task_complete":
            agent.tasks_completed += 1
        else:
            agent.tasks_failed += 1
        agent.performance = _performance(agent.tasks_completed, agent.tasks_failed)
        _weigh_response_time(agent, content.get("response_ms"))
        _refresh_status(agent)
    return {"ok": True, "task_id": task.id, "task_status": task.status}


def _check_thread_post(session: Session, env: Envelope) -> str | None:
    p = env.payload
    thread = session.get(ThreadRow, p["thread_id"])
    if thread is None:
        return "thread not found"
    if thread.status in ("completed", "paused"):
        return f"thread is {thread.status}"
    member = session.get(ParticipantRow, (p["thread_id"], p["sender"]))
    if member is None or not member.active:
        return "sender is not a participant of the thread"
    thread.message_count += 1
    thread.last_activity = env.timestamp
    return None


def apply_message_posted(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Store a message, deliver it to its recipients, create or update tasks."""
    p = env.payload
    recipients = _check_message(session, p)
    if p.get("thread_id"):
        refusal = _check_thread_post(session, env)
        if refusal:
            return Applied({"ok": False, "reason": refusal})
    task_outcome: Outcome | None = None
    if p["message_type"] in domain.TASK_UPDATE_TYPES and p.get("task_id"):
        task_outcome = _update_task(session, env)
        if not task_outcome["ok"]:
            return Applied(task_outcome)
    delivered: list[str] = []
    undelivered: dict[str, str] = {}
    tasks: dict[str, str] = {}
    events: list[domain.Event] = []
    for index, recipient in enumerate(recipients):
        if p["message_type"] == "task_assignment":
            task_id, refusal, row = _assign_task(session, env, recipient, index)
            if refusal:
                undelivered[recipient] = refusal
                continue
            assert task_id is not None and row is not None
            tasks[recipient] = task_id
            events.append(
                _event(
                    env,
                    "task_assignment",
                    _address_of(row),
                    {
                        "task_id": task_id,
                        "agent_id": recipient,
                        "assigner": p["sender"],
                        "priority": p["priority"],
                        "message_id": p["message_id"],
                        "content": p["content"],
                    },
                    index,
                )
            )
        stage(
            session,
            InboxRow,
            agent_id=recipient,
            message_id=p["message_id"],
            posted_at=env.timestamp,
        )
        _activity(
            session,
            recipient,
            "message_received",
            f"{p['message_type']} from {p['sender']}",
            p["message_id"],
            env.timestamp,
        )
        delivered.append(recipient)
    stage(
        session,
        MessageRow,
        id=p["message_id"],
        sender=p["sender"],
        target_address=p["target_address"],
        message_type=p["message_type"],
        content=p["content"],
        priority=p["priority"],
        thread_id=p.get("thread_id"),
        reply_to=p.get("reply_to"),
        recipients=delivered,
        posted_at=env.timestamp,
    )
    _activity(
        session,
        p["sender"],
        "message_sent",
        f"{p['message_type']} to {p['target_address']}",
        p["message_id"],
        env.timestamp,
    )
    touch_agent(session, p["sender"], env.timestamp)
    outcome: Outcome = {
        "ok": True,
        "delivered": delivered,
        "undelivered": undelivered,
        "tasks": tasks,
    }
    if task_outcome is not None:
        outcome["task_update"] = task_outcome
    return Applied(outcome, events)


# --- threads ---------------------------------------------------------------------------------


def apply_thread_created(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Open a thread unless the network is at maxActiveThreads."""
    p = env.payload
    _text(p["thread_id"], ID_LENGTH, "thread_id")
    _text(p["topic"], 512, "topic")
    _text(p["creator"], NAME_LENGTH, "creator")
    _check_names(p["participants"], "participants")
    active = session.execute(
        select(func.count()).select_from(ThreadRow).where(ThreadRow.status != "completed")
    )
    if int(active.scalar_one()) >= limits.max_active_threads:
        return Applied(
            {"ok": False, "reason": "max_active_threads", "limit": limits.max_active_threads}
        )
    if session.get(ThreadRow, p["thread_id"]) is not None:
        return Applied({"ok": False, "reason": "thread exists"})
    at = env.timestamp
    session.add(
        ThreadRow(
            id=p["thread_id"],
            topic=p["topic"],
            creator=p["creator"],
            status="active",
            created_at=at,
            last_activity=at,
            message_count=0,
            summary=None,
            metadata_=dict(p.get("metadata") or {}),
            escalation_history=[],
        )
    )
    participants = list(dict.fromkeys(p["participants"]))
    for agent_id in participants:
        session.add(
            ParticipantRow(
                thread_id=p["thread_id"], agent_id=agent_id, active=True, joined_at=at, left_at=None
            )
        )
        _activity(session, agent_id, "thread_joined", f"thread '{p['topic']}'", p["thread_id"], at)
    creator = session.get(AgentRow, p["creator"])
    address = _address_of(creator) if creator else f"bzzz://{p['creator']}"
    event = _event(
        env,
        "thread_created",
        address,
        {
            "thread_id": p["thread_id"],
            "topic": p["topic"],
            "creator": p["creator"],
            "participants": participants,
        },
    )
    return Applied({"ok": True}, [event])


def apply_thread_membership(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Join or leave a thread."""
    p = env.payload
    _text(p["thread_id"], ID_LENGTH, "thread_id")
    _text(p["agent_id"], NAME_LENGTH, "agent_id")
    thread = session.get(ThreadRow, p["thread_id"])
    if thread is None:
        return Applied({"ok": False, "reason": "thread not found"})
    joining = env.type == "thread.joined"
    member = session.get(ParticipantRow, (p["thread_id"], p["agent_id"]))
    if joining:
        if thread.status == "completed":
            return Applied({"ok": False, "reason": "thread is completed"})
        if member is None:
            session.add(
                ParticipantRow(
                    thread_id=p["thread_id"],
                    agent_id=p["agent_id"],
                    active=True,
                    joined_at=env.timestamp,
                    left_at=None,
                )
            )
        else:
            member.active, member.left_at = True, None
    else:
        if member is None or not member.active:
            return Applied({"ok": False, "reason": "not a participant"})
        member.active, member.left_at = False, env.timestamp
    thread.last_activity = env.timestamp
    kind = "thread_joined" if joining else "thread_left"
    _activity(session, p["agent_id"], kind, f"thread '{thread.topic}'", thread.id, env.timestamp)
    return Applied({"ok": True})


def apply_thread_summarized(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Keep the newest summary on the thread."""
    thread = session.get(ThreadRow, env.payload["thread_id"])
    if thread is None:
        return Applied({"ok": False, "reason": "thread not found"})
    thread.summary = env.payload["summary"]
    return Applied({"ok": True})


def _strict_json(applier: Applier) -> Applier:
    """Refuse payloads that are not strict JSON (NaN, Infinity) before ``applier`` sees them.

    Python's json reads and writes them, PostgreSQL's JSON columns refuse them: applied as they
    are, they would stop a PostgreSQL node's log and let SQLite nodes diverge from it.
    """

    @functools.wraps(applier)
    def apply(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
        json.dumps(env.payload, allow_nan=False)  # ValueError: recorded as a bad payload
        return applier(session, env, limits)

    return apply


_APPLIERS: dict[str, Applier] = {
    "agent.announced": apply_agent_announced,
    "agent.offline": apply_agent_offline,
    "message.posted": apply_message_posted,
    "thread.created": apply_thread_created,
    "thread.joined": apply_thread_membership,
    "thread.left": apply_thread_membership,
    "thread.summarized": apply_thread_summarized,
}

APPLIERS: dict[str, Applier] = {kind: _strict_json(fn) for kind, fn in _APPLIERS.items()}
