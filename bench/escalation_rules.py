"""Escalation rules with 10,000 active threads: cost per posted message, and the monitor's sweep.

In-process: a real ``bzzz.node.core.Node`` on the in-memory bus and SQLite in a temporary data
directory, the design's two default rules, a hand-moved clock. The threads (and, in a share of
them, a decision with a disagreeing stance) are sealed as envelopes and published straight to
the bus; the node's projector applies them like any other. Then it measures:

- ``check_thread``: the rule evaluation a thread message triggers (facts of one thread from the
  store, every rule's conditions) — p50/p99 over random threads;
- ``bzzz_post`` into a thread through ``ConversationService.post`` with the rule check and
  without it (observers removed): the difference is what the rules add to a post;
- ``monitor.sweep()``: idle-thread closing, evaluation of every watched thread, due actions and
  SLURP submissions — nothing fires, as in a steady state; and ``check_all`` alone.

    .venv/bin/python bench/escalation_rules.py [--threads 10000] [--samples 1000]

Prints the figures and writes bench/results/escalation_rules.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchutil import code_version, machine, percentile
from bzzz.clock import ManualClock
from bzzz.config import load_settings
from bzzz.eventlog import Caller
from bzzz.network.envelope import seal
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, PostInput

RESULTS = Path(__file__).resolve().parent / "results"
AGENTS = 30
DISPUTED_SHARE = 5  # one thread in five has a decision and a disagreement


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": round(percentile(ordered, 50) * 1000, 3),
        "p99_ms": round(percentile(ordered, 99) * 1000, 3),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 3),
    }


def _members(n: int) -> list[str]:
    return [f"agent-{(n + k) % AGENTS}" for k in range(3)]


def _message(thread_id: str, n: int, sender: str, kind: str, **extra: Any) -> dict[str, Any]:
    return {
        "message_id": f"msg-b{n}-{kind}",
        "sender": sender,
        "target_address": "bzzz://*",
        "message_type": kind,
        "content": {"text": f"{kind} {n}"},
        "priority": "medium",
        "thread_id": thread_id,
        "reply_to": None,
        "recipients": [],
        "task_id": None,
        **extra,
    }


def _envelopes(node: Node, threads: int) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for n in range(threads):
        thread_id = f"thread-bench-{n:06d}"
        members = _members(n)
        out.append(
            (
                "thread.created",
                {
                    "thread_id": thread_id,
                    "topic": f"bench {n}",
                    "creator": members[0],
                    "participants": members,
                    "metadata": {},
                },
            )
        )
        out.append(("message.posted", _message(thread_id, n, members[1], "text")))
        if n % DISPUTED_SHARE == 0:
            decision = _message(thread_id, n, members[0], "decision")
            out.append(("message.posted", decision))
            reply = _message(
                thread_id,
                n,
                members[2],
                "question",
                reply_to=decision["message_id"],
                stance="disagree",
                stance_source="agent",
            )
            out.append(("message.posted", reply))
    return out


async def _load(node: Node, clock: ManualClock, threads: int) -> float:
    started = time.perf_counter()
    for i in range(AGENTS):
        await node.agents.announce(
            Caller(f"bench-{i}"), AnnounceInput(agent_id=f"agent-{i}", role="developer")
        )
    for type_, payload in _envelopes(node, threads):
        kind = "thread" if type_.startswith("thread") else "msg"
        subject = f"bzzz.{node.network}.{kind}.{payload.get('thread_id')}"
        env = seal(node.identity, node.network, type_, subject, payload, now=clock.now())
        await node.bus.publish(subject, env.to_bytes(), env.id)
    await node.projector.wait_for_sequence(await node.bus.last_sequence(), 1200)
    return time.perf_counter() - started


async def _time_checks(node: Node, threads: int, samples: int) -> list[float]:
    ids = [f"thread-bench-{random.randrange(threads):06d}" for _ in range(samples)]
    timings = []
    for thread_id in ids:
        started = time.perf_counter()
        await node.escalations.check_thread(thread_id)
        timings.append(time.perf_counter() - started)
    return timings


async def _time_posts(node: Node, threads: int, samples: int) -> list[float]:
    timings = []
    for _ in range(samples):
        n = random.randrange(threads)
        sender = _members(n)[1]
        params = PostInput(
            target_address="bzzz://*",
            message_type="text",
            content={"text": "status update"},
            thread_id=f"thread-bench-{n:06d}",
        )
        started = time.perf_counter()
        await node.conversations.post(Caller(f"bench-{sender.split('-')[1]}"), params)
        timings.append(time.perf_counter() - started)
    return timings


async def _sweeps(node: Node, count: int) -> dict[str, Any]:
    sweeps, checks = [], []
    for _ in range(count):
        report = await node.monitor.sweep()
        assert report.fired == 0 and report.closed == 0, report
        sweeps.append(report.seconds)
        started = time.perf_counter()
        await node.escalations.check_all()
        checks.append(time.perf_counter() - started)
    return {"sweep": _ms(sweeps), "check_all": _ms(checks), "sweeps": count}


async def run(threads: int, samples: int) -> dict[str, Any]:
    data_dir = Path(tempfile.mkdtemp(prefix="bzzz-bench-esc-"))
    settings = load_settings(
        environ={},
        overrides={
            "node": {"data_dir": str(data_dir)},
            "conversation": {"max_active_threads": threads * 2, "default_timeout": 10**7},
            "escalation": {"monitor_interval": 10**6},
        },
    )
    clock = ManualClock()
    async with Node(settings, bus=InMemoryBus(), clock=clock) as node:
        load_s = await _load(node, clock, threads)
        clock.advance(600)  # half-way to the consensus-failure window: nothing fires yet
        checks = await _time_checks(node, threads, samples)
        with_rules = await _time_posts(node, threads, samples)
        observers = list(node.conversations.observers)
        node.conversations.observers.clear()
        without_rules = await _time_posts(node, threads, samples)
        node.conversations.observers.extend(observers)
        sweeps = await _sweeps(node, 5)
    post_with, post_without = _ms(with_rules), _ms(without_rules)
    return {
        "threads": threads,
        "samples": samples,
        "load_seconds": round(load_s, 1),
        "check_thread": _ms(checks),
        "post_with_rules": post_with,
        "post_without_rules": post_without,
        "rules_share_of_post_p50": round(1 - post_without["p50_ms"] / post_with["p50_ms"], 3),
        "monitor": sweeps,
    }


def main() -> None:
    """Parse arguments, run, print, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=1000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    figures = asyncio.run(run(args.threads, args.samples))
    report = {"machine": machine(), "code": code_version(), "figures": figures}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "escalation_rules.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
