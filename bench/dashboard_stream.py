"""The dashboard's event stream: GET /api/v1/events on a served node, 1,000 agents, 100 posts/s.

A fresh `bzzz serve` (embedded nats-server, SQLite, loopback, no credential) in a temporary data
directory. ``--agents`` agents are announced over REST (``POST /api/v1/agents``), then
``--streams`` event streams are opened as the dashboard opens its one (``GET /api/v1/events``,
every event type), and a dispatcher agent posts tasks at ``--rate`` posts/s for ``--seconds``
seconds, open loop (a post is sent when it is due, whatever the earlier ones are doing): each a
``task_assignment`` to the next of the agents through the WHOOSH route ``POST
/agents/{id}/tasks`` (the same effect as a ``bzzz_post``), so each post is one event on every
stream. Measured: the events delivered per second to the open streams (all together and per
stream), the share of the expected events that arrived, and the delay from a post's send to its
event on a stream (p50, p99, max, over every delivery), plus the posts' own latency and the CPU
the node (with its nats-server) and this client spent.

    .venv/bin/python bench/dashboard_stream.py [--agents 1000] [--rate 100] [--seconds 20]
                                               [--streams 20] [--json [PATH]] [--profile]

Prints the figures; ``--json`` also writes them (default bench/results/dashboard_stream.json).
``--profile`` samples the node with py-spy meanwhile (bench/results/profile_dashboard_stream.*).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import profile_summary
from benchutil import CpuWindow, code_version, machine, percentile, wait_for_quiet
from mcp_throughput import HOST, ServerProcess, bzzz_command, bzzz_env

RESULTS = Path(__file__).resolve().parent / "results"
ROLES = ("developer", "reviewer", "architect", "tester")
MARK = "dashboard-bench "
MARK_BYTES = MARK.encode()
IN_FLIGHT = 16  # connections posting at once


@dataclass(slots=True)
class Stream:
    """One open event stream and what it received."""

    index: int
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    arrivals: dict[int, float] = field(default_factory=dict)  # post number -> receive time
    other_events: int = 0


@dataclass(slots=True)
class Run:
    """What the posting side saw."""

    sent: dict[int, float] = field(default_factory=dict)
    answered: dict[int, float] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)


async def announce(http: httpx.AsyncClient, count: int) -> str:
    """Announce ``count`` agents and a dispatcher; return the dispatcher's agent handle."""
    gate = asyncio.Semaphore(16)

    async def one(agent_id: str, role: str) -> str:
        async with gate:
            made = await http.post("/api/v1/agents", json={"agent_id": agent_id, "role": role})
        if made.status_code != 201:
            raise RuntimeError(f"announcing {agent_id}: {made.status_code} {made.text[:300]}")
        return str(made.json().get("agent_handle", ""))

    await asyncio.gather(*(one(f"agent-{i:04d}", ROLES[i % len(ROLES)]) for i in range(count)))
    return await one("dispatcher", "orchestrator")


class Connection:
    """One keep-alive HTTP/1.1 connection, raw: httpx's pool costs CPU per queued request, and
    on two cores the client's CPU is the node's."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        """Connect."""
        self.reader, self.writer = await asyncio.open_connection(HOST, self.port)

    async def close(self) -> None:
        """Disconnect."""
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()

    def send(self, method: str, path: str, body: bytes = b"") -> None:
        """Write one request."""
        assert self.writer is not None
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {HOST}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)

    async def head(self) -> tuple[int, dict[str, str]]:
        """The status and headers of the next answer."""
        assert self.reader is not None
        status = int((await self.reader.readline()).split()[1])
        headers: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        """One request and its whole answer (Content-Length bodies)."""
        assert self.reader is not None
        self.send(method, path, body)
        status, headers = await self.head()
        return status, await self.reader.readexactly(int(headers.get("content-length", "0")))

    async def chunks(self) -> Any:
        """The chunks of a chunked body, until it ends."""
        assert self.reader is not None
        while size := int((await self.reader.readline()).strip() or b"0", 16):
            yield await self.reader.readexactly(size)
            await self.reader.readline()


def _post_number(event: bytes) -> int | None:
    """The post a task_assignment event is about (its description carries the number)."""
    at = event.find(MARK_BYTES)
    if at < 0:
        return None
    digits = event[at + len(MARK_BYTES) : at + len(MARK_BYTES) + 12].split(b'"', 1)[0]
    return int(digits) if digits.isdigit() else None


async def read_stream(port: int, stream: Stream) -> None:
    """Read one SSE stream until cancelled, timing every event of a benchmark post."""
    conn = Connection(port)
    await conn.open()
    try:
        conn.send("GET", "/api/v1/events")
        status, _ = await conn.head()
        if status != 200:
            raise RuntimeError(f"stream {stream.index}: HTTP {status}")
        pending = b""
        async for chunk in conn.chunks():
            now = time.perf_counter()
            *events, pending = (pending + chunk).split(b"\n\n")
            for event in events:
                if b"\nevent: task_assignment\n" in event:
                    n = _post_number(event)
                    if n is not None:
                        stream.arrivals.setdefault(n, now)
                        continue
                if b"\nevent: stream_open\n" in event:
                    stream.opened.set()
                elif event.startswith(b"id: "):
                    stream.other_events += 1
    finally:
        await conn.close()


async def post_all(
    port: int, handle: str, agents: int, rate: float, seconds: float, run: Run
) -> float:
    """Post ``rate`` tasks/s for ``seconds``, open loop; return when the first one was due.

    A post's clock starts when it is due: one that waits here for a free connection (the node
    answering slower than posts come) counts that wait.
    """
    count = int(rate * seconds)
    due: asyncio.Queue[int | None] = asyncio.Queue()

    async def worker() -> None:
        conn = Connection(port)
        await conn.open()
        try:
            while (n := await due.get()) is not None:
                body = {"type": "documentation", "description": f"{MARK}{n}",
                        "agent_handle": handle}  # fmt: skip
                path = f"/agents/agent-{n % agents:04d}/tasks"
                try:
                    status, answer = await conn.request("POST", path, json.dumps(body).encode())
                except (OSError, asyncio.IncompleteReadError) as exc:
                    run.failed.append(f"{n}: {exc!r}")
                    await conn.close()
                    await conn.open()
                    continue
                if status != 201:
                    run.failed.append(f"{n}: HTTP {status} {answer[:200]!r}")
                    continue
                run.answered[n] = time.perf_counter()
        finally:
            await conn.close()

    workers = [asyncio.create_task(worker()) for _ in range(IN_FLIGHT)]
    start = time.perf_counter()
    for n in range(count):
        at = start + n / rate
        delay = at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        run.sent[n] = at
        due.put_nowait(n)
    for _ in workers:
        due.put_nowait(None)
    await asyncio.gather(*workers)
    return start


async def drain(streams: list[Stream], run: Run, within: float) -> None:
    """Wait (bounded) until every stream holds the event of every answered post."""
    deadline = time.perf_counter() + within
    wanted = set(run.answered)
    while time.perf_counter() < deadline:
        if all(wanted <= set(s.arrivals) for s in streams):
            return
        await asyncio.sleep(0.05)


def summarize(streams: list[Stream], run: Run, start: float, args: argparse.Namespace) -> dict:
    """The figures of one run."""
    delays = sorted(
        (at - run.sent[n]) * 1000 for s in streams for n, at in s.arrivals.items() if n in run.sent
    )
    posts = sorted((run.answered[n] - run.sent[n]) * 1000 for n in run.answered)
    # From the post's answer on: the stream's own part of the delay (< 0: event came first).
    after_answer = sorted(
        (at - run.answered[n]) * 1000
        for s in streams
        for n, at in s.arrivals.items()
        if n in run.answered
    )
    delivered = sum(len(s.arrivals) for s in streams)
    expected = len(run.answered) * len(streams)
    last = max((at for s in streams for at in s.arrivals.values()), default=start)
    span = max(last - start, 1e-9)
    return {
        "agents": args.agents,
        "streams": len(streams),
        "rate_offered": args.rate,
        "seconds": args.seconds,
        "posts_sent": len(run.sent),
        "posts_ok": len(run.answered),
        "posts_failed": len(run.failed),
        "post_rate_achieved": round(len(run.answered) / max(args.seconds, 1e-9), 1),
        "post_p50_ms": round(percentile(posts, 50), 2),
        "post_p99_ms": round(percentile(posts, 99), 2),
        "events_expected": expected,
        "events_delivered": delivered,
        "delivered_share": round(delivered / expected, 4) if expected else None,
        "events_per_s": round(delivered / span, 1),
        "events_per_s_per_stream": round(delivered / span / max(len(streams), 1), 1),
        "delay_p50_ms": round(percentile(delays, 50), 2),
        "delay_p99_ms": round(percentile(delays, 99), 2),
        "delay_max_ms": round(delays[-1], 2) if delays else None,
        "after_answer_p50_ms": round(percentile(after_answer, 50), 2),
        "after_answer_p99_ms": round(percentile(after_answer, 99), 2),
        "other_events": sum(s.other_events for s in streams),
        "first_failures": run.failed[:5],
    }


async def measure(server: ServerProcess, args: argparse.Namespace) -> dict[str, Any]:
    """Announce, open the streams, post, drain; the figures with CPU."""
    base = f"http://{HOST}:{server.port}"
    async with httpx.AsyncClient(base_url=base, timeout=60.0) as http:
        handle = await announce(http, args.agents)
    streams = [Stream(i) for i in range(args.streams)]
    readers = [asyncio.create_task(read_stream(server.port, s)) for s in streams]
    try:
        async with asyncio.timeout(30):
            await asyncio.gather(*(s.opened.wait() for s in streams))
        run = Run()
        RESULTS.mkdir(parents=True, exist_ok=True)
        folded = RESULTS / "profile_dashboard_stream.folded"
        with profile_summary.recording(server.proc.pid, folded, enabled=args.profile):
            window = CpuWindow([server.proc.pid, *server.extra_pids()])
            client_before = time.process_time()
            start = await post_all(server.port, handle, args.agents, args.rate, args.seconds, run)
            await drain(streams, run, args.drain)
            cpu = window.stop()
            client_cpu = time.process_time() - client_before
    finally:
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
    figures = summarize(streams, run, start, args)
    wall = args.seconds + args.drain
    figures["node_cpu_s"] = round(cpu["ours"], 2)
    figures["others_cpu_s"] = round(cpu["others"], 2)
    figures["client_cpu_s"] = round(client_cpu, 2)
    figures["window_s_max"] = wall
    return figures


def show(f: dict[str, Any]) -> None:
    """Print the figures."""
    print(
        f"{f['agents']} agents, {f['streams']} streams, {f['rate_offered']:g} posts/s offered for "
        f"{f['seconds']:g} s: {f['posts_ok']}/{f['posts_sent']} posts answered "
        f"(p50 {f['post_p50_ms']} ms, p99 {f['post_p99_ms']} ms)"
    )
    print(
        f"events delivered: {f['events_delivered']}/{f['events_expected']} "
        f"({f['delivered_share']}) = {f['events_per_s']} events/s "
        f"({f['events_per_s_per_stream']} per stream)"
    )
    print(
        f"post -> event delay: p50 {f['delay_p50_ms']} ms, p99 {f['delay_p99_ms']} ms, "
        f"max {f['delay_max_ms']} ms; from the post's answer: p50 {f['after_answer_p50_ms']} ms, "
        f"p99 {f['after_answer_p99_ms']} ms"
    )
    print(
        f"CPU: node + nats-server {f['node_cpu_s']} s, client {f['client_cpu_s']} s, "
        f"other processes {f['others_cpu_s']} s"
    )
    if f["first_failures"]:
        print("first failures:", *f["first_failures"], sep="\n  ")


def main() -> None:
    """Run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=100.0, help="posts per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--drain", type=float, default=15.0, help="seconds to wait for stragglers")
    parser.add_argument("--profile", action="store_true", help="py-spy the node meanwhile")
    parser.add_argument("--quiet-wait", type=float, default=0.0, help="wait for an idle machine")
    parser.add_argument(
        "--json", nargs="?", const=str(RESULTS / "dashboard_stream.json"), default=None
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bzzz-dash-") as tmp:
        data = Path(tmp) / "data"
        server = ServerProcess("bzzz", bzzz_command(), bzzz_env(data), Path(tmp) / "bzzz.log")
        try:
            server.wait_healthy()
            busy = wait_for_quiet(args.quiet_wait) if args.quiet_wait else None
            figures = asyncio.run(measure(server, args))
        finally:
            server.stop()
    figures["machine_busy_pct_before"] = busy
    show(figures)
    if args.json:
        report = {
            "benchmark": "dashboard_stream",
            "machine": machine(),
            "code": code_version(),
            "figures": figures,
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
