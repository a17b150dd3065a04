"""Audit retention prunes old records and keeps `verify` meaningful with a signed anchor."""

from __future__ import annotations

from datetime import timedelta

from audit.support import sql

from bzzz.audit import reading
from bzzz.audit.records import Action, stamp
from bzzz.audit.verify import Report, verify
from bzzz.config import RetentionSettings
from bzzz.node.core import Node
from bzzz.principal import LOCAL


def _record(node: Node, name: str, days_ago: float) -> None:
    node.audit.record(
        Action(
            at=stamp(node.clock.now() - timedelta(days=days_ago)),
            principal="tok-a",
            session="mcp-s",
            action=f"tool:{name}",
            outcome="ok",
            digest="0" * 64,
        )
    )


async def _report(node: Node) -> Report:
    await node.audit.flush()
    records = await reading.records(node.db, reading.Filter(node_id=node.node_id))
    anchor = (await reading.anchors(node.db)).get(node.node_id)
    return verify(records, await reading.heads(node.db), node.node_id, anchor)


async def _old_then_new(node: Node) -> None:
    await node.audit.flush()
    for n in range(10):
        _record(node, f"old-{n}", days_ago=10)
    await node.audit.flush()
    assert await node.audit.publish_head()
    for n in range(3):
        _record(node, f"new-{n}", days_ago=0)
    await node.audit.flush()
    assert await node.audit.publish_head()


async def test_old_records_go_and_the_chain_still_verifies_from_its_anchor(node: Node) -> None:
    await _old_then_new(node)
    node.retention.settings = RetentionSettings(audit_days=5)
    await node.retention.run(LOCAL)
    records = await reading.records(node.db, reading.Filter(node_id=node.node_id))
    actions = [r.action for r in records]
    assert not any(a.startswith("tool:old-") for a in actions)
    assert [a for a in actions if a.startswith("tool:new-")] == [
        "tool:new-0",
        "tool:new-1",
        "tool:new-2",
    ]
    anchor = (await reading.anchors(node.db))[node.node_id]
    assert anchor.seq + 1 == records[0].seq and anchor.pruned >= 10
    assert (await _report(node)).ok
    # The chain goes on after the anchor.
    _record(node, "later", days_ago=0)
    assert (await _report(node)).ok


async def test_a_forged_anchor_or_a_lost_head_is_caught(node: Node) -> None:
    await _old_then_new(node)
    node.retention.settings = RetentionSettings(audit_days=5)
    await node.retention.run(LOCAL)
    db_file = node.node_dir / "bzzz.db"
    anchor = (await reading.anchors(node.db))[node.node_id]
    sql(db_file, f"UPDATE audit_anchors SET hash='{'ab' * 32}'")
    kinds = {p.kind for p in (await _report(node)).problems}
    assert {"edited", "head_mismatch"} <= kinds
    sql(db_file, f"UPDATE audit_anchors SET hash='{anchor.hash}'")
    assert (await _report(node)).ok
    sql(db_file, f"DELETE FROM audit_heads WHERE seq={anchor.seq}")
    assert [p.kind for p in (await _report(node)).problems] == ["anchor_unsigned"]
