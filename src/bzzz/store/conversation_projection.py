"""The appliers of ``message.posted`` (and the tasks it assigns and updates) and of the threads
it is posted in: ``thread.created``, ``thread.joined``, ``thread.left``, ``thread.summarized``.

``thread_projection.py`` builds on these for what threads decide.
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Table, bindparam, func, select
from sqlalchemy.orm import Session

from bzzz import domain
from bzzz.domain import ACTIVE_TASK_STATUSES, AgentStatus, TaskStatus
from bzzz.network.envelope import Envelope
from bzzz.store.models import AgentRow, InboxRow, MessageRow, ParticipantRow, TaskRow, ThreadRow
from bzzz.store.projection import (
    ADDRESS_LENGTH,
    ID_LENGTH,
    NAME_LENGTH,
    STAGED_MESSAGE_IDS,
    STORED_MESSAGE_IDS,
    Applied,
    Applier,
    Outcome,
    ProjectionLimits,
    _activity,
    _address_of,
    _check_names,
    _event,
    _optional_text,
    _performance,
    _refresh_status,
    _strict_json,
    _text,
    stage,
    touch_agent,
)

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
    canceled = task.agent_id != p["sender"] and domain.cancels(
        task, p["sender"], p["message_type"], p["content"]
    )
    if task.agent_id != p["sender"] and not canceled:
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
        if canceled:
            task.error = f"canceled by {p['sender']}: {task.error}"[:4000]
    agent = session.get(AgentRow, task.agent_id)
    if agent is not None:
        agent.active_tasks = max(0, agent.active_tasks - 1)
        if kind == "task_complete":
            agent.tasks_completed += 1
        elif not canceled:  # the assigner's change of mind is no failure of the agent's
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


CONVERSATION_APPLIERS: dict[str, Applier] = {
    kind: _strict_json(fn)
    for kind, fn in {
        "message.posted": apply_message_posted,
        "thread.created": apply_thread_created,
        "thread.joined": apply_thread_membership,
        "thread.left": apply_thread_membership,
        "thread.summarized": apply_thread_summarized,
    }.items()
}
