"""Projects spread over three streams of a 3-server cluster (R3), under a server's death.

The servers map project subjects with ``partition(3, …)``. A ``*`` node and a node serving one
project take posts to agents of three projects, one in each partition, from eight writers;
the leader of one partition's stream is killed half-way. Every acknowledged post is in the
network's log exactly once and in the inbox of every node that serves its project; the
one-project node holds none of the others'.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

import pytest

from bzzz.network import partitions

from .cluster import NatsCluster
from .conftest import NodeFactory
from .support import call, eventually, http_session, start_network, stored_message_ids

pytestmark = pytest.mark.integration

# A server's death can stall the peer board for many seconds on two shared cores (its
# stream's election, the node's reconnect): that must not take the writing node for lost
# here, whose subject is what the log keeps.
R3 = {
    "BZZZ_BZZZ__STREAM_REPLICAS": "3",
    "BZZZ_BZZZ__PUBLISH_TIMEOUT": "4",
    "BZZZ_HEARTBEAT_INTERVAL": "5",
    "BZZZ_BZZZ__HEARTBEAT_MISSES": "20",
}
N = 3
TOTAL = 120
KILL_AFTER = 40
# One project in each partition (partitions.partition_of: proj3 -> 0, proj0 -> 1, proj2 -> 2).
PROJECTS = {partitions.partition_of(f"proj{i}", N): f"proj{i}" for i in range(8)}


@pytest.fixture
def nats_url(cluster: NatsCluster) -> str:
    return ",".join(cluster.urls)


async def _leaders(cluster: NatsCluster) -> list[str]:
    names = [partitions.stream_name("main", k) for k in range(N)]
    return [(await cluster.leader_of(name)).name for name in names]


def _inbox(db_path: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as db:
        return {str(row[0]) for row in db.execute("SELECT message_id FROM inbox")}


@pytest.mark.parametrize("cluster", [N], indirect=True)  # servers that map partition(3, …)
async def test_posts_across_partitions_survive_a_partition_leaders_death(
    cluster: NatsCluster, make_node: NodeFactory
) -> None:
    assert sorted(PROJECTS) == [0, 1, 2]
    served = PROJECTS[1]
    every = make_node("every", **R3)
    one = make_node("one", BZZZ_PROJECTS=served, **R3)
    await start_network(every, one)
    for node in (every, one):
        assert (await node.health())["partitions"] == N
    # The first node handed the partitions' leadership round the servers: one each.
    leaders = await eventually(lambda: _leaders(cluster), lambda got: len(set(got)) == N, within=30)
    assert len(set(leaders)) == N

    acked: dict[str, int] = {}  # message id -> the partition of its project
    refused: list[int] = []
    async with http_session(every.mcp_url) as session:
        for k, project in PROJECTS.items():
            for agent in (f"src-{k}", f"sink-{k}"):
                await call(
                    session, "bzzz_announce", {"agent_id": agent, "role": "dev", "project": project}
                )
        numbers = iter(range(TOTAL))
        killed = asyncio.Event()

        async def writer() -> None:
            for n in numbers:
                if n == KILL_AFTER:
                    leader = await cluster.leader_of(partitions.stream_name("main", 1))
                    await cluster.kill(leader)
                    killed.set()
                k = n % N
                result = await session.call_tool(
                    "bzzz_post",
                    {
                        "target_address": f"bzzz://sink-{k}@{PROJECTS[k]}",
                        "message_type": "data",
                        "content": {"n": n},
                        "agent_id": f"src-{k}",
                    },
                )
                body = result.structured_content or {}
                if result.is_error:
                    assert body.get("code") == "NETWORK_ERROR", body
                    refused.append(n)
                else:
                    acked[body["message_id"]] = k

        async with asyncio.timeout(180):
            await asyncio.gather(*(writer() for _ in range(8)))
        assert killed.is_set()

    assert len(acked) + len(refused) == TOTAL
    assert len(acked) >= TOTAL - 24, refused
    urls = [cluster.client_url(s) for s in cluster.servers if s.running]
    stored = await eventually(
        lambda: stored_message_ids(urls), lambda got: set(acked) <= set(got), within=60
    )
    assert all(count == 1 for count in stored.values()), "a post is in the log twice"

    held = await eventually(
        lambda: asyncio.to_thread(_inbox, every.data_dir / "bzzz.db"),
        lambda got: set(acked) <= got,
        within=60,
    )
    assert set(acked) <= held
    mine = {m for m, k in acked.items() if k == 1}
    held_one = await eventually(
        lambda: asyncio.to_thread(_inbox, one.data_dir / "bzzz.db"),
        lambda got: mine <= got,
        within=60,
    )
    assert held_one & set(acked) == mine  # its project's posts, and no other's
