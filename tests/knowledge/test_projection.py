"""The fact appliers decide superseding in log order: one batch or one envelope at a time, the
store ends the same; a replayed envelope changes nothing; a claimed consensus is refused."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bzzz import domain
from bzzz.knowledge.projection import AGREED, FACT_APPLIERS, STATED
from bzzz.network.envelope import Envelope, seal
from bzzz.network.identity import NodeIdentity
from bzzz.store.batch import BatchContext, apply_batch, register_appliers
from bzzz.store.database import Database
from bzzz.store.models import FactRow
from bzzz.store.projection import ProjectionLimits

NODE = NodeIdentity.generate()
START = domain.utcnow()


def _stated(n: int, subject: str, obj: str, **extra: Any) -> Envelope:
    payload = {
        "fact_id": f"fact-{n}",
        "project": "shop",
        "subject": subject,
        "relation": "uses",
        "object": obj,
        "status": "agreed",
        "origin": "agent",
        "author": "alice",
        "source": {"agents": ["alice"]},
    } | extra
    at = START + timedelta(seconds=n)
    return seal(NODE, "main", STATED, "bzzz.main.p.shop.fact.alice", payload, now=at)


def _agreed(n: int, fact: int, agent: str) -> Envelope:
    payload = {"fact_id": f"fact-{fact}", "agent": agent}
    at = START + timedelta(seconds=n)
    return seal(NODE, "main", AGREED, "bzzz.main.p.shop.fact.alice", payload, now=at)


LOG = [
    _stated(1, "api", "REST"),
    _stated(2, "API ", "gRPC"),  # supersedes 1
    _stated(3, "db", "sqlite"),
    _stated(4, "api", "GraphQL", status="proposed"),
    _agreed(5, 4, "alice"),  # refused: its author
    _agreed(6, 4, "bob"),  # agreed now: supersedes 2
    _stated(7, "db", "postgres"),  # supersedes 3
    _stated(2, "api", "gRPC"),  # the same fact id again: a duplicate
    _stated(8, "api", "x", origin="consensus", source={"thread": "t", "message": "m"}),
]


async def _store(path: Path, batches: list[list[Envelope]]) -> tuple[list[Any], list[Any]]:
    register_appliers(FACT_APPLIERS)
    db = Database(f"sqlite+aiosqlite:///{path}")
    await db.open()
    outcomes: list[Any] = []
    try:
        seq = 0
        for batch in batches:
            numbered = []
            for env in batch:
                seq += 1
                numbered.append((env, seq))
            ctx = BatchContext(NODE.node_id, ProjectionLimits(), None)
            result = await db.write(lambda s, n=numbered, c=ctx: apply_batch(s, n, c))
            outcomes += [result.outcomes[env.id] for env in batch]
        async with db.session() as session:
            rows = (await session.scalars(select(FactRow).order_by(FactRow.id))).all()
            shown = [
                (r.id, r.object, r.status, r.valid_from, r.valid_until, r.superseded_by,
                 r.supersedes, sorted(r.agents))
                for r in rows
            ]  # fmt: skip
    finally:
        await db.close()
    return shown, outcomes


async def test_one_batch_and_one_envelope_at_a_time_end_the_same(tmp_path: Path) -> None:
    together, outcomes = await _store(tmp_path / "one.db", [LOG])
    apart, _ = await _store(tmp_path / "many.db", [[env] for env in LOG])

    assert together == apart
    by_id = {row[0]: row for row in together}
    assert by_id["fact-1"][4:7] == (START + timedelta(seconds=2), "fact-2", None)
    assert by_id["fact-2"][4:7] == (START + timedelta(seconds=6), "fact-4", "fact-1")
    assert by_id["fact-4"][2:4] == ("agreed", START + timedelta(seconds=6))
    assert by_id["fact-4"][7] == ["alice", "bob"]
    assert by_id["fact-3"][5] == "fact-7"
    assert "fact-8" not in by_id
    assert [o["ok"] for o in outcomes] == [True, True, True, True, False, True, True, True, False]
    assert outcomes[7]["duplicate"] is True
    assert outcomes[4]["reason"] == "a fact's author cannot agree with it"
    # The record of an applied envelope keeps no text of the fact.
    assert "REST" not in str(outcomes) and "gRPC" not in str(outcomes)


async def test_retentions_memory_cut_off_removes_only_facts_that_ended_before_it(
    tmp_path: Path,
) -> None:
    from bzzz.knowledge.projection import expire_history

    register_appliers(FACT_APPLIERS)
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'kept.db'}")
    await db.open()
    try:
        numbered = list(zip(LOG, range(1, len(LOG) + 1), strict=True))
        ctx = BatchContext(NODE.node_id, ProjectionLimits(), None)
        await db.write(lambda s: apply_batch(s, numbered, ctx))
        removed = await db.write(lambda s: expire_history(s, START + timedelta(seconds=3)))
        async with db.session() as session:
            rows = {r.id: r for r in await session.scalars(select(FactRow))}
    finally:
        await db.close()
    assert removed == 1
    assert sorted(rows) == ["fact-2", "fact-3", "fact-4", "fact-7"]
    assert rows["fact-2"].supersedes is None  # what it superseded is gone
    assert rows["fact-4"].valid_until is None  # current facts stay, however old


async def test_a_fact_whose_project_is_not_its_subjects_is_refused(tmp_path: Path) -> None:
    """A node serving project 'other' (or the wrong partition) cannot state or agree a fact
    of 'shop' by naming it in the payload: the subject's project decides."""
    stolen = _stated(1, "api", "REST", project="other")  # on shop's subject
    proposed = _stated(2, "db", "sqlite", status="proposed")
    agreed_elsewhere = seal(
        NODE, "main", AGREED, "bzzz.main.p.other.fact.bob",
        {"fact_id": "fact-2", "agent": "bob"}, now=START + timedelta(seconds=3),
    )  # fmt: skip
    rows, outcomes = await _store(tmp_path / "cross.db", [[stolen, proposed, agreed_elsewhere]])

    assert [o["ok"] for o in outcomes] == [False, True, False]
    assert [(r[0], r[2]) for r in rows] == [("fact-2", "proposed")]
