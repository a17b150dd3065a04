"""Verification of a node's chain and of the signed heads the log holds.

A chain is intact when its records run 1, 2, 3… each holding the hash of the one before
and a hash its own fields give. The first break is named: an *edited* record (its fields no
longer give its hash), a *removed* one (a gap, or a link to a record that is not there) or a
*reordered* one (a link to a record further on). Heads are checked for their signature and,
for this node's chain, for holding the hash the chain has at that seq.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bzzz.audit.records import GENESIS, Record, head_bytes
from bzzz.network.identity import origin_of, verify_signature
from bzzz.store.models import AuditHeadRow


@dataclass(frozen=True, slots=True)
class Problem:
    """One break: what kind, at which seq, and a sentence for people."""

    kind: str  # edited | removed | reordered | head_signature | head_mismatch | head_missing
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


def _link_problem(record: Record, prev: Record | None, later: set[str]) -> Problem | None:
    expected_seq = prev.seq + 1 if prev else 1
    expected_prev = prev.hash if prev else GENESIS
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
            f"{prev.seq if prev else 'the start'})",
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


def verify_chain(records: Sequence[Record]) -> Problem | None:
    """The first break of one node's chain (records in seq order), or None."""
    later = {r.hash for r in records}
    prev: Record | None = None
    for record in records:
        later.discard(record.hash)
        problem = _link_problem(record, prev, later)
        if problem is not None:
            return problem
        prev = record
    return None


def _head_problem(head: AuditHeadRow, chain: dict[int, str] | None, last: int) -> Problem | None:
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


def verify(records: Sequence[Record], heads: Sequence[AuditHeadRow], node_id: str) -> Report:
    """Check ``node_id``'s chain and every head (those of ``node_id`` against the chain)."""
    report = Report(records=len(records), heads=len(heads))
    problem = verify_chain(records)
    if problem is not None:
        report.problems.append(problem)
    hashes = {r.seq: r.hash for r in records}
    last = records[-1].seq if records else 0
    for head in heads:
        found = _head_problem(head, hashes if head.node_id == node_id else None, last)
        if found is not None:
            report.problems.append(found)
    return report
