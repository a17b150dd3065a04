"""Hosted-agent runtime overhead: tasks/s and latency per task with a model that answers at once.

One run starts a scripted OpenAI-compatible server on loopback (it answers every request at
once, with a fixed usage) and, for 1 and then 8 hosted agents, a fresh node in a temporary data
directory (embedded nats-server and SQLite, as `bzzz serve` runs; ``--bus memory`` for the
in-memory log). A driver agent keeps ``max_tasks`` chat_completion tasks outstanding per hosted
agent through the service layer and times each one from its assignment to the projector applying
its ``task_complete``: assignment, projection, task load, memory recall, the limit check, the
HTTP call through the openai SDK, the cost booking, the result post and the memory write.
The bare HTTP round trip of the same SDK call to the same server is measured alone too, so the
runtime's own share is the difference.

    .venv/bin/python bench/llm_overhead.py [--tasks 300] [--bus jetstream|memory]

Prints a table and writes bench/results/llm_overhead.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchutil import CpuWindow, code_version, descendants, machine, percentile
from bzzz.config import load_settings
from bzzz.eventlog import Caller
from bzzz.llm.client import OpenAIModelClient
from bzzz.llm.testing import ScriptedModelServer, Step
from bzzz.llm.types import ModelRequest
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, PostInput
from bzzz.store.projection import Outcome

RESULTS = Path(__file__).resolve().parent / "results"
MAX_TASKS = 4
TASK_DATA = {"messages": [{"role": "user", "content": "Reply with one word."}]}


def answer(_body: dict[str, Any]) -> Step:
    return Step(content="Done.", usage=(60, 2))


class Finish:
    """Completion times of tasks, from the projector's outcomes."""

    def __init__(self, node: Node) -> None:
        self.done: dict[str, float] = {}
        self.status: dict[str, str] = {}
        self._events: dict[str, asyncio.Event] = {}
        node.projector.add_outcome_listener(self._seen)

    def _seen(self, outcomes: dict[str, Outcome]) -> None:
        now = time.perf_counter()
        for outcome in outcomes.values():
            update = outcome.get("task_update") or {}
            if update.get("task_status") in ("completed", "failed"):
                self.done[update["task_id"]] = now
                self.status[update["task_id"]] = update["task_status"]
                self._events.setdefault(update["task_id"], asyncio.Event()).set()

    async def wait(self, task_id: str) -> float:
        await self._events.setdefault(task_id, asyncio.Event()).wait()
        return self.done[task_id]


async def bare_round_trip(base_url: str, calls: int) -> float:
    """p50 (ms) of the SDK call alone, to the same server."""
    openai = {"api_key": "bench", "base_url": base_url}
    client = OpenAIModelClient(load_settings(environ={}, overrides={"openai": openai}).openai)
    request = ModelRequest("gpt-5-mini", TASK_DATA["messages"], 0.7, 100, [], False)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        await client.complete(request)
        times.append((time.perf_counter() - start) * 1000)
    await client.close()
    return percentile(sorted(times), 50)


async def run_agents(
    agents: int, in_flight: int, tasks: int, base_url: str, bus: str
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bzzz-llm-bench-") as data_dir:
        settings = load_settings(
            environ={},
            overrides={
                "node": {"data_dir": data_dir},
                "openai": {"api_key": "bench", "base_url": base_url},
                "cost": {"daily_limit": 0, "monthly_limit": 0},
                "agents": {
                    "default_roles": [
                        {"role": "architect", "agent_id": f"arch-{n}", "max_tasks": MAX_TASKS}
                        for n in range(agents)
                    ]
                },
            },
        )
        node = Node(settings, bus=InMemoryBus() if bus == "memory" else None)
        async with node:
            return await drive(node, agents, in_flight, tasks)


async def drive(node: Node, agents: int, in_flight: int, tasks: int) -> dict[str, Any]:
    finish = Finish(node)
    boss = Caller("bench-driver")
    await node.agents.announce(boss, AnnounceInput(agent_id="driver", role="lead"))
    # Each agent takes at most MAX_TASKS at once (more would be refused): one window per agent.
    windows = [asyncio.Semaphore(in_flight) for _ in range(agents)]
    latencies: list[float] = []
    failed = 0

    async def one(n: int) -> None:
        nonlocal failed
        async with windows[n % agents]:
            params = PostInput(
                target_address=f"bzzz://arch-{n % agents}",
                message_type="task_assignment",
                content={"task_type": "chat_completion", "task_data": TASK_DATA},
            )
            start = time.perf_counter()
            posted = await node.conversations.post(boss, params)
            assert "tasks" in posted, posted["delivery_results"]
            [task_id] = posted["tasks"].values()
            end = await finish.wait(task_id)
            latencies.append((end - start) * 1000)
            failed += finish.status[task_id] != "completed"

    warmup = max(agents * MAX_TASKS, 20)
    await asyncio.gather(*(one(n) for n in range(warmup)))
    latencies.clear()
    cpu = CpuWindow([os.getpid(), *descendants(os.getpid())])
    start = time.perf_counter()
    await asyncio.gather(*(one(n) for n in range(tasks)))
    elapsed = time.perf_counter() - start
    used = cpu.stop()
    ordered = sorted(latencies)
    return {
        "agents": agents,
        "max_tasks_per_agent": MAX_TASKS,
        "in_flight_per_agent": in_flight,
        "tasks": tasks,
        "tasks_per_s": round(tasks / elapsed, 1),
        "p50_ms": round(percentile(ordered, 50), 2),
        "p99_ms": round(percentile(ordered, 99), 2),
        "failed": failed,
        "cpu_ms_per_task": round(1000 * used["ours"] / tasks, 2),
        "others_cpu_pct": round(100 * used["others"] / elapsed, 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--bus", choices=["jetstream", "memory"], default="jetstream")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    server = ScriptedModelServer(answer)
    base_url = await server.start()
    try:
        bare = await bare_round_trip(base_url, 200)
        # One task at a time shows the latency of a task alone; max_tasks each shows throughput.
        shapes = ((1, 1), (1, MAX_TASKS), (8, MAX_TASKS))
        runs = [await run_agents(n, k, args.tasks, base_url, args.bus) for n, k in shapes]
    finally:
        await server.close()
    report = {
        "benchmark": "llm_overhead",
        "bus": args.bus,
        "bare_sdk_round_trip_p50_ms": round(bare, 2),
        "runs": runs,
        "machine": machine(),
        "code": code_version(),
    }
    print(f"bare SDK round trip to the model server: p50 {bare:.2f} ms")
    header = ("agents", "in flight", "tasks/s", "p50 ms", "p99 ms", "CPU ms/task", "others %")
    print("".join(f"{h:>12}" for h in header))
    for run in runs:
        keys = (
            "agents",
            "in_flight_per_agent",
            "tasks_per_s",
            "p50_ms",
            "p99_ms",
            "cpu_ms_per_task",
            "others_cpu_pct",
        )
        print("".join(f"{run[k]:>12}" for k in keys))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "llm_overhead.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
