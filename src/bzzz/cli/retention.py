"""`bzzz retention run|status` and `bzzz forget --agent ID`.

``retention run`` and ``forget`` act as the local user of the data directory (an admin of every
project) through a tool node: with a node running on the same directory they join its network,
with none they start the embedded server for the time of the command. What they change is
recorded on the audit trail (``cli/audit.py``: ``recorded``). ``retention status`` reads the
settings and the data directory's store alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any

from bzzz.cli import output as out
from bzzz.cli import start as start

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from bzzz.config import Settings


def add_parser(sub: Any) -> None:
    """The `retention` command group and the `forget` command."""
    retention = sub.add_parser("retention", help="apply the retention settings, see past runs")
    commands = retention.add_subparsers(dest="retention_command", required=True)
    run = commands.add_parser("run", help="apply retention.* now on every node and the log")
    out.json_flag(run, '{"store": {...}, "stream": {...}}')
    status = commands.add_parser("status", help="the settings and the runs this node applied")
    out.json_flag(status, '{"settings": {...}, "runs": [...]}')
    forget = sub.add_parser(
        "forget", help="erase an agent's messages, memories and tasks' data on every node"
    )
    forget.add_argument("--agent", required=True, help="the agent id")
    out.json_flag(forget, '{"store": {...}, "stream": {...}}')


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run one `retention` command."""
    if args.retention_command == "status":
        return _status(args, settings)
    return asyncio.run(start.with_tool_node(settings, args, _run))


def forget(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz forget`."""
    return asyncio.run(start.with_tool_node(settings, args, _forget))


def _days(value: float) -> str:
    return "forever" if not value else f"{value:g} days"


async def _run(args: argparse.Namespace, node: Any) -> int:
    from bzzz.principal import LOCAL

    result = await node.retention.run(LOCAL)
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
        return 0
    store, stream = result["store"], result["stream"]
    kept = node.settings.retention
    sys.stdout.write(
        f"retention applied on every node: messages {_days(kept.messages_days)}, events "
        f"{_days(kept.events_days)}, memory {_days(kept.memory_days)}, audit "
        f"{_days(kept.audit_days)}\n"
        f"store: {store.get('messages', 0)} messages tombstoned, {store.get('events', 0)} "
        f"events and {store.get('memory', 0)} memories removed\n"
        f"log: {stream['removed']} envelopes purged ({stream['restated']} re-stated)\n"
    )
    return 0


async def _forget(args: argparse.Namespace, node: Any) -> int:
    from pydantic import TypeAdapter, ValidationError

    from bzzz.errors import InvalidParameters
    from bzzz.principal import LOCAL
    from bzzz.schemas import Identifier

    try:
        agent_id = TypeAdapter(Identifier).validate_python(args.agent)
    except ValidationError:
        raise InvalidParameters(f"--agent {args.agent[:128]!r} is not an agent id") from None
    result = await node.retention.forget(LOCAL, agent_id)
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
        return 0
    store, stream = result["store"], result["stream"]
    sys.stdout.write(
        f"forgot {agent_id} on every node: {store.get('messages', 0)} messages tombstoned, "
        f"{store.get('tasks', 0)} tasks blanked, {store.get('memories', 0)} memories removed; "
        f"log: {stream['removed']} envelopes removed\n"
    )
    return 0


async def _runs(session: AsyncSession) -> list[dict[str, Any]]:
    from sqlalchemy import select

    from bzzz.domain import iso
    from bzzz.store.models import RetentionRunRow

    rows = (
        await session.scalars(select(RetentionRunRow).order_by(RetentionRunRow.at.desc()).limit(50))
    ).all()
    return [
        {
            "id": r.id,
            "kind": r.kind,
            "at": iso(r.at),
            "origin": r.origin,
            "principal": r.principal,
            "cutoffs": r.cutoffs,
            "counts": r.counts,
        }
        for r in rows
    ]


def _status(args: argparse.Namespace, settings: Settings) -> int:
    runs = asyncio.run(start.read_store(settings, _runs))
    shown = {"settings": settings.retention.model_dump(), "runs": runs}
    if args.json:
        sys.stdout.write(json.dumps(shown) + "\n")
        return 0
    kept = settings.retention
    sys.stdout.write(
        f"messages {_days(kept.messages_days)}, events {_days(kept.events_days)}, memory "
        f"{_days(kept.memory_days)}, audit {_days(kept.audit_days)}\n"
    )
    for r in runs:
        sys.stdout.write(
            f"{r['at']}  {r['kind']}  by {r['principal']}  {json.dumps(r['counts'])}\n"
        )
    return 0
