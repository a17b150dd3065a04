"""The store applies the envelope types a service registers, without importing the service."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bzzz import domain
from bzzz.network.envelope import Envelope, seal
from bzzz.network.identity import NodeIdentity
from bzzz.store.batch import BatchContext, BatchResult, apply_batch, register_appliers
from bzzz.store.database import Database
from bzzz.store.models import MessageRow
from bzzz.store.projection import Applied, ProjectionLimits

NODE = NodeIdentity.generate()


def _count_messages(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
    counted = session.execute(select(func.count()).select_from(MessageRow)).scalar_one()
    return Applied({"ok": True, "messages": counted})


def _posted(message_id: str) -> Envelope:
    payload = {"message_id": message_id, "sender": "x", "target_address": "bzzz://y",
               "message_type": "text", "priority": "medium", "content": {"text": "hi"},
               "recipients": ["y"]}  # fmt: skip
    return seal(NODE, "main", "message.posted", "bzzz.main.msg.x", payload, now=domain.utcnow())


def _counted(kind: str) -> Envelope:
    return seal(NODE, "main", kind, "bzzz.main.test.count", {}, now=domain.utcnow())


async def _apply(path: Path, envelopes: list[Envelope]) -> BatchResult:
    db = Database(f"sqlite+aiosqlite:///{path}")
    await db.open()
    try:
        numbered = list(zip(envelopes, range(1, len(envelopes) + 1), strict=True))
        ctx = BatchContext(NODE.node_id, ProjectionLimits(), None)
        return await db.write(lambda session: apply_batch(session, numbered, ctx))
    finally:
        await db.close()


async def test_an_unregistered_type_is_unknown_and_a_registered_one_is_applied(
    tmp_path: Path,
) -> None:
    before = await _apply(tmp_path / "before.db", [env := _counted("test.unregistered")])
    assert before.outcomes[env.id] == {
        "ok": False,
        "reason": "unknown envelope type test.unregistered",
    }
    register_appliers({"test.registered": _count_messages})
    after = await _apply(tmp_path / "after.db", [env := _counted("test.registered")])
    assert after.outcomes[env.id] == {"ok": True, "messages": 0}


async def test_an_applier_that_reads_staged_rows_sees_the_batch_before_it(
    tmp_path: Path,
) -> None:
    register_appliers({"test.count.staged": _count_messages}, reads_staged=True)
    register_appliers({"test.count.plain": _count_messages})
    staged, plain = _counted("test.count.staged"), _counted("test.count.plain")
    result = await _apply(tmp_path / "store.db", [_posted("m1"), plain, staged])
    # The post of the same batch is still staged for the plain applier, written for the other.
    assert result.outcomes[plain.id] == {"ok": True, "messages": 0}
    assert result.outcomes[staged.id] == {"ok": True, "messages": 1}


def test_a_second_applier_for_a_registered_type_is_refused() -> None:
    register_appliers({"test.once": _count_messages})
    register_appliers({"test.once": _count_messages})  # the same again changes nothing

    def other(session: Session, env: Envelope, limits: ProjectionLimits) -> Applied:
        return Applied({"ok": True})

    with pytest.raises(ValueError, match=r"test\.once already has an applier"):
        register_appliers({"test.once": other})
    with pytest.raises(ValueError, match=r"message\.posted already has an applier"):
        register_appliers({"message.posted": other})
