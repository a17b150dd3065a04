"""Writes to a 3-server R3 cluster, projects in one stream vs spread over N (issue 22).

For each layout (``--partitions 1`` and N, alternating ``--rounds`` times, side by side in one
run) a fresh 3-server cluster (tests/e2e/cluster.py) with R3 streams:

- the engine: ``--writers`` connections publish ``--envelopes`` signed posts spread over
  ``--projects`` projects, ``--window`` unacknowledged each; figures: acknowledged per second,
  and per second until the network's stream holds them all (the copies included);
- a node: one ``*`` node (in this process) posts ``--posts`` times, one at a time, then
  ``--posts`` times 16 at once; figures: post p50/p99 (ms) and posts per second;
- where the streams' leaders are (a server may lead several).

    PYTHONPATH=tests .venv/bin/python bench/partitioned_writes.py [--partitions 3]
        [--envelopes 100000] [--projects 50] [--rounds 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import nats

from bzzz.config import load_settings
from bzzz.eventlog import Caller
from bzzz.network import partitions
from bzzz.network.identity import NodeIdentity
from bzzz.network.jetstream import stream_name
from bzzz.node.core import Node
from bzzz.principal import LOCAL
from bzzz.schemas import AnnounceInput, PostInput

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from e2e.cluster import NatsCluster

from benchutil import code_version, machine, percentile, report
from partition_catchup import _post


async def _engine(cluster: NatsCluster, args: argparse.Namespace) -> dict[str, Any]:
    writer = NodeIdentity.generate()
    # Signed beforehand: the figure is the servers', not the signer's.
    made = [_post(writer, n, f"p{n % args.projects + 1}") for n in range(args.envelopes)]
    conns = [await nats.connect(cluster.urls) for _ in range(args.writers)]
    try:
        log = conns[0].jetstream(timeout=30)
        count = int((await log.stream_info(stream_name("main"))).state.messages) + len(made)
        started = time.perf_counter()

        async def write(index: int) -> None:
            js = conns[index].jetstream(timeout=30)
            window: list[asyncio.Future[Any]] = []
            for subject, env in made[index :: args.writers]:
                window.append(
                    await js.publish_async(subject, env.to_bytes(), headers={"Nats-Msg-Id": env.id})
                )
                if len(window) >= args.window:
                    await asyncio.gather(*window)
                    window.clear()
            await asyncio.gather(*window)

        await asyncio.gather(*(write(i) for i in range(args.writers)))
        acked = time.perf_counter() - started
        while True:  # the servers' state, read until it holds them all: no event to wait on
            if int((await log.stream_info(stream_name("main"))).state.messages) >= count:
                break
            await asyncio.sleep(0.01)
        held = time.perf_counter() - started
    finally:
        for nc in conns:
            await nc.close()
    return {
        "acknowledged_per_s": round(args.envelopes / acked, 1),
        "in_the_log_per_s": round(args.envelopes / held, 1),
        "acknowledged_s": round(acked, 3),
        "in_the_log_s": round(held, 3),
    }


async def _leaders(cluster: NatsCluster, count: int) -> dict[str, str]:
    names = [stream_name("main")]
    names += [partitions.stream_name("main", k) for k in range(count if count > 1 else 0)]
    nc = await nats.connect(cluster.urls)
    try:
        js = nc.jetstream(timeout=10)
        infos = {name: await js.stream_info(name) for name in names}
    finally:
        await nc.close()
    return {name: str(info.cluster.leader if info.cluster else "") for name, info in infos.items()}


async def _node_posts(work: Path, cluster: NatsCluster, args: argparse.Namespace) -> dict:
    settings = load_settings(
        environ={},
        overrides={
            "node": {"data_dir": str(work / "node")},
            "bzzz": {"nats_url": cluster.urls, "stream_replicas": 3, "heartbeat_interval": 5.0},
        },
    )
    async with Node(settings, catch_up_timeout=600) as node:
        caller = Caller("bench", LOCAL)
        for agent in ("src", "sink"):
            await node.agents.announce(
                caller, AnnounceInput(agent_id=agent, role="dev", project="p1")
            )

        async def post(n: int) -> float:
            started = time.perf_counter()
            await node.conversations.post(
                caller,
                PostInput(
                    agent_id="src",
                    target_address="bzzz://sink",
                    message_type="note",
                    content={"n": n},
                ),
            )
            return (time.perf_counter() - started) * 1000

        for n in range(20):  # warm-up
            await post(n)
        alone = sorted([await post(n) for n in range(args.posts)])
        started = time.perf_counter()
        slots = asyncio.Semaphore(16)

        async def bounded(n: int) -> float:
            async with slots:
                return await post(n)

        together = sorted(await asyncio.gather(*(bounded(n) for n in range(args.posts))))
        rate = args.posts / (time.perf_counter() - started)
    return {
        "post_alone_p50_ms": round(percentile(alone, 50), 2),
        "post_alone_p99_ms": round(percentile(alone, 99), 2),
        "post_16_at_once_p50_ms": round(percentile(together, 50), 2),
        "post_16_at_once_p99_ms": round(percentile(together, 99), 2),
        "posts_16_at_once_per_s": round(rate, 1),
    }


async def one_layout(args: argparse.Namespace, count: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bzzz-bench-pw-") as tmp:
        work = Path(tmp)
        cluster = NatsCluster(work / "cluster", partitions=count, max_file_store="8GB")
        await cluster.start()
        try:
            # The node makes the streams (R3) as a network's first node does.
            node = await _node_posts(work, cluster, args)
            engine = await _engine(cluster, args)
            leaders = await _leaders(cluster, count)
        finally:
            await cluster.close()
    return {
        "partitions": count,
        "engine": engine,
        "node": node,
        "leaders": leaders,
        "servers_leading": len(set(leaders.values())),
        "streams_per_leader": dict(Counter(leaders.values())),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    runs = []
    for _ in range(args.rounds):
        for count in (1, args.partitions):
            result = await one_layout(args, count)
            print(json.dumps(result), file=sys.stderr)
            runs.append(result)
    return {
        "bench": "partitioned_writes",
        "envelopes": args.envelopes,
        "projects": args.projects,
        "writers": args.writers,
        "window": args.window,
        "runs": runs,
        "machine": machine(),
        "code": code_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--envelopes", type=int, default=100_000)
    parser.add_argument("--projects", type=int, default=50)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--posts", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    report(asyncio.run(run(args)), args.json)


if __name__ == "__main__":
    main()
