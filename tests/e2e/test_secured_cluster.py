"""The README's secured 3-server cluster: clients and routes log in; nodes use the URL's login."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest

from bzzz.config import Settings, load_settings
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.network.jetstream import stream_name
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, LookupInput

from .cluster import NatsCluster

pytestmark = pytest.mark.integration


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[NatsCluster]:
    """Three routed JetStream servers that take only logged-in clients and routes."""
    running = NatsCluster(tmp_path / "cluster", secured=True)
    try:
        # Ready means a replicated stream was created: the routes logged in to each other.
        await running.start()
        yield running
    finally:
        await running.close()


def _settings(data_dir: Path, urls: list[str]) -> Settings:
    return load_settings(
        environ={"BZZZ_NATS_URL": ",".join(urls), "BZZZ_BZZZ__STREAM_REPLICAS": "3"},
        overrides={"node": {"data_dir": str(data_dir)}},
    )


async def test_nodes_with_the_login_share_the_network_and_others_are_refused(
    cluster: NatsCluster, tmp_path: Path
) -> None:
    first, second = cluster.urls[0], cluster.urls[1]
    async with (
        Node(_settings(tmp_path / "a", [first])) as a,
        Node(_settings(tmp_path / "b", [second])) as b,
    ):
        await a.agents.announce(Caller("s1"), AnnounceInput(agent_id="arch-1", role="architect"))
        await b.projector.wait_until(lambda: b.projector.directory.get("arch-1") is not None, 10)
        found = await b.agents.lookup(
            LOCAL_CALLER, LookupInput(semantic_address="bzzz://*:architect@*")
        )
        assert [m["id"] for m in found["matches"]] == ["arch-1"]

        nc = await nats.connect(first)
        try:
            info = await nc.jetstream().stream_info(stream_name("main"))
            assert info.config.num_replicas == 3
        finally:
            await nc.close()

    for server in cluster.servers:
        complaints: list[str] = []

        async def on_error(exc: Exception, seen: list[str] = complaints) -> None:
            seen.append(str(exc))

        with pytest.raises((TimeoutError, nats.errors.Error, OSError)):
            async with asyncio.timeout(3):
                await nats.connect(
                    server.url, error_cb=on_error, allow_reconnect=False, connect_timeout=2
                )
        assert any("Authorization Violation" in text for text in complaints)
