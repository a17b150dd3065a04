"""The appliers of ``reservation.*``: which reservations are live, decided in log order.

Two exclusive reservations whose patterns can match one common path never coexist: the
applier of ``reservation.requested`` checks the new one against the live ones of its project
and records it or refuses it. Every node applies the same log in the same order and decides
only from its store as the log left it and from the envelope's own time, so all nodes agree,
however close together two nodes asked.

- A shared reservation coexists with shared ones; an exclusive one with nothing of another
  agent that overlaps it. An agent's own reservations never conflict with each other.
- A reservation lives by its own clock: until it is released, until ``expires_at`` (the
  request's time plus its ttl; a renewal moves it), until its agent is erased (retention's
  forget), announced in another project, or its node is removed from the network. An agent
  going quiet (its lease or session ending, its node missing heartbeats) does not end it.
  Every ``reservation.*`` envelope first deletes what expired by its time, and
  ``reservation.swept`` does only that, so no expired row stays for long (the service
  publishes a sweep when it finds one).
- Each grant takes the next fencing token of its project (``reservation_fences``, counted in
  log order, so every node numbers it alike): a later grant of a path always has a larger one;
  a renewal keeps it. What ends is remembered a while (``store.reservation_ends``: released,
  expired, forgotten, moved, node_removed) for its holder's check.
- ``reservation.refused`` (an enforced check refused paths, ``reservations.check``) gives
  subscribers one ``reservation_refused`` event.
- ``reservation.expiring`` names reservations about to end (a node's sweep finds them): the
  holder gets one ``reservation_expiring`` event per end (``noticed_at``; a renewal clears it).
- The check of a request is bounded: patterns have a bounded shape (``globs``), a request at
  most ``MAX_PATHS`` of them, a project at most ``PER_PROJECT`` live ones; the projector warms
  the check off the event loop (:func:`prepare`) so the applier mostly looks answers up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from bzzz import domain
from bzzz.domain import AgentStatus
from bzzz.network.envelope import Envelope
from bzzz.reservations import check
from bzzz.reservations.globs import normalize, overlap, overlaps_any
from bzzz.store import reservation_ends
from bzzz.store.agent_projection import end_reservations as end_for_agents
from bzzz.store.database import Database
from bzzz.store.models import AgentRow, ReservationFenceRow, ReservationRow
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
EXPIRING = "reservation.expiring"
EXPIRING_EVENT = "reservation_expiring"
# Reservations one reservation.expiring envelope may name; how long before its end one may
# be noticed at most (the setting reservations.expiring_notice is at most this).
NOTICE_BATCH = 500
MAX_NOTICE = 3600

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
        "fencing_token": row.fencing_token or 0,
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
    """Delete every reservation that expired by ``at`` (remembered as ended), and forget the
    ends past their keeping; how many reservations went."""
    rows = list(session.scalars(select(ReservationRow).where(ReservationRow.expires_at <= at)))
    reservation_ends.prune_ends(session, at)
    if not rows:
        return 0
    reservation_ends.record_ends(session, rows, reservation_ends.EXPIRED)
    session.execute(delete(ReservationRow).where(ReservationRow.id.in_([r.id for r in rows])))
    return len(rows)


def next_fencing_token(session: Session, project: str | None) -> int:
    """The next fencing token of ``project``: one more than the last it granted."""
    key = project or ""
    fence = session.get(ReservationFenceRow, key)
    if fence is None:
        fence = ReservationFenceRow(project=key, last_token=0)
        session.add(fence)
    fence.last_token = (fence.last_token or 0) + 1
    return fence.last_token


def _live(session: Session, project: str | None, at: datetime) -> list[ReservationRow]:
    """The project's reservations (those of agents no longer known are ended here)."""
    rows = list(session.scalars(select(ReservationRow).where(_of_project(project))))
    gone = [a for a in sorted({r.agent_id for r in rows}) if session.get(AgentRow, a) is None]
    end_for_agents(session, gone, reason=reservation_ends.FORGOTTEN, at=at)
    return [r for r in rows if r.agent_id not in gone]


def conflict_of(
    rows: list[ReservationRow], agent_id: str, mode: str, paths: list[str]
) -> tuple[ReservationRow, str, str] | None:
    """The first live reservation (in creation order) a request may not coexist with, and the
    pair of patterns that overlap; None when there is none."""
    mine = tuple(paths)
    for row in sorted(rows, key=lambda r: (r.created_at, r.id)):
        if row.agent_id == agent_id or (mode == SHARED and row.mode == SHARED):
            continue
        # One remembered answer a live pattern (see prepare); the pair is looked for only in
        # the reservation that conflicts.
        if not any(overlaps_any(mine, theirs) for theirs in row.paths):
            continue
        for p in paths:
            for theirs in row.paths:
                if overlap(p, theirs):
                    return row, p, theirs
    return None


async def prepare(db: Database, envelopes: Sequence[Envelope]) -> None:
    """Decide the overlaps a batch's requests will ask about, in a worker thread.

    The applier runs inside the batch's transaction (on the event loop for a small batch or
    PostgreSQL); here the answers for the project's live patterns are computed first, off
    the loop, and remembered (``overlaps_any``). A row that changes in between is decided by
    the applier itself, so the outcome never depends on this.
    """
    wanted: list[tuple[str | None, str, str, tuple[str, ...]]] = []
    for env in envelopes:
        if env.type != REQUESTED:
            continue
        p = env.payload
        try:
            wanted.append((p.get("project"), p["agent_id"], p["mode"], tuple(_paths(p["paths"]))))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue  # the applier refuses it
    if not wanted:
        return
    async with db.session() as session:
        rows = {
            project: (
                await session.execute(
                    select(
                        ReservationRow.agent_id, ReservationRow.mode, ReservationRow.paths
                    ).where(_of_project(project))
                )
            ).all()
            for project in {w[0] for w in wanted}
        }
    work: list[tuple[tuple[str, ...], list[str]]] = []
    for project, agent_id, mode, mine in wanted:
        # Only what conflict_of asks: another agent's, and not shared against shared.
        theirs = {
            pattern
            for holder, held_mode, paths in rows[project]
            if holder != agent_id and not (mode == SHARED and held_mode == SHARED)
            for pattern in paths
        }
        work.append((mine, sorted(theirs)))
    if sum(len(mine) * len(theirs) for mine, theirs in work) > WARM_INLINE:
        await asyncio.to_thread(_warm, work)


# Pairs of patterns a request may check on the event loop without warming (~0.1 ms).
WARM_INLINE = 64


def _warm(work: list[tuple[tuple[str, ...], list[str]]]) -> None:
    for mine, live in work:
        for n, theirs in enumerate(live):
            overlaps_any(mine, theirs)
            if n % WARM_SLICE == WARM_SLICE - 1:
                # Hand the interpreter to the event loop's thread now, not at the end of
                # the interpreter's 5 ms switch interval: the loop waits less for it.
                time.sleep(0)


# Live patterns warmed between two hand-overs (well under a millisecond of work).
WARM_SLICE = 16


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
        "fencing_token": row.fencing_token or 0,
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
    rows = _live(session, project, at)
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
        fencing_token=next_fencing_token(session, project),
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
    reservation_ends.record_ends(session, rows, reservation_ends.RELEASED, env.timestamp)
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
        row.noticed_at = None  # a new end: its holder is told again before it
    return Applied({"ok": True, "renewed": [reservation_json(r) for r in rows]})


def _noticed(value: Any) -> list[tuple[str, str]]:
    if not isinstance(value, list) or not 1 <= len(value) <= NOTICE_BATCH:
        raise TypeError(f"reservations must be a list of 1 to {NOTICE_BATCH} items")
    return [
        (_text(v["id"], ID_LENGTH, "id"), _text(v["expires_at"], 64, "expires_at")) for v in value
    ]


def apply_expiring(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Tell the holders of the named reservations that they end soon (once per end).

    A reservation is noticed only as the envelope names it: with its current end (one
    renewed since is not), not yet noticed, live and ending within ``MAX_NOTICE`` seconds
    of the envelope's time.
    """
    named = _noticed(env.payload["reservations"])
    sweep_expired(session, env.timestamp)
    events: list[Any] = []
    noticed: list[str] = []
    for reservation_id, ends in named:
        row = session.get(ReservationRow, reservation_id)
        if row is None or row.noticed_at is not None or domain.iso(row.expires_at) != ends:
            continue
        left = (row.expires_at - env.timestamp).total_seconds()
        if not 0 < left <= MAX_NOTICE:
            continue
        row.noticed_at = env.timestamp
        holder = session.get(AgentRow, row.agent_id)
        address = _address_of(holder) if holder is not None else f"bzzz://{row.agent_id}"
        data = {
            "project": row.project,
            "reservation": reservation_json(row),
            "seconds_left": int(left),
        }
        events.append(_event(env, EXPIRING_EVENT, address, data, len(events)))
        noticed.append(row.id)
    return Applied({"ok": True, "noticed": noticed}, events)


def apply_swept(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Delete what expired by the envelope's time (a node found expired rows)."""
    return Applied({"ok": True, "removed": sweep_expired(session, env.timestamp)})


RESERVATION_APPLIERS: dict[str, Applier] = {
    REQUESTED: _strict_json(apply_requested),
    RELEASED: _strict_json(apply_released),
    RENEWED: _strict_json(apply_renewed),
    SWEPT: _strict_json(apply_swept),
    EXPIRING: _strict_json(apply_expiring),
    check.REFUSED: _strict_json(check.apply_refused),
}
