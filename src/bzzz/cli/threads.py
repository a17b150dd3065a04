"""`bzzz escalations [list|ack|resolve]` and `bzzz slurp`: what the threads raised.

Thread escalations with the state of their actions and their paging (who was paged, who
answered), and the SLURP context events that consensus produced (and whether this node
submitted them). The lists read the data directory's store alone: no node starts, a running one
is not disturbed. ``ack`` and ``resolve`` act as the local user of the data directory (an admin
of every project) through a tool node that joins the network, and are on the audit trail.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any

from bzzz.cli import output as out
from bzzz.cli import start as start

if TYPE_CHECKING:
    from bzzz.config import Settings


def add_parser(sub: Any) -> None:
    """The `escalations` and `slurp` commands."""
    escalations = sub.add_parser(
        "escalations", help="thread escalations, their actions and paging; ack or resolve one"
    )
    _list_options(escalations, argparse.SUPPRESS)
    commands = escalations.add_subparsers(dest="escalations_command")
    _list_options(commands.add_parser("list", help="escalations (the default)"), None)
    ack = commands.add_parser("ack", help="acknowledge an escalation: its paging stops")
    ack.add_argument("id", help="the escalation id (esc-…)")
    ack.add_argument("--as", dest="as_name", help="the person answering (default: your login)")
    out.json_flag(ack, '{"escalation_id": ..., "ack": {...}}')
    resolve = commands.add_parser("resolve", help="resolve an escalation (acknowledging it)")
    resolve.add_argument("id", help="the escalation id (esc-…)")
    resolve.add_argument("--reason", required=True, help="what was decided")
    resolve.add_argument("--as", dest="as_name", help="the person answering (default: your login)")
    out.json_flag(resolve, '{"escalation_id": ..., "resolved_by": ..., "thread": {...}}')
    slurp = sub.add_parser("slurp", help="SLURP context events from consensus")
    slurp.add_argument(
        "--status", choices=["pending", "submitted", "failed", "stored"], help="only this status"
    )
    slurp.add_argument("--limit", type=int, default=50, help="newest N (default 50)")
    out.json_flag(slurp, '{"node_id": ..., "events": [...]}')


def _list_options(parser: Any, default: Any) -> None:
    # On the group and on `list` alike; the group's are not overwritten by list's defaults.
    def given(value: Any) -> Any:
        return argparse.SUPPRESS if default is argparse.SUPPRESS else value

    shape = '{"escalations": [EscalationEvent with paging]}'
    parser.add_argument(
        "--open", action="store_true", default=given(False), help="only unresolved ones"
    )
    parser.add_argument("--limit", type=int, default=given(50), help="newest N (default 50)")
    parser.add_argument(
        "--json", action="store_true", default=given(False), help=f"print JSON: {shape}"
    )


def _action_cell(action: dict[str, Any]) -> str:
    cell = f"{action.get('type')}: {action.get('status')}"
    if action.get("attempts"):
        cell += f" ({action['attempts']}x)"
    if action.get("status") == "failed":
        cell += f" {action.get('code')} {action.get('error')}"
    return cell


def escalations(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz escalations [list|ack|resolve]`."""
    command = getattr(args, "escalations_command", None)
    if command in ("ack", "resolve"):
        return asyncio.run(start.with_tool_node(settings, args, _answer))
    return _list(args, settings)


async def _answer(args: argparse.Namespace, node: Any) -> int:
    import getpass

    from bzzz.eventlog import Caller
    from bzzz.principal import LOCAL

    caller = Caller("cli", LOCAL)
    by = args.as_name or getpass.getuser()
    if args.escalations_command == "ack":
        result = await node.answers.ack(caller, args.id, as_name=by, via="cli")
        line = f"acknowledged {args.id} as {result['ack']['by']}: its paging stops\n"
    else:
        result = await node.answers.resolve(caller, args.id, args.reason, as_name=by, via="cli")
        line = f"resolved {args.id} as {result['resolved_by']}\n"
    if args.json:
        out.print_json(result)
    else:
        sys.stdout.write(line)
    return 0


def _paging_cell(paging: dict[str, Any]) -> str:
    lines = [
        f"{p['step']}. {p['name']} ({p['channel']}) {p['paged_at']} {p['status']}"
        for p in paging.get("pages", [])
    ]
    ack = paging.get("ack")
    if ack:
        lines.append(f"acked by {ack['by']} ({ack['via']}) {ack['at']}")
    return "\n".join(lines)


async def _listed(settings: Settings, open_only: bool, limit: int) -> list[dict[str, Any]]:
    from bzzz.conversations.paging_projection import ack_json, page_json
    from bzzz.store.paging_repository import PagingRepository
    from bzzz.store.repository import Repository

    async def query(session: Any) -> list[dict[str, Any]]:
        rows = await Repository(session).escalations(open_only=open_only, limit=limit)
        ids = [e.id for e in rows]
        paging = PagingRepository(session)
        pages, acks = await paging.pages(ids), await paging.acks(ids)
        return [
            e.to_json()
            | {
                "paging": {
                    "pages": [page_json(p) for p in pages[e.id]],
                    "ack": ack_json(acks[e.id]) if e.id in acks else None,
                }
            }
            for e in rows
        ]

    return await start.read_store(settings, query)


def _list(args: argparse.Namespace, settings: Settings) -> int:
    # The group's options are suppressed when not given (so `list`'s own are not overwritten).
    open_only, limit = getattr(args, "open", False), getattr(args, "limit", 50)
    shown = asyncio.run(_listed(settings, open_only, limit))
    if getattr(args, "json", False):
        out.print_json({"escalations": shown})
        return 0
    columns = [
        out.Column("id", whole=True),
        out.Column("thread", whole=True),
        out.Column("rule"),
        out.Column("triggered", whole=True),
        out.Column("reason"),
        out.Column("actions"),
        out.Column("paging"),
        out.Column("resolved"),
    ]
    cells = [
        [
            e["id"],
            e["threadId"],
            e["rule"],
            e["triggeredAt"] or "",
            e["reason"],
            "\n".join(_action_cell(a) for a in e["actions"]),
            _paging_cell(e["paging"]),
            (e["resolution"] or "yes") if e["resolved"] else "no",
        ]
        for e in shown
    ]
    out.print_table(f"escalations ({'open' if open_only else 'all'})", columns, cells)
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
