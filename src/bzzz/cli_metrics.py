"""`bzzz metrics`: the seed's metrics from the store, as a table or JSON.

Every rate is derived from the store (agents, tasks, threads, escalations, the cost ledger), so
the command opens the store alone: no node is started, and a running one is not disturbed.
The context compression ratio is a live figure of a running node: it is on its /metrics and
``bzzz://metrics``, and the command says so. Network latency between nodes is read from the
peer board, where each running node puts its last round trip to each peer in its heartbeat;
without a reachable board it is shown as live only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from bzzz.config import Settings
from bzzz.domain import iso, utcnow
from bzzz.metrics.figures import Figures, read_figures

LIVE_ONLY = "live only: read /metrics or bzzz://metrics of a running node"


def add_parser(sub: Any) -> None:
    """The `metrics` command."""
    metrics = sub.add_parser("metrics", help="the network's metrics, from the store")
    metrics.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the metrics."""
    figures = asyncio.run(_figures(settings))
    shown = figures_json(figures)
    shown["network_latency"] = asyncio.run(_latency(settings))
    if args.json:
        sys.stdout.write(json.dumps(shown, indent=2) + "\n")
        return 0
    _table(shown)
    return 0


def figures_json(figures: Figures) -> dict[str, Any]:
    """The store's figures with the live ones marked as such."""
    return {
        "at": iso(utcnow()),
        **figures.to_json(),
        "context_compression_ratio": {"ratio": None, "live": False, "note": LIVE_ONLY},
        "network_latency": {"live": False, "note": LIVE_ONLY},
    }


async def _latency(settings: Settings) -> dict[str, Any]:
    """The round trips the running nodes last measured, from their heartbeats on the board."""
    from bzzz.errors import BzzzError
    from bzzz.peers.board import read_board
    from bzzz.peers.latency import MEASURED

    try:
        async with asyncio.timeout(15):
            peers = await read_board(settings)
    except (BzzzError, TimeoutError) as exc:
        reason = exc.message if isinstance(exc, BzzzError) else "the peer board did not answer"
        return {"live": False, "note": f"{LIVE_ONLY} ({reason})"}
    pairs = [
        {"from": peer.id, "to": other, "last_ms": ms}
        for peer in peers
        if peer.status != "offline"
        for other, ms in sorted(peer.latency.items())
    ]
    return {"live": True, "measured": f"{MEASURED} (each node's last, from its heartbeat)",
            "pairs": pairs}  # fmt: skip


async def _figures(settings: Settings) -> Figures:
    from bzzz.network.sealing import keyring_of
    from bzzz.store.database import Database

    db = Database(settings.database_url(), keyring_of(settings, create=False))
    try:
        await db.open()
        async with db.session() as session:
            return await read_figures(session)
    finally:
        await db.close()


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def _usd(value: float | None) -> str:
    return "n/a" if value is None else f"${value:.6f}"


def _table(shown: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"BZZZ metrics (from the store, {shown['at']})")
    for column in ("metric", "value", "from"):
        table.add_column(column, justify="right" if column == "value" else "left")
    for row in _rows(shown):
        table.add_row(*row)
    Console().print(table)


def _rows(s: dict[str, Any]) -> list[tuple[str, str, str]]:
    avail, tasks = s["agent_availability"], s["task_completion_rate"]
    response, esc = s["average_response_time"], s["thread_escalation_rate"]
    human, consensus = s["escalation_rate"], s["consensus_success_rate"]
    interaction, task = s["cost_per_interaction"], s["cost_per_task"]
    finished = tasks["by_status"].get("completed", 0) + tasks["by_status"].get("failed", 0)
    seconds = response["seconds"]
    return [
        (
            "agent availability",
            _percent(avail["ratio"]),
            f"{avail['available']}/{avail['total']} agents",
        ),
        ("task completion rate", _percent(tasks["ratio"]), f"{finished} finished tasks"),
        (
            "average response time",
            "n/a" if seconds is None else f"{seconds:.1f} s",
            f"{response['tasks']} completed tasks",
        ),
        (
            "thread escalation rate",
            _percent(esc["ratio"]),
            f"{esc['escalated']}/{esc['threads']} threads",
        ),
        (
            "escalation rate (to humans)",
            _percent(human["ratio"]),
            f"{human['to_humans']}/{human['threads']} threads",
        ),
        (
            "consensus success rate",
            _percent(consensus["ratio"]),
            f"{consensus['reached']}/{consensus['discussions']} discussions",
        ),
        (
            "cost per interaction",
            _usd(interaction["usd"]),
            f"{interaction['interactions']} model calls",
        ),
        ("cost per task", _usd(task["usd"]), f"{task['tasks']} hosted-agent tasks"),
        ("context compression ratio", "n/a", LIVE_ONLY),
        *_latency_rows(s["network_latency"]),
    ]


def _latency_rows(latency: dict[str, Any]) -> list[tuple[str, str, str]]:
    pairs = latency.get("pairs") or []
    if not pairs:
        return [("network latency", "n/a", latency.get("note") or "no peer measured yet")]
    return [
        ("network latency", f"{p['last_ms']:.2f} ms", f"{p['from'][:12]} -> {p['to'][:12]}")
        for p in pairs
    ]
