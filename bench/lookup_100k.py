"""Lookup with 100,000 announced agents: latency per kind of address, and the node's peak RSS.

In-process: a real ``bzzz.node.core.Node`` with its embedded NATS JetStream bus (``--bus memory``:
the in-memory bus) and SQLite in a temporary data directory. The agents are announced as
``agent.announced`` envelopes sealed by ten peer-node identities (``bzzz.network.envelope.seal``)
and published straight to the bus, many in flight at once; the node's projector verifies and
applies them like any other, and the run waits for it with ``projector.wait_for_sequence``.
Then it times ``node.agents.lookup(LOCAL_CALLER, LookupInput(...))`` for a mix of addresses.

Two phases, each in its own process so that each peak RSS is its own:
- build: start the node, announce the agents, time the lookups (peak RSS includes ingestion);
- reopen: a fresh process starts a node on the same data directory (as after a restart: the
  agent directory loads from SQLite), times the lookups again; its peak RSS is what a node
  serving 100,000 agents needs. ``--reopen-bus memory`` gives that node the in-memory bus
  instead: that was the way round a restart hang before commit ec2e4e6, and since 817e261 a
  node cannot start on a fresh in-memory log over an existing store (see BENCHMARKS.md).

    .venv/bin/python bench/lookup_100k.py [--agents 100000] [--bus jetstream|memory]

Prints the figures and writes bench/results/lookup_100k.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import profile_summary
from benchutil import CpuWindow, code_version, descendants, machine, percentile, wait_for_quiet
from bzzz.config import load_settings
from bzzz.eventlog import LOCAL_CALLER
from bzzz.network.envelope import seal
from bzzz.network.identity import NodeIdentity
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, LookupInput, validate_input

SCRIPT = Path(__file__).resolve()
RESULTS = SCRIPT.parent / "results"
ROLES = (
    "architect", "reviewer", "developer", "tester", "writer", "designer", "devops", "security",
    "data", "ml", "frontend", "backend", "mobile", "sre", "dba", "pm", "qa", "support",
    "researcher", "analyst",
)  # fmt: skip
CAPABILITIES = (
    "python", "go", "rust", "java", "typescript", "c", "cpp", "sql", "kubernetes", "terraform",
    "docker", "react", "vue", "graphql", "grpc", "kafka", "nats", "postgres", "redis", "spark",
    "pytorch", "numpy", "security", "testing", "docs", "ci", "linux", "networking", "aws", "gcp",
    "azure", "llm", "nlp", "vision", "ux", "accessibility", "performance", "profiling", "api",
    "design",
)  # fmt: skip
PROJECTS = 1000
PEERS = 10
NO_PROJECT_SHARE = 0.02  # agents that declared no project: they match every project
KINDS = (
    "agent",  # bzzz://agent-012345
    "role@project",  # bzzz://*:reviewer@project-0421
    "role@project+expertise",  # the same, filter_criteria.expertise
    "*@project",  # bzzz://*:*@project-0421
    "role@*",  # bzzz://*:reviewer@*
    "role@*+expertise",  # bzzz://*:reviewer@* with expertise and availability
)


# --- the population ----------------------------------------------------------------------------


def agent_args(i: int, rng: random.Random) -> dict[str, Any]:
    """bzzz_announce arguments of agent ``i``: role, project, capabilities spread evenly."""
    caps = rng.sample(CAPABILITIES, rng.randint(2, 6))
    args: dict[str, Any] = {
        "agent_id": f"agent-{i:06d}",
        "role": ROLES[i % len(ROLES)],
        "capabilities": caps,
        "specialization": f"{caps[0]} {ROLES[i % len(ROLES)]}",
        "max_tasks": rng.choice((1, 3, 5, 10)),
    }
    if rng.random() >= NO_PROJECT_SHARE:
        args["project"] = f"project-{rng.randrange(PROJECTS):04d}"
    if rng.random() < 0.3:
        args["task"] = f"task-{rng.randrange(50)}"
    return args


def announcement(
    node: Node, peer: NodeIdentity, i: int, rng: random.Random
) -> tuple[str, bytes, str]:
    """(subject, wire bytes, id) of agent ``i``'s announcement, sealed by a peer node."""
    params = validate_input(AnnounceInput, agent_args(i, rng))
    payload = params.model_dump() | {"session_id": f"peer-session-{i // 10}", "metadata": {}}
    subject = f"bzzz.{node.network}.agent.{params.agent_id}"
    envelope = seal(peer, node.network, "agent.announced", subject, payload)
    return subject, envelope.to_bytes(), envelope.id


async def ingest(
    node: Node, agents: int, *, in_flight: int, within: float, seed: int
) -> dict[str, Any]:
    """Publish the announcements (``in_flight`` at once), then wait for the projector."""
    rng = random.Random(seed)
    peers = [NodeIdentity.generate() for _ in range(PEERS)]
    gate = asyncio.Semaphore(in_flight)
    started = time.perf_counter()
    deadline = started + within
    last_seq = 0

    async def publish(subject: str, data: bytes, msg_id: str) -> None:
        nonlocal last_seq
        async with gate:
            last_seq = max(last_seq, await node.bus.publish(subject, data, msg_id))

    published = 0
    chunk = 2000
    while published < agents and time.perf_counter() < deadline:
        count = min(chunk, agents - published)
        async with asyncio.TaskGroup() as tg:
            for i in range(published, published + count):
                tg.create_task(publish(*announcement(node, peers[i % PEERS], i, rng)))
        published += count
        if published % 20_000 == 0:
            log(f"published {published}, applied to seq {node.projector.applied_sequence}")
    publish_s = time.perf_counter() - started
    await wait_applied(node, last_seq, deadline)
    return {
        "agents_published": published,
        "agents_in_directory": len(node.agents.directory),
        "publish_seconds": round(publish_s, 1),
        "applied_seconds": round(time.perf_counter() - started, 1),
        "announcements_per_s": round(published / (time.perf_counter() - started), 1),
        "last_sequence": last_seq,
    }


async def wait_applied(node: Node, seq: int, deadline: float) -> None:
    """Wait for the projector to reach ``seq``, reporting progress, until ``deadline``."""
    while node.projector.applied_sequence < seq:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            raise TimeoutError(f"projector at {node.projector.applied_sequence} of {seq}")
        with contextlib.suppress(TimeoutError):
            await node.projector.wait_for_sequence(seq, min(30.0, remaining))
        log(f"applied to seq {node.projector.applied_sequence} of {seq}")


# --- the lookups -------------------------------------------------------------------------------


def query(kind: str, rng: random.Random, agents: int) -> dict[str, Any]:
    """bzzz_lookup arguments of one lookup of a kind."""
    role = rng.choice(ROLES)
    project = f"project-{rng.randrange(PROJECTS):04d}"
    expertise = {"expertise": rng.sample(CAPABILITIES, 1)}
    if kind == "agent":
        return {"semantic_address": f"bzzz://agent-{rng.randrange(agents):06d}"}
    if kind.startswith("role@project"):
        args: dict[str, Any] = {"semantic_address": f"bzzz://*:{role}@{project}"}
    elif kind == "*@project":
        args = {"semantic_address": f"bzzz://*:*@{project}"}
    else:
        args = {"semantic_address": f"bzzz://*:{role}@*"}
        if kind.endswith("expertise"):
            args["filter_criteria"] = expertise | {"availability": True}
            return args
    if kind.endswith("expertise"):
        args["filter_criteria"] = expertise
    return args


class GcWatch:
    """Full (generation 2) garbage collections while active: how many, longest pause, total."""

    def __init__(self) -> None:
        self.count = 0
        self.max_ms = 0.0
        self.total_ms = 0.0
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
            return
        pause = (time.perf_counter() - self._started) * 1000
        self.count += 1
        self.max_ms = max(self.max_ms, pause)
        self.total_ms += pause

    def __enter__(self) -> GcWatch:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def figures(self) -> dict[str, float]:
        """For the report."""
        return {
            "gc_full_collections": self.count,
            "gc_full_max_ms": round(self.max_ms, 1),
            "gc_full_total_ms": round(self.total_ms, 1),
        }


async def time_kind(
    node: Node,
    kind: str,
    *,
    calls: int,
    within: float,
    agents: int,
    seed: int,
    profile: Path | None,
) -> dict[str, Any]:
    """Time ``calls`` lookups of one kind (validation + lookup, as the tool does)."""
    rng = random.Random(seed)
    arguments = [query(kind, rng, agents) for _ in range(calls)]
    for args in arguments[: min(20, calls)]:  # warm-up
        await node.agents.lookup(LOCAL_CALLER, validate_input(LookupInput, args))
    latencies, matches, totals = [], 0, 0
    begun = time.perf_counter()
    deadline = begun + within
    window = CpuWindow([os.getpid(), *descendants(os.getpid())])
    spy = profile_summary.recording(os.getpid(), profile or Path(), enabled=profile is not None)
    with spy, GcWatch() as gc_watch:
        for args in arguments:
            if time.perf_counter() > deadline:
                break
            t0 = time.perf_counter()
            result = await node.agents.lookup(LOCAL_CALLER, validate_input(LookupInput, args))
            latencies.append((time.perf_counter() - t0) * 1000)
            matches += result["count"]
            totals += result["total_matches"]
    seconds = time.perf_counter() - begun
    cpu = window.stop()
    latencies.sort()
    n = len(latencies)
    return {
        "kind": kind,
        "example": arguments[0],
        "calls": n,
        "p50_ms": round(percentile(latencies, 50), 3),
        "p99_ms": round(percentile(latencies, 99), 3),
        "mean_ms": round(sum(latencies) / n, 3),
        "max_ms": round(latencies[-1], 3),
        "mean_returned": round(matches / n, 1),
        "mean_total_matches": round(totals / n, 1),
        "others_cpu_pct": round(100 * cpu["others"] / seconds, 1),
    } | gc_watch.figures()


def profile_path(phase: str, kind: str) -> Path:
    """Where the py-spy profile of one kind's lookups goes."""
    name = kind.replace("@", "_at_").replace("*", "any").replace("+", "_")
    return RESULTS / f"profile_lookup_{phase}_{name}.folded"


async def time_lookups(node: Node, args: argparse.Namespace, phase: str) -> list[dict[str, Any]]:
    """Every kind, one after the other (py-spy on this process with ``--profile``)."""
    results = []
    for n, kind in enumerate(KINDS):
        busy = await asyncio.to_thread(wait_for_quiet, args.quiet_wait) if args.quiet_wait else 0.0
        figures = await time_kind(
            node,
            kind,
            calls=args.calls,
            within=args.max_seconds,
            agents=args.agents,
            seed=args.seed + n,
            profile=profile_path(phase, kind) if args.profile else None,
        )
        figures["busy_before_pct"] = busy
        log(
            f"{kind:24} p50 {figures['p50_ms']:8.3f} ms  p99 {figures['p99_ms']:8.3f} ms  "
            f"returned {figures['mean_returned']:6.1f} of {figures['mean_total_matches']:8.1f}"
        )
        results.append(figures)
    return results


# --- phases ------------------------------------------------------------------------------------


def log(text: str) -> None:
    """Progress to stderr (stdout carries the reopen phase's JSON)."""
    print(text, file=sys.stderr, flush=True)


def memory() -> dict[str, float]:
    """This process's peak and current RSS, in MB."""
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    current_kb = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                current_kb = int(line.split()[1])
    return {"peak_rss_mb": round(peak_kb / 1024, 1), "rss_mb": round(current_kb / 1024, 1)}


@contextlib.asynccontextmanager
async def running_node(data_dir: Path, bus: str, agents: int) -> AsyncIterator[Node]:
    """A node on ``data_dir``: embedded JetStream, or the in-memory bus."""
    settings = load_settings(
        environ={},
        overrides={
            "node": {"data_dir": str(data_dir)},
            "agents": {"max_agents": max(agents + 1000, 100_000)},
        },
    )
    node = Node(settings, bus=InMemoryBus() if bus == "memory" else None)
    async with node:
        yield node


async def build_phase(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    """Start a node, announce the agents, time the lookups."""
    before = memory()
    async with running_node(data_dir, args.bus, args.agents) as node:
        log(f"node {node.node_id} up; announcing {args.agents} agents")
        ingested = await ingest(
            node, args.agents, in_flight=args.in_flight, within=args.max_ingest, seed=args.seed
        )
        log(f"ingested: {ingested}")
        after_ingest = memory()
        lookups = await time_lookups(node, args, "build")
        result = {
            "ingest": ingested,
            "lookups": lookups,
            "memory_before": before,
            "memory_after_ingest": after_ingest,
            "memory": memory(),
        }
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result["nats_server_peak_rss_mb"] = round(children / 1024, 1) if args.bus != "memory" else None
    return result


async def reopen_phase(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    """A fresh node on the same data directory (its directory loads from SQLite); lookups."""
    started = time.perf_counter()
    async with running_node(data_dir, args.bus, args.agents) as node:
        start_s = time.perf_counter() - started
        log(f"reopened with {len(node.agents.directory)} agents in {start_s:.1f} s")
        after_start = memory()
        lookups = await time_lookups(node, args, "reopen")
        return {
            "start_seconds": round(start_s, 1),
            "agents_in_directory": len(node.agents.directory),
            "memory_after_start": after_start,
            "lookups": lookups,
            "memory": memory(),
        }


def run_reopen(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    """The reopen phase in a child process (its own peak RSS)."""
    argv = [sys.executable, str(SCRIPT), "--phase", "reopen", "--data-dir", str(data_dir)]
    argv += ["--bus", args.reopen_bus]
    for name in ("agents", "calls", "max_seconds", "seed", "quiet_wait"):
        argv += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    if args.profile:
        argv.append("--profile")
    done = subprocess.run(argv, stdout=subprocess.PIPE, check=False, timeout=args.max_ingest + 600)
    if done.returncode != 0:
        return {"error": f"the reopen phase failed (exit {done.returncode}); see its stderr"}
    return dict(json.loads(done.stdout))


# --- report ------------------------------------------------------------------------------------


def verdicts(report: dict[str, Any]) -> dict[str, Any]:
    """Targets: p50 <= 2 ms for every kind; peak RSS <= 400 MB (the serving node: reopen)."""
    phase = report.get("reopen") or report.get("build")
    build = report.get("build")
    if phase is None:
        return {"error": "no phase ran to the end"}
    worst = max(phase["lookups"], key=lambda k: k["p50_ms"])
    rss = phase["memory"]["peak_rss_mb"]
    return {
        "worst_p50_kind": worst["kind"],
        "worst_p50_ms": worst["p50_ms"],
        "p50_target_met": all(k["p50_ms"] <= 2.0 for k in phase["lookups"]),
        "peak_rss_mb": rss,
        "build_peak_rss_mb": build["memory"]["peak_rss_mb"] if build else None,
        "rss_target_met": rss <= 400,
    }


def print_report(report: dict[str, Any]) -> None:
    """A table per phase and the verdicts."""
    for phase in ("build", "reopen"):
        if phase not in report:
            continue
        data = report[phase]
        print(f"\n{phase}: peak RSS {data['memory']['peak_rss_mb']} MB")
        print(f"{'kind':24} {'calls':>6} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8} {'matches':>9}")
        for k in data["lookups"]:
            print(
                f"{k['kind']:24} {k['calls']:>6} {k['p50_ms']:>8.3f} {k['p99_ms']:>8.3f} "
                f"{k['mean_ms']:>8.3f} {k['mean_total_matches']:>9.1f}"
            )
    v = report["targets"]
    if "error" in v:
        print(f"\ntargets: {v['error']}")
        return
    print(
        f"\ntargets: p50 <= 2 ms: {'met' if v['p50_target_met'] else 'MISSED'} "
        f"(worst {v['worst_p50_kind']} {v['worst_p50_ms']} ms); "
        f"RSS <= 400 MB: {'met' if v['rss_target_met'] else 'MISSED'} ({v['peak_rss_mb']} MB)"
    )


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description="bzzz lookup with many announced agents")
    parser.add_argument("--agents", type=int, default=100_000)
    parser.add_argument(
        "--bus",
        choices=("jetstream", "memory"),
        default="jetstream",
        help="bus of the build phase (with memory, add --no-reopen: see BENCHMARKS.md)",
    )
    parser.add_argument("--calls", type=int, default=1000, help="lookups per kind")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="bound per kind")
    parser.add_argument("--max-ingest", type=float, default=1800.0, help="bound on ingestion")
    parser.add_argument("--in-flight", type=int, default=256, help="publishes in flight")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-reopen", action="store_true", help="skip the reopen phase")
    parser.add_argument(
        "--reopen-bus",
        choices=("jetstream", "memory"),
        default="jetstream",
        help="bus of the reopened node (memory: the log is already applied, see the docstring)",
    )
    parser.add_argument("--profile", action="store_true", help="py-spy each kind's lookups")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=180.0,
        help="before each kind, wait up to this many seconds for the machine to be idle",
    )
    parser.add_argument("--keep-data", help="build in this data directory and keep it")
    parser.add_argument("--reuse", help="skip the build: reopen this kept data directory")
    parser.add_argument("--output", default=str(RESULTS / "lookup_100k.json"))
    parser.add_argument("--phase", choices=("reopen",), help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    """Build, reopen, report."""
    args = parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if args.phase == "reopen":
        print(json.dumps(asyncio.run(reopen_phase(args, Path(args.data_dir)))))
        return
    RESULTS.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "benchmark": "lookup_100k",
        "machine": machine(),
        "code": code_version(),
        "agents": args.agents,
        "bus": args.bus,
        "reopen_bus": None if args.no_reopen else args.reopen_bus,
        "store": "sqlite (WAL) in the data directory",
    }
    with contextlib.ExitStack() as stack:
        if args.reuse:
            data_dir = Path(args.reuse)
        elif args.keep_data:
            data_dir = Path(args.keep_data)
        else:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "data"
        if not args.reuse:
            report["build"] = asyncio.run(build_phase(args, data_dir))
        if not args.no_reopen:
            reopened = run_reopen(args, data_dir)
            report["reopen_error" if "error" in reopened else "reopen"] = reopened
    report["targets"] = verdicts(report)
    print_report(report)
    Path(args.output).write_text(json.dumps(report, indent=2))
    print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
