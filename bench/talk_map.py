"""The dashboard's map of who talks to whom (``TalkMap.map``) and its edge list, on a store
holding many deliveries in the window.

A node on SQLite (in-memory bus) with ``--agents`` agents of one project; ``--deliveries``
inbox rows (a message each, between random pairs of agents) are written straight into the
store in the last 15 minutes, so every window counts them all: below ``MAX_DELIVERIES`` the map
reads every one, past it the read stops at the cap and the answer says ``truncated``. Figures:
the median of ``--reads`` reads, in ms, of the map (1 h window) and of one edge's messages,
for each size.

    .venv/bin/python bench/talk_map.py [--agents 200] [--sizes 1000,5000,50000]
        [--reads 5] [--json bench/results/talk_map.json]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchutil import machine, report
from bzzz.access.keys import principal_key
from bzzz.agents.talkmap import MAX_DELIVERIES, TalkMap
from bzzz.config import load_settings
from bzzz.eventlog import Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.principal import LOCAL
from bzzz.schemas import AnnounceInput
from bzzz.store.models import InboxRow, MessageRow

PROJECT = "bench"


async def _median_ms(reads: int, call: Callable[[], Awaitable[Any]]) -> float:
    took = []
    for _ in range(reads):
        started = time.perf_counter()
        await call()
        took.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(took), 2)


async def _fill(node: Node, agents: list[str], count: int, first: int) -> None:
    """``count`` deliveries between random pairs, stamped within the last 15 minutes."""
    rng = random.Random(first)
    now = node.clock.now()
    async with node.db.session() as session:
        for i in range(first, first + count):
            sender, recipient = rng.sample(agents, 2)
            at = now - timedelta(seconds=rng.uniform(0, 800))
            message_id = f"bench-{i:08d}"
            session.add(
                MessageRow(id=message_id, sender=sender, target_address=f"bzzz://{recipient}",
                           message_type="text", content={"text": f"m{i}"}, priority="medium",
                           thread_id=None, reply_to=None, recipients=[recipient], posted_at=at)
            )  # fmt: skip
            session.add(InboxRow(agent_id=recipient, message_id=message_id, posted_at=at))
        await session.commit()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Announce the agents, then grow the store size by size and time the reads."""
    with tempfile.TemporaryDirectory(prefix="bzzz-talkmap-") as tmp:
        settings = load_settings(
            environ={}, overrides={"node": {"data_dir": str(Path(tmp) / "node")}}
        )
        async with Node(settings, bus=InMemoryBus()) as node:
            caller = Caller(principal_key(LOCAL), LOCAL)
            agents = [f"agent-{i:03d}" for i in range(args.agents)]
            for agent_id in agents:
                params = AnnounceInput(agent_id=agent_id, role="dev", project=PROJECT)
                await node.agents.announce(Caller(f"s-{agent_id}", LOCAL), params)
            talk = TalkMap(node.db, node.agents, node.clock)
            rows = []
            filled = 0
            for size in args.sizes:
                await _fill(node, agents, size - filled, filled)
                filled = size
                answer = await talk.map(caller, "1h")
                a, b = answer["edges"][0]["source"], answer["edges"][0]["target"]
                rows.append(
                    {
                        "deliveries": size,
                        "map_ms": await _median_ms(args.reads, lambda: talk.map(caller, "1h")),
                        "edge_ms": await _median_ms(
                            args.reads, lambda a=a, b=b: talk.edge(caller, a, b, "1h")
                        ),
                        "scanned": answer["scanned"],
                        "truncated": answer["truncated"],
                        "edges": len(answer["edges"]),
                    }
                )
                print(rows[-1], flush=True)
    return {
        "bench": "talk_map",
        "agents": args.agents,
        "cap": MAX_DELIVERIES,
        "reads": args.reads,
        "results": rows,
        "machine": machine(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument(
        "--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1000, 5000, 50000]
    )
    parser.add_argument("--reads", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    report(asyncio.run(run(args)), args.json)


if __name__ == "__main__":
    main()
