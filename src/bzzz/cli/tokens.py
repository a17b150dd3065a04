"""`bzzz token create|list|revoke`: network tokens, without starting a node.

The commands act as the local user of the data directory (an admin of every project), as a
stdio process does, through the access service's own rules. ``create --agent`` makes an agent
token: a credential that is that one agent (it announces that id alone, and every call with
it acts as that agent), so a client configured with one header needs no handle or session.
``list`` reads the data directory's store (current while a node runs there). ``create`` and
``revoke`` store one envelope on the network's log with the data directory's key
(``cli/log.py``): with a node running on the same directory they join its embedded server;
with none, they start it for the time of the command. Once the command answers, the change is
on the log and every node applies it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from typing import TYPE_CHECKING, Any

from bzzz.cli import output as out
from bzzz.cli import start as start
from bzzz.errors import BzzzError, InvalidParameters

if TYPE_CHECKING:
    from bzzz.access.service import AccessService, TokenLog
    from bzzz.access.tokens import TokenRegistry
    from bzzz.config import Settings


def add_parser(sub: Any) -> None:
    """The `token` command group."""
    token = sub.add_parser("token", help="network tokens: create, list, revoke")
    commands = token.add_subparsers(dest="token_command", required=True)
    create = commands.add_parser("create", help="mint a token (printed once)")
    create.add_argument("name", help="who or what holds it")
    create.add_argument(
        "--project", action="append", required=True, help="a granted project ('*' = all)"
    )
    create.add_argument(
        "--agent",
        metavar="AGENT_ID",
        help="the token is this one agent: it announces that id only, and every call with it "
        "acts as that agent (one --project; scope read or write)",
    )
    create.add_argument("--role", action="append", help="a role it may announce ('*' = all)")
    create.add_argument("--scope", choices=["read", "write", "admin"], default="write")
    create.add_argument("--expires", help="lifetime such as 30d, 12h (default: never)")
    out.json_flag(create, "the token with its secret under 'token'")
    listing = commands.add_parser("list", help="every token and its status (never a secret)")
    out.json_flag(listing, '{"tokens": [...]}')
    revoke = commands.add_parser("revoke", help="revoke a token on every node")
    revoke.add_argument("id", help="the token id (tok-…)")
    out.json_flag(revoke, "the revoked token")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run one `token` command."""
    if args.token_command == "create":
        return asyncio.run(_create(args, settings))
    if args.token_command == "revoke":
        return asyncio.run(_revoke(args, settings))
    return _list(args, asyncio.run(_stored_tokens(settings)))


def _service(tokens: TokenRegistry, log: TokenLog | None = None) -> AccessService:
    from bzzz.access.service import AccessService

    return AccessService(tokens, [], required=False, log=log)


# What `bzzz token create` says when its token is the node's first credential.
FIRST_CREDENTIAL = (
    "bzzz: warning: this node had no credential until now. From now on HTTP callers without a "
    "token are refused (401): every configured MCP client, the dashboard and curl need "
    "'Authorization: Bearer <token>'. Keep an admin token for yourself: run `bzzz init`.\n"
)


async def node_is_open(settings: Settings) -> bool:
    """Whether the data directory's node lets HTTP callers in without a credential: loopback,
    no admin token, no issuer and no network token in its store (a node never run has none)."""
    from bzzz.access.service import AccessService, serves_loopback_only
    from bzzz.access.tokens import TokenRegistry

    tokens = TokenRegistry()
    with contextlib.suppress(BzzzError):  # no node has run here: its store holds no token yet
        tokens = await _stored_tokens(settings)
    access = AccessService(
        tokens,
        settings.node.auth_tokens,
        required=settings.auth.required,
        loopback=serves_loopback_only(settings.node.http_host),
        issuer=bool(settings.auth.issuer),
    )
    return not access.required


async def _stored_tokens(settings: Settings) -> TokenRegistry:
    """The network's tokens as the data directory's store has them."""
    from bzzz.access.tokens import TokenRegistry

    start.require_node(settings)
    tokens = TokenRegistry()
    async with start.opened_store(settings) as db:
        await tokens.load(db)
    return tokens


async def _create(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz.access.tokens import TokenRegistry, parse_duration
    from bzzz.cli import log as cli_log
    from bzzz.domain import utcnow
    from bzzz.principal import LOCAL, Scope

    try:
        expires = parse_duration(args.expires) if args.expires else None
    except ValueError as exc:
        raise InvalidParameters(str(exc)) from None
    was_open = await node_is_open(settings)
    tokens = TokenRegistry()
    async with cli_log.joined(settings) as log:
        log.applied.append(tokens.on_applied)
        record, secret = await _service(tokens, log).create_token(
            LOCAL,
            args.name,
            args.project,
            args.role or ["*"],
            Scope.parse(args.scope),
            expires,
            agent=args.agent,
        )
    if was_open:
        sys.stderr.write(FIRST_CREDENTIAL)
    shown = record.to_json(utcnow())
    if args.json:
        sys.stdout.write(json.dumps(shown | {"token": secret}) + "\n")
        return 0
    sys.stdout.write(
        f"token {record.id} ({record.name}): projects {', '.join(record.projects)}; "
        f"roles {', '.join(record.roles)}; scope {record.scope.label}; "
        + (f"agent {record.agent}; " if record.agent else "")
        + f"expires {shown['expires_at'] or 'never'}\n"
        "Store it now: it is not shown again.\n"
    )
    sys.stdout.write(secret + "\n")
    return 0


def _list(args: argparse.Namespace, tokens: TokenRegistry) -> int:
    from bzzz.domain import utcnow
    from bzzz.principal import LOCAL

    now = utcnow()
    shown: list[dict[str, Any]] = [t.to_json(now) for t in _service(tokens).list_tokens(LOCAL)]
    if args.json:
        out.print_json({"tokens": shown})
        return 0
    columns = [
        out.Column("id", whole=True),
        out.Column("name"),
        out.Column("projects"),
        out.Column("roles"),
        out.Column("scope"),
        out.Column("agent", whole=True),
        out.Column("status"),
        out.Column("expires", whole=True),
    ]
    cells = [
        [
            t["id"],
            t["name"],
            ", ".join(t["projects"]),
            ", ".join(t["roles"]),
            t["scope"],
            t["agent"] or "",
            t["status"],
            t["expires_at"] or "never",
        ]
        for t in shown
    ]
    out.print_table("network tokens", columns, cells)
    return 0


async def _revoke(args: argparse.Namespace, settings: Settings) -> int:
    from bzzz.cli import log as cli_log
    from bzzz.domain import utcnow
    from bzzz.principal import LOCAL

    # The token must be known to this directory's store: it holds what the log applied.
    tokens = await _stored_tokens(settings)
    async with cli_log.joined(settings) as log:
        log.applied.append(tokens.on_applied)
        record = await _service(tokens, log).revoke_token(LOCAL, args.id)
    if args.json:
        sys.stdout.write(json.dumps(record.to_json(utcnow())) + "\n")
    else:
        sys.stdout.write(f"revoked {record.id} ({record.name}) on every node\n")
    return 0
