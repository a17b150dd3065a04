"""Signed chain heads travel on the log: every node keeps every node's, and catches a rewrite."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from admitted import admit
from mcp import Client

from bzzz.audit import reading
from bzzz.audit.records import Action, head_bytes
from bzzz.audit.trail import AuditTrail
from bzzz.audit.verify import verify
from bzzz.config import load_settings
from bzzz.mcp.server import build_server
from bzzz.network.identity import NodeIdentity, verify_signature
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.store.database import Database

from .support import call, chain_of


def _action(n: int) -> Action:
    return Action("2026-12-01T00:00:00.000000Z", "p", "s", f"tool:{n}", "ok", "0" * 64)


async def test_a_second_node_stores_the_first_nodes_signed_head(
    node: Node, memory_bus: InMemoryBus, tmp_path: Path
) -> None:
    other = load_settings(environ={}, overrides={"node": {"data_dir": str(tmp_path / "other")}})
    async with Node(other, bus=memory_bus) as second:
        await admit(node, second)
        server, _ = build_server(node)
        async with Client(server, mode="legacy") as client:
            for n in range(5):
                await call(client, "bzzz_lookup", {"semantic_address": f"bzzz://agent-{n}"})
        records = await chain_of(node)
        assert await node.audit.publish_head()
        await second.projector.wait_for_sequence(await memory_bus.last_sequence(), within=5)

        heads = await reading.heads(second.db)
        # (Its chain also holds the drop of second's start-up status, from before its admission.)
        newest = records[-1]
        assert [(h.node_id, h.seq, h.hash) for h in heads] == [
            (node.node_id, newest.seq, newest.hash)
        ]
        head = heads[0]
        assert verify_signature(
            head.public_key, head.signature, head_bytes(head.node_id, head.seq, head.hash)
        )
        # The first node's chain, checked on the second node against the head it holds.
        assert verify(records, heads, node.node_id).ok
        forged = [*records[:2], replace(records[2], outcome="PERMISSION_DENIED"), *records[3:]]
        report = verify(forged, heads, node.node_id)
        assert [p.kind for p in report.problems] == ["edited"]


async def test_a_node_cannot_publish_another_nodes_head(
    node: Node, memory_bus: InMemoryBus
) -> None:
    stranger = NodeIdentity.generate()
    payload = {
        "node_id": stranger.node_id,
        "seq": 1,
        "hash": "a" * 64,
        "public_key": stranger.public_key_b64,
        "signature": stranger.sign(head_bytes(stranger.node_id, 1, "a" * 64)),
    }
    outcome = await node.log.emit("audit.head", "audit", stranger.node_id, payload)
    assert outcome == {"ok": False, "reason": "not_own_head"}
    assert await reading.heads(node.db) == []


async def _trail_with(
    db: Database, every: int, interval: float
) -> tuple[AuditTrail, asyncio.Queue[dict[str, Any]]]:
    published: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def publish(type_: str, kind: str, key: str, payload: dict[str, Any]) -> None:
        published.put_nowait(payload)

    return AuditTrail(
        db, NodeIdentity.generate(), publish, every=every, interval=interval
    ), published


async def test_a_head_is_signed_after_every_hundred_records(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    await db.open()
    trail, published = await _trail_with(db, every=100, interval=3600)
    running = asyncio.create_task(trail.run())
    try:
        for n in range(99):
            trail.record(_action(n))
        await trail.flush()
        assert published.empty()
        trail.record(_action(99))
        async with asyncio.timeout(5):
            head = await published.get()
        assert head["seq"] == 100
        assert head["node_id"] == trail.node_id
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await db.close()


async def test_a_head_is_signed_within_the_interval_when_records_are_few(tmp_path: Path) -> None:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'b.db'}")
    await db.open()
    trail, published = await _trail_with(db, every=100, interval=0.05)
    running = asyncio.create_task(trail.run())
    try:
        trail.record(_action(1))
        async with asyncio.timeout(5):
            head = await published.get()
        assert head["seq"] == 1
        # Each new record is signed within the interval too.
        trail.record(_action(2))
        async with asyncio.timeout(5):
            assert (await published.get())["seq"] == 2
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await db.close()


async def test_a_clean_stop_signs_the_final_head(
    settings: Any, memory_bus: InMemoryBus, tmp_path: Path
) -> None:
    async with Node(settings, bus=memory_bus) as first:
        first.audit.record(_action(1))
        first.audit.record(_action(2))
        node_id = first.node_id
    other = load_settings(environ={}, overrides={"node": {"data_dir": str(tmp_path / "o")}})
    async with Node(other, bus=memory_bus) as second:
        heads = await reading.heads(second.db)
    assert [(h.node_id, h.seq) for h in heads] == [(node_id, 2)]
