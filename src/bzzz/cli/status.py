"""`bzzz status`: is a node running on the data directory, where, and how much work it holds.

``running``: the nodes serving from the data directory, from their serving files
(cli/serving.py; ``source`` names the file), each with its own ``/healthz`` when it serves
HTTP (``health``: state, projector, forwarding …; None when it did not answer within a second).
``store``: the counts of the data directory's store (agents by status, threads and tasks by
status), read beside a running node as the other read commands do; None when no node has ever
run there. Counts and ids only: nothing protected is read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any

from bzzz.cli import output as out
from bzzz.cli import serving as serving
from bzzz.cli import start as start

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from bzzz.config import Settings

HEALTH_TIMEOUT = 1.0
# /healthz answers a few kilobytes; a larger body is not read whole.
HEALTH_MAX_BYTES = 1_000_000


def add_parser(sub: Any) -> None:
    """The `status` command."""
    status = sub.add_parser(
        "status", help="whether a node runs on the data directory, its URLs, and its counts"
    )
    out.json_flag(status, '{"data_dir": ..., "running": [Node], "store": {counts} | null}')


def _health(url: str) -> dict[str, Any] | None:
    """The node's /healthz (200 or 503 both say how it is); None if it does not answer."""
    import urllib.error
    import urllib.request

    if not url.startswith("http://"):
        return None  # a node serves plain HTTP on its bound address; nothing else is asked
    try:
        with urllib.request.urlopen(url, timeout=HEALTH_TIMEOUT) as response:
            body = response.read(HEALTH_MAX_BYTES)
    except urllib.error.HTTPError as exc:
        body = exc.read(HEALTH_MAX_BYTES)
    except (OSError, ValueError):
        return None
    try:
        found = json.loads(body)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


async def _counts(session: AsyncSession) -> dict[str, Any]:
    from sqlalchemy import func, select

    from bzzz.store.models import AgentRow, TaskRow, ThreadRow

    async def by_status(model: Any) -> dict[str, int]:
        rows = await session.execute(select(model.status, func.count()).group_by(model.status))
        return {str(status): int(count) for status, count in rows.all()}

    agents = await by_status(AgentRow)
    return {
        "agents": {
            "total": sum(agents.values()),
            "online": sum(n for status, n in agents.items() if status != "offline"),
            "by_status": agents,
        },
        "threads": await by_status(ThreadRow),
        "tasks": await by_status(TaskRow),
    }


def node_status(settings: Settings) -> dict[str, Any]:
    """What `bzzz status --json` prints."""
    data_dir = settings.node.data_dir.expanduser()
    running = serving.running(data_dir)
    for facts in running:
        url = facts.get("health_url")
        facts["health"] = _health(url) if isinstance(url, str) else None
    has_store = bool(settings.node.database_url) or (data_dir / "bzzz.db").is_file()
    store = asyncio.run(start.read_store(settings, _counts)) if has_store else None
    return {
        "data_dir": str(data_dir),
        "network": settings.bzzz.network_id,
        "running": running,
        "store": store,
    }


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz status`."""
    shown = node_status(settings)
    if args.json:
        out.print_json(shown)
        return 0
    lines = [f"data directory {shown['data_dir']} (network {shown['network']})"]
    if not shown["running"]:
        lines.append("no node is running on it (start one with `bzzz serve`)")
    for facts in shown["running"]:
        lines.extend(_running_lines(facts))
    store = shown["store"]
    if store is None:
        lines.append("no store: no node has run here yet")
    else:
        agents = store["agents"]
        lines.append(f"agents: {agents['online']} online of {agents['total']}")
        lines.append(f"threads: {_by_status(store['threads'])}")
        lines.append(f"tasks: {_by_status(store['tasks'])}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _running_lines(facts: dict[str, Any]) -> list[str]:
    health = facts["health"]
    state = health.get("state", "?") if health else "not answering"
    head = f"node {facts.get('node_id')} (slot {facts.get('slot')}, pid {facts['pid']}): {state}"
    lines = [head]
    if facts.get("mcp_url"):
        lines.append(f"  MCP       {facts['mcp_url']}")
        lines.append(f"  dashboard {facts['dashboard_url']}")
        lines.append(f"  REST      {facts['api_url']}")
    else:
        lines.append(f"  MCP over {facts.get('transport', 'stdio')}")
    lines.append(f"  (from {facts['source']})")
    return lines


def _by_status(counts: dict[str, int]) -> str:
    if not counts:
        return "none"
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
