"""Snapshots in a real nats-server's object store, on SQLite and PostgreSQL stores.

In-process nodes serving ``p1`` on one server: A plays, writes its snapshot (``bzzz_snap_main``,
object ``snapshot.p1``), plays on; B starts from the snapshot on a new store of the other kind
(a SQLite writer's snapshot into PostgreSQL, where the loaded ids must not collide with the rows
it applies after, and a PostgreSQL writer's into SQLite: each way of dumping and loading), C
replays the whole log; A, B and C end with the same rows, and B's rows after the snapshot keep
coming.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from admitted import admit

from bzzz.config import Settings, load_settings
from bzzz.network.snapshots import read_header, snapshot_bucket
from bzzz.node.core import Node
from bzzz.principal import LOCAL

from .test_snapshot_service import _play, state

pytestmark = pytest.mark.integration

WAIT = 30.0
StoreFactory = Callable[[str], Awaitable[str]]


def _settings(tmp_path: Path, name: str, nats_url: str, url: str, **snapshots: Any) -> Settings:
    return load_settings(
        environ={},
        overrides={
            "node": {"data_dir": str(tmp_path / name), "database_url": url},
            "bzzz": {"nats_url": [nats_url], "heartbeat_interval": 30, "projects": ["p1"]},
            "conversation": {"escalation_rules": []},
            "snapshots": {"every": 0, **snapshots},
        },
    )


async def _object(nats_url: str, name: str) -> bytes:
    nc = await nats.connect(nats_url)
    try:
        store = await nc.jetstream().object_store(snapshot_bucket("main"))
        found = await store.get(name)
        assert found.data is not None
        return bytes(found.data)
    finally:
        await nc.close()


async def _settled(*nodes: Node) -> None:
    while True:
        ends = [await node.projector.log_end() for node in nodes]
        for node, end in zip(nodes, ends, strict=True):
            await node.projector.wait_for_sequence(end, WAIT)
        if [await node.projector.log_end() for node in nodes] == ends:
            return


async def _settled_states(*nodes: Node) -> list[dict[str, Any]]:
    """Each node's state once all hold the same, or the last read after WAIT (a node's audit
    head or heartbeat may land between one node's read and the next's)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while True:
        await _settled(*nodes)
        held = [await state(node) for node in nodes]
        if all(h == held[0] for h in held) or loop.time() >= deadline:
            return held
        await asyncio.sleep(0.2)


async def test_a_node_starts_from_the_object_store_and_ends_as_a_replay(
    tmp_path: Path,
    nats_url: str,
    new_store: StoreFactory,
    postgres_database: Callable[[str | None], Awaitable[str]],
    migrated_postgres: str | None,
) -> None:
    sqlite = f"sqlite+aiosqlite:///{tmp_path / '{}' / 'bzzz.db'}"
    written_on = await new_store("a")
    if written_on.startswith("sqlite"):
        loaded_on = await postgres_database(migrated_postgres)
    else:
        loaded_on = sqlite.format("b")
    async with Node(_settings(tmp_path, "a", nats_url, written_on)) as a:
        await _play(a, "before")
        written = await a.snapshots.write(LOCAL, "p1")
        assert written["covers"] == "p1"
        header, _, _ = read_header(await _object(nats_url, "snapshot.p1"))
        assert header["sequence"] == written["sequence"] and header["writer"] == a.node_id
        await _play(a, "after")

        loader = _settings(tmp_path, "b", nats_url, loaded_on)
        replayer = _settings(tmp_path, "c", nats_url, sqlite.format("c"), load=False)
        async with Node(loader) as b, Node(replayer) as c:
            await admit(a, b, c)
            started = b.status()["snapshots"]["projects"]["p1"]
            assert started["start"] == "snapshot"
            assert started["sequence"] == written["sequence"]
            assert c.status()["snapshots"]["projects"]["p1"]["start"] == "replay"
            # B goes on applying (its ids after the loaded rows', on PostgreSQL too).
            await _play(b, "later")
            held_by_a, held_by_b, held_by_c = await _settled_states(a, b, c)
            assert held_by_b == held_by_c
            assert held_by_a == held_by_c
            assert {"lead-before", "lead-after", "lead-later"} <= {
                r["id"] for r in held_by_b["agents"]
            }
