"""The appliers of retention and erasure: every node removes the same content at the same point
of the log.

``retention.applied`` carries the cut-off times its origin chose; ``retention.forget`` names an
agent. Both decide only from the store as the log left it at their sequence and from the
envelope's own time, so every node — a new one replaying the log included — removes the same
rows and writes the same tombstones. Agents, threads, tasks, tokens and subscriptions stay.

Content a service keeps in tables of its own (the knowledge graph's facts) is reached through
the steps it registers (``register_steps``): an erasure step given the agent, a memory step
given the memory cut-off; their counts join the outcome's under the step's name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, delete, select, update
from sqlalchemy.orm import Session

from bzzz import domain
from bzzz.network.envelope import Envelope
from bzzz.store import reservation_ends
from bzzz.store.agent_projection import end_reservations
from bzzz.store.models import (
    ActivityRow,
    DeliveryRow,
    EventRow,
    KnowledgeRow,
    MemoryRow,
    MessageRow,
    MessageTombstoneRow,
    ParticipantRow,
    RetentionRunRow,
    TaskRow,
    ThreadRow,
)
from bzzz.store.projection import (
    NAME_LENGTH,
    Applied,
    Applier,
    ProjectionLimits,
    _strict_json,
    _text,
)

APPLIED = "retention.applied"
FORGET = "retention.forget"
RESTATED = "retention.restated"
KIND = "retention"
CUTOFFS = ("messages", "events", "memory", "audit")
TOMBSTONE_KEY = "bzzz_tombstone"
_IDS_PER_STATEMENT = 500
_MESSAGES = cast(Table, MessageRow.__table__)

# Steps of other services' content: (name -> step), applied in name order.
ForgetStep = Callable[[Session, str], int]
MemoryStep = Callable[[Session, datetime], int]
_FORGET_STEPS: dict[str, ForgetStep] = {}
_MEMORY_STEPS: dict[str, MemoryStep] = {}


def register_steps(
    name: str, *, forget: ForgetStep | None = None, memory: MemoryStep | None = None
) -> None:
    """Let erasure (``forget``: the agent's id) and retention's memory cut-off (``memory``)
    remove a service's own content too (registering again replaces the steps)."""
    if forget is not None:
        _FORGET_STEPS[name] = forget
    if memory is not None:
        _MEMORY_STEPS[name] = memory


def tombstone(reason: str, at: datetime) -> dict[str, Any]:
    """The content a purged message keeps: that it was purged, when and why."""
    return {TOMBSTONE_KEY: {"reason": reason, "purged_at": domain.iso(at)}}


def _cutoff(value: Any, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"cutoffs.{name} must be an ISO time or null")
    when = datetime.fromisoformat(value)
    if when.tzinfo is None:
        raise ValueError(f"cutoffs.{name} must carry a time zone")
    return when


def _slices(ids: list[str]) -> Iterable[list[str]]:
    for first in range(0, len(ids), _IDS_PER_STATEMENT):
        yield ids[first : first + _IDS_PER_STATEMENT]


def _bury(session: Session, rows: list[tuple[str, datetime]], reason: str, at: datetime) -> int:
    """Replace the content of these messages (id, posted_at) by a tombstone; how many."""
    if not rows:
        return 0
    marker = tombstone(reason, at)
    ids = [message_id for message_id, _ in rows]
    for part in _slices(ids):
        session.execute(update(_MESSAGES).where(_MESSAGES.c.id.in_(part)).values(content=marker))
    session.add_all(
        MessageTombstoneRow(id=message_id, posted_at=posted, purged_at=at, reason=reason)
        for message_id, posted in rows
    )
    session.flush()
    return len(rows)


def _unburied(session: Session, *criteria: Any) -> list[tuple[str, datetime]]:
    buried = select(MessageTombstoneRow.id)
    query = (
        select(MessageRow.id, MessageRow.posted_at)
        .where(*criteria, MessageRow.id.not_in(buried))
        .order_by(MessageRow.posted_at, MessageRow.id)
    )
    return [(str(row[0]), row[1]) for row in session.execute(query)]


def _purge_events(session: Session, before: datetime) -> int:
    removed = 0
    for statement in (
        delete(EventRow).where(EventRow.created_at < before),
        delete(DeliveryRow).where(
            DeliveryRow.status.in_(("delivered", "dead")), DeliveryRow.created_at < before
        ),
        delete(ActivityRow).where(ActivityRow.at < before),
    ):
        removed += int(getattr(session.execute(statement), "rowcount", 0) or 0)
    return removed


def _purge_memory(session: Session, before: datetime) -> int:
    memories = session.execute(delete(MemoryRow).where(MemoryRow.created_at < before))
    knowledge = session.execute(delete(KnowledgeRow).where(KnowledgeRow.created_at < before))
    return int(getattr(memories, "rowcount", 0) or 0) + int(getattr(knowledge, "rowcount", 0) or 0)


def _record_run(
    session: Session, env: Envelope, kind: str, cutoffs: dict[str, Any], counts: dict[str, int]
) -> None:
    principal = env.payload.get("principal")
    session.add(
        RetentionRunRow(
            id=env.id,
            kind=kind,
            origin=env.origin,
            principal=principal if isinstance(principal, str) else "",
            at=env.timestamp,
            cutoffs=cutoffs,
            counts=counts,
        )
    )


def apply_retention(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Remove what is older than the envelope's cut-offs (messages become tombstones).

    The audit cut-off is each node's to apply to its own chain (after the commit, with a
    signed anchor): records are not network state.
    """
    p = env.payload
    _text(p["principal"], 256, "principal")
    raw = p["cutoffs"]
    if not isinstance(raw, dict):
        raise TypeError("cutoffs must be an object")
    cutoffs = {name: _cutoff(raw.get(name), name) for name in CUTOFFS}
    counts = {"messages": 0, "events": 0, "memory": 0}
    if cutoffs["messages"] is not None:
        old = _unburied(session, MessageRow.posted_at < cutoffs["messages"])
        counts["messages"] = _bury(session, old, "retention", env.timestamp)
    if cutoffs["events"] is not None:
        counts["events"] = _purge_events(session, cutoffs["events"])
    if cutoffs["memory"] is not None:
        counts["memory"] = _purge_memory(session, cutoffs["memory"])
        for name, step in sorted(_MEMORY_STEPS.items()):
            counts[name] = step(session, cutoffs["memory"])
    shown = {name: domain.iso(when) if when else None for name, when in cutoffs.items()}
    _record_run(session, env, "retention", shown, counts)
    return Applied({"ok": True, "retention": "applied", "cutoffs": shown, "counts": counts})


def _forget_tasks(session: Session, agent_id: str) -> int:
    """Blank the agent's tasks (all it was given and reported) and what it assigned others."""
    own = session.execute(
        update(TaskRow)
        .where(TaskRow.agent_id == agent_id)
        .values(description="", data={}, progress=None, result=None, error=None)
    )
    # Another agent's work on such a task (progress, result) is that agent's own content.
    given = session.execute(
        update(TaskRow)
        .where(TaskRow.assigner == agent_id, TaskRow.agent_id != agent_id)
        .values(description="", data={})
    )
    return sum(int(getattr(done, "rowcount", 0) or 0) for done in (own, given))


def _forget_memories(session: Session, agent_id: str) -> int:
    ids = list(session.scalars(select(MemoryRow.id).where(MemoryRow.agent_id == agent_id)))
    for part in _slices(ids):
        session.execute(delete(MemoryRow).where(MemoryRow.id.in_(part)))
        knowledge = [f"kn-{memory_id}" for memory_id in part]
        session.execute(delete(KnowledgeRow).where(KnowledgeRow.id.in_(knowledge)))
    return len(ids)


def _forget_decisions(session: Session, agent_id: str) -> int:
    """Blank the agent's texts in the decision logs of the threads it took part in."""
    threads = select(ParticipantRow.thread_id).where(ParticipantRow.agent_id == agent_id)
    blanked = 0
    for thread in session.scalars(select(ThreadRow).where(ThreadRow.id.in_(threads))):
        log = [dict(entry) for entry in thread.decision_log or []]
        mine = {e.get("message_id") for e in log if e.get("by") == agent_id and e.get("text")}
        if not mine:
            continue
        for entry in log:
            if entry.get("message_id") in mine:
                entry["text"] = ""
        thread.decision_log = log
        blanked += len(mine)
        consensus = thread.consensus
        if consensus and consensus.get("decision_message_id") in mine:
            thread.consensus = dict(consensus, decisions=[""])
    return blanked


def _given_alone(session: Session, agent_id: str) -> list[tuple[str, datetime]]:
    """Task assignments others addressed to this agent alone (a wider one is theirs too)."""
    given = select(TaskRow.message_id).where(
        TaskRow.agent_id == agent_id, TaskRow.assigner != agent_id
    )
    rows = session.execute(
        select(MessageRow.id, MessageRow.posted_at, MessageRow.recipients).where(
            MessageRow.id.in_(given),
            MessageRow.id.not_in(select(MessageTombstoneRow.id)),
        )
    )
    return [(str(r[0]), r[1]) for r in rows if list(r[2] or []) == [agent_id]]


def apply_forget(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Erase one agent's content: its messages' content (tombstones), its tasks' data, its
    memories and the knowledge they gave, its decision texts. The agent itself stays."""
    p = env.payload
    _text(p["principal"], 256, "principal")
    agent_id = _text(p["agent_id"], NAME_LENGTH, "agent_id")
    sent = _unburied(session, MessageRow.sender == agent_id)
    counts = {
        "messages": _bury(
            session, sent + _given_alone(session, agent_id), "erasure", env.timestamp
        ),
        "tasks": _forget_tasks(session, agent_id),
        "memories": _forget_memories(session, agent_id),
        "decisions": _forget_decisions(session, agent_id),
        "reservations": _end_reservations(session, agent_id, env.timestamp),
    }
    for name, step in sorted(_FORGET_STEPS.items()):
        counts[name] = step(session, agent_id)
    _record_run(session, env, "erasure", {"agent_id": agent_id}, counts)
    return Applied({"ok": True, "retention": "forgotten", "agent_id": agent_id, "counts": counts})


def apply_restated(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Stand-ins of purged envelopes: a node that replays the log applies them in the purged
    envelopes' places (bzzz.network.restate); here they change nothing."""
    entries = env.payload["entries"]
    if not isinstance(entries, list):
        raise TypeError("entries must be a list")
    return Applied({"ok": True, "entries": len(entries)})


RETENTION_APPLIERS: dict[str, Applier] = {
    APPLIED: _strict_json(apply_retention),
    FORGET: _strict_json(apply_forget),
    RESTATED: _strict_json(apply_restated),
}


def _end_reservations(session: Session, agent_id: str, at: datetime) -> int:
    """End an erased agent's reservations: what it held before is forgotten, and only that
    they ended by its erasure is kept a while (its check says so)."""
    reservation_ends.forget_ends(session, agent_id)
    return end_reservations(session, [agent_id], reason=reservation_ends.FORGOTTEN, at=at)
