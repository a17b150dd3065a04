"""`bzzz subscriptions list|delete` and `bzzz webhooks [redrive]`: the network's event
subscriptions and this node's webhook deliveries.

The lists read the data directory's store (no node starts); ``subscriptions delete`` stores a
removal on the network's log, ``webhooks redrive`` queues dead deliveries in this node's store
(``events.admin``). Tables never cut an id or a URL (``cli/output.py``).
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

EXIT_ERROR = 1


def add_parser(sub: Any) -> None:
    """The `webhooks` and `subscriptions` command groups."""
    webhooks = sub.add_parser("webhooks", help="webhook deliveries (the dead letters too)")
    webhooks.add_argument(
        "--status", choices=["pending", "delivered", "dead"], help="only this status"
    )
    webhooks.add_argument("--limit", type=int, default=50, help="newest N (default 50)")
    out.json_flag(webhooks, '{"deliveries": [...]}')
    webhooks_sub = webhooks.add_subparsers(dest="webhooks_command")
    redrive = webhooks_sub.add_parser("redrive", help="send dead-lettered deliveries again")
    redrive.add_argument("ids", nargs="*", type=int, help="delivery ids (see bzzz webhooks)")
    redrive.add_argument("--all", action="store_true", help="every dead-lettered delivery")
    subscriptions = sub.add_parser("subscriptions", help="the network's event subscriptions")
    subscriptions_sub = subscriptions.add_subparsers(dest="subscriptions_command", required=True)
    listing = subscriptions_sub.add_parser("list", help="list them (newest first)")
    out.json_flag(listing, '{"subscriptions": [...]}')
    listing.add_argument("--limit", type=int, default=1000, help="newest N (default 1000)")
    deleting = subscriptions_sub.add_parser("delete", help="remove one from the network")
    deleting.add_argument("id", help="the subscription id")


def webhooks(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz webhooks` or `bzzz webhooks redrive`."""
    if args.webhooks_command == "redrive":
        return _redrive(args, settings)
    rows = [delivery_json(d) for d in asyncio.run(_deliveries(settings, args.status, args.limit))]
    if args.json:
        out.print_json({"deliveries": rows})
        return 0
    columns = [
        out.Column("id", whole=True),
        out.Column("status"),
        out.Column("attempts", justify="right"),
        out.Column("url", whole=True),
        out.Column("event", whole=True),
        out.Column("next attempt", whole=True),
        out.Column("last error"),
    ]
    cells = [
        [
            str(d["id"]),
            d["status"],
            str(d["attempts"]),
            d["url"],
            d["event_id"],
            d["next_attempt_at"] or "",
            d["last_error"] or "",
        ]
        for d in rows
    ]
    out.print_table(f"webhook deliveries ({args.status or 'all'})", columns, cells)
    return 0


async def _deliveries(settings: Settings, status: str | None, limit: int) -> list[Any]:
    from bzzz.store.repository import Repository

    return await start.read_store(settings, lambda s: Repository(s).deliveries(status, limit))


def delivery_json(d: Any) -> dict[str, Any]:
    """A webhook delivery as `bzzz webhooks --json` prints it."""
    from bzzz.domain import iso

    return {
        "id": d.id,
        "subscription_id": d.subscription_id,
        "event_id": d.event_id,
        "url": d.url,
        "status": d.status,
        "attempts": d.attempts,
        "next_attempt_at": iso(d.next_attempt_at) if d.status == "pending" else None,
        "last_error": d.last_error,
        "created_at": iso(d.created_at),
        "finished_at": iso(d.finished_at),
    }


def _redrive(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz.events.admin import redrive_deliveries

    if bool(args.ids) == bool(args.all):
        print("bzzz: name delivery ids or --all (not both)", file=sys.stderr)
        return EXIT_ERROR
    ids = asyncio.run(redrive_deliveries(settings, None if args.all else list(args.ids)))
    shown = ", ".join(map(str, ids[:20])) + (" …" if len(ids) > 20 else "")
    sys.stdout.write(f"queued {len(ids)} dead-lettered deliveries again{': ' if ids else ''}")
    sys.stdout.write(f"{shown}\n")
    return 0


def subscriptions(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz subscriptions list|delete`."""
    from bzzz.events import admin

    if args.subscriptions_command == "delete":
        seq = asyncio.run(admin.delete_subscription(settings, args.id))
        sys.stdout.write(f"removed {args.id} (log sequence {seq}; every node applies it)\n")
        return 0
    start.require_node(settings)
    listed = asyncio.run(admin.list_subscriptions(settings, args.limit))
    shown = [admin.subscription_json(s) for s in listed]
    if args.json:
        out.print_json({"subscriptions": shown})
        return 0
    columns = [
        out.Column("id", whole=True),
        out.Column("status"),
        out.Column("subscriber", whole=True),
        out.Column("event types"),
        out.Column("filter"),
        out.Column("webhook", whole=True),
        out.Column("node", whole=True),
        out.Column("created", whole=True),
    ]
    cells = [
        [
            s["subscription_id"],
            str(s["status"]),
            s["subscriber_id"],
            ", ".join(s["event_types"]),
            s["filter_address"] or "",
            s["callback_webhook"] or "",
            s["node_id"],
            s["created_at"] or "",
        ]
        for s in shown
    ]
    out.print_table("subscriptions", columns, cells)
    return 0
