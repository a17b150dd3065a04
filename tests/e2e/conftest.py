"""Fixtures of the real-process tests: spawned nodes, a 3-server NATS cluster, a receiver."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from .cluster import NatsCluster
from .support import HttpNode, WebhookReceiver, kill_orphans, node_env

NodeFactory = Callable[..., HttpNode]


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    """A webhook receiver that answers 500 once, then 200."""
    hook = WebhookReceiver(fail_first=1)
    await hook.start()
    try:
        yield hook
    finally:
        await hook.close()


@pytest.fixture
async def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[NatsCluster]:
    """Three routed JetStream servers on loopback; an indirect parameter is the number of
    streams their subject mapping spreads projects over (1: no mapping)."""
    running = NatsCluster(tmp_path / "cluster", partitions=getattr(request, "param", 1))
    try:
        await running.start()
        yield running
    finally:
        await running.close()


@pytest.fixture
async def make_node(
    tmp_path: Path, clean_env: dict[str, str], nats_url: str
) -> AsyncIterator[NodeFactory]:
    """Nodes on the shared NATS server, each in its own data directory; all killed at the end."""
    made: list[HttpNode] = []

    def make(name: str, **extra: str) -> HttpNode:
        data_dir = tmp_path / name
        # Heartbeats every 0.3 s: a peer that stops is seen offline within a second.
        extra = {"BZZZ_HEARTBEAT_INTERVAL": "0.3"} | extra
        env = node_env(clean_env, data_dir, BZZZ_NATS_URL=extra.pop("nats_url", nats_url), **extra)
        node = HttpNode(data_dir=data_dir, env=env, log_dir=tmp_path / "logs")
        made.append(node)
        return node

    try:
        yield make
    finally:
        for node in made:
            await node.kill()
            kill_orphans(node.data_dir)
