"""MCP throughput: bzzz_post and bzzz_lookup on `bzzz serve` vs a no-op tool on a bare MCPServer.

One run spawns both servers (a fresh `bzzz serve` with its embedded nats-server and SQLite in a
temporary data directory, and bench/noop_server.py), each on a free loopback port. The no-op
server takes bzzz's transport options: the run asks bzzz how it answers a POST (plain JSON or
SSE) and starts the no-op server the same way (``--other-transport`` adds one on the other,
for comparison). The clients
are the official MCP client (``streamable_http_client`` + ``ClientSession``, legacy initialize
handshake), one session per client. For every tool it measures 1 client, 8 clients as asyncio
tasks in this process, and 8 clients as 8 processes: calls/s, p50, p99 and mean latency over
``--calls`` calls after a warm-up, plus the CPU the server (and the clients) spent meanwhile.
Each configuration runs in ``--rounds`` rounds that alternate the servers (bzzz's tools and the
no-op), so that the machine's drift in speed hits them alike; the ratio to the no-op rate is
over all rounds, and its spread over the rounds is printed beside it.

    .venv/bin/python bench/mcp_throughput.py [--calls 2000] [--rounds 5] [--profile]

It also times the floor under every post: a raw nats-py publish to bzzz's own embedded
nats-server (``sync_interval: always``), acknowledged, and until its own consumer receives it.

Prints a table and writes bench/results/mcp_throughput.json. ``--profile`` also samples the
server processes with py-spy during the measured phases (figures from such a run are slower;
the collapsed stacks and their summaries land in bench/results/profile_*.folded / .txt).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

import profile_summary
from benchutil import (
    CpuWindow,
    code_version,
    cpu_seconds,
    descendants,
    machine,
    percentile,
    wait_for_quiet,
)

SCRIPT = Path(__file__).resolve()
BENCH = SCRIPT.parent
RESULTS = BENCH / "results"
HOST = "127.0.0.1"
POPULATION = 50  # agents announced before the lookups, half of them reviewers
LOOKUP_ADDRESS = "bzzz://*:reviewer@*"
OTHER_ROLES = ("developer", "architect", "tester")
CAPABILITIES = ("python", "go", "rust", "security", "testing", "docs", "sql", "frontend")


# --- what is measured --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Workload:
    """One tool on one server, and the arguments of each call."""

    server: str  # "bzzz", "noop" (bzzz's transport) or "noop-other" (the other transport)
    tool: str
    announce: bool  # bzzz clients announce their own agent first

    def arguments(self, client: int, call: int) -> dict[str, Any]:
        """The arguments of one call (a post goes to a peer agent of the population)."""
        if self.tool == "noop":
            return {"text": "benchmark ping"}
        if self.tool == "bzzz_lookup":
            return {"semantic_address": LOOKUP_ADDRESS}
        peer = f"pop-{(client * 7 + call) % POPULATION:03d}"
        return {
            "target_address": f"bzzz://{peer}",
            "message_type": "text",
            "content": {"text": "benchmark ping"},
        }


WORKLOADS = (
    Workload("noop", "noop", announce=False),
    Workload("noop-other", "noop", announce=False),  # only with --other-transport
    Workload("bzzz", "bzzz_lookup", announce=True),
    Workload("bzzz", "bzzz_post", announce=True),
)


@dataclass(slots=True)
class ClientRun:
    """What one client measured."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str | None = None
    started: float = 0.0
    ended: float = 0.0
    cpu_seconds: float = 0.0


@dataclass(slots=True)
class Figures:
    """One configuration's figures."""

    server: str
    tool: str
    clients: int
    mode: str  # "tasks" (asyncio tasks, one process) or "processes"
    calls: int
    errors: int
    seconds: float
    calls_per_s: float
    p50_ms: float
    p99_ms: float
    mean_ms: float
    server_cpu_pct: float
    server_cpu_ms_per_call: float
    nats_cpu_pct: float | None
    client_cpu_pct: float
    others_cpu_pct: float
    busy_before_pct: float = 0.0
    first_error: str | None = None
    round_rates: list[float] = field(default_factory=list)


# --- processes ---------------------------------------------------------------------------------


def free_port() -> int:
    """A free loopback TCP port."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """A spawned server, healthy once /healthz answers 200; stopped with SIGTERM."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.name = name
        self.port = free_port()
        self.log = log
        self._log_handle = log.open("wb")
        self.proc = subprocess.Popen(
            [*argv, "--port", str(self.port)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log_handle,
            stderr=subprocess.STDOUT,
        )

    @property
    def url(self) -> str:
        """The MCP endpoint."""
        return f"http://{HOST}:{self.port}/mcp"

    def wait_healthy(self, within: float = 60.0) -> None:
        """Poll /healthz until 200, or raise (with the log's tail) when it exits or times out."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://{HOST}:{self.port}/healthz", timeout=1).status_code == 200:
                    return
            time.sleep(0.1)
        tail = self.log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{self.name} did not become healthy:\n{tail}")

    def extra_pids(self) -> list[int]:
        """The server's child processes (bzzz: the embedded nats-server)."""
        return descendants(self.proc.pid)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._log_handle.close()


def bzzz_command() -> list[str]:
    """`bzzz serve` from this interpreter's environment."""
    script = Path(sys.executable).parent / "bzzz"
    if script.exists():
        return [str(script), "serve"]
    return [sys.executable, "-m", "bzzz.cli", "serve"]


def bzzz_env(data_dir: Path) -> dict[str, str]:
    """A clean environment: fresh data directory, embedded NATS, SQLite, defaults."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BZZZ_")}
    env["BZZZ_DATA_DIR"] = str(data_dir)
    return env


# --- clients -----------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def mcp_session(url: str) -> AsyncIterator[ClientSession]:
    """An initialized MCP session over streamable HTTP (legacy handshake)."""
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> str | None:
    """One tool call; the error text when it failed."""
    result = await session.call_tool(tool, arguments)
    if getattr(result, "is_error", False):
        content = getattr(result, "content", None) or []
        return str(getattr(content[0], "text", content[0]))[:300] if content else "error"
    return None


async def announce_own(session: ClientSession, agent_id: str) -> None:
    """Announce the client's own agent (bzzz_post sends as it)."""
    error = await call(session, "bzzz_announce", {"agent_id": agent_id, "role": "client"})
    if error:
        raise RuntimeError(f"announce of {agent_id} failed: {error}")


async def measure(
    session: ClientSession, workload: Workload, client: int, calls: int, deadline: float
) -> ClientRun:
    """``calls`` calls one after another (stopping at ``deadline``), each timed."""
    run = ClientRun(started=time.monotonic())
    cpu0 = time.process_time()
    for n in range(calls):
        if time.monotonic() > deadline:
            break
        t0 = time.perf_counter()
        error = await call(session, workload.tool, workload.arguments(client, n))
        run.latencies_ms.append((time.perf_counter() - t0) * 1000)
        if error:
            run.errors += 1
            run.first_error = run.first_error or error
    run.ended = time.monotonic()
    run.cpu_seconds = time.process_time() - cpu0
    return run


async def warm_up(session: ClientSession, workload: Workload, client: int, calls: int) -> None:
    """Calls that are not counted (connection, caches, the client's tools/list)."""
    for n in range(calls):
        error = await call(session, workload.tool, workload.arguments(client, n))
        if error:
            raise RuntimeError(f"{workload.tool} fails: {error}")


@dataclass(frozen=True, slots=True)
class Plan:
    """How many calls, warm-up calls, seconds and rounds one configuration gets."""

    calls: int
    warmup: int
    max_seconds: float
    rounds: int = 1

    def share(self, clients: int) -> tuple[int, int]:
        """(measured calls, warm-up calls) per client and round."""
        calls, warmup = -(-self.calls // self.rounds), -(-self.warmup // self.rounds)
        return -(-calls // clients), max(5, warmup // clients)


class Meter:
    """CPU over the measured phase: the server, its nats-server, the clients, everything else."""

    def __init__(self, server: ServerProcess) -> None:
        self.server_pid = server.proc.pid
        self.nats_pids = server.extra_pids()
        self.cpu: dict[str, float] = {}

    def start(self) -> None:
        """The measured phase begins."""
        self._server0 = cpu_seconds([self.server_pid])
        self._nats0 = cpu_seconds(self.nats_pids)
        self._window = CpuWindow([self.server_pid, *self.nats_pids, os.getpid()])
        self._client0 = time.process_time()

    def stop(self, worker_cpu: float | None = None) -> None:
        """It ends; ``worker_cpu``: the client processes' CPU (None: clients are this process)."""
        own = time.process_time() - self._client0
        window = self._window.stop(extra_ours=worker_cpu or 0.0)
        self.cpu = {
            "server": cpu_seconds([self.server_pid]) - self._server0,
            "nats": cpu_seconds(self.nats_pids) - self._nats0,
            "clients": own if worker_cpu is None else worker_cpu,
            "others": window["others"],
        }


async def run_tasks(
    url: str, workload: Workload, clients: int, plan: Plan, tag: str, meter: Meter
) -> list[ClientRun]:
    """``clients`` sessions in this process, as asyncio tasks, started together after warm-up."""
    per_client, warm = plan.share(clients)
    async with contextlib.AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(mcp_session(url)) for _ in range(clients)]
        if workload.announce:
            for i, session in enumerate(sessions):
                await announce_own(session, f"bench-{tag}-{i}")
        async with asyncio.TaskGroup() as tg:
            for i, session in enumerate(sessions):
                tg.create_task(warm_up(session, workload, i, warm))
        deadline = time.monotonic() + plan.max_seconds / plan.rounds
        meter.start()
        async with asyncio.TaskGroup() as tg:
            tasks = [
                tg.create_task(measure(session, workload, i, per_client, deadline))
                for i, session in enumerate(sessions)
            ]
        meter.stop()
        return [task.result() for task in tasks]


# --- clients as processes ----------------------------------------------------------------------


async def worker(spec: dict[str, Any]) -> None:
    """One client process: warm up, say 'ready', wait for 'go', measure, print the run as JSON."""
    workload = Workload(**spec["workload"])
    async with mcp_session(spec["url"]) as session:
        if workload.announce:
            await announce_own(session, spec["agent_id"])
        await warm_up(session, workload, spec["client"], spec["warmup"])
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        await asyncio.to_thread(sys.stdin.readline)
        run = await measure(
            session, workload, spec["client"], spec["calls"], time.monotonic() + spec["max_s"]
        )
    sys.stdout.write(json.dumps(asdict(run)) + "\n")
    sys.stdout.flush()


async def _read_line(proc: asyncio.subprocess.Process, within: float) -> bytes:
    assert proc.stdout is not None
    async with asyncio.timeout(within):
        line = await proc.stdout.readline()
    if not line:
        raise RuntimeError("a client process ended early (see its stderr above)")
    return line


async def run_processes(
    url: str, workload: Workload, clients: int, plan: Plan, tag: str, meter: Meter
) -> list[ClientRun]:
    """``clients`` client processes, released together once all have warmed up."""
    per_client, warm = plan.share(clients)
    procs = []
    for i in range(clients):
        spec = {
            "url": url,
            "workload": asdict(workload),
            "client": i,
            "agent_id": f"bench-{tag}-{i}",
            "warmup": warm,
            "calls": per_client,
            "max_s": plan.max_seconds / plan.rounds,
        }
        procs.append(
            await asyncio.create_subprocess_exec(
                sys.executable,
                str(SCRIPT),
                "--worker",
                json.dumps(spec),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
        )
    try:
        for proc in procs:
            await _read_line(proc, 120)
        meter.start()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            await proc.stdin.drain()
        lines = [await _read_line(proc, plan.max_seconds + 60) for proc in procs]
        runs = [ClientRun(**json.loads(line)) for line in lines]
        meter.stop(worker_cpu=sum(run.cpu_seconds for run in runs))
        return runs
    finally:
        for proc in procs:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(10):
                    await proc.wait()


# --- one configuration -------------------------------------------------------------------------


@dataclass(slots=True)
class Servers:
    """The servers of the run by name, and how to measure."""

    processes: dict[str, ServerProcess]
    profile: bool = False
    quiet_wait: float = 0.0

    def of(self, workload: Workload) -> ServerProcess:
        """The server a workload talks to."""
        return self.processes[workload.server]

    @property
    def workloads(self) -> list[Workload]:
        """The workloads whose server runs."""
        return [w for w in WORKLOADS if w.server in self.processes]


@dataclass(slots=True)
class Round:
    """One round of a configuration: the clients' runs and the CPU over the same window."""

    runs: list[ClientRun]
    cpu: dict[str, float]
    busy_before_pct: float = 0.0

    @property
    def seconds(self) -> float:
        """From the first client's start to the last one's end."""
        return max(run.ended for run in self.runs) - min(run.started for run in self.runs)

    @property
    def calls(self) -> int:
        """Calls measured."""
        return sum(len(run.latencies_ms) for run in self.runs)


def summarize(workload: Workload, clients: int, mode: str, rounds: list[Round]) -> Figures:
    """Merge a configuration's rounds into its figures (time and CPU summed over rounds)."""
    runs = [run for r in rounds for run in r.runs]
    latencies = sorted(lat for run in runs for lat in run.latencies_ms)
    seconds = sum(r.seconds for r in rounds)
    cpu = {key: sum(r.cpu[key] for r in rounds) for key in rounds[0].cpu}
    errors = sum(run.errors for run in runs)
    calls = len(latencies)
    return Figures(
        server=workload.server,
        tool=workload.tool,
        clients=clients,
        mode=mode,
        calls=calls,
        errors=errors,
        seconds=round(seconds, 3),
        calls_per_s=round(calls / seconds, 1) if seconds > 0 else 0.0,
        p50_ms=round(percentile(latencies, 50), 3),
        p99_ms=round(percentile(latencies, 99), 3),
        mean_ms=round(sum(latencies) / calls, 3) if calls else float("nan"),
        server_cpu_pct=round(100 * cpu["server"] / seconds, 1),
        server_cpu_ms_per_call=round(1000 * cpu["server"] / max(calls, 1), 3),
        nats_cpu_pct=round(100 * cpu["nats"] / seconds, 1) if workload.server == "bzzz" else None,
        client_cpu_pct=round(100 * cpu["clients"] / seconds, 1),
        others_cpu_pct=round(100 * cpu["others"] / seconds, 1),
        busy_before_pct=max(r.busy_before_pct for r in rounds),
        first_error=next((run.first_error for run in runs if run.first_error), None),
        round_rates=[round(r.calls / r.seconds, 1) if r.seconds > 0 else 0.0 for r in rounds],
    )


async def run_round(
    servers: Servers, workload: Workload, clients: int, mode: str, plan: Plan, first: bool
) -> Round:
    """One round of (workload, clients, mode), with the server's CPU over the same window.

    The first round of a configuration waits for a quiet machine and is the one profiled.
    """
    server = servers.of(workload)
    tag = f"{mode[0]}{clients}-{workload.tool}-{int(time.time() * 1000) % 100000}"
    runner = run_tasks if mode == "tasks" else run_processes
    meter = Meter(server)
    quiet = servers.quiet_wait if first else 0.0
    busy = await asyncio.to_thread(wait_for_quiet, quiet) if quiet else 0.0
    label = workload.server if workload.tool == "noop" else workload.tool
    name = f"{label}_{clients}{mode[0]}"
    profile = servers.profile and first
    with contextlib.ExitStack() as spies:
        out = RESULTS / f"profile_{name}.folded"
        spies.enter_context(profile_summary.recording(server.proc.pid, out, enabled=profile))
        if mode == "tasks":  # the clients are this process: profile them too
            out = RESULTS / f"profile_client_{name}.folded"
            spies.enter_context(profile_summary.recording(os.getpid(), out, enabled=profile))
        runs = await runner(server.url, workload, clients, plan, tag, meter)
    return Round(runs, meter.cpu, busy)


# --- population and the whole run --------------------------------------------------------------


async def populate(session: ClientSession) -> None:
    """Announce the population from one session (kept open: its agents stay online)."""
    for k in range(POPULATION):
        role = "reviewer" if k % 2 == 0 else OTHER_ROLES[k // 2 % len(OTHER_ROLES)]
        args: dict[str, Any] = {
            "agent_id": f"pop-{k:03d}",
            "role": role,
            "capabilities": [CAPABILITIES[(k + j) % len(CAPABILITIES)] for j in range(3)],
            "specialization": f"{CAPABILITIES[k % len(CAPABILITIES)]} reviews",
            "max_tasks": 5,
        }
        if k % 3:
            args["project"] = f"project-{k % 4}"
        error = await call(session, "bzzz_announce", args)
        if error:
            raise RuntimeError(f"populating failed: {error}")


def configurations(modes: list[str]) -> list[tuple[int, str]]:
    """(clients, mode) pairs in run order."""
    result = [(1, "tasks")]
    result += [(8, mode) for mode in ("tasks", "processes") if mode in modes]
    return result


async def run_all(
    servers: Servers, plan: Plan, modes: list[str], tools: set[str] | None = None
) -> list[Figures]:
    """Every configuration, in rounds that alternate the servers so drift hits all alike.

    This VM's speed drifts by 10-20% over tens of seconds; a configuration measured in one go
    a minute after its no-op baseline can land on either side of a target by drift alone.
    """
    figures = []
    workloads = [w for w in servers.workloads if tools is None or w.tool in tools]
    async with mcp_session(servers.processes["bzzz"].url) as population:
        await populate(population)
        for clients, mode in configurations(modes):
            rounds: dict[Workload, list[Round]] = {w: [] for w in workloads}
            for n in range(plan.rounds):
                for workload in workloads:
                    rounds[workload].append(
                        await run_round(servers, workload, clients, mode, plan, first=n == 0)
                    )
            for workload in workloads:
                fig = summarize(workload, clients, mode, rounds[workload])
                print_row(fig)
                figures.append(fig)
    return figures


# --- the floor of a post: one JetStream publish with sync_interval always ----------------------


async def publish_floor(data_dir: Path, calls: int) -> dict[str, float]:
    """Raw nats-py on bzzz's own embedded nats-server (fsync on every publish), own stream.

    What no post can go below: the publish acknowledged once stored, and the same publish
    until the publisher's own durable push consumer receives it (a post's read-your-writes).
    """
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig

    from bzzz.network.embedded import local_client_url

    url = local_client_url(data_dir)
    assert url is not None, "bzzz's embedded nats-server is not running"
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(
        StreamConfig(name="BENCH_FLOOR", subjects=["bench.floor.>"], storage=StorageType.FILE)
    )
    payload = b"x" * 700  # about a post envelope's size
    waiting: dict[str, asyncio.Future[None]] = {}

    async def on_msg(msg: Any) -> None:
        await msg.ack()
        future = waiting.pop((msg.headers or {}).get("Nats-Msg-Id", ""), None)
        if future is not None:
            future.set_result(None)

    acked: list[float] = []
    delivered: list[float] = []
    try:
        for n in range(calls + 100):
            started = time.perf_counter()
            await js.publish("bench.floor.a", payload, headers={"Nats-Msg-Id": f"a{n}"})
            acked.append((time.perf_counter() - started) * 1000)
        await js.subscribe(
            "bench.floor.>",
            durable="floor",
            stream="BENCH_FLOOR",
            cb=on_msg,
            manual_ack=True,
            config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.NEW),
        )
        for n in range(calls + 100):
            msg_id = f"d{n}"
            arrived = waiting[msg_id] = asyncio.get_running_loop().create_future()
            started = time.perf_counter()
            await js.publish("bench.floor.d", payload, headers={"Nats-Msg-Id": msg_id})
            await arrived
            delivered.append((time.perf_counter() - started) * 1000)
        await js.delete_stream("BENCH_FLOOR")
    finally:
        await nc.close()
    acked, delivered = sorted(acked[100:]), sorted(delivered[100:])
    return {
        "publish_acked_p50_ms": round(percentile(acked, 50), 3),
        "publish_acked_p99_ms": round(percentile(acked, 99), 3),
        "publish_delivered_p50_ms": round(percentile(delivered, 50), 3),
        "publish_delivered_p99_ms": round(percentile(delivered, 99), 3),
    }


# --- report ------------------------------------------------------------------------------------

HEADER = (
    f"{'server':10} {'tool':12} {'clients':>9} {'calls':>6} {'err':>4} {'calls/s':>8} "
    f"{'p50 ms':>7} {'p99 ms':>7} {'mean ms':>7} {'srv CPU':>7} {'nats':>5} {'cli CPU':>7} "
    f"{'others':>6}"
)


def print_row(fig: Figures) -> None:
    """One line of the table."""
    clients = f"{fig.clients} {'task' if fig.mode == 'tasks' else 'proc'}"
    nats = f"{fig.nats_cpu_pct:.0f}%" if fig.nats_cpu_pct is not None else "-"
    print(
        f"{fig.server:10} {fig.tool:12} {clients:>9} {fig.calls:>6} {fig.errors:>4} "
        f"{fig.calls_per_s:>8.1f} {fig.p50_ms:>7.2f} {fig.p99_ms:>7.2f} {fig.mean_ms:>7.2f} "
        f"{fig.server_cpu_pct:>6.0f}% {nats:>5} {fig.client_cpu_pct:>6.0f}% "
        f"{fig.others_cpu_pct:>5.0f}%",
        flush=True,
    )
    if fig.first_error:
        print(f"    first error: {fig.first_error}", flush=True)


def verdicts(figures: list[Figures]) -> list[dict[str, Any]]:
    """The issue's targets: bzzz >= half the no-op rate; p50 <= 5 ms for one client."""
    noop = {(f.clients, f.mode): f for f in figures if f.server == "noop"}
    result = []
    for fig in figures:
        if fig.server != "bzzz":
            continue
        base = noop.get((fig.clients, fig.mode))
        ratio = fig.calls_per_s / base.calls_per_s if base and base.calls_per_s else None
        per_round = (
            sorted(
                round(ours / theirs, 3)
                for ours, theirs in zip(fig.round_rates, base.round_rates, strict=True)
                if theirs
            )
            if base
            else []
        )
        entry: dict[str, Any] = {
            "tool": fig.tool,
            "clients": fig.clients,
            "mode": fig.mode,
            "rate_vs_noop": round(ratio, 3) if ratio is not None else None,
            "rate_target_met": ratio is not None and ratio >= 0.5,
            "rate_vs_noop_by_round": per_round,
        }
        if fig.clients == 1:
            entry["p50_ms"] = fig.p50_ms
            entry["p50_target_met"] = fig.p50_ms <= 5.0
        result.append(entry)
    return result


def print_verdicts(entries: list[dict[str, Any]]) -> None:
    """The targets, one line each."""
    print("\ntargets (bzzz rate >= 0.5 x no-op rate; p50 <= 5 ms for one client):")
    for e in entries:
        line = f"  {e['tool']:12} {e['clients']} {e['mode']:9} rate/no-op {e['rate_vs_noop']}"
        line += " met" if e["rate_target_met"] else " MISSED"
        by_round = e["rate_vs_noop_by_round"]
        if len(by_round) > 1:
            line += f" (rounds {by_round[0]}-{by_round[-1]})"
        if "p50_ms" in e:
            line += f"; p50 {e['p50_ms']} ms " + ("met" if e["p50_target_met"] else "MISSED")
        print(line)


def probe_transport(url: str) -> str:
    """How a server answers a POST: "json" (``json_response=True``) or "sse"."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "bench-probe", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    with httpx.Client(timeout=10) as client:
        response = client.post(url, json=body, headers=headers)
        session = response.headers.get("mcp-session-id")
        if session:
            client.delete(url, headers={"mcp-session-id": session})
    kind = response.headers.get("content-type", "")
    return "sse" if kind.startswith("text/event-stream") else "json"


def spawn_bzzz(data_dir: Path) -> ServerProcess:
    """`bzzz serve` on a fresh data directory, healthy."""
    bzzz = ServerProcess("bzzz", bzzz_command(), bzzz_env(data_dir), RESULTS / "bzzz.log")
    healthy([bzzz])
    return bzzz


def spawn_noops(transport: str, *, other: bool) -> dict[str, ServerProcess]:
    """The no-op server on bzzz's ``transport``, and (``other``) on the other one; healthy."""
    argv = [sys.executable, str(BENCH / "noop_server.py")]
    json_flag = ["--json-response"]
    processes = {
        "noop": ServerProcess(
            "noop",
            argv + (json_flag if transport == "json" else []),
            dict(os.environ),
            RESULTS / "noop.log",
        ),
    }
    if other:
        processes["noop-other"] = ServerProcess(
            "noop-other",
            argv + ([] if transport == "json" else json_flag),
            dict(os.environ),
            RESULTS / "noop-other.log",
        )
    healthy(list(processes.values()))
    return processes


def healthy(servers: list[ServerProcess]) -> None:
    """Wait until every server is healthy; stop them all if one is not."""
    try:
        for server in servers:
            server.wait_healthy()
    except BaseException:
        for server in servers:
            server.stop()
        raise


def main() -> None:
    """Spawn the servers, run every configuration, print and write the figures."""
    parser = argparse.ArgumentParser(description="MCP throughput: bzzz vs a no-op MCPServer")
    parser.add_argument("--calls", type=int, default=2000, help="measured calls per config")
    parser.add_argument("--warmup", type=int, default=200, help="warm-up calls per config")
    parser.add_argument("--max-seconds", type=float, default=120.0, help="bound per config")
    parser.add_argument(
        "--rounds", type=int, default=5, help="rounds per config, alternating the servers"
    )
    parser.add_argument("--modes", default="tasks,processes", help="8-client modes to run")
    parser.add_argument("--profile", action="store_true", help="py-spy the server processes")
    parser.add_argument(
        "--tools", help="comma-separated tools to measure (default: all), e.g. noop,bzzz_post"
    )
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=180.0,
        help="before each config, wait up to this many seconds for the machine to be idle",
    )
    parser.add_argument(
        "--other-transport",
        action="store_true",
        help="also measure the no-op server on the other transport (SSE vs plain JSON)",
    )
    parser.add_argument(
        "--floor-calls", type=int, default=1000, help="raw publishes timed for the floor"
    )
    parser.add_argument("--output", default=str(RESULTS / "mcp_throughput.json"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        asyncio.run(worker(json.loads(args.worker)))
        return
    plan = Plan(args.calls, args.warmup, args.max_seconds, max(1, args.rounds))
    RESULTS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bzzz-bench-") as tmp:
        processes = {"bzzz": spawn_bzzz(Path(tmp) / "data")}
        try:
            transport = probe_transport(processes["bzzz"].url)
            processes |= spawn_noops(transport, other=args.other_transport)
            print(f"bzzz answers POSTs with {transport}; the no-op server does the same")
            floor = asyncio.run(publish_floor(Path(tmp) / "data", args.floor_calls))
            print(f"floor (raw nats-py on bzzz's nats-server, sync_interval always): {floor}")
            print(HEADER)
            servers = Servers(processes, args.profile, args.quiet_wait)
            tools = set(args.tools.split(",")) if args.tools else None
            figures = asyncio.run(run_all(servers, plan, args.modes.split(","), tools))
        finally:
            for server in processes.values():
                server.stop()
    entries = verdicts(figures)
    print_verdicts(entries)
    report = {
        "benchmark": "mcp_throughput",
        "machine": machine(),
        "code": code_version(),
        "plan": asdict(plan),
        "population": POPULATION,
        "lookup_address": LOOKUP_ADDRESS,
        "bzzz_transport": transport,
        "profiled": args.profile,
        "publish_floor": floor,
        "results": [asdict(f) for f in figures],
        "targets": entries,
    }
    Path(args.output).write_text(json.dumps(report, indent=2))
    print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
