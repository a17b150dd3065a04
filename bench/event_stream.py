"""The dashboard's event stream: 1,000 agents, 100 posts/s, 20 open streams.

In-process: a real ``bzzz.node.Node`` (the embedded nats-server with JetStream and SQLite in a
temporary data directory, as ``bzzz serve`` runs by default; ``--memory`` for the in-memory bus)
served by uvicorn on a loopback port, as ``bzzz serve`` serves it. 1,000 agents are announced;
20 clients open ``GET /api/v1/events?types=task_assignment`` (httpx, streaming, each its own
``X-Bzzz-Session``, as 20 dashboards would) in a child process, so their parsing does not run on
the node's event loop; then ``task_assignment`` posts go out at a fixed
rate (``ConversationService.post``, paced on the clock, each one its own task so a slow post does
not hold back the next) to the agents in turn. Each post makes one event, which every stream
must deliver. It measures:

- posts per second achieved, and events per second delivered over all 20 streams (deliveries
  from the first post to the last delivery);
- the delay from a post's start to each stream's receipt of its event, p50/p99/max;
- deliveries missing when the streams went quiet.

``--unread N`` adds N subscriptions of the same type that no stream reads (their events are
stored all the same): with ``--streams 1 --unread 19`` the writes of 20 subscriptions happen
without the reads of 20 streams, which tells the two costs apart.

    .venv/bin/python bench/event_stream.py [--agents 1000] [--rate 100] [--seconds 10]
        [--streams 20] [--unread 0] [--memory] [--json PATH]

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
from bzzz.schemas import AnnounceInput, PostInput, SubscribeInput

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

    def got(self, message_id: str, at: float) -> None:
        self.last = max(self.last, at)
        self.log.append((message_id, at))
        self.changed.set()

    def delays(self) -> list[float]:
        """Receipt minus post start of each delivery, ascending."""
        return sorted(at - self.sent[m] for m, at in self.log if m in self.sent)


async def _stream(client: httpx.AsyncClient, n: int, out: asyncio.Queue[str]) -> None:
    headers = {"X-Bzzz-Session": f"dashboard-{n}", "Accept": "text/event-stream"}
    params = {"types": "task_assignment"}
    async with client.stream("GET", "/api/v1/events", params=params, headers=headers) as answer:
        answer.raise_for_status()
        async for line in answer.aiter_lines():
            if line.startswith("event: stream_open"):
                out.put_nowait("ready")
            elif line.startswith("data: ") and '"message_id"' in line:
                data = json.loads(line[6:])
                out.put_nowait(f"{data['data']['message_id']} {time.monotonic()!r}")


async def read_streams(url: str, streams: int) -> None:
    """The child process: open the streams, print 'ready', then '<message id> <monotonic>'
    for each event received, until killed."""
    out: asyncio.Queue[str] = asyncio.Queue()
    limits = httpx.Limits(max_connections=streams + 4)
    async with httpx.AsyncClient(base_url=url, timeout=None, limits=limits) as client:
        tasks = [asyncio.create_task(_stream(client, n, out)) for n in range(streams)]
        opened = 0
        while True:
            line = await out.get()
            if line == "ready":
                opened += 1
                if opened < streams:
                    continue
            sys.stdout.write(line + "\n")
            if out.empty():
                sys.stdout.flush()
        await asyncio.gather(*tasks)


async def _post(node: Node, boss: Caller, target: str, receipts: Receipts, n: int) -> None:
    started = time.monotonic()
    params = PostInput(
        target_address=f"bzzz://{target}",
        message_type="task_assignment",
        content={"type": "code_review", "description": f"review {n}"},
    )
    # The event may reach a stream before post() returns: delays are computed at the end.
    result = await node.conversations.post(boss, params)
    receipts.sent[result["message_id"]] = started
    receipts.post_seconds.append(time.monotonic() - started)


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


async def _readers(url: str, streams: int) -> asyncio.subprocess.Process:
    """Start the child that reads the streams; return once every stream is open."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--reader", url, "--streams", str(streams),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert child.stdout is not None
    async with asyncio.timeout(60):
        assert (await child.stdout.readline()).strip() == b"ready"
    return child


async def _collect(child: asyncio.subprocess.Process, receipts: Receipts) -> None:
    assert child.stdout is not None
    async for line in child.stdout:
        message_id, at = line.decode().split()
        receipts.got(message_id, float(at))


async def _measure(node: Node, boss: Caller, url: str, args: argparse.Namespace) -> dict[str, Any]:
    receipts = Receipts()
    for n in range(args.unread):
        # Subscriptions no stream reads: their events are fanned out and stored all the same.
        params = SubscribeInput(event_types=["task_assignment"])
        await node.subscriptions.subscribe(Caller(f"unread-{n}"), params)
    child = await _readers(url, args.streams)
    collecting = asyncio.create_task(_collect(child, receipts))
    try:
        total = int(args.rate * args.seconds)
        posts: list[asyncio.Task[None]] = []
        start = time.monotonic()
        for n in range(total):
            due = start + n / args.rate
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            target = f"agent-{n % args.agents}"
            posts.append(asyncio.create_task(_post(node, boss, target, receipts, n)))
        await asyncio.gather(*posts)
        posted = time.monotonic()
        expected = total * args.streams
        with contextlib.suppress(TimeoutError):
            while receipts.received < expected:
                receipts.changed.clear()
                async with asyncio.timeout(QUIET_SECONDS):
                    await receipts.changed.wait()
    finally:
        child.kill()
        await child.wait()
        collecting.cancel()
        await asyncio.gather(collecting, return_exceptions=True)
    delays = receipts.delays()
    post_times = sorted(receipts.post_seconds)
    span = max(receipts.last, posted) - start
    return {
        "agents": args.agents,
        "streams": args.streams,
        "unread_subscriptions": args.unread,
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
    parser.add_argument(
        "--unread", type=int, default=0, help="extra subscriptions that no stream reads"
    )
    parser.add_argument("--memory", action="store_true", help="the in-memory bus, not JetStream")
    parser.add_argument("--json", type=Path, default=RESULTS / "event_stream.json")
    parser.add_argument("--reader", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if args.reader:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(read_streams(args.reader, args.streams))
        return 0
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
