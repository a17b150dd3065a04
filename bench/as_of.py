"""A thread read ``as_of`` a past point against the same thread read live, side by side.

One nats-server (the embedded default's configuration), a node on SQLite: two agents, a thread
of ``--posts`` posts. Figures, each the median of ``--reads`` reads: the live read (bzzz_get of
the thread), an as_of read from nothing (no checkpoint: what the first read of a point costs),
an as_of read that starts from a checkpoint (a point near the end, and one halfway, each read
once before), and four concurrent as_of loops of one principal (how many succeed). The
checkpoints' bytes held are reported too.

    .venv/bin/python bench/as_of.py [--posts 1000] [--reads 5] [--json bench/results/as_of.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchutil import machine
from bzzz.config import load_settings
from bzzz.conversations.replay import Checkpoints, ThreadLog
from bzzz.eventlog import Caller
from bzzz.network.embedded import EmbeddedNats
from bzzz.node.core import Node
from bzzz.principal import LOCAL
from bzzz.schemas import AnnounceInput, GetInput, PostInput, ThreadInput

CALLER = Caller("bench", LOCAL)


async def _thread(node: Node, posts: int) -> str:
    for agent in ("arch", "dev"):
        await node.agents.announce(Caller(f"s-{agent}"), AnnounceInput(agent_id=agent, role=agent))
    made = await node.conversations.thread(
        Caller("s-arch"), ThreadInput(action="create", topic="bench", participants=["dev"])
    )
    thread_id: str = made["thread_id"]
    for i in range(posts):
        await node.conversations.post(
            Caller("s-dev" if i % 2 else "s-arch"),
            PostInput(message_type="text", content={"text": f"post {i}"}, thread_id=thread_id),
        )
    return thread_id


async def _median_ms(reads: int, call: Callable[[], Awaitable[Any]]) -> float:
    took = []
    for _ in range(reads):
        started = time.perf_counter()
        await call()
        took.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(took), 1)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Build the thread, then time the reads."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server = EmbeddedNats(root / "nats")
        await server.start()
        try:
            settings = load_settings(
                environ={},
                overrides={
                    "node": {"data_dir": str(root / "node")},
                    "bzzz": {"nats_url": [server.client_url]},
                    "limits": {"as_of_reads_per_minute": 0},
                },
            )
            async with Node(settings) as node:
                return await _measure(node, args)
        finally:
            await server.close()


async def _measure(node: Node, args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    thread_id = await _thread(node, args.posts)
    built = time.perf_counter() - started
    log = node.agents.history
    assert isinstance(log, ThreadLog)
    last = await node.bus.last_sequence()
    address = f"bzzz://*/threads/{thread_id}"

    async def get(as_of: int | None) -> Any:
        return await node.agents.get(CALLER, GetInput(address=address, as_of=as_of))

    async def cold(as_of: int) -> Any:
        log.checkpoints = Checkpoints(node.keyring)
        return await get(as_of)

    live = await _median_ms(args.reads, lambda: get(None))
    from_nothing = await _median_ms(args.reads, lambda: cold(last - 1))
    log.checkpoints = Checkpoints(node.keyring)
    await get(last)  # keeps the checkpoints up to the end
    near_end = await _median_ms(args.reads, lambda: get(last - 1))
    halfway = last // 2
    await get(halfway)
    at_half = await _median_ms(args.reads, lambda: get(halfway - 3))

    async def loop(offset: int) -> list[bool]:
        done = []
        for k in range(args.reads):
            try:
                await get(last - 10 * k - offset)
                done.append(True)
            except Exception:  # a failed read is what is counted
                done.append(False)
        return done

    loops = await asyncio.gather(*(loop(i) for i in range(4)))
    return {
        "machine": machine(),
        "posts": args.posts,
        "reads": args.reads,
        "build_seconds": round(built, 1),
        "live_ms": live,
        "as_of_from_nothing_ms": from_nothing,
        "as_of_from_checkpoint_near_end_ms": near_end,
        "as_of_from_checkpoint_halfway_ms": at_half,
        "checkpoint_bytes_held": log.checkpoints.held,
        "concurrent_loops": {"reads": sum(len(x) for x in loops), "ok": sum(map(sum, loops))},
    }


def main() -> None:
    """Run the benchmark, print its figures, write them as JSON when asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=1000)
    parser.add_argument("--reads", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    result = asyncio.run(run(args))
    text = json.dumps(result, indent=2)
    print(text)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
