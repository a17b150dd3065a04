"""Appliers of threads that reach decisions: stances, decision log, consensus, status, escalations.

Like every applier they are deterministic: two nodes racing to escalate the same thread by the
same rule, or to pause a thread another node closes, are decided here in log order.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from bzzz import domain
from bzzz.network.envelope import Envelope
from bzzz.store import conversation_projection, projection
from bzzz.store.agent_projection import AGENT_APPLIERS
from bzzz.store.conversation_projection import CONVERSATION_APPLIERS
from bzzz.store.models import (
    AgentRow,
    EscalationRow,
    MessageRow,
    ParticipantRow,
    ReactionRow,
    SlurpEventRow,
    ThreadRow,
)
from bzzz.store.projection import (
    ID_LENGTH,
    NAME_LENGTH,
    STAGED,
    Applied,
    Applier,
    Outcome,
    ProjectionLimits,
    _event,
    _optional_text,
    _strict_json,
    _text,
    stage,
)

PROGRESS_TYPES = ("decision", "task_complete", "task_progress")
STATUS_ACTIONS = ("pause", "resume", "resolve", "close")
TEXT_LIMIT = 4000


def _thread_address(session: Session, thread: ThreadRow) -> str:
    creator = session.get(AgentRow, thread.creator)
    return projection._address_of(creator) if creator else f"bzzz://{thread.creator}"


def _active_members(session: Session, thread_id: str) -> list[str]:
    rows = session.scalars(
        select(ParticipantRow.agent_id).where(
            ParticipantRow.thread_id == thread_id, ParticipantRow.active.is_(True)
        )
    )
    return sorted(rows)


def _all_members(session: Session, thread_id: str) -> list[str]:
    rows = session.scalars(
        select(ParticipantRow.agent_id).where(ParticipantRow.thread_id == thread_id)
    )
    return sorted(rows)


def _resolve_open(session: Session, thread_id: str, resolution: str, at: datetime) -> list[str]:
    """Resolve every open escalation of a thread; return their ids."""
    rows = session.scalars(
        select(EscalationRow).where(
            EscalationRow.thread_id == thread_id, EscalationRow.resolved.is_(False)
        )
    ).all()
    for row in rows:
        row.resolved, row.resolution, row.resolved_at = True, resolution, at
    return [row.id for row in rows]


# --- thread messages: stances, decision log, consensus ----------------------------------------


def _message_text(content: dict[str, Any]) -> str:
    for key in ("text", "decision", "content", "message", "body"):
        value = content.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:TEXT_LIMIT]
    return ""


def _staged_message(session: Session, message_id: str) -> dict[str, Any] | None:
    for values in session.info.get(STAGED, {}).get(MessageRow, []):
        if values["id"] == message_id:
            found: dict[str, Any] = values
            return found
    return None


def _target_thread(session: Session, target_id: str) -> str | None:
    """The thread of the message a stance is on (staged in this batch, or stored)."""
    staged = _staged_message(session, target_id)
    if staged is not None:
        thread_id: str | None = staged["thread_id"]
        return thread_id
    row = session.get(MessageRow, target_id)
    return row.thread_id if row is not None else None


def _check_stance(session: Session, p: dict[str, Any]) -> str | None:
    """Why a message's stance is refused (None: it is fine or there is none)."""
    stance = p.get("stance")
    if stance is None:
        return None
    if stance not in domain.STANCES:
        raise ValueError(f"stance must be one of {', '.join(domain.STANCES)}")
    _text(p.get("stance_source", "agent"), 16, "stance_source")
    target = p.get("reply_to")
    if not p.get("thread_id") or not target:
        return "a stance needs a thread_id and reply_to"
    if _target_thread(session, target) != p["thread_id"]:
        return "the message a stance is on must be in the same thread"
    return None


def _record_decision(thread: ThreadRow, env: Envelope) -> None:
    p = env.payload
    entry = {
        "message_id": p["message_id"],
        "by": p["sender"],
        "text": _message_text(p["content"]),
        "at": domain.iso(env.timestamp),
        "status": "proposed",
        "agreed": [p["sender"]],
        "disagreed": [],
    }
    # A new list: SQLAlchemy notices a reassigned JSON value, not one changed in place.
    thread.decision_log = [*(thread.decision_log or []), entry]


def _apply_stance(thread: ThreadRow, env: Envelope) -> dict[str, Any] | None:
    """Move the stance's agent between agreed/disagreed of a decision; return that decision."""
    p = env.payload
    log = [dict(entry) for entry in thread.decision_log or []]
    for entry in log:
        if entry.get("message_id") != p["reply_to"] or entry.get("status") != "proposed":
            continue
        agreed = [a for a in entry["agreed"] if a != p["sender"]]
        disagreed = [a for a in entry["disagreed"] if a != p["sender"]]
        (agreed if p["stance"] == "agree" else disagreed).append(p["sender"])
        entry["agreed"], entry["disagreed"] = agreed, disagreed
        thread.decision_log = log
        return entry
    return None


def _consensus(
    session: Session, thread: ThreadRow, decision: dict[str, Any], env: Envelope
) -> dict[str, Any] | None:
    """Record a consensus when every active participant agrees with the decision."""
    active = _active_members(session, thread.id)
    agreed = set(decision["agreed"])
    if len(active) < 2 or not set(active) <= agreed:
        return None
    everyone = _all_members(session, thread.id)
    consensus = {
        "decision_message_id": decision["message_id"],
        "decisions": [decision["text"]],
        "agreed_by": active,
        # Agreement of those still in the thread, over everyone who ever took part in it.
        "confidence": round(len(active) / max(len(everyone), 1), 4),
        "type": "unanimous",
        "reached_at": domain.iso(env.timestamp),
    }
    thread.consensus = consensus
    # The node whose message completed it owes the SLURP event: one node, decided by the log.
    thread.consensus_origin = env.origin
    thread.status = "completed"
    thread.decision_log = [
        dict(e, status="agreed") if e.get("message_id") == decision["message_id"] else e
        for e in thread.decision_log or []
    ]
    _resolve_open(session, thread.id, "consensus reached", env.timestamp)
    return consensus


def _thread_effects(session: Session, env: Envelope, outcome: Outcome) -> list[domain.Event]:
    p = env.payload
    thread = session.get(ThreadRow, p["thread_id"])
    assert thread is not None  # the message applier refused posts to unknown threads
    if p["message_type"] in PROGRESS_TYPES:
        thread.last_progress_at = env.timestamp
    if p["message_type"] == "decision":
        _record_decision(thread, env)
    if p.get("stance") is None:
        return []
    stage(
        session,
        ReactionRow,
        thread_id=thread.id,
        message_id=p["message_id"],
        target_id=p["reply_to"],
        agent_id=p["sender"],
        stance=p["stance"],
        source=p.get("stance_source", "agent"),
        at=env.timestamp,
    )
    decision = _apply_stance(thread, env)
    if p["stance"] != "agree":
        return []
    thread.last_progress_at = env.timestamp
    consensus = _consensus(session, thread, decision, env) if decision else None
    if consensus is None:
        return []
    outcome["consensus"] = consensus
    data = {"thread_id": thread.id, "topic": thread.topic, "consensus": consensus}
    return [_event(env, "thread_consensus", _thread_address(session, thread), data, 900)]


def apply_thread_message(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """A message, and for a thread message its stance, decision and consensus."""
    p = env.payload
    refusal = _check_stance(session, p)
    if refusal:
        return Applied({"ok": False, "reason": refusal})
    applied = conversation_projection.apply_message_posted(session, env, limits)
    if applied.outcome["ok"] and p.get("thread_id"):
        applied.events.extend(_thread_effects(session, env, applied.outcome))
    return applied


def apply_thread_opened(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """A thread, with its shared context (a review's task, criteria and deadline)."""
    context = env.payload.get("shared_context") or {}
    if not isinstance(context, dict):
        raise TypeError("shared_context must be an object")
    applied = conversation_projection.apply_thread_created(session, env, limits)
    if applied.outcome["ok"]:
        thread = session.get(ThreadRow, env.payload["thread_id"])
        assert thread is not None
        thread.shared_context = dict(context)
        thread.decision_log = []
        thread.last_progress_at = env.timestamp
        thread.epoch_at = env.timestamp
    return applied


# --- status changes --------------------------------------------------------------------------


def _open_escalations(session: Session, thread_id: str) -> int:
    return len(
        session.scalars(
            select(EscalationRow.id).where(
                EscalationRow.thread_id == thread_id, EscalationRow.resolved.is_(False)
            )
        ).all()
    )


def _transition(session: Session, thread: ThreadRow, env: Envelope) -> str | None:
    """Apply one status action; return why it is refused (None: applied)."""
    p = env.payload
    action, status, at = p["action"], thread.status, env.timestamp
    if status == "completed":
        return "thread is completed"
    if action == "pause":
        if status == "paused":
            return "thread is already paused"
        thread.status = "paused"
    elif action == "resume":
        if status != "paused":
            return "thread is not paused"
        thread.status = "escalated" if _open_escalations(session, thread.id) else "active"
    elif action == "resolve":
        if not _resolve_open(session, thread.id, p.get("reason") or "resolved", at):
            return "thread has no open escalation"
        if status == "escalated":
            thread.status = "active"
        thread.epoch_at = thread.last_progress_at = at
    else:
        _resolve_open(session, thread.id, p.get("reason") or "thread closed", at)
        thread.status = "completed"
    return None


def _idle_since(p: dict[str, Any]) -> datetime | None:
    """The idle cutoff an idle close was decided on (None: not an idle close)."""
    raw = _optional_text(p.get("idle_before"), 64, "idle_before")
    if raw is None:
        return None
    cutoff = datetime.fromisoformat(raw)
    if cutoff.tzinfo is None:
        raise ValueError("idle_before needs a time zone")
    return cutoff


def apply_thread_status(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Pause, resume, resolve (the open escalations) or close a thread."""
    p = env.payload
    _text(p["thread_id"], ID_LENGTH, "thread_id")
    _text(p["agent_id"], NAME_LENGTH, "agent_id")
    _optional_text(p.get("reason"), TEXT_LIMIT, "reason")
    if p["action"] not in STATUS_ACTIONS:
        raise ValueError(f"action must be one of {', '.join(STATUS_ACTIONS)}")
    idle_before = _idle_since(p)
    thread = session.get(ThreadRow, p["thread_id"])
    if thread is None:
        return Applied({"ok": False, "reason": "thread not found"})
    # A message may land between the monitor's look and its close: in log order, it wins.
    if idle_before is not None and thread.last_activity > idle_before:
        return Applied({"ok": False, "reason": "thread is no longer idle"})
    before = thread.status
    refusal = _transition(session, thread, env)
    if refusal:
        return Applied({"ok": False, "reason": refusal})
    if p["action"] == "resolve":
        entry = {
            "kind": "resolution",
            "by": p["agent_id"],
            "text": p.get("reason") or "resolved",
            "at": domain.iso(env.timestamp),
        }
        thread.decision_log = [*(thread.decision_log or []), entry]
    thread.last_activity = env.timestamp
    data = {
        "thread_id": thread.id,
        "action": p["action"],
        "by": p["agent_id"],
        "from": before,
        "status": thread.status,
        "reason": p.get("reason"),
    }
    event = _event(env, "thread_status", _thread_address(session, thread), data)
    return Applied({"ok": True, "status": thread.status}, [event])


# --- escalations -----------------------------------------------------------------------------


def _check_actions(actions: Any) -> list[dict[str, Any]]:
    if not isinstance(actions, list) or not actions:
        raise ValueError("actions must be a non-empty list")
    checked = []
    for action in actions:
        if not isinstance(action, dict):
            raise TypeError("each action must be an object")
        _text(action["type"], ID_LENGTH, "action type")
        checked.append(dict(action))
    return checked


def apply_thread_escalated(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Record a fired rule unless the same rule is already open on the thread."""
    p = env.payload
    _text(p["escalation_id"], ID_LENGTH, "escalation_id")
    _text(p["thread_id"], ID_LENGTH, "thread_id")
    _text(p["rule"], NAME_LENGTH, "rule")
    _text(p["reason"], TEXT_LIMIT, "reason")
    actions = _check_actions(p["actions"])
    priority = p.get("priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise TypeError("priority must be an integer")
    thread = session.get(ThreadRow, p["thread_id"])
    if thread is None:
        return Applied({"ok": False, "reason": "thread not found"})
    if thread.status in ("completed", "paused"):
        return Applied({"ok": False, "reason": f"thread is {thread.status}"})
    open_rule = session.scalars(
        select(EscalationRow.id).where(
            EscalationRow.thread_id == thread.id,
            EscalationRow.rule == p["rule"],
            EscalationRow.resolved.is_(False),
        )
    ).first()
    if open_rule is not None or session.get(EscalationRow, p["escalation_id"]) is not None:
        return Applied({"ok": False, "reason": "rule already fired on this thread"})
    row = EscalationRow(
        id=p["escalation_id"],
        thread_id=thread.id,
        rule=p["rule"],
        priority=priority,
        reason=p["reason"],
        triggered_at=env.timestamp,
        origin=env.origin,
        actions=actions,
        resolved=False,
        resolution=None,
        resolved_at=None,
    )
    session.add(row)
    thread.status = "escalated"
    data = escalation_json(row) | {"topic": thread.topic}
    event = _event(env, "thread_escalated", _thread_address(session, thread), data)
    return Applied({"ok": True}, [event])


def escalation_json(row: EscalationRow) -> dict[str, Any]:
    """The seed's EscalationEvent of a row."""
    return {
        "id": row.id,
        "threadId": row.thread_id,
        "rule": row.rule,
        "priority": domain.escalation_priority(row.priority, list(row.actions)),
        "rule_priority": row.priority,
        "reason": row.reason,
        "triggeredAt": domain.iso(row.triggered_at),
        "actions": list(row.actions),
        "resolved": row.resolved,
        "resolution": row.resolution,
    }


def apply_escalation_action(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Record an attempt at one action of an escalation (its origin node carries them out)."""
    p = env.payload
    row = session.get(EscalationRow, _text(p["escalation_id"], ID_LENGTH, "escalation_id"))
    if row is None:
        return Applied({"ok": False, "reason": "escalation not found"})
    if row.origin != env.origin:
        return Applied({"ok": False, "reason": "only the escalation's origin carries it out"})
    index = p["index"]
    if not isinstance(index, int) or not 0 <= index < len(row.actions):
        raise ValueError("index must point at an action")
    state = p["state"]
    if not isinstance(state, dict) or state.get("status") not in ("done", "failed"):
        raise ValueError("state.status must be done or failed")
    actions = [dict(a) for a in row.actions]
    actions[index] = {**actions[index], **state}
    row.actions = actions
    events = []
    if actions[index]["type"] == "notify_human" and state.get("attempts") == 1:
        thread = session.get(ThreadRow, row.thread_id)
        address = _thread_address(session, thread) if thread else f"bzzz://{env.origin}"
        data = {"escalation": escalation_json(row), "action": actions[index]}
        events.append(_event(env, "human_notification", address, data))
    return Applied({"ok": True}, events)


# --- SLURP -----------------------------------------------------------------------------------


def apply_slurp_generated(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Keep a consensus's SLURP context event (one per thread), from the node that owes it.

    Submission state is not kept here: the origin records it in its own ``slurp_submissions``.
    """
    p = env.payload
    event_id = _text(p["event_id"], ID_LENGTH, "event_id")
    thread_id = _text(p["thread_id"], ID_LENGTH, "thread_id")
    if not isinstance(p["event"], dict):
        raise TypeError("event must be an object")
    thread = session.get(ThreadRow, thread_id)
    # Consensus recorded before revision 0004 names no node: any node may generate its event.
    owner = thread.consensus_origin if thread is not None else None
    if owner is not None and owner != env.origin:
        reason = "only the node that completed the consensus generates its SLURP event"
        return Applied({"ok": False, "reason": reason})
    exists = session.scalars(
        select(SlurpEventRow.id).where(SlurpEventRow.thread_id == thread_id)
    ).first()
    if exists is not None or session.get(SlurpEventRow, event_id) is not None:
        return Applied({"ok": False, "reason": "the thread has a SLURP event already"})
    session.add(
        SlurpEventRow(
            id=event_id,
            thread_id=thread_id,
            origin=env.origin,
            event=dict(p["event"]),
            created_at=env.timestamp,
        )
    )
    data = {"thread_id": thread_id, "event": p["event"]}
    address = _thread_address(session, thread) if thread else f"bzzz://{env.origin}"
    event = _event(env, "slurp_context", address, data)
    return Applied({"ok": True}, [event])


_THREAD_APPLIERS: dict[str, Applier] = {
    "message.posted": apply_thread_message,
    "thread.created": apply_thread_opened,
    "thread.status": apply_thread_status,
    "thread.escalated": apply_thread_escalated,
    "escalation.action": apply_escalation_action,
    "slurp.generated": apply_slurp_generated,
}

APPLIERS: dict[str, Applier] = (
    AGENT_APPLIERS
    | CONVERSATION_APPLIERS
    | {kind: _strict_json(fn) for kind, fn in _THREAD_APPLIERS.items()}
)
