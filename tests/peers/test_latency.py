"""Network latency between nodes: two real nodes on a real nats-server time ping/pong round trips,
and report them per peer on /metrics, GET /api/v1/peers, bzzz://metrics and `bzzz metrics`."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from admitted import admit
from e2e.support import bzzz_executable
from mcp import Client
from prometheus_client.parser import text_string_to_metric_families

from bzzz.api.app import build_app
from bzzz.config import Settings, load_settings
from bzzz.mcp.server import build_server
from bzzz.node import admin as node_admin
from bzzz.node.core import Node
from bzzz.peers.latency import RoundTrips

pytestmark = pytest.mark.integration

WITHIN = 10.0


def _settings(data_dir: Path, nats_url: str, **environ: str) -> Settings:
    return load_settings(
        environ={"BZZZ_NATS_URL": nats_url, **environ},
        overrides={"node": {"data_dir": str(data_dir)}, "bzzz": {"heartbeat_interval": 0.1}},
    )


def _measured(peer: str, count: int = 2) -> Any:
    def check(trips: dict[str, RoundTrips]) -> bool:
        return peer in trips and trips[peer].count >= count

    return check


async def _get(node: Node, path: str) -> httpx.Response:
    server, _ = build_server(node)
    app = build_app(node, server, "127.0.0.1")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7331") as http:
        return await http.get(path)


async def _cli_metrics(settings: Settings, nats_url: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BZZZ_")}
    env |= {"BZZZ_DATA_DIR": str(settings.node.data_dir), "BZZZ_NATS_URL": nats_url}
    proc = await asyncio.create_subprocess_exec(
        bzzz_executable(), "metrics", "--json", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    shown: dict[str, Any] = json.loads(out)
    return shown


async def test_two_nodes_time_round_trips_to_each_other_and_report_them_per_peer(
    tmp_path: Path, nats_url: str
) -> None:
    async with (
        Node(_settings(tmp_path / "a", nats_url)) as a,
        Node(_settings(tmp_path / "b", nats_url)) as b,
    ):
        await admit(a, b)  # `bzzz node admit` on a, the network's first node
        async with asyncio.timeout(WITHIN):
            await a.peers.pinger.wait_for(_measured(b.node_id))
            await b.peers.pinger.wait_for(_measured(a.node_id))
            # Each node's heartbeat carries what it measured; the other hears it.
            await b.peers.wait_for(lambda p: b.node_id in p[a.node_id].latency, WITHIN)

        metrics = (await _get(a, "/metrics")).text
        families = {f.name: f for f in text_string_to_metric_families(metrics)}
        latency = families["bzzz_network_latency_seconds"]
        assert latency.type == "histogram"
        assert "# HELP bzzz_network_latency_seconds Network latency between nodes" in metrics
        counts = {s.labels["peer"]: s.value for s in latency.samples if s.name.endswith("_count")}
        assert counts[b.node_id] >= 2 and set(counts) == {b.node_id}
        [total] = [s.value for s in latency.samples if s.name.endswith("_sum")]
        assert total > 0

        peers = {p["id"]: p for p in (await _get(a, "/api/v1/peers")).json()["peers"]}
        assert peers[a.node_id]["latency_ms"] is None  # no round trip to itself
        assert isinstance(peers[b.node_id]["latency_ms"], float)
        assert peers[b.node_id]["latency_ms"] > 0
        assert peers[b.node_id]["latency"]["samples"] >= 2

        async with Client(build_server(a)[0], mode="legacy") as client:
            read = await client.read_resource("bzzz://metrics")
        shown = json.loads(read.contents[0].text)  # type: ignore[union-attr]
        [row] = shown["network_latency"]["peers"]
        assert row["peer"] == b.node_id and row["samples"] >= 2 and row["last_ms"] > 0

        cli = (await _cli_metrics(a.settings, nats_url))["network_latency"]
        assert cli["live"] is True
        pairs = {(p["from"], p["to"]) for p in cli["pairs"]}
        assert {(a.node_id, b.node_id), (b.node_id, a.node_id)} <= pairs
        assert all(p["last_ms"] > 0 for p in cli["pairs"])


async def test_an_unadmitted_node_is_not_answered_until_it_is_admitted(
    tmp_path: Path, nats_url: str
) -> None:
    admission = {"BZZZ_BZZZ__ADMISSION": "true"}
    async with (
        Node(_settings(tmp_path / "a", nats_url, **admission)) as a,
        Node(_settings(tmp_path / "b", nats_url, **admission)) as stranger,
    ):
        # The stranger hears the admitted node and pings it; the pings go unanswered.
        async with asyncio.timeout(WITHIN):
            await stranger.peers.pinger.wait_for(
                lambda trips: a.node_id in trips and trips[a.node_id].timeouts >= 2
            )
        assert stranger.peers.pinger.round_trips[a.node_id].count == 0
        assert a.peers.pinger.refused >= 2
        assert stranger.node_id not in a.peers.pinger.round_trips  # nor pinged by a
        assert stranger.peers.latency_ms(a.node_id) is None

        await node_admin.admit(a.settings, stranger.identity.public_key_b64)
        async with asyncio.timeout(WITHIN):
            await stranger.peers.pinger.wait_for(_measured(a.node_id, 1))
            await a.peers.pinger.wait_for(_measured(stranger.node_id, 1))
