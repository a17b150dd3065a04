"""A node on a 3-server NATS cluster with R3 streams: servers die, acknowledged posts do not."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from mcp import ClientSession
from nats.errors import Error as NatsError
from nats.js.api import ConsumerInfo
from nats.js.errors import NotFoundError

from bzzz.network.jetstream import stream_name

from .cluster import NatsCluster
from .conftest import NodeFactory
from .support import (
    HttpNode,
    call,
    call_error,
    eventually,
    http_session,
    kill_orphans,
    node_env,
    start_network,
    stored_message_ids,
)

pytestmark = pytest.mark.integration

R3 = {"BZZZ_BZZZ__STREAM_REPLICAS": "3", "BZZZ_BZZZ__PUBLISH_TIMEOUT": "4"}

# Posts before the leader dies, while the cluster elects a new one (~6 s) and after it.
TOTAL = 600
KILL_AFTER = 200


@pytest.fixture
def nats_url(cluster: NatsCluster) -> str:
    """The nodes of ``make_node`` on the 3-server cluster: every server's URL."""
    return ",".join(cluster.urls)


@pytest.fixture
async def node(
    tmp_path: Path, clean_env: dict[str, str], cluster: NatsCluster
) -> AsyncIterator[HttpNode]:
    """A bzzz node that keeps its log in R3 streams on the cluster."""
    data_dir = tmp_path / "node"
    env = node_env(
        clean_env,
        data_dir,
        BZZZ_NATS_URL=",".join(cluster.urls),
        **R3,
    )
    running = HttpNode(data_dir=data_dir, env=env, log_dir=tmp_path / "logs")
    try:
        await running.start(within=40)
        yield running
    finally:
        await running.kill()
        kill_orphans(data_dir)


async def _stored_when_ready(urls: list[str]) -> Counter[str]:
    """``_stored_message_ids`` once the cluster places a reader again: just after a server
    died, making the reading consumer can time out while the servers notice."""

    async def attempt() -> Counter[str] | None:
        try:
            return await stored_message_ids(urls)
        except NatsError:
            return None

    stored = await eventually(attempt, lambda got: got is not None, within=60)
    assert stored is not None
    return stored


def _inbox(db_path: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as db:
        return [str(row[0]) for row in db.execute("SELECT message_id FROM inbox")]


async def test_killing_the_stream_leader_under_load_loses_and_duplicates_nothing(
    cluster: NatsCluster, node: HttpNode
) -> None:
    async with http_session(node.mcp_url) as session:
        await call(session, "bzzz_announce", {"agent_id": "sink", "role": "sink"})
        acked: list[str] = []
        refused: list[str] = []
        numbers = iter(range(TOTAL))
        killed = asyncio.Event()

        async def worker() -> None:
            for n in numbers:
                if n == KILL_AFTER:
                    leader = await cluster.leader_of(stream_name("main"))
                    await cluster.kill(leader)
                    killed.set()
                result = await session.call_tool(
                    "bzzz_post",
                    {"target_address": "bzzz://sink", "message_type": "data",
                     "content": {"n": n}},
                )  # fmt: skip
                body = result.structured_content or {}
                if result.is_error:
                    # Allowed only as an honest NETWORK_ERROR, never a false success.
                    assert body.get("code") == "NETWORK_ERROR", body
                    refused.append(str(n))
                else:
                    acked.append(body["message_id"])

        await asyncio.gather(*(worker() for _ in range(8)))
        assert killed.is_set()
    stored = await stored_message_ids([s.url for s in cluster.servers if s.running])
    assert all(count == 1 for count in stored.values()), "a message was stored twice"
    assert set(acked) <= set(stored), "an acknowledged post is missing from the stream"
    inbox = await eventually(
        lambda: asyncio.to_thread(_inbox, node.data_dir / "bzzz.db"),
        lambda got: set(acked) <= set(got),
        within=30,
    )
    assert len(inbox) == len(set(inbox))
    assert len(acked) + len(refused) == TOTAL


async def test_without_a_quorum_a_post_fails_with_network_error_then_recovers(
    cluster: NatsCluster, node: HttpNode
) -> None:
    async with http_session(node.mcp_url) as session:
        await call(session, "bzzz_announce", {"agent_id": "sink", "role": "sink"})
        first, second, _third = cluster.servers
        await cluster.kill(first)
        await cluster.kill(second)
        refused = await call_error(
            session,
            "bzzz_post",
            {"target_address": "bzzz://sink", "message_type": "data", "content": {"n": 1}},
        )
        assert refused["code"] == "NETWORK_ERROR"
        assert "not posted" in refused["error"]
        await cluster.start_server(first)
        await cluster.start_server(second)
        await cluster.wait_ready(within=40)
        posted = await _post_when_ready(session)
        assert posted["delivery_results"]["recipients"] == ["sink"]


async def _post_when_ready(session: ClientSession, n: int = 2) -> dict[str, object]:
    async def attempt() -> dict[str, object] | None:
        result = await session.call_tool(
            "bzzz_post",
            {"target_address": "bzzz://sink", "message_type": "data", "content": {"n": n}},
        )
        return None if result.is_error else dict(result.structured_content or {})

    got = await eventually(attempt, lambda body: body is not None, within=40)
    assert got is not None
    return got


async def _consumer_of(urls: list[str], node: HttpNode) -> ConsumerInfo | None:
    """The consumer ``node`` keeps on the network's stream, None while there is none (nats-py)."""
    durable = "node_" + str((await node.health())["node_id"]).replace("-", "_")
    nc = await nats.connect(urls, connect_timeout=2, error_cb=_quiet)
    try:
        return await nc.jetstream(timeout=5).consumer_info(stream_name("main"), durable)
    except NotFoundError:
        return None
    finally:
        await nc.close()


async def _quiet(exc: Exception) -> None:
    """nats-py's default error callback prints a traceback for each server it cannot reach."""


async def test_a_nodes_consumer_is_one_replica_in_memory_and_its_servers_death_loses_nothing(
    cluster: NatsCluster, make_node: NodeFactory
) -> None:
    # A replicated consumer per node would cost each server a raft group per node: one server
    # holds a node's consumer, in memory, and the node makes it again when that server dies.
    receiver, sender = make_node("receiver", **R3), make_node("sender", **R3)
    await start_network(receiver, sender)
    consumer = await _consumer_of(cluster.urls, receiver)
    assert consumer is not None and consumer.cluster is not None
    assert consumer.config.num_replicas == 1 and consumer.config.mem_storage is True
    assert not consumer.cluster.replicas  # no other server holds a copy
    holder = next(s for s in cluster.servers if s.name == consumer.cluster.leader)
    async with http_session(receiver.mcp_url) as sr:
        await call(sr, "bzzz_announce", {"agent_id": "sink", "role": "sink"})
    acked: list[str] = []
    async with http_session(sender.mcp_url) as ss:
        await call(ss, "bzzz_announce", {"agent_id": "source", "role": "source"})
        await eventually(lambda: _lookup(ss, "bzzz://sink"), lambda count: count == 1)
        # Posts before, across and after the kill; they reach the receiver through its
        # consumer alone (the sender's node is another).
        for n in range(60):
            if n == 20:
                await cluster.kill(holder)
            acked.append(str((await _post_when_ready(ss, n))["message_id"]))
    running = [s.url for s in cluster.servers if s.running]
    stored = await _stored_when_ready(running)
    assert all(count == 1 for count in stored.values()), "a message was stored twice"
    assert set(acked) <= set(stored)
    # Every message the log holds for the sink reached the receiver's inbox (a post refused
    # while the cluster elected may still have been stored: it must arrive too).
    await eventually(
        lambda: asyncio.to_thread(_inbox, receiver.data_dir / "bzzz.db"),
        lambda got: set(got) == set(stored),
        within=60,
    )
    again = await _consumer_of(running, receiver)
    assert again is not None and again.cluster is not None
    assert again.cluster.leader != holder.name
    health = await receiver.health()
    assert health["healthy"] is True and health["consumer_restarts"]["lost"] >= 1


async def _lookup(session: ClientSession, address: str) -> int:
    found = await call(session, "bzzz_lookup", {"semantic_address": address})
    return int(found["count"])
