"""The applier of ``audit.head``: every node keeps every node's signed chain heads."""

from __future__ import annotations

import re

from sqlalchemy.orm import Session

from bzzz.audit.records import head_bytes
from bzzz.network.envelope import Envelope
from bzzz.network.identity import verify_signature
from bzzz.store.models import AuditHeadRow
from bzzz.store.projection import Applied, Applier, ProjectionLimits, _strict_json, _text

_HASH = re.compile(r"^[0-9a-f]{64}$")


def apply_audit_head(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    """Store a node's signed head; a node may publish only its own, correctly signed."""
    p = env.payload
    node_id = _text(p["node_id"], 64, "node_id")
    seq = p["seq"]
    hash_ = _text(p["hash"], 64, "hash")
    public_key = _text(p["public_key"], 64, "public_key")
    signature = _text(p["signature"], 128, "signature")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise ValueError("seq must be a positive integer")
    if not _HASH.match(hash_):
        raise ValueError("hash must be a SHA-256 hex digest")
    if node_id != env.origin or public_key != env.origin_key:
        return Applied({"ok": False, "reason": "not_own_head"})
    if not verify_signature(public_key, signature, head_bytes(node_id, seq, hash_)):
        return Applied({"ok": False, "reason": "bad_signature"})
    known = session.get(AuditHeadRow, (node_id, seq))
    if known is not None:
        # Two heads for one seq: the first stays, the second is evidence of a fork.
        return Applied({"ok": known.hash == hash_, "reason": "exists"})
    session.add(
        AuditHeadRow(
            node_id=node_id,
            seq=seq,
            hash=hash_,
            public_key=public_key,
            signature=signature,
            envelope_id=env.id,
            signed_at=env.timestamp,
        )
    )
    return Applied({"ok": True})


AUDIT_APPLIERS: dict[str, Applier] = {"audit.head": _strict_json(apply_audit_head)}
