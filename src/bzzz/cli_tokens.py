"""`bzzz token create|list|revoke`: network tokens, through a node that joins the network.

The command acts as the local user of the data directory (an admin of every project), as a
stdio process does. With a node running on the same directory it joins that node's network;
with none, it starts the embedded server for the time of the command.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from bzzz.access.tokens import parse_duration
from bzzz.cli_start import with_tool_node
from bzzz.config import Settings
from bzzz.domain import utcnow
from bzzz.errors import InvalidParameters
from bzzz.principal import LOCAL, Scope


def add_parser(sub: Any) -> None:
    """The `token` command group."""
    token = sub.add_parser("token", help="network tokens: create, list, revoke")
    commands = token.add_subparsers(dest="token_command", required=True)
    create = commands.add_parser("create", help="mint a token (printed once)")
    create.add_argument("name", help="who or what holds it")
    create.add_argument(
        "--project", action="append", required=True, help="a granted project ('*' = all)"
    )
    create.add_argument("--role", action="append", help="a role it may announce ('*' = all)")
    create.add_argument("--scope", choices=["read", "write", "admin"], default="write")
    create.add_argument("--expires", help="lifetime such as 30d, 12h (default: never)")
    create.add_argument("--json", action="store_true", help="print the token as JSON")
    listing = commands.add_parser("list", help="every token and its status (never a secret)")
    listing.add_argument("--json", action="store_true", help="print JSON")
    revoke = commands.add_parser("revoke", help="revoke a token on every node")
    revoke.add_argument("id", help="the token id (tok-…)")
    revoke.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run one `token` command."""
    commands: dict[str, Callable[[argparse.Namespace, Any], Awaitable[int]]] = {
        "create": _create,
        "list": _list,
        "revoke": _revoke,
    }
    return asyncio.run(with_tool_node(settings, args, commands[args.token_command]))


async def _create(args: argparse.Namespace, node: Any) -> int:
    try:
        expires = parse_duration(args.expires) if args.expires else None
    except ValueError as exc:
        raise InvalidParameters(str(exc)) from None
    record, secret = await node.access.create_token(
        LOCAL, args.name, args.project, args.role or ["*"], Scope.parse(args.scope), expires
    )
    shown = record.to_json(utcnow())
    if args.json:
        sys.stdout.write(json.dumps(shown | {"token": secret}) + "\n")
        return 0
    sys.stdout.write(
        f"token {record.id} ({record.name}): projects {', '.join(record.projects)}; "
        f"roles {', '.join(record.roles)}; scope {record.scope.label}; "
        f"expires {shown['expires_at'] or 'never'}\n"
        "Store it now: it is not shown again.\n"
    )
    sys.stdout.write(secret + "\n")
    return 0


async def _list(args: argparse.Namespace, node: Any) -> int:
    now = utcnow()
    tokens = [t.to_json(now) for t in node.access.list_tokens(LOCAL)]
    if args.json:
        sys.stdout.write(json.dumps({"tokens": tokens}) + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="network tokens")
    for column in ("id", "name", "projects", "roles", "scope", "status", "expires"):
        table.add_column(column, overflow="fold")
    for t in tokens:
        table.add_row(
            t["id"],
            t["name"],
            ", ".join(t["projects"]),
            ", ".join(t["roles"]),
            t["scope"],
            t["status"],
            t["expires_at"] or "never",
        )
    Console(width=200 if not sys.stdout.isatty() else None).print(table)
    return 0


async def _revoke(args: argparse.Namespace, node: Any) -> int:
    record = await node.access.revoke_token(LOCAL, args.id)
    if args.json:
        sys.stdout.write(json.dumps(record.to_json(utcnow())) + "\n")
    else:
        sys.stdout.write(f"revoked {record.id} ({record.name}) on every node\n")
    return 0
