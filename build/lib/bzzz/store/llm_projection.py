"""Appliers of the hosted-LLM envelopes: the cost ledger, its warnings, agents' memories,
projects' knowledge.

Limits travel in the payload (they are the origin's settings), so every node decides the
same ``cost_warning`` and ``limit_exceeded`` events from the same log.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bzzz import domain
from bzzz.network.envelope import Envelope
from bzzz.store.models import AgentRow, CostRow, KnowledgeRow, MemoryRow
from bzzz.store.projection import (
    ID_LENGTH,
    NAME_LENGTH,
    Applied,
    Applier,
    ProjectionLimits,
    _address_of,
    _check_names,
    _event,
    _optional_text,
    _strict_json,
    _text,
)

NANOS_PER_USD = 1_000_000_000
PERIODS = ("day", "month")


def _count(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer")
    return value


def _fraction(value: Any, name: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a number between 0 and 1")
    return float(value)


def _address(session: Session, env: Envelope, agent_id: str | None) -> str:
    row = session.get(AgentRow, agent_id) if agent_id else None
    return _address_of(row) if row is not None else f"bzzz://{env.origin}"


def _spent(session: Session, node_id: str, period: str, value: str) -> int:
    column = CostRow.day if period == "day" else CostRow.month
    total = session.execute(
        select(func.coalesce(func.sum(CostRow.cost_nanos), 0)).where(
            CostRow.node_id == node_id, column == value
        )
    )
    return int(total.scalar_one())


def _limit_data(period: str, spent: int, limit: int, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "period": period,
        "spent_usd": spent / NANOS_PER_USD,
        "limit_usd": limit / NANOS_PER_USD,
        **extra,
    }


def apply_cost_recorded(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Add one call to the ledger; crossing the warning threshold or a limit is an event."""
    p = env.payload
    call_id = _text(p["call_id"], ID_LENGTH, "call_id")
    agent_id = _optional_text(p.get("agent_id"), NAME_LENGTH, "agent_id")
    model = _text(p["model"], NAME_LENGTH, "model")
    cost = _count(p["cost_nanos"], "cost_nanos")
    budget = {period: _count(p["limits"][period], f"limits.{period}") for period in PERIODS}
    threshold = _fraction(p["limits"]["warning_threshold"], "limits.warning_threshold")
    if session.get(CostRow, call_id) is not None:
        return Applied({"ok": True, "duplicate": True})
    at = env.timestamp.astimezone(UTC)
    periods = {"day": at.strftime("%Y-%m-%d"), "month": at.strftime("%Y-%m")}
    before = {k: _spent(session, env.origin, k, v) for k, v in periods.items()}
    session.add(
        CostRow(
            id=call_id,
            node_id=env.origin,
            agent_id=agent_id,
            purpose=_text(p.get("purpose") or "task", ID_LENGTH, "purpose"),
            model=model,
            prompt_tokens=_count(p["prompt_tokens"], "prompt_tokens"),
            completion_tokens=_count(p["completion_tokens"], "completion_tokens"),
            cost_nanos=cost,
            day=periods["day"],
            month=periods["month"],
            at=at,
        )
    )
    events: list[domain.Event] = []
    address = _address(session, env, agent_id)
    for period in PERIODS:
        limit, spent = budget[period], before[period] + cost
        if not limit:
            continue
        extra = {
            "node_id": env.origin,
            "agent_id": agent_id,
            "model": model,
            "date": periods[period],
        }
        if before[period] < limit * threshold <= spent:
            data = _limit_data(period, spent, limit, extra | {"warning_threshold": threshold})
            events.append(_event(env, "cost_warning", address, data, len(events)))
        if before[period] < limit <= spent:
            data = _limit_data(period, spent, limit, extra | {"reason": "spent"})
            events.append(_event(env, "limit_exceeded", address, data, len(events)))
    return Applied({"ok": True, "day": periods["day"], "month": periods["month"]}, events)


def apply_cost_refused(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """A call refused before it was sent: a ``limit_exceeded`` event, nothing in the ledger."""
    p = env.payload
    agent_id = _optional_text(p.get("agent_id"), NAME_LENGTH, "agent_id")
    period = p["period"]
    if period not in PERIODS:
        raise ValueError("period must be day or month")
    data = _limit_data(
        period,
        _count(p["spent_nanos"], "spent_nanos"),
        _count(p["limit_nanos"], "limit_nanos"),
        {
            "node_id": env.origin,
            "agent_id": agent_id,
            "model": _text(p["model"], NAME_LENGTH, "model"),
            "estimate_usd": _count(p["estimate_nanos"], "estimate_nanos") / NANOS_PER_USD,
            "reason": "refused",
        },
    )
    event = _event(env, "limit_exceeded", _address(session, env, agent_id), data)
    return Applied({"ok": True}, [event])


def apply_memory_recorded(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Keep an episode or a thread memory of a hosted agent (under its project only)."""
    p = env.payload
    memory_id = _text(p["memory_id"], ID_LENGTH, "memory_id")
    kind = p["kind"]
    if kind not in ("episode", "thread"):
        raise ValueError("kind must be episode or thread")
    project = p["project"]
    if not isinstance(project, str) or len(project) > NAME_LENGTH:
        raise ValueError("project must be a string")
    if session.get(MemoryRow, memory_id) is None:
        session.add(
            MemoryRow(
                id=memory_id,
                agent_id=_text(p["agent_id"], NAME_LENGTH, "agent_id"),
                project=project,
                kind=kind,
                thread_id=_optional_text(p.get("thread_id"), ID_LENGTH, "thread_id"),
                topic=str(p.get("topic") or "")[:512],
                participants=_check_names(p.get("participants") or [], "participants"),
                summary=_text(p["summary"], 20_000, "summary"),
                outcome=str(p.get("outcome") or "")[:64],
                created_at=env.timestamp,
            )
        )
        if kind == "episode":
            # An episode's summary is its project's knowledge as well (kept once, by its id).
            text = f"{str(p.get('topic') or '')[:512]}: {p['summary']}"
            _add_knowledge(session, f"kn-{memory_id}", project, "episode", memory_id, text, env)
    return Applied({"ok": True})


KNOWLEDGE_KINDS = ("decision", "insight", "episode")
KNOWLEDGE_CHARS = 4_000


def _add_knowledge(
    session: Session,
    knowledge_id: str,
    project: str,
    kind: str,
    source: str,
    text: str,
    env: Envelope,
) -> None:
    if session.get(KnowledgeRow, knowledge_id) is not None:
        return
    session.add(
        KnowledgeRow(
            id=knowledge_id,
            project=project,
            kind=kind,
            source=source,
            text=text[:KNOWLEDGE_CHARS],
            created_at=env.timestamp,
        )
    )


def apply_knowledge_recorded(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Keep what a consensus taught a project: its decisions and insights (once each)."""
    p = env.payload
    project = p["project"]
    if not isinstance(project, str) or len(project) > NAME_LENGTH:
        raise ValueError("project must be a string")
    source = _text(p["source"], ID_LENGTH, "source")
    entries = p["entries"]
    if not isinstance(entries, list) or len(entries) > 100:
        raise ValueError("entries must be a list of at most 100")
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kind") not in KNOWLEDGE_KINDS:
            raise ValueError(f"an entry's kind must be one of {', '.join(KNOWLEDGE_KINDS)}")
        knowledge_id = _text(entry["id"], ID_LENGTH, "id")
        text = _text(entry["text"], 20_000, "text")
        _add_knowledge(session, knowledge_id, project, entry["kind"], source, text, env)
    return Applied({"ok": True})


LLM_APPLIERS: dict[str, Applier] = {
    kind: _strict_json(fn)
    for kind, fn in {
        "cost.recorded": apply_cost_recorded,
        "cost.refused": apply_cost_refused,
        "memory.recorded": apply_memory_recorded,
        "knowledge.recorded": apply_knowledge_recorded,
    }.items()
}
