"""The dashboard's event stream: 1,000 agents, 100 posts/s, 20 open streams.

In-process: a real ``bzzz.node.Node`` (the embedded nats-server with JetStream and SQLite in a
temporary data directory, as ``bzzz serve`` runs by default; ``--memory`` for the in-memory bus)
served by uvicorn on a loopback port, as ``bzzz serve`` serves it. 1,000 agents are announced;
20 clients open ``GET /api/v1/events?types=task_assignment`` (httpx, streaming, each its own
``X-Bzzz-Session``, as 20 dashboards would); then ``task_assignment`` posts go out at a fixed
rate (``ConversationService.post``, paced on the clock, each one its own task so a slow post does
not hold back the next) to the agents in turn. Each post makes one event, which every stream
must deliver. It measures:

- posts per second achieved, and events per second delivered over all 20 streams (deliveries
  from the first post to the last delivery);
- the delay from a post's start to each stream's receipt of its event, p50/p99/max;
- deliveries missing when the streams went quiet.

    .venv/bin/python bench/event_stream.py [--agents 1000] [--rate 100] [--seconds 10]
        [--streams 20] [--memory] [--json PATH]

Prints the figures and writes bench/results/event_stream.json (or --json PATH).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from benchutil import code_version, machine, percentile
from bzzz.api.app import build_app
from bzzz.config import load_settings
from bzzz.eventlog import Caller
from bzzz.mcp.server import build_server
from bzzz.network.memory import InMemoryBus
from bzzz.node import Node
from bzzz.schemas import AnnounceInput, PostInput

RESULTS = Path(__file__).resolve().parent / "results"
QUIET_SECONDS = 10.0


class Receipts:
    """When each stream received each post's event."""

    def __init__(self) -> None:
        self.sent: dict[str, float] = {}
        self.post_seconds: list[float] = []
        self.log: list[tuple[str, float]] = []
        self.last = 0.0
        self.changed = asyncio.Event()

    @property
    def received(self) -> int:
        return len(self.log)

    def got(self, message_id: str) -> None:
        self.last = time.perf_counter()
        self.log.append((message_id, self.last))
        self.changed.set()

    def delays(self) -> list[float]:
        """Receipt minus post start of each delivery, ascending."""
        return sorted(at - self.sent[m] for m, at in self.log if m in self.sent)


async def _stream(client: httpx.AsyncClient, n: int, receipts: Receipts, ready: Any) -> None:
    headers = {"X-Bzzz-Session": f"dashboard-{n}", "Accept": "text/event-stream"}
    params = {"types": "task_assignment"}
    async with client.stream("GET", "/api/v1/events", params=params, headers=headers) as answer:
        answer.raise_for_status()
        async for line in answer.aiter_lines():
            if line.startswith("event: stream_open"):
                ready.release()
            elif line.startswith("data: ") and '"message_id"' in line:
                data = json.loads(line[6:])
                receipts.got(data["data"]["message_id"])


async def _post(node: Node, boss: Caller, target: str, receipts: Receipts, n: int) -> None:
    started = time.perf_counter()
    params = PostInput(
        target_address=f"bzzz://{target}",
        message_type="task_assignment",
        content={"type": "code_review", "description": f"review {n}"},
    )
    # The event may reach a stream before post() returns: delays are computed at the end.
    result = await node.conversations.post(boss, params)
    receipts.sent[result["message_id"]] = started
    receipts.post_seconds.append(time.perf_counter() - started)


def _serve(node: Node) -> tuple[uvicorn.Server, socket.socket, str]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(256)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    server, _ = build_server(node)
    app = build_app(node, server, "127.0.0.1", url)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    return uvicorn.Server(config), listener, url


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Announce, open the streams, post at the rate, wait for the streams to go quiet."""
    with tempfile.TemporaryDirectory() as data_dir:
        settings = load_settings(environ={}, overrides={"node": {"data_dir": data_dir}})
        bus = InMemoryBus() if args.memory else None
        async with Node(settings, bus=bus) as node:
            boss = Caller("bench-boss")
            await node.agents.announce(boss, AnnounceInput(agent_id="boss", role="manager"))
            owner = Caller("bench-agents")
            for i in range(args.agents):
                announce = AnnounceInput(agent_id=f"agent-{i}", role="developer", max_tasks=1000)
                await node.agents.announce(owner, announce)
            web, listener, url = _serve(node)
            serving = asyncio.create_task(web.serve(sockets=[listener]))
            try:
                return await _measure(node, boss, url, args)
            finally:
                web.should_exit = True
                with contextlib.suppress(asyncio.CancelledError):
                    await serving
                listener.close()


async def _measure(node: Node, boss: Caller, url: str, args: argparse.Namespace) -> dict[str, Any]:
    receipts = Receipts()
    ready = asyncio.Semaphore(0)
    limits = httpx.Limits(max_connections=args.streams + 4)
    async with httpx.AsyncClient(base_url=url, timeout=None, limits=limits) as client:
        streams = [
            asyncio.create_task(_stream(client, n, receipts, ready)) for n in range(args.streams)
        ]
        async with asyncio.timeout(30):
            for _ in range(args.streams):
                await ready.acquire()
        total = int(args.rate * args.seconds)
        posts: list[asyncio.Task[None]] = []
        start = time.perf_counter()
        for n in range(total):
            due = start + n / args.rate
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            target = f"agent-{n % args.agents}"
            posts.append(asyncio.create_task(_post(node, boss, target, receipts, n)))
        await asyncio.gather(*posts)
        posted = time.perf_counter()
        expected = total * args.streams
        with contextlib.suppress(TimeoutError):
            while receipts.received < expected:
                receipts.changed.clear()
                async with asyncio.timeout(QUIET_SECONDS):
                    await receipts.changed.wait()
        for stream in streams:
            stream.cancel()
        await asyncio.gather(*streams, return_exceptions=True)
    delays = receipts.delays()
    post_times = sorted(receipts.post_seconds)
    span = max(receipts.last, posted) - start
    return {
        "agents": args.agents,
        "streams": args.streams,
        "offered_posts_per_second": args.rate,
        "posts": total,
        "posts_per_second": round(total / (posted - start), 1),
        "deliveries": receipts.received,
        "missing": expected - receipts.received,
        "events_per_second_all_streams": round(receipts.received / span, 1),
        "events_per_second_per_stream": round(receipts.received / span / args.streams, 1),
        "delay_p50_ms": round(percentile(delays, 50) * 1000, 2),
        "delay_p99_ms": round(percentile(delays, 99) * 1000, 2),
        "delay_max_ms": round(delays[-1] * 1000, 2) if delays else None,
        "post_p50_ms": round(percentile(post_times, 50) * 1000, 2),
        "post_p99_ms": round(percentile(post_times, 99) * 1000, 2),
    }


def main() -> int:
    """Run and report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=100.0, help="posts per second")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--memory", action="store_true", help="the in-memory bus, not JetStream")
    parser.add_argument("--json", type=Path, default=RESULTS / "event_stream.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    figures = asyncio.run(run(args))
    report = {
        "benchmark": "event_stream",
        "bus": "memory" if args.memory else "jetstream (embedded)",
        "code": code_version(),
        "machine": machine(),
        "figures": figures,
    }
    for key, value in figures.items():
        sys.stdout.write(f"{key:32} {value}\n")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
