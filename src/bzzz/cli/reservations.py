"""`bzzz reservations list`: the live path reservations, read from the data directory's store;
`bzzz reservations check`: may an agent write these paths now (asks the running node).

`list` reads the store alone (no node starts; a running one is not disturbed), as the local
user of the data directory: every project's. Expired reservations are not shown. `check` is
one of the light commands (``bzzz.light.check``): the `bzzz` executable runs it without this
package; here it is parsed for `bzzz reservations check --help` and for callers of
:func:`bzzz.cli.main`.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any

from bzzz.cli import output as out
from bzzz.cli import start as start
from bzzz.light import check as light_check

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from bzzz.config import Settings


def add_parser(sub: Any) -> None:
    """The `reservations` command."""
    reservations = sub.add_parser("reservations", help="path reservations of the agents")
    actions = reservations.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="the live reservations (every project)")
    listing.add_argument("--project", help="only this project's")
    listing.add_argument("--agent", help="only this agent's")
    out.json_flag(listing, '{"reservations": [Reservation]}')
    checking = actions.add_parser(
        "check",
        help="may an agent write these paths now (exit 0 yes, 1 held, 2 no answer, 3 said no)",
        description="Ask the running node whether an agent may write each path: who holds it "
        "otherwise, and the fencing token of the agent's own reservation.",
    )
    light_check.add_arguments(checking)


async def _live(session: AsyncSession, project: str | None, agent: str | None) -> list[Any]:
    from sqlalchemy import select

    from bzzz.domain import utcnow
    from bzzz.reservations.projection import reservation_json
    from bzzz.store.models import ReservationRow

    query = select(ReservationRow).where(ReservationRow.expires_at > utcnow())
    if project is not None:
        query = query.where(ReservationRow.project == project)
    if agent is not None:
        query = query.where(ReservationRow.agent_id == agent)
    query = query.order_by(ReservationRow.project, ReservationRow.created_at, ReservationRow.id)
    return [reservation_json(row) for row in await session.scalars(query)]


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run `bzzz reservations list` or `check`."""
    if args.action == "check":
        return light_check.run(args, data_dir=str(settings.node.data_dir), config=args.config)
    rows = asyncio.run(start.read_store(settings, lambda s: _live(s, args.project, args.agent)))
    if args.json:
        out.print_json({"reservations": rows})
        return 0
    columns = [
        out.Column("id", whole=True),
        out.Column("project"),
        out.Column("agent", whole=True),
        out.Column("mode"),
        out.Column("paths"),
        out.Column("expires", whole=True),
        out.Column("token", whole=True),
        out.Column("reason"),
    ]
    cells = [
        [
            r["id"],
            r["project"] or "",
            r["agent_id"],
            r["mode"],
            "\n".join(r["paths"]),
            r["expires_at"],
            str(r["fencing_token"]),
            r["reason"] or "",
        ]
        for r in rows
    ]
    out.print_table("path reservations (live)", columns, cells)
    return 0
