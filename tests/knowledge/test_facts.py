"""Facts on an in-process node: stated by posts, superseded in log order, read as of a time,
from a thread's consensus, agreed, erased with their source, refused to other projects."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from admitted import admit
from sqlalchemy import select

from bzzz.config import load_settings
from bzzz.domain import iso
from bzzz.errors import ErrorCode, InvalidParameters, PermissionDenied
from bzzz.eventlog import Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import LOCAL, Scope, principal
from bzzz.schemas import AnnounceInput, GetInput, PostInput, ThreadInput, validate_input
from bzzz.store.models import AuditRecordRow, FactRow

PROJECT = "shop"
KNOWLEDGE = f"bzzz://*@{PROJECT}/knowledge"


def _caller(agent_id: str) -> Caller:
    return Caller(f"session-{agent_id}")


async def _announce(node: Node, agent_id: str, project: str = PROJECT) -> None:
    params = AnnounceInput(agent_id=agent_id, role="developer", project=project)
    await node.agents.announce(_caller(agent_id), params)


async def _state(node: Node, agent_id: str, **content: Any) -> dict[str, Any]:
    params = PostInput(target_address=KNOWLEDGE, message_type="fact", content=content)
    return await node.conversations.post(_caller(agent_id), params)


async def _read(node: Node, caller: Caller, **fields: Any) -> dict[str, Any]:
    params = validate_input(GetInput, {"address": KNOWLEDGE, **fields})
    got = await node.agents.get(caller, params)
    content: dict[str, Any] = got["content"]
    return content


async def test_a_later_fact_of_the_same_subject_and_relation_supersedes_the_first(
    node: Node,
) -> None:
    await _announce(node, "alice")
    first = await _state(
        node, "alice", subject="checkout", relation="retries with", object="idempotency keys"
    )
    assert first["fact"]["status"] == "agreed"
    second = await _state(
        node, "alice", subject=" Checkout ", relation="RETRIES  with", object="nothing"
    )
    old, new = first["fact"], second["fact"]

    now = await _read(node, _caller("alice"), about="checkout", max_history=5)
    assert [f["id"] for f in now["facts"]] == [new["id"]]
    [earlier] = now["facts"][0]["history"]
    assert earlier["id"] == old["id"]
    assert earlier["valid_until"] == new["valid_from"]
    assert earlier["superseded_by"] == new["id"]

    before = await _read(node, _caller("alice"), about="checkout", as_of=old["valid_from"])
    assert [f["id"] for f in before["facts"]] == [old["id"]]

    history = await node.knowledge.history(LOCAL, PROJECT, old["id"])
    assert [f["id"] for f in history["superseded_by"]] == [new["id"]]


async def test_a_threads_consensus_becomes_a_fact_sourced_to_it(node: Node) -> None:
    for agent in ("arch", "dev", "rev"):
        await _announce(node, agent)
    created = await node.conversations.thread(
        _caller("arch"),
        ThreadInput(action="create", participants=["dev", "rev"], topic="Payments retries"),
    )
    thread_id = created["thread_id"]

    async def say(agent: str, text: str, **extra: Any) -> dict[str, Any]:
        params = PostInput(
            target_address="bzzz://*",
            message_type=extra.pop("kind", "text"),
            content={"text": text},
            thread_id=thread_id,
            **extra,
        )
        return await node.conversations.post(_caller(agent), params)

    decision = await say("arch", "Refunds never retry automatically.", kind="decision")
    await say("dev", "Yes.", reply_to=decision["message_id"], stance="agree")
    done = await say("rev", "Agreed.", reply_to=decision["message_id"], stance="agree")
    assert done["consensus"]

    found = await _read(node, _caller("dev"), q="refunds retry")
    [fact] = [f for f in found["facts"] if f["origin"] == "consensus"]
    assert fact["statement"] == "Refunds never retry automatically."
    assert (fact["subject"], fact["relation"]) == ("Payments retries", "decided")
    assert fact["source"]["thread"] == thread_id
    assert fact["source"]["message"] == decision["message_id"]
    assert sorted(fact["source"]["agents"]) == ["arch", "dev", "rev"]
    assert fact["author"] == "arch"
    # Stated once, however often the consensus is looked at again.
    assert await node.knowledge.facts_missing() == 0
    # On the node's audit trail: who (the node), which fact, no text.
    await node.audit.flush()
    async with node.db.session() as session:
        audited = (
            await session.scalars(
                select(AuditRecordRow).where(AuditRecordRow.action == "knowledge:consensus_fact")
            )
        ).all()
    assert [(r.target, r.agent, r.outcome) for r in audited] == [
        (f"{KNOWLEDGE}/{fact['id']}", "arch", "ok")
    ]
    # Erasing the decision's author erases the fact: it is not stated again.
    await node.retention.forget(LOCAL, "arch")
    assert await node.knowledge.facts_missing() == 0
    assert (await _read(node, _caller("dev"), q="refunds retry"))["facts"] == []


async def test_another_projects_token_is_refused(node: Node) -> None:
    await _announce(node, "alice")
    await _state(node, "alice", subject="api", relation="uses", object="REST")
    outsider = Caller("outsider", principal("token:x", "token", ["other"], ["*"], Scope.WRITE, "x"))
    with pytest.raises(PermissionDenied) as refused:
        await _read(node, outsider, about="api")
    assert refused.value.code == ErrorCode.PERMISSION_DENIED
    with pytest.raises(PermissionDenied):
        await node.knowledge.state(outsider, PROJECT, "api", "uses", "SOAP")
    teammate = Caller("teammate", principal("token:y", "token", [PROJECT], ["*"], Scope.READ, "y"))
    assert [f["object"] for f in (await _read(node, teammate, about="API"))["facts"]] == ["REST"]


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ({"relation": "uses", "object": "x"}, "subject"),
        ({"subject": "a", "relation": "  ", "object": "x"}, "relation"),
        ({"subject": "a", "relation": "uses", "object": "x" * 201}, "object"),
        ({"subject": "a", "relation": "uses", "object": "x", "confidence": 2}, "confidence"),
        ({"subject": "a", "relation": "uses", "object": "x", "statement": 5}, "statement"),
        ({"subject": "a", "relation": "uses", "object": "x", "colour": "red"}, "colour"),
        ({"subject": "a", "relation": "uses", "object": "x", "status": "maybe"}, "status"),
    ],
)
async def test_a_bad_fact_is_refused_naming_its_field(
    node: Node, content: dict[str, Any], field: str
) -> None:
    await _announce(node, "alice")
    with pytest.raises(InvalidParameters) as refused:
        await _state(node, "alice", **content)
    assert refused.value.details["field"] == field
    assert (await _read(node, _caller("alice")))["facts"] == []


async def test_bad_reads_and_posts_are_refused_naming_their_field(node: Node) -> None:
    await _announce(node, "alice")
    with pytest.raises(InvalidParameters) as refused:
        await _read(node, _caller("alice"), limit=101)
    assert refused.value.details["field"] == "limit"
    with pytest.raises(InvalidParameters) as refused:
        await _read(node, _caller("alice"), q="x" * 501)
    assert refused.value.details["field"] == "q"
    with pytest.raises(InvalidParameters) as refused:
        await _read(node, _caller("alice"), as_of=12)
    assert refused.value.details["field"] == "as_of"
    with pytest.raises(InvalidParameters) as refused:
        params = PostInput(target_address=KNOWLEDGE, message_type="text", content={"a": 1})
        await node.conversations.post(_caller("alice"), params)
    assert refused.value.details["field"] == "message_type"
    with pytest.raises(InvalidParameters) as refused:
        await node.agents.get(_caller("alice"), GetInput(address="bzzz://alice", about="x"))
    assert refused.value.details["field"] == "about"


async def test_a_proposed_fact_waits_for_another_agents_agreement(node: Node) -> None:
    await _announce(node, "alice")
    await _announce(node, "bob")
    agreed = await _state(node, "alice", subject="db", relation="is", object="SQLite")
    proposed = await _state(
        node, "alice", subject="db", relation="is", object="PostgreSQL", status="proposed"
    )
    fact_id = proposed["fact"]["id"]
    now = await _read(node, _caller("bob"), about="db")
    assert [(f["object"], f["status"]) for f in now["facts"]] == [
        ("SQLite", "agreed"),
        ("PostgreSQL", "proposed"),
    ]
    assert await node.knowledge.for_prompt(PROJECT, "which db is it") == [
        (await node.knowledge.history(LOCAL, PROJECT, agreed["fact"]["id"]))["fact"]
    ]
    with pytest.raises(PermissionDenied):
        await node.knowledge.agree(_caller("alice"), fact_id)
    done = await node.knowledge.agree(_caller("bob"), fact_id)
    assert done["status"] == "agreed"
    assert done["supersedes"] == agreed["fact"]["id"]
    assert sorted(done["source"]["agents"]) == ["alice", "bob"]
    now = await _read(node, _caller("bob"), about="db")
    assert [f["object"] for f in now["facts"]] == ["PostgreSQL"]


async def test_erasing_the_author_removes_its_facts_and_rejoins_the_history(node: Node) -> None:
    await _announce(node, "alice")
    await _announce(node, "bob")
    first = (await _state(node, "bob", subject="cache", relation="is", object="redis"))["fact"]
    middle = await _state(node, "alice", subject="cache", relation="is", object="memcached")
    last = (await _state(node, "bob", subject="cache", relation="is", object="none"))["fact"]
    await _state(node, "alice", subject="queue", relation="is", object="nats")

    await node.retention.forget(LOCAL, "alice")

    everything = await _read(node, _caller("bob"), q="cache queue redis memcached nats none")
    assert [f["object"] for f in everything["facts"]] == ["none"]
    earlier = await node.knowledge.history(LOCAL, PROJECT, first["id"])
    assert earlier["fact"]["superseded_by"] == last["id"]
    assert earlier["fact"]["valid_until"] == last["valid_from"]
    with pytest.raises(InvalidParameters):
        await node.knowledge.history(LOCAL, PROJECT, middle["fact"]["id"])


async def test_words_rank_the_same_facts_first_and_about_reaches_two_hops(node: Node) -> None:
    await _announce(node, "alice")
    await _state(node, "alice", subject="checkout", relation="calls", object="payments")
    await _state(node, "alice", subject="payments", relation="stores in", object="ledger")
    await _state(node, "alice", subject="ledger", relation="runs on", object="postgres")
    await _state(node, "alice", subject="search", relation="indexes", object="catalog",
                 statement="search retries failed payments indexing")  # fmt: skip

    found = await _read(node, _caller("alice"), q="payments")
    objects = [f["object"] for f in found["facts"]]
    assert objects[:2] == ["payments", "ledger"] or objects[:2] == ["ledger", "payments"]
    assert objects[-1] == "catalog"  # one mention in a longer text ranks below
    again = await _read(node, _caller("alice"), q="payments")
    assert again["facts"] == found["facts"]

    around = await _read(node, _caller("alice"), about="checkout")
    assert [f["object"] for f in around["facts"]] == ["payments"]
    assert [(f["object"], f["via"]) for f in around["neighbourhood"]] == [("ledger", "payments")]


async def test_as_of_before_any_fact_answers_none(node: Node) -> None:
    await _announce(node, "alice")
    fact = (await _state(node, "alice", subject="a", relation="b", object="c"))["fact"]
    from datetime import datetime

    then = datetime.fromisoformat(fact["valid_from"]) - timedelta(seconds=1)
    assert (await _read(node, _caller("alice"), as_of=iso(then)))["facts"] == []


async def _fact_rows(node: Node) -> list[tuple[Any, ...]]:
    async with node.db.session() as session:
        rows = (await session.scalars(select(FactRow).order_by(FactRow.id))).all()
        return [
            (r.id, r.object, r.status, r.valid_from, r.valid_until, r.superseded_by,
             r.supersedes, sorted(r.agents))
            for r in rows
        ]  # fmt: skip


async def test_erasure_purges_the_authors_facts_from_the_log_and_a_replay_agrees(
    node: Node, memory_bus: InMemoryBus, tmp_path: Path
) -> None:
    await _announce(node, "alice")
    await _announce(node, "bob")
    first = (await _state(node, "bob", subject="cache", relation="is", object="redis"))["fact"]
    await _state(node, "alice", subject="cache", relation="is", object="memcached")
    await _state(node, "bob", subject="cache", relation="is", object="none")
    proposed = await _state(node, "bob", subject="queue", relation="is", object="nats",
                            status="proposed")  # fmt: skip
    await node.knowledge.agree(_caller("alice"), proposed["fact"]["id"])
    assert await memory_bus.read_kind("fact", "alice")

    done = await node.retention.forget(LOCAL, "alice")

    assert done["store"]["facts"] == 1
    assert await memory_bus.read_kind("fact", "alice") == []
    assert len(await memory_bus.read_kind("fact", "bob")) == 4
    kept = await _fact_rows(node)
    assert sorted(row[1] for row in kept) == ["nats", "none", "redis"]
    assert first["id"] in [row[0] for row in kept]
    assert all("alice" not in row[7] for row in kept)

    later = load_settings(environ={}, overrides={"node": {"data_dir": str(tmp_path / "later")}})
    async with Node(later, bus=memory_bus) as joined:
        await admit(node, joined)
        await joined.projector.wait_for_sequence(await memory_bus.last_sequence(), 20)
        assert await _fact_rows(joined) == kept
