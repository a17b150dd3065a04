"""Retention and erasure on two real nodes (one nats-server), then a third node joins afterwards."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import nats
import pytest
from admitted import admit
from sqlalchemy import select

from bzzz.clock import ManualClock
from bzzz.domain import utcnow
from bzzz.eventlog import Caller
from bzzz.network.jetstream import stream_name
from bzzz.network.sealing import Keyring, NetworkKey
from bzzz.node.core import Node
from bzzz.principal import LOCAL
from bzzz.retention.strip import opened_fields
from bzzz.schemas import AnnounceInput, PostInput, ThreadInput
from bzzz.store.models import (
    AgentRow,
    MemoryRow,
    MessageRow,
    MessageTombstoneRow,
    TaskRow,
    ThreadRow,
)

from .conftest import StoreFactory, node_settings

pytestmark = pytest.mark.integration

OLD = "OLD-CANARY-7f3a"
NEW = "NEW-CANARY-91bc"
MEMORY = "MEMORY-CANARY-55d1"
BOB = "BOB-CANARY-0e42"
TASK_DATA = "TASKDATA-CANARY-c3d9"
# A decision's text is its thread's decision log (thread state): it outlives the message.
DECISION = "DECISION-KEPT-4b21"
ALICE = Caller("alice-session", LOCAL)
BOBS = Caller("bob-session", LOCAL)


async def _raw_stream(nats_url: str, network: str = "main") -> list[bytes]:
    """Every envelope the network's stream holds now, read with nats-py alone, its sealed
    payload opened with the test network's key (the stream itself holds no content in clear:
    tests/e2e/test_encryption_at_rest.py)."""
    ring = Keyring([NetworkKey.of(bytes(range(32)))])
    opened = []
    for data in await _sealed_stream(nats_url, network):
        fields = opened_fields(data, ring)
        opened.append(json.dumps(fields).encode() if fields is not None else data)
    return opened


async def _sealed_stream(nats_url: str, network: str = "main") -> list[bytes]:
    """Every envelope the network's stream holds now, as stored."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        info = await js.stream_info(stream_name(network))
        found = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                found.append((await js.get_msg(stream_name(network), seq)).data or b"")
            except nats.js.errors.NotFoundError:
                continue
        return found
    finally:
        await nc.close()


async def _caught_up(*nodes: Node) -> None:
    last = max([await n.bus.last_sequence() for n in nodes])
    for n in nodes:
        await n.projector.wait_for_sequence(last, within=20)


async def _rows(node: Node) -> dict[str, Any]:
    """The long-lived state and the messages as a node's store holds them."""
    async with node.db.session() as session:
        agents = {
            r.id: (r.role, r.tasks_completed, r.tasks_failed, r.active_tasks, r.performance)
            for r in await session.scalars(select(AgentRow))
        }
        tasks = {
            r.id: (r.agent_id, r.type, r.status, r.description, r.data, r.result)
            for r in await session.scalars(select(TaskRow))
        }
        threads = {
            r.id: (r.topic, r.status, r.message_count, r.decision_log)
            for r in await session.scalars(select(ThreadRow))
        }
        messages = {
            r.id: (r.sender, r.message_type, r.content, r.thread_id)
            for r in await session.scalars(select(MessageRow))
        }
        tombstones = {r.id: r.reason for r in await session.scalars(select(MessageTombstoneRow))}
        memories = [r.summary for r in await session.scalars(select(MemoryRow))]
    return {
        "agents": agents,
        "tasks": tasks,
        "threads": threads,
        "messages": messages,
        "tombstones": tombstones,
        "memories": memories,
    }


def _text(rows: dict[str, Any]) -> str:
    return json.dumps(rows, default=str)


async def _play_old_then_new(a: Node, b: Node, clock: ManualClock) -> dict[str, Any]:
    """Ten days ago: posts, a task, a thread with a decision, a memory. Now: one more post."""
    await a.agents.announce(ALICE, AnnounceInput(agent_id="alice", role="architect"))
    await b.agents.announce(BOBS, AnnounceInput(agent_id="bob", role="reviewer"))
    await _caught_up(a, b)
    post = a.conversations.post
    await post(
        ALICE, PostInput(target_address="bzzz://bob", message_type="note", content={"text": OLD})
    )
    assigned = await post(
        ALICE,
        PostInput(
            target_address="bzzz://bob",
            message_type="task_assignment",
            content={"task_type": "code_review", "description": "review", "task_data": {"f": 1}},
        ),
    )
    task_id = assigned["tasks"]["bob"] if "tasks" in assigned else None
    created = await a.conversations.thread(
        ALICE, ThreadInput(action="create", topic="design", participants=["bob"])
    )
    thread_id = created["thread"]["id"] if "thread" in created else created["thread_id"]
    await post(
        ALICE, PostInput(thread_id=thread_id, message_type="decision", content={"text": DECISION})
    )
    await a.log.emit(
        "memory.recorded",
        "memory",
        "alice",
        {
            "memory_id": "mem-old-1",
            "agent_id": "alice",
            "project": "",
            "kind": "thread",
            "thread_id": thread_id,
            "topic": "design",
            "participants": ["alice", "bob"],
            "summary": MEMORY,
            "outcome": "ok",
        },
    )
    clock.advance(10 * 86_400)
    await post(
        ALICE, PostInput(target_address="bzzz://bob", message_type="note", content={"text": NEW})
    )
    await _caught_up(a, b)
    return {"task_id": task_id, "thread_id": thread_id}


async def test_retention_and_erasure_on_two_nodes_then_a_third_rebuilds(
    tmp_path: Path, nats_url: str, new_store: StoreFactory
) -> None:
    clock = ManualClock(utcnow() - timedelta(days=10))
    kept = {"messages_days": 5.0, "memory_days": 5.0, "events_days": 5.0}
    a_settings = node_settings(tmp_path, "a", nats_url, await new_store("a"), **kept)
    b_settings = node_settings(tmp_path, "b", nats_url, await new_store("b"), **kept)
    async with Node(a_settings, clock=clock) as a, Node(b_settings) as b:
        await admit(a, b)  # b forgets bob: only an admitted node's erasure is applied
        ids = await _play_old_then_new(a, b, clock)
        before = await _rows(a)

        result = await a.retention.run(LOCAL)
        await _caught_up(a, b)
        assert result["store"]["messages"] == 3  # the note, the assignment, the decision
        assert result["stream"]["removed"] >= 4  # those three posts and the memory
        for node in (a, b):
            rows = await _rows(node)
            assert OLD not in _text(rows["messages"]) and MEMORY not in _text(rows)
            assert NEW in _text(rows["messages"])
            assert sorted(rows["tombstones"].values()) == ["retention"] * 3
            # Long-lived state survives, counts stay honest.
            assert rows["agents"].keys() == before["agents"].keys()
            assert rows["tasks"] == before["tasks"]
            assert rows["threads"] == before["threads"]
            assert rows["messages"].keys() == before["messages"].keys()
            assert DECISION in _text(rows["threads"]) and DECISION not in _text(rows["messages"])
        raw = b"".join(await _raw_stream(nats_url))
        assert OLD.encode() not in raw and MEMORY.encode() not in raw
        assert NEW.encode() in raw
        assert NEW.encode() not in b"".join(await _sealed_stream(nats_url))

        # Bob reports on the task; Alice gives him another one; then Bob is forgotten.
        await b.conversations.post(
            BOBS,
            PostInput(
                target_address="bzzz://alice",
                message_type="task_complete",
                content={"task_id": ids["task_id"], "result": BOB},
            ),
        )
        await a.conversations.post(
            ALICE,
            PostInput(
                target_address="bzzz://bob",
                message_type="task_assignment",
                content={"task_type": "documentation", "task_data": {"spec": TASK_DATA}},
            ),
        )
        await _caught_up(a, b)
        forgotten = await b.retention.forget(LOCAL, "bob")
        await _caught_up(a, b)
        assert forgotten["store"]["messages"] == 2 and forgotten["store"]["tasks"] == 2
        for node in (a, b):
            text = _text(await _rows(node))
            assert BOB not in text and TASK_DATA not in text
        raw = b"".join(await _raw_stream(nats_url))
        assert BOB.encode() not in raw and TASK_DATA.encode() not in raw

        # A node that joins now rebuilds every agent, thread and task, and sees nothing erased.
        c_settings = node_settings(tmp_path, "c", nats_url, await new_store("c"))
        async with Node(c_settings) as c:
            await _caught_up(a, b, c)
            joined = await _rows(c)
            survivors = await _rows(a)
            assert c.projector.stand_ins.loaded > 0
    for part in ("agents", "tasks", "threads", "messages", "tombstones", "memories"):
        assert joined[part] == survivors[part], part
    assert {t[2] for t in joined["tasks"].values()} == {"completed", "pending"}
    text = _text(joined)
    for canary in (OLD, MEMORY, BOB, TASK_DATA):
        assert canary not in text
    assert NEW in text


async def test_deleted_text_leaves_the_sqlite_file(tmp_path: Path, nats_url: str) -> None:
    clock = ManualClock(utcnow() - timedelta(days=3))
    url = f"sqlite+aiosqlite:///{tmp_path / 'a' / 'bzzz.db'}"
    settings = node_settings(tmp_path, "a", nats_url, url, messages_days=1.0)
    async with Node(settings, clock=clock) as a:
        await a.agents.announce(ALICE, AnnounceInput(agent_id="alice", role="architect"))
        for n in range(50):
            await a.conversations.post(
                ALICE,
                PostInput(
                    target_address="bzzz://alice",
                    message_type="note",
                    content={"text": f"{OLD}-{n}"},
                ),
            )
        clock.advance(3 * 86_400)
        await a.retention.run(LOCAL)
        assert a.retention.compactions >= 1
    files = [p for p in (tmp_path / "a").iterdir() if p.name.startswith("bzzz.db")]
    assert files
    for path in files:
        assert OLD.encode() not in path.read_bytes(), path.name


async def test_a_run_with_nothing_set_removes_nothing(tmp_path: Path, nats_url: str) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'a' / 'bzzz.db'}"
    async with Node(node_settings(tmp_path, "a", nats_url, url)) as a:
        await a.agents.announce(ALICE, AnnounceInput(agent_id="alice", role="architect"))
        await a.conversations.post(
            ALICE,
            PostInput(target_address="bzzz://alice", message_type="note", content={"text": NEW}),
        )
        result = await a.retention.run(LOCAL)
        assert result["store"] == {"messages": 0, "events": 0, "memory": 0}
        assert result["stream"]["removed"] == 0
        assert NEW.encode() in b"".join(await _raw_stream(nats_url))


async def test_the_hourly_job_applies_the_settings_without_a_call(
    tmp_path: Path, nats_url: str
) -> None:
    clock = ManualClock(utcnow() - timedelta(days=3))
    url = f"sqlite+aiosqlite:///{tmp_path / 'a' / 'bzzz.db'}"
    settings = node_settings(tmp_path, "a", nats_url, url, messages_days=1.0)
    settings.retention.interval = 0.2
    async with Node(settings, clock=clock) as a:
        await a.agents.announce(ALICE, AnnounceInput(agent_id="alice", role="architect"))
        await a.conversations.post(
            ALICE,
            PostInput(target_address="bzzz://alice", message_type="note", content={"text": OLD}),
        )
        clock.advance(3 * 86_400)

        applied = asyncio.Event()

        # A run the job made before the clock moved on rightly buries nothing and may be
        # applied after this listener is added: wait for the run that buries the old post.
        def watch(outcomes: dict[str, Any]) -> None:
            if any(
                o.get("retention") == "applied" and o.get("counts", {}).get("messages")
                for o in outcomes.values()
            ):
                applied.set()

        a.projector.add_outcome_listener(watch)
        async with asyncio.timeout(15):
            await applied.wait()
        assert (await _rows(a))["tombstones"]
        assert OLD not in _text((await _rows(a))["messages"])
