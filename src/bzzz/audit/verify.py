"""Verification of a node's chain and of the signed heads the log holds.

A chain is intact when its records run 1, 2, 3… each holding the hash of the one before
and a hash its own fields give. The first break is named: an *edited* record (its fields no
longer give its hash), a *removed* one (a gap, or a link to a record that is not there) or a
*reordered* one (a link to a record further on). Heads are checked for their signature and,
for this node's chain, for holding the hash the chain has at that seq. The heads come from the
log itself (``heads_on_log``) as well as from the store's copy: deleting or editing the local
``audit_heads`` rows hides nothing the log still holds.

After audit retention pruned a chain's older records, the chain starts after its *anchor*
(the last pruned record's seq and hash): the first kept record must link to it, and the
node's signed head at the anchor's seq must hold the anchor's hash, so an anchor cannot be
forged to hide a rewritten record.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from bzzz.audit.records import GENESIS, Record, head_bytes
from bzzz.audit.trail import HEAD_TYPE
from bzzz.network.envelope import EnvelopeRejected, open_envelope
from bzzz.network.identity import origin_of, verify_signature
from bzzz.store.models import AuditAnchorRow, AuditHeadRow


@dataclass(frozen=True, slots=True)
class Problem:
    """One break: what kind, at which seq, and a sentence for people."""

    # edited | removed | reordered | head_signature | head_mismatch | head_missing |
    # anchor_unsigned
    kind: str
    seq: int
    node_id: str
    message: str

    def to_json(self) -> dict[str, object]:
        """The problem as `audit verify --json` shows it."""
        return {
            "kind": self.kind,
            "seq": self.seq,
            "node_id": self.node_id,
            "message": self.message,
        }


@dataclass(slots=True)
class Report:
    """What a verification found."""

    records: int = 0
    heads: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No break anywhere."""
        return not self.problems


def _link_problem(
    record: Record, prev: Record | None, later: set[str], start: tuple[int, str] = (0, GENESIS)
) -> Problem | None:
    expected_seq = prev.seq + 1 if prev else start[0] + 1
    expected_prev = prev.hash if prev else start[1]
    own_ok = record.computed_hash() == record.hash
    linked = record.prev_hash == expected_prev
    node = record.node_id
    if not linked and record.prev_hash in later:
        return Problem(
            "reordered",
            record.seq,
            node,
            f"record {record.seq} is out of order (it follows a record stored after it)",
        )
    if not own_ok:
        return Problem(
            "edited", record.seq, node, f"record {record.seq} was edited (its hash does not match)"
        )
    if record.seq != expected_seq:
        return Problem(
            "removed",
            expected_seq,
            node,
            f"record {expected_seq} was removed (record {record.seq} follows "
            f"{prev.seq if prev else _start_name(start)})",
        )
    if not linked:
        # In place but no longer the record its successor was chained to: rewritten.
        seq = prev.seq if prev else record.seq
        return Problem(
            "edited",
            seq,
            node,
            f"record {seq} was edited (record {record.seq} no longer links to it)",
        )
    return None


def _start_name(start: tuple[int, str]) -> str:
    return f"the anchor at {start[0]}" if start[0] else "the start"


def verify_chain(
    records: Sequence[Record], start: tuple[int, str] = (0, GENESIS)
) -> Problem | None:
    """The first break of one node's chain (records in seq order, after ``start``), or None."""
    later = {r.hash for r in records}
    prev: Record | None = None
    for record in records:
        later.discard(record.hash)
        problem = _link_problem(record, prev, later, start)
        if problem is not None:
            return problem
        prev = record
    return None


def _head_problem(
    head: AuditHeadRow,
    chain: dict[int, str] | None,
    last: int,
    anchor: AuditAnchorRow | None = None,
) -> Problem | None:
    node = head.node_id
    try:
        key_node, _ = origin_of(head.public_key)
    except ValueError:
        key_node = ""
    signed = verify_signature(
        head.public_key, head.signature, head_bytes(node, head.seq, head.hash)
    )
    if key_node != node or not signed:
        return Problem(
            "head_signature",
            head.seq,
            node,
            f"the signed head at {head.seq} of {node} does not verify (rewritten head)",
        )
    if chain is None:
        return None
    if anchor is not None and head.seq <= anchor.seq:
        if head.seq == anchor.seq and head.hash != anchor.hash:
            return Problem(
                "head_mismatch",
                head.seq,
                node,
                f"the audit anchor at {head.seq} differs from the head the node signed "
                "(history rewritten before pruning)",
            )
        return None  # pruned by retention: the signature is all there is to check
    if head.seq not in chain:
        return Problem(
            "head_missing",
            head.seq,
            node,
            f"record {head.seq} named by a signed head is missing (the chain ends at {last})",
        )
    if chain[head.seq] != head.hash:
        return Problem(
            "head_mismatch",
            head.seq,
            node,
            f"record {head.seq} differs from the head the node signed (history rewritten)",
        )
    return None


def verify(
    records: Sequence[Record],
    heads: Sequence[AuditHeadRow],
    node_id: str,
    anchor: AuditAnchorRow | None = None,
) -> Report:
    """Check ``node_id``'s chain (after its ``anchor``, if retention pruned it) and every head
    (those of ``node_id`` against the chain)."""
    report = Report(records=len(records), heads=len(heads))
    start = (anchor.seq, anchor.hash) if anchor is not None else (0, GENESIS)
    problem = verify_chain(records, start)
    if problem is not None:
        report.problems.append(problem)
    if anchor is not None and not any(h.node_id == node_id and h.seq == anchor.seq for h in heads):
        report.problems.append(
            Problem(
                "anchor_unsigned",
                anchor.seq,
                node_id,
                f"the audit anchor at {anchor.seq} matches no head the node signed",
            )
        )
    hashes = {r.seq: r.hash for r in records}
    last = records[-1].seq if records else start[0]
    for head in heads:
        mine = head.node_id == node_id
        found = _head_problem(head, hashes if mine else None, last, anchor if mine else None)
        if found is not None:
            report.problems.append(found)
    return report


def heads_on_log(messages: Iterable[bytes], network: str) -> list[AuditHeadRow]:
    """The chain heads the log's ``audit.head`` envelopes hold, each signed by its own node.

    An envelope whose signature fails, or that carries another node's head, is no evidence
    and is left out (the projector refuses the same ones).
    """
    found = []
    for data in messages:
        try:
            env = open_envelope(data, network)
        except EnvelopeRejected:
            continue
        p = env.payload
        if env.type != HEAD_TYPE or p.get("node_id") != env.origin:
            continue
        if p.get("public_key") != env.origin_key or not isinstance(p.get("seq"), int):
            continue
        found.append(
            AuditHeadRow(
                node_id=env.origin,
                seq=p["seq"],
                hash=str(p.get("hash")),
                public_key=env.origin_key,
                signature=str(p.get("signature")),
                envelope_id=env.id,
                signed_at=env.timestamp,
            )
        )
    return found


def merged_heads(*sources: Iterable[AuditHeadRow]) -> list[AuditHeadRow]:
    """Every distinct (node, seq, hash) head of the sources, by node and seq.

    Two different hashes for one seq both stay: each is checked against the chain, so a head
    rewritten in one copy is reported rather than hidden by the other.
    """
    by_key: dict[tuple[str, int, str], AuditHeadRow] = {}
    for source in sources:
        for head in source:
            by_key.setdefault((head.node_id, head.seq, head.hash), head)
    return sorted(by_key.values(), key=lambda h: (h.node_id, h.seq, h.hash))
