"""Lookup from the network's agent directory against lookup from the store (issue 22).

In-process, one embedded nats-server: node ``star`` serves every project and announces the
agents (all in project ``p2``); node ``p1`` (``bzzz.projects = p1``) answers lookups of ``p2``
from the directory (the KV bucket ``bzzz_dir_<network>``). Both answer the same lookups; the
run checks that they match (ids, order, scores) and times each: p50/p99 of warm lookups (the
directory's view and its ranked copy cached), the cold read of the project's 10,000 entries
into a fresh view, and a lookup right after an entry changed (the ranked copy rebuilt).

    .venv/bin/python bench/directory.py [--agents 10000] [--rounds 300]

Prints the figures and writes bench/results/directory.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchutil import code_version, machine, percentile
from bzzz.config import load_settings
from bzzz.eventlog import LOCAL_CALLER, Caller
from bzzz.network.directory import JetStreamDirectory
from bzzz.network.embedded import EmbeddedNats
from bzzz.network.jetstream import JetStreamBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, FilterCriteria, LookupInput

RESULTS = Path(__file__).resolve().parent / "results"
ROLES = ("developer", "architect", "reviewer", "tester", "writer", "devops", "sre", "data")
CAPS = ("python", "go", "rust", "sql", "kubernetes", "typescript")
LOOKUPS = {
    "project": LookupInput(semantic_address="bzzz://*:*@p2"),
    "role": LookupInput(semantic_address="bzzz://*:developer@p2"),
    "expertise": LookupInput(
        semantic_address="bzzz://*:*@p2", filter_criteria=FilterCriteria(expertise=["rust"])
    ),
    "agent": LookupInput(semantic_address="bzzz://agent-04242@p2"),
}


def _settings(root: Path, url: str, name: str, projects: str) -> Any:
    return load_settings(
        environ={"BZZZ_NATS_URL": url, "BZZZ_NETWORK_ID": "bench", "BZZZ_PROJECTS": projects},
        overrides={"node": {"data_dir": str(root / name)}},
    )


async def _announce(node: Node, count: int) -> float:
    started = time.perf_counter()
    for first in range(0, count, 200):
        await asyncio.gather(
            *(
                node.agents.announce(
                    # Session keys: no lease runs out while the others are announced.
                    Caller(f"mcp-{n % 50}"),
                    AnnounceInput(
                        agent_id=f"agent-{n:05d}",
                        role=ROLES[n % len(ROLES)],
                        capabilities=[CAPS[n % len(CAPS)], CAPS[(n * 7) % len(CAPS)]],
                        specialization="rust services" if n % 11 == 0 else None,
                        max_tasks=1 + n % 5,
                        project="p2",
                    ),
                )
                for n in range(first, min(first + 200, count))
            )
        )
    return time.perf_counter() - started


async def _timed(node: Node, params: LookupInput, rounds: int) -> dict[str, float]:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        await node.agents.lookup(LOCAL_CALLER, params)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"p50_ms": percentile(times, 50), "p99_ms": percentile(times, 99)}


def _ranked(found: dict[str, Any]) -> list[tuple[str, float]]:
    return [(m["id"], m["score"]) for m in found["matches"]]


async def run(agents: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bzzz-dir-bench-") as tmp:
        root = Path(tmp)
        server = EmbeddedNats(root / "nats")
        await server.start()
        try:
            async with (
                Node(_settings(root, server.client_url, "star", "*")) as star,
                Node(_settings(root, server.client_url, "p1", "p1")) as p1,
            ):
                announce_s = await _announce(star, agents)
                await star.listing.writer.flush()
                kv = p1.listing.directory
                assert isinstance(kv, JetStreamDirectory)
                async with asyncio.timeout(120):
                    while len((await kv.agents("p2"))[1]) < agents:  # noqa: ASYNC110 - the view has no event
                        await asyncio.sleep(0.05)  # a bench may poll; tests may not
                figures: dict[str, Any] = {"announce_s": round(announce_s, 2)}
                for name, params in LOOKUPS.items():
                    store = await star.agents.lookup(LOCAL_CALLER, params)
                    directory = await p1.agents.lookup(LOCAL_CALLER, params)
                    assert _ranked(store) == _ranked(directory), name
                    assert store["total_matches"] == directory["total_matches"], name
                    figures[name] = {
                        "matches": store["total_matches"],
                        "store": await _timed(star, params, rounds),
                        "directory": await _timed(p1, params, rounds),
                    }
                assert isinstance(p1.bus, JetStreamBus)
                fresh = JetStreamDirectory(p1.bus.client, "bench")
                await fresh.start()
                started = time.perf_counter()
                await fresh.agents("p2")
                figures["cold_view_ms"] = round((time.perf_counter() - started) * 1000, 1)
                await fresh.close()
                # One agent changes what lookups rank: the next lookup ranks a rebuilt copy.
                rebuilds = []
                for n in range(5):
                    before = (await kv.agents("p2"))[0]
                    await star.agents.announce(
                        Caller("mcp-0"),
                        AnnounceInput(
                            agent_id="agent-00000", role="developer", project="p2", max_tasks=n + 2
                        ),
                    )
                    await star.listing.writer.flush()
                    async with asyncio.timeout(10):
                        while (await kv.agents("p2"))[0] == before:  # noqa: ASYNC110 - as above
                            await asyncio.sleep(0.01)
                    started = time.perf_counter()
                    await p1.agents.lookup(LOCAL_CALLER, LOOKUPS["project"])
                    rebuilds.append((time.perf_counter() - started) * 1000)
                figures["after_change_ms"] = round(sorted(rebuilds)[len(rebuilds) // 2], 1)
        finally:
            await server.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--json", type=Path, default=RESULTS / "directory.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    figures = asyncio.run(run(args.agents, args.rounds))
    out = {"agents": args.agents, "rounds": args.rounds, "figures": figures}
    out |= {"machine": machine(), "code": code_version()}
    sys.stdout.write(json.dumps(figures, indent=2) + "\n")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
