"""`bzzz escalations` and `bzzz slurp`: what the threads raised, read from the store.

Thread escalations with the state of their actions, and the SLURP context events that
consensus produced (and whether this node submitted them). Both read the data directory's
store alone: no node starts, a running one is not disturbed.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any

from bzzz.cli import output as out
from bzzz.cli import start as start

if TYPE_CHECKING:
    from bzzz.config import Settings


def add_parser(sub: Any) -> None:
    """The `escalations` and `slurp` commands."""
    escalations = sub.add_parser("escalations", help="thread escalations and their actions")
    escalations.add_argument("--open", action="store_true", help="only unresolved ones")
    escalations.add_argument("--limit", type=int, default=50, help="newest N (default 50)")
    out.json_flag(escalations, '{"escalations": [EscalationEvent]}')
    slurp = sub.add_parser("slurp", help="SLURP context events from consensus")
    slurp.add_argument(
        "--status", choices=["pending", "submitted", "failed", "stored"], help="only this status"
    )
    slurp.add_argument("--limit", type=int, default=50, help="newest N (default 50)")
    out.json_flag(slurp, '{"node_id": ..., "events": [...]}')


def _action_cell(action: dict[str, Any]) -> str:
    cell = f"{action.get('type')}: {action.get('status')}"
    if action.get("attempts"):
        cell += f" ({action['attempts']}x)"
    if action.get("status") == "failed":
        cell += f" {action.get('code')} {action.get('error')}"
    return cell


def escalations(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz escalations`."""
    from bzzz.store.repository import Repository

    rows = asyncio.run(
        start.read_store(
            settings, lambda s: Repository(s).escalations(open_only=args.open, limit=args.limit)
        )
    )
    if args.json:
        out.print_json({"escalations": [e.to_json() for e in rows]})
        return 0
    columns = [
        out.Column("id", whole=True),
        out.Column("thread", whole=True),
        out.Column("rule"),
        out.Column("triggered", whole=True),
        out.Column("reason"),
        out.Column("actions"),
        out.Column("resolved"),
    ]
    cells = [
        [
            e.to_json()["id"],
            e.thread_id,
            e.rule,
            e.to_json()["triggeredAt"] or "",
            e.reason,
            "\n".join(_action_cell(a) for a in e.actions),
            (e.resolution or "yes") if e.resolved else "no",
        ]
        for e in rows
    ]
    out.print_table(f"escalations ({'open' if args.open else 'all'})", columns, cells)
    return 0


def slurp_json(ev: Any, node_id: str) -> dict[str, Any]:
    """A SLURP context event as `bzzz slurp --json` prints it."""
    from bzzz.domain import iso

    return {
        "id": ev.id,
        "thread_id": ev.thread_id,
        "status": ev.status,
        "attempts": ev.attempts,
        "created_at": iso(ev.created_at),
        "submitted_at": iso(ev.submitted_at),
        "origin": ev.origin,
        "this_node": ev.origin == node_id,
        "topic": str(ev.event.get("context", {}).get("topic", "")),
        "last_error": ev.last_error,
        "event": ev.event,
    }


def slurp(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz slurp`."""
    from bzzz.network.identity import KEY_FILE, NodeIdentity
    from bzzz.store.repository import Repository

    # The submission state is this node's: "remote" events are another node's to submit.
    data_dir = start.require_node(settings, KEY_FILE)
    node_id = NodeIdentity.load_or_create(data_dir).node_id
    rows = asyncio.run(
        start.read_store(
            settings, lambda s: Repository(s).slurp_events(node_id, args.status, args.limit)
        )
    )
    events = [slurp_json(ev, node_id) for ev in rows]
    if args.json:
        out.print_json({"node_id": node_id, "events": events})
        return 0
    columns = [
        out.Column("id", whole=True),
        out.Column("thread", whole=True),
        out.Column("status"),
        out.Column("attempts", justify="right"),
        out.Column("created", whole=True),
        out.Column("submitted by", whole=True),
        out.Column("topic"),
        out.Column("last error"),
    ]
    cells = [
        [
            ev["id"],
            ev["thread_id"],
            ev["status"],
            str(ev["attempts"]),
            ev["created_at"] or "",
            "this node" if ev["this_node"] else ev["origin"],
            ev["topic"],
            ev["last_error"] or "",
        ]
        for ev in events
    ]
    title = f"SLURP context events of node {node_id} ({args.status or 'all'})"
    out.print_table(title, columns, cells)
    return 0
