"""`verify` names the first record edited, removed or reordered, and a rewritten head."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bzzz.audit import reading
from bzzz.audit.records import Action, Record, chain, stamp
from bzzz.audit.verify import Report, verify
from bzzz.node.core import Node

from .support import chain_of, sql

RECORDS = 10


async def signed_chain(node: Node) -> Path:
    """Ten records on the node's chain and their head signed on the log; the SQLite file."""
    for n in range(RECORDS):
        node.audit.record(
            Action(
                at=stamp(node.clock.now()),
                principal="tok-a",
                session="mcp-s",
                action=f"tool:step-{n}",
                outcome="ok",
                digest="0" * 64,
            )
        )
    await node.audit.flush()
    assert await node.audit.publish_head()
    return node.node_dir / "bzzz.db"


async def report_of(node: Node) -> Report:
    records = await reading.records(node.db, reading.Filter(node_id=node.node_id))
    return verify(records, await reading.heads(node.db), node.node_id)


def _forge_from(seq: int) -> Callable[[list[Record]], list[str]]:
    """A consistent rewrite: record ``seq`` changed and every hash after it recomputed."""

    def statements(records: list[Record]) -> list[str]:
        out: list[str] = []
        prev = records[seq - 2].hash
        for old in records[seq - 1 :]:
            action = "tool:innocent" if old.seq == seq else old.action
            new = chain(
                old.node_id,
                old.seq,
                prev,
                Action(old.at, old.principal, old.session, action, old.outcome, old.digest),
            )
            out.append(
                f"UPDATE audit_records SET action='{new.action}', prev_hash='{new.prev_hash}', "
                f"hash='{new.hash}' WHERE seq={old.seq}"
            )
            prev = new.hash
        return out

    return statements


TAMPERING: dict[str, tuple[Callable[[list[Record]], list[str]], str, int]] = {
    "edited": (
        lambda _: ["UPDATE audit_records SET outcome='PERMISSION_DENIED' WHERE seq=4"],
        "edited",
        4,
    ),
    "deleted": (lambda _: ["DELETE FROM audit_records WHERE seq=5"], "removed", 5),
    "swapped": (
        lambda _: [
            "UPDATE audit_records SET seq=-1 WHERE seq=6",
            "UPDATE audit_records SET seq=6 WHERE seq=7",
            "UPDATE audit_records SET seq=7 WHERE seq=-1",
        ],
        "reordered",
        6,
    ),
    "tail removed": (lambda _: ["DELETE FROM audit_records WHERE seq=10"], "head_missing", 10),
    "head rewritten": (
        lambda records: [f"UPDATE audit_heads SET hash='{records[2].hash}'"],
        "head_signature",
        10,
    ),
    "history rewritten": (_forge_from(3), "head_mismatch", 10),
}


async def test_an_untouched_chain_and_its_head_verify(node: Node) -> None:
    await signed_chain(node)
    report = await report_of(node)
    assert report.ok, report.problems
    assert (report.records, report.heads) == (RECORDS, 1)


@pytest.mark.parametrize("case", sorted(TAMPERING))
async def test_verify_names_the_first_tampered_record(node: Node, case: str) -> None:
    db_file = await signed_chain(node)
    tamper, kind, seq = TAMPERING[case]
    sql(db_file, *tamper(await chain_of(node)))

    report = await report_of(node)

    assert not report.ok
    first = report.problems[0]
    assert (first.kind, first.seq) == (kind, seq), report.problems
    assert str(seq) in first.message
