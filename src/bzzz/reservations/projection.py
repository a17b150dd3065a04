"""The appliers of ``reservation.*``: which reservations are live, decided in log order.

Two exclusive reservations whose patterns can match one common path never coexist: the
applier of ``reservation.requested`` checks the new one against the live ones of its project
and records it or refuses it. Every node applies the same log in the same order and decides
only from its store as the log left it and from the envelope's own time, so all nodes agree,
however close together two nodes asked.

- A shared reservation coexists with shared ones; an exclusive one with nothing of another
  agent that overlaps it. An agent's own reservations never conflict with each other.
- A reservation is live until it is released, until ``expires_at`` (the request's time plus
  its ttl; a renewal moves it), or until its agent goes offline or is erased (the agent and
  retention appliers delete its rows). Every ``reservation.*`` envelope first deletes what
  expired by its time, and ``reservation.swept`` does only that, so no expired row stays for
  long (the service publishes a sweep when it finds one).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from bzzz import domain
from bzzz.domain import AgentStatus
from bzzz.network.envelope import Envelope
from bzzz.reservations.globs import normalize, overlap
from bzzz.store.agent_projection import end_reservations as end_for_agents
from bzzz.store.models import AgentRow, ReservationRow
from bzzz.store.projection import (
    ID_LENGTH,
    NAME_LENGTH,
    Applied,
    Applier,
    ProjectionLimits,
    _address_of,
    _event,
    _optional_text,
    _strict_json,
    _text,
)

KIND = "reservation"
SWEEP_KIND = "sweep"  # network-wide: bzzz.<network>.sweep.sweep
REQUESTED = "reservation.requested"
RELEASED = "reservation.released"
RENEWED = "reservation.renewed"
SWEPT = "reservation.swept"

EXCLUSIVE = "exclusive"
SHARED = "shared"
MODES = (EXCLUSIVE, SHARED)
MIN_TTL = 10
MAX_TTL = 86_400
MAX_PATHS = 16
REASON_LENGTH = 500
# Live reservations an agent may hold, and patterns a project's live ones may hold: the table
# stays bounded, and so does the check of a request (at most MAX_PATHS x PER_PROJECT pairs).
PER_AGENT = 64
PER_PROJECT = 1024


def reservation_json(row: ReservationRow) -> dict[str, Any]:
    """A reservation as the tools show it."""
    return {
        "id": row.id,
        "agent_id": row.agent_id,
        "project": row.project,
        "mode": row.mode,
        "paths": list(row.paths),
        "reason": row.reason,
        "created_at": domain.iso(row.created_at),
        "expires_at": domain.iso(row.expires_at),
    }


def _of_project(project: str | None) -> Any:
    return (
        ReservationRow.project.is_(None) if project is None else ReservationRow.project == project
    )


def _ttl(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not MIN_TTL <= value <= MAX_TTL:
        raise ValueError(f"ttl must be an integer from {MIN_TTL} to {MAX_TTL}")
    return value


def _paths(value: Any) -> list[str]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_PATHS:
        raise TypeError(f"paths must be a list of 1 to {MAX_PATHS} patterns")
    # A peer's pattern is read as this node reads its own (PatternError is a ValueError).
    return [normalize(p) for p in value]


def _ids(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > PER_AGENT:
        raise TypeError(f"reservation_ids must be a list of at most {PER_AGENT} ids")
    return [_text(v, ID_LENGTH, "reservation_ids") for v in value]


def sweep_expired(session: Session, at: datetime) -> int:
    """Delete every reservation that expired by ``at``; how many went."""
    done = session.execute(delete(ReservationRow).where(ReservationRow.expires_at <= at))
    return int(getattr(done, "rowcount", 0) or 0)


def _live(session: Session, project: str | None) -> list[ReservationRow]:
    """The project's reservations of online agents (rows of offline ones are deleted)."""
    rows = list(session.scalars(select(ReservationRow).where(_of_project(project))))
    gone: list[str] = []
    for agent_id in sorted({r.agent_id for r in rows}):
        agent = session.get(AgentRow, agent_id)
        if agent is None or agent.status == AgentStatus.OFFLINE.value:
            gone.append(agent_id)
    end_for_agents(session, gone)
    return [r for r in rows if r.agent_id not in gone]


def conflict_of(
    rows: list[ReservationRow], agent_id: str, mode: str, paths: list[str]
) -> tuple[ReservationRow, str, str] | None:
    """The first live reservation (in creation order) a request may not coexist with, and the
    pair of patterns that overlap; None when there is none."""
    for row in sorted(rows, key=lambda r: (r.created_at, r.id)):
        if row.agent_id == agent_id or (mode == SHARED and row.mode == SHARED):
            continue
        for mine in paths:
            for theirs in row.paths:
                if overlap(mine, theirs):
                    return row, mine, theirs
    return None


def _conflict(
    session: Session,
    env: Envelope,
    agent: AgentRow,
    found: tuple[ReservationRow, str, str],
    p: dict[str, Any],
) -> Applied:
    row, mine, theirs = found
    holder = {
        "agent_id": row.agent_id,
        "reservation_id": row.id,
        "mode": row.mode,
        "paths": list(row.paths),
        "expires_at": domain.iso(row.expires_at),
    }
    outcome = {
        "ok": False,
        "reason": "conflict",
        "holder": holder,
        "requested": mine,
        "overlaps": theirs,
    }
    held_by = session.get(AgentRow, row.agent_id)
    address = _address_of(held_by) if held_by is not None else f"bzzz://{row.agent_id}"
    data = {
        "project": row.project,
        "holder": holder,
        "requester": {"agent_id": agent.id, "mode": p["mode"], "paths": list(p["paths"])},
        "overlap": [mine, theirs],
    }
    return Applied(outcome, [_event(env, "reservation_conflict", address, data)])


def apply_requested(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Record a reservation unless a live one of another agent conflicts with it."""
    p = env.payload
    agent_id = _text(p["agent_id"], NAME_LENGTH, "agent_id")
    project = _optional_text(p.get("project"), NAME_LENGTH, "project")
    owner = _text(p["owner"], 256, "owner")
    mode = p["mode"]
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    paths = _paths(p["paths"])
    ttl = _ttl(p["ttl"])
    reason = _optional_text(p.get("reason"), REASON_LENGTH, "reason")
    at = env.timestamp
    sweep_expired(session, at)
    agent = session.get(AgentRow, agent_id)
    if agent is None or agent.status == AgentStatus.OFFLINE.value or agent.project != project:
        return Applied({"ok": False, "reason": "agent offline"})
    rows = _live(session, project)
    if sum(1 for r in rows if r.agent_id == agent_id) >= PER_AGENT:
        return Applied({"ok": False, "reason": "per_agent", "limit": PER_AGENT})
    if sum(len(r.paths) for r in rows) + len(paths) > PER_PROJECT:
        return Applied({"ok": False, "reason": "per_project", "limit": PER_PROJECT})
    found = conflict_of(rows, agent_id, mode, paths)
    if found is not None:
        return _conflict(session, env, agent, found, p | {"paths": paths})
    row = ReservationRow(
        id=env.id,
        project=project,
        agent_id=agent_id,
        owner=owner,
        mode=mode,
        paths=paths,
        reason=reason,
        origin=env.origin,
        created_at=at,
        expires_at=at + timedelta(seconds=ttl),
    )
    session.add(row)
    return Applied({"ok": True, "reservation": reservation_json(row)})


def _agent_rows(session: Session, agent_id: str, ids: list[str] | None) -> list[ReservationRow]:
    query = select(ReservationRow).where(ReservationRow.agent_id == agent_id)
    if ids is not None:
        query = query.where(ReservationRow.id.in_(ids))
    return list(session.scalars(query.order_by(ReservationRow.created_at, ReservationRow.id)))


def apply_released(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """End an agent's reservations (those named, or all of them)."""
    p = env.payload
    agent_id = _text(p["agent_id"], NAME_LENGTH, "agent_id")
    ids = _ids(p.get("reservation_ids"))
    sweep_expired(session, env.timestamp)
    rows = _agent_rows(session, agent_id, ids)
    for row in rows:
        session.delete(row)
    return Applied({"ok": True, "released": [r.id for r in rows]})


def apply_renewed(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Move the end of an agent's live reservations to the envelope's time plus ``ttl``."""
    p = env.payload
    agent_id = _text(p["agent_id"], NAME_LENGTH, "agent_id")
    ids = _ids(p.get("reservation_ids"))
    ttl = _ttl(p["ttl"])
    sweep_expired(session, env.timestamp)
    rows = _agent_rows(session, agent_id, ids)
    for row in rows:
        row.expires_at = env.timestamp + timedelta(seconds=ttl)
    return Applied({"ok": True, "renewed": [reservation_json(r) for r in rows]})


def apply_swept(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Delete what expired by the envelope's time (a node found expired rows)."""
    return Applied({"ok": True, "removed": sweep_expired(session, env.timestamp)})


RESERVATION_APPLIERS: dict[str, Applier] = {
    REQUESTED: _strict_json(apply_requested),
    RELEASED: _strict_json(apply_released),
    RENEWED: _strict_json(apply_renewed),
    SWEPT: _strict_json(apply_swept),
}
