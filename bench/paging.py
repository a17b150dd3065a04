"""What the pager costs each round of the monitor, with many escalations open.

An in-memory bus and SQLite: ``--escalations`` threads of the project 'shop', each escalated to
humans; a rota of one console step (nothing leaves the process, so the figures are the pager's
own: reads, the schedule, the envelopes). Figures: the round that pages every escalation's first
step (one ``escalation.paged`` envelope each), a quiet round (nothing due: what every wake of
the monitor costs while escalations wait), and the round that pages the admins after
``ack_timeout`` — each the wall time of one ``Pager.run_due``.

    .venv/bin/python bench/paging.py [--escalations 500] [--json bench/results/paging.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from benchutil import machine
from bzzz.clock import ManualClock
from bzzz.config import load_settings
from bzzz.config.conversations import RotaConfig
from bzzz.conversations.monitor import ThreadMonitor
from bzzz.eventlog import Caller
from bzzz.network.memory import InMemoryBus
from bzzz.node.core import Node
from bzzz.schemas import AnnounceInput, ThreadInput


async def _idle(self: ThreadMonitor) -> None:
    while not self._stopping:
        self._wakeup.clear()
        await self._wakeup.wait()


async def _escalate(node: Node, count: int) -> None:
    for agent in ("arch", "dev"):
        await node.agents.announce(
            Caller(f"s-{agent}"), AnnounceInput(agent_id=agent, role=agent, project="shop")
        )
    action = {"type": "notify_human", "status": "done", "attempts": 1}
    for i in range(count):
        made = await node.conversations.thread(
            Caller("s-arch"), ThreadInput(action="create", topic=f"t{i}", participants=["dev"])
        )
        thread_id = made["thread_id"]
        payload = {"escalation_id": f"esc-bench-{i}", "thread_id": thread_id, "rule": "bench",
                   "priority": 0, "reason": "bench", "actions": [action]}  # fmt: skip
        await node.log.emit("thread.escalated", "thread", thread_id, payload, project="shop")


async def _timed(node: Node) -> float:
    started = time.perf_counter()
    await node.paging.run_due()
    return round((time.perf_counter() - started) * 1000, 1)


async def run(count: int) -> dict[str, Any]:
    ThreadMonitor.run = _idle  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as home:
        settings = load_settings(environ={}, overrides={"node": {"data_dir": home}})
        settings.conversation.max_active_threads = count + 10
        settings.limits.threads_per_principal = count + 10
        settings.escalation.ack_timeout = 60
        steps = [{"name": "desk", "console": True}]
        settings.escalation.rota = {"shop": RotaConfig.model_validate({"steps": steps})}
        clock = ManualClock()
        async with Node(settings, bus=InMemoryBus(), clock=clock) as node:
            await _escalate(node, count)
            first = await _timed(node)
            quiet = await _timed(node)
            clock.advance(61)
            admins = await _timed(node)
            shown = await node.paging.attach([{"id": f"esc-bench-{i}"} for i in range(count)])
            pages = sum(len(e["paging"]["pages"]) for e in shown)
    return {
        "escalations": count,
        "first_round_ms": first,
        "quiet_round_ms": quiet,
        "admins_round_ms": admins,
        "pages": pages,
        "machine": machine(),
    }


def main() -> None:
    """Run and print the figures (and write them as JSON with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--escalations", type=int, default=500)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    figures = asyncio.run(run(args.escalations))
    print(json.dumps({k: v for k, v in figures.items() if k != "machine"}, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
