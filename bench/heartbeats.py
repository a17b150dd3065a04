"""Heartbeats a network delivers: every node hearing every node vs the board kept by project.

``--nodes`` in-process nodes on a 3-server nats-server cluster, run twice side by side: first each
serving every project (``*``: every node watches the whole board, as every node did before the
board followed the projects), then one ``*`` node and the others each serving one of
``--projects`` projects (a node hears its project's nodes and the ``*`` one). Each layout beats
for ``--seconds`` after every node heard the peers it should; the figures are the board changes
the nodes handled (``peers.heard`` on /healthz) and the messages the servers sent, per second,
beside what the layout predicts (``scale_fleet.heartbeats_heard``).

    .venv/bin/python bench/heartbeats.py [--nodes 30] [--projects 15] [--interval 1]
        [--seconds 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bzzz.config import load_settings
from bzzz.node.core import Node

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from e2e.cluster import NatsCluster

from benchutil import code_version, machine
from scale_fleet import Layout, NodeSpec, heartbeats_heard


def _layout(nodes: int, projects: int, *, by_project: bool) -> Layout:
    names = [f"p{i + 1:02d}" for i in range(projects)]
    layout = Layout(names)
    for i in range(nodes):
        served = ["*"] if i == 0 or not by_project else [names[(i - 1) % projects]]
        layout.nodes.append(NodeSpec(f"n{i:03d}", "", served, "bench"))
    return layout


async def _servers_out_msgs(cluster: NatsCluster) -> int:
    async with httpx.AsyncClient(timeout=10) as client:
        total = 0
        for server in cluster.servers:
            varz = await client.get(f"http://127.0.0.1:{server.http_port}/varz")
            total += int(varz.json()["out_msgs"])
        return total


async def _measure(
    work: Path, cluster: NatsCluster, network: str, layout: Layout, args: argparse.Namespace
) -> dict[str, Any]:
    async with contextlib.AsyncExitStack() as stack:
        nodes: list[Node] = []
        for spec in layout.nodes:
            settings = load_settings(
                environ={},
                overrides={
                    "node": {"data_dir": str(work / spec.name)},
                    "bzzz": {
                        "nats_url": cluster.urls,
                        "network_id": network,  # a board of its own: the other run's is apart
                        "heartbeat_interval": args.interval,
                        "heartbeat_misses": 100,
                        "projects": spec.projects,
                        "admission": False,
                    },
                    "conversation": {"escalation_rules": []},
                    "snapshots": {"every": 0},
                },
            )
            nodes.append(await stack.enter_async_context(Node(settings)))
        # Every node heard each peer it watches: the board is settled.
        for node in nodes:
            expected = _watched(node, nodes)
            await node.peers.wait_for(lambda peers, e=expected: e <= set(peers), 120)
        heard = sum(node.peers.heard for node in nodes)
        sent = await _servers_out_msgs(cluster)
        began = time.perf_counter()
        await asyncio.sleep(args.seconds)  # the window measured: the nodes beat meanwhile
        seconds = time.perf_counter() - began
        heard = sum(node.peers.heard for node in nodes) - heard
        sent = await _servers_out_msgs(cluster) - sent
        known = sorted(len(node.peers.peers()) for node in nodes)
    return {
        "nodes": len(layout.nodes),
        "heard_per_s": round(heard / seconds, 1),
        "servers_out_msgs_per_s": round(sent / seconds, 1),
        "predicted_heard_per_s": round(heartbeats_heard(layout) / args.interval, 1),
        "peers_known_min_max": [known[0], known[-1]],
    }


def _watched(node: Node, nodes: list[Node]) -> set[str]:
    served = node.projects
    return {
        other.node_id
        for other in nodes
        if served.every or other.projects.every or served.names & other.projects.names
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"bench": "heartbeats", "interval_s": args.interval}
    with tempfile.TemporaryDirectory(prefix="bzzz-bench-beats-") as tmp:
        work = Path(tmp)
        cluster = NatsCluster(work / "servers", monitor=True)
        await cluster.start()
        try:
            for name, by_project in (("every_node_hears_all", False), ("by_project", True)):
                layout = _layout(args.nodes, args.projects, by_project=by_project)
                network = name.replace("_", "-")
                results[name] = await _measure(work / name, cluster, network, layout, args)
                print(name, json.dumps(results[name]), file=sys.stderr)
        finally:
            await cluster.close()
    every, kept = results["every_node_hears_all"], results["by_project"]
    results["heard_ratio"] = round(kept["heard_per_s"] / every["heard_per_s"], 3)
    results["machine"] = machine()
    results["code"] = code_version()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=30)
    parser.add_argument("--projects", type=int, default=15)
    parser.add_argument("--interval", type=float, default=1.0, help="bzzz.heartbeat_interval")
    parser.add_argument("--seconds", type=float, default=20.0, help="the window measured")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    results = asyncio.run(run(args))
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
