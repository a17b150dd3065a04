"""`bzzz metrics` (the seed's metrics) and `bzzz costs` (model spending), from the store.

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
from typing import TYPE_CHECKING, Any

from bzzz.cli import output as out
from bzzz.cli import start as start

if TYPE_CHECKING:
    from bzzz.config import Settings
    from bzzz.metrics.figures import Figures

LIVE_ONLY = "live only: read /metrics or bzzz://metrics of a running node"


def add_parser(sub: Any) -> None:
    """The `metrics` and `costs` commands."""
    metrics = sub.add_parser("metrics", help="the network's metrics, from the store")
    out.json_flag(metrics, "the figures, each under its name")
    costs = sub.add_parser("costs", help="model spending today and this month, per model")
    costs.add_argument("--node", help="only this node's calls (a node id)")
    out.json_flag(costs, '{"daily": CostUsage, "monthly": CostUsage}')


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the metrics."""
    from bzzz.metrics.figures import read_figures

    shown = figures_json(asyncio.run(start.read_store(settings, read_figures)))
    shown["network_latency"] = asyncio.run(_latency(settings))
    if args.json:
        out.print_json(shown)
        return 0
    _table(shown)
    return 0


def figures_json(figures: Figures) -> dict[str, Any]:
    """The store's figures with the live ones marked as such."""
    from bzzz.domain import iso, utcnow

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


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def _usd(value: float | None) -> str:
    return "n/a" if value is None else f"${value:.6f}"


def _table(shown: dict[str, Any]) -> None:
    # With measured round trips the column names node ids: whole, or the list layout.
    pairs = bool(shown["network_latency"].get("pairs"))
    columns = [
        out.Column("metric"),
        out.Column("value", justify="right"),
        out.Column("from", whole=pairs),
    ]
    rows = [list(row) for row in _rows(shown)]
    out.print_table(f"BZZZ metrics (from the store, {shown['at']})", columns, rows)


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
        ("network latency", f"{p['last_ms']:.2f} ms", f"{p['from']} -> {p['to']}") for p in pairs
    ]


async def _usage(settings: Settings, node_id: str | None) -> list[dict[str, Any]]:
    from bzzz.domain import utcnow
    from bzzz.llm.costs import cost_usage, periods
    from bzzz.store.llm_repository import LLMRepository

    day, month = periods(utcnow())

    async def query(session: Any) -> list[dict[str, Any]]:
        repo = LLMRepository(session)
        return [
            cost_usage(day, await repo.usage("day", day, node_id)),
            cost_usage(month, await repo.usage("month", month, node_id)),
        ]

    return await start.read_store(settings, query)


def costs(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz costs`."""
    daily, monthly = asyncio.run(_usage(settings, args.node))
    if args.json:
        out.print_json({"daily": daily, "monthly": monthly})
        return 0
    scope = f"node {args.node}" if args.node else "all nodes"
    columns = [
        out.Column("period", whole=True),
        out.Column("model", whole=True),
        *(
            out.Column(name, justify="right")
            for name in ("calls", "tokens", "cost (USD)", "limit (USD)")
        ),
    ]
    limits = {
        daily["date"]: settings.cost.daily_limit,
        monthly["date"]: settings.cost.monthly_limit,
    }
    cells = []
    for usage in (daily, monthly):
        for model, spend in usage["models"].items():
            row = [str(spend["calls"]), str(spend["tokens"]), f"{spend['cost']:.6f}", ""]
            cells.append([usage["date"], model, *row])
        limit = limits[usage["date"]]
        cells.append(
            [
                usage["date"],
                "total",
                str(usage["apiCalls"]),
                str(usage["tokens"]["total"]),
                f"{usage['totalCost']:.6f}",
                f"{limit:.2f}" if limit else "none",
            ]
        )
    out.print_table(f"model spending ({scope})", columns, cells)
    return 0
