"""Audit retention: a node prunes its own chain's old records and keeps a signed anchor.

The chain is cut only at a record the node signed a head for (its ``audit.head`` envelopes are
on every node): the anchor (seq, hash) of the last pruned record must equal that signed head,
and the first kept record must link to it. ``bzzz audit verify`` checks both, so pruning keeps
the chain verifiable and a forged anchor is caught like a rewritten record.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from bzzz.audit.records import stamp
from bzzz.store.models import AuditAnchorRow, AuditHeadRow, AuditRecordRow


def prune_chain(session: Session, node_id: str, before: datetime, now: datetime) -> int:
    """Remove this node's records older than ``before`` up to its newest signed head there."""
    signed = select(AuditHeadRow.seq).where(AuditHeadRow.node_id == node_id)
    cut = session.execute(
        select(func.max(AuditRecordRow.seq)).where(
            AuditRecordRow.node_id == node_id,
            AuditRecordRow.at < stamp(before),
            AuditRecordRow.seq.in_(signed),
        )
    ).scalar_one_or_none()
    if cut is None:
        return 0
    last = session.get(AuditRecordRow, (node_id, int(cut)))
    assert last is not None
    removed = session.execute(
        delete(AuditRecordRow).where(
            AuditRecordRow.node_id == node_id, AuditRecordRow.seq <= int(cut)
        )
    )
    count = int(getattr(removed, "rowcount", 0) or 0)
    anchor = session.get(AuditAnchorRow, node_id)
    if anchor is None:
        session.add(
            AuditAnchorRow(
                node_id=node_id, seq=last.seq, hash=last.hash, pruned=count, pruned_at=now
            )
        )
    else:
        anchor.seq, anchor.hash, anchor.pruned_at = last.seq, last.hash, now
        anchor.pruned += count
    return count
