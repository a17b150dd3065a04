"""Collaborating hosted agents: the design's success metrics over 200 collaborative tasks.

A scripted OpenAI-compatible server on loopback plays every hosted agent and answers at once:
reviewers' findings (about 120 tokens each), the architect's result, and stances on decisions
that agree with probability ``--agree`` (a seeded random draw per answer). Each task is an
``architecture_analysis`` with ``required_roles: [reviewer, documentation]`` assigned to one of
four hosted architects, so every task opens a review thread with a hosted reviewer and a
hosted documentation agent, who answer through the runtime; the architect revises after a
disagreement, up to ``agents.max_replies_per_thread`` (10) messages per agent. A rule of the
design's "Consensus Failure" kind (three disagreements, here without its one-hour wait) marks a
thread escalated. A small ``cost.token_budget`` (``--token-budget``, default 1,500) makes long
threads compress.

Figures: consensus success rate (tasks completed with consensus), escalation rate (threads
escalated), cost per task (the ledger's total over the tasks, at the shipped gpt-5 prices),
context compression (1 - tokens sent / tokens before compression, over the prompts that carried
a thread's history), model calls per task, and the runtime's own overhead per collaborative
task: the time from assignment to result with one task at a time, minus the model calls' time
(the bare SDK round trip to the same server, times the calls).

    .venv/bin/python bench/collaboration.py [--tasks 200] [--agree 0.9 0.7] [--bus memory]

Prints a table and writes bench/results/collaboration.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from benchutil import CpuWindow, code_version, descendants, machine, percentile
from bzzz.config import load_settings
from bzzz.eventlog import Caller
from bzzz.llm.client import OpenAIModelClient
from bzzz.llm.collaboration import DRAFT_REQUEST
from bzzz.llm.testing import ScriptedModelServer, Step
from bzzz.llm.types import ModelRequest
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, PostInput
from bzzz.store.projection import Outcome

RESULTS = Path(__file__).resolve().parent / "results"
ARCHITECTS = 4
MAX_TASKS = 4
FINDINGS = (
    "The design keeps one event log on JetStream and projects it into each node's store. "
    "Risks: a single stream replica loses acknowledged messages when its disk fails; the "
    "projector must stay idempotent under redelivery; signature checks bound the catch-up "
    "rate; the SQLite writer serializes every transaction, so long transactions stall posts. "
) * 2
RESULT = (
    "Run the stream with three replicas, keep envelope ids as message ids so retries are "
    "stored once, verify signatures in a worker pool, and keep projector transactions short."
)
TASK_DATA = {
    "systemDescription": "three nodes share one event log and project it into SQLite",
    "requirements": "no acknowledged message is lost; a node catches up after a restart",
    "constraints": "two cores per machine",
    "required_roles": ["reviewer", "documentation"],
}
RULE = {
    "name": "Consensus Failure",
    "priority": 2,
    "conditions": [{"type": "disagreement_count", "threshold": 3}],
    "actions": [{"type": "notify_human", "target": "project_manager"}],
}


def _last_user(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


class Panel:
    """Scripted answers: findings, results, and stances agreeing at a set rate."""

    def __init__(self, agree: float, seed: int) -> None:
        self.agree = agree
        self._random = random.Random(seed)

    def __call__(self, body: dict[str, Any]) -> Step:
        asked = _last_user(body)
        if asked.startswith("Answer this decision"):
            if self._random.random() < self.agree:
                return Step(content="AGREE: this matches the findings.")
            return Step(content="DISAGREE: the replica count is not argued yet.")
        if asked.startswith(("Answer this", "You were asked")):
            return Step(content=FINDINGS)
        if DRAFT_REQUEST in asked:
            return Step(content=RESULT)
        return Step(content="A replicated log survives the loss of a node.")


class Finish:
    """Completion times and results of tasks, from the projector's outcomes."""

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
    """p50 (ms) of one SDK call alone, to the same server."""
    openai = {"api_key": "bench", "base_url": base_url}
    client = OpenAIModelClient(load_settings(environ={}, overrides={"openai": openai}).openai)
    messages = [{"role": "user", "content": FINDINGS}]
    request = ModelRequest("gpt-5", messages, 1.0, 4000, [], True)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        await client.complete(request)
        times.append((time.perf_counter() - start) * 1000)
    await client.close()
    return percentile(sorted(times), 50)


def node_settings(data_dir: str, base_url: str, budget: int) -> Any:
    roles = [
        {"role": "architect", "agent_id": f"arch-{n}", "max_tasks": MAX_TASKS}
        for n in range(ARCHITECTS)
    ]
    roles += [
        {"role": "reviewer", "agent_id": "rev-1", "max_tasks": 100},
        {"role": "documentation", "agent_id": "docs-1", "max_tasks": 100},
    ]
    return load_settings(
        environ={},
        overrides={
            "node": {"data_dir": data_dir},
            "openai": {"api_key": "bench", "base_url": base_url},
            "cost": {"daily_limit": 0, "monthly_limit": 0, "token_budget": budget},
            "conversation": {"escalation_rules": [RULE], "max_active_threads": 1000},
            "agents": {"default_roles": roles, "collaboration_timeout": 60},
        },
    )


async def run(
    base_url: str, server: ScriptedModelServer, agree: float, tasks: int, args: Any
) -> dict[str, Any]:
    server.responder = Panel(agree, seed=12)
    with tempfile.TemporaryDirectory(prefix="bzzz-collab-bench-") as data_dir:
        settings = node_settings(data_dir, base_url, args.token_budget)
        node = Node(settings, bus=InMemoryBus() if args.bus == "memory" else None)
        async with node:
            return await drive(node, server, agree, tasks, args.sequential)


async def drive(
    node: Node, server: ScriptedModelServer, agree: float, tasks: int, sequential: int
) -> dict[str, Any]:
    finish = Finish(node)
    boss = Caller("bench-driver")
    await node.agents.announce(boss, AnnounceInput(agent_id="driver", role="lead"))
    windows = [asyncio.Semaphore(MAX_TASKS) for _ in range(ARCHITECTS)]
    latencies: list[float] = []

    async def one(n: int, window: asyncio.Semaphore) -> str:
        async with window:
            params = PostInput(
                target_address=f"bzzz://arch-{n % ARCHITECTS}",
                message_type="task_assignment",
                content={
                    "task_type": "architecture_analysis",
                    "description": f"review the event log design #{n}",
                    "task_data": TASK_DATA,
                },
            )
            start = time.perf_counter()
            posted = await node.conversations.post(boss, params)
            [task_id] = posted["tasks"].values()
            latencies.append((await finish.wait(task_id)) - start)
            return str(task_id)

    # One at a time first: the latency of a collaborative task alone.
    alone = asyncio.Semaphore(1)
    calls_before = len(server.requests)
    applied_before = node.projector.applied_count
    for n in range(sequential):
        await one(n, alone)
    envelopes_alone = (node.projector.applied_count - applied_before) / max(sequential, 1)
    sequential_ms = sorted(1000 * s for s in latencies)
    calls_alone = (len(server.requests) - calls_before) / max(sequential, 1)
    latencies.clear()
    hosted = node.hosted.status()["collaboration"]
    context_before = dict(hosted["context"])
    costs_before = (await node.llm.usage())["daily"]
    calls_before = len(server.requests)
    escalated_before = len(await node.escalations.list(limit=100_000))
    cpu = CpuWindow([os.getpid(), *descendants(os.getpid())])
    start = time.perf_counter()
    ids = await asyncio.gather(*(one(n, windows[n % ARCHITECTS]) for n in range(tasks)))
    elapsed = time.perf_counter() - start
    used = cpu.stop()
    costs = (await node.llm.usage())["daily"]
    context = node.hosted.status()["collaboration"]["context"]
    escalated = len(await node.escalations.list(limit=100_000)) - escalated_before
    completed = sum(finish.status[t] == "completed" for t in ids)
    raw = context["raw_tokens"] - context_before["raw_tokens"]
    sent = context["sent_tokens"] - context_before["sent_tokens"]
    squeezed_raw = context["compressed_raw_tokens"] - context_before["compressed_raw_tokens"]
    squeezed = context["compressed_sent_tokens"] - context_before["compressed_sent_tokens"]
    return {
        "agree_rate": agree,
        "tasks": tasks,
        "consensus_success_rate": round(completed / tasks, 4),
        "escalation_rate": round(escalated / tasks, 4),
        "cost_per_task_usd": round(
            (costs["costNanos"] - costs_before["costNanos"]) / 1e9 / tasks, 6
        ),
        "model_calls_per_task": round((len(server.requests) - calls_before) / tasks, 2),
        "context_reduction": round(1 - sent / raw, 4) if raw else 0.0,
        "context_reduction_when_compressed": (
            round(1 - squeezed / squeezed_raw, 4) if squeezed_raw else 0.0
        ),
        "context_prompts": context["prompts"] - context_before["prompts"],
        "compressed_prompts": context["compressed_prompts"] - context_before["compressed_prompts"],
        "tasks_per_s": round(tasks / elapsed, 2),
        "process_cpu_ms_per_task": round(1000 * used["ours"] / tasks, 2),
        "others_cpu_pct": round(100 * used["others"] / elapsed, 1),
        "sequential_tasks": len(sequential_ms),
        "sequential_p50_ms": round(percentile(sequential_ms, 50), 2) if sequential_ms else None,
        "sequential_calls_per_task": round(calls_alone, 2),
        "sequential_envelopes_per_task": round(envelopes_alone, 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--agree", type=float, nargs="+", default=[0.9, 0.7])
    parser.add_argument("--token-budget", type=int, default=1500)
    parser.add_argument("--sequential", type=int, default=20)
    parser.add_argument("--bus", choices=["jetstream", "memory"], default="memory")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    server = ScriptedModelServer(Panel(1.0, 0), strict=True)
    base_url = await server.start()
    try:
        bare = await bare_round_trip(base_url, 100)
        runs = [await run(base_url, server, agree, args.tasks, args) for agree in args.agree]
        refused = len(server.refused)
    finally:
        await server.close()
    for entry in runs:
        model_ms = bare * entry["sequential_calls_per_task"]
        entry["model_ms_per_task_alone"] = round(model_ms, 2)
        if entry["sequential_p50_ms"] is not None:
            entry["runtime_overhead_ms_per_task"] = round(entry["sequential_p50_ms"] - model_ms, 2)
    report = {
        "benchmark": "collaboration",
        "bus": args.bus,
        "token_budget": args.token_budget,
        "bare_sdk_round_trip_p50_ms": round(bare, 2),
        "strict_server_refusals": refused,
        "runs": runs,
        "machine": machine(),
        "code": code_version(),
    }
    print(f"bare SDK round trip: p50 {bare:.2f} ms; strict-server refusals: {refused}")
    keys = (
        ("agree_rate", "agree"),
        ("consensus_success_rate", "consensus"),
        ("escalation_rate", "escalated"),
        ("cost_per_task_usd", "USD/task"),
        ("model_calls_per_task", "calls/task"),
        ("context_reduction", "ctx saved"),
        ("context_reduction_when_compressed", "when cut"),
        ("tasks_per_s", "tasks/s"),
        ("process_cpu_ms_per_task", "CPU ms/task"),
        ("sequential_p50_ms", "alone p50"),
        ("runtime_overhead_ms_per_task", "overhead ms"),
    )
    print("".join(f"{label:>12}" for _, label in keys))
    for entry in runs:
        print("".join(f"{entry.get(k)!s:>12}" for k, _ in keys))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "collaboration.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
