"""What ``bench/scale.py`` reads from the servers and the log rather than from the nodes:
each server's monitoring endpoints (``/varz``, ``/jsz``), the JetStream API's streams and
consumers, what clients send at idle by subject, posts and node changes on the log, and the
extrapolation of a run's per-unit figures to issue 22's network."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import nats
from e2e.cluster import NatsCluster
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from bzzz.network.directory import directory_bucket
from bzzz.network.envelope import Envelope, sealed_key_id, unseal
from bzzz.network.jetstream import stream_name
from bzzz.network.sealing import Keyring
from bzzz.peers.latency import PINGS_PER_ROUND
from scale_fleet import heartbeats_heard, plan

NETWORK = "main"
IDLE_WINDOW = 10.0  # seconds the servers' message counts are read over, with nothing driven


def _family(subject: str) -> str:
    """A subject without its ids: what kind of traffic it is."""
    tokens = subject.split(".")
    if tokens[0] in ("$JS", "$KV", "bzzz", "_bzzz"):
        return ".".join(tokens[:3])
    return tokens[0]


async def server_figures(cluster: NatsCluster) -> dict[str, Any]:
    """Streams, consumers, Raft groups and memory of each server; the idle message rate."""
    families: Counter[str] = Counter()
    nc = await nats.connect(cluster.urls)

    async def heard(msg: Any) -> None:
        families[_family(msg.subject)] += 1

    async with httpx.AsyncClient(timeout=10) as http:
        sub = await nc.subscribe(">", cb=heard)
        before = await _varz(http, cluster)
        await asyncio.sleep(IDLE_WINDOW)
        after = await _varz(http, cluster)
        await sub.unsubscribe()
        await nc.close()
        jsz = [
            (await http.get(f"http://127.0.0.1:{s.http_port}/jsz")).json() for s in cluster.servers
        ]
    per_server = []
    for server, v0, v1, j in zip(cluster.servers, before, after, jsz, strict=True):
        per_server.append(
            {
                "server": server.name,
                "streams": j.get("streams"),
                "consumers": j.get("consumers"),
                "raft_groups": j.get("ha_assets"),
                "store_mb": round(j.get("storage", 0) / 2**20, 1),
                "memory_mb": round(j.get("memory", 0) / 2**20, 1),
                "rss_mb": round(v1["mem"] / 2**20, 1),
                "connections": v1["connections"],
                "subscriptions": v1["subscriptions"],
                "idle_in_msgs_per_s": round((v1["in_msgs"] - v0["in_msgs"]) / IDLE_WINDOW, 1),
                "idle_out_msgs_per_s": round((v1["out_msgs"] - v0["out_msgs"]) / IDLE_WINDOW, 1),
            }
        )
    idle = {k: round(v / IDLE_WINDOW, 1) for k, v in families.most_common(12)}
    return {
        "per_server": per_server,
        "idle_client_msgs_per_s_by_subject": idle,
        **await jetstream_listing(cluster.urls),
    }


async def _varz(http: httpx.AsyncClient, cluster: NatsCluster) -> list[dict[str, Any]]:
    urls = [f"http://127.0.0.1:{s.http_port}/varz" for s in cluster.servers]
    return [(await http.get(url)).json() for url in urls]


async def jetstream_listing(urls: list[str]) -> dict[str, Any]:
    """Streams and consumers as the JetStream API lists them, by kind and replicas."""
    nc = await nats.connect(urls)
    try:
        js = nc.jetstream(timeout=30)
        streams = {}
        for info in await js.streams_info():
            name = str(info.config.name)
            consumers = await js.consumers_info(name)
            kinds = Counter(
                ("durable" if c.config.durable_name else "ephemeral")
                + f" R{c.config.num_replicas or info.config.num_replicas}"
                for c in consumers
            )
            streams[name] = {
                "replicas": info.config.num_replicas,
                "messages": info.state.messages,
                "bytes": info.state.bytes,
                "consumers": dict(kinds),
            }
    finally:
        await nc.close()
    return {"streams": streams, "stream_count": len(streams)}


async def log_message_counts(urls: list[str], keyring: Keyring, wanted: set[str]) -> Counter[str]:
    """How often each wanted message id is on the log (every project's posts read once)."""
    counts: Counter[str] = Counter()
    nc = await nats.connect(urls)
    try:
        js = nc.jetstream(timeout=60)
        stream = stream_name(NETWORK)
        filter_ = f"bzzz.{NETWORK}.p.*.msg.>"
        info = await js.stream_info(stream, subjects_filter=filter_)
        total = sum((info.state.subjects or {}).values())
        sub = await js.pull_subscribe(
            filter_,
            stream=stream,
            config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.NONE),
        )
        seen = 0
        while seen < total:
            for msg in await sub.fetch(1000, timeout=30):
                seen += 1
                env = Envelope.model_validate_json(msg.data)
                if sealed_key_id(env) is not None:
                    env = unseal(env, keyring)
                message_id = env.payload.get("message_id")
                if message_id in wanted:
                    counts[message_id] += 1
        await sub.unsubscribe()
    finally:
        await nc.close()
    return counts


async def node_envelopes(urls: list[str]) -> dict[str, int]:
    """The nodes' status changes on the log, by type: a ``node.lost`` takes a node's agents
    offline (on a loaded machine, a node whose heartbeats arrive late is taken for lost)."""
    nc = await nats.connect(urls)
    kinds: Counter[str] = Counter()
    try:
        js = nc.jetstream(timeout=30)
        sub = await js.subscribe(
            f"bzzz.{NETWORK}.node.>", ordered_consumer=True, deliver_policy=DeliverPolicy.ALL
        )
        with contextlib.suppress(TimeoutError, nats.errors.TimeoutError):
            while True:
                msg = await sub.next_msg(timeout=2)
                kinds[Envelope.model_validate_json(msg.data).type] += 1
        await sub.unsubscribe()
    finally:
        await nc.close()
    return dict(kinds)


def extrapolate(
    results: dict[str, Any],
    args: argparse.Namespace,
    nodes: int = 1000,
    agents: int = 1_000_000,
    projects: int = 50,
) -> dict[str, Any]:
    """Issue 22's network (``nodes`` nodes, ``agents`` agents, ``projects`` projects) from
    this run's per-unit figures: linear in what grows linearly (entries, agents held, nodes,
    pings: each node pings PINGS_PER_ROUND peers an interval); heartbeats as the harness's
    layout at that size delivers them (each node hears its projects' nodes and the ``*`` one),
    beside what a board every node watched whole would deliver (the square of the nodes)."""
    servers = results["servers"]
    kv = servers["streams"].get(f"KV_{directory_bucket(NETWORK)}", {})
    per_entry = kv.get("bytes", 0) / max(1, kv.get("messages", 1))
    log = servers["streams"].get(stream_name(NETWORK), {})
    # Replicated consumers are each a Raft group on every server; a node's consumer (R1, in
    # memory) is none, so the groups stay those of the streams and the meta group.
    replicated = sum(n for kind, n in log.get("consumers", {}).items() if kind.endswith("R3"))
    raft_now = max(s["raft_groups"] or 0 for s in servers["per_server"])
    per_project = agents / projects
    figures: dict[str, Any] = {
        "nodes": nodes,
        "agents": agents,
        "projects": projects,
        "node_consumers": nodes,
        "raft_groups_per_server": raft_now - replicated,
        "heartbeats_delivered_per_s": round(
            heartbeats_heard(plan(nodes, projects, args.workers, Path("."))) / args.heartbeat
        ),
        "heartbeats_if_every_node_heard_all_per_s": round(nodes * nodes / args.heartbeat),
        "pings_per_s": round(nodes * min(PINGS_PER_ROUND, nodes - 1) / args.heartbeat),
        "directory_bytes_per_entry": round(per_entry, 1),
        "directory_mb_per_server": round(agents * per_entry / 2**20, 1),
        "directory_renewals_per_s": {
            f"lease_{lease:g}s": round(agents / (lease / 3)) for lease in (120, args.lease_seconds)
        },
    }
    baseline = results.get("bootstrap", {}).get("replay", {}).get("baseline_rss_mb")
    for name, held in (("one", per_project), ("star", agents)):
        node = results["nodes"][name]
        stored = max(1, node["agents_stored"])
        figures[f"store_mb_{name}_node"] = round(node["store_bytes"] / stored * held / 2**20, 1)
        if baseline is not None:
            grown = (node["rss_mb"] - baseline) / stored * held
            figures[f"rss_mb_{name}_node"] = round(baseline + grown, 1)
    return figures
