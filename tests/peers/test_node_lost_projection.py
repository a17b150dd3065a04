"""node.lost decides the same way however the log is cut into batches."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from sqlalchemy import select

from bzzz import domain
from bzzz.network.envelope import Envelope, seal
from bzzz.network.identity import NodeIdentity
from bzzz.store.batch import BatchContext, apply_batch
from bzzz.store.database import Database
from bzzz.store.models import AgentRow
from bzzz.store.projection import ProjectionLimits

NODE = NodeIdentity.generate()
WITNESS = NodeIdentity.generate()
T0 = domain.utcnow()


def _log() -> list[Envelope]:
    def announce(agent_id: str) -> Envelope:
        payload = {"agent_id": agent_id, "role": "r", "session_id": "s"}
        return seal(NODE, "main", "agent.announced", f"bzzz.main.agent.{agent_id}", payload, now=T0)

    # "x" posts after the witness noticed the silence: the node was alive then, x stays.
    message = {"message_id": "m1", "sender": "x", "target_address": "bzzz://y",
               "message_type": "text", "priority": "medium", "content": {"text": "hi"},
               "recipients": ["y"]}  # fmt: skip
    posted = seal(NODE, "main", "message.posted", "bzzz.main.msg.x", message,
                  now=T0 + timedelta(seconds=20))  # fmt: skip
    lost = {"node_id": NODE.node_id, "boot": "b", "beat": 1, "last_seen": domain.iso(T0),
            "detected_at": domain.iso(T0 + timedelta(seconds=10))}  # fmt: skip
    noticed = seal(WITNESS, "main", "node.lost", f"bzzz.main.node.{NODE.node_id}", lost, now=T0)
    return [announce("x"), announce("y"), posted, noticed]


async def _apply(path: Path, cuts: list[int]) -> list[tuple[str, str]]:
    db = Database(f"sqlite+aiosqlite:///{path}")
    await db.open()
    try:
        numbered = list(zip(_log(), range(1, 5), strict=True))
        for start, end in zip([0, *cuts], [*cuts, len(numbered)], strict=True):
            ctx = BatchContext(NODE.node_id, ProjectionLimits(), None)
            part = numbered[start:end]
            await db.write(lambda session, part=part, ctx=ctx: apply_batch(session, part, ctx))
        async with db.session() as session:
            rows = await session.execute(select(AgentRow.id, AgentRow.status).order_by(AgentRow.id))
            return [(str(i), str(s)) for i, s in rows.all()]
    finally:
        await db.close()


async def test_a_lost_node_projects_the_same_in_one_batch_or_several(tmp_path: Path) -> None:
    whole = await _apply(tmp_path / "one.db", [])
    split = await _apply(tmp_path / "two.db", [3])
    single = await _apply(tmp_path / "four.db", [1, 2, 3])
    assert whole == split == single
    assert whole == [("x", "idle"), ("y", "offline")]


async def test_agent_rejoined_brings_back_only_the_origins_offline_agents_of_its_project(
    tmp_path: Path,
) -> None:
    """A node puts its own agents of the subject's project back online; another node's
    agent, an agent of another project, an unknown id and an online agent are left as they
    are (every node serving the project decides the same)."""
    other = NodeIdentity.generate()

    def announce(node: NodeIdentity, agent_id: str, project: str) -> Envelope:
        payload = {"agent_id": agent_id, "role": "r", "session_id": "s", "project": project}
        subject = f"bzzz.main.p.{project}.agent.{agent_id}"
        return seal(node, "main", "agent.announced", subject, payload, now=T0)

    lost = {"node_id": NODE.node_id, "boot": "b", "beat": 1, "last_seen": domain.iso(T0),
            "detected_at": domain.iso(T0 + timedelta(seconds=10))}  # fmt: skip
    ids = ["mine", "elsewhere", "theirs", "nobody"]
    back = {"agent_ids": ids, "reason": "its node was taken for lost"}
    forged = {"agent_ids": ["mine"], "reason": "not its agent"}
    log = [
        announce(NODE, "mine", "shop"),
        announce(NODE, "elsewhere", "ops"),
        announce(other, "theirs", "shop"),
        seal(WITNESS, "main", "node.lost", f"bzzz.main.node.{NODE.node_id}", lost, now=T0),
        seal(other, "main", "agent.rejoined", "bzzz.main.p.shop.agent.theirs", forged, now=T0),
        seal(NODE, "main", "agent.rejoined", "bzzz.main.p.shop.agent.mine", back, now=T0),
    ]
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'rejoin.db'}")
    await db.open()
    try:
        numbered = list(zip(log, range(1, len(log) + 1), strict=True))
        ctx = BatchContext(NODE.node_id, ProjectionLimits(), None)
        result = await db.write(lambda session: apply_batch(session, numbered, ctx))
        async with db.session() as session:
            rows = await session.execute(select(AgentRow.id, AgentRow.status).order_by(AgentRow.id))
            status = {str(i): str(s) for i, s in rows.all()}
    finally:
        await db.close()
    assert status == {"elsewhere": "offline", "mine": "idle", "theirs": "idle"}
    assert result.outcomes[log[4].id]["online"] == []  # the forged one: not its agent
    assert result.outcomes[log[5].id]["online"] == ["mine"]


async def test_agent_rejoined_leaves_offline_an_id_a_look_alike_took_meanwhile(
    tmp_path: Path,
) -> None:
    other = NodeIdentity.generate()

    def announce(node: NodeIdentity, agent_id: str) -> Envelope:
        payload = {"agent_id": agent_id, "role": "r", "session_id": "s", "project": "shop"}
        subject = f"bzzz.main.p.shop.agent.{agent_id}"
        return seal(node, "main", "agent.announced", subject, payload, now=T0)

    lost = {"node_id": NODE.node_id, "boot": "b", "beat": 1, "last_seen": domain.iso(T0),
            "detected_at": domain.iso(T0 + timedelta(seconds=10))}  # fmt: skip
    back = {"agent_ids": ["ISO-A"], "reason": "its node was taken for lost"}
    log = [
        announce(NODE, "ISO-A"),
        seal(WITNESS, "main", "node.lost", f"bzzz.main.node.{NODE.node_id}", lost, now=T0),
        announce(other, "iso-a"),  # ISO-A is offline: its look-alike may be announced
        seal(NODE, "main", "agent.rejoined", "bzzz.main.p.shop.agent.ISO-A", back, now=T0),
    ]
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'alike.db'}")
    await db.open()
    try:
        for env, seq in zip(log, range(1, len(log) + 1), strict=True):  # and one batch each
            ctx = BatchContext(NODE.node_id, ProjectionLimits(), None)
            await db.write(
                lambda session, one=[(env, seq)], ctx=ctx: apply_batch(session, one, ctx)
            )
        async with db.session() as session:
            rows = await session.execute(select(AgentRow.id, AgentRow.status).order_by(AgentRow.id))
            status = {str(i): str(s) for i, s in rows.all()}
    finally:
        await db.close()
    assert status == {"ISO-A": "offline", "iso-a": "idle"}
