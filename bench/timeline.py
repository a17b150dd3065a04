"""A thread's timeline (GET /api/v1/threads/{id}/timeline) and the event streams' shared read.

One nats-server (the embedded default's configuration), a node on SQLite.

1. The timeline: two agents and a thread of ``--posts`` posts (every 50th a decision the other
   agrees with, every 100th a third agent joining and leaving). Figures, each the median of
   ``--reads`` reads: the live thread (bzzz_get), the thread's envelopes (what the slider read
   before), and its timeline (the envelopes read as what they did, with the store's record of
   each), and the timeline's size in entries and JSON bytes.
2. The shared read: ``--streams`` subscriptions of which one holds ``--old`` old events and the
   others none, all woken by one event: the time of the one shared query that answers them all
   (each from its own point: the first of that many streams compiles its statement), the same
   again for the next event (the statement reused), and whether every stream got each event.

    .venv/bin/python bench/timeline.py [--posts 1000] [--reads 5] [--streams 100] [--old 1000]
                                       [--json bench/results/timeline.json]
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

from sqlalchemy import func, select

from benchutil import machine
from bzzz.api.stream import _SharedReads
from bzzz.config import load_settings
from bzzz.eventlog import Caller
from bzzz.network.embedded import EmbeddedNats
from bzzz.node.core import Node
from bzzz.principal import LOCAL
from bzzz.schemas import AnnounceInput, GetInput, PostInput, SubscribeInput, ThreadInput
from bzzz.store.models import EventRow

CALLER = Caller("bench", LOCAL)


async def _say(node: Node, agent: str, thread_id: str, i: int, **extra: Any) -> str:
    posted = await node.conversations.post(
        Caller(f"s-{agent}"),
        PostInput(message_type=extra.pop("kind", "text"), content={"text": f"post {i}"},
                  thread_id=thread_id, **extra),
    )  # fmt: skip
    message_id: str = posted["message_id"]
    return message_id


async def _thread(node: Node, posts: int) -> str:
    for agent in ("arch", "dev", "qa"):
        await node.agents.announce(Caller(f"s-{agent}"), AnnounceInput(agent_id=agent, role=agent))
    made = await node.conversations.thread(
        Caller("s-arch"), ThreadInput(action="create", topic="bench", participants=["dev"])
    )
    thread_id: str = made["thread_id"]
    for i in range(posts):
        if i % 100 == 50:
            await node.conversations.thread(
                Caller("s-qa"), ThreadInput(action="join", thread_id=thread_id)
            )
        if i % 50 == 49:
            decision = await _say(node, "arch", thread_id, i, kind="decision")
            await _say(node, "dev", thread_id, i, reply_to=decision, stance="disagree")
        else:
            await _say(node, "dev" if i % 2 else "arch", thread_id, i)
        if i % 100 == 60:
            await node.conversations.thread(
                Caller("s-qa"), ThreadInput(action="leave", thread_id=thread_id)
            )
    return thread_id


async def _median_ms(reads: int, call: Callable[[], Awaitable[Any]]) -> float:
    took = []
    for _ in range(reads):
        started = time.perf_counter()
        await call()
        took.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(took), 1)


async def _timeline(node: Node, args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    thread_id = await _thread(node, args.posts)
    built = time.perf_counter() - started
    address = f"bzzz://*/threads/{thread_id}"
    live = await _median_ms(
        args.reads, lambda: node.agents.get(CALLER, GetInput(address=address, max_history=200))
    )
    envelopes = await _median_ms(
        args.reads, lambda: node.agents.thread_envelopes(CALLER, thread_id)
    )
    timeline = await _median_ms(args.reads, lambda: node.timeline.timeline(CALLER, thread_id))
    entries = await node.timeline.timeline(CALLER, thread_id)
    kinds: dict[str, int] = {}
    for entry in entries:
        kinds[entry["kind"]] = kinds.get(entry["kind"], 0) + 1
    return {
        "posts": args.posts,
        "build_seconds": round(built, 1),
        "live_thread_ms": live,
        "envelopes_ms": envelopes,
        "timeline_ms": timeline,
        "timeline_entries": len(entries),
        "timeline_json_bytes": len(json.dumps({"entries": entries})),
        "kinds": kinds,
    }


async def _shared_read(node: Node, args: argparse.Namespace) -> dict[str, Any]:
    await node.agents.announce(Caller("s-boss"), AnnounceInput(agent_id="boss", role="lead"))
    # Old tasks spread over workers of at most 1,000 tasks each; the new one goes to "new".
    workers = [f"w{k}" for k in range(args.old // 1000 + 1)]
    for worker in [*workers, "new"]:
        await node.agents.announce(
            Caller(f"s-{worker}"), AnnounceInput(agent_id=worker, role="dev", max_tasks=1000)
        )
    ahead = await node.subscriptions.subscribe(
        Caller("ahead"), SubscribeInput(event_types=["task_assignment"])
    )
    fresh = [
        (await node.subscriptions.subscribe(
            Caller(f"fresh-{n}"),
            SubscribeInput(event_types=["task_assignment"], filter_address="bzzz://new"),
        ))["subscription_id"]
        for n in range(args.streams - 1)
    ]  # fmt: skip

    async def assign(agent: str, n: int) -> None:
        await node.conversations.post(
            Caller("s-boss"),
            PostInput(target_address=f"bzzz://{agent}", message_type="task_assignment",
                      content={"type": "documentation", "description": f"t{n}"}),
        )  # fmt: skip

    for n in range(args.old):
        await assign(workers[n // 1000], n)
    async with node.db.session() as session:
        seen = int(
            await session.scalar(
                select(func.max(EventRow.id)).where(
                    EventRow.subscription_id == ahead["subscription_id"]
                )
            )
            or 0
        )
    await assign("new", args.old)
    reads = _SharedReads(node.db)
    started = time.perf_counter()
    got = await asyncio.gather(
        reads.after(ahead["subscription_id"], seen), *(reads.after(s, 0) for s in fresh)
    )
    took = (time.perf_counter() - started) * 1000
    # Again, one more event each, from where each stream now is: the statement of this many
    # streams is compiled once, then reused (SQLAlchemy's cache).
    points = [rows[-1][0] if rows else 0 for rows, _ in got]
    await assign("new", args.old + 1)
    started = time.perf_counter()
    again = await asyncio.gather(
        *(
            reads.after(s, p)
            for s, p in zip([ahead["subscription_id"], *fresh], points, strict=True)
        )
    )
    took_again = (time.perf_counter() - started) * 1000
    return {
        "streams": args.streams,
        "old_events_of_one": args.old,
        "shared_read_ms": round(took, 1),
        "shared_read_again_ms": round(took_again, 1),
        "streams_with_their_event": sum(1 for rows, _ in got if len(rows) == 1),
        "streams_with_the_next": sum(1 for rows, _ in again if len(rows) == 1),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Build the thread and the subscriptions, then time the reads."""
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
                    "limits": {"as_of_reads_per_minute": 0, "agent_messages_per_second": 0,
                               "node_messages_per_second": 0},
                },
            )  # fmt: skip
            async with Node(settings) as node:
                timeline = await _timeline(node, args)
                shared = await _shared_read(node, args)
        finally:
            await server.close()
    return {"machine": machine(), "reads": args.reads, "timeline": timeline, "shared": shared}


def main() -> None:
    """Run the benchmark, print its figures, write them as JSON when asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=1000)
    parser.add_argument("--reads", type=int, default=5)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--old", type=int, default=1000)
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
