"""Reservations that ended, remembered a while: a holder that checks a path is told why.

A live reservation is a row of ``reservations``; when it ends (released, expired, its agent
erased or moved to another project, its node removed) the row goes and a row of
``reservation_ends`` takes its place, with the fencing token it had and the reason. They are
kept at most ``KEEP`` (by the log's time) and ``PER_AGENT`` for each agent (the newest), so
the table stays bounded whatever an agent does. Every change here is an applier's, decided by
the envelope's own time: every node remembers the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from bzzz.store.models import ReservationEndRow, ReservationRow

RELEASED = "released"
EXPIRED = "expired"
FORGOTTEN = "forgotten"
MOVED = "moved"
NODE_REMOVED = "node_removed"
REASONS = (RELEASED, EXPIRED, FORGOTTEN, MOVED, NODE_REMOVED)
# How long, and how many a agent, ended reservations are remembered.
KEEP = timedelta(hours=24)
PER_AGENT = 32


def record_ends(
    session: Session, rows: Iterable[ReservationRow], reason: str, at: datetime | None = None
) -> None:
    """Remember that ``rows`` ended for ``reason`` (at ``at``; an expired one at its end)."""
    agents: set[str] = set()
    for row in rows:
        ended = row.expires_at if reason == EXPIRED or at is None else at
        session.merge(
            ReservationEndRow(
                id=row.id,
                project=row.project,
                agent_id=row.agent_id,
                mode=row.mode,
                paths=list(row.paths),
                fencing_token=row.fencing_token or 0,
                reason=reason,
                ended_at=ended,
            )
        )
        agents.add(row.agent_id)
    if not agents:
        return
    session.flush()
    for agent_id in sorted(agents):
        older = session.scalars(
            select(ReservationEndRow.id)
            .where(ReservationEndRow.agent_id == agent_id)
            .order_by(ReservationEndRow.ended_at.desc(), ReservationEndRow.id.desc())
            .offset(PER_AGENT)
        ).all()
        if older:
            session.execute(delete(ReservationEndRow).where(ReservationEndRow.id.in_(older)))


def prune_ends(session: Session, at: datetime) -> None:
    """Forget the ends older than ``KEEP`` at ``at``."""
    session.execute(delete(ReservationEndRow).where(ReservationEndRow.ended_at <= at - KEEP))


def forget_ends(session: Session, agent_id: str) -> None:
    """Forget every end of an erased agent's reservations (its erasure's own end stays)."""
    session.execute(delete(ReservationEndRow).where(ReservationEndRow.agent_id == agent_id))
