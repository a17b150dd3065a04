"""Reading the trail back: records by filter, every node's heads (list, verify, export)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Select, select

from bzzz.audit.records import Record
from bzzz.store.database import Database
from bzzz.store.models import AuditAnchorRow, AuditHeadRow, AuditRecordRow


@dataclass(frozen=True, slots=True)
class Filter:
    """Which records to read; None means any."""

    node_id: str | None = None
    principal: str | None = None
    agent: str | None = None
    since: str | None = None  # a record time (records.stamp) or an ISO prefix
    limit: int | None = None
    newest_first: bool = False


def _query(f: Filter) -> Select[AuditRecordRow]:
    query = select(AuditRecordRow)
    if f.node_id is not None:
        query = query.where(AuditRecordRow.node_id == f.node_id)
    if f.principal is not None:
        query = query.where(AuditRecordRow.principal == f.principal)
    if f.agent is not None:
        query = query.where(AuditRecordRow.agent == f.agent)
    if f.since is not None:
        query = query.where(AuditRecordRow.at >= f.since)
    if f.newest_first:
        query = query.order_by(AuditRecordRow.seq.desc(), AuditRecordRow.node_id)
    else:
        query = query.order_by(AuditRecordRow.node_id, AuditRecordRow.seq)
    return query.limit(f.limit) if f.limit else query


async def records(db: Database, f: Filter | None = None) -> list[Record]:
    """The records that match ``f``."""
    async with db.session() as session:
        rows = (await session.scalars(_query(f or Filter()))).all()
        return [Record.from_row(row) for row in rows]


async def heads(db: Database) -> list[AuditHeadRow]:
    """Every node's signed heads the log delivered here, by node and seq."""
    async with db.session() as session:
        query = select(AuditHeadRow).order_by(AuditHeadRow.node_id, AuditHeadRow.seq)
        return list((await session.scalars(query)).all())


async def anchors(db: Database) -> dict[str, AuditAnchorRow]:
    """Where each node's chain starts here after audit retention pruned it (node id -> anchor)."""
    async with db.session() as session:
        rows = (await session.scalars(select(AuditAnchorRow))).all()
        return {row.node_id: row for row in rows}
