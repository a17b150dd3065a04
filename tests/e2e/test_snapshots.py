"""Snapshots on a 3-server NATS cluster (R3 stream and object store), with spawned nodes.

Node A serves p1 and takes posts over MCP; `bzzz snapshot --project p1` writes the snapshot;
more posts follow. Node B starts on a new data directory from the snapshot (its /healthz says
so, at the snapshot's sequence, having replayed only what came after), node C replays the whole
log (``BZZZ_SNAPSHOTS__LOAD=false``); once both applied the log, their stores hold the same
rows. A snapshot signed by a node the network never admitted, and one whose signed header was
altered, are refused: the node says why on /healthz and replays the whole log instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nats
import pytest

from bzzz.network.identity import NodeIdentity
from bzzz.network.jetstream import stream_name
from bzzz.network.snapshots import read_header, seal_snapshot, snapshot_bucket
from bzzz.store import snapshot as rows
from bzzz.store.database import Database

from .cluster import NatsCluster
from .conftest import NodeFactory
from .support import (
    TEST_KEYRING,
    HttpNode,
    bzzz_cli,
    call,
    eventually,
    http_session,
)

pytestmark = pytest.mark.integration

OBJECT = "snapshot.p1"


# p1 nodes on the cluster (R3); nothing on the log but what the test does: no peer is judged
# lost meanwhile.
P1 = {
    "BZZZ_BZZZ__STREAM_REPLICAS": "3",
    "BZZZ_PROJECTS": "p1",
    "BZZZ_SNAPSHOTS_EVERY": "0",
    "BZZZ_HEARTBEAT_INTERVAL": "60",
}


@pytest.fixture
def nats_url(cluster: NatsCluster) -> str:
    """The nodes of these tests (``make_node``) on the 3-server cluster: every server's URL."""
    return ",".join(cluster.urls)


def _p1(make_node: NodeFactory, name: str, **extra: str) -> HttpNode:
    return make_node(name, **(P1 | extra))


async def _play(node: HttpNode, tag: str, posts: int) -> None:
    async with http_session(node.mcp_url) as session:
        for agent in (f"lead-{tag}", f"peer-{tag}"):
            await call(
                session, "bzzz_announce", {"agent_id": agent, "role": "dev", "project": "p1"}
            )
        for n in range(posts):
            await call(
                session,
                "bzzz_post",
                {
                    "agent_id": f"lead-{tag}",
                    "target_address": f"bzzz://peer-{tag}",
                    "message_type": "data",
                    "content": {"n": n, "tag": tag},
                },
            )


async def _snapshots(node: HttpNode) -> dict[str, Any]:
    shown: dict[str, Any] = (await node.health())["snapshots"]
    return shown


async def _applied(node: HttpNode) -> int:
    return int((await node.health())["projector"]["applied_sequence"])


async def _quiet(exc: Exception) -> None:
    """nats-py's default error callback prints a traceback for each server it cannot reach."""


async def _log_end(urls: list[str]) -> int:
    nc = await nats.connect(urls, error_cb=_quiet)
    try:
        info = await nc.jetstream(timeout=10).stream_info(stream_name("main"))
        return int(info.state.last_seq)
    finally:
        await nc.close()


async def _caught_up(urls: list[str], *nodes: HttpNode) -> None:
    """Every node applied the log as it ends now."""
    end = await _log_end(urls)
    for node in nodes:
        await eventually(lambda n=node: _applied(n), lambda seq: seq >= end, within=60)


async def _state(data_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """The rows a snapshot of a stopped node's store would hold, without application times."""
    db = Database(f"sqlite+aiosqlite:///{data_dir / 'bzzz.db'}", TEST_KEYRING)
    await db.open()
    try:
        found = rows.rows_of((await rows.dump(db)).packed)
    finally:
        await db.close()
    for row in found["applied_envelopes"]:
        row.pop("applied_at")
    return found


async def _object(urls: list[str]) -> bytes:
    nc = await nats.connect(urls, error_cb=_quiet)
    try:
        found = await (await nc.jetstream(timeout=10).object_store(snapshot_bucket("main"))).get(
            OBJECT
        )
        assert found.data is not None
        return bytes(found.data)
    finally:
        await nc.close()


async def _replace(urls: list[str], data: bytes) -> None:
    nc = await nats.connect(urls, error_cb=_quiet)
    try:
        store = await nc.jetstream(timeout=10).object_store(snapshot_bucket("main"))
        await store.put(OBJECT, data)
    finally:
        await nc.close()


async def test_a_new_node_starts_from_a_snapshot_and_ends_as_one_that_replayed(
    cluster: NatsCluster, make_node: NodeFactory
) -> None:
    a = _p1(make_node, "a")
    await a.start(within=40)
    await _play(a, "before", 30)
    written = json.loads(await bzzz_cli(a.env, "snapshot", "--project", "p1", "--json"))
    assert written["covers"] == "p1" and written["sequence"] > 0
    await _play(a, "after", 10)
    # The command is an admin's change: it is on the data directory's audit trail.
    listed = await bzzz_cli(a.env, "audit", "list", "--json")
    assert '"cli:snapshot"' in listed
    await _caught_up(cluster.urls, a)
    await a.kill()

    b, c = _p1(make_node, "b"), _p1(make_node, "c", BZZZ_SNAPSHOTS__LOAD="false")
    await b.start(within=40)
    await c.start(within=40)
    from_snapshot = (await _snapshots(b))["projects"]["p1"]
    replayed = (await _snapshots(c))["projects"]["p1"]
    assert from_snapshot["start"] == "snapshot"
    assert from_snapshot["sequence"] == written["sequence"]
    assert replayed["start"] == "replay" and "sequence" not in replayed
    # B replayed only the envelopes after the snapshot; C all of them.
    assert 0 < from_snapshot["replayed"] < replayed["replayed"]
    await _caught_up(cluster.urls, b, c)
    await b.kill()
    await c.kill()
    held_by_b, held_by_c = await _state(b.data_dir), await _state(c.data_dir)
    assert held_by_b == held_by_c
    assert len([m for m in held_by_b["messages"] if m["sender"] == "lead-after"]) == 10


async def test_a_forged_or_unadmitted_snapshot_is_refused(
    cluster: NatsCluster, make_node: NodeFactory
) -> None:
    a = _p1(make_node, "a")
    await a.start(within=40)
    await _play(a, "x", 5)
    await bzzz_cli(a.env, "snapshot", "--json")
    good = await _object(cluster.urls)
    header, sig, body = read_header(good)

    # A whole snapshot signed by a key the network never admitted.
    stranger = NodeIdentity.generate()
    await _replace(
        cluster.urls,
        seal_snapshot(stranger, "main", "p1", header["sequence"], b"", 0, TEST_KEYRING),
    )
    d = _p1(make_node, "d")
    await d.start(within=40)
    shown = await _snapshots(d)
    assert shown["refused"] == {"not_admitted": 1}
    assert shown["projects"]["p1"]["start"] == "replay"

    # The admitted writer's snapshot with its signed header altered.
    altered = json.dumps({"header": header | {"sequence": 1}, "sig": sig}).encode()
    await _replace(cluster.urls, altered + b"\n" + body)
    e = _p1(make_node, "e")
    await e.start(within=40)
    shown = await _snapshots(e)
    assert shown["refused"] == {"bad_signature": 1}
    assert shown["projects"]["p1"]["start"] == "replay"
    # The replay got there all the same.
    await _caught_up(cluster.urls, a, d, e)
    await e.kill()
    assert {"lead-x", "peer-x"} <= {r["id"] for r in (await _state(e.data_dir))["agents"]}
