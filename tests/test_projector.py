"""The projector applies what peers signed, and rejects, counts and skips everything else."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from admitted import admit
from sqlalchemy import insert, select
from ulid import ULID

from bzzz import projector as projector_module
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.network.base import Stored
from bzzz.network.envelope import Envelope, seal
from bzzz.network.identity import NodeIdentity
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, GetInput, LookupInput
from bzzz.store.models import AppliedEnvelope, Base


@pytest.fixture
async def peer(request: pytest.FixtureRequest) -> NodeIdentity:
    """Another node of the network, admitted by the test's node."""
    identity = NodeIdentity.generate()
    name = "store_node" if "store_node" in request.fixturenames else "node"
    await admit(request.getfixturevalue(name), identity)
    return identity


def announcement(
    peer: NodeIdentity,
    agent_id: str,
    network: str = "main",
    envelope_id: str | None = None,
    **extra: Any,
) -> Envelope:
    payload = {"agent_id": agent_id, "role": "architect", "session_id": "peer-session"} | extra
    subject = f"bzzz.{network}.agent.{agent_id}"
    return seal(peer, network, "agent.announced", subject, payload, envelope_id=envelope_id)


async def publish(node: Node, bus: InMemoryBus, *items: Envelope | bytes) -> None:
    """Put raw items on the log (in one batch) and wait until the node has consumed them."""
    seq = 0
    for item in items:
        data = item.to_bytes() if isinstance(item, Envelope) else item
        seq = await bus.publish("bzzz.main.test", data, str(ULID()))
    await node.projector.wait_for_sequence(seq, within=5)


def _applied_row(envelope_id: str) -> dict[str, Any]:
    return {
        "id": envelope_id,
        "seq": 0,
        "type": "test",
        "origin": "test",
        "outcome": {"ok": True},
        "applied_at": datetime.now(UTC),
    }


async def agent_ids(node: Node) -> list[str]:
    found = await node.agents.lookup(LOCAL_CALLER, LookupInput(semantic_address="bzzz://*"))
    return [m["id"] for m in found["matches"]]


async def snapshot(node: Node) -> dict[str, list[Any]]:
    """Every row the log put in the store (the idempotency bookkeeping aside, and the node's own
    audit chain, which records a dropped envelope by design)."""
    tables: dict[str, list[Any]] = {}
    async with node.db.session() as session:
        for table in Base.metadata.sorted_tables:
            if table.name not in ("applied_envelopes", "audit_records"):
                rows = await session.execute(select(table).order_by(*table.primary_key.columns))
                tables[table.name] = [tuple(row) for row in rows]
    return tables


async def test_a_peers_signed_announcement_is_applied(
    node: Node, memory_bus: InMemoryBus, peer: NodeIdentity
) -> None:
    await publish(node, memory_bus, announcement(peer, "remote-1"))

    got = await node.agents.get(LOCAL_CALLER, GetInput(address="bzzz://remote-1"))
    assert got["content"]["agent_info"]["node_id"] == peer.node_id
    assert sum(node.projector.rejected.values()) == 0


def _tampered(peer: NodeIdentity) -> bytes:
    envelope = announcement(peer, "remote-1")
    return envelope.model_copy(update={"payload": envelope.payload | {"role": "admin"}}).to_bytes()


def _forged(peer: NodeIdentity) -> bytes:
    envelope = announcement(peer, "remote-1")
    forged = NodeIdentity.generate().sign(envelope.signing_bytes())
    return envelope.model_copy(update={"sig": forged}).to_bytes()


def _other_network(peer: NodeIdentity) -> bytes:
    return announcement(peer, "remote-1", network="elsewhere").to_bytes()


def _impersonating(peer: NodeIdentity) -> bytes:
    envelope = announcement(peer, "remote-1")
    return envelope.model_copy(update={"origin": NodeIdentity.generate().node_id}).to_bytes()


def _garbage(peer: NodeIdentity) -> bytes:
    return b"\x00\xffnot an envelope"


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (_tampered, "bad_signature"),
        (_forged, "bad_signature"),
        (_other_network, "wrong_network"),
        (_impersonating, "origin_mismatch"),
        (_garbage, "malformed"),
    ],
)
async def test_an_invalid_envelope_is_rejected_counted_and_changes_nothing(
    node: Node, memory_bus: InMemoryBus, peer: NodeIdentity, make: Any, reason: str
) -> None:
    await node.agents.announce(Caller("s1"), AnnounceInput(agent_id="local", role="developer"))
    before = await snapshot(node)

    await publish(node, memory_bus, make(peer))

    assert node.projector.rejected[reason] == 1
    assert await snapshot(node) == before
    assert await agent_ids(node) == ["local"]


async def test_a_rejected_envelope_does_not_hold_up_the_rest_of_its_batch(
    node: Node, memory_bus: InMemoryBus, peer: NodeIdentity
) -> None:
    await publish(node, memory_bus, _tampered(peer), announcement(peer, "remote-2"), _garbage(peer))

    assert await agent_ids(node) == ["remote-2"]
    assert node.projector.rejected["bad_signature"] == 1
    assert node.projector.rejected["malformed"] == 1


async def test_an_unknown_envelope_type_is_counted_and_skipped(
    node: Node, memory_bus: InMemoryBus, peer: NodeIdentity
) -> None:
    before = await snapshot(node)
    odd = seal(peer, "main", "agent.teleported", "bzzz.main.agent.x", {"agent_id": "x"})

    await publish(node, memory_bus, odd, announcement(peer, "remote-1"))

    assert node.projector.rejected["unknown_type"] == 1
    after = await snapshot(node)
    assert len(after["agents"]) == len(before["agents"]) + 1


def _message(peer: NodeIdentity, **payload: Any) -> Envelope:
    body = {
        "message_id": "msg-from-peer",
        "sender": "remote-1",
        "target_address": "bzzz://local",
        "message_type": "text",
        "content": {"text": "hi"},
        "priority": "medium",
        "thread_id": None,
        "reply_to": None,
        "recipients": ["local"],
        "task_id": None,
    } | payload
    return seal(peer, "main", "message.posted", "bzzz.main.msg.remote-1", body)


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(lambda peer: announcement(peer, "x", role=None), id="announce-role-null"),
        pytest.param(lambda peer: announcement(peer, "x", role="r" * 200), id="role-too-long"),
        pytest.param(lambda peer: announcement(peer, "x", capabilities="all"), id="caps-string"),
        pytest.param(
            lambda peer: seal(
                peer,
                "main",
                "agent.offline",
                "bzzz.main.agent.remote-1",
                {"agent_ids": ["remote-1"], "session_id": "peer-session", "reason": ["x"]},
            ),
            id="offline-reason-list",
        ),
        pytest.param(
            lambda peer: seal(peer, "main", "agent.announced", "bzzz.main.agent.x", {}),
            id="announce-empty",
        ),
        pytest.param(lambda peer: _message(peer, content="not an object"), id="content-string"),
        pytest.param(lambda peer: _message(peer, recipients="local"), id="recipients-string"),
        pytest.param(lambda peer: _message(peer, recipients=["local", 7]), id="recipient-number"),
        pytest.param(lambda peer: _message(peer, reply_to="r" * 200), id="reply-to-too-long"),
        pytest.param(lambda peer: _message(peer, priority="whenever"), id="priority-unknown"),
        pytest.param(
            lambda peer: _message(peer, message_type="task_assignment", content={"data": 5}),
            id="task-data-number",
        ),
        pytest.param(
            lambda peer: seal(
                peer,
                "main",
                "thread.created",
                "bzzz.main.thread.t",
                {"thread_id": "t-1", "topic": "x", "creator": "remote-1", "participants": 3},
            ),
            id="participants-number",
        ),
    ],
)
async def test_a_signed_envelope_with_a_bad_payload_is_skipped_and_the_log_moves_on(
    store_node: Node, memory_bus: InMemoryBus, peer: NodeIdentity, bad: Any
) -> None:
    await publish(store_node, memory_bus, announcement(peer, "remote-1"))
    await store_node.agents.announce(Caller("s1"), AnnounceInput(agent_id="local", role="dev"))
    before = await snapshot(store_node)

    await publish(store_node, memory_bus, bad(peer), announcement(peer, "remote-2"))

    assert store_node.projector.rejected["bad_payload"] == 1
    after = await snapshot(store_node)
    assert after["messages"] == before["messages"] == []
    assert after["inbox"] == before["inbox"] == []
    assert await agent_ids(store_node) == ["local", "remote-1", "remote-2"]
    assert store_node.failure is None


async def test_a_message_id_seen_before_is_refused_and_the_log_moves_on(
    store_node: Node, memory_bus: InMemoryBus, peer: NodeIdentity
) -> None:
    await publish(store_node, memory_bus, announcement(peer, "remote-1"))
    await store_node.agents.announce(Caller("s1"), AnnounceInput(agent_id="local", role="dev"))
    await publish(store_node, memory_bus, _message(peer, content={"text": "first"}))

    # A second envelope reusing the id, once in a later batch and once twice in the same batch.
    await publish(store_node, memory_bus, _message(peer, content={"text": "again"}))
    await publish(
        store_node,
        memory_bus,
        _message(peer, message_id="msg-twice"),
        _message(peer, message_id="msg-twice", content={"text": "twice"}),
        announcement(peer, "remote-2"),
    )

    inbox = await store_node.agents.get(LOCAL_CALLER, GetInput(address="bzzz://local/inbox"))
    texts = [m["content"]["text"] for m in inbox["content"]["messages"]]
    assert sorted(texts) == ["first", "hi"]
    assert store_node.projector.rejected["bad_payload"] == 2
    assert await agent_ids(store_node) == ["local", "remote-1", "remote-2"]


async def test_duplicate_recipients_get_the_message_once(
    store_node: Node, memory_bus: InMemoryBus, peer: NodeIdentity
) -> None:
    await publish(store_node, memory_bus, announcement(peer, "remote-1"))
    await store_node.agents.announce(Caller("s1"), AnnounceInput(agent_id="local", role="dev"))

    await publish(store_node, memory_bus, _message(peer, recipients=["local", "local"]))

    inbox = await store_node.agents.get(LOCAL_CALLER, GetInput(address="bzzz://local/inbox"))
    assert [m["recipients"] for m in inbox["content"]["messages"]] == [["local"]]
    assert store_node.failure is None


async def test_a_payload_with_non_json_numbers_is_skipped_and_the_log_moves_on(
    store_node: Node, memory_bus: InMemoryBus, peer: NodeIdentity
) -> None:
    await publish(store_node, memory_bus, announcement(peer, "remote-1"))
    await store_node.agents.announce(Caller("s1"), AnnounceInput(agent_id="local", role="dev"))
    envelope = _message(peer, content={"text": "hi", "score": float("nan")})
    # Python's json writes NaN; a JSON column on PostgreSQL refuses it.
    raw = json.dumps(envelope.model_dump()).encode()

    await publish(store_node, memory_bus, raw, announcement(peer, "remote-2"))

    assert store_node.projector.rejected["bad_payload"] == 1
    assert await agent_ids(store_node) == ["local", "remote-1", "remote-2"]
    assert store_node.failure is None


async def test_only_the_exact_bytes_a_node_sealed_skip_its_signature_check(
    node: Node, memory_bus: InMemoryBus
) -> None:
    own = announcement(node.identity, "mine", session_id="s1")
    tampered = own.model_copy(update={"payload": {**own.payload, "role": "admin"}})
    # The node waits for its own envelope; a tampered copy with the same id comes first.
    node.projector._sealed[own.to_bytes()] = own  # the state submit() keeps
    await publish(node, memory_bus, tampered, own)
    assert node.projector.rejected["bad_signature"] == 1
    agent = node.projector.directory.get("mine")
    assert agent is not None and agent.role == "architect"


# --- an origin applies its own envelopes -----------------------------------------------------


class _Spy:
    """Notes the store's transactions: on the event loop while publishing, and batch writes."""

    def __init__(self, node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
        self.here: list[str] = []  # "commit" or "rollback", per transaction on the loop
        self.written: list[list[str]] = []  # the envelope ids of each batch write
        self.ended = asyncio.Event()
        transaction_here, write = node.db.transaction_here, node.db.write

        @contextlib.contextmanager
        def noted_here() -> Iterator[Any]:
            try:
                with transaction_here() as session:
                    yield session
                self.here.append("commit")
            except BaseException:
                self.here.append("rollback")
                raise
            finally:
                self.ended.set()

        async def noted_write(work: Any, **kwargs: Any) -> Any:
            result = await write(work, **kwargs)
            self.written.append(sorted(result.outcomes))
            return result

        monkeypatch.setattr(node.db, "transaction_here", noted_here)
        monkeypatch.setattr(node.db, "write", noted_write)


def _hold_consumer(node: Node, monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """Keep the consumer's write stage waiting until the returned event is set."""
    release = asyncio.Event()
    consumer_write = node.projector._write

    async def held(*args: Any) -> None:
        await release.wait()
        await consumer_write(*args)

    monkeypatch.setattr(node.projector, "_write", held)
    return release


async def test_an_origin_applies_its_envelope_without_waiting_for_the_consumer(
    store_node: Node, memory_bus: InMemoryBus, peer: NodeIdentity, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite applies it while the network stores it; PostgreSQL once the network acknowledged
    # it as the log's next entry.
    node = store_node
    while_storing = node.db.writes_here
    spy = _Spy(node, monkeypatch)
    release = _hold_consumer(node, monkeypatch)
    applied = node.projector.applied_count
    mine = announcement(node.identity, "mine", session_id="s1")
    theirs = announcement(peer, "theirs")

    async with asyncio.timeout(5):
        outcome = await node.projector.submit(mine)
    release.set()
    # Once a later envelope is applied, the consumer has passed the origin's one too.
    await publish(node, memory_bus, theirs)

    assert outcome["ok"] is True
    assert spy.here == (["commit"] if while_storing else [])
    assert spy.written == ([[theirs.id]] if while_storing else [[mine.id], [theirs.id]])
    assert node.projector.applied_count == applied + 2  # each once
    assert node.projector.rejected["replayed"] == 0
    assert await agent_ids(node) == ["mine", "theirs"]


async def test_an_origin_applies_what_the_log_holds_when_a_peer_stored_the_same_id_first(
    store_node: Node, memory_bus: InMemoryBus, peer: NodeIdentity
) -> None:
    # Nodes that witness one fact publish it under one id, each signing its own bytes: the
    # log keeps the first, and every node must apply that one, the origin included.
    node = store_node
    shared = str(ULID())
    theirs = announcement(peer, "fact", envelope_id=shared)
    mine = announcement(
        node.identity, "fact", session_id="s1", role="developer", envelope_id=shared
    )
    seq = await memory_bus.publish(theirs.subject, theirs.to_bytes(), theirs.id)

    await node.projector.submit(mine)
    await node.projector.wait_for_sequence(seq, within=5)

    agent = node.projector.directory.get("fact")
    assert agent is not None
    assert (agent.node_id, agent.role) == (peer.node_id, "architect")


async def test_an_origin_leaves_its_envelope_to_the_log_when_another_is_ahead_of_it(
    node: Node, memory_bus: InMemoryBus, peer: NodeIdentity, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _Spy(node, monkeypatch)
    theirs = announcement(peer, "taken")
    mine = announcement(node.identity, "taken", session_id="s1")
    # The peer's announcement is stored first, and the consumer has not received it yet.
    await memory_bus.publish(theirs.subject, theirs.to_bytes(), theirs.id)

    outcome = await node.projector.submit(mine)

    # Applied in log order, the second claim on the id is the one refused; what the origin
    # applied as the next envelope was rolled back.
    assert spy.here == ["rollback"]
    assert outcome["ok"] is False
    agent = node.projector.directory.get("taken")
    assert agent is not None and agent.node_id == peer.node_id


async def test_an_origin_rolls_back_when_the_network_is_slow_to_store_its_envelope(
    node: Node, memory_bus: InMemoryBus, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _Spy(node, monkeypatch)
    monkeypatch.setattr(projector_module, "AHEAD_WAIT", 0.01)
    stored = asyncio.Event()
    store_now = memory_bus.store

    async def slow(subject: str, data: bytes, msg_id: str) -> Stored:
        await stored.wait()
        return await store_now(subject, data, msg_id)

    monkeypatch.setattr(memory_bus, "store", slow)
    mine = announcement(node.identity, "mine", session_id="s1")

    posting = asyncio.create_task(node.projector.submit(mine))
    async with asyncio.timeout(5):
        await spy.ended.wait()
    # The store was not held while the network took its time, and holds nothing yet.
    assert spy.here == ["rollback"]
    assert not node.projector._applying.locked()
    assert node.projector.directory.get("mine") is None
    stored.set()
    async with asyncio.timeout(5):
        outcome = await posting

    assert outcome["ok"] is True
    assert await agent_ids(node) == ["mine"]


async def test_an_origin_leaves_its_envelope_to_the_log_while_a_session_holds_the_store(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _Spy(node, monkeypatch)
    mine = announcement(node.identity, "mine", session_id="s1")
    async with node.db.session() as session:
        # An async session's write holds SQLite's write lock until it commits.
        await session.execute(insert(AppliedEnvelope), [_applied_row("held")])
        posting = asyncio.create_task(node.projector.submit(mine))
        async with asyncio.timeout(5):
            await spy.ended.wait()
        assert spy.here == ["rollback"]  # refused at once, not waited for on the loop
    async with asyncio.timeout(5):
        outcome = await posting

    assert outcome["ok"] is True
    assert spy.written == [[mine.id]]  # the consumer applied it, in the writer thread
    assert await agent_ids(node) == ["mine"]


async def test_an_origin_that_gives_up_still_settles_what_it_committed(
    node: Node, memory_bus: InMemoryBus, peer: NodeIdentity, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _Spy(node, monkeypatch)
    applied = node.projector.applied_count
    mine = announcement(node.identity, "mine", session_id="s1")

    posting = asyncio.create_task(node.projector.submit(mine))
    async with node.projector._progress:  # settling waits for this lock after the commit
        async with asyncio.timeout(5):
            await spy.ended.wait()
        assert spy.here == ["commit"]
        posting.cancel()  # the caller gives up between the commit and the settling
        with pytest.raises(asyncio.CancelledError):
            await posting
    await publish(node, memory_bus, announcement(peer, "theirs"))

    # Settled all the same: the consumer found it applied, the directory has it.
    assert node.projector.rejected["replayed"] == 0
    assert node.projector.applied_count == applied + 2
    assert node.projector.directory.get("mine") is not None


async def test_an_origin_with_other_envelopes_on_their_way_leaves_its_own_to_the_consumer(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Concurrent origins would each apply one envelope per transaction; the consumer applies
    # what arrived together in one.
    spy = _Spy(node, monkeypatch)
    release = _hold_consumer(node, monkeypatch)
    other = asyncio.get_running_loop().create_future()
    node.projector._waiting["another-envelope-on-its-way"] = other
    mine = announcement(node.identity, "mine", session_id="s1")

    posting = asyncio.create_task(node.projector.submit(mine))
    done, _ = await asyncio.wait({posting}, timeout=0.2)
    assert not done  # waiting for the consumer, which is held
    release.set()
    async with asyncio.timeout(5):
        outcome = await posting
    node.projector._waiting.pop("another-envelope-on-its-way")

    assert outcome["ok"] is True
    assert spy.here == []
    assert spy.written == [[mine.id]]
